#!/usr/bin/env python3
"""`fusion-node fleet` on a simulated fleet: wall time with 1 and 2 local workers (alternating rounds, each into a
fresh output directory), the second run into the same directory (nothing to do), and whether every output is
byte-identical to a single `fusion-node replay` of the same bag. Prints one line per run and the ratios.

  tools/bench_fleet.py [--bags 200] [--robots 8] [--seconds 60] [--rounds 2] [--node BIN] [--check-identity]

The bags are written by tools/fleet_bags.py into a temporary directory (same seeds every time). BIN defaults to
.build/release/fusion-node; the workers use the library beside it.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(command, env):
    start = time.perf_counter()
    r = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f'bench_fleet: {" ".join(map(str, command))}: exit {r.returncode}: {r.stderr[-2000:]}')
    return seconds, r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--bags', type=int, default=200)
    ap.add_argument('--robots', type=int, default=8)
    ap.add_argument('--seconds', type=float, default=60.0)
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--node', default=str(ROOT / '.build' / 'release' / 'fusion-node'))
    ap.add_argument('--check-identity', action='store_true', help='also replay every bag alone and compare')
    a = ap.parse_args()
    node = Path(a.node).resolve()
    env = dict(os.environ, GYROCOMPASS_PYTHON=os.environ.get('GYROCOMPASS_PYTHON', sys.executable))
    work = Path(tempfile.mkdtemp(prefix='bench-fleet-'))
    try:
        bags = work / 'bags'
        subprocess.run([sys.executable, str(ROOT / 'tools' / 'fleet_bags.py'), str(bags), '--bags', str(a.bags),
                        '--robots', str(a.robots), '--seconds', str(a.seconds), '--node', str(node)], check=True)
        samples = int(a.bags * a.seconds * 100)
        times = {1: [], 2: []}
        for round_ in range(a.rounds):
            for workers in (1, 2):
                out = work / f'run-{workers}'
                shutil.rmtree(out, ignore_errors=True)
                seconds, _ = timed([str(node), 'fleet', str(bags), '-o', str(out), '--workers', str(workers),
                                    '--format', 'csv', '--quiet'], env)
                times[workers].append(seconds)
                print(f'round {round_ + 1}: {workers} worker(s): {seconds:.2f} s, {a.bags / seconds:.1f} bags/s, '
                      f'{samples / seconds:,.0f} IMU samples/s')
        again, stderr = timed([str(node), 'fleet', str(bags), '-o', str(work / 'run-2'), '--workers', '2',
                               '--format', 'csv', '--quiet'], env)
        print(f'second run into the same directory: {again:.2f} s: {stderr.strip().splitlines()[-1]}')
        best1, best2 = min(times[1]), min(times[2])
        print(f'2 workers / 1 worker: best {best1 / best2:.2f}x, per round '
              + ', '.join(f'{t1 / t2:.2f}x' for t1, t2 in zip(times[1], times[2])))
        if a.check_identity:
            differ = 0
            for bag in sorted(bags.rglob('*.mcap')):
                name = bag.relative_to(bags).with_suffix('')
                q, acc = work / 'q.csv', work / 'a.csv'
                subprocess.run([str(node), 'replay', str(bag), '--csv', str(q), '--accuracy-csv', str(acc), '--quiet',
                                '--overwrite'], capture_output=True)
                for mine, single in (('orientation.csv', q), ('accuracy.csv', acc)):
                    if (work / 'run-2' / name / mine).read_bytes() != single.read_bytes():
                        differ += 1
                        print(f'differs: {name}/{mine}')
            print(f'identity: {2 * a.bags - differ} of {2 * a.bags} CSV files byte-identical to single replays')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
