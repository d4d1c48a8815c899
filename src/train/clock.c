/* clock.c — the monotonic wall clock of include/spikefuse_train.h, for throughput and ETA figures. */
#include "spikefuse_train.h"

#include <time.h>

double sf_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
