"""Hostile input against the newer surfaces (the bus's subscriptions, the calibration file, the outputs
of a replay), through the real binary. Each test is named after the behaviour it checks.
"""
import json, os, subprocess, time
from pathlib import Path

import pytest
from rosbags.rosbag2 import StoragePlugin

from test_bag_interop import make_messages, node, write_rosbags  # noqa: F401  (fixture)
from test_cli import recorded_simulation, run
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
  sim: {{type: simulator, duration: 6, realtime: true}}
  fusion: {{type: fusion, inputs: [sim]}}
  pub: {{type: publish, inputs: [fusion], bind: 'tcp://127.0.0.1:{port}'}}
""")
    p = subprocess.Popen([str(node), '--config', str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.5)
    clients = [zmtp_subscribe(port, b'x' * 10_000_000) for _ in range(4)]
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    for c in clients:
        c.close()
    assert p.returncode == 0, p.stderr.read()
    assert usage.ru_maxrss < 200_000, f'peak RSS {usage.ru_maxrss} kB'


def calibration_pipeline(tmp_path, file):
    config = tmp_path / 'cal.yaml'
    config.write_text(f"""
stages:
  sim: {{type: simulator, scenario: figure_eight, duration: 40, realtime: false, hard_iron_ut: [20, -10, 15]}}
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
