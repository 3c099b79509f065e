"""The guided calibration a person runs: `fusion-node calibrate` in a tmux terminal, driven by the simulator
turning a device with 50 uT of hard iron and 20 % of soft iron. It reaches 100 %, saves a calibration within
1 uT and 1 % of the truth, and a replay with that file from the start has no calibration phase."""
import csv, json, math, os, re, shutil, subprocess, time
from pathlib import Path

import pytest

from test_bag_interop import node  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
HARD_IRON = [50.0, -35.0, 25.0]
SOFT_IRON = [[1.2, 0.05, 0.0], [0.05, 0.85, 0.03], [0.0, 0.03, 1.0]]


def device(tmp_path, scenario='calibration_dance', realtime='false', extra=''):
    config = tmp_path / f'{scenario}.yaml'
    config.write_text(f"""stages:
  device:
    type: simulator
    scenario: {scenario}
    seed: 4
    realtime: {realtime}
    hard_iron_ut: {HARD_IRON}
    soft_iron: {[x for row in SOFT_IRON for x in row]}
{extra}""")
    return config


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]


@pytest.mark.skipif(shutil.which('tmux') is None, reason='tmux is not installed (tools/setup.sh installs it)')
def test_guided_calibration_in_a_terminal_saves_the_truth(node, tmp_path):
    out = tmp_path / 'calibration.json'
    session = f'calibrate-{os.getpid()}'
    command = f'{node} calibrate --config {device(tmp_path)} -o {out}; echo EXIT $?; sleep 30'
    subprocess.run(['tmux', 'new-session', '-d', '-s', session, '-x', '90', '-y', '30', command], check=True)
    screens = []
    try:
        end = time.time() + 60
        while time.time() < end:
            screen = subprocess.run(['tmux', 'capture-pane', '-p', '-t', session], capture_output=True,
                                    text=True).stdout
            screens.append(screen)
            if 'EXIT' in screen:
                break
            time.sleep(0.1)
    finally:
        subprocess.run(['tmux', 'kill-session', '-t', session], capture_output=True)
    final = screens[-1]
    assert 'EXIT 0' in final, final
    # The full-screen guide was shown, filled, and said it was complete before the summary.
    guide = [s for s in screens if 'GyroCompass calibration' in s]
    assert guide, screens[:3]
    assert any('GyroCompass calibration   complete' in s and 'COMPLETE' in s for s in guide), guide[-1]
    assert any('field along +z (top)' in s and '#' in s for s in guide)
    assert 'saved:' in final and 'fit: ellipsoid' in final, final
    saved = json.loads(out.read_text())
    hard = saved['hard_iron_ut']
    assert max(abs(a - b) for a, b in zip(hard, HARD_IRON)) < 1.0, hard
    # The correction times the soft iron is a multiple of the identity (the fit cannot know the field's true
    # strength): within 1 % once that scale is taken out.
    w = [saved['soft_iron'][i * 3:i * 3 + 3] for i in range(3)]
    product = matmul(w, SOFT_IRON)
    scale = sum(product[i][i] for i in range(3)) / 3
    worst = max(abs(product[i][j] / scale - (1 if i == j else 0)) for i in range(3) for j in range(3))
    assert worst < 0.01, product


def test_a_calibration_from_the_guide_needs_no_calibration_phase(node, tmp_path):
    out = tmp_path / 'calibration.json'
    r = subprocess.run([str(node), 'calibrate', '--config', str(device(tmp_path)), '-o', str(out), '--plain'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.search(r'calibrate: complete \((\d+) of 32 directions covered, 29 needed', r.stdout), r.stdout
    assert 'saved:' in r.stdout and '100 %' not in r.stdout, r.stdout
    # What the person sees never goes back while they turn the device.
    shown = [int(p) for p in re.findall(r'calibrate: (\d+) %', r.stdout)]
    assert shown and all(b >= a for a, b in zip(shown, shown[1:])), shown
    # The same device, recorded doing something else, replayed with the file from the start.
    bag, truth = tmp_path / 'walk.mcap', tmp_path / 'truth.csv'
    record = device(tmp_path, scenario='default', extra=f"""    duration_s: 40
    truth_path: {truth}
  record:
    type: record
    inputs: [device]
    path: {bag}
    topics: [imu/data_raw, imu/mag]
""")
    r = subprocess.run([str(node), '--config', str(record)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    acc = tmp_path / 'acc.csv'
    r = subprocess.run([str(node), 'replay', str(bag), '--calibration', str(out), '--accuracy-csv', str(acc)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with open(acc) as f:
        rows = list(csv.DictReader(f))
    # After the filter's first second nothing is uncalibrated and the bound is a compass's, not 180 degrees.
    later = rows[150:]
    assert not any('magnetometer_uncalibrated' in row['flags'] for row in later)
    assert all(row['accuracy_deg'] and float(row['accuracy_deg']) < 20 for row in later)
    # The live guide refuses to write anything it did not finish: a device at rest never covers the sphere.
    rest = tmp_path / 'rest.json'
    r = subprocess.run([str(node), 'calibrate', '--config', str(device(tmp_path, scenario='rest')), '-o', str(rest),
                        '--plain', '--timeout', '3'], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and 'no calibration written' in r.stderr, (r.returncode, r.stderr)
    assert not rest.exists()


def test_a_mounting_found_while_calibrating_is_saved_with_the_calibration_in_body_axes(node, tmp_path):
    """The device's magnetometer is mounted yaw_90: the guide finds the mounting from the motion and saves it,
    and the calibration it saves is that of the turned readings (what the calibration stage applies after
    turning them), so the hard iron in the file is the body-axes one the simulator was given."""
    out = tmp_path / 'turned.json'
    config = device(tmp_path, extra='    mag_rotation: yaw_90\n')
    r = subprocess.run([str(node), 'calibrate', '--config', str(config), '-o', str(out), '--plain'],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    saved = json.loads(out.read_text())
    assert saved['mag_rotation'] == 'yaw_90', saved
    assert max(abs(a - b) for a, b in zip(saved['hard_iron_ut'], HARD_IRON)) < 1.0, saved['hard_iron_ut']
