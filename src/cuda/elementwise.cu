/* elementwise.cu — dropout (one mask over all T steps, drawn by sf_dropout_keep exactly as on the CPU), add, axpy,
 * spike format conversions and the NaN/Inf check. */
#include "cuda/ops.cuh"

extern "C" {
#include "core/rng.h"
}

/* Thread per mask element, time inside: the hash is computed once per element, not once per step. */
__global__ void dropout_kernel(int64_t T, int64_t n, float p, float scale, uint64_t seed, uint64_t counter,
                               const float *x, float *y)
{
    SF_CU_GRID_STRIDE(i, n)
    {
        float m = sf_dropout_keep(seed, counter, (uint64_t)i, p) ? scale : 0.0f;
        for (int64_t t = 0; t < T; t++) y[t * n + i] = x[t * n + i] * m;
    }
}

static sf_status dropout(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter, const float *x,
                         float *y)
{
    if (!(p >= 0.0f && p < 1.0f)) return sf_fail(SF_ERR_INVALID, "dropout p = %g: must be in [0, 1)", p);
    if (T * n == 0) return SF_OK;
    dropout_kernel<<<sf_cu_blocks(n, 256), 256, 0, sf_cu_ctx_of(be)->stream>>>(T, n, p, 1.0f / (1.0f - p), seed,
                                                                               counter, x, y);
    SF_CU_LAUNCHED();
    return SF_OK;
}

sf_status sf_cu_dropout_forward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                const float *x, float *y)
{
    return dropout(be, T, n, p, seed, counter, x, y);
}

sf_status sf_cu_dropout_backward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                 const float *dy, float *dx)
{
    return dropout(be, T, n, p, seed, counter, dy, dx);
}

__global__ void add_kernel(int64_t n, const float *a, const float *b, float *y)
{
    SF_CU_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}
__global__ void axpy_kernel(int64_t n, float alpha, const float *x, float *y)
{
    SF_CU_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}
__global__ void u8_to_f32_kernel(int64_t n, const uint8_t *x, float *y)
{
    SF_CU_GRID_STRIDE(i, n) y[i] = (float)x[i];
}
__global__ void f32_to_u8_kernel(int64_t n, const float *x, uint8_t *y)
{
    SF_CU_GRID_STRIDE(i, n) y[i] = x[i] != 0.0f;
}
__global__ void finite_kernel(int64_t n, const float *x, float *flag)
{
    SF_CU_GRID_STRIDE(i, n)
    if (!isfinite(x[i])) *flag = 1.0f; /* every writer stores the same value */
}

/* Grid-stride launches: enough blocks to fill the chip several times over, no more. */
#define SF_EW_LAUNCH(kernel, be, n, ...)                                                                               \
    do {                                                                                                               \
        if ((n) == 0) return SF_OK;                                                                                    \
        sf_cu_ctx *c_ = sf_cu_ctx_of(be);                                                                              \
        unsigned b_ = sf_cu_blocks(n, 256), cap_ = 32u * (unsigned)c_->num_sms;                                        \
        unsigned g_ = b_ < cap_ ? b_ : cap_;                                                                           \
        kernel<<<g_, 256, 0, c_->stream>>>(n, __VA_ARGS__);                                                            \
        SF_CU_LAUNCHED();                                                                                              \
        return SF_OK;                                                                                                  \
    } while (0)

sf_status sf_cu_add(sf_backend *be, int64_t n, const float *a, const float *b, float *y)
{
    SF_EW_LAUNCH(add_kernel, be, n, a, b, y);
}
sf_status sf_cu_axpy(sf_backend *be, int64_t n, float alpha, const float *x, float *y)
{
    SF_EW_LAUNCH(axpy_kernel, be, n, alpha, x, y);
}
sf_status sf_cu_u8_to_f32(sf_backend *be, int64_t n, const uint8_t *x, float *y)
{
    SF_EW_LAUNCH(u8_to_f32_kernel, be, n, x, y);
}
sf_status sf_cu_f32_to_u8(sf_backend *be, int64_t n, const float *x, uint8_t *y)
{
    SF_EW_LAUNCH(f32_to_u8_kernel, be, n, x, y);
}
sf_status sf_cu_check_finite(sf_backend *be, int64_t n, const float *x, float *flag)
{
    SF_EW_LAUNCH(finite_kernel, be, n, x, flag);
}
