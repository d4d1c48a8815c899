/* cuda_transformer.h — the CUDA versions of the spiking transformers' ops (core/transformer.h says what each
 * computes; the CPU's, cpu/cpu_transformer.h, are their reference): each sf_cuda_op_<entry> has the signature its op
 * table entry will have. Token tensors are in the backend's activation type, statistics and parameters float; every
 * op runs on the backend's stream and is deterministic (no atomics; fixed partitions). A C header, so that the GPU
 * tests call the ops before they are in the op table. */
#ifndef SF_CUDA_TRANSFORMER_H
#define SF_CUDA_TRANSFORMER_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "core/backend.h"
#include "core/transformer.h"

/* layernorm.cu */
sf_status sf_cuda_op_layernorm_forward(sf_backend *be, int64_t rows, int32_t d, float eps, const float *x,
                                       const float *gamma, const float *beta, float *y, float *mean, float *rstd);
sf_status sf_cuda_op_layernorm_backward(sf_backend *be, int64_t rows, int32_t d, const float *x, const float *mean,
                                        const float *rstd, const float *gamma, const float *dy, float *dx,
                                        float *dgamma, float *dbeta, void *ws);
size_t sf_cuda_op_layernorm_workspace(sf_backend *be, int64_t rows, int32_t d);

/* attention.cu */
size_t sf_cuda_op_ssa_workspace(sf_backend *be, const sf_token_shape *sh, int32_t heads, bool backward);
sf_status sf_cuda_op_ssa_forward(sf_backend *be, const sf_token_shape *sh, int32_t heads, float scale, int64_t ld,
                                 const float *q, const float *k, const float *v, float *y, void *ws);
sf_status sf_cuda_op_ssa_backward(sf_backend *be, const sf_token_shape *sh, int32_t heads, float scale, int64_t ld,
                                  const float *q, const float *k, const float *v, const float *dy, float *dq,
                                  float *dk, float *dv, void *ws);

/* token_ops.cu */
sf_status sf_cuda_op_token_sum(sf_backend *be, const sf_token_shape *sh, float alpha, const float *a, int64_t lda,
                               const float *b, int64_t ldb, float *out);
sf_status sf_cuda_op_token_scale(sf_backend *be, const sf_token_shape *sh, float alpha, const float *g,
                                 const float *b, int64_t ldb, float *out, int64_t ldo);

#ifdef __cplusplus
}
#endif

#endif
