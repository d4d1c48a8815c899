/* transformer.h — the backend ops of spiking transformers (Spikformer's SSA, Zhou et al. 2023; the Spike-driven
 * Transformer's SDSA, Yao et al. 2023; LayerNorm): their shapes and contracts, in the calling convention of the op
 * table (core/backend.h, core/backend_ops.h), whose entries they are. Each backend implements them (cpu/layernorm.c,
 * attention.c, token_ops.c; cuda/layernorm.cu, attention.cu, token_ops.cu); the CPU's are the reference.
 *
 * Tokens. T·B sets of n tokens of d channels, [T, B, n, d], are to the engine a channels-last tensor: c = d and
 * h·w = n. A token linear is linear_forward over rows = T·B·n; BN over d with tokens as positions is the BN ops with
 * sf_bn_shape {T·B·n, d, 1}; the neurons run over [T, B·n·d]. Tensors of tokens are in the act type (backend.h);
 * statistics and parameters float.
 *
 * Spikes. q, k, v (and the SDSA's m) come from LIF layers: every element is 0 or 1, so the forward products below
 * are sums of integers, exact in fp32 accumulation while they stay below 2^24. What each backend and storage type
 * gives exactly is said where it implements them. */
#ifndef SF_CORE_TRANSFORMER_H
#define SF_CORE_TRANSFORMER_H

#include "spikefuse.h"

#include <stdint.h>

/* tb sets of n tokens of d channels. Token tensors that an op reads or writes with a row stride take it as an ld
 * argument (>= d): d for a tensor of its own, 3·d where q, k, v are the column blocks of one fused [rows, 3·d]
 * tensor (one linear → BN → LIF of 3·d channels, as SpikingJelly's Spikformer computes them). */
typedef struct sf_token_shape {
    int64_t tb; /* T·B */
    int32_t n;  /* tokens per set */
    int32_t d;  /* channels per token */
} sf_token_shape;

/* The op table entries (backend.h's style: the CPU's are sf_cpu_op_<entry>, CUDA's sf_cuda_op_<entry>):
 *
 * LayerNorm over the d channels of each of `rows` rows:
 *   layernorm_forward(be, rows, d, eps, x, gamma, beta, y, mean, rstd)
 *     y = (x − mean)·rstd·γ + β with mean and rstd = 1/sqrt(var + eps) of the row (biased var), both [rows] float,
 *     saved for the backward; gamma and beta (float [d]) may be NULL (no affine: γ = 1, β = 0)
 *   layernorm_backward(be, rows, d, x, mean, rstd, gamma, dy, dx, dgamma, dbeta, ws)
 *     dx = rstd·(g − mean_c(g) − x̂·mean_c(g·x̂)) with g = dy·γ, x̂ = (x − mean)·rstd; dgamma = Σ_rows dy·x̂, dbeta =
 *     Σ_rows dy (float [d]; NULL when gamma is NULL), deterministic (a fixed partition of the rows); dx may be dy
 *   layernorm_workspace(be, rows, d): bytes of ws (the backward's partial sums; 0: ws may be NULL)
 *
 * Spiking self-attention (SSA) without softmax, per set and head h of `heads` (dh = d / heads), Q_h, K_h, V_h the
 * [n, dh] column blocks h·dh.. of the set's rows of q, k, v (rows ld apart):
 *   ssa_forward(be, sh, heads, scale, ld, q, k, v, y, ws)
 *     Y_h = scale·Q_h·(K_hᵀ·V_h), y dense [tb, n, d]: associated so that the dh×dh count matrix K_hᵀ·V_h is formed
 *     (entries <= n) and never the n×n matrix Q_h·K_hᵀ (fewer products whenever n > dh)
 *   ssa_backward(be, sh, heads, scale, ld, q, k, v, dy, dq, dk, dv, ws)
 *     recomputes M_h = K_hᵀ·V_h from q, k, v (the memory modes keep those as bits or bytes and nothing of the
 *     product), then with G_h = scale·Q_hᵀ·dY_h: dQ_h = scale·dY_h·M_hᵀ, dK_h = V_h·G_hᵀ, dV_h = K_h·G_h; dq, dk, dv
 *     rows ld apart, none overlapping q, k, v or dy
 *   ssa_workspace(be, sh, heads, backward): bytes of ws for the forward (backward false) or the backward
 *
 * Per-channel products over the tokens of a set (SDSA's channel mix, a mean over tokens), with a, b, out rows
 * lda, ldb, ldo apart where they are token tensors:
 *   token_sum(be, sh, alpha, a, lda, b, ldb, out)
 *     out[tb, c] = alpha·Σ_n a[tb, n, c]·b[tb, n, c] (b NULL: 1), out dense [tb, d], the tokens summed in order
 *   token_scale(be, sh, alpha, g, b, ldb, out, ldo)
 *     out[tb, n, c] = alpha·g[tb, c]·b[tb, n, c] (b NULL: 1), g dense [tb, d]; out may be b
 * The SDSA (Yao et al.: kv = Σ_n k·v, m = LIF(kv) with θ 0.5, y = q·m) is token_sum(k, v) → the LIF op over
 * [T, B·d] → token_scale(m, q); its backward dq = token_scale(m, dy), dm = token_sum(dy, q), the LIF's backward to
 * dkv, dk = token_scale(dkv, v), dv = token_scale(dkv, k) (m is spikes, kept as the engine keeps any). A mean over
 * the tokens is token_sum(x, NULL) with alpha 1/n, its backward token_scale(dmean, NULL) with alpha 1/n. */

/* Shape checks the backends share (SF_ERR_INVALID naming the op and the field; `op` names the op in messages):
 * tb >= 0, n and d >= 1, each ld >= d and within BLAS's int; the SSA's heads >= 1 dividing d. */
sf_status sf_token_shape_check(const char *op, const sf_token_shape *sh);
sf_status sf_token_ld_check(const char *op, const char *name, int64_t ld, int32_t d);
sf_status sf_ssa_check(const char *op, const sf_token_shape *sh, int32_t heads, int64_t ld);
sf_status sf_layernorm_check(const char *op, int64_t rows, int32_t d);

#endif
