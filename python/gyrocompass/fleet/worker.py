"""One bag on a Dask worker: replayed (unless its row is up to date), its outputs written under
temporary names and renamed, its summary row measured from the replay's columns, flags and log."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np

from .. import FLAGS, _replay, bag_topics
from .bags import _hash_bag

# One row per bag: what it is, what the replay found, and how to know it is up to date.
SUMMARY_COLUMNS = [
    'bag', 'robot', 'status', 'error', 'start_time_s', 'duration_s', 'imu_samples',
    'bound_p50_deg', 'bound_p95_deg', 'bound_claimed_share',
    'trusted_share', 'disturbed_share', 'uncalibrated_share', 'gyro_only_share', 'gnss_aided_share',
    'gnss_disagree_share', 'gnss_topic',
    'calibration_at_s', 'calibration_model', 'hard_iron_x_ut', 'hard_iron_y_ut', 'hard_iron_z_ut',
    'hard_iron_sigma_ut', 'field_ut', 'losses', 'known_wrong', 'notes', 'replay_s', 'worker', 'key', 'version',
    'path',
]

# No bound is a bound of 180 degrees (accuracy_score.py's rule): a heading that could be anything.
NO_BOUND_DEG = 180.0

_ACCEPTED = re.compile(r'calibration: at (?P<t>[-\d.]+) s accepted an? (?P<model>[\w-]+) fit, offset '
                       r'(?P<x>[-\d.]+), (?P<y>[-\d.]+), (?P<z>[-\d.]+) uT, field (?P<f>[-\d.]+) uT, '
                       r'rms (?P<rms>[\d.]+)')
_IN_FORCE = re.compile(r'in force at the end: an? (?P<model>[\w-]+) fit, offset (?P<x>[-\d.]+), (?P<y>[-\d.]+), '
                       r'(?P<z>[-\d.]+) uT, field (?P<f>[-\d.]+) uT, rms (?P<rms>[\d.]+) uT')

def _atomic_write(path: Path, write) -> None:
    """`write(temporary_path)`, then a rename: the file is whole or absent."""
    partial = path.with_name(f'.{path.name}.partial-{os.getpid()}')
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        if partial.exists():
            partial.unlink()


def _share(mask, n):
    return float(np.count_nonzero(mask)) / n if n else math.nan


def _row_from_replay(columns, reports, log, losses, known_wrong):
    """The summary's measurements of one replay."""
    t, bound, flags = columns['t'], columns['accuracy_deg'], columns['flags']
    n = len(t)
    row = {'imu_samples': n, 'losses': losses, 'known_wrong': known_wrong}
    row['start_time_s'] = float(t[0]) if n else math.nan
    row['duration_s'] = float(t[-1] - t[0]) if n else math.nan
    claimed = np.isfinite(bound)
    full = np.where(claimed, bound, NO_BOUND_DEG)
    row['bound_p50_deg'] = float(np.percentile(full, 50)) if n else math.nan
    row['bound_p95_deg'] = float(np.percentile(full, 95)) if n else math.nan
    row['bound_claimed_share'] = _share(claimed, n)
    rejected = (flags & FLAGS['magnetometer_rejected']) != 0
    gyro_only = (flags & FLAGS['gyro_only']) != 0
    uncalibrated = (flags & FLAGS['magnetometer_uncalibrated']) != 0
    starting = (flags & FLAGS['initialising']) != 0
    row['trusted_share'] = _share(~(rejected | gyro_only | uncalibrated | starting), n)
    row['disturbed_share'] = _share(rejected, n)
    row['uncalibrated_share'] = _share(uncalibrated, n)
    row['gyro_only_share'] = _share(gyro_only, n)
    gnss = (flags & (FLAGS['gnss_aided'] | FLAGS['compass_gnss_disagree'])) != 0
    row['gnss_aided_share'] = _share((flags & FLAGS['gnss_aided']) != 0, n) if gnss.any() else math.nan
    row['gnss_disagree_share'] = (_share((flags & FLAGS['compass_gnss_disagree']) != 0, n) if gnss.any()
                                  else math.nan)
    fits = [m for m in (_ACCEPTED.search(line) for line in log) if m]
    row['calibration_at_s'] = float(fits[0]['t']) - row['start_time_s'] if fits else math.nan
    final = next((m for m in (_IN_FORCE.search(r) for r in reports) if m), None)
    if final:
        hard_iron = np.array([float(final['x']), float(final['y']), float(final['z'])])
        row.update(calibration_model=final['model'], field_ut=float(final['f']),
                   hard_iron_x_ut=hard_iron[0], hard_iron_y_ut=hard_iron[1], hard_iron_z_ut=hard_iron[2])
        # How well the bag pins its hard iron: the spread of the offsets it accepted after its first
        # (the refits of the same iron), and no better than the fit's rms residual over the number of
        # independent axes: residual field structure the sphere cannot explain moves the centre by about
        # that much.
        later = np.array([[float(m['x']), float(m['y']), float(m['z'])] for m in fits[1:]]).reshape(-1, 3)
        spread = float(np.sqrt(np.sum(np.var(later, axis=0)))) if len(later) > 1 else 0.0
        row['hard_iron_sigma_ut'] = max(spread, float(final['rms']) / math.sqrt(3))
    else:
        row.update(calibration_model='', field_ut=math.nan, hard_iron_x_ut=math.nan, hard_iron_y_ut=math.nan,
                   hard_iron_z_ut=math.nan, hard_iron_sigma_ut=math.nan)
    row['notes'] = ' | '.join(reports) if (losses or known_wrong) else ''
    return row


def _write_parquet(path: Path, table: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    _atomic_write(path, lambda p: pq.write_table(pa.table(table), p))


def _outputs_present(directory: Path, outputs, fmt) -> bool:
    return all((directory / f'{o}.{fmt}').is_file() for o in outputs)


def _worker_address() -> str:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return ''  # called outside a Dask worker


def replay_bag(task: dict) -> dict:
    """One bag, on a worker: replayed unless its row is up to date; returns its summary row (never
    raises for the bag's own faults: they are the row's error)."""
    bag, out = Path(task['path']), Path(task['output']) / task['name']
    outputs, fmt = task['outputs'], task['format']
    row = {c: '' for c in SUMMARY_COLUMNS}
    row.update(bag=task['name'], robot=task['robot'], path=str(bag), version=task['version'])
    started = time.perf_counter()
    try:
        digest = hashlib.blake2b(digest_size=16)
        digest.update(json.dumps([task['options'], outputs, fmt, task['version'], task.get('depends', ''),
                                  task.get('gnss_auto', False)]).encode())
        _hash_bag(bag, digest)
        key = digest.hexdigest()
        row['key'] = key
        previous = out / 'summary.json'
        if previous.is_file():
            try:
                old = json.loads(previous.read_text())
            except ValueError:
                old = {}
            if old.get('key') == key and not old.get('error') and _outputs_present(out, outputs, fmt):
                # What names the bag may have changed since (another --robot, a moved directory).
                old.update(status='up to date', bag=task['name'], robot=task['robot'], path=str(bag))
                return old
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob('.*.partial-*'):
            stale.unlink()  # left by a worker that was lost mid-bag
        options = task['options']
        if task.get('gnss_auto'):
            # The bag's own GNSS velocity topic, as `replay --velocity-topic TOPIC` would be told it.
            velocity = [name for name, kind, _ in bag_topics(bag)
                        if kind == 'geometry_msgs/msg/TwistWithCovarianceStamped']
            if velocity:
                options += ('\n' if options else '') + f'bag.velocity_topic: {json.dumps(velocity[0])}'
                row['gnss_topic'] = velocity[0]
        q_csv = out / 'orientation.csv' if ('orientation' in outputs and fmt == 'csv') else None
        a_csv = out / 'accuracy.csv' if ('accuracy' in outputs and fmt == 'csv') else None
        q_part = q_csv and q_csv.with_name(f'.orientation.csv.partial-{os.getpid()}')
        a_part = a_csv and a_csv.with_name(f'.accuracy.csv.partial-{os.getpid()}')
        try:
            columns, reports, log, losses, known_wrong = _replay(str(bag), options, q_part, a_part)
            if q_part:
                os.replace(q_part, q_csv)
            if a_part:
                os.replace(a_part, a_csv)
        finally:
            for p in (q_part, a_part):
                if p and p.exists():
                    p.unlink()
        if fmt == 'parquet':
            q = columns['quaternion']
            if 'orientation' in outputs:
                _write_parquet(out / 'orientation.parquet', {'t': columns['t'], 'qw': q[:, 0], 'qx': q[:, 1],
                                                             'qy': q[:, 2], 'qz': q[:, 3]})
            if 'accuracy' in outputs:
                _write_parquet(out / 'accuracy.parquet', {'t': columns['t'], 'heading_deg': columns['heading_deg'],
                                                          'accuracy_deg': columns['accuracy_deg'],
                                                          'flags': columns['flags']})
        row.update(_row_from_replay(columns, reports, log, losses, known_wrong))
        row['status'] = 'replayed'
    except Exception as e:  # noqa: BLE001 -- a bag's fault is its row's error, never the run's end
        row['status'] = 'failed'
        row['error'] = f'{type(e).__name__}: {e}'
    row['replay_s'] = round(time.perf_counter() - started, 4)
    row['worker'] = _worker_address()
    # Ten significant digits: more than any of these measurements resolves, and a readable table.
    row = {k: (None if not math.isfinite(v) else float(f'{v:.10g}')) if isinstance(v, float) else v
           for k, v in row.items()}
    try:
        out.mkdir(parents=True, exist_ok=True)
        _atomic_write(out / 'summary.json', lambda p: p.write_text(json.dumps(row, indent=1)))
    except OSError as e:
        row['status'], row['error'] = 'failed', f'{type(e).__name__}: {e} (writing its summary row)'
    return row
