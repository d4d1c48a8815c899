/* clock.h — a monotonic wall clock in seconds for throughput and ETA figures. */
#ifndef SF_TRAIN_CLOCK_H
#define SF_TRAIN_CLOCK_H

#include <time.h>

static inline double sf_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
