/* Not installed: what the library's Swift side calls in its C side. */
#ifndef GYROCOMPASS_INTERNAL_H
#define GYROCOMPASS_INTERNAL_H

/* Copies `message` as the calling thread's last error (gc_last_error); NULL clears it. */
void gyrocompass_set_last_error(const char *message);

#endif
