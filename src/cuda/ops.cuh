/* ops.cuh — the CUDA implementations of the op table (core/backend.h), one family per .cu file; backend.cu puts
 * them into a struct sf_backend. Signatures are those of the table: tensors the table types `float *` hold the
 * backend's activation type where core/backend.h says so. */
#ifndef SF_CUDA_OPS_CUH
#define SF_CUDA_OPS_CUH

#include "cuda/common.cuh"

/* lif.cu */
sf_status sf_cuda_op_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                 const sf_lif_out *out, const sf_lif_state *st);
sf_status sf_cuda_op_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                  const float *h, const float *ds, float *dx, const sf_lif_state *st);

/* bn.cu */
sf_status sf_cuda_op_bn_stats(sf_backend *be, sf_bn_shape sh, const float *x, float *mean, float *var);
sf_status sf_cuda_op_bn_forward(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                                float eps, const float *gamma, const float *beta, float *y);
sf_status sf_cuda_op_bn_backward(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                                 float eps, const float *gamma, const float *dy, float *dx, float *dgamma,
                                 float *dbeta);
sf_status sf_cuda_op_bn_update_running(sf_backend *be, sf_bn_shape sh, float momentum, const float *mean,
                                       const float *var, float *running_mean, float *running_var);
sf_status sf_cuda_op_bn_stats_merge(sf_backend *be, int32_t parts, int32_t C, const float *part_stats, float *mean,
                                    float *var);
/* BN's input gradient from Σdy (dbeta) and Σdy·x̂ (dgamma) over count values per channel, element-wise:
 * dx = γ·invstd·(dy − Σdy/count − x̂·Σdy·x̂/count); x, dy and dx of c's activation type, dx may be dy; on c's
 * stream. */
sf_status sf_cuda_bn_dx(const sf_cuda_ctx *c, sf_bn_shape sh, double count, const void *x, const float *mean,
                        const float *var, float eps, const float *gamma, const void *dy, const float *dgamma,
                        const float *dbeta, void *dx);

/* bn_lif.cu */
sf_status sf_cuda_op_bn_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh, const float *x,
                                    const float *mean, const float *var, float eps, const float *gamma,
                                    const float *beta, const sf_lif_out *out, const sf_lif_state *st);
sf_status sf_cuda_op_bn_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh, const float *x,
                                     const float *h, const float *mean, const float *var, float eps, const float *gamma,
                                     const float *beta, const float *ds, float *dx, float *dgamma, float *dbeta,
                                     const sf_lif_state *st, const sf_bn_split *split, void *scratch);
size_t sf_cuda_op_bn_lif_scratch(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh);

/* linear.cu */
sf_status sf_cuda_op_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                    const float *w, const float *b, float *y);
sf_status sf_cuda_op_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                     const float *w, const float *dy, float *dx, float *dw, float *db);
/* y[r, :] = b in the backend's activation type (y [rows, out]). */
sf_status sf_cuda_bias_fill(sf_cuda_ctx *c, int64_t rows, int32_t out, const float *b, float *y);
/* C = op(A)·op(B) + beta·C, column-major, A and B in the backend's activation type, C in it too or float (c_float);
 * fp32 accumulation. */
sf_status sf_cuda_gemm(sf_cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A,
                       int lda, const void *B, int ldb, float beta, void *C, int ldc, bool c_float);

/* db[j] = Σ_r dy[r, j] (deterministic: fixed partials, then their sum in order), and the dense dx = dy·W with the
 * backend's precision, as linear_backward computes them (dy, W and dx in the backend's activation type). */
sf_status sf_cuda_column_sums(sf_cuda_ctx *c, int64_t rows, int32_t out, const float *dy, float *db);
sf_status sf_cuda_linear_input_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *w,
                                    const float *dy, float *dx);

/* binary_linear.cu: linear_forward and _backward for x of 0/1 values, on the tensor cores to fp32 accuracy (the
 * other operands as sums of bf16 or TF32 parts). sf_cuda_binary_weight_grad is its dW = dyᵀ·x (dw float; dy in the
 * activation type) with x from the spike bits xbits [rows][words], for the recurrent layer's dense dV; x is scratch
 * of rows·in activation values where the backend's precision multiplies the expanded spikes. */
sf_status sf_cuda_op_binary_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                           const float *w, const float *b, float *y);
sf_status sf_cuda_op_binary_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                            const float *w, const float *dy, float *dx, float *dw, float *db);
sf_status sf_cuda_op_binary_linear_backward_bits(sf_backend *be, int64_t rows, int32_t in, int32_t out,
                                                 const uint32_t *xbits, const float *w, const float *dy, float *dx,
                                                 float *dw, float *db);
sf_status sf_cuda_binary_weight_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const uint32_t *xbits,
                                     float *x, const float *dy, float *dw);

/* conv_parts.cu. tf32_stack: x[images][block] as out[images][groups][block], group g holding x's high TF32 part, or
 * its low one where bit g of lo_mask is set (the two sum to x but for less than 2^-22 of it; tf32.cuh). fold:
 * out[images][block] = the sum of in[images][groups][block] over the groups. */
sf_status sf_cuda_tf32_stack(sf_cuda_ctx *c, int64_t images, int64_t block, const float *x, int groups,
                             unsigned lo_mask, float *out);
sf_status sf_cuda_fold(sf_cuda_ctx *c, int64_t images, int64_t block, int groups, const float *in, float *out);
/* The same between NCHW x[images][channels][pixels] and NHWC stacks [images][pixels][groups·channels] (at most 65535
 * images): tf32_stack_nhwc stacks an NCHW x (and writes its high parts alone to hi, NHWC, where hi is not NULL),
 * fold_nchw folds an NHWC stack into an NCHW out. */
sf_status sf_cuda_tf32_stack_nhwc(sf_cuda_ctx *c, int64_t images, int32_t channels, int32_t pixels, const float *x,
                                  int groups, unsigned lo_mask, float *out, float *hi);
sf_status sf_cuda_fold_nchw(sf_cuda_ctx *c, int64_t images, int32_t channels, int32_t pixels, int groups,
                            const float *in, float *out);

/* spikes.cu: the compact form (core/spikes.h). */
sf_status sf_cuda_op_spikes_compact(sf_backend *be, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                    float *count, float *flag);
sf_status sf_cuda_op_spikes_expand(sf_backend *be, int64_t rows, int64_t n, const uint32_t *bits, float *y);
/* The same on a context, y in the activation type; and as bf16 values (exact), for the tensor cores whatever the
 * activation type, in rows ld ≥ n apart with zeros past n. */
sf_status sf_cuda_spikes_expand(sf_cuda_ctx *c, int64_t rows, int64_t n, const uint32_t *bits, void *y);
sf_status sf_cuda_spikes_expand_bf16(sf_cuda_ctx *c, int64_t rows, int64_t n, int64_t ld, const uint32_t *bits,
                                     __nv_bfloat16 *y);
sf_status sf_cuda_spikes_compact(sf_cuda_ctx *c, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                 float *count, float *flag);

/* spike_linear.cu: the event-driven linear layer; sf_cuda_spike_weight_grad is its dW (no mask; dy in the
 * activation type, dw float), which the recurrent layer's dV uses too (scratch: sf_cuda_op_spike_linear_workspace
 * bytes, the same in every activation type). */
size_t sf_cuda_op_spike_linear_workspace(sf_backend *be, int64_t rows, int32_t in, int32_t out);
sf_status sf_cuda_op_spike_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const sf_spikes *x,
                                          const float *w, const float *b, float *y, void *ws);
sf_status sf_cuda_op_spike_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                           const float *w, const float *dy, const sf_spikes *dy_mask, float *dx,
                                           float *dw, float *db, void *ws);
size_t sf_cuda_spike_linear_ws(int64_t rows, int32_t in, int32_t out);
sf_status sf_cuda_spike_weight_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                    const float *dy, float *dw, void *ws);
/* at [cols, rows] = aᵀ for a [rows, cols], elements of type t */
sf_status sf_cuda_transpose(sf_cuda_ctx *c, sf_act_type t, int64_t rows, int64_t cols, const void *a, void *at);

/* lif.cu: the LIF backward that also writes where dx is nonzero. */
sf_status sf_cuda_op_lif_backward_masked(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                         const float *x, const float *h, const float *ds, float *dx,
                                         const sf_spikes *mask, float *count, const sf_lif_state *st);

/* rlif.cu: the recurrent LIF layer. */
size_t sf_cuda_op_rlif_workspace(sf_backend *be, int64_t T, int64_t B, int64_t n);
sf_status sf_cuda_op_rlif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                  const float *x, const float *v, int32_t sparse, const sf_lif_out *out, void *ws);
sf_status sf_cuda_op_rlif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                   const float *x, const float *h, const uint32_t *s_bits, const float *v,
                                   const float *ds, int32_t fwd_sparse, int32_t bwd_sparse, float *dx, float *dv,
                                   const sf_spikes *mask, float *grad_count, void *ws);

/* conv.cu */
size_t sf_cuda_op_conv_workspace(sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass);
bool sf_cuda_op_conv_lean(sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass, bool apply, sf_conv_lean *out);
sf_status sf_cuda_op_conv_forward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                  const float *b, float *y, void *ws);
sf_status sf_cuda_op_conv_backward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                   const float *dy, float *dx, float *dw, float *db, void *ws);
void sf_cuda_conv_cache_free(sf_cuda_ctx *c);

/* conv_gemm.cu: the im2col + GEMM path, in the backend's activation type (es bytes per element). Workspace for
 * chunks of nb images; the chunk that fits `cap` (0: not even one image, or too many im2col rows); the ops over the
 * batch in such chunks (forward adds the bias when b is given; backward computes dx and/or the fp32 dw where they
 * are not NULL, dw summed over the chunks). */
size_t sf_cuda_conv_gemm_ws(const sf_conv_shape *sh, int64_t nb, size_t es);
int64_t sf_cuda_conv_gemm_chunk(const sf_conv_shape *sh, size_t cap, size_t es);
sf_status sf_cuda_conv_gemm_forward(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, const void *x,
                                    const void *w, const float *b, void *y, void *ws);
sf_status sf_cuda_conv_gemm_backward(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, const void *x,
                                     const void *w, const void *dy, void *dx, float *dw, void *ws);

/* act.cu */
sf_status sf_cuda_op_convert(sf_backend *be, int64_t n, sf_act_type from, const void *x, sf_act_type to, void *y);
sf_status sf_cuda_op_scale(sf_backend *be, int64_t n, sf_act_type t, const float *factor, void *x);
/* y = x (accumulate 0) or y += x (1): n elements of the backend's activation type widened to fp32. */
sf_status sf_cuda_widen(sf_cuda_ctx *c, int64_t n, const void *x, float *y, int accumulate);

/* pool.cu */
sf_status sf_cuda_op_avgpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y);
sf_status sf_cuda_op_avgpool_backward(sf_backend *be, const sf_pool_shape *sh, const float *dy, float *dx);
sf_status sf_cuda_op_maxpool_forward(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y,
                                     uint8_t *argmax);
sf_status sf_cuda_op_maxpool_backward(sf_backend *be, const sf_pool_shape *sh, const uint8_t *argmax, const float *dy,
                                      float *dx);

/* dropout.cu */
sf_status sf_cuda_op_dropout_forward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                     const float *x, float *y);
sf_status sf_cuda_op_dropout_backward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                      const float *dy, float *dx);

/* elementwise.cu */
sf_status sf_cuda_op_add(sf_backend *be, int64_t n, const float *a, const float *b, float *y);
sf_status sf_cuda_op_axpy(sf_backend *be, int64_t n, float alpha, const float *x, float *y);
sf_status sf_cuda_op_u8_to_act(sf_backend *be, int64_t n, const uint8_t *x, float *y);
sf_status sf_cuda_op_act_to_u8(sf_backend *be, int64_t n, const float *x, uint8_t *y);
sf_status sf_cuda_op_check_finite(sf_backend *be, int64_t n, const float *x, float *flag);

/* readout.cu */
sf_status sf_cuda_op_leaky_forward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *o, float *r);
sf_status sf_cuda_op_leaky_backward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *dr,
                                    float *doo);
sf_status sf_cuda_op_softmax_xent(sf_backend *be, int64_t T, int64_t B, int32_t K, int32_t per_step, float eps,
                                  const float *r, const int32_t *labels, float *dr, float *logits_mean, float *stats);
sf_status sf_cuda_op_mse_rate(sf_backend *be, int64_t T, int64_t B, int32_t K, const float *r, const int32_t *labels,
                              float *dr, float *logits_mean, float *stats);

/* optim.cu */
sf_status sf_cuda_op_sgd_step(sf_backend *be, int64_t n, float lr, float momentum, int32_t nesterov, float wd,
                              int64_t step, float *p, const float *g, float *buf);
sf_status sf_cuda_op_adam_step(sf_backend *be, int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                               int32_t decoupled, int64_t step, float *p, const float *g, float *m, float *v);

#endif
