/*
 * GyroCompass from C: headings from samples given as text.
 *
 *   heading_from_samples [SETTINGS_YAML [CALIBRATION]] < samples.txt > estimates.csv
 *
 * CALIBRATION: "online" (learned from the readings, as `fusion-node replay` does), "calibrated" (the
 * readings are calibrated already) or a calibration file; without it the readings are taken as they
 * come, as `fusion-node replay --no-calibration` takes them.
 *
 * Input lines, in time order (a magnetometer reading before the IMU sample of the same time):
 *   i,TIME_S,GX,GY,GZ,AX,AY,AZ      an IMU sample: rad/s and m/s^2, sensor axes
 *   m,TIME_S,MX,MY,MZ               a magnetometer reading, microtesla
 * Output: one line per estimate, "time_s,qw,qx,qy,qz,heading_deg,accuracy_deg,flags", then the
 * filter's summary on stderr.
 *
 * Build: cc heading_from_samples.c $(pkg-config --cflags --libs gyrocompass) -o heading_from_samples
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gyrocompass.h>

static void print_estimate(const gc_estimate *e) {
    printf("%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%u\n", e->time_s, e->orientation_wxyz[0],
           e->orientation_wxyz[1], e->orientation_wxyz[2], e->orientation_wxyz[3], e->magnetic_heading_deg,
           e->heading_accuracy_deg, e->flags);
}

int main(int argc, char **argv) {
    gc_filter *filter = NULL;
    if (gc_filter_create(argc > 1 ? argv[1] : NULL, &filter) != GC_OK) {
        fprintf(stderr, "heading_from_samples: %s\n", gc_last_error());
        return 2;
    }
    if (argc > 2) {
        gc_status status = strcmp(argv[2], "online") == 0       ? gc_filter_learn_calibration(filter)
                           : strcmp(argv[2], "calibrated") == 0 ? gc_filter_declare_calibrated(filter)
                                                                : gc_filter_use_calibration_file(filter, argv[2]);
        if (status != GC_OK) {
            fprintf(stderr, "heading_from_samples: %s\n", gc_last_error());
            gc_filter_destroy(filter);
            return 2;
        }
    }
    char line[512];
    long number = 0;
    while (fgets(line, sizeof line, stdin)) {
        number++;
        double v[7];
        char kind = line[0];
        int n = sscanf(line + 1, ",%lf,%lf,%lf,%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]);
        gc_status status;
        if (kind == 'm' && n == 4) {
            status = gc_filter_add_magnetometer(filter, v[0], &v[1]);
        } else if (kind == 'i' && n == 7) {
            gc_estimate e;
            status = gc_filter_update(filter, v[0], &v[1], &v[4], NULL, &e);
            if (status == GC_OK && e.valid) print_estimate(&e);
        } else {
            fprintf(stderr, "line %ld: expected i,t,gx,gy,gz,ax,ay,az or m,t,mx,my,mz\n", number);
            gc_filter_destroy(filter);
            return 2;
        }
        if (status != GC_OK) {
            fprintf(stderr, "line %ld: %s\n", number, gc_last_error());
            gc_filter_destroy(filter);
            return 1;
        }
    }
    /* The smoother gives its estimates at the end. */
    size_t count = 0;
    gc_filter_finish(filter, NULL, 0, &count);
    if (count > 0) {
        gc_estimate *all = malloc(count * sizeof *all);
        if (all && gc_filter_finish(filter, all, count, &count) == GC_OK)
            for (size_t k = 0; k < count; k++) print_estimate(&all[k]);
        free(all);
    }
    size_t needed = 0;
    gc_filter_summary(filter, NULL, 0, &needed);
    char *summary = malloc(needed);
    if (summary && gc_filter_summary(filter, summary, needed, &needed) == GC_OK) fprintf(stderr, "%s\n", summary);
    free(summary);
    gc_filter_destroy(filter);
    return 0;
}
