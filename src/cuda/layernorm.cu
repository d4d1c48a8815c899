/* layernorm.cu — LayerNorm over the d channels of each row (core/transformer.h): a warp per row, the row's
 * statistics in double (the mean, then the squares about it, as the CPU's) summed by lanes in a fixed order; the
 * parameters' gradients with batch norm's deterministic per-channel reduction (reduce.cuh) over the rows. x, y, dy, dx
 * in the activation type; mean, rstd, γ, β and their gradients float. */
#include "cuda/act.cuh"
#include "cuda/reduce.cuh"
#include "cuda/ops.cuh"

enum { LN_THREADS = 256, LN_ROWS_PER_BLOCK = LN_THREADS / 32 };

__device__ __forceinline__ double warp_sum(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The same float expression as the CPU's (cpu/layernorm.c), wherever x̂ is needed. */
__device__ __forceinline__ float ln_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }

template <class T>
__global__ void layernorm_forward_kernel(int64_t rows, int32_t d, float eps, const T *x, const float *gamma,
                                         const float *beta, T *y, float *mean, float *rstd)
{
    const int lane = threadIdx.x & 31;
    const int64_t stride = (int64_t)gridDim.x * LN_ROWS_PER_BLOCK;
    for (int64_t r = (int64_t)blockIdx.x * LN_ROWS_PER_BLOCK + threadIdx.x / 32; r < rows; r += stride) {
        const T *xr = x + r * d;
        T *yr = y + r * d;
        double s = 0.0, q = 0.0;
        for (int32_t c = lane; c < d; c += 32) s += sf_widen(xr[c]);
        const double mu = warp_sum(s) / d;
        for (int32_t c = lane; c < d; c += 32) q += ((double)sf_widen(xr[c]) - mu) * ((double)sf_widen(xr[c]) - mu);
        const float rs = (float)(1.0 / sqrt(warp_sum(q) / d + (double)eps));
        for (int32_t c = lane; c < d; c += 32)
            yr[c] = sf_narrow<T>((float)((sf_widen(xr[c]) - mu) * rs) * (gamma ? gamma[c] : 1.0f) +
                                 (beta ? beta[c] : 0.0f));
        if (lane == 0) mean[r] = (float)mu, rstd[r] = rs;
    }
}

static unsigned ln_blocks(const sf_cuda_ctx *c, int64_t rows)
{
    const int64_t want = (rows + LN_ROWS_PER_BLOCK - 1) / LN_ROWS_PER_BLOCK, cap = 32 * (int64_t)c->num_sms;
    return (unsigned)(want < cap ? want : cap);
}

sf_status sf_cuda_op_layernorm_forward(sf_backend *be, int64_t rows, int32_t d, float eps, const float *x,
                                       const float *gamma, const float *beta, float *y, float *mean, float *rstd)
{
    SF_TRY(sf_layernorm_check("LayerNorm forward", rows, d));
    if (rows == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        layernorm_forward_kernel<T><<<ln_blocks(c, rows), LN_THREADS, 0, c->stream>>>(
            rows, d, eps, (const T *)x, gamma, beta, (T *)y, mean, rstd);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

/* dx = rstd·(g − mean_c(g) − x̂·mean_c(g·x̂)), g = dy·γ: a warp per row, its two sums first (dx may be dy). */
template <class T>
__global__ void layernorm_dx_kernel(int64_t rows, int32_t d, const T *x, const float *mean, const float *rstd,
                                    const float *gamma, const T *dy, T *dx)
{
    const int lane = threadIdx.x & 31;
    const int64_t stride = (int64_t)gridDim.x * LN_ROWS_PER_BLOCK;
    for (int64_t r = (int64_t)blockIdx.x * LN_ROWS_PER_BLOCK + threadIdx.x / 32; r < rows; r += stride) {
        const T *xr = x + r * d, *gr = dy + r * d;
        T *dxr = dx + r * d;
        const float m = mean[r], rs = rstd[r];
        double sg = 0.0, sgx = 0.0;
        for (int32_t c = lane; c < d; c += 32) {
            const double g = (double)sf_widen(gr[c]) * (gamma ? gamma[c] : 1.0f);
            sg += g;
            sgx += g * ln_xhat(sf_widen(xr[c]), m, rs);
        }
        const float mg = (float)(warp_sum(sg) / d), mgx = (float)(warp_sum(sgx) / d);
        for (int32_t c = lane; c < d; c += 32)
            dxr[c] = sf_narrow<T>(rs * (sf_widen(gr[c]) * (gamma ? gamma[c] : 1.0f) - mg -
                                        ln_xhat(sf_widen(xr[c]), m, rs) * mgx));
    }
}

/* Σ_rows dy (dbeta) and Σ_rows dy·x̂ (dgamma) per channel: reduce.cuh's rows-of-channels reduction (hw = 1), whose
 * element i is channel c of row i / d. */
template <class T> struct LnParamGrads {
    const T *x, *dy;
    const float *mean, *rstd;
    int32_t d;
    float *dgamma, *dbeta;
    __device__ void term(int64_t i, int32_t, double *a, double *b) const
    {
        const int64_t r = i <= UINT32_MAX ? (int64_t)((uint32_t)i / (uint32_t)d) : i / d;
        const double g = sf_widen(dy[i]);
        *a += g;
        *b += g * ln_xhat(sf_widen(x[i]), mean[r], rstd[r]);
    }
    __device__ void finish(int32_t c, double a, double b, double) const
    {
        if (dbeta) dbeta[c] = (float)a;
        if (dgamma) dgamma[c] = (float)b;
    }
};

static int64_t ln_parts(const sf_cuda_ctx *c, int64_t rows, int32_t d) { return sf_cuda_channel_parts(c->num_sms, rows, d, 1); }

size_t sf_cuda_op_layernorm_workspace(sf_backend *be, int64_t rows, int32_t d)
{
    if (rows < 1 || d < 1) return 0;
    return sizeof(double) * 2 * (size_t)d * (size_t)ln_parts(sf_cuda_ctx_of(be), rows, d);
}

sf_status sf_cuda_op_layernorm_backward(sf_backend *be, int64_t rows, int32_t d, const float *x, const float *mean,
                                        const float *rstd, const float *gamma, const float *dy, float *dx,
                                        float *dgamma, float *dbeta, void *ws)
{
    SF_TRY(sf_layernorm_check("LayerNorm backward", rows, d));
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (rows == 0) { /* no rows: the parameters' sums are empty */
        if (dgamma) SF_TRY(sf_cuda_zero_f32(c, dgamma, d));
        if (dbeta) SF_TRY(sf_cuda_zero_f32(c, dbeta, d));
        return SF_OK;
    }
    if ((dgamma || dbeta) && !ws)
        return sf_fail(SF_ERR_INVALID, "LayerNorm backward: workspace is NULL (give it layernorm_workspace bytes)");
    return sf_cuda_with_act(c->act, [&](auto tag) -> sf_status {
        using T = decltype(tag);
        if (dgamma || dbeta) /* before dx, which may overwrite dy */
            SF_TRY(sf_cuda_channel_reduce_into(LnParamGrads<T>{(const T *)x, (const T *)dy, mean, rstd, d, dgamma, dbeta},
                                               rows, d, 1, ln_parts(c, rows, d), (double *)ws, c->stream));
        layernorm_dx_kernel<T><<<ln_blocks(c, rows), LN_THREADS, 0, c->stream>>>(rows, d, (const T *)x, mean, rstd,
                                                                                  gamma, (const T *)dy, (T *)dx);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}
