/* transformer.h — the backend ops of spiking transformers (Spikformer's SSA, Zhou et al. 2023; the Spike-driven
 * Transformer's SDSA, Yao et al. 2023; LayerNorm): shapes and contracts, entries of the op table (core/backend_ops.h);
 * the CPU's (cpu/layernorm.c, attention.c, token_ops.c) are the reference. Tokens [T, B, n, d] are a channels-last
 * tensor to the engine (c = d, h·w = n) of the act type. q, k, v (and the SDSA's m) are 0/1, so the forward products
 * are integer sums, exact with fp32 accumulation below 2^24; each backend says what it gives exactly. */
#ifndef SF_CORE_TRANSFORMER_H
#define SF_CORE_TRANSFORMER_H

#include "spikefuse.h"

#include <stdint.h>

/* tb sets of n tokens of d channels. Token tensors with a row stride take it as an ld argument (>= d): d for a tensor
 * of its own, 3·d where q, k, v are column blocks of one fused [rows, 3·d] tensor (one linear → BN → LIF of 3·d). */
typedef struct sf_token_shape {
    int64_t tb; /* T·B */
    int32_t n;  /* tokens per set */
    int32_t d;  /* channels per token */
} sf_token_shape;

/* The op table's entries (backend.h's style: sf_cpu_op_<entry>, sf_cuda_op_<entry>). LayerNorm over the d channels of
 * each of `rows` rows: layernorm_forward y = (x − mean)·rstd·γ + β, saving the row's mean and rstd = 1/sqrt(var + eps)
 * (biased var) as float [rows]; gamma, beta (float [d]) may be NULL (γ = 1, β = 0). layernorm_backward dx = rstd·(g −
 * mean_c(g) − x̂·mean_c(g·x̂)), g = dy·γ, dx may be dy; dgamma = Σ_rows dy·x̂, dbeta = Σ_rows dy (float [d]; NULL when
 * gamma is), deterministic (fixed row partition). layernorm_workspace: bytes of ws (0: ws may be NULL). */

/* SSA without softmax per set and head h (dh = d / heads; Q_h, K_h, V_h the [n, dh] column blocks h·dh.. of q, k, v,
 * rows ld apart): ssa_forward Y_h = scale·Q_h·(K_hᵀ·V_h), y dense [tb, n, d], forming the dh×dh counts (<= n), never
 * the n×n Q_h·K_hᵀ. ssa_backward recomputes M_h = K_hᵀ·V_h, then with G_h = scale·Q_hᵀ·dY_h: dQ_h = scale·dY_h·M_hᵀ,
 * dK_h = V_h·G_hᵀ, dV_h = K_h·G_h; dq, dk, dv rows ld apart, none overlapping q, k, v or dy. ssa_workspace: ws bytes
 * of the forward (backward false) or the backward. */

/* Per-channel token products (a, b, out rows lda, ldb, ldo apart where token tensors; b NULL: 1): token_sum out[tb, c]
 * = alpha·Σ_n a[tb, n, c]·b[tb, n, c], out dense [tb, d], tokens summed in order; token_scale out[tb, n, c] =
 * alpha·g[tb, c]·b[tb, n, c], g dense [tb, d], out may be b. The SDSA from them: docs/architecture.md, transformers. */

/* Shape checks the backends share (SF_ERR_INVALID naming the op and the field; `op` names the op in messages):
 * tb >= 0, n and d >= 1, each ld >= d and within BLAS's int; the SSA's heads >= 1 dividing d. */
sf_status sf_token_shape_check(const char *op, const sf_token_shape *sh);
sf_status sf_token_ld_check(const char *op, const char *name, int64_t ld, int32_t d);
sf_status sf_ssa_check(const char *op, const sf_token_shape *sh, int32_t heads, int64_t ld);
sf_status sf_layernorm_check(const char *op, int64_t rows, int32_t d);

#endif
