/* spike_linear.c — the event-driven linear layer on the CPU (Finkbeiner & Neftci): with spikes as input, the
 * forward adds up the weight columns of the inputs that spiked and the weight gradient touches only their rows of
 * Wᵀ; with a mask of the nonzero output gradient (grad_threshold) dx sums only those weight rows. Every element is a
 * sum in ascending order of the index it runs over, by one thread: the results do not depend on the thread count. */
#include "cpu/cpu_layers.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

/* Output columns per tile: a tile's accumulators stay in vector registers, and Wᵀ's tile (in × TILE floats) in L2. */
enum { TILE = 64, ROW_CHUNK = 32 };

static sf_status check_shape(const char *op, int64_t rows, int32_t in, int32_t out)
{
    if (rows < 0 || in <= 0 || out <= 0 || rows > SF_CPU_BLAS_MAX)
        return sf_fail(SF_ERR_INVALID, "%s: shape rows=%lld in=%d out=%d: need 0 <= rows <= %d, in, out >= 1", op,
                       (long long)rows, in, out, INT_MAX);
    return SF_OK;
}

size_t sf_cpu_op_spike_linear_workspace(sf_backend *be, int64_t rows, int32_t in, int32_t out)
{
    /* Wᵀ in the forward; dWᵀ by whole tiles of TILE columns in the backward */
    return (size_t)in * (size_t)((out + TILE - 1) / TILE * TILE) * sizeof(float);
}

void sf_cpu_transpose(int64_t rows, int64_t cols, const float *a, float *at)
{
    enum { B = 32 };
#pragma omp parallel for collapse(2) schedule(static) if (rows * cols >= SF_CPU_PARALLEL_MIN)
    for (int64_t r0 = 0; r0 < rows; r0 += B)
        for (int64_t c0 = 0; c0 < cols; c0 += B)
            for (int64_t r = r0; r < r0 + B && r < rows; r++)
                for (int64_t c = c0; c < c0 + B && c < cols; c++) at[c * rows + r] = a[r * cols + c];
}

/* The active inputs of row r, ascending, from the segment lists; returns their number. */
static int32_t row_list(const sf_spikes *x, int64_t n, int64_t r, int32_t *list)
{
    const int64_t segs = sf_spike_segs(n);
    int32_t k = 0;
    for (int64_t g = 0; g < segs; g++) {
        const uint8_t *ix = x->idx + r * n + g * SF_SPIKE_SEG;
        for (int32_t m = 0, c = x->cnt[r * segs + g]; m < c; m++) list[k++] = (int32_t)(g * SF_SPIKE_SEG + ix[m]);
    }
    return k;
}

/* y[r, j0 .. j0+jn) = b + Σ_i Wᵀ[i, j0 ..] over the row's list; jn == TILE in the loop the compiler unrolls. */
static inline void tile_sum(int32_t out, int32_t j0, int32_t jn, const float *wt, const float *b, const int32_t *list,
                            int32_t nl, float *y)
{
    float acc[TILE] = {0};
    for (int32_t m = 0; m < nl; m++) {
        const float *wr = wt + (int64_t)list[m] * out + j0;
        if (jn == TILE) {
#pragma omp simd
            for (int32_t j = 0; j < TILE; j++) acc[j] += wr[j];
        } else {
            for (int32_t j = 0; j < jn; j++) acc[j] += wr[j];
        }
    }
    for (int32_t j = 0; j < jn; j++) y[j0 + j] = b ? acc[j] + b[j0 + j] : acc[j];
}

sf_status sf_cpu_op_spike_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const sf_spikes *x,
                                         const float *w, const float *b, float *y, void *ws)
{
    SF_TRY(check_shape("spike linear forward", rows, in, out));
    if (!x->idx || !x->cnt) return sf_fail(SF_ERR_INVALID, "spike linear forward: the input has no active lists");
    if (rows == 0) return SF_OK;
    float *wt = ws;
    sf_cpu_transpose(out, in, w, wt);
    const int nt = omp_get_max_threads();
    int32_t *lists = malloc((size_t)nt * ROW_CHUNK * (size_t)in * sizeof *lists);
    if (!lists) return sf_fail(SF_ERR_NOMEM, "spike linear forward: out of memory for the active lists");
    const int64_t chunks = (rows + ROW_CHUNK - 1) / ROW_CHUNK;
#pragma omp parallel if (rows * out >= SF_CPU_PARALLEL_MIN)
    {
        int32_t *mine = lists + (size_t)omp_get_thread_num() * ROW_CHUNK * (size_t)in;
        int32_t len[ROW_CHUNK];
#pragma omp for schedule(static)
        for (int64_t ch = 0; ch < chunks; ch++) {
            /* A chunk of rows against one tile of Wᵀ at a time, so the tile is reused from L2 across the rows. */
            const int64_t r0 = ch * ROW_CHUNK, r1 = r0 + ROW_CHUNK < rows ? r0 + ROW_CHUNK : rows;
            for (int64_t r = r0; r < r1; r++) len[r - r0] = row_list(x, in, r, mine + (r - r0) * in);
            for (int32_t j0 = 0; j0 < out; j0 += TILE) {
                const int32_t jn = out - j0 < TILE ? out - j0 : TILE;
                for (int64_t r = r0; r < r1; r++)
                    tile_sum(out, j0, jn, wt, b, mine + (r - r0) * in, len[r - r0], y + r * out);
            }
        }
    }
    free(lists);
    return SF_OK;
}

/* dW = dyᵀ·x over the active inputs: each thread owns a tile of TILE output columns of dWᵀ (contiguous in the
 * scratch, in × TILE floats) and adds dy[r, tile] to row i for every active input i of every row r, in row order;
 * rows whose dy tile the mask says is zero are skipped. Then the tile is written into dW [out, in]. */
void sf_cpu_spike_weight_grad(int64_t rows, int32_t in, int32_t out, const uint32_t *x, const float *dy,
                              const sf_spikes *dy_mask, float *dw, float *scratch)
{
    const int64_t wi = sf_spike_words(in), wo = sf_spike_words(out), tiles = (out + TILE - 1) / TILE;
#pragma omp parallel for schedule(static) if (rows * (int64_t)out >= SF_CPU_PARALLEL_MIN)
    for (int64_t tl = 0; tl < tiles; tl++) {
        const int32_t j0 = (int32_t)(tl * TILE), jn = out - j0 < TILE ? out - j0 : TILE;
        float *acc = scratch + (int64_t)j0 * in; /* this tile's in × TILE block */
        memset(acc, 0, sizeof(float) * (size_t)in * TILE);
        for (int64_t r = 0; r < rows; r++) {
            if (dy_mask) { /* the tile spans words j0/32 .. (j0+jn-1)/32 of the mask row */
                const uint32_t *m = dy_mask->bits + r * wo;
                uint32_t any = 0;
                for (int64_t q = j0 / 32; q <= (j0 + jn - 1) / 32; q++) any |= m[q];
                if (!any) continue;
            }
            const float *d = dy + r * out + j0;
            const uint32_t *xr = x + r * wi;
            for (int64_t q = 0; q < wi; q++)
                for (uint32_t m = xr[q]; m; m &= m - 1) {
                    float *a = acc + (32 * q + __builtin_ctz(m)) * TILE;
                    if (jn == TILE) {
#pragma omp simd
                        for (int32_t j = 0; j < TILE; j++) a[j] += d[j];
                    } else {
                        for (int32_t j = 0; j < jn; j++) a[j] += d[j];
                    }
                }
        }
        for (int32_t j = 0; j < jn; j++)
            for (int32_t i = 0; i < in; i++) dw[(int64_t)(j0 + j) * in + i] = acc[(int64_t)i * TILE + j];
    }
}

/* dx[r, :] = Σ over the nonzero dy[r, j] (the mask's bits) of dy[r, j]·W[j, :], j ascending. */
static void masked_input_grad(int64_t rows, int32_t in, int32_t out, const float *w, const float *dy,
                              const sf_spikes *dy_mask, float *dx)
{
    const int64_t wo = sf_spike_words(out);
#pragma omp parallel for schedule(static) if (rows * (int64_t)in >= SF_CPU_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        float *dxr = dx + r * in;
        memset(dxr, 0, sizeof(float) * (size_t)in);
        const uint32_t *m = dy_mask->bits + r * wo;
        for (int64_t q = 0; q < wo; q++)
            for (uint32_t bitsq = m[q]; bitsq; bitsq &= bitsq - 1) {
                const int64_t j = 32 * q + __builtin_ctz(bitsq);
                const float g = dy[r * out + j], *wr = w + j * in;
#pragma omp simd
                for (int32_t i = 0; i < in; i++) dxr[i] += g * wr[i];
            }
    }
}

sf_status sf_cpu_op_spike_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                          const float *w, const float *dy, const sf_spikes *dy_mask, float *dx,
                                          float *dw, float *db, void *ws)
{
    SF_TRY(check_shape("spike linear backward", rows, in, out));
    sf_cpu_spike_weight_grad(rows, in, out, x, dy, dy_mask, dw, ws);
    if (db) sf_cpu_column_sums(rows, out, dy, db);
    if (!dx || rows == 0) return SF_OK;
    if (dy_mask)
        masked_input_grad(rows, in, out, w, dy, dy_mask, dx);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx,
                    in);
    return SF_OK;
}
