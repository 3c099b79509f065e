#!/usr/bin/env python3
"""Choose a fusion parameter on some BROAD trials and judge it on the others.

For each value of one fusion-stage setting (`fusion-node stages fusion` lists them: the Kalman
model's parameters among them), every trial bag is replayed through Pipelines/replay-broad-sensor.yaml
with `--set fusion.NAME=VALUE` (and `--set fusion.sensor_latency_s=...`, 0 by default: the filter's
defaults) and scored with the shared BROAD scorer. The value is chosen on the tuning trials only; the
table shows what it does on the held-out trials, which it was not chosen on.

    tools/.venv/bin/python tools/holdout_sweep.py NAME V1 V2 ... [--metric inclination]
        [--tune 02,07,11,27,33] [--data ../shared/data/broad] [--bench ../shared/bench] [--latency 0]
"""
import argparse, os, subprocess, sys, tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broad_benchmark import load_scorer  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('name')
    ap.add_argument('values', nargs='+')
    ap.add_argument('--metric', default='inclination', choices=['total', 'heading', 'inclination'])
    ap.add_argument('--tune', default='02,07,11,27,33', help='trials the value is chosen on')
    ap.add_argument('--data', default=str(ROOT.parent / 'shared' / 'data' / 'broad'))
    ap.add_argument('--bench', default=str(ROOT.parent / 'shared' / 'bench'))
    ap.add_argument('--latency', default='0', help='fusion.sensor_latency_s, seconds (0: the defaults)')
    ap.add_argument('--node', default=str(ROOT / '.build' / 'release' / 'fusion-node'))
    a = ap.parse_args()
    scorer = load_scorer(a.bench)
    data = Path(a.data)
    bags = sorted((data / 'bags').iterdir())
    ids = [b.name[:2] for b in bags]
    tune = [t for t in a.tune.split(',') if t in ids]
    held = [t for t in ids if t not in tune]
    truth = {tid: scorer.read_truth(data / 'truth' / f'{tid}.csv.gz') for tid in ids}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for value in a.values:
            per = {}
            for bag, tid in zip(bags, ids):
                out = Path(d) / f'{tid}.csv'
                out.unlink(missing_ok=True)  # the previous value's: fusion-node never replaces an output unasked
                r = subprocess.run(
                    [a.node, '--config', str(ROOT / 'Pipelines' / 'replay-broad-sensor.yaml'),
                     '--set', f'fusion.{a.name}={value}', '--set', f'fusion.sensor_latency_s={a.latency}'],
                    env={**os.environ, 'BAG': str(bag), 'CSV': str(out)}, capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f'{bag.name} with {a.name}={value}: {r.stderr.strip()}')
                t, q_ref, movement = truth[tid]
                per[tid] = scorer.errors(scorer.read_estimate(out, t), q_ref, movement)[a.metric]
            rows.append((value, per))
            print(f'{a.name}={value}: tuning {np.mean([per[t] for t in tune]):.3f}, '
                  f'held out {np.mean([per[t] for t in held]):.3f}', file=sys.stderr)
    best = min(rows, key=lambda r: np.mean([r[1][t] for t in tune]))
    print(f'{a.metric} RMSE, degrees; chosen on {", ".join(tune)}; held out {", ".join(held)}\n')
    print(f'| {a.name} | ' + ' | '.join(ids) + ' | tuning mean | held-out mean |')
    print('|---|' + '---:|' * (len(ids) + 2))
    for value, per in rows:
        mark = ' (chosen)' if value == best[0] else ''
        print(f'| {value}{mark} | ' + ' | '.join(f'{per[t]:.2f}' for t in ids)
              + f' | {np.mean([per[t] for t in tune]):.3f} | {np.mean([per[t] for t in held]):.3f} |')


if __name__ == '__main__':
    main()
