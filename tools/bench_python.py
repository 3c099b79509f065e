#!/usr/bin/env python3
"""The Python package's throughput against VQF's on the same samples in the same run, and its
`replay()` against `fusion-node replay`.

`gyrocompass.Filter.update_batch` (the wheel's library: release, the Swift runtime linked in) and VQF's
`updateBatch` (pip `vqf`, C++) take the same numpy arrays: a bag's gyroscope, accelerometer and
magnetometer (microtesla; NaN rows where there is no reading), decoded here with `rosbags`. Rounds are
interleaved so machine noise hits both alike; each is the best of 5 runs on one core. Then `replay(BAG)`
and `fusion-node replay BAG --csv --accuracy-csv` (release), alternately, 7 times each: the medians.

Usage: tools/.venv/bin/python tools/bench_python.py [BAG] [--rounds 5]
(BAG defaults to the first BROAD trial in ../shared/data/broad/bags.)
"""
import argparse, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broad_benchmark import fusion_node, read_bag  # noqa: E402
import build_wheel  # noqa: E402


def best_rate(make, run, n, repeats=5):
    best = float('inf')
    for _ in range(repeats):
        f = make()
        t0 = time.perf_counter()
        run(f)
        best = min(best, time.perf_counter() - t0)
    return n / best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('bag', nargs='?')
    ap.add_argument('--rounds', type=int, default=5)
    args = ap.parse_args()
    bag = Path(args.bag) if args.bag else sorted((ROOT.parent / 'shared' / 'data' / 'broad' / 'bags').iterdir())[0]
    os.environ['GYROCOMPASS_LIBRARY'] = str(build_wheel.build_library())
    sys.path.insert(0, str(ROOT / 'python'))
    import gyrocompass
    import vqf

    t, gyr, acc, mag = read_bag(bag)
    ts = float(np.median(np.diff(t)))
    n = len(t)
    rates = {'kalman': [], 'complementary': [], 'kalman-checked': [], 'vqf': []}
    batch = lambda f: f.update_batch(gyr, acc, mag, t)  # noqa: E731
    for _ in range(args.rounds):
        # The BROAD magnetometer is calibrated already, as VQF takes it.
        rates['kalman'].append(best_rate(lambda: gyrocompass.Filter(calibration='calibrated'), batch, n))
        rates['complementary'].append(
            best_rate(lambda: gyrocompass.Filter(filter='complementary', calibration='calibrated'), batch, n))
        rates['kalman-checked'].append(best_rate(gyrocompass.Filter, batch, n))
        rates['vqf'].append(best_rate(lambda: vqf.VQF(ts), lambda v: v.updateBatch(gyr, acc, mag), n))
    best = {k: max(v) for k, v in rates.items()}
    print(f'Python batch throughput on {bag.name} ({n} samples), best of {args.rounds} interleaved rounds x 5 runs, '
          f'one core ({gyrocompass.version()}):\n')
    print('| call | samples/s | vs VQF updateBatch |')
    print('|---|---:|---:|')
    for key, label in (('kalman', "gyrocompass.Filter(calibration='calibrated').update_batch (Kalman)"),
                       ('complementary', "... (filter='complementary', calibration='calibrated')"),
                       ('kalman-checked', 'gyrocompass.Filter().update_batch (readings checked for iron)'),
                       ('vqf', 'vqf.VQF(Ts).updateBatch (C++)')):
        print(f'| {label} | {best[key]:,.0f} | {best[key] / best["vqf"]:.2f}x |')

    replay_against_the_command(bag, gyrocompass)


def replay_against_the_command(bag, gyrocompass, runs=7):
    node = fusion_node(True)
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(runs):
            t0 = time.perf_counter()
            r = gyrocompass.replay(str(bag), as_dataframe=False)
            ours.append(time.perf_counter() - t0)
            q, a = Path(d) / 'q.csv', Path(d) / 'a.csv'
            t0 = time.perf_counter()
            subprocess.run([str(node), 'replay', str(bag), '--csv', str(q), '--accuracy-csv', str(a), '--quiet',
                            '--overwrite'], check=True, capture_output=True)
            theirs.append(time.perf_counter() - t0)
    mine, command = statistics.median(ours), statistics.median(theirs)
    print(f'\nReplay of {bag.name} ({len(r["t"])} estimates), median of {runs} alternating runs:\n')
    print('| call | seconds | ratio |')
    print('|---|---:|---:|')
    print(f'| gyrocompass.replay(bag) | {mine:.3f} | {mine / command:.3f} |')
    print(f'| fusion-node replay bag --csv --accuracy-csv | {command:.3f} | 1.000 |')


if __name__ == '__main__':
    main()
