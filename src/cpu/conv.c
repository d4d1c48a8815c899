/* conv.c — 2-D convolution on the CPU: im2col + OpenBLAS sgemm with the T·B images folded into the GEMM's column
 * dimension, processed in chunks of images so the scratch stays bounded; col2im for the input gradient. */
#include "cpu/cpu_layers.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <cblas.h>
#include <string.h>

/* Scratch per chunk, at most (unless one image needs more): small enough that sgemm reads the im2col buffer from the
 * last-level cache (docs/notebook/perf.md); fixed, so the workspace does not depend on the thread count. */
#define SF_CONV_CHUNK_BYTES ((size_t)8 << 20)

typedef struct conv_plan {
    int64_t kk;    /* GEMM depth: cin·k·k */
    int64_t ohw;   /* output pixels per image */
    int64_t chunk; /* images per chunk */
    size_t col_off, buf_off, dcol_off, dbacc_off, bytes; /* workspace layout */
} conv_plan;

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

static sf_status check_conv(const sf_conv_shape *sh)
{
    if (!sh) return sf_fail(SF_ERR_INVALID, "conv: shape is NULL");
    if (sh->x_nhwc || sh->y_nhwc) return sf_fail(SF_ERR_UNSUPPORTED, "conv: the CPU backend takes NCHW tensors only");
    if (sh->n < 0 || sh->cin <= 0 || sh->h <= 0 || sh->w <= 0 || sh->cout <= 0 || sh->k <= 0 || sh->stride <= 0 ||
        sh->pad < 0)
        return sf_fail(SF_ERR_INVALID,
                       "conv: shape n=%lld cin=%d h=%d w=%d cout=%d k=%d stride=%d pad=%d: need n >= 0, positive "
                       "sizes and pad >= 0",
                       (long long)sh->n, sh->cin, sh->h, sh->w, sh->cout, sh->k, sh->stride, sh->pad);
    int64_t oh = ((int64_t)sh->h + 2 * sh->pad - sh->k) / sh->stride + 1;
    int64_t ow = ((int64_t)sh->w + 2 * sh->pad - sh->k) / sh->stride + 1;
    if (sh->h + 2 * sh->pad < sh->k || sh->w + 2 * sh->pad < sh->k || oh != sh->oh || ow != sh->ow)
        return sf_fail(SF_ERR_INVALID, "conv: output %dx%d does not match (h + 2·pad - k)/stride + 1 = %lldx%lld",
                       sh->oh, sh->ow, (long long)oh, (long long)ow);
    int64_t kk = (int64_t)sh->cin * sh->k * sh->k;
    if (kk > SF_CPU_BLAS_MAX || oh * ow > SF_CPU_BLAS_MAX)
        return sf_fail(SF_ERR_INVALID, "conv: cin·k·k = %lld or oh·ow = %lld too large for BLAS", (long long)kk,
                       (long long)(oh * ow));
    return SF_OK;
}

/* Chunking and workspace layout; the forward and the backward use the same plan. */
static conv_plan make_plan(const sf_conv_shape *sh)
{
    conv_plan pl;
    pl.kk = (int64_t)sh->cin * sh->k * sh->k;
    pl.ohw = (int64_t)sh->oh * sh->ow;
    size_t per_image = (size_t)(2 * pl.kk + sh->cout) * (size_t)pl.ohw * sizeof(float);
    int64_t chunk = (int64_t)(SF_CONV_CHUNK_BYTES / per_image);
    if (chunk * pl.ohw > SF_CPU_BLAS_MAX) chunk = SF_CPU_BLAS_MAX / pl.ohw;
    if (chunk > sh->n) chunk = sh->n;
    if (chunk < 1) chunk = 1;
    pl.chunk = chunk;
    size_t cols = (size_t)(chunk * pl.ohw);
    pl.col_off = 0;
    pl.buf_off = align64(pl.col_off + (size_t)pl.kk * cols * sizeof(float));
    pl.dcol_off = align64(pl.buf_off + (size_t)sh->cout * cols * sizeof(float));
    pl.dbacc_off = align64(pl.dcol_off + (size_t)pl.kk * cols * sizeof(float));
    pl.bytes = align64(pl.dbacc_off + (size_t)sh->cout * sizeof(double));
    return pl;
}

/* Range [lo, hi) of output columns ox whose input column ox·stride - pad + kj lies inside [0, w). */
static void valid_range(int32_t w, int32_t ow, int32_t stride, int32_t pad, int32_t kj, int32_t *lo, int32_t *hi)
{
    int32_t first = pad - kj > 0 ? (pad - kj + stride - 1) / stride : 0;
    int32_t last_ix = w - 1 + pad - kj; /* ox·stride <= last_ix */
    int32_t end = last_ix < 0 ? 0 : last_ix / stride + 1;
    if (end > ow) end = ow;
    if (first > ow) first = ow;
    if (end < first) end = first;
    *lo = first;
    *hi = end;
}

/* Writes the k·k rows of channel plane xc (h×w) into col (row stride ld), starting at column offset 0 of `col`. */
static void im2col_plane(const sf_conv_shape *sh, const float *xc, float *col, int64_t ld)
{
    const int32_t k = sh->k, s = sh->stride, pad = sh->pad, ow = sh->ow;
    for (int32_t ki = 0; ki < k; ki++)
        for (int32_t kj = 0; kj < k; kj++) {
            float *row = col + (int64_t)(ki * k + kj) * ld;
            int32_t lo, hi;
            valid_range(sh->w, ow, s, pad, kj, &lo, &hi);
            for (int32_t oy = 0; oy < sh->oh; oy++) {
                float *dst = row + (int64_t)oy * ow;
                int32_t iy = oy * s - pad + ki;
                if (iy < 0 || iy >= sh->h) {
                    memset(dst, 0, (size_t)ow * sizeof(float));
                    continue;
                }
                const float *src = xc + (int64_t)iy * sh->w;
                for (int32_t ox = 0; ox < lo; ox++) dst[ox] = 0.0f;
                if (s == 1)
                    memcpy(dst + lo, src + (lo - pad + kj), (size_t)(hi - lo) * sizeof(float));
                else
                    for (int32_t ox = lo; ox < hi; ox++) dst[ox] = src[ox * s - pad + kj];
                for (int32_t ox = hi; ox < ow; ox++) dst[ox] = 0.0f;
            }
        }
}

/* The adjoint of im2col_plane: dxc (h×w) = Σ over the k·k rows of dcol scattered back to input positions. */
static void col2im_plane(const sf_conv_shape *sh, const float *dcol, int64_t ld, float *dxc)
{
    const int32_t k = sh->k, s = sh->stride, pad = sh->pad, ow = sh->ow;
    memset(dxc, 0, (size_t)sh->h * (size_t)sh->w * sizeof(float));
    for (int32_t ki = 0; ki < k; ki++)
        for (int32_t kj = 0; kj < k; kj++) {
            const float *row = dcol + (int64_t)(ki * k + kj) * ld;
            int32_t lo, hi;
            valid_range(sh->w, ow, s, pad, kj, &lo, &hi);
            for (int32_t oy = 0; oy < sh->oh; oy++) {
                int32_t iy = oy * s - pad + ki;
                if (iy < 0 || iy >= sh->h) continue;
                const float *src = row + (int64_t)oy * ow;
                float *dst = dxc + (int64_t)iy * sh->w;
                for (int32_t ox = lo; ox < hi; ox++) dst[ox * s - pad + kj] += src[ox];
            }
        }
}

/* col[kk, nb·ohw] for images [i0, i0 + nb): image b owns columns [b·ohw, (b+1)·ohw). */
static void im2col_chunk(const sf_conv_shape *sh, const conv_plan *pl, const float *x, int64_t i0, int64_t nb,
                         float *col)
{
    const int64_t ld = nb * pl->ohw, plane = (int64_t)sh->h * sh->w, kk2 = (int64_t)sh->k * sh->k;
#pragma omp parallel for collapse(2) schedule(static) if (pl->kk * ld >= SF_CPU_PARALLEL_MIN)
    for (int64_t b = 0; b < nb; b++)
        for (int32_t c = 0; c < sh->cin; c++)
            im2col_plane(sh, x + ((i0 + b) * sh->cin + c) * plane, col + c * kk2 * ld + b * pl->ohw, ld);
}

static void col2im_chunk(const sf_conv_shape *sh, const conv_plan *pl, const float *dcol, int64_t i0, int64_t nb,
                         float *dx)
{
    const int64_t ld = nb * pl->ohw, plane = (int64_t)sh->h * sh->w, kk2 = (int64_t)sh->k * sh->k;
#pragma omp parallel for collapse(2) schedule(static) if (pl->kk * ld >= SF_CPU_PARALLEL_MIN)
    for (int64_t b = 0; b < nb; b++)
        for (int32_t c = 0; c < sh->cin; c++)
            col2im_plane(sh, dcol + c * kk2 * ld + b * pl->ohw, ld, dx + ((i0 + b) * sh->cin + c) * plane);
}

size_t sf_cpu_op_conv_workspace(sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass)
{ /* both passes run im2col chunks of the same size */
    if (check_conv(sh) != SF_OK || sh->n == 0) return 0;
    return make_plan(sh).bytes;
}

static sf_status check_ws(const sf_conv_shape *sh, void *ws)
{
    SF_TRY(check_conv(sh));
    if (sh->n > 0 && !ws)
        return sf_fail(SF_ERR_INVALID, "conv: workspace is NULL (allocate conv_workspace() bytes)");
    return SF_OK;
}

sf_status sf_cpu_op_conv_forward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                 const float *b, float *y, void *ws)
{
    SF_TRY(check_ws(sh, ws));
    if (sh->n == 0) return SF_OK;
    const conv_plan pl = make_plan(sh);
    float *col = (float *)((char *)ws + pl.col_off), *buf = (float *)((char *)ws + pl.buf_off);
    for (int64_t i0 = 0; i0 < sh->n; i0 += pl.chunk) {
        const int64_t nb = sh->n - i0 < pl.chunk ? sh->n - i0 : pl.chunk, ld = nb * pl.ohw;
        im2col_chunk(sh, &pl, x, i0, nb, col);
        /* buf[cout, nb·ohw] = W[cout, kk]·col[kk, nb·ohw] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sh->cout, (int)ld, (int)pl.kk, 1.0f, w, (int)pl.kk,
                    col, (int)ld, 0.0f, buf, (int)ld);
        /* Back to NCHW, adding the bias on the way. */
#pragma omp parallel for collapse(2) schedule(static) if (sh->cout * ld >= SF_CPU_PARALLEL_MIN)
        for (int64_t bi = 0; bi < nb; bi++)
            for (int32_t co = 0; co < sh->cout; co++) {
                const float *src = buf + co * ld + bi * pl.ohw;
                float *dst = y + ((i0 + bi) * sh->cout + co) * pl.ohw;
                const float bias = b ? b[co] : 0.0f;
                for (int64_t p = 0; p < pl.ohw; p++) dst[p] = src[p] + bias;
            }
    }
    return SF_OK;
}

sf_status sf_cpu_op_conv_backward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                  const float *dy, float *dx, float *dw, float *db, void *ws)
{
    SF_TRY(check_ws(sh, ws));
    const int64_t wn = (int64_t)sh->cout * sh->cin * sh->k * sh->k;
    if (sh->n == 0) {
        memset(dw, 0, (size_t)wn * sizeof(float));
        if (db) memset(db, 0, (size_t)sh->cout * sizeof(float));
        return SF_OK;
    }
    const conv_plan pl = make_plan(sh);
    float *col = (float *)((char *)ws + pl.col_off), *dyb = (float *)((char *)ws + pl.buf_off);
    float *dcol = (float *)((char *)ws + pl.dcol_off);
    double *dbacc = (double *)((char *)ws + pl.dbacc_off);
    for (int32_t co = 0; co < sh->cout; co++) dbacc[co] = 0.0;
    for (int64_t i0 = 0; i0 < sh->n; i0 += pl.chunk) {
        const int64_t nb = sh->n - i0 < pl.chunk ? sh->n - i0 : pl.chunk, ld = nb * pl.ohw;
        im2col_chunk(sh, &pl, x, i0, nb, col);
        /* dyb[cout, nb·ohw] gathered from NCHW; the bias gradient is summed per channel by one thread, in image
         * order, so it is independent of the thread count. */
#pragma omp parallel for schedule(static) if (sh->cout * ld >= SF_CPU_PARALLEL_MIN)
        for (int32_t co = 0; co < sh->cout; co++) {
            double acc = 0.0;
            for (int64_t bi = 0; bi < nb; bi++) {
                const float *src = dy + ((i0 + bi) * sh->cout + co) * pl.ohw;
                float *dst = dyb + co * ld + bi * pl.ohw;
                memcpy(dst, src, (size_t)pl.ohw * sizeof(float));
                for (int64_t p = 0; p < pl.ohw; p++) acc += src[p];
            }
            dbacc[co] += acc;
        }
        /* dW[cout, kk] (+)= dyb[cout, L]·col[kk, L]ᵀ */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sh->cout, (int)pl.kk, (int)ld, 1.0f, dyb, (int)ld, col,
                    (int)ld, i0 == 0 ? 0.0f : 1.0f, dw, (int)pl.kk);
        if (dx) {
            /* dcol[kk, L] = W[cout, kk]ᵀ·dyb[cout, L] */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)pl.kk, (int)ld, sh->cout, 1.0f, w,
                        (int)pl.kk, dyb, (int)ld, 0.0f, dcol, (int)ld);
            col2im_chunk(sh, &pl, dcol, i0, nb, dx);
        }
    }
    if (db)
        for (int32_t co = 0; co < sh->cout; co++) db[co] = (float)dbacc[co];
    return SF_OK;
}
