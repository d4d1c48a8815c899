/* token_ops.c — per-channel products over a set's tokens on the CPU (core/transformer.h): token_sum reduces them to
 * one row (SDSA's Σ_n k·v, Σ_n dy·q, a mean), token_scale multiplies each by the set's row, transpose turns planes
 * into tokens. Sums run over the tokens in order in double, rounded once: exact counts for 0/1 inputs. */
#include "cpu/cpu_transformer.h"
#include "cpu/parallel.h"

#include "core/error.h"

enum { TOKEN_BLOCK = 64 }; /* channels one thread sums side by side */

sf_status sf_cpu_op_token_sum(sf_backend *be, const sf_token_shape *sh, float alpha, const float *a, int64_t lda,
                              const float *b, int64_t ldb, float *out)
{
    (void)be;
    SF_TRY(sf_token_shape_check("token sum", sh));
    SF_TRY(sf_token_ld_check("token sum", "lda", lda, sh->d));
    if (b) SF_TRY(sf_token_ld_check("token sum", "ldb", ldb, sh->d));
    const int32_t d = sh->d;
    const int64_t nblocks = (d + TOKEN_BLOCK - 1) / TOKEN_BLOCK, jobs = sh->tb * nblocks;
#pragma omp parallel for schedule(static) if (sh->tb * sh->n * d >= SF_CPU_PARALLEL_MIN)
    for (int64_t job = 0; job < jobs; job++) {
        const int64_t t = job / nblocks;
        const int32_t c0 = (int32_t)(job % nblocks) * TOKEN_BLOCK, c1 = c0 + TOKEN_BLOCK < d ? c0 + TOKEN_BLOCK : d;
        double acc[TOKEN_BLOCK] = {0};
        for (int64_t i = 0; i < sh->n; i++) {
            const float *ar = a + (t * sh->n + i) * lda, *br = b ? b + (t * sh->n + i) * ldb : NULL;
            for (int32_t c = c0; c < c1; c++) acc[c - c0] += br ? (double)ar[c] * br[c] : (double)ar[c];
        }
        for (int32_t c = c0; c < c1; c++) out[t * d + c] = (float)((double)alpha * acc[c - c0]);
    }
    return SF_OK;
}

sf_status sf_cpu_op_token_scale(sf_backend *be, const sf_token_shape *sh, float alpha, const float *g,
                                const float *b, int64_t ldb, float *out, int64_t ldo)
{
    (void)be;
    SF_TRY(sf_token_shape_check("token scale", sh));
    SF_TRY(sf_token_ld_check("token scale", "ldo", ldo, sh->d));
    if (b) SF_TRY(sf_token_ld_check("token scale", "ldb", ldb, sh->d));
    const int32_t d = sh->d;
    const int64_t rows = sh->tb * sh->n;
#pragma omp parallel for schedule(static) if (rows * d >= SF_CPU_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = g + (r / sh->n) * d, *br = b ? b + r * ldb : NULL;
        float *o = out + r * ldo;
        for (int32_t c = 0; c < d; c++) o[c] = br ? alpha * gr[c] * br[c] : alpha * gr[c];
    }
    return SF_OK;
}

enum { TRANSPOSE_TILE = 32 }; /* a tile of rows × cols read and written whole: both sides stay in cache */

sf_status sf_cpu_op_transpose(sf_backend *be, int64_t batch, int64_t rows, int64_t cols, const float *x, float *y)
{
    (void)be;
    if (batch < 0 || rows < 0 || cols < 0)
        return sf_fail(SF_ERR_INVALID, "transpose: shape %lld x %lld x %lld must not be negative", (long long)batch,
                       (long long)rows, (long long)cols);
    const int64_t rt = (rows + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE, ct = (cols + TRANSPOSE_TILE - 1) / TRANSPOSE_TILE;
    const int64_t jobs = batch * rt * ct;
#pragma omp parallel for schedule(static) if (batch * rows * cols >= SF_CPU_PARALLEL_MIN)
    for (int64_t job = 0; job < jobs; job++) {
        const int64_t i = job / (rt * ct), r0 = (job / ct % rt) * TRANSPOSE_TILE, c0 = job % ct * TRANSPOSE_TILE;
        const int64_t r1 = r0 + TRANSPOSE_TILE < rows ? r0 + TRANSPOSE_TILE : rows;
        const int64_t c1 = c0 + TRANSPOSE_TILE < cols ? c0 + TRANSPOSE_TILE : cols;
        const float *xi = x + i * rows * cols;
        float *yi = y + i * rows * cols;
        for (int64_t c = c0; c < c1; c++)
            for (int64_t r = r0; r < r1; r++) yi[c * rows + r] = xi[r * cols + c];
    }
    return SF_OK;
}
