"""The operator's view for real: `fusion-node watch` in a tmux terminal against a live pipeline, read with
capture-pane. The heading shown matches the published one, `z` makes it read 0, `q` exits 0 and gives the
terminal back; without a terminal it prints one line per change.
"""
import json, math, os, re, shutil, subprocess, time
from pathlib import Path

import pytest
import zmq

from test_bag_interop import node  # noqa: F401  (fixture)
from test_pipeline_interop import free_port

ROOT = Path(__file__).resolve().parents[2]

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
    duration_s: 60
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


def turn_then_stop_lines(turn_seconds=4.0, still_seconds=4.0, rate_deg_s=30.0):
    """Sample lines (t,gx,gy,gz,ax,ay,az,mx,my,mz) of a level device turning counter-clockwise at
    rate_deg_s, then standing still: the magnetometer turns with it (horizontal 20 uT, 40 uT down)."""
    lines, yaw = [], 0.0
    for i in range(int((turn_seconds + still_seconds) * 100)):
        t = i * 0.01
        rate = math.radians(rate_deg_s) if t < turn_seconds else 0.0
        yaw += rate * 0.01
        mx, my = 2e-5 * math.sin(yaw), 2e-5 * math.cos(yaw)
        lines.append(f'{t:.2f},0,0,{rate:.6f},0,0,9.81,{mx:.4e},{my:.4e},-4e-5')
    return lines


def test_watch_rate_of_turn_is_the_filters_and_stops_with_the_device(node):
    """A device that turns, then stands still, fed in real time through Pipelines/live-lines.yaml (headings
    published only after a 1-degree change): the rate shown while turning is the turn, and once still it
    reads 0, though no heading arrives to say so. At the end of the stream watch says so and exits 0."""
    endpoint = f'tcp://127.0.0.1:{free_port()}'
    pipeline = subprocess.Popen([str(node), '--config', str(ROOT / 'Pipelines' / 'live-lines.yaml')],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                text=True, env={**os.environ, 'PUBLISH': endpoint})
    watch = subprocess.Popen([str(node), 'watch', '--plain', endpoint], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        start = time.monotonic()
        for i, line in enumerate(turn_then_stop_lines()):
            delay = start + i * 0.01 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pipeline.stdin.write(line + '\n')
            pipeline.stdin.flush()
        time.sleep(1.0)          # still: imu/data keeps coming, headings do not
        pipeline.stdin.close()
        out, err = watch.communicate(timeout=30)
    finally:
        pipeline.kill() if pipeline.poll() is None else None
        watch.kill() if watch.poll() is None else None
    assert watch.returncode == 0, err
    rates = [int(m.group(1)) for m in re.finditer(r'turning (-?\d+) deg/s', out)]
    assert rates, out
    # Counter-clockwise is a falling heading: -30 deg/s while turning (the filter's gyro, bias-corrected).
    assert any(abs(r + 30) <= 2 for r in rates), rates
    assert rates[-1] == 0, out[-2000:]
    assert 'ENDED: the publisher closed the stream' in out.splitlines()[-1], out[-500:]


def test_watch_names_what_it_waits_for_and_what_it_cannot_read_in_80_columns(node, tmp_path):
    """80x24: a JSON publisher is named as such (watch reads CDR) in whole words, wrapped, never cut; while
    nothing arrives the endpoint is named; q quits."""
    endpoint = f'tcp://127.0.0.1:{free_port()}'
    session = f'gc-watch80-{os.getpid()}'
    done = tmp_path / 'exit'
    subprocess.run(['tmux', 'new-session', '-d', '-s', session, '-x', '80', '-y', '24',
                    f'"{node}" watch {endpoint}; echo $? > {done}; sleep 30'], check=True)
    config = tmp_path / 'json.yaml'
    config.write_text(f"""
stages:
  sim: {{type: simulator, scenario: rest, duration_s: 30}}
  fusion: {{type: fusion, inputs: [sim]}}
  pub: {{type: publish, inputs: [fusion], bind: '{endpoint}', topics: [heading], encoding: json, min_change_deg: 0}}
""")
    pipeline = None
    try:
        text = wait_for(session, lambda t: 'waiting for' in t)
        assert f'waiting for {endpoint}' in text, text
        pipeline = subprocess.Popen([str(node), '--config', str(config)], stderr=subprocess.DEVNULL)
        text = wait_for(session, lambda t: 'sends json' in t)
        right = [line[40:].strip() for line in text.splitlines() if len(line) > 40]
        joined = ' '.join(part for part in right if part)
        assert 'the publisher sends json; watch reads cdr (set encoding: cdr on its publish stage)' in joined, text
        for line in text.splitlines():
            assert len(line) <= 80
        subprocess.run(['tmux', 'send-keys', '-t', session, 'q'], check=True)
        deadline = time.time() + 10
        while not done.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert done.read_text().strip() == '0'
    finally:
        subprocess.run(['tmux', 'kill-session', '-t', session], capture_output=True)
        if pipeline:
            pipeline.terminate()
            pipeline.wait(timeout=10)


def test_watch_says_which_magnetometers_steer(node, tmp_path):
    """Two magnetometers, a magnet arriving at the primary (the simulator's magnet_ut, fading in from 4 s):
    watch --plain, subscribed to a live publisher of heading and every magnetometer's interference status,
    first names both in use, then the primary left out and the mast's in use, and does not claim the
    heading is held on the gyro while the mast steers."""
    endpoint = f'tcp://127.0.0.1:{free_port()}'
    config = tmp_path / 'two.yaml'
    config.write_text(f"""
stages:
  sim: {{type: simulator, scenario: figure_eight, duration_s: 16, extra_magnetometers: [mast],
         magnet_ut: [8, 4, 0], magnet_start_s: 4, magnet_duration_s: 30}}
  fusion: {{type: fusion, inputs: [sim], status_period_s: 0.5}}
  pub: {{type: publish, inputs: [fusion], bind: {endpoint}, topics: [heading, interference/status, interference/status/mast],
         min_change_deg: 0}}
""")
    pipeline = subprocess.Popen([str(node), '--config', str(config)], stderr=subprocess.PIPE, text=True)
    watch = subprocess.Popen([str(node), 'watch', '--plain', endpoint], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        _, perr = pipeline.communicate(timeout=60)
        out, err = watch.communicate(timeout=30)
    finally:
        pipeline.kill() if pipeline.poll() is None else None
        watch.kill() if watch.poll() is None else None
    assert pipeline.returncode == 0, perr
    assert 'magnetometer mag outvoted' in perr or 'magnetometers: mag' in perr, perr
    lines = out.splitlines()
    both = [i for i, l in enumerate(lines) if 'magnetometers in use: mag, mast' in l]
    mast_only = [i for i, l in enumerate(lines) if 'magnetometers in use: mast; left out (disturbed or outvoted): mag' in l]
    assert both and mast_only, out[-3000:]
    assert both[0] < mast_only[0], out[-3000:]
    assert not any('holding the heading on the gyro' in lines[i] for i in mast_only), out[-3000:]


def test_watch_frozen_is_not_stale_and_ends_when_its_terminal_closes(node, live):
    """Space freezes the view as it was: FROZEN shows, STALE and 0 msg/s do not. Closing the terminal
    (tmux kill-session sends SIGHUP) ends the watch instead of leaving it spinning."""
    session = f'gc-freeze-{os.getpid()}'
    subprocess.run(['tmux', 'new-session', '-d', '-s', session, '-x', '120', '-y', '32', f'"{node}" watch {live}'],
                   check=True)
    try:
        wait_for(session, lambda t: shown_heading(t) is not None and 'msg/s' in t)
        subprocess.run(['tmux', 'send-keys', '-t', session, ' '], check=True)
        text = wait_for(session, lambda t: 'FROZEN' in t)
        time.sleep(2.5)                           # longer than the 1 s after which a stream is stale
        text = screen(session)
        assert 'FROZEN' in text and 'STALE' not in text and ' 0 msg/s' not in text, text
        pids = subprocess.run(['pgrep', '-f', f'{node} watch {live}'], capture_output=True,
                              text=True).stdout.split()
        assert pids, 'the watch is not running'
    finally:
        subprocess.run(['tmux', 'kill-session', '-t', session], capture_output=True)
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists(f'/proc/{p}') for p in pids):
        time.sleep(0.2)
    assert not any(os.path.exists(f'/proc/{p}') for p in pids), 'the watch outlived its terminal'


def test_the_watch_ends_with_its_stream_and_leaves_the_last_line(node, tmp_path):
    """`fusion-node --watch --duration 3` in a terminal: when the built-in run ends, the view stays a
    moment, then ends (exit 0) and leaves the last heading line on the terminal."""
    session = f'gc-ends-{os.getpid()}'
    marker = tmp_path / 'rc'
    subprocess.run(['tmux', 'new-session', '-d', '-s', session, '-x', '120', '-y', '32',
                    f'"{node}" --watch --duration 3; echo $? > {marker}; sleep 30'], check=True)
    try:
        deadline = time.time() + 40
        while time.time() < deadline and not marker.exists():
            time.sleep(0.2)
        assert marker.exists(), screen(session)
        assert marker.read_text().strip() == '0'
        assert re.search(r'heading \d+\.\d', screen(session)), screen(session)
    finally:
        subprocess.run(['tmux', 'kill-session', '-t', session], capture_output=True)
