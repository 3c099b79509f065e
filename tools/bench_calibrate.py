#!/usr/bin/env python3
"""`fusion-node calibrate BAG` against the online calibration on the BROAD recordings.

For every trial: the refit (`calibrate BAG -o FILE`), then two replays scored with the shared BROAD
scorer: the default graph (online calibration) and the file applied from the start
(`replay --calibration FILE`). Prints a Markdown table of heading RMSE per trial and the means; a
trial whose refit is refused is listed with the reason.

  python3 tools/bench_calibrate.py [--node .build/release/fusion-node] [--data ../shared/data/broad]
                                   [--bench ../shared/bench]
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--node', default=str(ROOT / '.build' / 'release' / 'fusion-node'))
    ap.add_argument('--data', default=str(ROOT.parent / 'shared' / 'data' / 'broad'))
    ap.add_argument('--bench', default=str(ROOT.parent / 'shared' / 'bench'))
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix='bench-calibrate-'))
    bags = sorted(p for p in (Path(a.data) / 'bags').iterdir())
    refused = {}
    for bag in bags:
        trial = bag.name[:2]
        for kind in ('online', 'file'):
            (work / kind).mkdir(exist_ok=True)
        cal = work / f'{trial}.json'
        r = subprocess.run([a.node, 'calibrate', str(bag), '-o', str(cal)], capture_output=True, text=True)
        if r.returncode != 0:
            refused[trial] = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f'exit {r.returncode}'
        subprocess.run([a.node, 'replay', str(bag), '--csv', str(work / 'online' / f'{trial}.csv'), '--quiet'],
                       check=True)
        if cal.exists():
            subprocess.run([a.node, 'replay', str(bag), '--calibration', str(cal), '--csv',
                            str(work / 'file' / f'{trial}.csv'), '--quiet'], check=True)
        print(f'{trial} done', file=sys.stderr)
    scores = {}
    for kind in ('online', 'file'):
        trials = sorted(p.stem for p in (work / kind).glob('*.csv'))
        out = work / f'{kind}.json'
        subprocess.run([sys.executable, str(Path(a.bench) / 'broad_score.py'), '--truth', a.data, '--estimates',
                        str(work / kind / '{trial}.csv'), '--trials', ','.join(trials), '--json', str(out)],
                       check=True, capture_output=True)
        scores[kind] = json.loads(out.read_text())
    def heading(kind, trial):
        value = scores[kind].get('per_trial', {}).get(trial)
        return value['heading'] if value else None
    print('| trial | online calibration | calibrate BAG, from the start | difference |')
    print('|---|---:|---:|---:|')
    diffs = []
    for bag in bags:
        t = bag.name[:2]
        online, fixed = heading('online', t), heading('file', t)
        if fixed is None:
            print(f'| {t} | {online:.3f} | refused: {refused.get(t, "?")} | |')
            continue
        diffs.append(fixed - online)
        print(f'| {t} | {online:.3f} | {fixed:.3f} | {fixed - online:+.3f} |')
    if diffs:
        print(f'\nworst difference {max(diffs):+.3f}, mean {sum(diffs) / len(diffs):+.3f} over {len(diffs)} trials')
    shutil.rmtree(work)


if __name__ == '__main__':
    main()
