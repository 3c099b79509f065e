"""Hostile input against the newer surfaces (the bus's subscriptions, the calibration file, the outputs
of a replay), through the real binary. Each test is named after the behaviour it checks.
"""
import json, os, subprocess, time
from pathlib import Path

import pytest
from rosbags.rosbag2 import StoragePlugin

from test_bag_interop import make_messages, node, write_rosbags  # noqa: F401  (fixture)
from test_cli import ROOT, recorded_simulation, run
from test_pipeline_interop import free_port


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp('hostile') / 'input.mcap'
    write_rosbags(path.with_suffix(''), make_messages(n=400, seed=5), StoragePlugin.MCAP, zstd_chunks=True)
    return next(path.with_suffix('').glob('*.mcap'))


def zmtp_subscribe(port, prefix):
    """A raw ZMTP 3.0 SUB peer on 127.0.0.1:`port` that sends one subscription with `prefix` (pyzmq's own
    libzmq overflows its stack storing a prefix of megabytes, so the hostile client is written by hand).
    Returns the open socket."""
    import socket, struct
    s = socket.create_connection(('127.0.0.1', port))
    greeting = b'\xff' + b'\x00' * 8 + b'\x7f' + b'\x03\x00' + b'NULL'.ljust(20, b'\x00') + b'\x00' + b'\x00' * 31
    ready = b'\x05READY' + b'\x0bSocket-Type' + struct.pack('>I', 3) + b'SUB'
    body = b'\x01' + prefix
    try:
        s.sendall(greeting + bytes([0x04, len(ready)]) + ready + b'\x02' + struct.pack('>Q', len(body)) + body)
    except OSError:
        pass                                       # cut off while sending: what a limit does
    return s


def test_a_ten_megabyte_subscription_costs_no_memory(node, tmp_path):
    """A loopback client subscribing with a 10 MB prefix to a publish sink is disconnected by libzmq before
    the prefix is stored: the process stays near its usual size and the run ends as usual."""
    port = free_port()
    config = tmp_path / 'pub.yaml'
    config.write_text(f"""
stages:
  sim: {{type: simulator, duration_s: 6, realtime: true}}
  fusion: {{type: fusion, inputs: [sim]}}
  pub: {{type: publish, inputs: [fusion], bind: 'tcp://127.0.0.1:{port}'}}
""")
    p = subprocess.Popen([str(node), '--config', str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.5)
    clients = [zmtp_subscribe(port, b'x' * 10_000_000) for _ in range(4)]
    # The process's own peak (VmHWM, kB) until it ends. Not wait4's ru_maxrss: Linux carries the
    # high-water mark of the image before exec into it, so it would be this test process's size.
    peak = 0
    while p.poll() is None:
        try:
            status = Path(f'/proc/{p.pid}/status').read_text()
        except OSError:
            break
        peak = max([peak] + [int(line.split()[1]) for line in status.splitlines() if line.startswith('VmHWM:')])
        time.sleep(0.02)
    p.wait()
    for c in clients:
        c.close()
    assert p.returncode == 0, p.stderr.read()
    assert 0 < peak < 200_000, f'peak RSS {peak} kB'


def calibration_pipeline(tmp_path, file):
    config = tmp_path / 'cal.yaml'
    config.write_text(f"""
stages:
  sim: {{type: simulator, scenario: figure_eight, duration_s: 40, realtime: false, hard_iron_ut: [20, -10, 15]}}
  calibration: {{type: calibration, inputs: [sim], online: true, prompt: false, file: '{file}'}}
  fusion: {{type: fusion, inputs: [calibration]}}
  summary: {{type: summary, inputs: [fusion]}}
""")
    return config


def test_a_calibration_file_planted_as_a_symlink_is_never_written_through(node, tmp_path):
    """cal.json a symbolic link to another file: the file it names keeps its contents, the link stays, the
    summary says why nothing was saved, and the run reports the loss (exit 3)."""
    victim = tmp_path / 'victim.txt'
    victim.write_text('precious\n')
    link = tmp_path / 'cal.json'
    link.symlink_to(victim)
    r = run(node, '--config', calibration_pipeline(tmp_path, link), timeout=120)
    assert r.returncode == 3, r.stderr
    assert 'is a symbolic link' in r.stderr and 'save(s) of' in r.stderr, r.stderr
    assert victim.read_text() == 'precious\n' and link.is_symlink()


def test_a_hand_edited_calibration_file_that_is_refused_is_never_overwritten(node, tmp_path):
    """A calibration file someone broke by hand is refused at the start and kept as it is: the learned
    calibration is not saved over it, and the summary says so."""
    broken = tmp_path / 'cal.json'
    broken.write_text('{"version": 1, "hard_iron_ut": [1, 2\n')
    r = run(node, '--config', calibration_pipeline(tmp_path, broken), timeout=120)
    assert r.returncode == 3, r.stderr
    assert 'not overwritten' in r.stderr, r.stderr
    assert broken.read_text() == '{"version": 1, "hard_iron_ut": [1, 2\n'


@pytest.mark.parametrize('matrix, says', [
    ([-1, 0, 0, 0, 1, 0, 0, 0, 1], 'not positive definite'),
    ([1, 0.3, 0, 0, 1, 0, 0, 0, 1], 'not symmetric'),
    ([0, 1, 0, 1, 0, 0, 0, 0, 1], 'not positive definite'),
    ([4, 0, 0, 0, 1, 0, 0, 0, 1], 'stretches one axis'),
])
def test_an_impossible_soft_iron_matrix_in_a_calibration_file_is_refused(node, bag, tmp_path, matrix, says):
    """A reflection, a non-symmetric matrix, an axis swap and a 4:1 stretch are no sensor's soft iron:
    `--calibration` refuses the file with the reason (exit 2) instead of turning the compass."""
    f = tmp_path / 'cal.json'
    f.write_text(json.dumps({'version': 1, 'hard_iron_ut': [0, 0, 0], 'soft_iron': matrix, 'field_ut': 48,
                             'rms_ut': 0.5}))
    r = run(node, 'replay', bag, '--calibration', f, '--csv', tmp_path / 'out.csv')
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert not (tmp_path / 'out.csv').exists()


def test_no_output_replaces_the_recording_it_reads_or_another_output(node, bag, tmp_path):
    """`--csv` or `report -o` naming the input bag, or `calibrate -o` naming it, is a usage error even with
    --overwrite (the bag is untouched); one file for --csv and --accuracy-csv is refused before the run."""
    copy = tmp_path / 'v.mcap'
    copy.write_bytes(bag.read_bytes())
    before = copy.read_bytes()
    for args in (['replay', copy, '--csv', copy, '--overwrite'],
                 ['report', copy, '-o', copy, '--overwrite'],
                 ['calibrate', copy, '-o', copy, '--overwrite']):
        r = run(node, *args)
        assert r.returncode == 2 and 'this command reads' in r.stderr, (args, r.stderr)
    assert copy.read_bytes() == before
    out = tmp_path / 'both.csv'
    r = run(node, 'replay', copy, '--csv', out, '--accuracy-csv', out)
    assert r.returncode == 2 and 'each output needs its own file' in r.stderr and not out.exists(), r.stderr


def test_a_calibration_file_of_thirty_megabytes_is_refused_without_reading_it(node, bag, tmp_path):
    """A calibration is a few hundred bytes: a 30 MB file given as one is refused at once (exit 2)."""
    f = tmp_path / 'cal.json'
    f.write_text('{"version": 1, "pad": "' + 'x' * 30_000_000 + '"}')
    started = time.monotonic()
    r = run(node, 'replay', bag, '--calibration', f, '--csv', tmp_path / 'out.csv')
    assert r.returncode == 2 and 'bytes (at most 1048576)' in r.stderr, r.stderr
    assert time.monotonic() - started < 5


def test_an_extra_magnetometer_cannot_take_the_primarys_name(node, bag, tmp_path):
    """`--extra-magnetometer mag=...` would be named like the primary in logs, the summary and watch."""
    r = run(node, 'replay', bag, '--extra-magnetometer', 'mag=/imu/mag2', '--csv', tmp_path / 'out.csv')
    assert r.returncode == 2 and "the primary magnetometer's name" in r.stderr, r.stderr


def processes_gone(pids, within=15):
    def running(pid):                             # neither gone nor a zombie waiting for init to reap it
        try:
            return Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'
        except (FileNotFoundError, ProcessLookupError):
            return False
    deadline = time.monotonic() + within
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if running(p)]
    return alive == []


def test_a_supervisor_killed_with_sigkill_leaves_partial_files_not_complete_looking_ones(node, tmp_path):
    """The stages of a killed supervisor stop on their own; the csv sink keeps what it wrote as
    NAME.partial and never renames it onto NAME, which would look like the whole run."""
    config = tmp_path / 'csv.yaml'
    config.write_text(f"""
stages:
  sim: {{type: simulator, duration_s: 60, realtime: true}}
  fusion: {{type: fusion, inputs: [sim]}}
  csv: {{type: csv, inputs: [fusion], path: '{tmp_path / "out.csv"}'}}
""")
    p = subprocess.Popen([str(node), '--config', str(config), '--supervise'], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(5)
    children = subprocess.run(['pgrep', '-P', str(p.pid)], capture_output=True, text=True).stdout.split()
    assert len(children) == 3
    p.kill()
    p.wait()
    assert processes_gone(children)
    assert not (tmp_path / 'out.csv').exists()
    rows = (tmp_path / 'out.csv.partial').read_text().splitlines()
    assert 100 < len(rows) < 6000, len(rows)


def test_the_pipeline_benchmark_runs_round_after_round_and_leaves_no_process(node):
    """Each round's stage processes used to refuse the report the round before had written; the
    benchmark then hung with three orphaned stage processes waiting for their reader."""
    r = run(node, 'bench', 'pipeline', '--samples', '2000', '--rounds', '2', '--latency-runs', '0', timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'round 2:' in r.stdout and 'four processes (ipc): median' in r.stdout, r.stdout
    leftover = subprocess.run(['pgrep', '-f', 'gyrocompass-bench-'], capture_output=True, text=True).stdout.split()
    assert leftover == []


def bag_to_csv(tmp_path, bag, name, reader_timeout):
    """A two-stage pipeline file (a bag, a csv sink reading it) named `name` (its default ipc endpoints
    are NAME-bag, NAME-csv), with `reader_timeout_s`."""
    config = tmp_path / f'{name}.yaml'
    config.write_text(f"""
name: {name}
reader_timeout_s: {reader_timeout}
stages:
  bag: {{type: bag, path: '{bag}'}}
  csv: {{type: csv, inputs: [bag], path: '{tmp_path / "out.csv"}'}}
""")
    return config


def test_a_stage_whose_reader_never_comes_fails_naming_it_after_the_stated_time(node, bag, tmp_path):
    """`--stage bag` alone: it says which stage and endpoint it waits for, and after reader_timeout_s
    fails (exit 1) naming the reader that never connected."""
    config = bag_to_csv(tmp_path, bag, f'lonely-{os.getpid()}', 3)
    started = time.monotonic()
    r = run(node, '--config', config, '--stage', 'bag', timeout=60)
    assert r.returncode == 1, r.stderr
    assert "csv did not connect to ipc://" in r.stderr and 'within 3 s (top-level reader_timeout_s)' in r.stderr, \
        r.stderr
    assert 2.5 < time.monotonic() - started < 20
    config.write_text(config.read_text().replace('reader_timeout_s: 3', 'reader_timeout_s: 0'))
    r = run(node, '--config', config, '--check')
    assert r.returncode == 2 and "'reader_timeout_s' must be a number of seconds from 1 to 86400" in r.stderr


def test_a_stray_subscriber_neither_starts_nor_holds_a_stage_waiting_for_its_reader(node, bag, tmp_path):
    """A SUB socket on a stage's endpoint is not the stage that reads it: the stage keeps waiting for its
    reader (and sends the stray nothing), then fails naming the reader."""
    import zmq
    config = bag_to_csv(tmp_path, bag, f'stray-{os.getpid()}', 4)
    p = subprocess.Popen([str(node), '--config', str(config), '--stage', 'bag'], stderr=subprocess.PIPE, text=True)
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b'')
    directory = Path(os.environ.get('XDG_RUNTIME_DIR', '')) / 'gyrocompass' if os.environ.get(
        'XDG_RUNTIME_DIR', '').startswith('/') else Path(f'/tmp/gyrocompass-{os.getuid()}')
    endpoint = f'ipc://{directory}/stray-{os.getpid()}-bag'
    sub.connect(endpoint)
    got = sub.poll(3000)
    err = p.communicate(timeout=60)[1]
    sub.close(linger=0)
    ctx.term()
    assert got == 0, 'the stray subscriber was sent the stream'
    assert p.returncode == 1 and 'csv did not connect' in err, err


def test_a_second_run_cannot_take_the_endpoints_of_a_running_one(node, bag, tmp_path):
    """libzmq would bind an ipc path over the running stage's socket and the two runs would read each
    other's streams: the second is refused, naming the endpoint."""
    config = bag_to_csv(tmp_path, bag, f'taken-{os.getpid()}', 20)
    first = subprocess.Popen([str(node), '--config', str(config), '--stage', 'bag'], stderr=subprocess.PIPE,
                             text=True)
    time.sleep(1.5)
    r = run(node, '--config', config, '--stage', 'bag')
    first.terminate()
    first.wait(timeout=30)
    assert r.returncode == 1 and 'is in use by another process' in r.stderr, r.stderr


def test_two_supervised_runs_of_one_file_at_once_keep_to_themselves(node, bag, tmp_path):
    """Two `--supervise` runs of the shipped multiprocess replay, started together in two directories,
    each get endpoints of their own: both finish and both CSVs equal a run on its own."""
    config = ROOT / 'Pipelines' / 'replay-bag-multiprocess.yaml'
    one = tmp_path / 'one'
    one.mkdir()
    r = subprocess.run([str(node), '--config', str(config)], cwd=one, env={**os.environ, 'BAG': str(bag)},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    runs = []
    for name in ('a', 'b'):
        (tmp_path / name).mkdir()
        runs.append(subprocess.Popen([str(node), '--config', str(config), '--supervise'], cwd=tmp_path / name,
                                     env={**os.environ, 'BAG': str(bag)}, stderr=subprocess.PIPE, text=True))
    for p in runs:
        err = p.communicate(timeout=180)[1]
        assert p.returncode == 0, err
    expected = (one / 'replay.csv').read_text()
    assert (tmp_path / 'a' / 'replay.csv').read_text() == expected
    assert (tmp_path / 'b' / 'replay.csv').read_text() == expected


def test_a_directory_of_unrelated_recordings_is_refused_and_split_parts_are_read_in_order(node, tmp_path):
    """Two .mcap files with no metadata.yaml are two recordings, not one: refused, naming them. rosbag2's
    numbered parts of one recording (NAME_0, NAME_1, ... NAME_10) are read in their numbers' order."""
    from test_bag_interop import make_messages, write_rosbags
    parts = tmp_path / 'parts'
    parts.mkdir()
    sources = []
    for i in range(2):
        d = tmp_path / f'src{i}'
        write_rosbags(d, make_messages(n=100, seed=i), StoragePlugin.MCAP)
        sources.append(next(d.glob('*.mcap')))
    mixed = tmp_path / 'mixed'
    mixed.mkdir()
    (mixed / 'monday.mcap').write_bytes(sources[0].read_bytes())
    (mixed / 'tuesday.mcap').write_bytes(sources[1].read_bytes())
    r = run(node, 'replay', mixed, '--csv', tmp_path / 'mixed.csv')
    assert r.returncode != 0 and 'not the numbered parts of one recording' in r.stderr, r.stderr
    assert 'monday.mcap' in r.stderr and not (tmp_path / 'mixed.csv').exists()
    (mixed / 'monday.mcap').rename(mixed / 'run_0.mcap')
    (mixed / 'tuesday.mcap').rename(mixed / 'run_1.mcap')
    r = run(node, 'bag', 'info', mixed)
    assert r.returncode == 0, r.stderr


def test_keys_open_to_others_and_a_key_directory_others_can_write_are_refused(node, tmp_path):
    """A secret key others can read is no secret, and whoever can write the allowed-clients directory
    chooses who is admitted: both refused with the path and the fix. keygen refusing an existing secret
    key leaves no new public key behind."""
    keys = tmp_path / 'keys'
    (keys / 'allowed').mkdir(parents=True)
    for name in ('server', 'pipeline'):
        assert run(node, 'keygen', keys / name).returncode == 0
    (keys / 'lonely.key_secret').write_text('x\n')
    r = run(node, 'keygen', keys / 'lonely')
    assert r.returncode == 1 and 'exists' in r.stderr and not (keys / 'lonely.key').exists(), r.stderr
    config = tmp_path / 'secure.yaml'
    config.write_text(f"""
security: {{server_key: {keys}/server, client_key: {keys}/pipeline, allowed_clients: {keys}/allowed}}
stages:
  sim: {{type: simulator, duration_s: 1}}
  fusion: {{type: fusion, inputs: [sim]}}
  csv: {{type: csv, inputs: [fusion], path: /dev/null}}
""")
    assert run(node, '--config', config, '--check').returncode == 0
    os.chmod(keys / 'server.key_secret', 0o644)
    r = run(node, '--config', config, '--check')
    assert r.returncode == 2 and 'server.key_secret is open to others (mode 644)' in r.stderr, r.stderr
    os.chmod(keys / 'server.key_secret', 0o600)
    os.chmod(keys / 'allowed', 0o777)
    r = run(node, '--config', config, '--check')
    assert r.returncode == 2 and 'can be changed by others (mode 777' in r.stderr, r.stderr


def test_a_recording_that_exists_is_refused_before_anything_is_written_overwrite_or_not(node, tmp_path):
    """The bag simulation run twice: the refusal names the recording (not the truth file, whose
    --overwrite advice could not help), and with --overwrite nothing is written either: no truth
    replaced, no empty .partial left."""
    config = ROOT / 'Pipelines' / 'simulate-bag.yaml'
    r = subprocess.run([str(node), '--config', str(config), '--set', 'source.duration_s=5'], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    truth = (tmp_path / 'sim-truth.csv').read_bytes()
    for extra in ([], ['--overwrite']):
        r = subprocess.run([str(node), '--config', str(config), '--set', 'source.duration_s=5', *extra], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and 'sim.mcap exists' in r.stderr and 'never replaced' in r.stderr, r.stderr
        assert '--overwrite to allow' not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ['sim-truth.csv', 'sim.mcap']
    assert (tmp_path / 'sim-truth.csv').read_bytes() == truth
