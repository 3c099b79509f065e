// The calling thread's last error message, for gc_last_error (the Swift side writes it).
#include <string.h>

#include "gyrocompass.h"
#include "gyrocompass_internal.h"

static _Thread_local char last_error[1024];

const char *gc_last_error(void) { return last_error; }

// Copies `message` (truncated to the buffer) as this thread's last error; NULL clears it.
void gyrocompass_set_last_error(const char *message) {
    if (message == NULL) {
        last_error[0] = '\0';
        return;
    }
    strncpy(last_error, message, sizeof last_error - 1);
    last_error[sizeof last_error - 1] = '\0';
}
