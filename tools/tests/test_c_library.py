"""libgyrocompass from C: the example in tools/examples/heading_from_samples.c, compiled against the
header and the shared library, fed the samples of a recording, gives the estimates `fusion-node replay`
writes for the same recording (without calibration, and with the calibration learned online): every quaternion bit for bit, every heading and bound
to the CSV's four decimals, every flag. Also with the magnetometer at its own rate and times (25 Hz,
3 ms after the IMU samples), with the smoother, and the errors a C caller can meet.
"""
import csv, math, subprocess, sys
from pathlib import Path

import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from test_bag_interop import node  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / 'tools'))
import golden_replays  # noqa: E402

HEADER_DIR = ROOT / 'Sources' / 'CGyroCompass' / 'include'
FLAG_NAMES = {1: 'initialising', 2: 'at_rest', 4: 'acceleration_rejected', 8: 'magnetometer_rejected',
              16: 'gyro_only', 32: 'magnetic_strength', 64: 'magnetic_dip', 128: 'magnetic_gyro_inconsistent',
              256: 'magnetic_reference_changed', 512: 'filter_reset', 8192: 'magnetometer_uncalibrated',
              16384: 'gnss_aided', 32768: 'compass_gnss_disagree'}


@pytest.fixture(scope='module')
def library():
    subprocess.run(['swift', 'build', '--product', 'gyrocompass'], cwd=ROOT, check=True, capture_output=True)
    bin_path = subprocess.run(['swift', 'build', '--show-bin-path'], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout.strip()
    return Path(bin_path)


@pytest.fixture(scope='module')
def example(library, tmp_path_factory):
    out = tmp_path_factory.mktemp('c') / 'heading_from_samples'
    subprocess.run(['cc', '-std=c11', '-Wall', '-Werror', '-pedantic', str(ROOT / 'tools' / 'examples' /
                    'heading_from_samples.c'), f'-I{HEADER_DIR}', f'-L{library}', '-lgyrocompass',
                    f'-Wl,-rpath,{library}', '-o', str(out)], check=True)
    return out


@pytest.fixture(scope='module')
def recordings(node, tmp_path_factory):
    """The golden 'hand' recording (hard iron, 20 s at 100 Hz), and the same with its magnetometer at
    25 Hz, each reading 3 ms after its IMU sample."""
    d = tmp_path_factory.mktemp('rec')
    same = golden_replays.record(node, 'hand', d)
    slow = d / 'slow-mag'
    store = get_typestore(Stores.ROS2_HUMBLE)
    with AnyReader([same]) as reader, Writer(slow, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {}
        k = 0
        for conn, t, raw in reader.messages():
            if conn.topic not in conns:
                conns[conn.topic] = writer.add_connection(conn.topic, conn.msgtype, typestore=store)
            if conn.topic == '/imu/mag':
                k += 1
                if k % 4:
                    continue
                msg = reader.deserialize(raw, conn.msgtype)
                ns = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec + 3_000_000
                msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 10**9, ns % 10**9
                raw = store.serialize_cdr(msg, conn.msgtype)
                t = ns
            writer.write(conns[conn.topic], t, raw)
    return {'same-rate': same, 'slow-mag': slow}


def sample_lines(bag):
    """The example's input: IMU samples and magnetometer readings (microtesla) in time order, a reading
    before the IMU sample of the same time; times as the fusion stage computes them from the stamps."""
    rows = []
    with AnyReader([Path(bag)]) as reader:
        for conn, _, raw in reader.messages():
            m = reader.deserialize(raw, conn.msgtype)
            t = m.header.stamp.sec + m.header.stamp.nanosec * 1e-9
            if conn.topic == '/imu/data_raw':
                w, a = m.angular_velocity, m.linear_acceleration
                rows.append((t, 1, f'i,{t!r},{w.x!r},{w.y!r},{w.z!r},{a.x!r},{a.y!r},{a.z!r}'))
            elif conn.topic == '/imu/mag':
                f = m.magnetic_field
                rows.append((t, 0, f'm,{t!r},{f.x * 1e6!r},{f.y * 1e6!r},{f.z * 1e6!r}'))
    rows.sort(key=lambda r: (r[0], r[1]))
    return '\n'.join(r[2] for r in rows) + '\n'


def replay_rows(node, bag, tmp_path, options):
    q, acc = tmp_path / 'q.csv', tmp_path / 'acc.csv'
    r = subprocess.run([str(node), 'replay', str(bag), '--csv', str(q), '--accuracy-csv', str(acc), '--quiet',
                        *options], capture_output=True, text=True)
    assert r.returncode in (0, 4), r.stderr      # 4: a cause of wrong output named (iron nobody removes)
    with open(q) as fq, open(acc) as fa:
        return list(zip(list(csv.DictReader(fq)), list(csv.DictReader(fa))))


def names(flags):
    return '|'.join(n for bit, n in FLAG_NAMES.items() if flags & bit)


@pytest.mark.parametrize('case,options,settings', [
    ('same-rate', ['--no-calibration'], ''),
    ('slow-mag', ['--no-calibration'], ''),
    ('same-rate', ['--no-calibration', '--filter', 'complementary'], 'filter: complementary'),
    ('same-rate', ['--no-calibration', '--smooth'], 'smooth: true'),
    ('same-rate', [], 'online'),          # the default graph: the calibration learned online
])
def test_the_c_example_gives_what_replay_gives(node, example, recordings, tmp_path, case, options, settings):
    bag = recordings[case]
    expected = replay_rows(node, bag, tmp_path, options)
    arguments = ['', 'online'] if settings == 'online' else [settings]
    r = subprocess.run([str(example), *arguments], input=sample_lines(bag), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    got = [line.split(',') for line in r.stdout.splitlines()]
    assert len(got) == len(expected) > 1000
    for row, (q, a) in zip(got, expected):
        t, qw, qx, qy, qz, heading, bound, flags = row
        assert f'{float(t):.9f}' == q['t'] == a['t']
        assert [float(v) for v in (qw, qx, qy, qz)] == [float(q[k]) for k in ('qw', 'qx', 'qy', 'qz')], q['t']
        for mine, theirs in ((float(heading), a['heading_deg']), (float(bound), a['accuracy_deg'])):
            if theirs == '':
                assert math.isnan(mine), q['t']
            else:
                assert abs(mine - float(theirs)) <= 0.5e-4 + 1e-9, q['t']
        assert names(int(flags)) == a['flags'], q['t']
    assert 'samples' in r.stderr     # the summary


def test_errors_name_the_problem(example):
    r = subprocess.run([str(example), 'sensor_latency_s: 7'], input='', capture_output=True, text=True)
    assert r.returncode == 2 and "'sensor_latency_s'" in r.stderr and 'line 1' in r.stderr, r.stderr
    r = subprocess.run([str(example), 'no_such_setting: 1'], input='', capture_output=True, text=True)
    assert r.returncode == 2 and "unknown setting 'no_such_setting'" in r.stderr, r.stderr
    r = subprocess.run([str(example), 'filter: complementary\nsmooth: true'], input='', capture_output=True, text=True)
    assert r.returncode == 2 and 'smooth' in r.stderr, r.stderr
    lines = 'i,1.0,0,0,0,0,0,9.8\ni,1.0,0,0,0,0,0,9.8\n'
    r = subprocess.run([str(example)], input=lines, capture_output=True, text=True)
    assert r.returncode == 1 and 'line 2' in r.stderr and 'not after the previous' in r.stderr, r.stderr
    r = subprocess.run([str(example)], input='i,1.0,nan,0,0,0,0,9.8\n', capture_output=True, text=True)
    assert r.returncode == 1 and 'not finite' in r.stderr, r.stderr
