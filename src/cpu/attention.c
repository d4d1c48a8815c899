/* attention.c — Spikformer's spiking self-attention product (SSA, core/transformer.h) on the CPU: sgemm per (set,
 * head) on the [n, dh] column blocks of q, k, v, the pairs spread over OpenMP threads. Kᵀ·V and Q·M run with alpha
 * 1, so for 0/1 inputs every partial sum is an integer below 2^24, exact in any order; the scale is applied once
 * after, so y is bitwise the exact count times scale, rounded once. */
#include "cpu/cpu_transformer.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <cblas.h>

/* The workspace holds a dh×dh matrix per pair (set, head): M; the backward's G after all the M's. */
static int64_t pairs_of(const sf_token_shape *sh, int32_t heads) { return sh->tb * heads; }

size_t sf_cpu_op_ssa_workspace(sf_backend *be, const sf_token_shape *sh, int32_t heads, bool backward)
{
    (void)be;
    if (!sh || sh->tb < 0 || sh->d < 1 || heads < 1 || sh->d % heads) return 0; /* the op reports the shape */
    const int64_t dh = sh->d / heads;
    return (size_t)(pairs_of(sh, heads) * dh * dh) * sizeof(float) * (backward ? 2 : 1);
}

/* Checks a call; *none: no sets (tb = 0), nothing to do. */
static sf_status ssa_begin(const char *op, const sf_token_shape *sh, int32_t heads, int64_t ld, const void *ws,
                           bool *none)
{
    SF_TRY(sf_ssa_check(op, sh, heads, ld));
    *none = sh->tb == 0;
    if (!*none && !ws) return sf_fail(SF_ERR_INVALID, "%s: workspace is NULL (give it ssa_workspace bytes)", op);
    return SF_OK;
}

/* Where the column block of head h of set t starts in a token tensor whose rows are ld apart. */
static int64_t block_at(const sf_token_shape *sh, int64_t t, int64_t h, int dh, int64_t ld)
{
    return t * sh->n * ld + h * dh;
}

sf_status sf_cpu_op_ssa_forward(sf_backend *be, const sf_token_shape *sh, int32_t heads, float scale, int64_t ld,
                                const float *q, const float *k, const float *v, float *y, void *ws)
{
    (void)be;
    bool none = true;
    SF_TRY(ssa_begin("SSA forward", sh, heads, ld, ws, &none));
    if (none) return SF_OK;
    const int n = sh->n, d = sh->d, dh = d / heads, ldi = (int)ld;
    const int64_t pairs = pairs_of(sh, heads);
    float *mw = ws;
#pragma omp parallel for schedule(static) if (pairs * n * dh >= SF_CPU_PARALLEL_MIN)
    for (int64_t p = 0; p < pairs; p++) {
        const int64_t t = p / heads, h = p % heads, at = block_at(sh, t, h, dh, ld);
        float *M = mw + p * dh * dh, *Y = y + block_at(sh, t, h, dh, d);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dh, dh, n, 1.0f, k + at, ldi, v + at, ldi, 0.0f, M, dh);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, dh, 1.0f, q + at, ldi, M, dh, 0.0f, Y, d);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < dh; j++) Y[(int64_t)i * d + j] *= scale;
    }
    return SF_OK;
}

sf_status sf_cpu_op_ssa_backward(sf_backend *be, const sf_token_shape *sh, int32_t heads, float scale, int64_t ld,
                                 const float *q, const float *k, const float *v, const float *dy, float *dq,
                                 float *dk, float *dv, void *ws)
{
    (void)be;
    bool none = true;
    SF_TRY(ssa_begin("SSA backward", sh, heads, ld, ws, &none));
    if (none) return SF_OK;
    const int n = sh->n, d = sh->d, dh = d / heads, ldi = (int)ld;
    const int64_t pairs = pairs_of(sh, heads);
    float *mw = ws, *gw = mw + pairs * dh * dh;
#pragma omp parallel for schedule(static) if (pairs * n * dh >= SF_CPU_PARALLEL_MIN)
    for (int64_t p = 0; p < pairs; p++) {
        const int64_t t = p / heads, h = p % heads, at = block_at(sh, t, h, dh, ld);
        const float *Q = q + at, *K = k + at, *V = v + at, *dY = dy + block_at(sh, t, h, dh, d);
        float *M = mw + p * dh * dh, *G = gw + p * dh * dh;
        /* M = Kᵀ·V (rebuilt), G = scale·Qᵀ·dY: the gradient of M */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dh, dh, n, 1.0f, K, ldi, V, ldi, 0.0f, M, dh);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dh, dh, n, scale, Q, ldi, dY, d, 0.0f, G, dh);
        /* dQ = scale·dY·Mᵀ, dK = V·Gᵀ, dV = K·G */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, dh, dh, scale, dY, d, M, dh, 0.0f, dq + at, ldi);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, dh, dh, 1.0f, V, ldi, G, dh, 0.0f, dk + at, ldi);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dh, dh, 1.0f, K, ldi, G, dh, 0.0f, dv + at, ldi);
    }
    return SF_OK;
}
