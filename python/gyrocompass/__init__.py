"""GyroCompass: heading from a gyroscope, an accelerometer and a magnetometer, with its 95 % bound.

    import numpy as np, gyrocompass
    f = gyrocompass.Filter(100.0)                      # samples at 100 Hz, every setting at its default
    out = f.update_batch(gyr, acc, mag)                # N x 3 each: rad/s, m/s^2, microtesla
    out['heading_deg'], out['accuracy_deg'], out['quaternion']

The filter is the one `fusion-node replay` runs as its fusion stage (libgyrocompass): the same settings,
the same code for every sample. See help(gyrocompass.Filter) for the settings.
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import tempfile
import warnings

import numpy as np
from numpy.typing import ArrayLike

from . import _native
from ._native import ESTIMATE, GC_OK, lib

__all__ = ['Filter', 'FLAGS', 'flag_names', 'bag_topics', 'read_bag', 'replay', 'settings', 'version', 'LIBRARY_PATH',
           'fleet']

LIBRARY_PATH = _native.LIBRARY_PATH

# Bits of the `flags` output: gyrocompass_msgs/Heading's FLAG_* and REASON_* (gyrocompass.h's GC_FLAG_*).
FLAGS = {
    'initialising': 0x1, 'at_rest': 0x2, 'acceleration_rejected': 0x4, 'magnetometer_rejected': 0x8,
    'gyro_only': 0x10, 'magnetic_strength': 0x20, 'magnetic_dip': 0x40, 'magnetic_gyro_inconsistent': 0x80,
    'magnetic_reference_changed': 0x100, 'filter_reset': 0x200, 'no_position': 0x400, 'model_out_of_range': 0x800,
    'model_caution_zone': 0x1000, 'magnetometer_uncalibrated': 0x2000, 'gnss_aided': 0x4000,
    'compass_gnss_disagree': 0x8000,
}

# Beyond these the numbers are not in the units the filter takes (a gyro at 40 rad/s is 2300 deg/s, past
# the full scale of hand-held and vehicle gyros; a magnetometer reading of 10 mT is 200 earth fields).
MAX_GYRO_RAD_S = 40.0
MAX_FIELD_UT = 10_000.0


def version() -> str:
    """The library's version, 'X.Y.Z (commit)'."""
    return lib.gc_version().decode()


def flag_names(flags: int) -> list[str]:
    """The names of the bits set in one `flags` value."""
    return [name for name, bit in FLAGS.items() if int(flags) & bit]


class Setting:
    """One setting of the filter as its declaration gives it."""
    __slots__ = ('name', 'kind', 'unit', 'range', 'default', 'help')

    def __init__(self, name, kind, unit, range_, default, help_):
        self.name, self.kind, self.unit, self.range, self.default, self.help = name, kind, unit, range_, default, help_

    def __repr__(self):
        return f'Setting({self.name!r}, {self.kind}, unit={self.unit!r}, default={self.default!r})'


def settings() -> list[Setting]:
    """Every setting `Filter` takes, from the fusion stage's one declaration (what `fusion-node stages
    fusion` and docs/stages.md show)."""
    out = []
    for line in _native.text(lib.gc_settings_reference).splitlines():
        name, kind, unit, range_, default, help_ = line.split('\t')
        out.append(Setting(name, kind, unit, range_, default, help_))
    return out


def _yaml(settings_given):
    """The settings as the YAML mapping the library reads (JSON scalars and lists are YAML)."""
    lines = []
    for name, value in settings_given.items():
        if value is None:
            text = '""'
        elif isinstance(value, bool):
            text = 'true' if value else 'false'
        elif isinstance(value, (int, float, np.integer, np.floating)):
            v = float(value)
            if not math.isfinite(v):
                raise ValueError(f'setting {name}: {value!r} is not a finite number')
            text = repr(int(value)) if isinstance(value, (int, np.integer)) else repr(v)
        elif isinstance(value, str):
            text = json.dumps(value)
        elif isinstance(value, (list, tuple, np.ndarray)):
            text = json.dumps([float(v) if isinstance(v, (int, float, np.integer, np.floating)) else v
                               for v in list(value)])
        else:
            raise ValueError(f'setting {name}: {type(value).__name__} is not a number, string, bool or list')
        lines.append(f'{name}: {text}')
    return '\n'.join(lines)


def _rows(name, value, n=None, allow_missing_rows=False):
    """`value` as a C-contiguous float64 N x 3 array, checked."""
    try:
        a = np.ascontiguousarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f'{name}: not an array of numbers ({e})') from None
    if a.ndim != 2 or a.shape[1] != 3:
        raise ValueError(f'{name}: expected shape (N, 3), got {a.shape}')
    if n is not None and a.shape[0] != n:
        raise ValueError(f'{name}: {a.shape[0]} rows, gyr has {n}')
    finite = np.isfinite(a)
    bad = ~finite.all(axis=1)
    if allow_missing_rows:
        bad &= ~np.isnan(a).all(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        what = 'partly NaN (a whole row of NaN means no reading)' if allow_missing_rows else 'not finite'
        raise ValueError(f'{name}: row {i} is {what}: {a[i].tolist()}')
    return a


class Filter:
    """A gyro-compass filter: the fusion stage of `fusion-node replay` as a library.

    Filter(rate_hz=None, *, mag_unit='uT', calibration=None, **settings)

    rate_hz: the IMU rate, Hz, used for the sample times when `t` is not given (sample k at k / rate_hz,
    counted over every call). mag_unit: 'uT' (microtesla) or 'T' (tesla, as ROS carries it) for `mag`.
    calibration: None (the readings as they come, checked for iron nobody removes, as `fusion-node
    replay --no-calibration`), 'online' (hard and soft iron learned from the readings, as `fusion-node
    replay` does by default), 'calibrated' (the readings are calibrated already: not checked), or the
    path of a calibration file from `fusion-node calibrate -o FILE` (applied to every reading).
    settings: the fusion stage's settings by name (listed below), e.g. filter='complementary',
    latitude=48.1, longitude=11.6 (true north), smooth=True (the offline smoother: estimates from
    finish()). Inputs are in the sensor's axes: gyr in rad/s, acc the specific force in m/s^2 (up at
    rest), mag in mag_unit; a magnetometer slower than the IMU is a row of NaN where it has no reading.

    Each update returns, per IMU sample: 'quaternion' (w, x, y, z: sensor to ENU with y = magnetic
    north), 'heading_deg' (magnetic, of the x axis, clockwise), 'true_heading_deg', 'accuracy_deg' (the
    95 % bound), 'declination_deg', 'flags' (see FLAGS, flag_names), 'gyro_bias' (rad/s), 't' and
    'valid' (False where the filter skipped the sample: NaN elsewhere). One filter is not to be used
    from two threads at once; the GIL is released while the library works.
    """

    def __init__(self, rate_hz: float | None = None, *, mag_unit: str = 'uT',
                 calibration: str | os.PathLike | None = None, **settings: object) -> None:
        self._handle = None
        if rate_hz is not None and not (isinstance(rate_hz, (int, float)) and math.isfinite(rate_hz) and rate_hz > 0):
            raise ValueError(f'rate_hz: {rate_hz!r} is not a positive number of samples per second')
        if mag_unit not in ('uT', 'T'):
            raise ValueError(f"mag_unit: {mag_unit!r}, expected 'uT' (microtesla) or 'T' (tesla)")
        self.rate_hz, self.mag_unit = rate_hz, mag_unit
        self._count, self._last_t = 0, -math.inf
        handle = ctypes.c_void_p()
        if lib.gc_filter_create(_yaml(settings).encode(), ctypes.byref(handle)) != GC_OK:
            raise ValueError(_native.last_error())
        self._handle = handle
        if calibration is not None:
            if calibration == 'calibrated':
                status = lib.gc_filter_declare_calibrated(handle)
            elif calibration == 'online':
                status = lib.gc_filter_learn_calibration(handle)
            elif isinstance(calibration, (str, os.PathLike)):
                status = lib.gc_filter_use_calibration_file(handle, os.fsencode(calibration))
            else:
                raise ValueError(f"calibration: {calibration!r}, expected None, 'online', 'calibrated' or a "
                                 "file's path")
            if status != GC_OK:
                raise ValueError(_native.last_error())

    def __del__(self):
        self.close()

    def close(self) -> None:
        """Frees the library's filter (also done when the object goes)."""
        if getattr(self, '_handle', None) is not None:
            lib.gc_filter_destroy(self._handle)
            self._handle = None

    def _live(self):
        if self._handle is None:
            raise ValueError('the filter is closed')
        return self._handle

    def _times(self, t, n):
        if t is None:
            if self.rate_hz is None:
                raise ValueError('t: give the sample times, or rate_hz when the filter is made')
            times = (self._count + np.arange(n, dtype=np.float64)) / self.rate_hz
        else:
            times = np.ascontiguousarray(t, dtype=np.float64).reshape(-1) if np.ndim(t) else np.array([t], float)
            if times.shape[0] != n:
                raise ValueError(f't: {times.shape[0]} times for {n} samples')
            if not np.isfinite(times).all():
                i = int(np.argmax(~np.isfinite(times)))
                raise ValueError(f't: time {i} is not finite: {times[i]}')
        steps = np.diff(np.concatenate(([self._last_t], times)))
        if n and (steps <= 0).any():
            i = int(np.argmax(steps <= 0))
            before = times[i - 1] if i > 0 else self._last_t
            raise ValueError(f't: time {i} ({times[i]!r}) is not after the one before it ({before!r})')
        return times

    def _check_units(self, gyr, acc, mag):
        w = np.abs(gyr).max(initial=0.0)
        if w > MAX_GYRO_RAD_S:
            raise ValueError(f'gyr: {w:.6g} rad/s is beyond any gyro; the filter takes rad/s, not deg/s')
        if len(acc) >= 10:
            g = float(np.median(np.linalg.norm(acc, axis=1)))
            if 0.5 < g < 2.0:
                raise ValueError(f'acc: a median of {g:.4g} looks like g; the filter takes m/s^2')
        if mag is not None:
            norms = np.linalg.norm(mag, axis=1)
            norms = norms[np.isfinite(norms)]
            if norms.size:
                biggest, median = float(norms.max()), float(np.median(norms))
                if biggest > MAX_FIELD_UT:
                    raise ValueError(f'mag: {biggest:.6g} uT is beyond a magnetometer '
                                     f"(mag_unit is {self.mag_unit!r})")
                if median < 1.0:
                    raise ValueError(f'mag: a median strength of {median:.4g} uT is far below any earth field; '
                                     f"is it in tesla (mag_unit='T') or gauss (x 100)?")

    def update_batch(self, gyr: ArrayLike, acc: ArrayLike, mag: ArrayLike | None = None,
                     t: ArrayLike | None = None) -> dict[str, np.ndarray]:
        """N samples at once (N x 3 arrays, `t` N times or None); a dict of N-row arrays."""
        handle = self._live()
        gyr = _rows('gyr', gyr)
        n = gyr.shape[0]
        acc = _rows('acc', acc, n)
        if mag is not None:
            mag = _rows('mag', mag, n, allow_missing_rows=True)
            if self.mag_unit == 'T':
                mag = mag * 1e6
        self._check_units(gyr, acc, mag)
        times = self._times(t, n)
        out = np.zeros(n, dtype=ESTIMATE)
        processed = ctypes.c_size_t(0)
        status = lib.gc_filter_update_batch(handle, n, _native.pointer(times), _native.pointer(gyr),
                                            _native.pointer(acc), _native.pointer(mag), out.ctypes.data,
                                            ctypes.byref(processed))
        taken = processed.value
        if taken:
            self._count += taken
            self._last_t = float(times[taken - 1])
        if status != GC_OK:
            raise ValueError(f'{_native.last_error()} ({taken} of {n} samples were taken before it)')
        return self._columns(out)

    def update(self, gyr: ArrayLike, acc: ArrayLike, mag: ArrayLike | None = None,
               t: float | None = None) -> dict[str, object]:
        """One sample (3-vectors; mag None or NaN: no reading); a dict of scalars and small arrays."""
        gyr = np.asarray(gyr, dtype=np.float64)
        if gyr.shape != (3,):
            raise ValueError(f'gyr: expected 3 values, got shape {gyr.shape}')
        acc = np.asarray(acc, dtype=np.float64)
        if acc.shape != (3,):
            raise ValueError(f'acc: expected 3 values, got shape {acc.shape}')
        m = None
        if mag is not None:
            m = np.asarray(mag, dtype=np.float64)
            if m.shape != (3,):
                raise ValueError(f'mag: expected 3 values, got shape {m.shape}')
            m = m[None, :]
        out = self.update_batch(gyr[None, :], acc[None, :], m, None if t is None else [t])
        return {k: v[0] for k, v in out.items()}

    def add_magnetometer(self, mag: ArrayLike, t: float) -> None:
        """A magnetometer reading at its own time `t`: used with the first IMU sample at or after it."""
        handle = self._live()
        m = _rows('mag', np.asarray(mag, dtype=np.float64).reshape(1, 3))[0]
        if self.mag_unit == 'T':
            m = m * 1e6
        if lib.gc_filter_add_magnetometer(handle, float(t), _native.pointer(np.ascontiguousarray(m))) != GC_OK:
            raise ValueError(_native.last_error())

    def finish(self) -> dict[str, np.ndarray]:
        """The end of the stream: the smoother's estimates of every sample (a dict of arrays); empty
        arrays for a filter."""
        handle = self._live()
        count = ctypes.c_size_t(0)
        lib.gc_filter_finish(handle, None, 0, ctypes.byref(count))
        out = np.zeros(count.value, dtype=ESTIMATE)
        if lib.gc_filter_finish(handle, out.ctypes.data, count.value, ctypes.byref(count)) != GC_OK:
            raise RuntimeError(_native.last_error())
        return self._columns(out)

    @property
    def summary(self) -> list[str]:
        """The filter's summary lines (samples fused and skipped, the disturbance gate's counts)."""
        return _native.text(lib.gc_filter_summary, self._live()).splitlines()

    @staticmethod
    def _columns(out):
        return {
            't': out['time_s'], 'quaternion': out['orientation_wxyz'], 'heading_deg': out['magnetic_heading_deg'],
            'true_heading_deg': out['true_heading_deg'], 'accuracy_deg': out['heading_accuracy_deg'],
            'declination_deg': out['declination_deg'], 'flags': out['flags'], 'gyro_bias': out['gyro_bias_rad_s'],
            'valid': out['valid'].astype(bool),
        }


def _settings_doc():
    rows = []
    for s in settings():
        unit = f' [{s.unit}]' if s.unit else ''
        limits = f', {s.range}' if s.range else ''
        rows.append(f'    {s.name} ({s.kind}{unit}{limits}; default {s.default!r}): {s.help}')
    return '\n\nSettings (the fusion stage\'s, declared once in the library):\n' + '\n'.join(rows)


Filter.__doc__ += _settings_doc()


def replay(path: str | os.PathLike, *, settings: dict[str, object] | None = None, **options: object):
    """`fusion-node replay PATH` in this process: the same graph (the bag source, the online calibration,
    the fusion stage) and the same estimates as its `--csv` and `--accuracy-csv` files.

    options: calibration ('online', the default; 'none'; or a calibration file's path), imu_rotation,
    mag_rotation (as the command's --imu-rotation, --mag-rotation), filter, smooth, sensor_latency_s,
    imu_topic, mag_topic, start_s, duration_s; settings: {'STAGE.SETTING': value} for any other setting
    of the graph's stages (as --set). Returns columns: 't' (s), 'quaternion' (N x 4, w x y z),
    'heading_deg', 'accuracy_deg' (NaN where the command's CSV leaves it empty), 'flags' (FLAGS bits);
    a pandas DataFrame (t, qw, qx, qy, qz, heading_deg, accuracy_deg, flags) when pandas is installed and
    as_dataframe is not False. The stages' reports are in the result's 'summary' (dict) or attrs
    (DataFrame), what the replay logged while it ran (each calibration accepted) in 'log'; inputs lost
    or causes of wrong output found (the command's exit codes 3 and 4) are a RuntimeWarning naming them.
    """
    as_dataframe = options.pop('as_dataframe', None)
    given = dict(options)
    for key, value in (settings or {}).items():
        if '.' not in key:
            raise ValueError(f'settings: {key!r} is not STAGE.SETTING')
        given[key] = value
    columns, reports, log, losses, known_wrong = _replay(path, _yaml(given))
    if losses or known_wrong:
        # What the command's exit code 3 or 4 says: the output is complete but not to be trusted as is.
        warnings.warn(f'{path}: {losses} input(s) lost and {known_wrong} cause(s) of wrong output '
                      'found; see the summary: ' + ' | '.join(reports), RuntimeWarning, stacklevel=2)
    if as_dataframe is not False:
        try:
            import pandas as pd
        except ImportError:
            if as_dataframe:
                raise
        else:
            frame = pd.DataFrame({'t': columns['t'], 'qw': columns['quaternion'][:, 0],
                                  'qx': columns['quaternion'][:, 1], 'qy': columns['quaternion'][:, 2],
                                  'qz': columns['quaternion'][:, 3], 'heading_deg': columns['heading_deg'],
                                  'accuracy_deg': columns['accuracy_deg'], 'flags': columns['flags']})
            frame.attrs['summary'] = reports
            frame.attrs['log'] = log
            return frame
    columns['summary'] = reports
    columns['log'] = log
    return columns


def _replay(path, options_yaml, quaternion_csv=None, accuracy_csv=None):
    """gc_replay: (columns, reports, log lines, losses, causes of wrong output); the two CSV files are
    written where named (else to temporary files the library removes)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f'{path}: no such bag')
    result = ctypes.c_void_p()
    status = lib.gc_replay(os.fsencode(path), options_yaml.encode(),
                           None if quaternion_csv is None else os.fsencode(quaternion_csv),
                           None if accuracy_csv is None else os.fsencode(accuracy_csv), ctypes.byref(result))
    if status == _native.GC_ERROR_SETTINGS:
        raise ValueError(_native.last_error())
    if status == _native.GC_ERROR_FILE:
        raise OSError(_native.last_error())
    if status != GC_OK:
        raise RuntimeError(_native.last_error())
    try:
        n = lib.gc_replay_result_count(result)
        columns = {'t': np.empty(n), 'quaternion': np.empty((n, 4)), 'heading_deg': np.empty(n),
                   'accuracy_deg': np.empty(n), 'flags': np.empty(n, dtype=np.uint32)}
        lib.gc_replay_result_columns(result, *(_native.pointer(columns[k]) for k in
                                               ('t', 'quaternion', 'heading_deg', 'accuracy_deg')),
                                     columns['flags'].ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)))
        reports = _native.text(lib.gc_replay_result_summary, result).splitlines()
        log = _native.text(lib.gc_replay_result_log, result).splitlines()
        losses, known_wrong = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.gc_replay_result_outcome(result, ctypes.byref(losses), ctypes.byref(known_wrong))
    finally:
        lib.gc_replay_result_destroy(result)
    return columns, reports, log, losses.value, known_wrong.value


def bag_topics(path: str | os.PathLike) -> list[tuple[str, str, int]]:
    """A bag's topics as `fusion-node bag info` lists them: (name, ROS type, message count) each."""
    if not os.path.exists(path):
        raise FileNotFoundError(f'{path}: no such bag')
    needed = ctypes.c_size_t(0)
    if lib.gc_bag_topics(os.fsencode(path), None, 0, ctypes.byref(needed)) != GC_OK:
        raise OSError(_native.last_error())
    out = []
    for line in _native.text(lib.gc_bag_topics, os.fsencode(path)).splitlines():
        name, type_, count = line.split('\t')
        out.append((name, type_, int(count)))
    return out


def read_bag(path: str | os.PathLike, topics: str | list[str] | None = None) -> dict[str, dict]:
    """A bag's raw messages (MCAP or sqlite3; a file or a rosbag2 directory), by topic.

    topics: names (with or without the leading slash), or None for every topic. Returns {topic: {'type':
    the ROS type, 'log_time': int64 ns array, 'messages': the messages as dicts with the .msg field
    names}}; for sensor_msgs/msg/Imu also 't' (header stamps, s), 'angular_velocity' and
    'linear_acceleration' (N x 3), for sensor_msgs/msg/MagneticField 't' and 'magnetic_field' (N x 3,
    tesla as the bag holds it). The bag is read by the library (as `fusion-node bag echo` reads it).
    """
    if isinstance(topics, str):
        topics = [topics]
    if not os.path.exists(path):
        raise FileNotFoundError(f'{path}: no such bag')
    with tempfile.TemporaryDirectory(prefix='gyrocompass-bag-') as d:
        out = os.path.join(d, 'messages.jsonl')
        wanted = None if topics is None else '\n'.join(topics).encode()
        status = lib.gc_bag_to_json_lines(os.fsencode(path), wanted, out.encode())
        if status == _native.GC_ERROR_SETTINGS:
            raise ValueError(_native.last_error())
        if status != GC_OK:
            raise OSError(_native.last_error())
        by_topic = {}
        with open(out) as f:
            for line in f:
                m = json.loads(line)
                entry = by_topic.setdefault(m['topic'], {'type': m['type'], 'log_time': [], 'messages': []})
                entry['log_time'].append(m['log_time'])
                entry['messages'].append(m.get('message', {'bytes': m.get('bytes')}))
    for entry in by_topic.values():
        entry['log_time'] = np.array(entry['log_time'], dtype=np.int64)
        messages = entry['messages']
        def stamps():
            return np.array([m['header']['stamp']['sec'] + m['header']['stamp']['nanosec'] * 1e-9 for m in messages])
        def vectors(field):
            rows = [[m[field]['x'], m[field]['y'], m[field]['z']] for m in messages]
            return np.array(rows, dtype=float).reshape(-1, 3)
        if entry['type'] == 'sensor_msgs/msg/Imu':
            entry.update(t=stamps(), angular_velocity=vectors('angular_velocity'),
                         linear_acceleration=vectors('linear_acceleration'))
        elif entry['type'] == 'sensor_msgs/msg/MagneticField':
            entry.update(t=stamps(), magnetic_field=vectors('magnetic_field'))
    return by_topic
