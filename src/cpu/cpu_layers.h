/* cpu_layers.h — the CPU versions of every non-neuron op of the backend table (src/core/backend.h).
 * Each sf_cpu_op_<field> has exactly the signature of the table field <field>; backend_cpu.c wires them in.
 * All pointers are host memory; the ops use OpenMP threads and OpenBLAS, and are deterministic for a fixed thread
 * count (reductions run in a fixed order, in double). */
#ifndef SF_CPU_LAYERS_H
#define SF_CPU_LAYERS_H

#include "core/backend.h"

#include <limits.h>

/* BLAS takes int dimensions: every GEMM extent must fit. */
#define SF_CPU_BLAS_MAX ((int64_t)INT_MAX)

/* linear.c */
sf_status sf_cpu_op_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                   const float *w, const float *b, float *y);
sf_status sf_cpu_op_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                    const float *w, const float *dy, float *dx, float *dw, float *db);

/* db[j] = Σ_r dy[r, j] for dy [rows, cols], each column in double, in row order (any thread count, same bits). */
void sf_cpu_column_sums(int64_t rows, int32_t cols, const float *dy, float *db);

/* spike_linear.c: the event-driven linear layer (core/backend.h), and its weight gradient for the recurrent layer. */
size_t sf_cpu_op_spike_linear_workspace(sf_backend *be, int64_t rows, int32_t in, int32_t out);
sf_status sf_cpu_op_spike_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const sf_spikes *x,
                                         const float *w, const float *b, float *y, void *ws);
sf_status sf_cpu_op_spike_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                          const float *w, const float *dy, const sf_spikes *dy_mask, float *dx,
                                          float *dw, float *db, void *ws);
/* dw [out, in] = dyᵀ·x over the set bits of x [rows, words(in)] (rows whose dy the mask zeroes skipped; mask may be
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

/* spikes.c */
sf_status sf_cpu_op_spikes_compact(sf_backend *be, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                   float *count, float *flag);
sf_status sf_cpu_op_spikes_expand(sf_backend *be, int64_t rows, int64_t n, const uint32_t *bits, float *y);

/* conv.c */
size_t sf_cpu_op_conv_workspace(sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass);
sf_status sf_cpu_op_conv_forward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                 const float *b, float *y, void *ws);
sf_status sf_cpu_op_conv_backward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                  const float *dy, float *dx, float *dw, float *db, void *ws);

/* pool.c */
sf_status sf_cpu_op_avgpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y);
sf_status sf_cpu_op_avgpool_backward(sf_backend *be, const sf_pool_shape *sh, const float *dy, float *dx);
sf_status sf_cpu_op_maxpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y,
                                    uint8_t *argmax);
sf_status sf_cpu_op_maxpool_backward(sf_backend *be, const sf_pool_shape *sh, const uint8_t *argmax,
                                     const float *dy, float *dx);

/* dropout.c */
sf_status sf_cpu_op_dropout_forward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                    const float *x, float *y);
sf_status sf_cpu_op_dropout_backward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed,
                                     uint64_t counter, const float *dy, float *dx);

/* elementwise.c */
sf_status sf_cpu_op_add(sf_backend *be, int64_t n, const float *a, const float *b, float *y);
sf_status sf_cpu_op_axpy(sf_backend *be, int64_t n, float alpha, const float *x, float *y);
sf_status sf_cpu_op_u8_to_f32(sf_backend *be, int64_t n, const uint8_t *x, float *y);
sf_status sf_cpu_op_f32_to_u8(sf_backend *be, int64_t n, const float *x, uint8_t *y);
sf_status sf_cpu_op_check_finite(sf_backend *be, int64_t n, const float *x, float *flag);

/* readout.c */
sf_status sf_cpu_op_leaky_forward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *o,
                                  float *r);
sf_status sf_cpu_op_leaky_backward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *dr,
                                   float *doo);
sf_status sf_cpu_op_softmax_xent(sf_backend *be, int64_t T, int64_t B, int32_t K, int32_t per_step, float eps,
                                 const float *r, const int32_t *labels, float *dr, float *logits_mean, float *stats);
sf_status sf_cpu_op_mse_rate(sf_backend *be, int64_t T, int64_t B, int32_t K, const float *r, const int32_t *labels,
                             float *dr, float *logits_mean, float *stats);

/* optim.c */
sf_status sf_cpu_op_sgd_step(sf_backend *be, int64_t n, float lr, float momentum, int32_t nesterov, float wd,
                             int64_t step, float *p, const float *g, float *buf);
sf_status sf_cpu_op_adam_step(sf_backend *be, int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                              int32_t decoupled, int64_t step, float *p, const float *g, float *m, float *v);

#endif
