/* bn.c — batch norm on the CPU over x [rows, C, hw], statistics per channel over (rows, hw).
 *
 * Reductions are deterministic for any thread count: rows are cut into fixed chunks, each (chunk, channel) sums in
 * double with 8 fixed lanes, and the chunks are added in order. */
#include "cpu/cpu_neuron.h"
#include "cpu/neuron_block.h"
#include "core/error.h"

#include <math.h>
#include <stdlib.h>

#define SF_BN_ROW_CHUNK 8 /* rows per partial sum: fixed, so the summation order never depends on threads */
#define SF_BN_LANES 8

sf_status sf_cpu_alloc_f32(int64_t n, const char *what, float **out)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    *out = malloc(bytes);
    if (!*out) return sf_fail(SF_ERR_NOMEM, "%s: cannot allocate %zu bytes", what, bytes);
    return SF_OK;
}

sf_status sf_bn_check(const char *op, sf_bn_shape sh)
{
    if (sh.rows < 1 || sh.c < 1 || sh.hw < 1)
        return sf_fail(SF_ERR_INVALID, "%s: shape rows=%lld C=%d hw=%lld (each must be >= 1)", op, (long long)sh.rows,
                       (int)sh.c, (long long)sh.hw);
    return SF_OK;
}

void sf_bn_fold(int32_t C, const float *mean, const float *var, float eps, const float *gamma, const float *beta,
                float *invstd, float *scale, float *shift)
{
    for (int32_t c = 0; c < C; c++) {
        float is = 1.0f / sqrtf(var[c] + eps);
        float sc = (gamma ? gamma[c] : 1.0f) * is;
        invstd[c] = is;
        scale[c] = sc;
        shift[c] = (beta ? beta[c] : 0.0f) - mean[c] * sc;
    }
}

/* What one (row, channel) run of hw elements adds to a channel's two sums. */
typedef struct reduce_job {
    sf_bn_shape sh;
    const float *x;
    const float *dy;    /* NULL: statistics, sums of d = x - pivot and d²; else sums of dy and dy·(x - pivot) */
    const float *pivot; /* [C]: the first element of the channel (statistics) or its mean (gradient) */
} reduce_job;

static void reduce_run(const reduce_job *job, int64_t r, int32_t c, double acc[2])
{
    const int64_t hw = job->sh.hw, base = (r * job->sh.c + c) * hw;
    const float *x = job->x + base, *dy = job->dy ? job->dy + base : NULL;
    const double k = job->pivot[c];
    double a[SF_BN_LANES] = {0}, b[SF_BN_LANES] = {0};
    int64_t p = 0;
    for (; p + SF_BN_LANES <= hw; p += SF_BN_LANES)
        for (int j = 0; j < SF_BN_LANES; j++) {
            double d = (double)x[p + j] - k, w = dy ? (double)dy[p + j] : d;
            a[j] += dy ? w : d;
            b[j] += w * d;
        }
    for (int j = 0; p < hw; p++, j++) {
        double d = (double)x[p] - k, w = dy ? (double)dy[p] : d;
        a[j] += dy ? w : d;
        b[j] += w * d;
    }
    for (int j = 0; j < SF_BN_LANES; j++) {
        acc[0] += a[j];
        acc[1] += b[j];
    }
}

/* sums[2c], sums[2c+1] = the two sums of channel c over all rows and positions. */
static sf_status channel_reduce(const reduce_job *job, const char *op, double *sums)
{
    const int64_t C = job->sh.c, chunks = (job->sh.rows + SF_BN_ROW_CHUNK - 1) / SF_BN_ROW_CHUNK;
    double *part = malloc((size_t)(chunks * C * 2) * sizeof *part);
    if (!part) return sf_fail(SF_ERR_NOMEM, "%s: cannot allocate partial sums for %lld channels", op, (long long)C);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t k = 0; k < chunks; k++)
        for (int64_t c = 0; c < C; c++) {
            double acc[2] = {0, 0};
            const int64_t r1 = (k + 1) * SF_BN_ROW_CHUNK < job->sh.rows ? (k + 1) * SF_BN_ROW_CHUNK : job->sh.rows;
            for (int64_t r = k * SF_BN_ROW_CHUNK; r < r1; r++) reduce_run(job, r, (int32_t)c, acc);
            part[(k * C + c) * 2] = acc[0];
            part[(k * C + c) * 2 + 1] = acc[1];
        }
    for (int64_t c = 0; c < C; c++) {
        double s0 = 0, s1 = 0;
        for (int64_t k = 0; k < chunks; k++) {
            s0 += part[(k * C + c) * 2];
            s1 += part[(k * C + c) * 2 + 1];
        }
        sums[2 * c] = s0;
        sums[2 * c + 1] = s1;
    }
    free(part);
    return SF_OK;
}

sf_status sf_cpu_op_bn_stats(sf_backend *be, sf_bn_shape sh, const float *x, float *mean, float *var)
{
    (void)be;
    SF_TRY(sf_bn_check("BN statistics", sh));
    /* Shifting by the channel's first element keeps Σd² - (Σd)²/n accurate when |mean| ≫ std. */
    float *pivot = NULL;
    double *sums = malloc((size_t)sh.c * 2 * sizeof *sums);
    sf_status st = sums ? sf_cpu_alloc_f32(sh.c, "BN statistics", &pivot)
                        : sf_fail(SF_ERR_NOMEM, "BN statistics: cannot allocate sums for %d channels", (int)sh.c);
    if (st == SF_OK) {
        for (int32_t c = 0; c < sh.c; c++) pivot[c] = x[(int64_t)c * sh.hw];
        reduce_job job = {sh, x, NULL, pivot};
        st = channel_reduce(&job, "BN statistics", sums);
    }
    if (st == SF_OK) {
        const double n = (double)sh.rows * (double)sh.hw;
        for (int32_t c = 0; c < sh.c; c++) {
            double m = sums[2 * c] / n, v = sums[2 * c + 1] / n - m * m;
            mean[c] = (float)(pivot[c] + m);
            var[c] = (float)(v > 0 ? v : 0);
        }
    }
    free(pivot);
    free(sums);
    return st;
}

sf_status sf_cpu_op_bn_forward(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                               float eps, const float *gamma, const float *beta, float *y)
{
    (void)be;
    SF_TRY(sf_bn_check("BN forward", sh));
    float *f = NULL;
    SF_TRY(sf_cpu_alloc_f32(3 * (int64_t)sh.c, "BN forward", &f));
    float *scale = f + sh.c, *shift = f + 2 * sh.c;
    sf_bn_fold(sh.c, mean, var, eps, gamma, beta, f, scale, shift);
    const int64_t runs = sh.rows * sh.c, hw = sh.hw;
#pragma omp parallel for schedule(static)
    for (int64_t rc = 0; rc < runs; rc++) {
        const float sc = scale[rc % sh.c], sf = shift[rc % sh.c];
        const float *xr = x + rc * hw;
        float *yr = y + rc * hw;
        for (int64_t p = 0; p < hw; p++) yr[p] = xr[p] * sc + sf;
    }
    free(f);
    return SF_OK;
}

sf_status sf_cpu_op_bn_backward(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                                float eps, const float *gamma, const float *dy, float *dx, float *dgamma, float *dbeta)
{
    (void)be;
    SF_TRY(sf_bn_check("BN backward", sh));
    double *sums = malloc((size_t)sh.c * 2 * sizeof *sums);
    if (!sums) return sf_fail(SF_ERR_NOMEM, "BN backward: cannot allocate sums for %d channels", (int)sh.c);
    float *f = NULL;
    sf_status st = sf_cpu_alloc_f32(5 * (int64_t)sh.c, "BN backward", &f);
    if (st == SF_OK) {
        reduce_job job = {sh, x, dy, mean};
        st = channel_reduce(&job, "BN backward", sums);
    }
    if (st == SF_OK) {
        /* dx = γ·invstd·(dy - mean(dy) - x̂·mean(dy·x̂)) with x̂ = (x - mean)·invstd. */
        float *invstd = f, *k1 = f + sh.c, *shift = f + 2 * sh.c, *mdy = f + 3 * sh.c, *mdyx = f + 4 * sh.c;
        sf_bn_fold(sh.c, mean, var, eps, gamma, NULL, invstd, k1, shift);
        const double n = (double)sh.rows * (double)sh.hw;
        for (int32_t c = 0; c < sh.c; c++) {
            const double sdyx = sums[2 * c + 1] * invstd[c]; /* Σ dy·x̂ */
            if (dbeta) dbeta[c] = (float)sums[2 * c];
            if (dgamma) dgamma[c] = (float)sdyx;
            mdy[c] = (float)(sums[2 * c] / n);
            mdyx[c] = (float)(sdyx / n);
        }
        const int64_t runs = sh.rows * sh.c, hw = sh.hw;
#pragma omp parallel for schedule(static)
        for (int64_t rc = 0; rc < runs; rc++) {
            const int64_t c = rc % sh.c;
            const float a = k1[c], m = mdy[c], mx = mdyx[c], mu = mean[c], is = invstd[c];
            const float *xr = x + rc * hw, *dyr = dy + rc * hw;
            float *dxr = dx + rc * hw;
            for (int64_t p = 0; p < hw; p++) dxr[p] = a * (dyr[p] - m - (xr[p] - mu) * is * mx);
        }
    }
    free(f);
    free(sums);
    return st;
}

sf_status sf_cpu_op_bn_update_running(sf_backend *be, sf_bn_shape sh, float momentum, const float *mean,
                                      const float *var, const float *shift, float *running_mean, float *running_var)
{
    (void)be;
    SF_TRY(sf_bn_check("BN running statistics", sh));
    const double n = (double)sh.rows * (double)sh.hw;
    if (n < 2)
        return sf_fail(SF_ERR_INVALID, "BN running statistics: one value per channel (rows·hw = 1) has no unbiased "
                                       "variance; use a batch of at least 2");
    for (int32_t c = 0; c < sh.c; c++) {
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (mean[c] + (shift ? shift[c] : 0.0f));
        running_var[c] = (1.0f - momentum) * running_var[c] + momentum * (float)((double)var[c] * n / (n - 1));
    }
    return SF_OK;
}

sf_status sf_cpu_op_bn_stats_merge(sf_backend *be, int32_t parts, int32_t C, const float *part_stats, float *mean,
                                   float *var)
{
    (void)be;
    if (parts < 1 || C < 1)
        return sf_fail(SF_ERR_INVALID, "BN statistics merge: %d parts of %d channels (each must be >= 1)", parts, C);
    for (int32_t c = 0; c < C; c++) {
        double m = 0.0, v = 0.0;
        for (int32_t q = 0; q < parts; q++) m += part_stats[(int64_t)q * 2 * C + c];
        m /= parts;
        for (int32_t q = 0; q < parts; q++) {
            const double d = part_stats[(int64_t)q * 2 * C + c] - m;
            v += part_stats[(int64_t)q * 2 * C + C + c] + d * d;
        }
        mean[c] = (float)m;
        var[c] = (float)(v / parts);
    }
    return SF_OK;
}
