"""The operator's view for real: `fusion-node watch` in a tmux terminal against a live pipeline, read with
capture-pane. The heading shown matches the published one, `z` makes it read 0, `q` exits 0 and gives the
terminal back; without a terminal it prints one line per change.
"""
import json, os, re, shutil, subprocess, time
from pathlib import Path

import pytest
import zmq

from test_bag_interop import node  # noqa: F401  (fixture)
from test_pipeline_interop import free_port

pytestmark = pytest.mark.skipif(shutil.which('tmux') is None, reason='tmux is not installed (tools/setup.sh installs it)')


@pytest.fixture
def live(node, tmp_path):
    """A real-time simulator at rest (heading 30, so the heading holds still) publishing on tcp."""
    endpoint = f'tcp://127.0.0.1:{free_port()}'
    config = tmp_path / 'live.yaml'
    config.write_text(f"""
stages:
  sim:
    type: simulator
    scenario: rest
    duration: 60
  fusion:
    type: fusion
    inputs: [sim]
  pub:
    type: publish
    inputs: [fusion]
    bind: {endpoint}
    topics: [heading]
    min_change_deg: 0
    latest_only: true
""")
    p = subprocess.Popen([str(node), '--config', str(config)], stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    yield endpoint
    p.terminate()
    p.wait(timeout=10)


def published_heading(endpoint):
    ctx = zmq.Context()
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.SUBSCRIBE, b'heading\0')
    s.connect(endpoint)
    deadline = time.time() + 10
    value = None
    while time.time() < deadline and value is None:
        if s.poll(500):
            topic, msgtype, enc, payload = s.recv().split(b'\0', 3)
            if msgtype == b'gyrocompass_msgs/msg/Heading':
                from rosbags.typesys import Stores, get_typestore, get_types_from_msg
                store = get_typestore(Stores.ROS2_HUMBLE)
                msg_file = Path(__file__).resolve().parents[2] / 'Sources/WireFormat/gyrocompass_msgs/msg/Heading.msg'
                store.register(get_types_from_msg(msg_file.read_text(), 'gyrocompass_msgs/msg/Heading'))
                value = store.deserialize_cdr(payload, 'gyrocompass_msgs/msg/Heading').magnetic_heading
    s.close()
    ctx.term()
    return value


def screen(session):
    return subprocess.run(['tmux', 'capture-pane', '-p', '-t', session], capture_output=True, text=True).stdout


def shown_heading(text):
    m = re.search(r'heading (\d+\.\d) deg', text)
    return float(m.group(1)) if m else None


def wait_for(session, predicate, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        text = screen(session)
        if predicate(text):
            return text
        time.sleep(0.2)
    return screen(session)


def test_watch_in_a_real_terminal(node, live, tmp_path):
    session = f'gc-watch-{os.getpid()}'
    done = tmp_path / 'exit'
    subprocess.run(['tmux', 'new-session', '-d', '-s', session, '-x', '120', '-y', '32',
                    f'"{node}" watch {live}; echo $? > {done}; sleep 30'], check=True)
    try:
        text = wait_for(session, lambda t: shown_heading(t) is not None and 'msg/s' in t)
        assert 'GyroCompass' in text and '95 % accuracy' in text and 'N' in text, text
        shown, published = shown_heading(text), published_heading(live)
        assert published is not None and abs((shown - published + 180) % 360 - 180) < 1.0, (shown, published, text)
        subprocess.run(['tmux', 'send-keys', '-t', session, 'z'], check=True)
        text = wait_for(session, lambda t: 'relative to the zero' in t)
        assert shown_heading(text) is not None and min(shown_heading(text), 360 - shown_heading(text)) < 0.5, text
        subprocess.run(['tmux', 'send-keys', '-t', session, 'Z'], check=True)
        text = wait_for(session, lambda t: 'relative to the zero' not in t and shown_heading(t) is not None)
        assert abs((shown_heading(text) - published + 180) % 360 - 180) < 1.0, text
        subprocess.run(['tmux', 'send-keys', '-t', session, 'q'], check=True)
        deadline = time.time() + 10
        while not done.exists() and time.time() < deadline:
            time.sleep(0.1)
        assert done.read_text().strip() == '0'
        after = screen(session)
        assert 'GyroCompass' not in after and 'q quit' not in after, after   # the terminal is given back
    finally:
        subprocess.run(['tmux', 'kill-session', '-t', session], capture_output=True)


def test_watch_without_a_terminal_prints_one_line_per_change(node, live):
    p = subprocess.Popen([str(node), 'watch', live], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    p.terminate()
    out, _ = p.communicate(timeout=10)
    lines = out.splitlines()
    assert any(l.startswith('heading ') and 'magnetic' in l for l in lines), out
    assert all(a != b for a, b in zip(lines, lines[1:]))     # a line per change, not per message
