/* pool.c — average and max pooling over n planes (no padding) on the CPU; maxpool records the argmax position
 * inside each k×k window as one byte (ki·k + kj), which is all its backward needs. */
#include "cpu/cpu_layers.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

static sf_status check_pool(const char *op, const sf_pool_shape *sh)
{
    if (!sh) return sf_fail(SF_ERR_INVALID, "%s: shape is NULL", op);
    if (sh->n < 0 || sh->h <= 0 || sh->w <= 0 || sh->k <= 0 || sh->stride <= 0 || sh->k > sh->h || sh->k > sh->w)
        return sf_fail(SF_ERR_INVALID, "%s: shape n=%lld h=%d w=%d k=%d stride=%d: need positive sizes, k <= h, w",
                       op, (long long)sh->n, sh->h, sh->w, sh->k, sh->stride);
    if (sh->k > 16) return sf_fail(SF_ERR_INVALID, "%s: window %d: at most 16 (the argmax is one byte)", op, sh->k);
    int32_t oh = (sh->h - sh->k) / sh->stride + 1, ow = (sh->w - sh->k) / sh->stride + 1;
    if (oh != sh->oh || ow != sh->ow)
        return sf_fail(SF_ERR_INVALID, "%s: output %dx%d does not match (h - k)/stride + 1 = %dx%d", op, sh->oh,
                       sh->ow, oh, ow);
    return SF_OK;
}

sf_status sf_cpu_op_avgpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y)
{
    SF_TRY(check_pool("avgpool", sh));
    const int32_t k = sh->k, s = sh->stride;
    const float scale = 1.0f / (float)(k * k);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < sh->n; p++) {
        const float *xp = x + p * sh->h * sh->w;
        float *yp = y + p * sh->oh * sh->ow;
        for (int32_t oy = 0; oy < sh->oh; oy++)
            for (int32_t ox = 0; ox < sh->ow; ox++) {
                const float *win = xp + (int64_t)oy * s * sh->w + (int64_t)ox * s;
                float acc = 0.0f;
                for (int32_t ki = 0; ki < k; ki++)
                    for (int32_t kj = 0; kj < k; kj++) acc += win[(int64_t)ki * sh->w + kj];
                yp[(int64_t)oy * sh->ow + ox] = acc * scale;
            }
    }
    return SF_OK;
}

sf_status sf_cpu_op_avgpool_backward(sf_backend *be, const sf_pool_shape *sh, const float *dy, float *dx)
{
    SF_TRY(check_pool("avgpool backward", sh));
    const int32_t k = sh->k, s = sh->stride;
    const float scale = 1.0f / (float)(k * k);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < sh->n; p++) {
        float *dxp = dx + p * sh->h * sh->w;
        const float *dyp = dy + p * sh->oh * sh->ow;
        memset(dxp, 0, (size_t)sh->h * (size_t)sh->w * sizeof(float));
        for (int32_t oy = 0; oy < sh->oh; oy++)
            for (int32_t ox = 0; ox < sh->ow; ox++) {
                float *win = dxp + (int64_t)oy * s * sh->w + (int64_t)ox * s;
                const float g = dyp[(int64_t)oy * sh->ow + ox] * scale;
                for (int32_t ki = 0; ki < k; ki++)
                    for (int32_t kj = 0; kj < k; kj++) win[(int64_t)ki * sh->w + kj] += g;
            }
    }
    return SF_OK;
}

sf_status sf_cpu_op_maxpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y,
                                    uint8_t *argmax)
{
    SF_TRY(check_pool("maxpool", sh));
    const int32_t k = sh->k, s = sh->stride;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < sh->n; p++) {
        const float *xp = x + p * sh->h * sh->w;
        const int64_t o0 = p * sh->oh * sh->ow;
        for (int32_t oy = 0; oy < sh->oh; oy++)
            for (int32_t ox = 0; ox < sh->ow; ox++) {
                const float *win = xp + (int64_t)oy * s * sh->w + (int64_t)ox * s;
                /* First maximum wins and a NaN propagates, as in PyTorch. */
                float best = win[0];
                int32_t at = 0;
                for (int32_t ki = 0; ki < k; ki++)
                    for (int32_t kj = 0; kj < k; kj++) {
                        float v = win[(int64_t)ki * sh->w + kj];
                        if (v > best || (isnan(v) && !isnan(best))) {
                            best = v;
                            at = ki * k + kj;
                        }
                    }
                y[o0 + (int64_t)oy * sh->ow + ox] = best;
                argmax[o0 + (int64_t)oy * sh->ow + ox] = (uint8_t)at;
            }
    }
    return SF_OK;
}

sf_status sf_cpu_op_maxpool_backward(sf_backend *be, const sf_pool_shape *sh, const uint8_t *argmax,
                                     const float *dy, float *dx)
{
    SF_TRY(check_pool("maxpool backward", sh));
    const int32_t k = sh->k, s = sh->stride;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < sh->n; p++) {
        float *dxp = dx + p * sh->h * sh->w;
        const int64_t o0 = p * sh->oh * sh->ow;
        memset(dxp, 0, (size_t)sh->h * (size_t)sh->w * sizeof(float));
        for (int32_t oy = 0; oy < sh->oh; oy++)
            for (int32_t ox = 0; ox < sh->ow; ox++) {
                const int64_t o = o0 + (int64_t)oy * sh->ow + ox;
                const int32_t ki = argmax[o] / k, kj = argmax[o] % k;
                dxp[(int64_t)(oy * s + ki) * sh->w + (int64_t)ox * s + kj] += dy[o];
            }
    }
    return SF_OK;
}
