"""`fusion-node fleet` (the Python package's gyrocompass.fleet on Dask): a simulated fleet's bags replayed on a
local cluster give byte for byte what single `fusion-node replay` runs give; a re-run does nothing and says so; a
bag that fails is a row with its error; a worker killed mid-run loses nothing; a scheduler and two workers as
separate processes on loopback (a two-host cluster on one machine) share the bags; compare and health read the
results (a magnet mounted part-way through a robot's days is listed as a jump)."""
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from test_bag_interop import node  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(900)


def environment(node):
    env = dict(os.environ, GYROCOMPASS_PYTHON=sys.executable, GYROCOMPASS_LIBRARY=str(node.parent / 'libgyrocompass.so'),
               PYTHONPATH=str(ROOT / 'python'))
    return env


def fleet(node, *args, timeout=600):
    return subprocess.run([str(node), 'fleet', *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=environment(node))


def rows(out):
    with open(out / 'summary.csv', newline='') as f:
        return {r['bag']: r for r in csv.DictReader(f)}


@pytest.fixture(scope='module')
def bags(node, tmp_path_factory):
    """12 bags of 20 s: 4 robots, 3 days each; robot01 has a magnet mounted from its second day."""
    directory = tmp_path_factory.mktemp('fleet') / 'bags'
    subprocess.run([sys.executable, str(ROOT / 'tools' / 'fleet_bags.py'), str(directory), '--bags', '12',
                    '--robots', '4', '--seconds', '20', '--node', str(node)], check=True, timeout=300)
    return directory


def test_fleet_gives_single_replays_bytes_and_a_rerun_does_nothing(node, bags, tmp_path):
    out = tmp_path / 'run'
    r = fleet(node, bags, '-o', out, '--workers', '2', '--format', 'csv')
    assert r.returncode == 0, r.stderr
    table = rows(out)
    assert len(table) == 12 and {t['status'] for t in table.values()} == {'replayed'}, table
    for name in ('robot00/day-000', 'robot01/day-002', 'robot03/day-001'):
        q, a = tmp_path / 'q.csv', tmp_path / 'a.csv'
        single = subprocess.run([str(node), 'replay', str(bags / f'{name}.mcap'), '--csv', str(q), '--accuracy-csv',
                                 str(a), '--quiet', '--overwrite'], capture_output=True, text=True, timeout=300)
        assert single.returncode in (0, 4), single.stderr
        assert (out / name / 'orientation.csv').read_bytes() == q.read_bytes(), name
        assert (out / name / 'accuracy.csv').read_bytes() == a.read_bytes(), name
        assert int(table[name]['imu_samples']) == len(q.read_text().splitlines()) - 1
    # The summary measures what the flags say, and what the calibration found.
    row = table['robot01/day-000']
    assert 0 <= float(row['trusted_share']) <= 1 and float(row['duration_s']) == pytest.approx(19.99, abs=0.02)
    assert [float(row[f'hard_iron_{a}_ut']) for a in 'xyz'] == pytest.approx([-13.0, -5.0, -6.0], abs=1.0)
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob('*.csv') if p.name != 'summary.csv'}

    again = fleet(node, bags, '-o', out, '--workers', '2', '--format', 'csv')
    assert again.returncode == 0, again.stderr
    assert 'nothing to do: all 12 bags are up to date' in again.stderr
    assert {t['status'] for t in rows(out).values()} == {'up to date'}
    assert stamps == {p: p.stat().st_mtime_ns for p in stamps}

    # Other options are another run: every bag again; a changed bag alone is redone.
    changed = fleet(node, bags, '-o', out, '--workers', '2', '--format', 'csv', '--filter', 'complementary')
    assert changed.returncode == 0 and {t['status'] for t in rows(out).values()} == {'replayed'}
    target = bags / 'robot02' / 'day-001.mcap'
    original = target.read_bytes()
    target.write_bytes((bags / 'robot02' / 'day-000.mcap').read_bytes())
    try:
        one = fleet(node, bags, '-o', out, '--workers', '2', '--format', 'csv', '--filter', 'complementary')
        statuses = {n: t['status'] for n, t in rows(out).items()}
        assert one.returncode == 0 and statuses.pop('robot02/day-001') == 'replayed', one.stderr
        assert set(statuses.values()) == {'up to date'}
    finally:
        target.write_bytes(original)
    assert not list(out.rglob('.*partial*'))


def test_a_bag_that_fails_is_a_row_with_its_error(node, bags, tmp_path):
    broken = tmp_path / 'bags'
    broken.mkdir()
    good = bags / 'robot01' / 'day-000.mcap'
    (broken / 'good.mcap').write_bytes(good.read_bytes())
    (broken / 'garbage.mcap').write_bytes(b'\x89MCAP0\r\n' + os.urandom(4000))
    (broken / 'cut.mcap').write_bytes(good.read_bytes()[:len(good.read_bytes()) // 3])
    (broken / 'list.txt').write_text('good.mcap\ngarbage.mcap  # a comment\ncut.mcap\n')
    out = tmp_path / 'run'
    r = fleet(node, broken / 'list.txt', '-o', out, '--workers', '1', '--format', 'csv')
    assert r.returncode == 3, r.stderr
    table = rows(out)
    assert table['good']['status'] == 'replayed'
    for name in ('garbage', 'cut'):
        assert table[name]['status'] == 'failed' and name + '.mcap' in table[name]['error'], table[name]
        assert f'fleet: {name}: ' in r.stderr
    assert '3 bags: 1 replayed, 0 up to date, 2 failed' in r.stderr
    # What is asked wrongly is said once, before any bag.
    for args, message in ((['--set', 'fusion.nope=1'], "unknown setting 'nope'"),
                          (['--mag-rotation', 'yaw_91'], "did you mean 'yaw_90'"),
                          ([], 'no such file or directory')):
        target = broken / 'list.txt' if args else tmp_path / 'missing'
        bad = fleet(node, target, '-o', tmp_path / 'bad', *args)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr


def test_a_worker_killed_mid_run_loses_nothing(node, bags, tmp_path):
    """Two workers; one is killed (SIGKILL) while it writes a bag's outputs: the bag is replayed again
    (elsewhere, or by the worker the nanny restarts), the run completes, every output whole and no partial
    file left (Python API with a client of our own)."""
    script = tmp_path / 'kill.py'
    script.write_text(f'''
import os, re, signal, threading, time, logging
from pathlib import Path
from distributed import Client, LocalCluster
from gyrocompass import fleet


def main():
    out = Path({str(tmp_path / 'run')!r})
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=logging.CRITICAL)
    client = Client(cluster)
    pids = client.run(os.getpid)
    killed = []

    def killer():
        # Mid-bag: a worker is writing a bag's outputs (under names that end in its pid) after another
        # bag is done.
        while True:
            writing = [int(re.search(r'partial-([0-9]+)', p.name)[1]) for p in out.rglob('.*.partial-*')]
            busy = [pid for pid in writing if pid in pids.values()]
            if busy and list(out.rglob('summary.json')):
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])
                return
            time.sleep(0.001)
    threading.Thread(target=killer, daemon=True).start()
    rows = fleet.run([Path({str(bags)!r})], out, client=client, format='csv', progress=False)
    print('KILLED', killed, 'STATUSES', sorted({{r['status'] for r in rows}}), 'ROWS', len(rows))
    client.close()
    cluster.close()


if __name__ == '__main__':
    main()
''')
    env = environment(node)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(l for l in r.stdout.splitlines() if l.startswith('KILLED'))
    assert "KILLED [" in line and "KILLED []" not in line, line
    # A bag whose row was written but whose result died with the worker is found up to date when tried again.
    assert "'failed'" not in line and 'ROWS 12' in line, line
    out = tmp_path / 'run'
    assert not list(out.rglob('.*partial*'))
    reference = tmp_path / 'reference'
    assert fleet(node, bags, '-o', reference, '--workers', '1', '--format', 'csv').returncode == 0
    for f in reference.rglob('*.csv'):
        if f.name != 'summary.csv':
            assert (out / f.relative_to(reference)).read_bytes() == f.read_bytes(), f


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_a_scheduler_and_two_workers_on_loopback(node, bags, tmp_path):
    port = free_port()
    env = environment(node)
    dask = str(VENV_BIN / 'dask')
    processes = [subprocess.Popen([dask, 'scheduler', '--host', '127.0.0.1', '--port', str(port),
                                   '--no-dashboard'], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for i in range(2):
            processes.append(subprocess.Popen(
                [dask, 'worker', f'tcp://127.0.0.1:{port}', '--nthreads', '1', '--nworkers', '1', '--name',
                 f'host{i}', '--no-dashboard', '--local-directory', str(tmp_path / f'w{i}')], env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait = subprocess.run([sys.executable, '-c', f'''
from distributed import Client
c = Client("tcp://127.0.0.1:{port}", timeout=60)
c.wait_for_workers(2, timeout=60)
'''], env=env, capture_output=True, text=True, timeout=120)
        assert wait.returncode == 0, wait.stderr[-2000:]
        out = tmp_path / 'run'
        r = fleet(node, bags, '-o', out, '--scheduler', f'tcp://127.0.0.1:{port}', '--format', 'csv')
        assert r.returncode == 0, r.stderr
        table = rows(out)
        assert {t['status'] for t in table.values()} == {'replayed'}
        assert len({t['worker'] for t in table.values()}) == 2, {t['worker'] for t in table.values()}
    finally:
        for p in reversed(processes):
            p.send_signal(signal.SIGTERM)
        for p in processes:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_compare_and_health(node, bags, tmp_path):
    a, b = tmp_path / 'a', tmp_path / 'b'
    assert fleet(node, bags, '-o', a, '--workers', '2', '--format', 'csv').returncode == 0
    assert fleet(node, bags, '-o', b, '--workers', '2', '--format', 'csv', '--no-calibration').returncode == 0
    same = fleet(node, 'compare', a, a, '-o', tmp_path / 'same.csv')
    assert same.returncode == 0, same.stderr
    with open(tmp_path / 'same.csv', newline='') as f:
        table = list(csv.DictReader(f))
    assert len(table) == 12 and all(float(r['heading_change_rms_deg']) == 0 for r in table)
    # With truth beside the bags: the heading RMSE per bag and per robot; no calibration is far worse
    # on bags whose hard iron is tens of microtesla.
    r = fleet(node, 'compare', a, b, '--by', 'heading', '--top', '5')
    assert r.returncode == 0, r.stderr
    assert 'heading RMSE against the truth, mean per group' in r.stdout and 'robot01' in r.stdout
    with open(b / 'compare.csv', newline='') as f:
        table = {row['bag']: row for row in csv.DictReader(f)}
    assert float(table['robot01/day-000']['heading_change_rms_deg']) > 5
    calibrated = [float(t['heading_rmse_a_deg']) for t in table.values()]
    uncalibrated = [float(t['heading_rmse_b_deg']) for t in table.values()]
    assert sum(calibrated) < sum(uncalibrated)

    h = fleet(node, 'health', a)
    assert h.returncode == 0, h.stderr
    assert '1 jump(s) of hard iron' in h.stdout and 'robot01: robot01/day-001: moved' in h.stdout, h.stdout
    with open(a / 'health.csv', newline='') as f:
        series = list(csv.DictReader(f))
    assert len(series) == 12 and {s['robot'] for s in series} == {'robot00', 'robot01', 'robot02', 'robot03'}


def test_parquet_outputs_hold_the_csv_values(node, bags, tmp_path):
    pq = pytest.importorskip('pyarrow.parquet')
    a, b = tmp_path / 'csv', tmp_path / 'parquet'
    assert fleet(node, bags, '-o', a, '--workers', '1', '--format', 'csv').returncode == 0
    r = fleet(node, bags, '-o', b, '--workers', '1', '--format', 'parquet', '--outputs', 'accuracy')
    assert r.returncode == 0, r.stderr
    assert not list(b.rglob('orientation.*')) and len(list(b.rglob('accuracy.parquet'))) == 12
    table = pq.read_table(b / 'robot01' / 'day-002' / 'accuracy.parquet')
    with open(a / 'robot01' / 'day-002' / 'accuracy.csv', newline='') as f:
        rows_csv = list(csv.DictReader(f))
    assert table.num_rows == len(rows_csv)
    assert [float(r['t']) for r in rows_csv] == table['t'].to_pylist()
    assert [float(r['accuracy_deg'] or 'nan') for r in rows_csv][-1] == pytest.approx(table['accuracy_deg'][-1].as_py(),
                                                                                   abs=1e-4)
    assert (b / 'summary.parquet').is_file() and (b / 'summary.csv').is_file()
    same = fleet(node, 'compare', a, b, '-o', tmp_path / 'same.csv')
    assert same.returncode == 0, same.stderr
    with open(tmp_path / 'same.csv', newline='') as f:
        assert all(float(r['heading_change_rms_deg']) < 1e-3 for r in csv.DictReader(f))


def test_bag_names_keep_a_suffix_only_where_two_would_collide(node):
    # In a process of its own: the package loads the library this build made (GYROCOMPASS_LIBRARY).
    r = subprocess.run([sys.executable, '-c', '''
from pathlib import Path
from gyrocompass.fleet import _names
print(_names([Path('/d/a/run.mcap'), Path('/d/a/run.db3'), Path('/d/b/other.mcap'), Path('/d/b/dir_bag')]))
print(_names([Path('/x/one.mcap')]))
'''], capture_output=True, text=True, env=environment(node), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["['a/run.mcap', 'a/run.db3', 'b/other', 'b/dir_bag']", "['one']"]


def test_a_changed_calibration_file_replays_again(node, bags, tmp_path):
    one = tmp_path / 'one'
    one.mkdir()
    (one / 'a.mcap').write_bytes((bags / 'robot01' / 'day-000.mcap').read_bytes())
    calibration = tmp_path / 'cal.json'
    for source in ('day-000', 'day-002'):
        calibration.unlink(missing_ok=True)
        made = subprocess.run([str(node), 'calibrate', str(bags / 'robot01' / f'{source}.mcap'), '-o',
                               str(calibration)], capture_output=True, text=True, timeout=300)
        assert made.returncode == 0, made.stderr
        first = fleet(node, one, '-o', tmp_path / 'run', '--calibration', calibration, '--format', 'csv',
                      '--workers', '1')
        assert first.returncode == 0 and rows(tmp_path / 'run')['a']['status'] == 'replayed', first.stderr
        again = fleet(node, one, '-o', tmp_path / 'run', '--calibration', calibration, '--format', 'csv',
                      '--workers', '1')
        assert again.returncode == 0 and 'nothing to do' in again.stderr, again.stderr


def test_gnss_columns_for_a_car_with_gnss_velocity(node, tmp_path):
    (tmp_path / 'bags').mkdir()
    config = tmp_path / 'drive.yaml'
    config.write_text(f"""stages:
  sim:
    type: simulator
    scenario: drive
    seed: 1
    rate_hz: 100
    duration_s: 40
    realtime: false
    gnss_rate_hz: 10
  rec:
    type: record
    inputs: [sim]
    path: {tmp_path / 'bags' / 'drive.mcap'}
    topics: [imu/data_raw, imu/mag, gnss/velocity]
""")
    subprocess.run([str(node), '--config', str(config)], check=True, capture_output=True, timeout=300)
    r = fleet(node, tmp_path / 'bags', '-o', tmp_path / 'gnss', '--set', 'bag.velocity_topic=/gnss/velocity',
              '--format', 'csv', '--workers', '1')
    assert r.returncode == 0 and 'fleet: 1 bag: 1 replayed' in r.stderr, r.stderr
    row = rows(tmp_path / 'gnss')['drive']
    assert 0 < float(row['gnss_aided_share']) <= 1 and float(row['gnss_disagree_share']) == 0, row
    plain = fleet(node, tmp_path / 'bags', '-o', tmp_path / 'plain', '--format', 'csv', '--workers', '1')
    assert plain.returncode == 0
    row = rows(tmp_path / 'plain')['drive']
    assert row['gnss_aided_share'] == '' and row['gnss_disagree_share'] == '', row
    # A fleet of a car with a receiver and a device without: one set of options with --gnss auto.
    (tmp_path / 'bags' / 'hand.mcap').write_bytes(bags_hand(node, tmp_path))
    mixed = fleet(node, tmp_path / 'bags', '-o', tmp_path / 'mixed', '--gnss', 'auto', '--format', 'csv',
                  '--workers', '1')
    assert mixed.returncode == 0, mixed.stderr
    table = rows(tmp_path / 'mixed')
    assert table['drive']['gnss_topic'] == '/gnss/velocity' and float(table['drive']['gnss_aided_share']) > 0
    assert table['hand']['gnss_topic'] == '' and table['hand']['status'] == 'replayed'
    q = tmp_path / 'q.csv'
    single = subprocess.run([str(node), 'replay', str(tmp_path / 'bags' / 'drive.mcap'), '--velocity-topic',
                             '/gnss/velocity', '--csv', str(q), '--quiet'], capture_output=True, timeout=300)
    assert single.returncode in (0, 4)
    assert (tmp_path / 'mixed' / 'drive' / 'orientation.csv').read_bytes() == q.read_bytes()


def bags_hand(node, tmp_path):
    config = tmp_path / 'hand.yaml'
    config.write_text(f"""stages:
  sim: {{type: simulator, scenario: figure_eight, seed: 3, rate_hz: 100, duration_s: 20, realtime: false}}
  rec: {{type: record, inputs: [sim], path: {tmp_path / 'hand.mcap'}, topics: [imu/data_raw, imu/mag]}}
""")
    subprocess.run([str(node), '--config', str(config)], check=True, capture_output=True, timeout=300)
    return (tmp_path / 'hand.mcap').read_bytes()


def test_relative_truth_times_are_seconds_after_the_recordings_epoch(node, bags):
    """A recording whose first IMU sample comes 5 s after 1,700,000,000 s (a phone's): estimates equal to the
    truth score 0, and the truth shifted by 2 s does not."""
    r = subprocess.run([sys.executable, '-c', f'''
import numpy as np
from gyrocompass.fleet import read_truth, heading_rmse
t, q, moving = read_truth({str(bags / 'robot01' / 'day-000.truth.csv')!r})
later = t >= 5
print(heading_rmse(t[later] + 1.7e9, q[later], t, q, moving))
print(heading_rmse(t[later] + 1.7e9 + 2, q[later], t, q, moving))
'''], capture_output=True, text=True, env=environment(node), timeout=60)
    assert r.returncode == 0, r.stderr
    same, shifted = map(float, r.stdout.split())
    assert same < 1e-6 and shifted > 1, (same, shifted)
