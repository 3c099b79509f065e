#!/usr/bin/env python3
"""What a calibration file used from the start can reach on a BROAD recording, judged against the optical
truth (which no calibration tool has): the online calibration's replay, a file with no hard iron, the
hard iron fitted with the truth's orientation (R (m - c) constant over the recording), and the best of a
grid of hard irons around a centre. Each file is replayed with `fusion-node replay --calibration` and
scored with the shared BROAD scorer; prints one Markdown row.

It bounds the target "calibrate BAG, used from the start, no worse than the online calibration": a
recording on which even the grid's best stays above the online figure cannot meet it with any hard iron.

Usage: tools/.venv/bin/python tools/calibration_ceiling.py TRIAL [--centre=X,Y,Z] [--step UT] [--steps N]
           [--data ../shared/data/broad] [--bench ../shared/bench] [--node .build/release/fusion-node]
"""
import argparse, itertools, json, subprocess, sys, tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broad_benchmark import load_scorer  # noqa: E402


def magnetometer(node, bag):
    """The recorded readings: stamps (s, minus the scorer's offset) and fields (uT)."""
    out = subprocess.run([str(node), 'bag', 'echo', str(bag), '--topic', '/imu/mag'], capture_output=True,
                         text=True, check=True).stdout
    stamps, fields = [], []
    for line in out.splitlines():
        m = json.loads(line)['message']
        s = m['header']['stamp']
        f = m['magnetic_field']
        stamps.append(s['sec'] - 1_700_000_000 + s['nanosec'] * 1e-9)
        fields.append([f['x'] * 1e6, f['y'] * 1e6, f['z'] * 1e6])
    return np.array(stamps), np.array(fields)


def rotations(q):
    """Rotation matrices (sensor to ENU) of scalar-first unit quaternions."""
    w, x, y, z = q.T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], 1)


def truth_fit(stamps, fields, t, q_ref, movement):
    """Hard iron c and earth field g minimising |R_i (m_i - c) - g| with the truth's R_i, while moving."""
    i = np.clip(np.searchsorted(t, stamps), 0, len(t) - 1)
    ok = np.isfinite(q_ref[i]).all(axis=1) & movement[i]
    r, m = rotations(q_ref[i][ok]), fields[ok]
    a = np.concatenate([r, np.repeat(np.eye(3)[None], len(r), 0)], 2).reshape(-1, 6)
    b = np.einsum('kij,kj->ki', r, m).reshape(-1)
    solution = np.linalg.lstsq(a, b, rcond=None)[0]
    return solution[:3], float(np.linalg.norm(solution[3:]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('trial', help='two-digit trial id (02, 24, ...)')
    p.add_argument('--centre', default='0,0,0', help='grid centre, uT')
    p.add_argument('--step', type=float, default=0.5, help='grid step, uT')
    p.add_argument('--steps', type=int, default=3, help='steps each side of the centre per axis')
    p.add_argument('--data', type=Path, default=ROOT.parent / 'shared' / 'data' / 'broad')
    p.add_argument('--bench', type=Path, default=ROOT.parent / 'shared' / 'bench')
    p.add_argument('--node', type=Path, default=ROOT / '.build' / 'release' / 'fusion-node')
    a = p.parse_args()
    scorer = load_scorer(a.bench)
    bag = next(d for d in (a.data / 'bags').iterdir() if d.name.startswith(a.trial + '_'))
    t, q_ref, movement = scorer.read_truth(a.data / 'truth' / f'{a.trial}.csv.gz')
    work = Path(tempfile.mkdtemp(prefix='calibration-ceiling-'))

    def heading(extra):
        out = work / 'out.csv'
        subprocess.run([str(a.node), 'replay', str(bag), '--csv', str(out), '--overwrite', '--quiet'] + extra,
                       check=True, capture_output=True)
        return scorer.errors(scorer.read_estimate(str(out), t), q_ref, movement)['heading']

    def from_start(offset, field=44.5):
        path = work / 'calibration.json'
        path.write_text(json.dumps({'version': 1, 'hard_iron_ut': list(map(float, offset)), 'field_ut': field,
                                    'soft_iron': [1, 0, 0, 0, 1, 0, 0, 0, 1], 'rms_ut': 0.8, 'coverage': 1}))
        return heading(['--calibration', str(path)])

    online = heading([])
    zero = from_start([0, 0, 0])
    stamps, fields = magnetometer(a.node, bag)
    fitted, strength = truth_fit(stamps, fields, t, q_ref, movement)
    with_truth = from_start(fitted, strength)
    centre = np.array([float(v) for v in a.centre.split(',')])
    offsets = [(k - a.steps) * a.step for k in range(2 * a.steps + 1)]
    grid = min((from_start(centre + d), tuple(np.round(centre + d, 2)))
               for d in map(np.array, itertools.product(offsets, offsets, offsets)))
    print('| trial | online | no hard iron | truth-fitted hard iron | best of grid (hard iron, uT) |')
    print('|---|---:|---:|---:|---:|')
    print(f'| {bag.name} | {online:.3f} | {zero:.3f} | {with_truth:.3f} ({", ".join(f"{v:.2f}" for v in fitted)}) '
          f'| {grid[0]:.3f} ({", ".join(f"{v:g}" for v in grid[1])}) |')


if __name__ == '__main__':
    main()
