/* bench_clock.h — host timing shared by the benchmark programs: a monotonic clock in milliseconds and the median
 * of a set of samples. */
#ifndef SF_BENCH_CLOCK_H
#define SF_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

static inline double sf_bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static inline double sf_bench_now_s(void) { return sf_bench_now_ms() * 1e-3; }

static inline int sf_bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v in place (so percentiles can be read off it too) and returns the median. */
static inline double sf_bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, sf_bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
