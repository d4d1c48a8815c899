/* pool.cu — average and max pooling (no padding) over n planes of h×w, in the backend's activation type. Backwards
 * gather over the windows that cover an input pixel, so overlapping windows need no atomics and results are
 * deterministic. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

template <bool MAX, class T> __global__ void pool_forward_kernel(sf_pool_shape sh, const T *x, T *y, uint8_t *argmax)
{
    int64_t total = sh.n * sh.oh * sh.ow;
    SF_CUDA_GRID_STRIDE(i, total)
    {
        int32_t ox = (int32_t)(i % sh.ow), oy = (int32_t)((i / sh.ow) % sh.oh);
        int64_t p = i / ((int64_t)sh.oh * sh.ow);
        const T *in = x + p * sh.h * sh.w + (int64_t)oy * sh.stride * sh.w + (int64_t)ox * sh.stride;
        float acc = MAX ? sf_widen(in[0]) : 0.0f;
        int best = 0;
        for (int ky = 0; ky < sh.k; ky++)
            for (int kx = 0; kx < sh.k; kx++) {
                float v = sf_widen(in[ky * sh.w + kx]);
                if (MAX) {
                    if (v > acc || (isnan(v) && !isnan(acc))) { /* first maximum wins; NaN propagates (PyTorch) */
                        acc = v;
                        best = ky * sh.k + kx;
                    }
                } else {
                    acc += v;
                }
            }
        if (MAX) {
            y[i] = sf_narrow<T>(acc);
            argmax[i] = (uint8_t)best;
        } else {
            y[i] = sf_narrow<T>(acc / (float)(sh.k * sh.k));
        }
    }
}

template <bool MAX, class T>
__global__ void pool_backward_kernel(sf_pool_shape sh, const uint8_t *argmax, const T *dy, T *dx)
{
    int64_t total = sh.n * sh.h * sh.w;
    SF_CUDA_GRID_STRIDE(i, total)
    {
        int32_t ix = (int32_t)(i % sh.w), iy = (int32_t)((i / sh.w) % sh.h);
        int64_t p = i / ((int64_t)sh.h * sh.w);
        /* outputs o with o·stride <= i < o·stride + k */
        int32_t oy0 = iy >= sh.k ? (iy - sh.k) / sh.stride + 1 : 0, oy1 = min(iy / sh.stride, sh.oh - 1);
        int32_t ox0 = ix >= sh.k ? (ix - sh.k) / sh.stride + 1 : 0, ox1 = min(ix / sh.stride, sh.ow - 1);
        float acc = 0.0f;
        for (int32_t oy = oy0; oy <= oy1; oy++)
            for (int32_t ox = ox0; ox <= ox1; ox++) {
                int64_t o = (p * sh.oh + oy) * sh.ow + ox;
                if (!MAX || argmax[o] == (iy - oy * sh.stride) * sh.k + (ix - ox * sh.stride)) acc += sf_widen(dy[o]);
            }
        dx[i] = sf_narrow<T>(MAX ? acc : acc / (float)(sh.k * sh.k));
    }
}

static sf_status check(const sf_pool_shape *sh)
{
    if (sh->k < 1 || sh->k > 16 || sh->stride < 1 || sh->oh != (sh->h - sh->k) / sh->stride + 1 ||
        sh->ow != (sh->w - sh->k) / sh->stride + 1)
        return sf_fail(SF_ERR_INVALID,
                       "pool shape %dx%d k=%d stride=%d -> %dx%d is inconsistent (k <= 16: the argmax is one byte)",
                       sh->h, sh->w, sh->k, sh->stride, sh->oh, sh->ow);
    return SF_OK;
}

template <bool MAX>
static sf_status forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y, uint8_t *am)
{
    SF_TRY(check(sh));
    int64_t total = sh->n * sh->oh * sh->ow;
    if (total == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        pool_forward_kernel<MAX, T><<<sf_cuda_blocks(total, 256), 256, 0, c->stream>>>(*sh, (const T *)x, (T *)y, am);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

template <bool MAX>
static sf_status backward(sf_backend *be, const sf_pool_shape *sh, const uint8_t *am, const float *dy, float *dx)
{
    SF_TRY(check(sh));
    int64_t total = sh->n * sh->h * sh->w;
    if (total == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        pool_backward_kernel<MAX, T>
            <<<sf_cuda_blocks(total, 256), 256, 0, c->stream>>>(*sh, am, (const T *)dy, (T *)dx);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

sf_status sf_cuda_op_avgpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y)
{
    return forward<false>(be, sh, x, y, NULL);
}

sf_status sf_cuda_op_avgpool_backward(sf_backend *be, const sf_pool_shape *sh, const float *dy, float *dx)
{
    return backward<false>(be, sh, NULL, dy, dx);
}

sf_status sf_cuda_op_maxpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y, uint8_t *argmax)
{
    return forward<true>(be, sh, x, y, argmax);
}

sf_status sf_cuda_op_maxpool_backward(sf_backend *be, const sf_pool_shape *sh, const uint8_t *argmax, const float *dy,
                                      float *dx)
{
    return backward<true>(be, sh, argmax, dy, dx);
}
