/* cpu_layers.h — the CPU's non-neuron ops (sf_cpu_op_<op> of cpu_ops.h) and the kernels they share with each other
 * and with the neuron ops. All pointers are host memory; the ops use OpenMP threads and OpenBLAS, and are
 * deterministic for a fixed thread count (reductions run in a fixed order, in double). */
#ifndef SF_CPU_LAYERS_H
#define SF_CPU_LAYERS_H

#include "cpu/cpu_ops.h"

#include <limits.h>

/* BLAS takes int dimensions: every GEMM extent must fit. */
#define SF_CPU_BLAS_MAX ((int64_t)INT_MAX)

/* linear.c: db[j] = Σ_r dy[r, j] for dy [rows, cols], each column in double, in row order (any thread count, same
 * bits). */
void sf_cpu_column_sums(int64_t rows, int32_t cols, const float *dy, float *db);

/* spike_linear.c: the event-driven linear layer's weight gradient, which the recurrent layer's uses too:
 * dw [out, in] = dyᵀ·x over the set bits of x [rows, words(in)] (rows whose dy the mask zeroes skipped; mask may be
 * NULL), through per-input row lists. */
sf_status sf_cpu_spike_weight_grad(int64_t rows, int32_t in, int32_t out, const uint32_t *x, const float *dy,
                                   const sf_spikes *dy_mask, float *dw);
/* wt = Wᵀ of W [out, in] by tiles of 64 output columns (sf_cpu_op_spike_linear_workspace bytes), and with it
 * y[r] = b + Σ over the active inputs i of row r of x of Wᵀ[i, :] (b may be NULL): the event-driven forward. */
void sf_cpu_tiled_transpose(int32_t in, int32_t out, const float *w, float *wt);
void sf_cpu_spike_product(int64_t rows, int32_t in, int32_t out, const sf_spikes *x, const float *wt, const float *b,
                          float *y);

/* y [rows, n] = Σ over the set bits j of each row of mask [rows, words(k)] (ascending) of coef[r, j]·W[j, :] (coef
 * [rows, k], or NULL for 1), W [k, n] by tiles of 64 columns (sf_cpu_tile_columns, or sf_cpu_tiled_transpose of a
 * [n, k] weight): the masked dx of the event-driven linear layer and the recurrent layer's per-step products. */
void sf_cpu_tile_columns(int64_t rows_n, int32_t cols, const float *a, float *t);
void sf_cpu_masked_product(int64_t rows, int32_t k, int32_t n, const uint32_t *mask, const float *coef,
                           const float *wtiles, float *y);
/* The same on the calling thread (for the threads of a parallel region that each own some rows). */
void sf_cpu_masked_product_here(int64_t rows, int32_t k, int32_t n, const uint32_t *mask, const float *coef,
                                const float *wtiles, float *y);

#endif
