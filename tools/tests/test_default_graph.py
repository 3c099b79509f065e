"""One default graph: `fusion-node replay --csv` and `Pipelines/replay-bag.yaml` run the same processing
(online calibration, then fusion) and write byte-identical CSVs for the same bag; `--no-calibration`
removes the calibration stage and so changes the output of a sensor with hard iron."""
import subprocess
from pathlib import Path

from test_bag_interop import node  # noqa: F401  (fixture)
from test_pipeline_interop import free_port

ROOT = Path(__file__).resolve().parents[2]


def simulated_bag(node, tmp_path, duration=60, extra='hard_iron_ut: [25, -30, 12]'):
    """The seeded simulator's IMU and magnetometer recorded as tmp_path/sim.mcap; `extra` is more
    simulator settings (one per line, as in a pipeline file)."""
    bag = tmp_path / 'sim.mcap'
    config = tmp_path / 'sim.yaml'
    settings = ''.join(f'\n    {line}' for line in extra.splitlines())
    config.write_text(f"""
stages:
  sim:
    type: simulator
    scenario: default
    duration_s: {duration}
    realtime: false{settings}
  rec:
    type: record
    inputs: [sim]
    path: {bag}
    topics: [imu/data_raw, imu/mag]
""")
    r = subprocess.run([str(node), '--config', str(config)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return bag


def test_replay_and_the_pipeline_file_write_identical_csvs(node, tmp_path):
    bag = simulated_bag(node, tmp_path)
    by_command, by_file = tmp_path / 'command.csv', tmp_path / 'file.csv'
    r = subprocess.run([str(node), 'replay', str(bag), '--csv', str(by_command), '--quiet'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    env = {'BAG': str(bag), 'CSV': str(by_file), 'PUBLISH': f'tcp://127.0.0.1:{free_port()}', 'PATH': '/usr/bin:/bin'}
    r = subprocess.run([str(node), '--config', str(ROOT / 'Pipelines' / 'replay-bag.yaml')], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'calibration' in r.stderr and 'fit(s) accepted' in r.stderr, r.stderr   # the calibration stage ran
    a, b = by_command.read_bytes(), by_file.read_bytes()
    assert len(a) > 100_000
    assert a == b


def test_no_calibration_removes_the_calibration_stage(node, tmp_path):
    bag = simulated_bag(node, tmp_path)
    calibrated, raw = tmp_path / 'calibrated.csv', tmp_path / 'raw.csv'
    for out, extra in ((calibrated, []), (raw, ['--no-calibration'])):
        r = subprocess.run([str(node), 'replay', str(bag), '--csv', str(out)] + extra,
                           capture_output=True, text=True, timeout=120)
        # The simulated bag carries hard iron: without a calibration stage the fusion stage finds it, and
        # the heading that follows it is reported unusable (exit 4).
        assert r.returncode == (4 if extra else 0), r.stderr
        assert ('calibration:' in r.stderr) == (not extra), r.stderr
        assert not extra or 'drop --no-calibration' in r.stderr, r.stderr
    assert calibrated.read_bytes() != raw.read_bytes()
