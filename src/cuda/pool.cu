/* pool.cu — average and max pooling over n planes of h×w, with PyTorch's border rules (pool.c says which), in the
 * backend's activation type. Backwards gather over the windows that cover an input pixel, so overlapping windows
 * need no atomics and results are deterministic. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

template <bool MAX, class T> __global__ void pool_forward_kernel(sf_pool_shape sh, const T *x, T *y, uint8_t *argmax)
{
    int64_t total = sh.n * sh.oh * sh.ow;
    SF_CUDA_GRID_STRIDE(i, total)
    {
        int32_t ox = (int32_t)(i % sh.ow), oy = (int32_t)((i / sh.ow) % sh.oh);
        int64_t p = i / ((int64_t)sh.oh * sh.ow);
        /* the window's corner (wy, wx) may lie in the border; only its part inside the plane is read */
        int32_t wy = oy * sh.stride - sh.pad, wx = ox * sh.stride - sh.pad;
        int32_t y0 = max(wy, 0), y1 = min(wy + sh.k, sh.h), x0 = max(wx, 0), x1 = min(wx + sh.k, sh.w);
        const T *in = x + p * sh.h * sh.w;
        float acc = MAX ? sf_widen(in[y0 * sh.w + x0]) : 0.0f;
        int best = (y0 - wy) * sh.k + (x0 - wx);
        for (int iy = y0; iy < y1; iy++)
            for (int ix = x0; ix < x1; ix++) {
                float v = sf_widen(in[iy * sh.w + ix]);
                if (MAX) {
                    if (v > acc || (isnan(v) && !isnan(acc))) { /* first maximum wins; NaN propagates (PyTorch) */
                        acc = v;
                        best = (iy - wy) * sh.k + (ix - wx);
                    }
                } else {
                    acc += v;
                }
            }
        if (MAX) {
            y[i] = sf_narrow<T>(acc);
            argmax[i] = (uint8_t)best;
        } else {
            y[i] = sf_narrow<T>(acc / (float)(sh.k * sh.k)); /* the border counts as zeros (count_include_pad) */
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
        /* outputs o with o·stride <= q < o·stride + k, q the pixel's position in the bordered plane */
        int32_t qy = iy + sh.pad, qx = ix + sh.pad;
        int32_t oy0 = qy >= sh.k ? (qy - sh.k) / sh.stride + 1 : 0, oy1 = min(qy / sh.stride, sh.oh - 1);
        int32_t ox0 = qx >= sh.k ? (qx - sh.k) / sh.stride + 1 : 0, ox1 = min(qx / sh.stride, sh.ow - 1);
        float acc = 0.0f;
        for (int32_t oy = oy0; oy <= oy1; oy++)
            for (int32_t ox = ox0; ox <= ox1; ox++) {
                int64_t o = (p * sh.oh + oy) * sh.ow + ox;
                if (!MAX || argmax[o] == (qy - oy * sh.stride) * sh.k + (qx - ox * sh.stride)) acc += sf_widen(dy[o]);
            }
        dx[i] = sf_narrow<T>(MAX ? acc : acc / (float)(sh.k * sh.k));
    }
}

static sf_status check(const sf_pool_shape *sh)
{
    const int32_t p = sh->pad;
    if (sh->k < 1 || sh->k > 16 || sh->stride < 1 || p < 0 || 2 * p > sh->k || sh->k > sh->h + 2 * p ||
        sh->k > sh->w + 2 * p || sh->oh != (sh->h + 2 * p - sh->k) / sh->stride + 1 ||
        sh->ow != (sh->w + 2 * p - sh->k) / sh->stride + 1)
        return sf_fail(SF_ERR_INVALID,
                       "pool shape %dx%d k=%d stride=%d pad=%d -> %dx%d is inconsistent (k <= 16: the argmax is one "
                       "byte; pad <= k/2)",
                       sh->h, sh->w, sh->k, sh->stride, p, sh->oh, sh->ow);
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
