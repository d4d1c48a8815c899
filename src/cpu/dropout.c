/* dropout.c — dropout with one mask shared by all T time steps (a dropped neuron stays dropped for the whole
 * sequence); the mask is a pure function of (seed, counter, index), so forward and backward recompute it
 * instead of storing it, and every backend draws the same one. */
#include "cpu/cpu_layers.h"

#include "core/error.h"
#include "core/rng.h"

#include <math.h>

static sf_status check_dropout(int64_t T, int64_t n, float p)
{
    if (T <= 0 || n < 0) return sf_fail(SF_ERR_INVALID, "dropout: T=%lld n=%lld: need T >= 1, n >= 0",
                                        (long long)T, (long long)n);
    if (!(p >= 0.0f && p <= 1.0f)) return sf_fail(SF_ERR_INVALID, "dropout: p = %g: must be in [0, 1]", p);
    return SF_OK;
}

/* y[t, i] = x[t, i]·mask[i]/(1 - p). The mask of a block of indices is drawn once and applied to all T rows. */
static void apply_mask(int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter, const float *x, float *y)
{
    enum { BLOCK = 1024 };
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; /* p = 1 drops everything, as PyTorch does */
    const int64_t nblocks = (n + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t i0 = blk * BLOCK, i1 = i0 + BLOCK < n ? i0 + BLOCK : n;
        float m[BLOCK];
        for (int64_t i = i0; i < i1; i++) m[i - i0] = sf_dropout_keep(seed, counter, (uint64_t)i, p) ? scale : 0.0f;
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * n;
            float *yt = y + t * n;
            for (int64_t i = i0; i < i1; i++) yt[i] = xt[i] * m[i - i0];
        }
    }
}

sf_status sf_cpu_op_dropout_forward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                    const float *x, float *y)
{
    SF_TRY(check_dropout(T, n, p));
    apply_mask(T, n, p, seed, counter, x, y);
    return SF_OK;
}

sf_status sf_cpu_op_dropout_backward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed,
                                     uint64_t counter, const float *dy, float *dx)
{
    SF_TRY(check_dropout(T, n, p));
    apply_mask(T, n, p, seed, counter, dy, dx);
    return SF_OK;
}
