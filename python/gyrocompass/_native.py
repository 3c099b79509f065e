"""ctypes bindings of libgyrocompass (Sources/CGyroCompass/include/gyrocompass.h).

The library is looked for, in order: the path in GYROCOMPASS_LIBRARY; beside this file (a wheel bundles
it there, with the C libraries it needs); the build tree of a checkout (`swift build --product
gyrocompass`). ctypes releases the GIL for the duration of every call into it.
"""
import ctypes
import os
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent

GC_OK, GC_ERROR_ARGUMENT, GC_ERROR_SETTINGS, GC_ERROR_SAMPLE, GC_ERROR_BUFFER, GC_ERROR_FILE = range(6)

# gc_estimate, field for field (C alignment).
ESTIMATE = np.dtype([
    ('valid', np.uint32), ('flags', np.uint32), ('time_s', np.float64), ('orientation_wxyz', np.float64, 4),
    ('magnetic_heading_deg', np.float64), ('true_heading_deg', np.float64), ('heading_accuracy_deg', np.float64),
    ('declination_deg', np.float64), ('gyro_bias_rad_s', np.float64, 3),
], align=True)


def _candidates():
    env = os.environ.get('GYROCOMPASS_LIBRARY')
    if env:
        yield Path(env)
    yield _HERE / '_lib' / 'libgyrocompass.so'
    checkout = _HERE.parents[1]
    for config in ('release', 'debug'):
        yield checkout / '.build' / config / 'libgyrocompass.so'


def _load():
    tried = []
    for path in _candidates():
        if path.exists():
            return ctypes.CDLL(str(path)), path
        tried.append(str(path))
    raise ImportError('libgyrocompass.so not found (looked at ' + ', '.join(tried) + '); install the wheel, set '
                      'GYROCOMPASS_LIBRARY, or run `swift build --product gyrocompass` in the checkout')


lib, LIBRARY_PATH = _load()

_d = ctypes.POINTER(ctypes.c_double)
_size = ctypes.c_size_t

try:
    lib.gc_version.restype = ctypes.c_char_p
    lib.gc_version.argtypes = []
    lib.gc_last_error.restype = ctypes.c_char_p
    lib.gc_last_error.argtypes = []
    lib.gc_settings_reference.restype = ctypes.c_int
    lib.gc_settings_reference.argtypes = [ctypes.c_char_p, _size, ctypes.POINTER(_size)]
    lib.gc_filter_create.restype = ctypes.c_int
    lib.gc_filter_create.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.gc_filter_destroy.restype = None
    lib.gc_filter_destroy.argtypes = [ctypes.c_void_p]
    lib.gc_filter_declare_calibrated.restype = ctypes.c_int
    lib.gc_filter_declare_calibrated.argtypes = [ctypes.c_void_p]
    lib.gc_filter_learn_calibration.restype = ctypes.c_int
    lib.gc_filter_learn_calibration.argtypes = [ctypes.c_void_p]
    lib.gc_filter_use_calibration_file.restype = ctypes.c_int
    lib.gc_filter_use_calibration_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.gc_filter_add_magnetometer.restype = ctypes.c_int
    lib.gc_filter_add_magnetometer.argtypes = [ctypes.c_void_p, ctypes.c_double, _d]
    lib.gc_filter_update_batch.restype = ctypes.c_int
    lib.gc_filter_update_batch.argtypes = [ctypes.c_void_p, _size, _d, _d, _d, _d, ctypes.c_void_p,
                                           ctypes.POINTER(_size)]
    lib.gc_filter_finish.restype = ctypes.c_int
    lib.gc_filter_finish.argtypes = [ctypes.c_void_p, ctypes.c_void_p, _size, ctypes.POINTER(_size)]
    lib.gc_replay.restype = ctypes.c_int
    lib.gc_replay.argtypes = [ctypes.c_char_p] * 4 + [ctypes.POINTER(ctypes.c_void_p)]
    lib.gc_replay_check.restype = ctypes.c_int
    lib.gc_replay_check.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.gc_replay_result_count.restype = _size
    lib.gc_replay_result_count.argtypes = [ctypes.c_void_p]
    lib.gc_replay_result_columns.restype = ctypes.c_int
    lib.gc_replay_result_columns.argtypes = [ctypes.c_void_p, _d, _d, _d, _d, ctypes.POINTER(ctypes.c_uint32)]
    lib.gc_replay_result_summary.restype = ctypes.c_int
    lib.gc_replay_result_summary.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _size, ctypes.POINTER(_size)]
    lib.gc_replay_result_log.restype = ctypes.c_int
    lib.gc_replay_result_log.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _size, ctypes.POINTER(_size)]
    lib.gc_replay_result_outcome.restype = ctypes.c_int
    lib.gc_replay_result_outcome.argtypes = [ctypes.c_void_p, ctypes.POINTER(_size), ctypes.POINTER(_size)]
    lib.gc_replay_result_destroy.restype = None
    lib.gc_replay_result_destroy.argtypes = [ctypes.c_void_p]
    lib.gc_bag_to_json_lines.restype = ctypes.c_int
    lib.gc_bag_to_json_lines.argtypes = [ctypes.c_char_p] * 3
    lib.gc_bag_topics.restype = ctypes.c_int
    lib.gc_bag_topics.argtypes = [ctypes.c_char_p, ctypes.c_char_p, _size, ctypes.POINTER(_size)]
    lib.gc_filter_summary.restype = ctypes.c_int
    lib.gc_filter_summary.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _size, ctypes.POINTER(_size)]
except AttributeError as e:  # a library older or newer than this package
    raise ImportError(f'{LIBRARY_PATH} does not match this package ({e}): rebuild it (`swift build --product '
                      'gyrocompass`, with -c release for .build/release) or point GYROCOMPASS_LIBRARY at a matching '
                      'one') from None


def last_error():
    return lib.gc_last_error().decode('utf-8', 'replace')


def text(function, *head):
    """A text the library writes into a buffer (asked for its size first)."""
    needed = _size(0)
    function(*head, None, 0, ctypes.byref(needed))
    buffer = ctypes.create_string_buffer(needed.value)
    status = function(*head, buffer, needed.value, ctypes.byref(needed))
    if status != GC_OK:
        raise RuntimeError(last_error())
    return buffer.value.decode('utf-8')


def pointer(array):
    return array.ctypes.data_as(_d) if array is not None else None
