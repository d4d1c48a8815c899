/* pool.c — average and max pooling over n planes on the CPU, NCHW or NHWC, with an optional border (PyTorch's
 * rules: -inf for max, zeros counted in the average); maxpool records the argmax position inside each k×k window
 * (border included) as one byte (ki·k + kj), which is all its backward needs. */
#include "cpu/cpu_layers.h"

#include "core/error.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

static sf_status check_pool(const char *op, const sf_pool_shape *sh, bool max)
{
    if (!sh) return sf_fail(SF_ERR_INVALID, "%s: shape is NULL", op);
    const int32_t p = sh->pad;
    if (sh->n < 0 || sh->h <= 0 || sh->w <= 0 || sh->k <= 0 || sh->stride <= 0 || p < 0 || 2 * p > sh->k ||
        sh->k > sh->h + 2 * p || sh->k > sh->w + 2 * p)
        return sf_fail(SF_ERR_INVALID,
                       "%s: shape n=%lld h=%d w=%d k=%d stride=%d pad=%d: need positive sizes, pad <= k/2, "
                       "k <= h + 2·pad, w + 2·pad",
                       op, (long long)sh->n, sh->h, sh->w, sh->k, sh->stride, p);
    if (max && sh->k > 16)
        return sf_fail(SF_ERR_INVALID, "%s: window %d: at most 16 (the argmax is one byte)", op, sh->k);
    if (sh->c < 0 || (sh->c > 0 && sh->n % sh->c != 0))
        return sf_fail(SF_ERR_INVALID, "%s: %lld planes are not whole NHWC images of %d channels", op, (long long)sh->n,
                       sh->c);
    int32_t oh = (sh->h + 2 * p - sh->k) / sh->stride + 1, ow = (sh->w + 2 * p - sh->k) / sh->stride + 1;
    if (oh != sh->oh || ow != sh->ow)
        return sf_fail(SF_ERR_INVALID, "%s: output %dx%d does not match (h + 2·pad - k)/stride + 1 = %dx%d", op, sh->oh,
                       sh->ow, oh, ow);
    return SF_OK;
}

/* The part of output (oy, ox)'s window inside the plane: rows [y0, y1), columns [x0, x1); (wy, wx) is the window's
 * corner, which lies in the border where the window overhangs it. */
typedef struct window {
    int32_t wy, wx, y0, y1, x0, x1;
} window;

/* Where plane p of planes of hw pixels starts, and how far apart its pixels lie: NCHW planes are contiguous, NHWC
 * ones interleave c channels. */
static inline int64_t plane_at(const sf_pool_shape *sh, int64_t p, int64_t hw)
{
    return sh->c ? (p / sh->c) * hw * sh->c + p % sh->c : p * hw;
}

static inline int64_t pixel_step(const sf_pool_shape *sh) { return sh->c ? sh->c : 1; }

static void zero_plane(const sf_pool_shape *sh, float *dxp)
{
    const int64_t hw = (int64_t)sh->h * sh->w, ps = pixel_step(sh);
    if (ps == 1) memset(dxp, 0, (size_t)hw * sizeof(float));
    else
        for (int64_t q = 0; q < hw; q++) dxp[q * ps] = 0.0f;
}

static window window_of(const sf_pool_shape *sh, int32_t oy, int32_t ox)
{
    window v = {oy * sh->stride - sh->pad, ox * sh->stride - sh->pad, 0, 0, 0, 0};
    v.y0 = v.wy > 0 ? v.wy : 0;
    v.x0 = v.wx > 0 ? v.wx : 0;
    v.y1 = v.wy + sh->k < sh->h ? v.wy + sh->k : sh->h;
    v.x1 = v.wx + sh->k < sh->w ? v.wx + sh->k : sh->w;
    return v;
}

sf_status sf_cpu_op_avgpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y)
{
    SF_TRY(check_pool("avgpool", sh, false));
    const float scale = 1.0f / (float)(sh->k * sh->k);
    const int64_t ps = pixel_step(sh);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < sh->n; p++) {
        const float *xp = x + plane_at(sh, p, (int64_t)sh->h * sh->w);
        float *yp = y + plane_at(sh, p, (int64_t)sh->oh * sh->ow);
        for (int32_t oy = 0; oy < sh->oh; oy++)
            for (int32_t ox = 0; ox < sh->ow; ox++) {
                const window v = window_of(sh, oy, ox);
                float acc = 0.0f;
                for (int32_t iy = v.y0; iy < v.y1; iy++)
                    for (int32_t ix = v.x0; ix < v.x1; ix++) acc += xp[((int64_t)iy * sh->w + ix) * ps];
                yp[((int64_t)oy * sh->ow + ox) * ps] = acc * scale;
            }
    }
    return SF_OK;
}

sf_status sf_cpu_op_avgpool_backward(sf_backend *be, const sf_pool_shape *sh, const float *dy, float *dx)
{
    SF_TRY(check_pool("avgpool backward", sh, false));
    const float scale = 1.0f / (float)(sh->k * sh->k);
    const int64_t ps = pixel_step(sh);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < sh->n; p++) {
        float *dxp = dx + plane_at(sh, p, (int64_t)sh->h * sh->w);
        const float *dyp = dy + plane_at(sh, p, (int64_t)sh->oh * sh->ow);
        zero_plane(sh, dxp);
        for (int32_t oy = 0; oy < sh->oh; oy++)
            for (int32_t ox = 0; ox < sh->ow; ox++) {
                const window v = window_of(sh, oy, ox);
                const float g = dyp[((int64_t)oy * sh->ow + ox) * ps] * scale;
                for (int32_t iy = v.y0; iy < v.y1; iy++)
                    for (int32_t ix = v.x0; ix < v.x1; ix++) dxp[((int64_t)iy * sh->w + ix) * ps] += g;
            }
    }
    return SF_OK;
}

/* Whether val takes a max-pool window from best: the first maximum wins and a NaN propagates, as in PyTorch. */
static inline bool max_wins(float val, float best) { return val > best || (isnan(val) && !isnan(best)); }

/* Output row oy of one plane (pixels ps apart) where every window lies inside it (pad 0): no clipping, and the same
 * order and rules as the general loop below. Inlined with k = stride = 2 and ps = 1 as constants, the common 2×2
 * pool's window is unrolled. */
static inline void maxpool_row_inside(const float *xp, int32_t w, int32_t k, int32_t s, int64_t ps, int32_t oy,
                                      int32_t ow, float *y, uint8_t *argmax)
{
    const float *top = xp + (int64_t)oy * s * w * ps;
    for (int32_t ox = 0; ox < ow; ox++) {
        const float *win = top + (int64_t)ox * s * ps;
        float best = win[0];
        int32_t at = 0;
        for (int32_t ki = 0; ki < k; ki++)
            for (int32_t kj = 0; kj < k; kj++) {
                const float val = win[((int64_t)ki * w + kj) * ps];
                if (max_wins(val, best)) {
                    best = val;
                    at = ki * k + kj;
                }
            }
        y[ox * ps] = best;
        argmax[ox * ps] = (uint8_t)at;
    }
}

sf_status sf_cpu_op_maxpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y, uint8_t *argmax)
{
    SF_TRY(check_pool("maxpool", sh, true));
    const int32_t k = sh->k;
    const int64_t ps = pixel_step(sh), hw = (int64_t)sh->h * sh->w, ohw = (int64_t)sh->oh * sh->ow;
    if (sh->pad == 0) {
        const bool two = k == 2 && sh->stride == 2 && ps == 1;
#pragma omp parallel for schedule(static)
        for (int64_t p = 0; p < sh->n; p++)
            for (int32_t oy = 0; oy < sh->oh; oy++) {
                const float *xp = x + plane_at(sh, p, hw);
                const int64_t o = plane_at(sh, p, ohw) + (int64_t)oy * sh->ow * ps;
                if (two) maxpool_row_inside(xp, sh->w, 2, 2, 1, oy, sh->ow, y + o, argmax + o);
                else maxpool_row_inside(xp, sh->w, k, sh->stride, ps, oy, sh->ow, y + o, argmax + o);
            }
        return SF_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < sh->n; p++) {
        const float *xp = x + plane_at(sh, p, hw);
        const int64_t o0 = plane_at(sh, p, ohw);
        for (int32_t oy = 0; oy < sh->oh; oy++)
            for (int32_t ox = 0; ox < sh->ow; ox++) {
                const window v = window_of(sh, oy, ox);
                /* The border never wins. */
                float best = xp[((int64_t)v.y0 * sh->w + v.x0) * ps];
                int32_t at = (v.y0 - v.wy) * k + (v.x0 - v.wx);
                for (int32_t iy = v.y0; iy < v.y1; iy++)
                    for (int32_t ix = v.x0; ix < v.x1; ix++) {
                        float val = xp[((int64_t)iy * sh->w + ix) * ps];
                        if (max_wins(val, best)) {
                            best = val;
                            at = (iy - v.wy) * k + (ix - v.wx);
                        }
                    }
                const int64_t o = o0 + ((int64_t)oy * sh->ow + ox) * ps;
                y[o] = best;
                argmax[o] = (uint8_t)at;
            }
    }
    return SF_OK;
}

sf_status sf_cpu_op_maxpool_backward(sf_backend *be, const sf_pool_shape *sh, const uint8_t *argmax, const float *dy,
                                     float *dx)
{
    SF_TRY(check_pool("maxpool backward", sh, true));
    const int32_t k = sh->k, s = sh->stride;
    const int64_t ps = pixel_step(sh);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < sh->n; p++) {
        float *dxp = dx + plane_at(sh, p, (int64_t)sh->h * sh->w);
        const int64_t o0 = plane_at(sh, p, (int64_t)sh->oh * sh->ow);
        zero_plane(sh, dxp);
        for (int32_t oy = 0; oy < sh->oh; oy++)
            for (int32_t ox = 0; ox < sh->ow; ox++) {
                const int64_t o = o0 + ((int64_t)oy * sh->ow + ox) * ps;
                const int32_t iy = oy * s - sh->pad + argmax[o] / k, ix = ox * s - sh->pad + argmax[o] % k;
                dxp[((int64_t)iy * sh->w + ix) * ps] += dy[o];
            }
    }
    return SF_OK;
}
