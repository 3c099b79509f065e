#!/usr/bin/env python3
"""Accuracy on the BROAD recordings: GyroCompass's filters against the peers, in one run.

For every trial bag in DATA/bags it runs `fusion-node replay BAG --csv ...` (the real path: bag reader,
CDR decoding, sample alignment, the default graph of online calibration and fusion) for the Kalman and
the complementary filter, the Kalman filter alone (`--no-calibration`) and the offline
smoother (`--smooth`) with their default parameters, scores the CSVs with the shared BROAD scorer
(`broad_score.py`, mean of per-trial RMSE over the scored samples), judges the reported heading accuracy
as `accuracy_score.py` does (coverage of the true heading error, mean interval score),
and runs the peers on the same bags: VQF (pip `vqf`, real-time `updateBatch` and offline), x-io Fusion
(pip `imufusion`, library defaults) and Madgwick's MARG filter with imu_filter_madgwick's defaults (gain
0.1, zeta 0; pip `ahrs`, whose earth frame is NWU, rotated to ENU; started from the first samples as
imu_filter_madgwick starts). Prints a Markdown table.

Usage: tools/.venv/bin/python tools/broad_benchmark.py [--data ../shared/data/broad] [--bench ../shared/bench]
                                                       [--no-build] [--no-peers] [--out DIR]
"""
import argparse, importlib.util, subprocess, sys, tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OFFSET = 1_700_000_000


def load_scorer(bench_dir):
    spec = importlib.util.spec_from_file_location('broad_score', Path(bench_dir) / 'broad_score.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fusion_node(build):
    if build:
        subprocess.run(['swift', 'build', '-c', 'release', '--product', 'fusion-node'], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    path = subprocess.run(['swift', 'build', '-c', 'release', '--show-bin-path'], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    return Path(path) / 'fusion-node'


def read_bag(bag):
    """IMU and magnetometer arrays from a bag, paired by header stamp (rosbags reader)."""
    from rosbags.highlevel import AnyReader
    imu, mag = {}, {}
    with AnyReader([Path(bag)]) as reader:
        for conn, _, raw in reader.messages():
            m = reader.deserialize(raw, conn.msgtype)
            stamp = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
            if conn.msgtype == 'sensor_msgs/msg/Imu':
                imu[stamp] = (m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z,
                              m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z)
            elif conn.msgtype == 'sensor_msgs/msg/MagneticField':
                mag[stamp] = (m.magnetic_field.x * 1e6, m.magnetic_field.y * 1e6, m.magnetic_field.z * 1e6)
    stamps = np.array(sorted(imu))
    a = np.array([imu[s] for s in stamps])
    m = np.array([mag.get(s, (np.nan,) * 3) for s in stamps])
    return stamps * 1e-9 - OFFSET, np.ascontiguousarray(a[:, :3]), np.ascontiguousarray(a[:, 3:]), np.ascontiguousarray(m)


def write_csv(path, t, q):
    with open(path, 'w') as f:
        f.write('t,qw,qx,qy,qz\n')
        np.savetxt(f, np.column_stack([t, q]), delimiter=',', fmt='%.9f')


def coverage(scorer, truth_dir, tid, quat_csv, accuracy_csv):
    """The reported 95 % heading bound judged as ../shared/bench/accuracy_score.py judges it: the bound
    in force at each truth sample (the last one reported at or before it; none = 180 degrees), over the
    scored samples. Returns (samples, samples covered, mean interval score: bound + 40 x excess)."""
    t, q_ref, movement = scorer.read_truth(Path(truth_dir) / 'truth' / f'{tid}.csv.gz')
    q = scorer.read_estimate(quat_csv, t)
    acc = np.genfromtxt(accuracy_csv, delimiter=',', skip_header=1, usecols=(0, 2))
    i = np.clip(np.searchsorted(acc[:, 0] - OFFSET, t + 1e-6) - 1, 0, len(acc) - 1)
    bound = np.where(np.isfinite(acc[i, 1]), acc[i, 1], 180.0)
    e = scorer.qnorm(scorer.qmult(scorer.qnorm(q), scorer.qnorm(q_ref) * np.array([1, -1, -1, -1])))
    sign = np.where(e[:, 0] < 0, -1.0, 1.0)
    heading_error = np.abs(np.degrees(2 * np.arctan2(e[:, 3] * sign, np.abs(e[:, 0]))))
    scored = movement & np.isfinite(heading_error)
    err, b = heading_error[scored], bound[scored]
    return int(scored.sum()), int((err <= b).sum()), float(np.mean(b + 40 * np.maximum(err - b, 0)))


def madgwick(Madgwick, ts, gyr, acc, mag, gain=0.1):
    """Madgwick's MARG update as imu_filter_madgwick runs it, in ENU. It starts from the orientation
    the first samples give (imu_filter_madgwick computes it from the first accelerometer and
    magnetometer readings: here, the filter settled on the first sample at a high gain)."""
    f = Madgwick(frequency=1 / ts, gain=gain)
    settle = Madgwick(frequency=1 / ts, gain=1.0)
    q = np.array([1.0, 0, 0, 0])
    for _ in range(2000):
        q = settle.updateMARG(q, gyr=np.zeros(3), acc=acc[0], mag=mag[0] * 1e9)
    out = np.empty((len(gyr), 4))
    for i in range(len(gyr)):
        q = f.updateMARG(q, gyr=gyr[i], acc=acc[i], mag=mag[i] * 1e9)
        out[i] = q
    # ahrs' earth frame is north-west-up: a quarter turn about up makes it ENU.
    s = np.sqrt(0.5)
    w, x, y, z = out.T
    return np.stack([s * (w - z), s * (x - y), s * (x + y), s * (z + w)], axis=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--data', default=str(ROOT.parent / 'shared' / 'data' / 'broad'))
    ap.add_argument('--bench', default=str(ROOT.parent / 'shared' / 'bench'))
    ap.add_argument('--no-build', action='store_true')
    ap.add_argument('--no-peers', action='store_true')
    ap.add_argument('--out', help='keep the estimate CSVs here (default: a temporary folder)')
    ap.add_argument('--sensor-latency', type=float, default=None,
                    help='also run the Kalman filter with this IMU output latency (seconds), as a separate, labelled row')
    args = ap.parse_args()

    data = Path(args.data)
    bags = sorted(p for p in (data / 'bags').iterdir() if p.is_dir())
    if not bags:
        sys.exit(f'no bags in {data / "bags"}')
    scorer = load_scorer(args.bench)
    node = fusion_node(not args.no_build)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix='gyrocompass-broad-'))
    out.mkdir(parents=True, exist_ok=True)

    # name -> (filter, extra replay arguments); replay runs the default graph (online calibration, fusion),
    # the same processing as the files in Pipelines/ (tools/tests/test_default_graph.py holds that).
    estimators = {'GyroCompass Kalman': ('kalman', []), 'GyroCompass complementary': ('complementary', []),
                  'GyroCompass Kalman, fusion alone (replay --no-calibration)': ('kalman', ['--no-calibration']),
                  'GyroCompass Kalman smoother (replay --smooth, offline)': ('kalman', ['--smooth'])}
    if args.sensor_latency is not None:
        latency = ['--sensor-latency', str(args.sensor_latency)]
        estimators[f'GyroCompass Kalman, --sensor-latency {args.sensor_latency:g} (a sensor setting, not a default)'] = \
            ('kalman', latency)
        estimators[f'GyroCompass Kalman smoother, --sensor-latency {args.sensor_latency:g} (offline)'] = \
            ('kalman', ['--smooth'] + latency)
    results = {name: {} for name in estimators}
    cover = {name: [0, 0, []] for name in estimators}
    trials = []
    for bag in bags:
        tid = bag.name[:2]
        trials.append(tid)
        for name, (kind, extra) in estimators.items():
            folder = out / '-'.join([kind] + [a.strip('-') for a in extra])
            folder.mkdir(exist_ok=True)
            quat, accuracy = folder / f'{tid}.csv', folder / f'{tid}.accuracy.csv'
            r = subprocess.run([str(node), 'replay', str(bag), '--filter', kind, '--csv', str(quat),
                                '--accuracy-csv', str(accuracy), '--quiet', *extra])
            # 4: finished, the heading found wrong for a named cause from some time on (outputs complete).
            if r.returncode not in (0, 4):
                sys.exit(f'replay of {bag} ({name}) failed with exit {r.returncode}')
            if r.returncode == 4:
                print(f'{name}, {tid}: exit 4 (the heading was found wrong for a cause named above)', file=sys.stderr)
            t, q_ref, movement = scorer.read_truth(data / 'truth' / f'{tid}.csv.gz')
            results[name][tid] = scorer.errors(scorer.read_estimate(quat, t), q_ref, movement)
            n, covered, score = coverage(scorer, data, tid, quat, accuracy)
            cover[name][0] += n; cover[name][1] += covered; cover[name][2].append(score)
            results[name][tid]['coverage'] = covered / n if n else float('nan')

    if not args.no_peers:
        import vqf, imufusion
        from ahrs.filters import Madgwick
        madgwick_name = 'Madgwick MARG with imu_filter_madgwick defaults (gain 0.1, zeta 0; pip ahrs)'
        peers = {'VQF 9D real-time (updateBatch, defaults)': {}, 'VQF 9D offline (non-causal reference)': {},
                 'x-io Fusion (imufusion, library defaults)': {}, madgwick_name: {}}
        for bag in bags:
            tid = bag.name[:2]
            t, gyr, acc, mag = read_bag(bag)
            ts = float(np.median(np.diff(t)))
            truth_t, q_ref, movement = scorer.read_truth(data / 'truth' / f'{tid}.csv.gz')
            estimates = {}
            v = vqf.VQF(ts)
            estimates['VQF 9D real-time (updateBatch, defaults)'] = v.updateBatch(gyr, acc, mag)['quat9D']
            estimates['VQF 9D offline (non-causal reference)'] = vqf.offlineVQF(gyr, acc, mag, ts, None)['quat9D']
            # imufusion 1.3.3: library defaults, only the convention (ENU) and sample rate set.
            ahrs = imufusion.Ahrs()
            settings = imufusion.AhrsSettings()
            settings.convention = imufusion.CONVENTION_ENU
            settings.sample_rate = 1 / ts
            ahrs.set_settings(settings)
            ahrs.set_sample_period(ts)
            qs = np.empty((len(t), 4))
            g_deg = np.degrees(gyr)
            a_g = acc / 9.80665
            for i in range(len(t)):
                ahrs.update(g_deg[i], a_g[i], mag[i])
                qs[i] = ahrs.get_quaternion()
            estimates['x-io Fusion (imufusion, library defaults)'] = qs
            estimates[madgwick_name] = madgwick(Madgwick, ts, gyr, acc, mag)
            for name, q in estimates.items():
                path = out / f'peer-{tid}.csv'
                write_csv(path, t, q)
                peers[name][tid] = scorer.errors(scorer.read_estimate(path, truth_t), q_ref, movement)
        results.update(peers)

    metrics = ('total', 'heading', 'inclination')
    print(f'Mean of per-trial RMSE over {len(trials)} BROAD trials, degrees (same scorer, same run); the reported '
          '95 % heading accuracy judged as ../shared/bench/accuracy_score.py judges it:\n')
    print('| estimator | total | heading | inclination | accuracy covers the error | mean interval score |')
    print('|---|---:|---:|---:|---:|---:|')
    for name, per in results.items():
        means = [np.mean([per[t][m] for t in trials]) for m in metrics]
        n, covered, scores = cover.get(name, [0, 0, []])
        cov = f'{100 * covered / n:.1f} % of {n} samples' if n else 'n/a'
        score = f'{np.mean(scores):.2f}' if scores else 'n/a'
        print(f'| {name} | ' + ' | '.join(f'{x:.2f}' for x in means) + f' | {cov} | {score} |')
    for metric in ('heading', 'inclination'):
        print(f'\n{metric.capitalize()} RMSE per trial, degrees:\n')
        print('| estimator | ' + ' | '.join(trials) + ' |')
        print('|---|' + '---:|' * len(trials))
        for name, per in results.items():
            print(f'| {name} | ' + ' | '.join(f'{per[t][metric]:.2f}' for t in trials) + ' |')
    for name in estimators:
        if not cover[name][2]:
            continue
        print(f'\n{name}: accuracy coverage per trial: ' +
              ', '.join(f'{t} {100 * results[name][t]["coverage"]:.0f} %' for t in trials) +
              '; interval score per trial: ' + ', '.join(f'{s:.1f}' for s in cover[name][2]))


if __name__ == '__main__':
    main()
