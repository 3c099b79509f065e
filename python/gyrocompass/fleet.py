"""A fleet's recordings: replay many bags on a Dask cluster, compare two runs, follow each robot's iron.

    from gyrocompass import fleet
    table = fleet.run(['bags/'], 'out/')                       # a local cluster, a process per core
    table = fleet.run(['bags/'], 'out/', scheduler='tcp://host:8786', options={'filter': 'complementary'})
    fleet.compare('out-a/', 'out-b/')                          # the bags that changed the most
    fleet.health('out/')                                       # hard iron per robot, jumps listed

`fusion-node fleet` is this module's command line (`python -m gyrocompass.fleet`). Each bag is replayed by a
Dask worker calling the library (the graph and estimates of `fusion-node replay`); per bag, OUT/BAG/ holds
what was asked (orientation.csv and accuracy.csv, byte for byte what `fusion-node replay --csv
--accuracy-csv` writes, or .parquet with pyarrow) and summary.json, one row of OUT/summary.csv. Needs
`dask` and `distributed` (pip install 'gyrocompass[fleet]'); pyarrow for Parquet.

Nothing lost, nothing repeated: a bag that fails is a row with its error; a row's `key` hashes the bag's
bytes, the options (with a calibration file's bytes), the outputs asked for and the library's version,
and a re-run skips a bag whose row holds the same key (its outputs written before the row); every file is
written under a temporary name and renamed; a worker lost mid-bag is replaced and its bag replayed
elsewhere (Dask's scheduler does that).
"""
from __future__ import annotations

import argparse
import csv
import glob
import gzip
import hashlib
import io
import json
import math
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from . import FLAGS, _native, _replay, _yaml, version

__all__ = ['run', 'compare', 'health', 'find_bags', 'SUMMARY_COLUMNS']

BAG_SUFFIXES = ('.mcap', '.db3')

# One row per bag: what it is, what the replay found, and how to know it is up to date.
SUMMARY_COLUMNS = [
    'bag', 'robot', 'status', 'error', 'start_time_s', 'duration_s', 'imu_samples',
    'bound_p50_deg', 'bound_p95_deg', 'bound_claimed_share',
    'trusted_share', 'disturbed_share', 'uncalibrated_share', 'gyro_only_share', 'gnss_aided_share',
    'gnss_disagree_share',
    'calibration_at_s', 'calibration_model', 'hard_iron_x_ut', 'hard_iron_y_ut', 'hard_iron_z_ut',
    'hard_iron_sigma_ut', 'field_ut', 'losses', 'known_wrong', 'notes', 'replay_s', 'worker', 'key', 'version',
    'path',
]

# No bound is a bound of 180 degrees (accuracy_score.py's rule): a heading that could be anything.
NO_BOUND_DEG = 180.0

_ACCEPTED = re.compile(r'calibration: at (?P<t>[-\d.]+) s accepted an? (?P<model>[\w-]+) fit, offset '
                       r'(?P<x>[-\d.]+), (?P<y>[-\d.]+), (?P<z>[-\d.]+) uT, field (?P<f>[-\d.]+) uT, rms (?P<rms>[\d.]+)')
_IN_FORCE = re.compile(r'in force at the end: an? (?P<model>[\w-]+) fit, offset (?P<x>[-\d.]+), (?P<y>[-\d.]+), '
                       r'(?P<z>[-\d.]+) uT, field (?P<f>[-\d.]+) uT, rms (?P<rms>[\d.]+) uT')


class FleetError(Exception):
    """A fleet run asked for something it cannot do (no bags, an output directory that is a file, ...)."""


# ---------------------------------------------------------------------------------------------- bags

def _is_bag_directory(path: Path) -> bool:
    return (path / 'metadata.yaml').is_file()


def _bags_under(directory: Path):
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        if _is_bag_directory(here):
            dirs[:] = []
            yield here
            continue
        dirs.sort()
        for name in sorted(files):
            if name.endswith(BAG_SUFFIXES):
                yield here / name


def find_bags(inputs) -> list[Path]:
    """The bags named by `inputs`: directories (searched for .mcap and .db3 files and rosbag2
    directories), globs, bag files, and text files listing one path per line (relative to the file; '#'
    starts a comment). Raises FleetError naming an input that gives no bag or does not exist."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    found = []
    for given in inputs:
        text = os.fspath(given)
        path = Path(text)
        if any(c in text for c in '*?['):
            matches = [Path(m) for m in sorted(glob.glob(text, recursive=True))]
            bags = [m for m in matches if m.suffix in BAG_SUFFIXES or _is_bag_directory(m)]
            if not bags:
                raise FleetError(f'{text}: the pattern matches no bag')
            found += bags
        elif path.is_dir():
            bags = list(_bags_under(path))
            if not bags:
                raise FleetError(f'{text}: no bag in this directory (.mcap, .db3 or a rosbag2 directory)')
            found += bags
        elif path.is_file() and path.suffix in BAG_SUFFIXES:
            found.append(path)
        elif path.is_file():
            listed = []
            for number, line in enumerate(path.read_text().splitlines(), 1):
                entry = line.split('#', 1)[0].strip()
                if not entry:
                    continue
                bag = (path.parent / entry) if not os.path.isabs(entry) else Path(entry)
                if not bag.exists():
                    raise FleetError(f'{text}:{number}: {entry}: no such bag')
                listed.append(bag)
            if not listed:
                raise FleetError(f'{text}: lists no bag')
            found += listed
        else:
            raise FleetError(f'{text}: no such file or directory')
    unique, seen = [], set()
    for bag in found:
        resolved = bag.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append(resolved)
    return unique


def _names(bags: list[Path]) -> list[str]:
    """Each bag's name in the output: its path below the bags' common directory, without the suffix."""
    if len(bags) == 1:
        root = bags[0].parent
    else:
        root = Path(os.path.commonpath([b.parent for b in bags]))
    relative = [bag.relative_to(root).as_posix() for bag in bags]
    stems = [rel[:-len(bag.suffix)] if bag.suffix in BAG_SUFFIXES else rel for rel, bag in zip(relative, bags)]
    # Two bags that differ only in their suffix (run.mcap, run.db3) keep it, so neither overwrites the other.
    taken = {}
    for stem in stems:
        taken[stem] = taken.get(stem, 0) + 1
    return [rel if taken[stem] > 1 else stem for rel, stem in zip(relative, stems)]


def robot_of(name: str, pattern: str | None = None) -> str:
    """The robot a bag belongs to: the regex's group 'robot' (or its first group, or its whole match)
    in the bag's name; without a regex the name's first directory (the bag's own name when it has none)."""
    if pattern:
        m = re.search(pattern, name)
        if not m:
            return ''
        if 'robot' in m.re.groupindex:
            return m.group('robot') or ''
        return m.group(1) if m.re.groups else m.group(0)
    return name.split('/', 1)[0]


def _hash_bag(bag: Path, digest) -> None:
    files = [bag] if bag.is_file() else sorted(p for p in bag.rglob('*') if p.is_file())
    for f in files:
        digest.update(f.relative_to(bag).as_posix().encode() if f != bag else b'')
        with open(f, 'rb') as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)


# ------------------------------------------------------------------------------------------- a worker

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
    row['notes'] = ' | '.join(r for r in reports if losses or known_wrong) if (losses or known_wrong) else ''
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
        digest.update(json.dumps([task['options'], outputs, fmt, task['version'], task.get('depends', '')]).encode())
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
                old['status'] = 'up to date'
                return old
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob('.*.partial-*'):
            stale.unlink()  # left by a worker that was lost mid-bag
        q_csv = out / 'orientation.csv' if ('orientation' in outputs and fmt == 'csv') else None
        a_csv = out / 'accuracy.csv' if ('accuracy' in outputs and fmt == 'csv') else None
        q_part = q_csv and q_csv.with_name(f'.orientation.csv.partial-{os.getpid()}')
        a_part = a_csv and a_csv.with_name(f'.accuracy.csv.partial-{os.getpid()}')
        try:
            columns, reports, log, losses, known_wrong = _replay(str(bag), task['options'], q_part, a_part)
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


# ---------------------------------------------------------------------------------------- the run

def _table_write(path: Path, rows: list[dict], columns: list[str]) -> None:
    def write(p):
        with open(p, 'w', newline='') as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction='ignore')
            w.writeheader()
            for r in rows:
                w.writerow({k: ('' if r.get(k) is None else r.get(k)) for k in columns})
    _atomic_write(path, write)


def _parquet_available() -> bool:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


class _Progress:
    """Bags done, rate and time left on one line of stderr (redrawn on a terminal, every 5 s otherwise)."""

    def __init__(self, total, enabled):
        self.total, self.enabled, self.done, self.failed, self.skipped = total, enabled, 0, 0, 0
        self.start = self.last = time.monotonic()
        self.tty = sys.stderr.isatty()

    def update(self, row):
        self.done += 1
        self.failed += row.get('status') == 'failed'
        self.skipped += row.get('status') == 'up to date'
        now = time.monotonic()
        if not self.enabled or (not self.tty and now - self.last < 5 and self.done < self.total):
            return
        self.last = now
        rate = self.done / max(now - self.start, 1e-9)
        left = (self.total - self.done) / rate if rate > 0 else math.inf
        width = 30
        filled = int(width * self.done / self.total)
        line = (f'fleet [{"#" * filled}{"." * (width - filled)}] {self.done}/{self.total} bags'
                f' ({self.skipped} up to date, {self.failed} failed), {rate:.1f} bags/s, {left:.0f} s left')
        sys.stderr.write(('\r' + line + ('\n' if self.done == self.total else '')) if self.tty else line + '\n')
        sys.stderr.flush()


try:
    from distributed import WorkerPlugin as _WorkerPlugin
except ImportError:  # the fleet's functions say so when called; the rest of the module works without Dask
    _WorkerPlugin = object


class _OneCorePerWorker(_WorkerPlugin):
    """A worker plugin of the local cluster: worker i runs on core i (of the cores this process may use).
    A replay spreads over the threads of its stages; with a worker per core, two replays on one core
    only take turns, so each worker keeps to its own."""
    name = 'gyrocompass-one-core-per-worker'

    def __init__(self, cores):
        self.cores = list(cores)

    def setup(self, worker):
        try:
            os.sched_setaffinity(0, {self.cores[int(worker.name) % len(self.cores)]})
        except (AttributeError, ValueError, TypeError, OSError):
            pass  # no affinity on this platform, or a worker not named by its index: left unpinned

    def teardown(self, worker):
        pass


def _client(scheduler, workers):
    """A Dask client: to `scheduler` (an address or a Client) or a new local cluster of `workers`
    processes of one thread each (default: one per core), each kept to a core of its own when there are
    as many cores. Returns (client, close)."""
    from distributed import Client, LocalCluster
    if scheduler is not None and not isinstance(scheduler, str):
        return scheduler, lambda: None
    if scheduler:
        client = Client(scheduler)
        return client, client.close
    import logging
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else []
    count = workers or len(cores) or os.cpu_count() or 1
    cluster = LocalCluster(n_workers=count, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=logging.ERROR)
    client = Client(cluster)
    if cores and count <= len(cores):
        client.register_plugin(_OneCorePerWorker(cores))

    def close():
        client.close()
        cluster.close()
    return client, close


def run(bags, output, *, options: dict | None = None, outputs=('orientation', 'accuracy'), format='auto',
        client=None, scheduler: str | None = None, workers: int | None = None, robot: str | None = None,
        progress: bool = True) -> list[dict]:
    """Replays every bag `bags` names (see find_bags) into the directory `output`; returns the summary
    rows (also in OUTPUT/summary.csv, and summary.parquet with pyarrow), sorted by bag.

    options: what gyrocompass.replay takes (calibration, filter, mag_rotation, 'STAGE.SETTING': value, ...);
    outputs: any of 'orientation' and 'accuracy' (the replay's --csv and --accuracy-csv files), or none;
    format: 'csv', 'parquet', or 'auto' (Parquet when pyarrow is installed); client: a dask Client, or
    scheduler: its address (tcp://HOST:8786), else a LocalCluster of `workers` processes (one per core);
    robot: a regex naming the robot in a bag's path (see robot_of)."""
    unknown = set(outputs) - {'orientation', 'accuracy'}
    if unknown:
        raise FleetError(f'outputs: unknown {sorted(unknown)} (orientation, accuracy)')
    if format == 'auto':
        format = 'parquet' if _parquet_available() else 'csv'
    if format not in ('csv', 'parquet'):
        raise FleetError(f"format: {format!r} is not 'csv', 'parquet' or 'auto'")
    if format == 'parquet' and not _parquet_available():
        raise FleetError('format parquet: pyarrow is not installed (pip install pyarrow)')
    if robot:
        try:
            re.compile(robot)
        except re.error as e:
            raise FleetError(f'robot: {robot!r} is not a regular expression ({e})') from None
    found = find_bags(bags)
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise FleetError(f'{output}: exists and is not a directory')
    output.mkdir(parents=True, exist_ok=True)
    try:
        options_yaml = _yaml(dict(options or {}))
    except ValueError as e:
        raise FleetError(f'options: {e}') from None
    # Options every bag would refuse are the run's error, said once before any bag is tried.
    if _native.lib.gc_replay_check(None, options_yaml.encode()) != _native.GC_OK:
        raise FleetError(f'options: {_native.last_error()}')
    names = _names(found)
    software = version()
    # A calibration file the options name is part of what a bag's outputs depend on: its bytes join the key.
    calibration = (options or {}).get('calibration')
    depends = ''
    if isinstance(calibration, (str, os.PathLike)) and os.fspath(calibration) not in ('online', 'none'):
        try:
            depends = hashlib.blake2b(Path(calibration).read_bytes(), digest_size=16).hexdigest()
        except OSError as e:
            raise FleetError(f'calibration {calibration}: {e.strerror}') from None
    tasks = [{'path': str(b), 'name': n, 'robot': robot_of(n, robot), 'output': str(output.resolve()),
              'options': options_yaml, 'outputs': list(outputs), 'format': format, 'version': software,
              'depends': depends}
             for b, n in zip(found, names)]
    from distributed import as_completed
    dask_client, close = (client, lambda: None) if client is not None else _client(scheduler, workers)
    rows, meter = [], _Progress(len(tasks), progress)
    try:
        futures = {dask_client.submit(replay_bag, task, key=f'replay-{i}-{task["name"]}', pure=False): task
                   for i, task in enumerate(tasks)}
        # Results arrive with their futures (one round trip per batch, not one per bag).
        for future, row in as_completed(futures, with_results=True, raise_errors=False):
            task = futures[future]
            if not isinstance(row, dict):  # (type, error, traceback): a worker died on it every time it was tried
                error = row[1] if isinstance(row, tuple) and len(row) == 3 else row
                row = {c: '' for c in SUMMARY_COLUMNS}
                row.update(bag=task['name'], robot=task['robot'], path=task['path'], status='failed',
                           version=software, error=f'{type(error).__name__}: {error}')
            rows.append(row)
            meter.update(row)
    finally:
        close()
    rows.sort(key=lambda r: r['bag'])
    _table_write(output / 'summary.csv', rows, SUMMARY_COLUMNS)
    if _parquet_available():
        _write_parquet(output / 'summary.parquet', {c: [_cell(r.get(c)) for r in rows] for c in SUMMARY_COLUMNS})
    return rows


def _cell(value):
    """A summary cell as a string for the Parquet table (its columns mix numbers and blanks)."""
    return '' if value is None else str(value)


def read_summary(directory) -> list[dict]:
    """A run's rows (OUTPUT/summary.csv), numbers as floats, blanks as NaN."""
    path = Path(directory) / 'summary.csv'
    if not path.is_file():
        raise FleetError(f'{directory}: no summary.csv (not the output of a fleet run)')
    rows = []
    with open(path, newline='') as f:
        for r in csv.DictReader(f):
            for k, v in r.items():
                if k in ('bag', 'robot', 'status', 'error', 'calibration_model', 'notes', 'worker', 'key', 'version',
                         'path'):
                    continue
                try:
                    r[k] = float(v) if v != '' else math.nan
                except ValueError:
                    pass
            rows.append(r)
    return rows


# ------------------------------------------------------------------------------------ compare, health

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
    close to slerp at IMU rates) onto the reference's times. Reference times below 1e9 s count from the
    first estimate (the first IMU sample: the BROAD, phone and simulator truth files' convention)."""
    if len(t_est) == 0:
        return math.nan
    if t_ref.max(initial=0) < 1e9 <= t_est[0]:
        t_ref = t_ref + t_est[0]
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
    candidates = ([pattern.format(stem=stem, bag=str(bag), dir=str(bag.parent))] if pattern else
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
    with truth files (a pattern with {stem}, {bag}, {dir}; default STEM.truth.csv[.gz] beside the bag), the
    heading RMSE of each run per bag and per group (robot). Prints the `top` bags and, with truth, the
    groups; writes every row to `table` (default B/compare.csv). Returns the rows."""
    if by not in ('heading', 'bound', 'trusted'):
        raise FleetError(f"by: {by!r} is not heading, bound or trusted")
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
        for g in groups + ['all']:
            members = [r for r in scored if g == 'all' or r['robot'] == g]
            ma = np.nanmean([r['heading_rmse_a_deg'] for r in members])
            mb = np.nanmean([r['heading_rmse_b_deg'] for r in members])
            print(f'  {g or "(no group)":30s} {len(members):4d} bags  A {f(float(ma))}  B {f(float(mb))}', file=out)
    missing = [r['bag'] for r in rows if r['in'] != 'both']
    if missing:
        print(f'{len(missing)} bag(s) in one run only: ' + ', '.join(missing[:10]) + (' ...' if len(missing) > 10 else ''),
              file=out)
    print(f'table: {table}', file=out)
    return ranked


def health(directory, *, robot: str | None = None, table: str | os.PathLike | None = None, out=sys.stdout):
    """Each robot's hard iron and field strength bag after bag (by the bag's start time, then its name),
    and the jumps: a change of hard iron larger than three times the two fits' combined uncertainty
    (hard_iron_sigma_ut), something magnetic mounted or removed between the two recordings. Writes every
    robot's series to `table` (default DIRECTORY/health.csv); returns (series rows, jumps)."""
    rows = [r for r in read_summary(directory) if r['status'] != 'failed']
    if robot:
        for r in rows:
            r['robot'] = robot_of(r['bag'], robot)
    series, jumps = [], []
    for name in sorted({r['robot'] for r in rows}):
        mine = sorted((r for r in rows if r['robot'] == name),
                      key=lambda r: (r['start_time_s'] if math.isfinite(r['start_time_s']) else math.inf, r['bag']))
        previous = None
        for r in mine:
            h = np.array([r['hard_iron_x_ut'], r['hard_iron_y_ut'], r['hard_iron_z_ut']])
            entry = {'robot': name, 'bag': r['bag'], 'start_time_s': r['start_time_s'], 'hard_iron_x_ut': h[0],
                     'hard_iron_y_ut': h[1], 'hard_iron_z_ut': h[2], 'hard_iron_sigma_ut': r['hard_iron_sigma_ut'],
                     'field_ut': r['field_ut'], 'jump_ut': math.nan, 'jump_limit_ut': math.nan}
            if not np.isfinite(h).all():
                series.append(entry)
                continue
            if previous is not None:
                ph, psigma = previous
                step = float(np.linalg.norm(h - ph))
                limit = 3 * math.hypot(psigma, r['hard_iron_sigma_ut'])
                entry['jump_ut'], entry['jump_limit_ut'] = step, limit
                if step > limit:
                    jumps.append(entry)
            previous = (h, r['hard_iron_sigma_ut'])
            series.append(entry)
    table = Path(table) if table else Path(directory) / 'health.csv'
    columns = list(series[0].keys()) if series else ['robot']
    _table_write(table, [{k: ('' if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                         for r in series], columns)
    print(f'{len({r["robot"] for r in series})} robot(s), {len(series)} bag(s) with a calibration at the end'
          f' of {len(rows)}', file=out)
    for name in sorted({r['robot'] for r in series}):
        mine = [r for r in series if r['robot'] == name and math.isfinite(r['hard_iron_x_ut'])]
        if not mine:
            print(f'  {name}: no calibration in any bag', file=out)
            continue
        fields = [r['field_ut'] for r in mine]
        print(f'  {name}: {len(mine)} bag(s), hard iron from ({mine[0]["hard_iron_x_ut"]:.1f}, '
              f'{mine[0]["hard_iron_y_ut"]:.1f}, {mine[0]["hard_iron_z_ut"]:.1f}) to ({mine[-1]["hard_iron_x_ut"]:.1f},'
              f' {mine[-1]["hard_iron_y_ut"]:.1f}, {mine[-1]["hard_iron_z_ut"]:.1f}) uT, field '
              f'{min(fields):.1f}-{max(fields):.1f} uT', file=out)
    if jumps:
        print(f'{len(jumps)} jump(s) of hard iron (something magnetic mounted or removed before the bag):', file=out)
        for j in jumps:
            print(f'  {j["robot"]}: {j["bag"]}: moved {j["jump_ut"]:.1f} uT (limit {j["jump_limit_ut"]:.1f}) to '
                  f'({j["hard_iron_x_ut"]:.1f}, {j["hard_iron_y_ut"]:.1f}, {j["hard_iron_z_ut"]:.1f}) uT', file=out)
    else:
        print('no jump of hard iron', file=out)
    print(f'table: {table}', file=out)
    return series, jumps


# ---------------------------------------------------------------------------------- command line

def _parse_set(values):
    options = {}
    for item in values or []:
        if '=' not in item:
            raise FleetError(f'--set {item}: expected STAGE.SETTING=VALUE')
        key, value = item.split('=', 1)
        options[key.strip()] = value.strip()
    return options


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = os.environ.get('GYROCOMPASS_FLEET_PROG', 'fusion-node fleet')
    if argv[:1] == ['compare']:
        p = argparse.ArgumentParser(prog=f'{prog} compare', description=compare.__doc__.split('\n\n')[0])
        p.add_argument('a', help='the first run\'s output directory')
        p.add_argument('b', help='the second run\'s output directory')
        p.add_argument('--by', default='heading', choices=('heading', 'bound', 'trusted'))
        p.add_argument('--top', type=int, default=20, help='bags to print (default 20)')
        p.add_argument('--truth', help='truth CSV per bag: a path pattern with {stem}, {bag}, {dir} (default: '
                       'STEM.truth.csv[.gz] beside the bag)')
        p.add_argument('--robot', help='regex naming the robot (group) in a bag\'s path')
        p.add_argument('-o', '--output', help='the table (default B/compare.csv)')
        a = p.parse_args(argv[1:])
        compare(a.a, a.b, by=a.by, top=a.top, truth=a.truth, robot=a.robot, table=a.output)
        return 0
    if argv[:1] == ['health']:
        p = argparse.ArgumentParser(prog=f'{prog} health', description=health.__doc__.split('\n\n')[0])
        p.add_argument('directory', help='a fleet run\'s output directory')
        p.add_argument('--robot', help='regex naming the robot in a bag\'s path (default: its first directory)')
        p.add_argument('-o', '--output', help='the table (default DIRECTORY/health.csv)')
        a = p.parse_args(argv[1:])
        _, jumps = health(a.directory, robot=a.robot, table=a.output)
        return 0
    p = argparse.ArgumentParser(
        prog=prog, description='Replay every bag on a Dask cluster (local by default) and write per bag its '
        'outputs and a summary row; `compare A B` and `health OUT` read the results.',
        epilog='exit codes: 0 every bag replayed or up to date, 1 failed, 2 usage error, 3 some bags failed '
        '(each a row with its error in OUTPUT/summary.csv)')
    p.add_argument('bags', nargs='+', help='directories, globs, bag files, or text files listing bags')
    p.add_argument('-o', '--output', required=True, help='output directory')
    p.add_argument('--settings', help='a YAML file of replay options (calibration, filter, mag_rotation, '
                   'STAGE.SETTING: value, ...), as gyrocompass.replay takes them')
    p.add_argument('--set', action='append', metavar='STAGE.SETTING=VALUE', help='one setting (repeatable)')
    p.add_argument('--no-calibration', action='store_true', help='replay --no-calibration')
    p.add_argument('--calibration', help='a calibration file applied to every bag')
    p.add_argument('--filter', choices=('kalman', 'complementary'))
    p.add_argument('--mag-rotation')
    p.add_argument('--imu-rotation')
    p.add_argument('--outputs', default='orientation,accuracy',
                   help='orientation, accuracy, both (comma-separated) or none (default both)')
    p.add_argument('--format', default='auto', choices=('auto', 'csv', 'parquet'),
                   help='per-bag outputs as CSV or Parquet (auto: Parquet when pyarrow is installed)')
    p.add_argument('--workers', type=int, help='local worker processes (default: one per core)')
    p.add_argument('--scheduler', help='a Dask scheduler to run on (tcp://HOST:8786) instead of a local cluster')
    p.add_argument('--robot', help='regex naming the robot in a bag\'s path (default: its first directory)')
    p.add_argument('--quiet', action='store_true', help='no progress bar')
    a = p.parse_args(argv)
    options = {}
    if a.settings:
        try:
            import yaml  # dask's own dependency
            loaded = yaml.safe_load(Path(a.settings).read_text()) or {}
        except (OSError, ValueError) as e:
            raise FleetError(f'--settings {a.settings}: {e}') from None
        if not isinstance(loaded, dict):
            raise FleetError(f'--settings {a.settings}: expected a mapping of options')
        options.update(loaded)
    for flag, key in (('filter', 'filter'), ('mag_rotation', 'mag_rotation'), ('imu_rotation', 'imu_rotation'),
                      ('calibration', 'calibration')):
        if getattr(a, flag):
            options[key] = getattr(a, flag)
    if a.no_calibration:
        options['calibration'] = 'none'
    options.update(_parse_set(a.set))
    outputs = [] if a.outputs == 'none' else [o.strip() for o in a.outputs.split(',') if o.strip()]
    rows = run(a.bags, a.output, options=options, outputs=outputs, format=a.format, scheduler=a.scheduler,
               workers=a.workers, robot=a.robot, progress=not a.quiet)
    failed = [r for r in rows if r['status'] == 'failed']
    fresh = sum(r['status'] == 'replayed' for r in rows)
    current = sum(r['status'] == 'up to date' for r in rows)
    if fresh == 0 and not failed:
        print(f'fleet: nothing to do: all {_bags(len(rows))} are up to date (same bags, options and version); '
              f'summary in {Path(a.output) / "summary.csv"}', file=sys.stderr)
    else:
        print(f'fleet: {_bags(len(rows))}: {fresh} replayed, {current} up to date, {len(failed)} failed; '
              f'summary in {Path(a.output) / "summary.csv"}', file=sys.stderr)
    for r in failed[:20]:
        print(f'fleet: {r["bag"]}: {r["error"]}', file=sys.stderr)
    return 3 if failed else 0


def _bags(n: int) -> str:
    return f'{n} bag' if n == 1 else f'{n} bags'


def _entry() -> int:
    try:
        return main()
    except FleetError as e:
        print(f'fleet: {e}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('fleet: interrupted; bags finished so far keep their outputs and rows, a re-run does the rest',
              file=sys.stderr)
        return 130


if __name__ == '__main__':
    sys.exit(_entry())
