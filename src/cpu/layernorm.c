/* layernorm.c — LayerNorm over the d channels of each row on the CPU (core/transformer.h): row statistics in double,
 * two passes (mean, then the squares about it); the parameters' gradients per column block over the rows in order,
 * so every thread count gives the same bits. */
#include "cpu/cpu_transformer.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <math.h>

sf_status sf_cpu_op_layernorm_forward(sf_backend *be, int64_t rows, int32_t d, float eps, const float *x,
                                      const float *gamma, const float *beta, float *y, float *mean, float *rstd)
{
    (void)be;
    SF_TRY(sf_layernorm_check("LayerNorm forward", rows, d));
#pragma omp parallel for schedule(static) if (rows * d >= SF_CPU_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double s = 0.0, q = 0.0;
        for (int32_t c = 0; c < d; c++) s += xr[c];
        const double mu = s / d;
        for (int32_t c = 0; c < d; c++) q += ((double)xr[c] - mu) * ((double)xr[c] - mu);
        const float rs = (float)(1.0 / sqrt(q / d + (double)eps));
        for (int32_t c = 0; c < d; c++) /* x - mean in double: a mean far from 0 rounds to a float's ulp */
            yr[c] = (float)((xr[c] - mu) * rs) * (gamma ? gamma[c] : 1.0f) + (beta ? beta[c] : 0.0f);
        mean[r] = (float)mu;
        rstd[r] = rs;
    }
    return SF_OK;
}

/* x̂ of one element, the same float expression wherever the backward needs it. */
static inline float xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }

/* dgamma[c] = Σ_r dy·x̂, dbeta[c] = Σ_r dy: a thread per block of columns, rows in order, in double. */
static void param_grads(int64_t rows, int32_t d, const float *x, const float *mean, const float *rstd,
                        const float *dy, float *dgamma, float *dbeta)
{
    enum { BLOCK = 64 };
    const int64_t nblocks = (d + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) if (rows * d >= SF_CPU_PARALLEL_MIN)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int32_t c0 = (int32_t)(blk * BLOCK), c1 = c0 + BLOCK < d ? c0 + BLOCK : d;
        double sg[BLOCK] = {0}, sb[BLOCK] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * d, *gr = dy + r * d;
            for (int32_t c = c0; c < c1; c++) {
                sg[c - c0] += (double)gr[c] * xhat(xr[c], mean[r], rstd[r]);
                sb[c - c0] += gr[c];
            }
        }
        for (int32_t c = c0; c < c1; c++) {
            if (dgamma) dgamma[c] = (float)sg[c - c0];
            if (dbeta) dbeta[c] = (float)sb[c - c0];
        }
    }
}

sf_status sf_cpu_op_layernorm_backward(sf_backend *be, int64_t rows, int32_t d, const float *x, const float *mean,
                                       const float *rstd, const float *gamma, const float *dy, float *dx,
                                       float *dgamma, float *dbeta, void *ws)
{
    (void)be, (void)ws;
    SF_TRY(sf_layernorm_check("LayerNorm backward", rows, d));
    if (dgamma || dbeta) param_grads(rows, d, x, mean, rstd, dy, dgamma, dbeta); /* before dx may overwrite dy */
#pragma omp parallel for schedule(static) if (rows * d >= SF_CPU_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d, *gr = dy + r * d;
        float *dxr = dx + r * d;
        const float m = mean[r], rs = rstd[r];
        double sg = 0.0, sgx = 0.0; /* Σ g and Σ g·x̂ with g = dy·γ */
        for (int32_t c = 0; c < d; c++) {
            const double g = (double)gr[c] * (gamma ? gamma[c] : 1.0f);
            sg += g;
            sgx += g * xhat(xr[c], m, rs);
        }
        const float mg = (float)(sg / d), mgx = (float)(sgx / d);
        for (int32_t c = 0; c < d; c++)
            dxr[c] = rs * (gr[c] * (gamma ? gamma[c] : 1.0f) - mg - xhat(xr[c], m, rs) * mgx);
    }
    return SF_OK;
}

size_t sf_cpu_op_layernorm_workspace(sf_backend *be, int64_t rows, int32_t d)
{
    (void)be, (void)rows, (void)d;
    return 0;
}
