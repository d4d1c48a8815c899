/* bench_randn.h — reproducible benchmark inputs: N(mean, std) drawn from the library's counter hash (Box-Muller),
 * so every run and every program draws the same values. */
#ifndef SF_BENCH_RANDN_H
#define SF_BENCH_RANDN_H

#include "core/rng.h"

#include <math.h>
#include <stddef.h>

static inline void sf_bench_randn(float *x, size_t n, float mean, float std, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        float u1 = sf_uniform(seed, 1, i) + 1.0f / 33554432.0f, u2 = sf_uniform(seed, 2, i);
        x[i] = mean + std * sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
    }
}

#endif
