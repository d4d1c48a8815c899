/* pool.cu — average and max pooling over n planes of h×w with PyTorch's border rules (pool.c), in the activation
 * type, NCHW or NHWC. Backwards gather over the windows covering an input pixel: no atomics, deterministic. Windows
 * that tile an NCHW plane exactly (the usual 2×2) take a thread per window; NHWC takes a thread per 4 channels of a
 * pixel, loaded as one word. Index arithmetic is 32-bit where the tensor allows: 64-bit divisions made these
 * memory-bound kernels issue-bound. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

#include <algorithm>

/* A grid-stride loop over i of index type I (the kernels' template parameter). */
#define POOL_GRID_STRIDE(i, n)                                                                                         \
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (I)gridDim.x * blockDim.x)

/* Max over a window of window-relative positions (wy, wx) + (iy, ix) in [y0, y1) × [x0, x1): the first maximum wins,
 * NaN propagates (PyTorch); the average sums (the caller divides). best: the winner's index in the k×k window. */
template <bool MAX, class T, class I>
__device__ __forceinline__ float pool_window(const T *in, I w, int32_t k, int32_t wy, int32_t wx, int32_t y0,
                                             int32_t y1, int32_t x0, int32_t x1, int *best)
{
    float acc = MAX ? sf_widen(in[(I)y0 * w + (I)x0]) : 0.0f;
    *best = (y0 - wy) * k + (x0 - wx);
    for (int32_t iy = y0; iy < y1; iy++)
        for (int32_t ix = x0; ix < x1; ix++) {
            float v = sf_widen(in[(I)iy * w + (I)ix]);
            if (MAX) {
                if (v > acc || (isnan(v) && !isnan(acc))) {
                    acc = v;
                    *best = (iy - wy) * k + (ix - wx);
                }
            } else {
                acc += v;
            }
        }
    return acc;
}

template <bool MAX, class T>
__device__ __forceinline__ void pool_store(T *y, uint8_t *argmax, int64_t i, float acc, int best, int32_t k)
{
    if (MAX) {
        y[i] = sf_narrow<T>(acc);
        argmax[i] = (uint8_t)best;
    } else {
        y[i] = sf_narrow<T>(acc / (float)(k * k)); /* the border counts as zeros (count_include_pad) */
    }
}

template <bool MAX, class T, class I>
__global__ void pool_forward_kernel(sf_pool_shape sh, const T *x, T *y, uint8_t *argmax)
{
    const I total = (I)sh.n * (I)sh.oh * (I)sh.ow, oh = (I)sh.oh, ow = (I)sh.ow, hw = (I)sh.h * (I)sh.w;
    POOL_GRID_STRIDE(i, total)
    {
        I row = i / ow, p = row / oh;
        int32_t ox = (int32_t)(i - row * ow), oy = (int32_t)(row - p * oh);
        /* the window's corner (wy, wx) may lie in the border; only its part inside the plane is read */
        int32_t wy = oy * sh.stride - sh.pad, wx = ox * sh.stride - sh.pad;
        int best;
        float acc = pool_window<MAX, T, I>(x + p * hw, (I)sh.w, sh.k, wy, wx, max(wy, 0), min(wy + sh.k, sh.h),
                                           max(wx, 0), min(wx + sh.k, sh.w), &best);
        pool_store<MAX, T>(y, argmax, (int64_t)i, acc, best, sh.k);
    }
}

/* Windows that tile the plane (k = stride, pad 0, k divides h and w): window i's corner is input pixel
 * (row·k, ox·k) of the planes' stacked rows, row = i / ow. */
template <bool MAX, class T, class I>
__global__ void pool_forward_tiled(sf_pool_shape sh, const T *x, T *y, uint8_t *argmax)
{
    const I total = (I)sh.n * (I)sh.oh * (I)sh.ow, ow = (I)sh.ow, w = (I)sh.w, k = (I)sh.k;
    POOL_GRID_STRIDE(i, total)
    {
        I row = i / ow, ox = i - row * ow;
        int best;
        float acc = pool_window<MAX, T, I>(x + row * k * w + ox * k, w, sh.k, 0, 0, 0, sh.k, 0, sh.k, &best);
        pool_store<MAX, T>(y, argmax, (int64_t)i, acc, best, sh.k);
    }
}

template <bool MAX, class T, class I>
__global__ void pool_backward_kernel(sf_pool_shape sh, const uint8_t *argmax, const T *dy, T *dx)
{
    const I total = (I)sh.n * (I)sh.h * (I)sh.w, h = (I)sh.h, w = (I)sh.w;
    POOL_GRID_STRIDE(i, total)
    {
        I row = i / w, p = row / h;
        int32_t ix = (int32_t)(i - row * w), iy = (int32_t)(row - p * h);
        /* outputs o with o·stride <= q < o·stride + k, q the pixel's position in the bordered plane */
        int32_t qy = iy + sh.pad, qx = ix + sh.pad;
        int32_t oy0 = qy >= sh.k ? (qy - sh.k) / sh.stride + 1 : 0, oy1 = min(qy / sh.stride, sh.oh - 1);
        int32_t ox0 = qx >= sh.k ? (qx - sh.k) / sh.stride + 1 : 0, ox1 = min(qx / sh.stride, sh.ow - 1);
        float acc = 0.0f;
        for (int32_t oy = oy0; oy <= oy1; oy++)
            for (int32_t ox = ox0; ox <= ox1; ox++) {
                I o = (p * (I)sh.oh + (I)oy) * (I)sh.ow + (I)ox;
                if (!MAX || argmax[o] == (qy - oy * sh.stride) * sh.k + (qx - ox * sh.stride)) acc += sf_widen(dy[o]);
            }
        dx[i] = sf_narrow<T>(MAX ? acc : acc / (float)(sh.k * sh.k));
    }
}

/* Tiled windows: each thread writes its window's k×k gradients (max: dy at the argmax, 0 elsewhere). */
template <bool MAX, class T, class I>
__global__ void pool_backward_tiled(sf_pool_shape sh, const uint8_t *argmax, const T *dy, T *dx)
{
    const I total = (I)sh.n * (I)sh.oh * (I)sh.ow, ow = (I)sh.ow, w = (I)sh.w, k = (I)sh.k;
    POOL_GRID_STRIDE(i, total)
    {
        I row = i / ow, ox = i - row * ow;
        const float g = MAX ? sf_widen(dy[i]) : sf_widen(dy[i]) / (float)(sh.k * sh.k);
        const int best = MAX ? argmax[i] : -1;
        T *out = dx + row * k * w + ox * k;
        for (int32_t wy = 0; wy < sh.k; wy++)
            for (int32_t wx = 0; wx < sh.k; wx++)
                out[(I)wy * w + (I)wx] = sf_narrow<T>(!MAX || wy * sh.k + wx == best ? g : 0.0f);
    }
}

/* Division of 32-bit indices (below 2^31) by a run-time divisor d as a multiply-high, add and shift by the magic
 * number made on the host (Granlund and Montgomery): the NHWC kernels' index arithmetic without the ~20 instructions
 * of an integer division, which made them issue-bound. 64-bit indices divide plainly. */
struct pool_divisor {
    uint32_t d, mul, shift;
};

static pool_divisor pool_divisor_of(uint32_t d)
{
    uint32_t s = 0;
    while ((1ull << s) < d) s++;
    return {d, (uint32_t)(((1ull << 32) * ((1ull << s) - d)) / d + 1), s};
}

template <class I> __device__ __forceinline__ I pool_div(I n, const pool_divisor &v)
{
    if constexpr (sizeof(I) == 4) return (__umulhi((uint32_t)n, v.mul) + (uint32_t)n) >> v.shift;
    else return n / (I)v.d;
}

/* The NHWC kernels' divisors: channel groups per pixel, the width and height of the side a thread indexes (the
 * output in the forward, the input in the backward), and the stride. */
struct pool_divisors {
    pool_divisor groups, w, h, stride;
};

/* NHWC: V channels (group g of c/V) of output pixel (img, oy, ox) per thread, over the part of its window inside
 * the plane; element offsets are i·V, the window's taps c apart per pixel. */
template <bool MAX, class T, class I, int V>
__global__ void pool_forward_nhwc(sf_pool_shape sh, pool_divisors dv, const T *x, T *y, uint8_t *argmax)
{
    const I groups = (I)(sh.c / V), c = (I)sh.c, oh = (I)sh.oh, ow = (I)sh.ow, w = (I)sh.w;
    const I total = (I)(sh.n / sh.c) * oh * ow * groups;
    POOL_GRID_STRIDE(i, total)
    {
        const I pix = pool_div(i, dv.groups), row = pool_div(pix, dv.w), img = pool_div(row, dv.h);
        const int32_t ox = (int32_t)(pix - row * ow), oy = (int32_t)(row - img * oh);
        const int32_t wy = oy * sh.stride - sh.pad, wx = ox * sh.stride - sh.pad;
        const int32_t y0 = max(wy, 0), y1 = min(wy + sh.k, sh.h), x0 = max(wx, 0), x1 = min(wx + sh.k, sh.w);
        const T *base = x + img * (I)sh.h * w * c + (i - pix * groups) * V;
        float acc[V] = {}, v[V];
        int best[V];
        if (MAX) sf_ld<V, false>(base + ((I)y0 * w + (I)x0) * c, acc);
        for (int j = 0; j < V; j++) best[j] = (y0 - wy) * sh.k + (x0 - wx);
        for (int32_t iy = y0; iy < y1; iy++)
            for (int32_t ix = x0; ix < x1; ix++) {
                sf_ld<V, false>(base + ((I)iy * w + (I)ix) * c, v);
                for (int j = 0; j < V; j++) {
                    if (!MAX) acc[j] += v[j];
                    else if (v[j] > acc[j] || (isnan(v[j]) && !isnan(acc[j])))
                        acc[j] = v[j], best[j] = (iy - wy) * sh.k + (ix - wx);
                }
            }
        for (int j = 0; j < V; j++) acc[j] = MAX ? acc[j] : acc[j] / (float)(sh.k * sh.k);
        sf_st<V>(y + i * V, acc);
        if constexpr (MAX && V == 4)
            *(uchar4 *)(argmax + i * V) =
                make_uchar4((uint8_t)best[0], (uint8_t)best[1], (uint8_t)best[2], (uint8_t)best[3]);
        else if constexpr (MAX) argmax[i] = (uint8_t)best[0];
    }
}

/* V channels of input pixel (img, iy, ix) per thread: the sum of dy over the windows that cover it (max: where
 * that window's argmax is this pixel). */
template <bool MAX, class T, class I, int V>
__global__ void pool_backward_nhwc(sf_pool_shape sh, pool_divisors dv, const uint8_t *argmax, const T *dy, T *dx)
{
    const I groups = (I)(sh.c / V), h = (I)sh.h, w = (I)sh.w;
    const I total = (I)(sh.n / sh.c) * h * w * groups;
    POOL_GRID_STRIDE(i, total)
    {
        const I pix = pool_div(i, dv.groups), g = i - pix * groups, row = pool_div(pix, dv.w),
                img = pool_div(row, dv.h);
        const int32_t ix = (int32_t)(pix - row * w), iy = (int32_t)(row - img * h);
        const uint32_t qy = (uint32_t)(iy + sh.pad), qx = (uint32_t)(ix + sh.pad), k = (uint32_t)sh.k;
        const int32_t oy0 = qy >= k ? (int32_t)pool_div(qy - k, dv.stride) + 1 : 0;
        const int32_t ox0 = qx >= k ? (int32_t)pool_div(qx - k, dv.stride) + 1 : 0;
        const int32_t oy1 = min((int32_t)pool_div(qy, dv.stride), sh.oh - 1);
        const int32_t ox1 = min((int32_t)pool_div(qx, dv.stride), sh.ow - 1);
        float acc[V] = {}, g_o[V];
        for (int32_t oy = oy0; oy <= oy1; oy++)
            for (int32_t ox = ox0; ox <= ox1; ox++) {
                const I o = ((img * (I)sh.oh + (I)oy) * (I)sh.ow + (I)ox) * groups + g;
                sf_ld<V, false>(dy + o * V, g_o);
                const int at = ((int)qy - oy * sh.stride) * sh.k + ((int)qx - ox * sh.stride);
                uint8_t am[V] = {};
                if constexpr (MAX && V == 4) {
                    const uchar4 q = *(const uchar4 *)(argmax + o * V);
                    am[0] = q.x, am[1] = q.y, am[2] = q.z, am[3] = q.w;
                } else if constexpr (MAX) {
                    am[0] = argmax[o];
                }
                for (int j = 0; j < V; j++)
                    if (!MAX || am[j] == at) acc[j] += g_o[j];
            }
        for (int j = 0; j < V; j++) acc[j] = MAX ? acc[j] : acc[j] / (float)(sh.k * sh.k);
        sf_st<V>(dx + i * V, acc);
    }
}

static sf_status check(const sf_pool_shape *sh, bool max)
{
    const int32_t p = sh->pad;
    if (sh->k < 1 || (max && sh->k > 16) || sh->stride < 1 || p < 0 || 2 * p > sh->k || sh->k > sh->h + 2 * p ||
        sh->k > sh->w + 2 * p || sh->oh != (sh->h + 2 * p - sh->k) / sh->stride + 1 ||
        sh->ow != (sh->w + 2 * p - sh->k) / sh->stride + 1 || sh->c < 0 || (sh->c > 0 && sh->n % sh->c != 0))
        return sf_fail(SF_ERR_INVALID,
                       "pool shape %lld planes (NHWC channels %d) of %dx%d k=%d stride=%d pad=%d -> %dx%d is "
                       "inconsistent (max: k <= 16, the argmax is one byte; pad <= k/2; NHWC: whole images)",
                       (long long)sh->n, sh->c, sh->h, sh->w, sh->k, sh->stride, p, sh->oh, sh->ow);
    return SF_OK;
}

static bool tiled(const sf_pool_shape *sh)
{
    return sh->k == sh->stride && sh->pad == 0 && sh->h % sh->k == 0 && sh->w % sh->k == 0;
}

/* Whether an NHWC pool may take 4 channels per thread: c a multiple of 4 and every pointer aligned to 4 elements. */
static bool nhwc_vec4(const sf_pool_shape *sh, size_t elem, const void *in, const void *out, const void *am)
{
    const uintptr_t a = (uintptr_t)in | (uintptr_t)out;
    return sh->c % 4 == 0 && a % (4 * elem) == 0 && (uintptr_t)am % 4 == 0;
}

/* The forward (in x, out y, am_out the argmax) or the backward (in dy, out dx, am_in the argmax): NHWC, tiled where
 * the windows tile NCHW planes, or the general NCHW kernels; 32-bit indices where every index of the input and
 * output fits. */
template <bool MAX, bool FWD>
static sf_status launch(sf_backend *be, const sf_pool_shape *sh, const void *in, void *out, const uint8_t *am_in,
                        uint8_t *am_out)
{
    SF_TRY(check(sh, MAX));
    const bool tile = !sh->c && tiled(sh);
    const int64_t in_size = sh->n * sh->h * sh->w, threads = tile || FWD ? sh->n * sh->oh * sh->ow : in_size;
    if (threads == 0) return SF_OK;
    /* 32-bit: every index below 2^31, so that the grid-stride step (at most one more grid) cannot wrap */
    const bool narrow = std::max(in_size, sh->n * sh->oh * sh->ow) <= (int64_t)INT32_MAX - 256;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        auto go = [&](auto index) {
            using I = decltype(index);
            const bool v4 = sh->c && nhwc_vec4(sh, sizeof(T), in, out, FWD ? am_out : am_in);
            const dim3 grid = sf_cuda_blocks(v4 ? threads / 4 : threads, 256);
            if (sh->c) {
                const pool_divisors dv = {pool_divisor_of((uint32_t)(sh->c / (v4 ? 4 : 1))),
                                          pool_divisor_of((uint32_t)(FWD ? sh->ow : sh->w)),
                                          pool_divisor_of((uint32_t)(FWD ? sh->oh : sh->h)),
                                          pool_divisor_of((uint32_t)sh->stride)};
                if constexpr (FWD) {
                    auto k = v4 ? pool_forward_nhwc<MAX, T, I, 4> : pool_forward_nhwc<MAX, T, I, 1>;
                    k<<<grid, 256, 0, c->stream>>>(*sh, dv, (const T *)in, (T *)out, am_out);
                } else {
                    auto k = v4 ? pool_backward_nhwc<MAX, T, I, 4> : pool_backward_nhwc<MAX, T, I, 1>;
                    k<<<grid, 256, 0, c->stream>>>(*sh, dv, am_in, (const T *)in, (T *)out);
                }
            } else if constexpr (FWD) {
                auto k = tile ? pool_forward_tiled<MAX, T, I> : pool_forward_kernel<MAX, T, I>;
                k<<<grid, 256, 0, c->stream>>>(*sh, (const T *)in, (T *)out, am_out);
            } else {
                auto k = tile ? pool_backward_tiled<MAX, T, I> : pool_backward_kernel<MAX, T, I>;
                k<<<grid, 256, 0, c->stream>>>(*sh, am_in, (const T *)in, (T *)out);
            }
            SF_CUDA_LAUNCHED();
            return SF_OK;
        };
        return narrow ? go(uint32_t()) : go(int64_t());
    });
}

sf_status sf_cuda_op_avgpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y)
{
    return launch<false, true>(be, sh, x, y, NULL, NULL);
}

sf_status sf_cuda_op_avgpool_backward(sf_backend *be, const sf_pool_shape *sh, const float *dy, float *dx)
{
    return launch<false, false>(be, sh, dy, dx, NULL, NULL);
}

sf_status sf_cuda_op_maxpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y, uint8_t *argmax)
{
    return launch<true, true>(be, sh, x, y, NULL, argmax);
}

sf_status sf_cuda_op_maxpool_backward(sf_backend *be, const sf_pool_shape *sh, const uint8_t *argmax, const float *dy,
                                      float *dx)
{
    return launch<true, false>(be, sh, dy, dx, argmax, NULL);
}
