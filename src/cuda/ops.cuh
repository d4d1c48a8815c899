/* ops.cuh — the CUDA implementations of the op table, one family per .cu file, and the kernels' entry points the
 * families share. sf_cuda_op_<op> exists for every op of core/backend_ops.h, with the signature of the table's field
 * <op> (backend.cu puts them into a struct sf_backend): tensors the table types `float *` hold the backend's
 * activation type where core/backend.h says so. */
#ifndef SF_CUDA_OPS_CUH
#define SF_CUDA_OPS_CUH

#include "cuda/common.cuh"

#define SF_OP(ret, op, params) ret sf_cuda_op_##op params;
#include "core/backend_ops.h"

/* bn.cu */
/* BN's input gradient from Σdy (dbeta) and Σdy·x̂ (dgamma) over count values per channel, on c's stream, element-wise:
 * dx = γ·invstd·(dy − Σdy/count − x̂·Σdy·x̂/count); x, dy, dx of c's activation type, dx may be dy. */
sf_status sf_cuda_bn_dx(const sf_cuda_ctx *c, sf_bn_shape sh, double count, const void *x, const float *mean,
                        const float *var, float eps, const float *gamma, const void *dy, const float *dgamma,
                        const float *dbeta, void *dx);

/* linear.cu: y[r, :] = b in the backend's activation type (y [rows, out]). */
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

/* binary_linear.cu: linear_forward/_backward for 0/1 x on the tensor cores to fp32 accuracy; sf_cuda_binary_weight_grad
 * is dW = dyᵀ·x (dw float, dy activation type) from spike bits xbits [rows][words], for the recurrent layer's dense dV;
 * x: scratch of rows·in activation values, where the precision multiplies the expanded spikes. */
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

/* spikes.cu: the compact form (core/spikes.h): spikes_expand and spikes_compact on a context, y in the activation type;
 * and the expansion as bf16 values (exact) for the tensor cores, rows ld ≥ n apart, zeros past n. */
sf_status sf_cuda_spikes_expand(sf_cuda_ctx *c, int64_t rows, int64_t n, const uint32_t *bits, void *y);
sf_status sf_cuda_spikes_expand_bf16(sf_cuda_ctx *c, int64_t rows, int64_t n, int64_t ld, const uint32_t *bits,
                                     __nv_bfloat16 *y);
sf_status sf_cuda_spikes_compact(sf_cuda_ctx *c, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                 float *count, float *flag);

/* spike_linear.cu: the event-driven linear layer; sf_cuda_spike_weight_grad is its dW (no mask; dy activation type, dw
 * float), also the recurrent dV's (scratch: sf_cuda_op_spike_linear_workspace bytes, the same in every type). */
size_t sf_cuda_spike_linear_ws(int64_t rows, int32_t in, int32_t out);
sf_status sf_cuda_spike_weight_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                    const float *dy, float *dw, void *ws);
/* at [cols, rows] = aᵀ for a [rows, cols], elements of type t */
sf_status sf_cuda_transpose(sf_cuda_ctx *c, sf_scalar t, int64_t rows, int64_t cols, const void *a, void *at);

/* conv.cu: frees the context's algorithm choices. */
void sf_cuda_conv_cache_free(sf_cuda_ctx *c);

/* conv_gemm.cu: the im2col + GEMM path in the activation type (es bytes each): workspace for chunks of nb images; the
 * chunk that fits `cap` (0: not one image, or too many im2col rows); the ops over the batch in such chunks (forward
 * adds b when given; backward computes dx and/or fp32 dw where not NULL, dw summed over chunks). */
size_t sf_cuda_conv_gemm_ws(const sf_conv_shape *sh, int64_t nb, size_t es);
int64_t sf_cuda_conv_gemm_chunk(const sf_conv_shape *sh, size_t cap, size_t es);
sf_status sf_cuda_conv_gemm_forward(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, const void *x,
                                    const void *w, const float *b, void *y, void *ws);
sf_status sf_cuda_conv_gemm_backward(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, const void *x,
                                     const void *w, const void *dy, void *dx, float *dw, void *ws);

/* act.cu: y = x (accumulate 0) or y += x (1): n elements of the backend's activation type widened to fp32. */
sf_status sf_cuda_widen(sf_cuda_ctx *c, int64_t n, const void *x, float *y, int accumulate);

#endif
