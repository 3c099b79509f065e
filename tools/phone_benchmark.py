#!/usr/bin/env python3
"""Accuracy on the smartphone recordings (raw phone sensors in a person's hand): GyroCompass against the
peers, in one run.

For every trial bag in DATA/bags it runs `fusion-node replay BAG --csv ... --accuracy-csv ...` with the
defaults (raw gyro, raw magnetometer, online calibration) and with the benchmark's offline-calibrated
field (`--mag-topic /imu/mag_own --no-calibration`), two replays at a time, scores them with the shared
scorer (`phone_score.py`: heading / inclination RMSE over the scored samples), and judges the reported
95 % heading bound as `accuracy_score.py` does (coverage, mean interval score; no bound = 180), next to
the best constant bound on the same samples. Peers on the same bags (fed on the gyro's grid, the
magnetometer held between its samples, as the benchmark's README does): VQF 9D real-time (pip `vqf`,
`updateBatch`, defaults) and x-io Fusion (pip `imufusion`, library defaults), each given the raw and the
calibrated field. Prints Markdown tables: means per group (all, undisturbed, disturbed, per phone).

Usage: tools/.venv/bin/python tools/phone_benchmark.py [--data ../shared/data/phones] [--bench ../shared/bench]
                                                       [--no-build] [--no-peers] [--out DIR] [--trials A,B]
"""
import argparse, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broad_benchmark import OFFSET, fusion_node, load_scorer, write_csv  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def heading_errors(scorer, q, q_ref):
    e = scorer.qnorm(scorer.qmult(scorer.qnorm(q), scorer.qnorm(q_ref) * np.array([1, -1, -1, -1])))
    sign = np.where(e[:, 0] < 0, -1.0, 1.0)
    return np.abs(np.degrees(2 * np.arctan2(e[:, 3] * sign, np.abs(e[:, 0]))))


def bound_at(accuracy_csv, t):
    """The bound in force at each truth time (the last one reported at or before it; none = 180)."""
    acc = np.genfromtxt(accuracy_csv, delimiter=',', skip_header=1, usecols=(0, 2))
    i = np.clip(np.searchsorted(acc[:, 0] - OFFSET, t + 1e-6) - 1, 0, len(acc) - 1)
    return np.where(np.isfinite(acc[i, 1]), acc[i, 1], 180.0)


def read_phone_bag(bag):
    """Gyro and accelerometer on the gyro's stamps; each magnetometer topic held between its samples."""
    from rosbags.highlevel import AnyReader
    imu, mags = [], {'/imu/mag': [], '/imu/mag_own': []}
    with AnyReader([Path(bag)]) as reader:
        for conn, _, raw in reader.messages():
            m = reader.deserialize(raw, conn.msgtype)
            t = m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 - OFFSET
            if conn.topic == '/imu/data_raw':
                imu.append((t, m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z,
                            m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z))
            elif conn.topic in mags:
                mags[conn.topic].append((t, m.magnetic_field.x * 1e6, m.magnetic_field.y * 1e6,
                                         m.magnetic_field.z * 1e6))
    imu = np.array(sorted(imu))
    held = {}
    for topic, rows in mags.items():
        rows = np.array(sorted(rows))
        i = np.clip(np.searchsorted(rows[:, 0], imu[:, 0], side='right') - 1, 0, len(rows) - 1)
        held[topic] = np.ascontiguousarray(rows[i, 1:])
    return imu[:, 0], np.ascontiguousarray(imu[:, 1:4]), np.ascontiguousarray(imu[:, 4:7]), held


def peers(t, gyr, acc, mag):
    import vqf, imufusion
    ts = float(np.median(np.diff(t)))
    out = {'VQF 9D real-time': vqf.VQF(ts).updateBatch(gyr, acc, mag)['quat9D']}
    ahrs = imufusion.Ahrs()
    settings = imufusion.AhrsSettings()
    settings.convention = imufusion.CONVENTION_ENU
    settings.sample_rate = 1 / ts
    ahrs.set_settings(settings)
    ahrs.set_sample_period(ts)  # imufusion 1.3.3: one period for the run (the gyro's median)
    qs = np.empty((len(t), 4))
    g_deg, a_g = np.degrees(gyr), acc / 9.80665
    for i in range(len(t)):
        ahrs.update(g_deg[i], a_g[i], mag[i])
        qs[i] = ahrs.get_quaternion()
    out['x-io Fusion'] = qs
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--data', default=str(ROOT.parent / 'shared' / 'data' / 'phones'))
    ap.add_argument('--bench', default=str(ROOT.parent / 'shared' / 'bench'))
    ap.add_argument('--no-build', action='store_true')
    ap.add_argument('--no-peers', action='store_true')
    ap.add_argument('--out', help='keep the estimate CSVs here (default: a temporary folder)')
    ap.add_argument('--trials', help='comma-separated trial names (default: every bag)')
    args = ap.parse_args()

    data = Path(args.data)
    bags = sorted(p for p in (data / 'bags').iterdir() if p.is_dir())
    if args.trials:
        wanted = set(args.trials.split(','))
        bags = [b for b in bags if b.name in wanted]
    if not bags:
        sys.exit(f'no bags in {data / "bags"}')
    scorer = load_scorer(args.bench)
    node = fusion_node(not args.no_build)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix='gyrocompass-phones-'))
    out.mkdir(parents=True, exist_ok=True)

    runs = {'GyroCompass, raw sensors (defaults)': [],
            'GyroCompass, calibrated field (--mag-topic /imu/mag_own --no-calibration)':
                ['--mag-topic', '/imu/mag_own', '--no-calibration']}
    jobs = []
    for i, (label, extra) in enumerate(runs.items()):
        folder = out / f'run{i}'
        folder.mkdir(exist_ok=True)
        for bag in bags:
            jobs.append((label, bag, folder / f'{bag.name}.csv', folder / f'{bag.name}.accuracy.csv', extra))

    def replay(job):
        label, bag, quat, accuracy, extra = job
        for f in (quat, accuracy):
            f.unlink(missing_ok=True)
        r = subprocess.run([str(node), 'replay', str(bag), '--csv', str(quat), '--accuracy-csv', str(accuracy),
                            '--quiet', *extra], capture_output=True, text=True)
        # 3: loss reported (a phone's stream holes), 4: the heading found wrong for a named cause; both
        # finished with their outputs written.
        if r.returncode not in (0, 3, 4):
            sys.exit(f'replay of {bag} failed ({r.returncode}): {r.stderr[-500:]}')
        return job

    results = {label: {} for label in runs}
    bounds = {label: {} for label in runs}
    with ThreadPoolExecutor(2) as pool:
        for label, bag, quat, accuracy, _ in pool.map(replay, jobs):
            t, q_ref, movement = scorer.read_truth(data / 'truth' / f'{bag.name}.csv.gz')
            q = scorer.read_estimate(quat, t)
            results[label][bag.name] = scorer.errors(q, q_ref, movement)
            err, b = heading_errors(scorer, q, q_ref), bound_at(accuracy, t)
            ok = movement & np.isfinite(err)
            bounds[label][bag.name] = (err[ok], b[ok])

    if not args.no_peers:
        for bag in bags:
            t, gyr, acc, held = read_phone_bag(bag)
            truth_t, q_ref, movement = scorer.read_truth(data / 'truth' / f'{bag.name}.csv.gz')
            for topic, given in (('/imu/mag', 'raw field'), ('/imu/mag_own', 'calibrated field')):
                for name, q in peers(t, gyr, acc, held[topic]).items():
                    path = out / f'peer-{bag.name}.csv'
                    write_csv(path, t, q)
                    label = f'{name} (defaults), {given}'
                    results.setdefault(label, {})[bag.name] = scorer.errors(
                        scorer.read_estimate(path, truth_t), q_ref, movement)

    trials = [b.name for b in bags]
    groups = {'all': trials, 'undisturbed': [n for n in trials if '_NoDist_' in n],
              'disturbed': [n for n in trials if '_Dist_' in n]}
    for phone in ('Nexus5', 'iPhone4S', 'iPhone5'):
        groups[phone] = [n for n in trials if f'_{phone}_' in n]
    groups = {g: names for g, names in groups.items() if names}
    print(f'Mean of per-trial RMSE over {len(trials)} phone trials, heading / inclination, degrees (same scorer, '
          'same run):\n')
    print('| estimator | ' + ' | '.join(f'{g} ({len(n)})' for g, n in groups.items()) + ' |')
    print('|---|' + '---:|' * len(groups))
    for label, per in results.items():
        cells = [f"{np.mean([per[n]['heading'] for n in names]):.1f} / "
                 f"{np.mean([per[n]['inclination'] for n in names]):.1f}" for names in groups.values()]
        print(f'| {label} | ' + ' | '.join(cells) + ' |')

    print('\nThe reported 95 % heading bound (as accuracy_score.py judges it; no bound = 180 degrees):\n')
    print('| run | coverage | coverage where it claims < 90 | mean interval score | best constant bound: value, '
          'mean interval score |')
    print('|---|---:|---:|---:|---:|')
    for label, per in bounds.items():
        errs = [per[n][0] for n in trials]
        bnds = [per[n][1] for n in trials]
        e, b = np.concatenate(errs), np.concatenate(bnds)
        claim = b < 90
        scores = [np.mean(bb + 40 * np.maximum(ee - bb, 0)) for ee, bb in zip(errs, bnds)]
        constants = np.linspace(1, 180, 359)
        const_scores = [np.mean([np.mean(c + 40 * np.maximum(ee - c, 0)) for ee in errs]) for c in constants]
        k = int(np.argmin(const_scores))
        print(f'| {label} | {100 * np.mean(e <= b):.1f} % | '
              f'{100 * np.mean(e[claim] <= b[claim]) if claim.any() else float("nan"):.1f} % of '
              f'{100 * np.mean(claim):.0f} % | {np.mean(scores):.1f} | {constants[k]:.1f}, {const_scores[k]:.1f} |')

    print('\nHeading RMSE per trial, degrees:\n')
    print('| trial | ' + ' | '.join(results) + ' |')
    print('|---|' + '---:|' * len(results))
    for n in trials:
        print(f'| {n} | ' + ' | '.join(f"{results[label][n]['heading']:.1f}" for label in results) + ' |')


if __name__ == '__main__':
    main()
