"""Two runs of the same bags side by side: the bags that changed the most, and with truth files
the heading RMSE per bag and per group."""
from __future__ import annotations

import gzip
import math
import os
import sys
from pathlib import Path

import numpy as np

from .bags import BAG_SUFFIXES, FleetError, robot_of
from .run import _table_write, read_summary

# Where relative truth times start: 1,700,000,000 s (2023-11-14 22:13:20 UTC), the BROAD and phone
# recordings' first stamp and the simulator's.
TRUTH_EPOCH_S = 1_700_000_000.0

def _outputs(directory: Path, name: str):
    """A bag's per-sample outputs of a run: {'t', 'heading_deg', 'quaternion'} (what it has of them)."""
    base = directory / name
    got = {}
    if (base / 'accuracy.parquet').is_file() or (base / 'orientation.parquet').is_file():
        import pyarrow.parquet as pq
        if (base / 'accuracy.parquet').is_file():
            a = pq.read_table(base / 'accuracy.parquet')
            got['t'] = a['t'].to_numpy()
            got['heading_deg'] = a['heading_deg'].to_numpy()
        if (base / 'orientation.parquet').is_file():
            o = pq.read_table(base / 'orientation.parquet')
            got['t'] = o['t'].to_numpy()
            got['quaternion'] = np.column_stack([o[c].to_numpy() for c in ('qw', 'qx', 'qy', 'qz')])
        return got
    if (base / 'accuracy.csv').is_file():
        a = np.genfromtxt(base / 'accuracy.csv', delimiter=',', skip_header=1, usecols=(0, 1), ndmin=2)
        got['t'], got['heading_deg'] = a[:, 0], a[:, 1]
    if (base / 'orientation.csv').is_file():
        o = np.loadtxt(base / 'orientation.csv', delimiter=',', skiprows=1, ndmin=2)
        got['t'], got['quaternion'] = o[:, 0], o[:, 1:5]
    return got


def _heading_of(q):
    """The yaw (degrees) the quaternions carry, for the difference of two runs without heading outputs."""
    w, x, y, z = q.T
    return np.degrees(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def _wrapped(d):
    return (d + 180.0) % 360.0 - 180.0


def read_truth(path):
    """A truth CSV (t,qw,qx,qy,qz,movement; gzip when it ends in .gz), as the BROAD and phone recordings
    and the simulator's truth_path write it: (t, quaternions, movement mask)."""
    opener = gzip.open if str(path).endswith('.gz') else open
    with opener(path, 'rt') as f:
        a = np.loadtxt(f, delimiter=',', skiprows=1, ndmin=2)
    if a.shape[1] < 5:
        raise FleetError(f'{path}: expected columns t,qw,qx,qy,qz[,movement]')
    movement = a[:, 5].astype(bool) if a.shape[1] > 5 else np.ones(len(a), bool)
    return a[:, 0], a[:, 1:5], movement


def heading_rmse(t_est, q_est, t_ref, q_ref, movement) -> float:
    """The BROAD heading error (Laidig et al. 2021: the rotation about the vertical of q_est conj(q_ref)),
    RMSE in degrees over the reference samples with movement; estimates interpolated (normalised linear,
    close to slerp at IMU rates) onto the reference's times. Reference times below 1e9 s are seconds
    after TRUTH_EPOCH_S, the stamp at which the BROAD and phone bags and the simulator's recordings start
    (their truth files' convention; a phone's first IMU sample may come later than that)."""
    if len(t_est) == 0:
        return math.nan
    if t_ref.max(initial=0) < 1e9 <= t_est[0]:
        t_ref = t_ref + TRUTH_EPOCH_S
    inside = (t_ref >= t_est[0]) & (t_ref <= t_est[-1]) & movement & np.isfinite(q_ref).all(axis=1)
    if not inside.any():
        return math.nan
    tr, qr = t_ref[inside], q_ref[inside]
    i1 = np.clip(np.searchsorted(t_est, tr, side='right'), 1, len(t_est) - 1)
    i0 = i1 - 1
    dt = t_est[i1] - t_est[i0]
    s = np.clip(np.where(dt > 0, (tr - t_est[i0]) / np.where(dt > 0, dt, 1), 0), 0, 1)[:, None]
    q0, q1 = q_est[i0], q_est[i1]
    q1 = np.where(np.sum(q0 * q1, axis=1, keepdims=True) < 0, -q1, q1)
    q = (1 - s) * q0 + s * q1
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    qr = qr / np.linalg.norm(qr, axis=1, keepdims=True)
    # e = q * conj(qr): only its w and z are needed.
    rw, rx, ry, rz = qr.T * np.array([[1], [-1], [-1], [-1]])
    w, x, y, z = q.T
    ew = w * rw - x * rx - y * ry - z * rz
    ez = w * rz + x * ry - y * rx + z * rw
    err = 2 * np.arctan2(np.abs(ez), np.abs(ew))
    return float(np.degrees(np.sqrt(np.mean(err ** 2))))


def _truth_for(bag_path: str, pattern: str | None):
    bag = Path(bag_path)
    stem = bag.name[:-len(bag.suffix)] if bag.suffix in BAG_SUFFIXES else bag.name
    fields = dict(stem=stem, prefix=stem.split('_', 1)[0], bag=str(bag), dir=str(bag.parent))
    candidates = ([pattern.format(**fields)] if pattern else
                  [str(bag.parent / f'{stem}.truth.csv.gz'), str(bag.parent / f'{stem}.truth.csv')])
    for c in candidates:
        p = Path(c) if os.path.isabs(c) else bag.parent / c
        if p.is_file():
            return p
    return None


def compare(a, b, *, by: str = 'heading', top: int = 20, truth: str | None = None, robot: str | None = None,
            table: str | os.PathLike | None = None, out=sys.stdout) -> list[dict]:
    """The bags whose heading (by='heading': RMS difference of the two runs' headings), bound
    (by='bound': median bound) or trusted share (by='trusted') changed the most between runs A and B;
    with truth files (a pattern with {stem}, {prefix}, {bag}, {dir}; default STEM.truth.csv[.gz] beside the bag), the
    heading RMSE of each run per bag and per group (robot). {prefix} is the stem up to its first '_' (a
    BROAD trial's number: '../truth/{prefix}.csv.gz'). Prints the `top` bags and, with truth, the
    groups; writes every row to `table` (default B/compare.csv). Returns the rows."""
    if by not in ('heading', 'bound', 'trusted'):
        raise FleetError(f"by: {by!r} is not heading, bound or trusted")
    if truth:
        try:
            truth.format(stem='s', prefix='p', bag='b', dir='d')
        except (KeyError, IndexError, ValueError) as e:
            raise FleetError(f'truth: {truth!r}: {e!r} (the pattern takes {{stem}}, {{prefix}}, {{bag}}, '
                             '{{dir}})') from None
    a, b = Path(a), Path(b)
    rows_a = {r['bag']: r for r in read_summary(a)}
    rows_b = {r['bag']: r for r in read_summary(b)}
    rows = []
    for name in sorted(set(rows_a) | set(rows_b)):
        ra, rb = rows_a.get(name), rows_b.get(name)
        row = {'bag': name, 'robot': robot_of(name, robot) if robot else (rb or ra)['robot'],
               'in': 'both' if ra and rb else ('A only' if ra else 'B only'),
               'status_a': ra['status'] if ra else '', 'status_b': rb['status'] if rb else ''}
        row['heading_change_rms_deg'] = math.nan
        for k in ('bound_p50_deg', 'trusted_share'):
            va = ra[k] if ra else math.nan
            vb = rb[k] if rb else math.nan
            row[f'{k}_a'], row[f'{k}_b'], row[f'{k}_change'] = va, vb, vb - va
        row['heading_rmse_a_deg'] = row['heading_rmse_b_deg'] = math.nan
        if ra and rb and ra['status'] != 'failed' and rb['status'] != 'failed':
            oa, ob = _outputs(a, name), _outputs(b, name)
            ha = oa.get('heading_deg', _heading_of(oa['quaternion']) if 'quaternion' in oa else None)
            hb = ob.get('heading_deg', _heading_of(ob['quaternion']) if 'quaternion' in ob else None)
            if ha is not None and hb is not None:
                # The same bag gives the same sample times; match them within a microsecond all the same.
                j = np.clip(np.searchsorted(ob['t'], oa['t']), 0, len(ob['t']) - 1)
                same = np.abs(ob['t'][j] - oa['t']) < 1e-6
                d = _wrapped(hb[j[same]] - ha[same])
                d = d[np.isfinite(d)]
                row['heading_change_rms_deg'] = float(np.sqrt(np.mean(d ** 2))) if len(d) else math.nan
            reference = _truth_for(rb['path'] or ra['path'], truth)
            if reference is not None:
                tr, qr, moving = read_truth(reference)
                for side, o in (('a', oa), ('b', ob)):
                    if 'quaternion' in o:
                        row[f'heading_rmse_{side}_deg'] = heading_rmse(o['t'], o['quaternion'], tr, qr, moving)
        row['heading_rmse_change_deg'] = row['heading_rmse_b_deg'] - row['heading_rmse_a_deg']
        rows.append(row)
    key = {'heading': 'heading_change_rms_deg', 'bound': 'bound_p50_deg_change', 'trusted': 'trusted_share_change'}[by]
    ranked = sorted(rows, key=lambda r: -abs(r[key]) if math.isfinite(r[key]) else math.inf)
    columns = list(rows[0].keys()) if rows else ['bag']
    table = Path(table) if table else b / 'compare.csv'
    _table_write(table, [{k: ('' if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                         for r in ranked], columns)

    def f(v, digits=2):
        return '-' if not isinstance(v, float) or math.isnan(v) else f'{v:.{digits}f}'
    print(f'{len(rows)} bags; the {min(top, len(rows))} that changed the most by {by} (A = {a}, B = {b}):', file=out)
    print(f'{"bag":40s} {"heading RMS diff":>16s} {"bound p50 A->B":>16s} {"trusted A->B":>14s} '
          f'{"truth RMSE A->B":>16s}', file=out)
    for r in ranked[:top]:
        print(f'{r["bag"][:40]:40s} {f(r["heading_change_rms_deg"]):>16s} '
              f'{f(r["bound_p50_deg_a"], 1) + "->" + f(r["bound_p50_deg_b"], 1):>16s} '
              f'{f(r["trusted_share_a"]) + "->" + f(r["trusted_share_b"]):>14s} '
              f'{f(r["heading_rmse_a_deg"]) + "->" + f(r["heading_rmse_b_deg"]):>16s}', file=out)
    scored = [r for r in rows if math.isfinite(r['heading_rmse_a_deg']) or math.isfinite(r['heading_rmse_b_deg'])]
    if scored:
        print('heading RMSE against the truth, mean per group (degrees):', file=out)
        groups = sorted({r['robot'] for r in scored})
        width = max(len(g or '(no group)') for g in groups + ['all'])
        for g in groups + ['all']:
            members = [r for r in scored if g == 'all' or r['robot'] == g]
            ma = np.nanmean([r['heading_rmse_a_deg'] for r in members])
            mb = np.nanmean([r['heading_rmse_b_deg'] for r in members])
            count = f'{len(members)} bag' + ('' if len(members) == 1 else 's')
            print(f'  {g or "(no group)":{width}s} {count:>9s}  A {f(float(ma))}  B {f(float(mb))}', file=out)
    missing = [r['bag'] for r in rows if r['in'] != 'both']
    if missing:
        more = ' ...' if len(missing) > 10 else ''
        print(f'{len(missing)} bag(s) in one run only: ' + ', '.join(missing[:10]) + more,
              file=out)
    print(f'table: {table}', file=out)
    return ranked
