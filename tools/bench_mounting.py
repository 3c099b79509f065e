#!/usr/bin/env python3
"""Finding a magnetometer's mounting from motion, on the BROAD recordings, for every named rotation.

For each trial bag and each of ArduPilot's named rotations (`fusion-node stages mount` lists them) it runs
one pipeline: the bag, a mount stage with `invert: true` that turns the magnetometer's readings as if it
had been mounted so (what tools/rotate_bag.sh writes), the calibration stage with `detect_rotation: true`
(online, as `fusion-node replay --mag-rotation auto`), fusion and a CSV. It reads what the calibration
stage found from its log and counts, per trial, right (the name, or one of its aliases: ArduPilot names some
rotations twice), undetermined and wrong answers, with the time of the decision.

Then it scores the heading against the truth (BROAD's metric, the shared scorer's code) two ways:
- after the decision, beside the plain replay of the unrotated bag (`fusion-node replay BAG --csv`) over
  the same samples: what the wait costs the run that finds the mounting;
- for the rotations in --rerun, a second run that starts from the calibration file the first one wrote
  (mounting included), beside the unrotated bag started from the same file without the mounting: what the
  found mounting gives later runs.
Trials run two at a time (--jobs).

Usage: python3 tools/bench_mounting.py [--data ../shared/data/broad] [--bench ../shared/bench]
                                       [--rotations yaw_90,roll_180] [--trials 02,07] [--no-build]
                                       [--rerun yaw_90,roll_90_pitch_68_yaw_293] [--jobs 2]
"""
import argparse, json, re, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from broad_benchmark import fusion_node, load_scorer  # the same scorer loading and build

ROOT = Path(__file__).resolve().parent.parent
OFFSET = 1_700_000_000

PIPELINE = """name: bench-mounting
stages:
  bag: {{type: bag, path: '{bag}', progress: false}}
  mount: {{type: mount, inputs: [bag], invert: true, mag_rotation: {rotation}}}
  calibration: {{type: calibration, inputs: [mount], online: true, prompt: false, {calibration}}}
  fusion: {{type: fusion, inputs: [calibration]}}
  csv: {{type: csv, inputs: [fusion], path: '{csv}'}}
"""


def rotation_names(node):
    """The rotation names, from the mount stage's own reference (one table for the product and this tool)."""
    text = subprocess.run([str(node), 'stages', 'mount'], check=True, capture_output=True, text=True).stdout
    line = next(l for l in text.splitlines() if l.startswith('Rotation names'))
    return re.findall(r'`(\w+)`', line.split(':', 1)[1])


def heading_rmse(scorer, truth, csv, start):
    t, q_ref, movement = truth
    q = scorer.read_estimate(csv, t)
    keep = movement & (t >= start)
    return scorer.errors(q, q_ref, keep)['heading'], int(keep.sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--data', type=Path, default=ROOT.parent / 'shared/data/broad')
    ap.add_argument('--bench', type=Path, default=ROOT.parent / 'shared/bench')
    ap.add_argument('--rotations', help='comma-separated names (default: every named rotation)')
    ap.add_argument('--trials', help='comma-separated ids (default: every trial)')
    ap.add_argument('--rerun', default='yaw_90,roll_180_yaw_135,roll_90_pitch_68_yaw_293',
                    help='rotations whose file is used for a second run (default: %(default)s)')
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--no-build', action='store_true')
    a = ap.parse_args()
    node = fusion_node(not a.no_build)
    names = a.rotations.split(',') if a.rotations else rotation_names(node)
    bags = sorted(p for p in (a.data / 'bags').iterdir() if p.is_dir() or p.suffix == '.mcap')
    if a.trials:
        wanted = {f'{int(t):02d}' for t in a.trials.split(',')}
        bags = [b for b in bags if b.name[:2] in wanted]
    work = Path(tempfile.mkdtemp(prefix='bench-mounting-'))
    print(f'fusion-node: {node}; {len(names)} rotations, {len(bags)} trials\n')
    print('| trial | right | undetermined | wrong | decided after (s, median / max) '
          '| heading RMSE after the decision: auto / unrotated (deg, worst rotation) '
          '| next run from the file: largest RMSE difference to unrotated (deg) |')
    print('|---|---|---|---|---|---|---|')
    totals = dict(right=0, undetermined=0, wrong=0)
    worst_delta = worst_rerun = 0.0
    jobs = [(bag, names, a, node, work / bag.name[:2]) for bag in bags]
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for row, counts, delta, rerun_delta in pool.map(lambda job: trial(*job), jobs):
            print(row, flush=True)
            for k in totals:
                totals[k] += counts[k]
            worst_delta = max(worst_delta, delta)
            worst_rerun = max(worst_rerun, rerun_delta)
    print(f"\nall: {totals['right']} right, {totals['undetermined']} undetermined, {totals['wrong']} wrong; "
          f'largest heading RMSE increase after the decision {worst_delta:.3f} deg, in a run from the file '
          f'{worst_rerun:.4f} deg')


def trial(bag, names, a, node, work):
    """One trial's table row, its counts and its worst RMSE differences."""
    work.mkdir(parents=True, exist_ok=True)
    scorer = load_scorer(a.bench)
    rerun_names = set(a.rerun.split(',')) if a.rerun else set()
    tid = bag.name[:2]
    t_truth = scorer.read_truth(a.data / 'truth' / f'{tid}.csv.gz')
    plain = work / 'plain.csv'
    subprocess.run([str(node), 'replay', str(bag), '--csv', str(plain), '--quiet'], check=True,
                   stderr=subprocess.DEVNULL)
    right = undetermined = wrong = 0
    times, worst, worst_again = [], None, 0.0
    for name in names:
        csv = work / 'auto.csv'
        config = work / 'pipeline.yaml'
        calibration = work / 'calibration.json'
        # The previous rotation's files: fusion-node never replaces an output unasked.
        for old in (calibration, csv):
            old.unlink(missing_ok=True)
        config.write_text(PIPELINE.format(bag=bag, rotation=name, csv=csv,
                                          calibration=f"detect_rotation: true, file: '{calibration}'"))
        run = subprocess.run([str(node), '--config', str(config)], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f'{tid} {name}: fusion-node exited {run.returncode}:\n{run.stderr[-2000:]}')
        found = re.search(r"at (\d+\.\d+) s the magnetometer's mounting is (\w+)(?: \(also called ([\w, ]+)\))?",
                          run.stderr)
        if not found:
            undetermined += 1
            continue
        when, got = float(found.group(1)) - OFFSET, found.group(2)
        same = [got] + (found.group(3).split(', ') if found.group(3) else [])
        if name not in same:
            wrong += 1
            print(f'  WRONG: trial {tid}, mounted {name}, found {got}', file=sys.stderr)
            continue
        right += 1
        times.append(when)
        auto, _ = heading_rmse(scorer, t_truth, csv, when)
        ref, _ = heading_rmse(scorer, t_truth, plain, when)
        if worst is None or auto - ref > worst[0] - worst[1]:
            worst = (auto, ref, name)
        if name in rerun_names and calibration.exists():
            worst_again = max(worst_again, rerun(node, scorer, t_truth, work, bag, name, calibration))
    when = f'{np.median(times):.0f} / {max(times):.0f}' if times else '-'
    rmse = f'{worst[0]:.3f} / {worst[1]:.3f} ({worst[2]})' if worst else '-'
    row = f'| {tid} | {right} | {undetermined} | {wrong} | {when} | {rmse} | {worst_again:.4f} |'
    counts = dict(right=right, undetermined=undetermined, wrong=wrong)
    return row, counts, (worst[0] - worst[1]) if worst else 0.0, worst_again


def rerun(node, scorer, truth, work, bag, name, calibration):
    """|heading RMSE| difference between a run of the mounted bag from `calibration` (with its mounting)
    and one of the unrotated bag from the same calibration without the mounting."""
    stored = json.loads(calibration.read_text())
    plain_file = work / 'calibration-unmounted.json'
    plain_file.write_text(json.dumps({k: v for k, v in stored.items() if not k.startswith('mag_rotation')}))
    rmse = []
    for rotation, path in [(name, calibration), ('none', plain_file)]:
        csv = work / 'rerun.csv'
        csv.unlink(missing_ok=True)
        config = work / 'rerun.yaml'
        config.write_text(PIPELINE.format(bag=bag, rotation=rotation, csv=csv, calibration=f"file: '{path}'"))
        run = subprocess.run([str(node), '--config', str(config)], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f'rerun {name}: fusion-node exited {run.returncode}:\n{run.stderr[-2000:]}')
        rmse.append(heading_rmse(scorer, truth, csv, -1)[0])
    return abs(rmse[0] - rmse[1])


if __name__ == '__main__':
    main()
