/* spike_linear.c — the event-driven linear layer on the CPU: the forward adds the weight columns of the inputs that
 * spiked, the weight gradient touches only their rows of Wᵀ, and with a mask of nonzero output gradients dx sums
 * only those rows. Each element is summed in ascending index order by one thread: any thread count, same bits. */
#include "cpu/clones.h"
#include "cpu/cpu_layers.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <cblas.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Output columns per tile: a tile's accumulators stay in vector registers, and Wᵀ's tile (in × TILE floats) in L2. */
enum { TILE = 64, ROW_CHUNK = 256 };

static sf_status check_shape(const char *op, int64_t rows, int32_t in, int32_t out)
{
    if (rows < 0 || in <= 0 || out <= 0 || rows > SF_CPU_BLAS_MAX)
        return sf_fail(SF_ERR_INVALID, "%s: shape rows=%lld in=%d out=%d: need 0 <= rows <= %d, in, out >= 1", op,
                       (long long)rows, in, out, INT_MAX);
    return SF_OK;
}

size_t sf_cpu_op_spike_linear_workspace(sf_backend *be, int64_t rows, int32_t in, int32_t out)
{
    /* Wᵀ in the forward, and W in the backward's masked dx, by whole tiles of TILE columns */
    size_t wt = (size_t)in * (size_t)((out + TILE - 1) / TILE * TILE), w = (size_t)out * (size_t)((in + TILE - 1) / TILE * TILE);
    return (wt > w ? wt : w) * sizeof(float);
}

/* Wᵀ [in, out] by tiles of TILE output columns: tile k holds Wᵀ[i, k·TILE + j] at (k·in + i)·TILE + j, so the rows a tile's sums
 * read are 256 contiguous bytes each and the whole tile a few dozen pages (TLB misses cost more than the adds). */
void sf_cpu_tiled_transpose(int32_t in, int32_t out, const float *w, float *wt)
{
#pragma omp parallel for schedule(static) if ((int64_t)in * out >= SF_CPU_PARALLEL_MIN)
    for (int32_t j0 = 0; j0 < out; j0 += TILE) {
        float *t = wt + (int64_t)j0 * in;
        const int32_t jn = out - j0 < TILE ? out - j0 : TILE;
        for (int32_t i = 0; i < in; i++) /* contiguous writes; TILE read streams */
            for (int32_t j = 0; j < jn; j++) t[(int64_t)i * TILE + j] = w[(int64_t)(j0 + j) * in + i];
    }
}

/* A tile's 64 sums as eight 32-byte vectors, native in the AVX2 and AVX-512 clones so they stay in registers (AVX2
 * spills 64-byte ones: docs/notebook/perf.md); each element is still plain IEEE additions, alike in every clone. */
typedef float v8 __attribute__((vector_size(32)));
enum { TILE_VECS = TILE / 8 };

static inline void tile_zero(v8 a[TILE_VECS])
{
    for (int k = 0; k < TILE_VECS; k++) a[k] = (v8){0};
}

/* a += w, or with g, a += (*g)·w: a product then a sum (no contraction), as the scalar loops of partial tiles do.
 * Callers pass g as a constant NULL where they only add, so the branch folds away. */
static inline void tile_axpy(v8 a[TILE_VECS], const float *g, const float *w)
{
#pragma GCC unroll 8
    for (int k = 0; k < TILE_VECS; k++) {
        v8 x;
        memcpy(&x, w + 8 * k, sizeof x);
        a[k] += g ? *g * x : x;
    }
}

/* y[r, j0 .. j0+jn) = b + Σ over the row's active inputs i (its segment lists, ascending) of Wᵀ[i, j0 ..]; wt is
 * this tile's block of Wᵀ (in × TILE, see tiled_transpose). */
SF_CPU_CLONES static void row_tile(int32_t in, int32_t out, int32_t j0, int32_t jn, const sf_spikes *x, int64_t r,
                                   const float *wt, const float *b, float *y)
{
    const int64_t segs = sf_spike_segs(in);
    float acc[TILE];
    if (jn == TILE) {
        v8 a[TILE_VECS];
        tile_zero(a);
        for (int64_t g = 0; g < segs; g++) {
            const uint8_t *ix = x->idx + r * in + g * SF_SPIKE_SEG;
            for (int32_t m = 0, k = x->cnt[r * segs + g]; m < k; m++)
                tile_axpy(a, NULL, wt + (g * SF_SPIKE_SEG + ix[m]) * (int64_t)TILE);
        }
        memcpy(acc, a, sizeof acc);
    } else {
        for (int32_t j = 0; j < jn; j++) acc[j] = 0.0f;
        for (int64_t g = 0; g < segs; g++) {
            const uint8_t *ix = x->idx + r * in + g * SF_SPIKE_SEG;
            for (int32_t m = 0, k = x->cnt[r * segs + g]; m < k; m++) {
                const float *wr = wt + (g * SF_SPIKE_SEG + ix[m]) * (int64_t)TILE;
                for (int32_t j = 0; j < jn; j++) acc[j] += wr[j];
            }
        }
    }
    for (int32_t j = 0; j < jn; j++) y[r * out + j0 + j] = b ? acc[j] + b[j0 + j] : acc[j];
}

sf_status sf_cpu_op_spike_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const sf_spikes *x,
                                         const float *w, const float *b, float *y, void *ws)
{
    SF_TRY(check_shape("spike linear forward", rows, in, out));
    if (!x->idx || !x->cnt) return sf_fail(SF_ERR_INVALID, "spike linear forward: the input has no active lists");
    if (rows == 0) return SF_OK;
    sf_cpu_tiled_transpose(in, out, w, ws);
    sf_cpu_spike_product(rows, in, out, x, ws, b, y);
    return SF_OK;
}

void sf_cpu_spike_product(int64_t rows, int32_t in, int32_t out, const sf_spikes *x, const float *wt, const float *b,
                          float *y)
{
    const int64_t tiles = (out + TILE - 1) / TILE, chunks = (rows + ROW_CHUNK - 1) / ROW_CHUNK;
    /* Work items tile-major: a thread's consecutive items share a tile of Wᵀ (in × TILE floats), kept in L2. Each
     * output element costs a few additions per active input, so fewer of them than an element-wise op warrant the
     * threads (the recurrent layer's per-step products). */
#pragma omp parallel for schedule(static) if (tiles * chunks > 1 && rows * out >= SF_CPU_PARALLEL_MIN / 4)
    for (int64_t it = 0; it < tiles * chunks; it++) {
        const int32_t j0 = (int32_t)(it / chunks * TILE), jn = out - j0 < TILE ? out - j0 : TILE;
        const int64_t r0 = it % chunks * ROW_CHUNK, r1 = r0 + ROW_CHUNK < rows ? r0 + ROW_CHUNK : rows;
        for (int64_t r = r0; r < r1; r++) row_tile(in, out, j0, jn, x, r, wt + (int64_t)j0 * in, b, y);
    }
}

/* Does the mask say row r of dy is zero over columns [j0, j0 + jn)? */
static inline bool tile_is_zero(const sf_spikes *dy_mask, int64_t wo, int64_t r, int32_t j0, int32_t jn)
{
    const uint32_t *m = dy_mask->bits + r * wo;
    uint32_t any = 0;
    for (int64_t q = j0 / 32; q <= (j0 + jn - 1) / 32; q++) any |= m[q];
    return any == 0;
}

/* acc[0 .. jn) = Σ of dy[r, j0 .. j0+jn) over one input's rows (ascending; rows whose tile the mask says is zero
 * skipped). A whole tile sums in registers, each branch in its own loop. */
static inline void list_sum(const int32_t *rows_of, int64_t n, int32_t out, int32_t j0, int32_t jn, const float *dy,
                            const sf_spikes *dy_mask, float *acc)
{
    const int64_t wo = sf_spike_words(out);
    if (jn == TILE) {
        v8 a[TILE_VECS];
        tile_zero(a);
        for (int64_t k = 0; k < n; k++) {
            if (dy_mask && tile_is_zero(dy_mask, wo, rows_of[k], j0, jn)) continue;
            tile_axpy(a, NULL, dy + rows_of[k] * (int64_t)out + j0);
        }
        memcpy(acc, a, sizeof(float) * TILE);
        return;
    }
    for (int32_t j = 0; j < jn; j++) acc[j] = 0.0f;
    for (int64_t k = 0; k < n; k++) {
        if (dy_mask && tile_is_zero(dy_mask, wo, rows_of[k], j0, jn)) continue;
        const float *d = dy + rows_of[k] * (int64_t)out + j0;
        for (int32_t j = 0; j < jn; j++) acc[j] += d[j];
    }
}

/* One tile of output columns of dW = dyᵀ·x: for each input i, the sum of dy[r, tile] over the rows of its list;
 * blocks of 16 inputs are written into dW [out, in] as whole cache lines. */
SF_CPU_CLONES static void wgrad_tile(int32_t in, int32_t out, int32_t j0, int32_t jn, const int64_t *colptr,
                                     const int32_t *rowidx, const float *dy, const sf_spikes *dy_mask, float *dw)
{
    float blk[16][TILE];
    for (int32_t i0 = 0; i0 < in; i0 += 16) {
        const int32_t ni = in - i0 < 16 ? in - i0 : 16;
        for (int32_t i = 0; i < ni; i++)
            list_sum(rowidx + colptr[i0 + i], colptr[i0 + i + 1] - colptr[i0 + i], out, j0, jn, dy, dy_mask, blk[i]);
        for (int32_t j = 0; j < jn; j++)
            for (int32_t i = 0; i < ni; i++) dw[(int64_t)(j0 + j) * in + i0 + i] = blk[i][j];
    }
}

/* The per-input row lists of x [rows, words(in)] (its CSC): the rows where input i spiked, ascending, at
 * rowidx[colptr[i] .. colptr[i+1]). */
static sf_status column_lists(int64_t rows, int32_t in, const uint32_t *x, int64_t **colptr, int32_t **rowidx)
{
    const int64_t wi = sf_spike_words(in);
    int64_t *cp = calloc((size_t)in + 2, sizeof *cp);
    if (!cp) return sf_fail(SF_ERR_NOMEM, "spike weight gradient: out of memory for the input lists");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < wi; q++)
            for (uint32_t m = x[r * wi + q]; m; m &= m - 1) cp[32 * q + __builtin_ctz(m) + 2]++;
    for (int32_t i = 0; i < in; i++) cp[i + 2] += cp[i + 1]; /* cp[i + 1]: start of input i's list */
    int32_t *ri = malloc(sizeof *ri * (size_t)(cp[in + 1] + 1));
    if (!ri) {
        free(cp);
        return sf_fail(SF_ERR_NOMEM, "spike weight gradient: out of memory for the input lists");
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < wi; q++)
            for (uint32_t m = x[r * wi + q]; m; m &= m - 1) ri[cp[32 * q + __builtin_ctz(m) + 1]++] = (int32_t)r;
    *colptr = cp; /* the fill moved each start to the next one's: cp[i] is now input i's start */
    *rowidx = ri;
    return SF_OK;
}

sf_status sf_cpu_spike_weight_grad(int64_t rows, int32_t in, int32_t out, const uint32_t *x, const float *dy,
                                   const sf_spikes *dy_mask, float *dw)
{
    int64_t *colptr;
    int32_t *rowidx;
    SF_TRY(column_lists(rows, in, x, &colptr, &rowidx));
    const int64_t tiles = (out + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) if (rows * (int64_t)out >= SF_CPU_PARALLEL_MIN)
    for (int64_t tl = 0; tl < tiles; tl++) {
        const int32_t j0 = (int32_t)(tl * TILE), jn = out - j0 < TILE ? out - j0 : TILE;
        wgrad_tile(in, out, j0, jn, colptr, rowidx, dy, dy_mask, dw);
    }
    free(colptr);
    free(rowidx);
    return SF_OK;
}

/* y[r, i0 .. i0+n) = Σ over the set bits j of the row's mask m (ascending) of W[j, i0 ..], or with coefficients cr,
 * of cr[j]·W[j, i0 ..]; wtile is W's tile of those columns (k × TILE, see sf_cpu_tile_columns), summed in registers
 * as row_tile does. Inlined with cr a constant NULL where only adds are wanted. */
static inline void masked_tile(int32_t k, int32_t n, const float *wtile, const float *cr, const uint32_t *m, float *yr)
{
    float acc[TILE];
    v8 a[TILE_VECS];
    tile_zero(a);
    for (int j = 0; j < TILE; j++) acc[j] = 0.0f;
    for (int64_t q = 0; q < sf_spike_words(k); q++)
        for (uint32_t bitsq = m[q]; bitsq; bitsq &= bitsq - 1) {
            const int64_t j = 32 * q + __builtin_ctz(bitsq);
            const float *g = cr ? cr + j : NULL, *wr = wtile + j * TILE;
            if (n == TILE) {
                tile_axpy(a, g, wr);
            } else {
                for (int32_t i = 0; i < n; i++) acc[i] += g ? *g * wr[i] : wr[i];
            }
        }
    if (n == TILE) memcpy(acc, a, sizeof acc);
    memcpy(yr, acc, sizeof(float) * (size_t)n);
}

SF_CPU_CLONES static void masked_row(int32_t k, int32_t n, const float *wtile, const float *cr, const uint32_t *m,
                                     float *yr)
{
    if (cr)
        masked_tile(k, n, wtile, cr, m, yr);
    else
        masked_tile(k, n, wtile, NULL, m, yr);
}

/* t holds a [rows_n, cols] by tiles of TILE columns: t[(k·rows_n + r)·TILE + c] = a[r, k·TILE + c]. */
void sf_cpu_tile_columns(int64_t rows_n, int32_t cols, const float *a, float *t)
{
#pragma omp parallel for schedule(static) if (rows_n * cols >= SF_CPU_PARALLEL_MIN)
    for (int32_t c0 = 0; c0 < cols; c0 += TILE) {
        const int32_t cn = cols - c0 < TILE ? cols - c0 : TILE;
        for (int64_t r = 0; r < rows_n; r++) memcpy(t + ((int64_t)c0 * rows_n + r * TILE), a + r * cols + c0, 4 * (size_t)cn);
    }
}

/* Rows [r0, r1) of the product over the tile of columns starting at i0. */
static void masked_rows(int64_t r0, int64_t r1, int32_t k, int32_t n, int32_t i0, const uint32_t *mask,
                        const float *coef, const float *wtiles, float *y)
{
    const int64_t wk = sf_spike_words(k);
    for (int64_t r = r0; r < r1; r++)
        masked_row(k, n - i0 < TILE ? n - i0 : TILE, wtiles + (int64_t)i0 * k, coef ? coef + r * k : NULL,
                   mask + r * wk, y + r * n + i0);
}

void sf_cpu_masked_product(int64_t rows, int32_t k, int32_t n, const uint32_t *mask, const float *coef,
                           const float *wtiles, float *y)
{
    const int64_t tiles = (n + TILE - 1) / TILE, chunks = (rows + ROW_CHUNK - 1) / ROW_CHUNK;
    /* Tile-major, as sf_cpu_spike_product: a thread's rows reuse its tile of W from L2. */
#pragma omp parallel for schedule(static) if (tiles * chunks > 1 && rows * (int64_t)n >= SF_CPU_PARALLEL_MIN / 4)
    for (int64_t it = 0; it < tiles * chunks; it++) {
        const int64_t r0 = it % chunks * ROW_CHUNK;
        masked_rows(r0, r0 + ROW_CHUNK < rows ? r0 + ROW_CHUNK : rows, k, n, (int32_t)(it / chunks * TILE), mask,
                    coef, wtiles, y);
    }
}

void sf_cpu_masked_product_here(int64_t rows, int32_t k, int32_t n, const uint32_t *mask, const float *coef,
                                const float *wtiles, float *y)
{
    for (int32_t i0 = 0; i0 < n; i0 += TILE) masked_rows(0, rows, k, n, i0, mask, coef, wtiles, y);
}

sf_status sf_cpu_op_spike_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                          const float *w, const float *dy, const sf_spikes *dy_mask, float *dx,
                                          float *dw, float *db, void *ws)
{
    SF_TRY(check_shape("spike linear backward", rows, in, out));
    SF_TRY(sf_cpu_spike_weight_grad(rows, in, out, x, dy, dy_mask, dw));
    if (db) sf_cpu_column_sums(rows, out, dy, db);
    if (!dx || rows == 0) return SF_OK;
    if (dy_mask) { /* dx = dy·W over the nonzero entries of dy, W by tiles of input columns */
        sf_cpu_tile_columns(out, in, w, ws);
        sf_cpu_masked_product(rows, out, in, dy_mask->bits, dy, ws, dx);
    } else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx,
                    in);
    return SF_OK;
}
