/*
 * GyroCompass: a gyro-compass fusion filter, from C.
 *
 * One filter is what `fusion-node replay` runs as its fusion stage: the same settings (names, units,
 * ranges and defaults; `gc_settings_reference` lists them) and the same code for every sample. Give
 * samples in time order: gyroscope (rad/s), accelerometer (specific force, m/s^2, pointing up at rest)
 * and magnetometer (microtesla), each in the sensor's axes with its own time in seconds (any epoch).
 * The magnetometer may be absent, or at its own rate (`gc_filter_add_magnetometer`).
 *
 * Thread safety: different filters may be used on different threads at once; one filter must not be
 * used by two threads at once (lock around it). `gc_version`, `gc_settings_reference` and
 * `gc_last_error` may be called from any thread; `gc_last_error` is the calling thread's own.
 *
 * Errors: every function that can fail returns a gc_status; GC_OK is 0. The message, naming what is
 * wrong and where (the setting with its line and column, the sample's time), is `gc_last_error()`.
 *
 * Link with `pkg-config --cflags --libs gyrocompass`.
 */
#ifndef GYROCOMPASS_H
#define GYROCOMPASS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The interface this header declares; a change that breaks callers raises it (and the soname). */
#define GYROCOMPASS_API_VERSION 1

typedef enum gc_status {
    GC_OK = 0,
    /* A NULL pointer where one is needed, or a count that does not fit. */
    GC_ERROR_ARGUMENT = 1,
    /* A setting that is unknown, of the wrong kind or out of its range, or two that do not go together. */
    GC_ERROR_SETTINGS = 2,
    /* A sample with a value that is not finite, or an IMU time not after the previous one. */
    GC_ERROR_SAMPLE = 3,
    /* A buffer too small for what it should hold (the size needed is given back). */
    GC_ERROR_BUFFER = 4,
    /* A file that cannot be read or is not what it should be, or a call out of order. */
    GC_ERROR_FILE = 5
} gc_status;

/* Bits of gc_estimate.flags: those of gyrocompass_msgs/Heading's FLAG_* and REASON_* constants. */
#define GC_FLAG_INITIALISING 0x1u
#define GC_FLAG_AT_REST 0x2u
#define GC_FLAG_ACCELERATION_REJECTED 0x4u
#define GC_FLAG_MAGNETOMETER_REJECTED 0x8u
#define GC_FLAG_GYRO_ONLY 0x10u
#define GC_FLAG_MAGNETIC_STRENGTH 0x20u
#define GC_FLAG_MAGNETIC_DIP 0x40u
#define GC_FLAG_MAGNETIC_GYRO_INCONSISTENT 0x80u
#define GC_FLAG_MAGNETIC_REFERENCE_CHANGED 0x100u
#define GC_FLAG_FILTER_RESET 0x200u
#define GC_FLAG_NO_POSITION 0x400u
#define GC_FLAG_WMM_OUT_OF_RANGE 0x800u
#define GC_FLAG_WMM_CAUTION_ZONE 0x1000u
#define GC_FLAG_MAGNETOMETER_UNCALIBRATED 0x2000u
#define GC_FLAG_GNSS_AIDED 0x4000u
#define GC_FLAG_COMPASS_GNSS_DISAGREE 0x8000u

/* One IMU sample's estimate. */
typedef struct gc_estimate {
    /* 1 when the filter gave an estimate for the sample; 0 when it skipped it (a gap, counted in the
     * summary) or holds it (the smoother: its estimates come from gc_filter_finish). */
    uint32_t valid;
    /* GC_FLAG_* bits. */
    uint32_t flags;
    /* Time of the IMU sample, seconds. */
    double time_s;
    /* Sensor frame relative to ENU with y = magnetic north: w, x, y, z. */
    double orientation_wxyz[4];
    /* Heading of the sensor's x axis, degrees clockwise from magnetic north in [0, 360); NaN when the
     * x axis is vertical. */
    double magnetic_heading_deg;
    /* The same from true north; NaN without a site (settings latitude and longitude). */
    double true_heading_deg;
    /* 95 % bound of the heading error, degrees; NaN when not valid. */
    double heading_accuracy_deg;
    /* Declination used, degrees east; NaN without a site. */
    double declination_deg;
    /* The filter's gyro bias estimate, rad/s, sensor axes. */
    double gyro_bias_rad_s[3];
} gc_estimate;

typedef struct gc_filter gc_filter;

/* The library's version, "X.Y.Z (commit)". */
const char *gc_version(void);

/* The calling thread's message about its last error ("" when none). Valid until its next call. */
const char *gc_last_error(void);

/* Every setting gc_filter_create takes, one per line: name, kind, unit, range, default and help,
 * tab-separated. Writes at most `capacity` bytes (NUL included) and sets `*needed` to the size the
 * whole text needs; GC_ERROR_BUFFER when that is more than `capacity`. */
gc_status gc_settings_reference(char *text, size_t capacity, size_t *needed);

/* A filter from settings: a YAML mapping as under a fusion stage in a pipeline file, e.g.
 * "filter: kalman\nlatitude: 48.1\nlongitude: 11.6"; NULL or "" for every default. */
gc_status gc_filter_create(const char *settings_yaml, gc_filter **filter);

/* The magnetometer readings are calibrated already (by the device or the caller): the filter does not
 * judge them as uncalibrated (without this, or a file, it checks them for iron nobody removes, as
 * `fusion-node replay --no-calibration` does). Before the first sample. */
gc_status gc_filter_declare_calibrated(gc_filter *filter);

/* Learn the magnetometer's calibration online from the readings (hard and soft iron, from ordinary
 * motion), as `fusion-node replay` does by default: its calibration stage in front of the filter. Until
 * a fit is accepted the estimates carry GC_FLAG_MAGNETOMETER_UNCALIBRATED. Before the first sample. */
gc_status gc_filter_learn_calibration(gc_filter *filter);

/* A calibration file (`fusion-node calibrate -o FILE`) applied to every magnetometer reading, as
 * `fusion-node replay --calibration FILE` applies it. Before the first sample. GC_ERROR_FILE when it
 * cannot be read or is not a calibration. */
gc_status gc_filter_use_calibration_file(gc_filter *filter, const char *path);

/* Frees a filter (NULL is allowed). */
void gc_filter_destroy(gc_filter *filter);

/* A magnetometer reading, microtesla: used with the first IMU sample at or after its time (within
 * 0.1 s). For a magnetometer at its own rate; give it before that IMU sample. */
gc_status gc_filter_add_magnetometer(gc_filter *filter, double time_s, const double field_ut[3]);

/* One IMU sample, with the magnetometer reading taken at the same time (`field_ut`, or NULL). `out`
 * receives its estimate (valid = 0 when there is none). */
gc_status gc_filter_update(gc_filter *filter, double time_s, const double gyro_rad_s[3], const double accel_m_s2[3],
                           const double *field_ut, gc_estimate *out);

/* `count` IMU samples at once: `time_s[i]`, `gyro_rad_s[3 i ...]`, `accel_m_s2[3 i ...]` and
 * `field_ut[3 i ...]` (a row of NaN: no reading at that sample; NULL: no magnetometer). `out[i]` gets
 * sample i's estimate. On an error, `*processed` (when not NULL) tells how many samples were taken
 * before the one named in the message. */
gc_status gc_filter_update_batch(gc_filter *filter, size_t count, const double *time_s, const double *gyro_rad_s,
                                 const double *accel_m_s2, const double *field_ut, gc_estimate *out,
                                 size_t *processed);

/* The end of the stream. For the smoother (setting smooth: true) every sample's estimate, in order:
 * writes at most `capacity` of them and sets `*count` to how many there are (GC_ERROR_BUFFER when more
 * than `capacity`; call again with enough room, the estimates are kept). A filter has none. */
gc_status gc_filter_finish(gc_filter *filter, gc_estimate *out, size_t capacity, size_t *count);

/* What the filter's summary says (samples fused and skipped, the disturbance gate's counts), lines
 * separated by '\n'; as gc_settings_reference for the buffer. */
gc_status gc_filter_summary(gc_filter *filter, char *text, size_t capacity, size_t *needed);

typedef struct gc_replay_result gc_replay_result;

/* `fusion-node replay BAG --csv QUATERNION_CSV --accuracy-csv ACCURACY_CSV` in this process: the same
 * graph (bag source, calibration, fusion) and the same two files (NULL: temporary ones, removed once
 * read). `options_yaml` (NULL or "" for the command's defaults) is a YAML mapping:
 *   calibration: online | none | PATH        (as the default, --no-calibration, --calibration PATH)
 *   imu_rotation, mag_rotation               (as --imu-rotation, --mag-rotation)
 *   filter, smooth, sensor_latency_s         (the fusion stage's)
 *   imu_topic, mag_topic, start_s, duration_s (the bag source's)
 *   STAGE.SETTING                            (any setting of the graph's stages, as --set)
 * `*result` (when `result` is not NULL) receives the estimates as columns and the stages' reports; free
 * it with gc_replay_result_destroy. Blocks until the replay ends; call it from a thread of your own,
 * not from a Swift concurrency task. GC_ERROR_SETTINGS for options the graph refuses, GC_ERROR_FILE for
 * a bag that cannot be read or gives nothing to fuse, or an output that cannot be written. */
gc_status gc_replay(const char *bag_path, const char *options_yaml, const char *quaternion_csv,
                    const char *accuracy_csv, gc_replay_result **result);

/* Whether gc_replay would accept `options_yaml` (names, values, the graph they make), without reading
 * the bag (`bag_path` may be NULL): GC_OK, or GC_ERROR_SETTINGS with the message gc_replay would give. */
gc_status gc_replay_check(const char *bag_path, const char *options_yaml);

/* How many estimates a replay gave. */
size_t gc_replay_result_count(const gc_replay_result *result);

/* Copies the columns (each NULL to skip it): times (s), quaternions (w, x, y, z: 4 per estimate),
 * magnetic headings and 95 % bounds (degrees; NaN where the CSV leaves them empty), flags (GC_FLAG_*
 * bits, without the true-north ones the CSV does not carry). Each array holds gc_replay_result_count
 * values (quaternions 4 times as many). */
gc_status gc_replay_result_columns(const gc_replay_result *result, double *time_s, double *quaternion_wxyz,
                                   double *heading_deg, double *accuracy_deg, uint32_t *flags);

/* The stages' reports, one per line, as fusion-node prints them; as gc_settings_reference for the buffer. */
gc_status gc_replay_result_summary(const gc_replay_result *result, char *text, size_t capacity, size_t *needed);

/* What the replay logged while it ran, one line per event, as fusion-node replay prints it on standard
 * error: each calibration accepted ("calibration: at T s accepted a KIND fit, offset X, Y, Z uT, field F
 * uT, rms R uT"), warnings; as gc_settings_reference for the buffer. */
gc_status gc_replay_result_log(const gc_replay_result *result, char *text, size_t capacity, size_t *needed);

/* What the command's exit code says: inputs skipped or lost (exit 3 when more than 0) and causes found
 * that make the output wrong, such as readings with iron nobody removes (exit 4); each named in the
 * summary. */
gc_status gc_replay_result_outcome(const gc_replay_result *result, size_t *losses, size_t *known_wrong);

/* Frees a replay's result (NULL is allowed). */
void gc_replay_result_destroy(gc_replay_result *result);

/* A bag's messages (MCAP or sqlite3, a file or a rosbag2 directory) as JSON lines in `output_path`, as
 * `fusion-node bag echo` prints them: {"topic", "type", "log_time" (ns), "message"} ("bytes" instead of
 * "message" for a type without a definition). `topics`: newline-separated names (with or without the
 * leading slash), or NULL for every topic. GC_ERROR_SETTINGS for a topic the bag does not have (the
 * message lists those it has); GC_ERROR_FILE for a bag that cannot be read, an output that cannot be
 * written, or messages that do not decode (the others are written; the message counts them). */
gc_status gc_bag_to_json_lines(const char *bag_path, const char *topics, const char *output_path);

/* A bag's topics (as `fusion-node bag info` lists them), one per line: "NAME\tTYPE\tCOUNT" (the count
 * from the bag's statistics, or counted where it has none); as gc_settings_reference for the buffer.
 * GC_ERROR_FILE for a bag that cannot be opened. */
gc_status gc_bag_topics(const char *bag_path, char *text, size_t capacity, size_t *needed);

#ifdef __cplusplus
}
#endif

#endif /* GYROCOMPASS_H */
