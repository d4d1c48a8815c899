/* bn.cu — batch norm over (T, B, H, W) per channel: statistics, normalisation, training-mode backward and the
 * running-statistics update. Layout x[rows, C, hw]; x, y, dy and dx in the backend's activation type, statistics
 * and parameters float. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"
#include "cuda/reduce.cuh"

#include <type_traits>

/* The channel of element i of an n-element tensor: in 32-bit divisions where n allows (a fraction of the 64-bit
 * ones' instructions). */
__device__ __forceinline__ int32_t bn_channel(int64_t i, int64_t n, int64_t hw, int32_t C)
{
    if (n <= UINT32_MAX) return (int32_t)((uint32_t)i / (uint32_t)hw % (uint32_t)C);
    return (int32_t)((i / hw) % C);
}

template <class T> struct StatsF {
    const T *x;
    float *mean, *var;
    __device__ void term(int64_t i, int32_t, double *a, double *b) const
    {
        double v = sf_widen(x[i]);
        *a += v;
        *b += v * v;
    }
    __device__ void finish(int32_t c, double a, double b, double n) const
    {
        double m = a / n, v = b / n - m * m;
        mean[c] = (float)m;
        var[c] = (float)(v > 0.0 ? v : 0.0);
    }
};

sf_status sf_cuda_op_bn_stats(sf_backend *be, sf_bn_shape sh, const float *x, float *mean, float *var)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        return sf_cuda_channel_reduce(c, StatsF<T>{(const T *)x, mean, var}, sh.rows, sh.c, sh.hw);
    });
}

template <class T>
__global__ void bn_forward_kernel(int64_t n, int64_t hw, int32_t C, const T *x, const float *mean, const float *var,
                                  float eps, const float *gamma, const float *beta, T *y)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        int32_t c = bn_channel(i, n, hw, C);
        float invstd = 1.0f / sqrtf(var[c] + eps);
        y[i] = sf_narrow<T>((sf_widen(x[i]) - mean[c]) * invstd * gamma[c] + beta[c]);
    }
}

sf_status sf_cuda_op_bn_forward(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                                float eps, const float *gamma, const float *beta, float *y)
{
    int64_t n = sh.rows * sh.c * sh.hw;
    if (n == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        bn_forward_kernel<T><<<sf_cuda_blocks(n, 256), 256, 0, c->stream>>>(n, sh.hw, sh.c, (const T *)x, mean, var,
                                                                            eps, gamma, beta, (T *)y);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

/* Σ dy and Σ dy·x̂ per channel: dbeta and dgamma. */
template <class T> struct BackF {
    const T *x, *dy;
    const float *mean, *var;
    float eps;
    float *dgamma, *dbeta;
    __device__ void term(int64_t i, int32_t c, double *a, double *b) const
    {
        double g = sf_widen(dy[i]);
        *a += g;
        *b += g * (double)(sf_widen(x[i]) - mean[c]);
    }
    __device__ void finish(int32_t c, double a, double b, double) const
    {
        dbeta[c] = (float)a;
        dgamma[c] = (float)(b / sqrt((double)var[c] + (double)eps));
    }
};

/* dx = γ·invstd·(dy − Σdy/count − x̂·Σdy·x̂/count); dx may be dy. A thread takes V consecutive elements of one channel
 * (V = 8 where hw and the pointers allow), so the channel's terms are computed once per V. */
template <class T, int V>
__global__ void bn_dx_kernel(int64_t n, int64_t hw, int32_t C, float inv_count, const T *x, const float *mean,
                             const float *var, float eps, const float *gamma, const T *dy, const float *dgamma,
                             const float *dbeta, T *dx)
{
    constexpr int W = V < 4 ? V : 4; /* elements per access */
    SF_CUDA_GRID_STRIDE(g, n / V)
    {
        const int64_t i = g * V;
        const int32_t c = bn_channel(i, n, hw, C);
        const float invstd = 1.0f / sqrtf(var[c] + eps), m = mean[c];
        const float mdy = dbeta[c] * inv_count, mdyx = dgamma[c] * inv_count, scale = gamma[c] * invstd;
#pragma unroll
        for (int w = 0; w < V; w += W) {
            float xv[W], gv[W], out[W];
            sf_ld<W, true>(x + i + w, xv);
            sf_ld<W, true>(dy + i + w, gv);
#pragma unroll
            for (int j = 0; j < W; j++) out[j] = scale * (gv[j] - mdy - (xv[j] - m) * invstd * mdyx);
            sf_st<W>(dx + i + w, out);
        }
    }
}

/* The same for hw = 1 (linear outputs; NHWC), a channel's elements C apart: a thread takes 4 consecutive channels and
 * walks the rows at the grid's stride, a multiple of the C / 4 channel groups, so its channels never change. */
template <class T>
__global__ void bn_dx_rows_kernel(int64_t groups, int32_t C, float inv_count, const T *x, const float *mean,
                                  const float *var, float eps, const float *gamma, const T *dy, const float *dgamma,
                                  const float *dbeta, T *dx)
{
    int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    const int32_t c0 = (int32_t)(g % (C / 4)) * 4;
    float invstd[4], m[4], mdy[4], mdyx[4], scale[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        invstd[j] = 1.0f / sqrtf(var[c0 + j] + eps);
        m[j] = mean[c0 + j];
        mdy[j] = dbeta[c0 + j] * inv_count;
        mdyx[j] = dgamma[c0 + j] * inv_count;
        scale[j] = gamma[c0 + j] * invstd[j];
    }
    for (const int64_t stride = (int64_t)gridDim.x * blockDim.x; g < groups; g += stride) {
        float xv[4], gv[4], out[4];
        sf_ld<4, true>(x + 4 * g, xv);
        sf_ld<4, true>(dy + 4 * g, gv);
#pragma unroll
        for (int j = 0; j < 4; j++) out[j] = scale[j] * (gv[j] - mdy[j] - (xv[j] - m[j]) * invstd[j] * mdyx[j]);
        sf_st<4>(dx + 4 * g, out);
    }
}

/* Blocks of 256 threads for bn_dx_rows_kernel: about 16 per multiprocessor, a multiple of those that make the grid
 * a multiple of the C / 4 channel groups; 0 where that multiple is too large. */
static unsigned bn_dx_rows_blocks(int64_t groups, int32_t C, int sms)
{
    int64_t cg = C / 4, a = cg, b = 256;
    while (b) { /* gcd(cg, 256) */
        const int64_t r = a % b;
        a = b, b = r;
    }
    const int64_t unit = cg / a; /* blocks per multiple of cg threads */
    int64_t want = (groups + 255) / 256 < 16 * (int64_t)sms ? (groups + 255) / 256 : 16 * (int64_t)sms;
    want = (want + unit - 1) / unit * unit;
    return want > 65535 ? 0 : (unsigned)want;
}

sf_status sf_cuda_bn_dx(const sf_cuda_ctx *c, sf_bn_shape sh, double count, const void *x, const float *mean,
                        const float *var, float eps, const float *gamma, const void *dy, const float *dgamma,
                        const float *dbeta, void *dx)
{
    cudaStream_t stream = c->stream;
    const int64_t n = sh.rows * sh.c * sh.hw;
    if (n == 0) return SF_OK;
    const float inv_count = (float)(1.0 / count);
    return sf_cuda_with_act(c->act, [&](auto tag) -> sf_status {
        using T = decltype(tag);
        const size_t a = 4 * sizeof(T);
        const bool v = (uintptr_t)x % a == 0 && (uintptr_t)dy % a == 0 && (uintptr_t)dx % a == 0;
        auto launch = [&](auto width) {
            constexpr int V = decltype(width)::value;
            bn_dx_kernel<T, V><<<sf_cuda_blocks(n / V, 256), 256, 0, stream>>>(
                n, sh.hw, sh.c, inv_count, (const T *)x, mean, var, eps, gamma, (const T *)dy, dgamma, dbeta, (T *)dx);
        };
        const unsigned rows_blocks = v && sh.hw == 1 && sh.c % 4 == 0 ? bn_dx_rows_blocks(n / 4, sh.c, c->num_sms) : 0;
        if (rows_blocks)
            bn_dx_rows_kernel<T><<<rows_blocks, 256, 0, stream>>>(n / 4, sh.c, inv_count, (const T *)x, mean, var, eps,
                                                                  gamma, (const T *)dy, dgamma, dbeta, (T *)dx);
        else if (v && sh.hw % 8 == 0)
            launch(std::integral_constant<int, 8>());
        else if (v && sh.hw % 4 == 0)
            launch(std::integral_constant<int, 4>());
        else
            launch(std::integral_constant<int, 1>());
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

sf_status sf_cuda_op_bn_backward(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                                 float eps, const float *gamma, const float *dy, float *dx, float *dgamma, float *dbeta)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (sh.rows * sh.c * sh.hw == 0) return SF_OK;
    SF_TRY(sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        return sf_cuda_channel_reduce(c, BackF<T>{(const T *)x, (const T *)dy, mean, var, eps, dgamma, dbeta}, sh.rows,
                                      sh.c, sh.hw);
    }));
    return sf_cuda_bn_dx(c, sh, (double)(sh.rows * sh.hw), x, mean, var, eps, gamma, dy, dgamma, dbeta, dx);
}

__global__ void bn_running_kernel(int32_t C, float m, float unbias, const float *mean, const float *var,
                                  const float *shift, float *rm, float *rv)
{
    int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    rm[c] = (1.0f - m) * rm[c] + m * (mean[c] + (shift ? shift[c] : 0.0f));
    rv[c] = (1.0f - m) * rv[c] + m * var[c] * unbias;
}

sf_status sf_cuda_op_bn_update_running(sf_backend *be, sf_bn_shape sh, float momentum, const float *mean,
                                       const float *var, const float *shift, float *running_mean, float *running_var)
{
    int64_t cnt = sh.rows * sh.hw;
    if (cnt < 2)
        return sf_fail(SF_ERR_INVALID,
                       "BN running statistics: %lld value(s) per channel have no unbiased variance; "
                       "use a batch of at least 2",
                       (long long)cnt);
    if (sh.c == 0) return SF_OK;
    float unbias = (float)((double)cnt / (double)(cnt - 1));
    bn_running_kernel<<<sf_cuda_blocks(sh.c, 128), 128, 0, sf_cuda_ctx_of(be)->stream>>>(
        sh.c, momentum, unbias, mean, var, shift, running_mean, running_var);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

/* One thread per channel, parts in order in double: the merge is the same bits on every process (and the CPU's). */
__global__ void bn_merge_kernel(int32_t parts, int32_t C, const float *ps, float *mean, float *var)
{
    int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double m = 0.0, v = 0.0;
    for (int32_t q = 0; q < parts; q++) m += ps[(int64_t)q * 2 * C + c];
    m /= parts;
    for (int32_t q = 0; q < parts; q++) {
        double d = ps[(int64_t)q * 2 * C + c] - m;
        v += ps[(int64_t)q * 2 * C + C + c] + d * d;
    }
    mean[c] = (float)m;
    var[c] = (float)(v / parts);
}

sf_status sf_cuda_op_bn_stats_merge(sf_backend *be, int32_t parts, int32_t C, const float *part_stats, float *mean,
                                    float *var)
{
    if (parts < 1 || C < 1)
        return sf_fail(SF_ERR_INVALID, "BN statistics merge: %d parts of %d channels (each must be >= 1)", parts, C);
    bn_merge_kernel<<<sf_cuda_blocks(C, 128), 128, 0, sf_cuda_ctx_of(be)->stream>>>(parts, C, part_stats, mean, var);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}
