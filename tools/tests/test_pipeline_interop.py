"""The pipeline's external contract, through the real fusion-node binary and real peers.

- A pyzmq subscriber receives every fused message of a replay (`--wait-for-subscribers`, nothing lost
  at start), filters by exact topic ("topic NUL"), and decodes the CDR payloads with `rosbags`, using
  the project's own gyrocompass_msgs/msg/Heading.msg; the JSON encoding parses as JSON.
- The same pipeline with every stage in its own process (started one by one, or by the supervisor)
  gives output identical to the one-process run, and every process exits 0.
- The supervisor restarts a stage killed with SIGKILL: a replay's output is unchanged whichever stage
  is killed; a live stream's sinks continue their files; SIGINT stops a live pipeline with exit 130 and a
  valid recorded bag; the lines source counts malformed lines and keeps going.
"""
import json, os, re, signal, socket, subprocess, threading, time
from pathlib import Path

import pytest
import zmq
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore, get_types_from_msg

from test_bag_interop import STORE, make_messages, node, write_rosbags  # noqa: F401  (fixture)
from test_hardening import secured_keys

ROOT = Path(__file__).resolve().parents[2]
HEADING_MSG = ROOT / 'Sources' / 'WireFormat' / 'gyrocompass_msgs' / 'msg' / 'Heading.msg'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp('bags') / 'input'
    write_rosbags(path, make_messages(n=1500, seed=11), StoragePlugin.MCAP, zstd_chunks=True)
    return path


def typestore_with_heading():
    store = get_typestore(Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg(HEADING_MSG.read_text(), 'gyrocompass_msgs/msg/Heading'))
    return store


@pytest.mark.parametrize('encoding', ['cdr', 'json'])
def test_pyzmq_subscriber_receives_and_decodes_everything(node, bag, encoding):
    port = free_port()
    endpoint = f'tcp://127.0.0.1:{port}'
    replay = subprocess.Popen([str(node), 'replay', str(bag), '--publish', endpoint, '--encoding', encoding,
                               '--wait-for-subscribers', '1', '--quiet'], stderr=subprocess.PIPE, text=True)
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.connect(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b'heading\0')
    sub.setsockopt(zmq.SUBSCRIBE, b'imu/data\0')
    store = typestore_with_heading()
    counts = {'heading': 0, 'imu/data': 0}
    last_stamp = -1
    deadline = time.time() + 60
    while sum(counts.values()) < 3000 and time.time() < deadline:
        if not sub.poll(1000):
            continue
        frame = sub.recv()
        topic, msgtype, enc, payload = frame.split(b'\0', 3)
        topic, msgtype = topic.decode(), msgtype.decode()
        assert enc.decode() == encoding
        counts[topic] += 1
        if encoding == 'cdr':
            msg = store.deserialize_cdr(payload, msgtype)
            stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        else:
            msg = json.loads(payload)
            stamp = msg['header']['stamp']['sec'] * 10**9 + msg['header']['stamp']['nanosec']
        if topic == 'heading':
            heading = msg.magnetic_heading if encoding == 'cdr' else msg['magnetic_heading']
            assert 0 <= heading < 360
            assert stamp > last_stamp
            last_stamp = stamp
        else:
            assert msgtype == 'sensor_msgs/msg/Imu'
    assert replay.wait(timeout=60) == 0, replay.stderr.read()
    assert counts == {'heading': 1500, 'imu/data': 1500}
    sub.close()
    ctx.term()


def run_pipeline(node, config, env, *extra, timeout=120):
    return subprocess.run([str(node), '--config', str(config), *extra], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize('compression', ['auto', 'lz4'])
def test_one_process_and_one_process_per_stage_agree(node, bag, tmp_path, compression):
    config = ROOT / 'Pipelines' / 'replay-bag-multiprocess.yaml'
    single = run_pipeline(node, config, {'BAG': str(bag), 'CSV': str(tmp_path / 'one.csv'), 'RECORD': str(tmp_path / 'one'),
                                         })
    assert single.returncode == 0, single.stderr

    # lz4: every batch between the stages compressed (auto leaves ipc plain).
    env = {'BAG': str(bag), 'CSV': str(tmp_path / 'many.csv'), 'RECORD': str(tmp_path / 'many'),
           'COMPRESSION': compression}
    stages = subprocess.run([str(node), '--config', str(config), '--list-stages'], env={**os.environ, **env},
                            capture_output=True, text=True, check=True).stdout.split()
    assert stages == ['bag', 'calibration', 'fusion', 'csv', 'record']
    # Start the consumers first and the source last: nothing may be lost either way.
    procs = [subprocess.Popen([str(node), '--config', str(config), '--stage', s], env={**os.environ, **env},
                              stderr=subprocess.PIPE, text=True) for s in reversed(stages)]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    assert (tmp_path / 'one.csv').read_text() == (tmp_path / 'many.csv').read_text()
    assert len((tmp_path / 'one.csv').read_text().splitlines()) == 1501

    env['CSV'] = str(tmp_path / 'supervised.csv')
    env['RECORD'] = str(tmp_path / 'supervised')
    supervised = run_pipeline(node, config, env, '--supervise')
    assert supervised.returncode == 0, supervised.stderr
    assert (tmp_path / 'supervised.csv').read_text() == (tmp_path / 'one.csv').read_text()
    with AnyReader([tmp_path / 'supervised']) as reader:
        assert sum(c.msgcount for c in reader.connections) == 3000


def test_a_pass_through_stage_between_compressed_links_forwards_every_batch(node, bag, tmp_path):
    """An identity calibration passes messages on unread; between lz4 links they arrive compressed, and
    forwarding one as it came once aborted the stage ("not a plain numbered batch")."""
    config = tmp_path / 'pass-through.yaml'
    text = (ROOT / 'Pipelines' / 'replay-bag-multiprocess.yaml').read_text()
    config.write_text(text.replace('    online: true\n    prompt: false\n', ''))
    assert 'online' not in config.read_text()
    env = {'BAG': str(bag), 'CSV': str(tmp_path / 'many.csv'), 'RECORD': str(tmp_path / 'many'),
           'COMPRESSION': 'lz4'}
    stages = ['bag', 'calibration', 'fusion', 'csv', 'record']
    procs = [subprocess.Popen([str(node), '--config', str(config), '--stage', s], env={**os.environ, **env},
                              stderr=subprocess.PIPE, text=True) for s in reversed(stages)]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    one = tmp_path / 'one.csv'
    r = subprocess.run([str(node), 'replay', str(bag), '--csv', str(one), '--quiet', '--no-calibration'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / 'many.csv').read_bytes() == one.read_bytes()


def kill_under_supervisor(node, config, stage, kills, env=None, stdin=None, feed=None):
    """Runs `config` under --supervise and kills `stage` with SIGKILL at each of `kills` (seconds
    from the start); `feed`, if given, writes the source's stdin meanwhile. Returns the supervisor's
    exit code and stderr."""
    sup = subprocess.Popen([str(node), '--config', str(config), '--supervise'], env={**os.environ, **(env or {})},
                           stdin=stdin, stderr=subprocess.PIPE, text=True)
    if feed:
        threading.Thread(target=feed, args=(sup.stdin,), daemon=True).start()
    started = time.monotonic()
    for at in kills:
        time.sleep(max(0, at - (time.monotonic() - started)))
        pids = []
        for _ in range(50):  # a restarted stage may not be back yet
            pids = subprocess.run(['pgrep', '-f', f'{config} --stage {stage}'], capture_output=True, text=True).stdout.split()
            if pids:
                break
            time.sleep(0.1)
        assert pids, f'{stage} is not running {at} s in'
        os.kill(int(pids[0]), signal.SIGKILL)
    code = sup.wait(timeout=120)
    return code, sup.stderr.read()


def recorded(path):
    with AnyReader([path]) as reader:
        return [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages()]


@pytest.mark.parametrize('stage,compression', [('bag', 'auto'), ('calibration', 'auto'), ('fusion', 'auto'),
                                               ('csv', 'auto'), ('record', 'auto'), ('calibration', 'lz4')])
def test_a_stage_killed_three_times_under_supervise_changes_nothing(node, bag, tmp_path, stage, compression):
    """A bag replay is reproducible: a restarted source plays again, a restarted stage recomputes
    its input from the bag up to where the live stream resumes, and every reader drops by sequence
    number what it already has. So the CSV and the recording equal the uninterrupted run's byte
    for byte, whichever stage is killed, however often, and the supervisor exits 0. With lz4 the
    frames sent again are dropped by their numbers before they are inflated."""
    config = ROOT / 'Pipelines' / 'replay-bag-multiprocess.yaml'
    env = {'BAG': str(bag), 'COMPRESSION': compression}
    one = run_pipeline(node, config, {**env, 'CSV': str(tmp_path / 'one.csv'), 'RECORD': str(tmp_path / 'one')})
    assert one.returncode == 0, one.stderr
    # The bag at twice real time: 1500 samples at 100 Hz last 7.5 s.
    (tmp_path / 'paced.yaml').write_text(config.read_text().replace('    path: ${BAG}', '    path: ${BAG}\n    rate: 2'))
    paced = tmp_path / 'paced.yaml'
    env.update(CSV=str(tmp_path / 'killed.csv'), RECORD=str(tmp_path / 'killed'))
    code, err = kill_under_supervisor(node, paced, stage, kills=[1.0, 2.5, 4.0], env=env)
    assert err.count(f'{stage} killed by signal 9; restarting') == 3, err
    assert code == 0 and 'nothing lost' in err, (code, err)
    if stage != 'bag':
        assert 'restarted: recomputed' in err, err
    assert (tmp_path / 'killed.csv').read_bytes() == (tmp_path / 'one.csv').read_bytes()
    assert recorded(tmp_path / 'killed') == recorded(tmp_path / 'one')


def test_a_killed_stage_of_a_simulated_run_is_rebuilt_exactly(node, tmp_path):
    """The seeded simulator is reproducible too, paced in real time: the restarted fusion stage
    recomputes the calibrated stream and the CSV equals the one-process run's."""
    config = tmp_path / 'sim.yaml'
    config.write_text(f"""
stages:
  sim:
    type: simulator
    duration_s: 4
    rate_hz: 200
    endpoint: ipc://{tmp_path}/sim
  calibration:
    type: calibration
    inputs: [sim]
    online: true
    endpoint: ipc://{tmp_path}/calibration
  fusion:
    type: fusion
    inputs: [calibration]
    endpoint: ipc://{tmp_path}/fusion
  out:
    type: csv
    inputs: [fusion]
    path: ${{OUT}}
    accuracy_path: ${{OUT}}.accuracy
""")
    one = run_pipeline(node, config, {'OUT': str(tmp_path / 'one.csv')})
    assert one.returncode == 0, one.stderr
    code, err = kill_under_supervisor(node, config, 'fusion', kills=[1.5, 2.5], env={'OUT': str(tmp_path / 'killed.csv')})
    assert code == 0 and 'nothing lost' in err and 'calibration: paused' in err, (code, err)
    for suffix in ('', '.accuracy'):
        assert (tmp_path / f'killed.csv{suffix}').read_bytes() == (tmp_path / f'one.csv{suffix}').read_bytes()


def live_pipeline(tmp_path, sink, top=''):
    """lines (stdin, fed at 100 Hz for 5 s) -> fusion -> `sink` (the YAML of a stage named `out`):
    a live stream, which no restart can recompute; `top` adds top-level keys."""
    config = tmp_path / 'live.yaml'
    config.write_text(f"""{top}
stages:
  serial:
    type: lines
    endpoint: ipc://{tmp_path}/serial
  fusion:
    type: fusion
    inputs: [serial]
    endpoint: ipc://{tmp_path}/fusion
  out:
    inputs: [fusion]
{sink}""")

    def feed(stdin):
        for k in range(500):
            t = 1_700_000_000 + k * 0.01
            stdin.write(f'{t:.2f},0,0,{0.1 + 0.05 * (k % 7)},0,0,9.81,1.9e-05,0,-4.4e-05\n')
            stdin.flush()
            time.sleep(0.01)
        stdin.close()
    return config, feed


def csv_sink(tmp_path, name):
    return f"    type: csv\n    path: {tmp_path}/{name}.csv\n    accuracy_path: {tmp_path}/{name}.acc.csv\n"


@pytest.mark.parametrize('secured', [False, True])
def test_a_restarted_csv_sink_of_a_live_stream_loses_nothing(node, tmp_path, secured):
    """Live, the CSV stage's replacement reads again what fusion still holds (its retransmit buffer,
    5 s by default), drops the rows its files already have and appends the rest: both files equal an
    uninterrupted run's byte for byte, killed twice, and the supervisor exits 0. Secured, the
    retransmit endpoint is a CURVE server too, and the batches travel LZ4-packed."""
    top = secured_keys(node, tmp_path)[2] if secured else ''
    config, feed = live_pipeline(tmp_path, csv_sink(tmp_path, 'one'), top=top)
    code, err = kill_under_supervisor(node, config, 'out', kills=[], stdin=subprocess.PIPE, feed=feed)
    assert code == 0, err
    config, feed = live_pipeline(tmp_path, csv_sink(tmp_path, 'killed'), top=top)
    code, err = kill_under_supervisor(node, config, 'out', kills=[1.5, 3.0], stdin=subprocess.PIPE, feed=feed)
    assert 'out killed by signal 9; restarting' in err and code == 0 and 'nothing lost' in err, (code, err)
    assert 'after its last complete row' in err and "frame(s) 'fusion' still held" in err, err
    assert 'the stream reached back to the last row: nothing missing' in err, err
    for suffix in ('.csv', '.acc.csv'):
        one, killed = (tmp_path / f'one{suffix}').read_bytes(), (tmp_path / f'killed{suffix}').read_bytes()
        assert killed == one and one.count(b'\n') == 501, (suffix, len(one), len(killed))


def test_a_restart_slower_than_the_retransmit_buffer_is_reported_as_loss(node, tmp_path):
    """With a buffer of 0.05 s and a replacement that takes longer to start, the replacement finds no
    overlap with its last row: it says rows may be lost, and the supervisor exits 3; with
    retransmission off, what the killed process held is lost (exit 3) and the files stay well formed."""
    for top, expect in (('retransmit: {seconds: 0.05}', 'rows in between may be lost'),
                        ('retransmit: {seconds: 0}', 'what was in flight inside a killed out process is lost')):
        for name in ('out.csv', 'out.acc.csv'):  # the first round's files: outputs are never replaced unasked
            (tmp_path / name).unlink(missing_ok=True)
        config, feed = live_pipeline(tmp_path, csv_sink(tmp_path, 'out'), top=top)
        code, err = kill_under_supervisor(node, config, 'out', kills=[2.5], stdin=subprocess.PIPE, feed=feed)
        assert 'out killed by signal 9; restarting' in err and code == 3 and expect in err, (top, code, err)
        for name, columns in (('out.csv', 5), ('out.acc.csv', 4)):
            lines = (tmp_path / name).read_text().splitlines()
            assert lines[0].startswith('t,') and not any(line.startswith('t,') for line in lines[1:]), name
            rows = [line.split(',') for line in lines[1:]]
            assert all(len(r) == columns for r in rows), name
            stamps = [float(r[0]) for r in rows]
            assert all(b > a for a, b in zip(stamps, stamps[1:])), name
            assert len(stamps) >= 400 and stamps[0] < 1_700_000_000.1 and stamps[-1] > 1_700_000_004.9, (name, len(stamps))


def test_a_restarted_recorder_of_a_live_stream_records_a_new_split_and_loses_nothing(node, tmp_path):
    """Live, the recorder's replacement records into run_1.mcap, from what fusion still holds, only
    what follows the killed split's last message per topic. The killed part ends without its
    summary and replays with --salvage; together the splits hold every heading of an uninterrupted
    run once, in order, and the supervisor exits 0."""
    config, feed = live_pipeline(tmp_path, f"    type: record\n    path: {tmp_path}/one.mcap\n    topics: [heading]\n")
    code, err = kill_under_supervisor(node, config, 'out', kills=[], stdin=subprocess.PIPE, feed=feed)
    assert code == 0, err
    config, feed = live_pipeline(tmp_path, f"    type: record\n    path: {tmp_path}/run.mcap\n    topics: [heading]\n")
    code, err = kill_under_supervisor(node, config, 'out', kills=[1.5, 3.0], stdin=subprocess.PIPE, feed=feed)
    assert code == 0 and f'recording into {tmp_path}/run_2.mcap' in err and 'nothing lost' in err, (code, err)
    assert 'run_1.mcap, topic heading:' in err and 'the stream reached back to the last message: nothing missing' in err, err

    def headings(path, *extra):
        r = subprocess.run([str(node), 'bag', 'echo', str(path), '--topic', '/heading', *extra],
                           capture_output=True, text=True)
        return r.returncode, [line for line in r.stdout.splitlines() if line.strip()], r.stderr

    rc, whole, e = headings(tmp_path / 'one.mcap')
    assert rc == 0 and len(whole) == 500, e
    rc, last, e = headings(tmp_path / 'run_2.mcap')
    assert rc == 0 and len(last) > 50, e                      # the last split is complete and valid
    parts = []
    for name in ('run.mcap', 'run_1.mcap'):                   # the killed parts, read past their missing end
        rc, part, e = headings(tmp_path / name, '--salvage')
        assert len(part) > 50, (name, e)
        parts += part
    assert parts + last == whole


def test_sigint_stops_cleanly_and_the_recording_is_valid(node, tmp_path):
    config = tmp_path / 'rec.yaml'
    config.write_text(f"""
stages:
  sim:
    type: simulator
  fusion:
    type: fusion
    inputs: [sim]
  rec:
    type: record
    inputs: [fusion]
    path: {tmp_path}/bag
  out:
    type: stdout
    inputs: [fusion]
""")
    p = subprocess.Popen([str(node), '--config', str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err          # interrupted before the input ended (documented exit code)
    assert 'heading=' in out
    with AnyReader([tmp_path / 'bag']) as reader:
        n = sum(1 for _ in reader.messages())
    assert n > 100


def test_lines_source_counts_malformed_lines(node, tmp_path):
    lines = []
    for k in range(300):
        t = 1000 + k * 0.01
        lines.append(f'{t},0,0,0.1,0,0,9.81,0,1.95e-05,-4.39e-05')
        if k == 50:
            lines.append('this is not a sample')
        if k == 60:
            lines.append('$GCIMU,1,2,3*00')
    body = f'1003.5,0,0,0.1,0,0,9.81,0,1.95e-05,-4.39e-05'
    checksum = 0
    for ch in ('GCIMU,' + body).encode():
        checksum ^= ch
    lines.append(f'$GCIMU,{body}*{checksum:02X}')
    p = subprocess.run([str(node), '--config', str(ROOT / 'Pipelines' / 'live-lines.yaml')], input='\n'.join(lines) + '\n',
                       env={**os.environ, 'PUBLISH': f'tcp://127.0.0.1:{free_port()}'}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr       # finished, with the malformed lines reported (documented exit code)
    outputs = [json.loads(l) for l in p.stdout.splitlines()]
    assert len(outputs) == 301 and all(o['topic'] == 'heading' for o in outputs)
    assert 'line 52' in p.stderr and 'checksum' in p.stderr and '2 malformed line(s)' in p.stderr


def test_closed_stdout_stops_the_pipeline_cleanly(node):
    """`fusion-node | head -2`: the console goes away, the pipeline stops with status 0, no crash."""
    p = subprocess.Popen([str(node), '--duration', '5'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = [p.stdout.readline() for _ in range(2)]
    p.stdout.close()
    code = p.wait(timeout=30)
    err = p.stderr.read().decode()
    assert all(line.startswith(b't=') for line in first)
    assert code == 0 and 'crash' not in err.lower(), err
