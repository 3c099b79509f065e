#!/usr/bin/env python3
"""Several magnetometers on the BROAD recordings: heading RMSE of one magnetometer against two.

For every trial it writes copies with a second magnetometer (tools/add_magnetometer.py) and replays them
through fusion-node's bag source and Kalman filter (no calibration stage: BROAD's readings are
calibrated), scoring with the shared BROAD scorer:
  - independent noise: both magnetometers get 0.5 uT (--noise) of their own white noise on top of the
    recorded one (--seed); each alone against both fused (`extra_magnetometers`);
  - a magnet on one: the first gets a magnet fixed to the sensor (--magnet, fading in over 5 s at 60 s,
    present 60 s), the second is a clean copy with 0.5 uT of noise; the clean one alone against both.
Prints a Markdown table; the copies go to --work (deleted unless --keep).

Usage: tools/.venv/bin/python tools/bench_magnetometers.py [--data ../shared/data/broad]
           [--bench ../shared/bench] [--magnet 15,5,0] [--noise 0.5] [--seed 1] [--work DIR] [--keep]
           [--node PATH]
"""
import argparse, json, shutil, subprocess, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broad_benchmark import load_scorer  # noqa: E402


def replay(node, bag, out_csv, mag_topic='/imu/mag', extra=None):
    extra_line = f"extra_magnetometers: ['{extra}']" if extra else ''
    config = out_csv.with_suffix('.yaml')
    config.write_text(f"""name: bench-magnetometers
stages:
  bag: {{type: bag, path: '{bag}', mag_topic: '{mag_topic}', progress: false, {extra_line}}}
  fusion: {{type: fusion, inputs: [bag]}}
  csv: {{type: csv, inputs: [fusion], path: '{out_csv}'}}
""")
    r = subprocess.run([str(node), '--config', str(config), '--overwrite'], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f'bench_magnetometers.py: {bag}: fusion-node failed ({r.returncode}): {r.stderr[-2000:]}')
    return r.stderr


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--data', type=Path, default=ROOT.parent / 'shared' / 'data' / 'broad')
    p.add_argument('--bench', type=Path, default=ROOT.parent / 'shared' / 'bench')
    p.add_argument('--magnet', default='15,5,0', help='the magnet on the first magnetometer, uT, sensor axes')
    p.add_argument('--work', type=Path, default=None)
    p.add_argument('--keep', action='store_true')
    p.add_argument('--noise', default='0.5', help='white noise each magnetometer gets, uT (default 0.5)')
    p.add_argument('--seed', default='1', help="the independent-noise copy's seed (default 1)")
    p.add_argument('--node', type=Path, default=ROOT / '.build' / 'release' / 'fusion-node')
    a = p.parse_args()
    if not a.node.exists():
        sys.exit(f'bench_magnetometers.py: no {a.node} (swift build -c release --product fusion-node)')
    scorer = load_scorer(a.bench)
    work = a.work or Path(tempfile.mkdtemp(prefix='bench-magnetometers-'))
    work.mkdir(parents=True, exist_ok=True)
    add = [sys.executable, str(ROOT / 'tools' / 'add_magnetometer.py')]
    columns = ['noisy first alone', 'noisy second alone', 'both (independent noise)', 'clean second alone',
               'magnet on first, alone', 'both (magnet on first)']
    results = {c: {} for c in columns}
    trials = sorted(d.name for d in (a.data / 'bags').iterdir() if d.is_dir())
    for trial in trials:
        bag = a.data / 'bags' / trial
        noisy, magnet = work / f'{trial}-noisy', work / f'{trial}-magnet'
        for path in (noisy, magnet):
            if path.exists():
                shutil.rmtree(path)
        subprocess.run(add + [str(bag), str(noisy), '--noise', a.noise, '--primary-noise', a.noise, '--seed', a.seed],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(add + [str(bag), str(magnet), '--noise', '0.5', '--magnet', a.magnet, '--seed', '2'],
                       check=True, stdout=subprocess.DEVNULL)
        runs = {
            'noisy first alone': (noisy, '/imu/mag', None),
            'noisy second alone': (noisy, '/mag2', None),
            'both (independent noise)': (noisy, '/imu/mag', 'second=/mag2'),
            'clean second alone': (magnet, '/mag2', None),
            'magnet on first, alone': (magnet, '/imu/mag', None),
            'both (magnet on first)': (magnet, '/imu/mag', 'second=/mag2'),
        }
        for column, (path, topic, extra) in runs.items():
            out = work / f'{trial[:2]}-{columns.index(column)}.csv'
            replay(a.node, path, out, topic, extra)
            results[column][trial] = out
    scores = {}
    for column in columns:
        pattern = str(work) + '/{trial}-' + f'{columns.index(column)}.csv'
        report = work / f'score-{columns.index(column)}.json'
        r = subprocess.run([sys.executable, str(a.bench / 'broad_score.py'), '--truth', str(a.data),
                            '--estimates', pattern, '--json', str(report)], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f'bench_magnetometers.py: scoring {column} failed: {r.stderr[-2000:]}')
        scores[column] = json.loads(report.read_text())
    print('Heading RMSE, degrees (BROAD scorer):\n')
    print('| trial | ' + ' | '.join(columns) + ' |')
    print('|---|' + '---|' * len(columns))
    for trial in trials:
        cells = []
        for column in columns:
            per = scores[column].get('per_trial', {}).get(trial[:2], {})
            cells.append(f"{per['heading']:.3f}" if 'heading' in per else 'n/a')
        print(f'| {trial} | ' + ' | '.join(cells) + ' |')
    print('| mean | ' + ' | '.join(f"{scores[c]['mean']['heading']:.3f}" for c in columns) + ' |')
    if not a.keep and a.work is None:
        shutil.rmtree(work)


if __name__ == '__main__':
    main()
