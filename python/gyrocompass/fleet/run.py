"""A fleet run: the bags handed to a Dask cluster (local by default), results gathered as they
come, the summary table written."""
from __future__ import annotations

import csv
import hashlib
import math
import os
import re
import sys
import time
import uuid
from pathlib import Path

from .. import _native, _yaml, version
from .bags import FleetError, _names, find_bags, robot_of
from .worker import SUMMARY_COLUMNS, _atomic_write, _write_parquet, replay_bag


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
        gnss: str | None = None, progress: bool = True) -> list[dict]:
    """Replays every bag `bags` names (see find_bags) into the directory `output`; returns the summary
    rows (also in OUTPUT/summary.csv, and summary.parquet with pyarrow), sorted by bag.

    options: what gyrocompass.replay takes (calibration, filter, mag_rotation, 'STAGE.SETTING': value, ...);
    outputs: any of 'orientation' and 'accuracy' (the replay's --csv and --accuracy-csv files), or none;
    format: 'csv', 'parquet', or 'auto' (Parquet when pyarrow is installed); client: a dask Client, or
    scheduler: its address (tcp://HOST:8786), else a LocalCluster of `workers` processes (one per core);
    robot: a regex naming the robot in a bag's path (see robot_of); gnss='auto': each bag's GNSS velocity
    topic (geometry_msgs/msg/TwistWithCovarianceStamped), where it has one, aids its replay (as `replay
    --velocity-topic`), so a fleet of cars with and without receivers takes one set of options."""
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
    if gnss not in (None, 'auto'):
        raise FleetError(f"gnss: {gnss!r} is not 'auto' or None")
    if gnss and 'bag.velocity_topic' in (options or {}):
        raise FleetError('gnss auto and bag.velocity_topic: give one or the other')
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
              'depends': depends, 'gnss_auto': gnss == 'auto'}
             for b, n in zip(found, names)]
    from distributed import as_completed
    dask_client, close = (client, lambda: None) if client is not None else _client(scheduler, workers)
    rows, meter = [], _Progress(len(tasks), progress)
    # Keys are the scheduler's names for tasks, shared by every client of a cluster: one of this run's own.
    run_id = uuid.uuid4().hex[:12]
    try:
        futures = {dask_client.submit(replay_bag, task, key=f'replay-{run_id}-{i}-{task["name"]}', pure=False):
                   task for i, task in enumerate(tasks)}
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
