#!/usr/bin/env python3
"""The simulator's driving car through fusion-node, scored against its truth: GNSS aiding, the
compass disturbed for 120 s, no magnetometer, and motor current.

For every seed it writes the drive with `Pipelines/simulate-drive.yaml` (a ROS 2 bag with IMU,
magnetometer, 10 Hz GNSS velocity with a 15 s outage, and the truth CSV), replays it with
`fusion-node replay` in each configuration (the real path: bag reader, CDR, fusion stage) and
scores the heading of the CSV against the truth. Prints Markdown tables.

  python3 tools/bench_vehicle.py [--node .build/release/fusion-node] [--seeds 1,2,3,4,5]

Configurations, all with default parameters:
  - drive, no aiding: `replay --no-calibration` (the simulated magnetometer is clean);
  - + GNSS velocity (`--velocity-topic /gnss/velocity`), + course (`--course-is-heading`);
  - the inclination gate for vehicles (`--set fusion.inclination_gate_deg=2`), no aiding;
  - drive_disturbed (a 25 uT structure from 60 s to 180 s): the RMSE and 95 % coverage over that
    stretch, gyro only (no GNSS) against velocity and course aiding;
  - no magnetometer (`--no-mag`) with GNSS velocity: the error 30 s after the first turn, and after;
  - the compass mounted 20 degrees off (`source.mag_rotation=[0,0,20]`): no aiding, GNSS velocity without
    the yaw hypotheses' check of the compass (`fusion.gnss_yaw_check_deg=0`), and with it (defaults);
  - motors: 30 A peak following the drive at 1 uT/A along x, through the default graph (online
    calibration) without GNSS, with the current (`--current-topic`, compensation learned), without
    it, and the same drive without motors; with the defaults and with the inclination gate.
"""
import argparse
import csv
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def heading(qw, qx, qy, qz):
    """Compass heading of the x axis (ENU, y north), degrees."""
    east = 1 - 2 * (qy * qy + qz * qz)
    north = 2 * (qx * qy + qw * qz)
    return math.degrees(math.atan2(east, north))


def truth_headings(path):
    with open(path) as f:
        return [heading(*(float(r[k]) for k in ('qw', 'qx', 'qy', 'qz'))) for r in csv.DictReader(f)]


def score(truth, estimate, accuracy=None, start=1.0, end=1e9):
    """RMSE, largest error and 95 % coverage of the rows between start and end seconds."""
    with open(estimate) as f:
        rows = list(csv.DictReader(f))
    bounds = None
    if accuracy:
        with open(accuracy) as f:
            bounds = [r['accuracy_deg'] for r in csv.DictReader(f)]
    t0 = float(rows[0]['t'])
    squares, worst, n, covered = 0.0, 0.0, 0, 0
    for i, r in enumerate(rows):
        t = float(r['t']) - t0
        if t < start or t >= end or i >= len(truth):
            continue
        e = (heading(*(float(r[k]) for k in ('qw', 'qx', 'qy', 'qz'))) - truth[i] + 180) % 360 - 180
        squares += e * e
        worst = max(worst, abs(e))
        n += 1
        if bounds and bounds[i] and abs(e) <= float(bounds[i]):
            covered += 1
    if n == 0:
        raise SystemExit(f'{estimate}: no rows between {start} and {end} s')
    return math.sqrt(squares / n), worst, covered / n if bounds else float('nan')


def run(cmd, env=None):
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode not in (0,):
        raise SystemExit(f'{" ".join(cmd)} failed ({done.returncode}):\n{done.stderr}')
    return done.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--node', default=str(ROOT / '.build' / 'release' / 'fusion-node'))
    ap.add_argument('--seeds', default='1,2,3,4,5')
    a = ap.parse_args()
    node = a.node
    seeds = [int(s) for s in a.seeds.split(',')]
    work = Path(tempfile.mkdtemp(prefix='bench-vehicle-'))
    rows = {}
    for seed in seeds:
        def drive(name, scenario='drive', extra=None):
            bag, truth = work / f'{name}-{seed}.mcap', work / f'{name}-{seed}-truth.csv'
            env = dict(os.environ, SEED=str(seed), OUT=str(bag), TRUTH=str(truth), SCENARIO=scenario)
            env.update(extra or {})
            args = list(env.pop('_ARGS', []))
            run([node, '--config', str(ROOT / 'Pipelines' / 'simulate-drive.yaml')] + args, env)
            return bag, truth_headings(truth)

        def replay(bag, name, *options):
            out, acc = work / f'{name}-{seed}.csv', work / f'{name}-{seed}-acc.csv'
            run([node, 'replay', str(bag), '--csv', str(out), '--accuracy-csv', str(acc), '--quiet'] + list(options))
            return out, acc

        r = rows.setdefault(seed, {})
        bag, truth = drive('drive')
        velocity = ['--velocity-topic', '/gnss/velocity']
        gate = ['--set', 'fusion.inclination_gate_deg=2']
        for key, options in [
            ('plain', ['--no-calibration']),
            ('velocity', ['--no-calibration'] + velocity),
            ('course', ['--no-calibration', '--course-is-heading'] + velocity),
            ('gate', ['--no-calibration'] + gate),
        ]:
            out, acc = replay(bag, key, *options)
            r[key] = score(truth, out, acc)
        # The first turn: the first time the true heading is 2 degrees off its start.
        turn = next(i for i, h in enumerate(truth) if abs((h - truth[0] + 180) % 360 - 180) > 2) / 100
        out, acc = replay(bag, 'nomag', '--no-calibration', '--no-mag', *velocity)
        r['nomag_30s'] = score(truth, out, acc, start=turn + 30)
        r['turn'] = turn
        # The compass disturbed from 60 to 180 s.
        dbag, dtruth = drive('disturbed', 'drive_disturbed')
        for key, options in [
            ('dist_gyro', ['--no-calibration']),
            ('dist_velocity', ['--no-calibration'] + velocity),
            ('dist_course', ['--no-calibration', '--course-is-heading'] + velocity),
        ]:
            out, acc = replay(dbag, key, *options)
            r[key] = score(dtruth, out, acc, start=60, end=180)
        # Motors: the same route, 30 A at 1 uT/A along x, through online calibration.
        mbag, mtruth = drive('motor', extra={'MOTOR_A': '30', '_ARGS': ['--set', 'source.motor_field_ut_per_a=[1,0,0]']})
        # Without GNSS, so the compass carries the heading and the motors' field shows; with the defaults
        # and with the vehicle's inclination gate.
        current = ['--current-topic', '/motor/current']
        for suffix, extra in [('', []), ('_gate', gate)]:
            out, acc = replay(mbag, 'motor_comp' + suffix, *current, *extra)
            r['motor_comp' + suffix] = score(mtruth, out, acc, start=60)
            out, acc = replay(mbag, 'motor_none' + suffix, *extra)
            r['motor_none' + suffix] = score(mtruth, out, acc, start=60)
            out, acc = replay(bag, 'motor_clean' + suffix, *extra)
            r['motor_clean' + suffix] = score(truth, out, acc, start=60)
        # The compass mounted 20 degrees off (a field turned about z that passes every check of its
        # own), with GNSS velocity: the yaw hypotheses' check of the compass against none.
        obag, otruth = drive('off', extra={'_ARGS': ['--set', 'source.mag_rotation=[0,0,20]']})
        for key, options in [
            ('off_plain', ['--no-calibration']),
            ('off_unchecked', ['--no-calibration', '--set', 'fusion.gnss_yaw_check_deg=0'] + velocity),
            ('off_checked', ['--no-calibration'] + velocity),
        ]:
            out, acc = replay(obag, key, *options)
            r[key] = score(otruth, out, acc, start=60)
        print(f'seed {seed} done', file=sys.stderr)

    def table(title, columns):
        print(f'\n{title}\n')
        print('| seed | ' + ' | '.join(c[1] for c in columns) + ' |')
        print('|---|' + '---:|' * len(columns))
        for seed in seeds:
            cells = []
            for key, _, part in columns:
                v = rows[seed][key]
                cells.append(f'{v[part]:.2f}' if part != 2 else f'{100 * v[2]:.1f}')
            print(f'| {seed} | ' + ' | '.join(cells) + ' |')
        means = []
        for key, _, part in columns:
            vals = [rows[s][key][part] for s in seeds]
            m = sum(vals) / len(vals)
            means.append(f'{m:.2f}' if part != 2 else f'{100 * m:.1f}')
        print('| mean | ' + ' | '.join(means) + ' |')

    table('Clean drive, heading RMSE (degrees) over the whole run, and 95 % coverage (%)', [
        ('plain', 'no aiding', 0), ('gate', 'no aiding, inclination_gate_deg 2', 0),
        ('velocity', 'GNSS velocity', 0), ('velocity', 'coverage', 2), ('course', '+ course', 0),
        ('course', 'coverage', 2)])
    table('Compass disturbed 60-180 s: RMSE (degrees) and 95 % coverage (%) over that stretch', [
        ('dist_gyro', 'gyro only', 0), ('dist_gyro', 'coverage', 2), ('dist_velocity', 'GNSS velocity', 0),
        ('dist_velocity', 'coverage', 2), ('dist_course', '+ course', 0), ('dist_course', 'coverage', 2)])
    table('No magnetometer, GNSS velocity: from 30 s after the first turn', [
        ('nomag_30s', 'RMSE', 0), ('nomag_30s', 'largest error', 1), ('nomag_30s', 'coverage', 2)])
    table('Compass mounted 20 degrees off: RMSE (degrees) and 95 % coverage (%) from 60 s', [
        ('off_plain', 'no aiding', 0), ('off_unchecked', 'GNSS velocity, no yaw-hypothesis check', 0),
        ('off_checked', 'GNSS velocity (defaults)', 0), ('off_checked', 'coverage', 2),
        ('off_checked', 'largest error', 1)])
    table('Motors 30 A at 1 uT/A, online calibration, no GNSS: RMSE from 60 s (defaults; inclination gate 2)', [
        ('motor_clean', 'no motors', 0), ('motor_comp', 'compensated (learned)', 0),
        ('motor_none', 'uncompensated', 0), ('motor_clean_gate', 'gate: no motors', 0),
        ('motor_comp_gate', 'gate: compensated', 0), ('motor_none_gate', 'gate: uncompensated', 0)])
    shutil.rmtree(work)


if __name__ == '__main__':
    main()
