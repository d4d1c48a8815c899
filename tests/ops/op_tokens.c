/* op_tokens.c — the op harness's families of the spiking transformers' ops (core/transformer.h): LayerNorm, the
 * SSA product, the per-channel token products and the stem's transpose. Rows: tb sets (c->B) of c->n tokens of
 * c->C channels (LayerNorm: c->rows rows of c->C); q, k, v are the column blocks of one fused q|k|v tensor, rows 3·C
 * apart, as the ssa and sdsa layers read them. No plain formulation: the CPU runner runs each op on both sides. */
#include "op_harness.h"

#include "core/rng.h"

#include <stdlib.h>

/* Side s's pointer n elements into an act tensor (the reference side is fp32, the tested one its act type). */
static float *at(const op_harness *h, int s, const op_ten *t, int64_t n)
{
    const size_t es = s == 0 ? sizeof(float) : sf_scalar_size(h->act);
    return (float *)((char *)t->p[s] + (size_t)n * es);
}

/* tb·n·width values of 0/1, each 1 with the case's density (0.3 unless it sets one). */
static op_ten spikes(op_harness *h, const op_case *c, int64_t width, uint64_t seed)
{
    const int64_t n = c->B * c->n * width;
    const double p = c->density > 0 ? c->density : 0.3;
    float *v = malloc(sizeof *v * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) v[i] = sf_uniform(seed, 0, (uint64_t)i) < p ? 1.0f : 0.0f;
    op_ten t = op_in(h, OP_ACTV, (size_t)n, v);
    free(v);
    return t;
}

/* layernorm_forward and _backward (variant 1: no affine γ, β) over c->rows rows of c->C, mean 0.3. Bounds: y, dx
 * 1e-5 (16 bits: the output bound); mean, rstd 1e-6; dγ, dβ 1e-5 (float sums) in every precision. */
static void run_layernorm(op_harness *h, const op_case *c, int v)
{
    const int64_t rows = c->rows;
    const int32_t d = c->C;
    const bool affine = v == 0;
    snprintf(h->what, sizeof h->what, "layernorm rows=%lld d=%d%s", (long long)rows, d, affine ? "" : " no affine");
    const size_t m = (size_t)(rows * d);
    op_ten x = op_randn(h, OP_ACTV, m, 0.3f, 1.0f, 71), dy = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 72);
    op_ten g = op_randn(h, OP_F32, (size_t)d, 1.0f, 0.2f, 73), b = op_randn(h, OP_F32, (size_t)d, 0.0f, 0.2f, 74);
    op_ten y = op_out(h, OP_ACTV, m), dx = op_out(h, OP_ACTV, m), mean = op_out(h, OP_F32, (size_t)rows);
    op_ten rstd = op_out(h, OP_F32, (size_t)rows), dg = op_out(h, OP_F32, (size_t)d), db = op_out(h, OP_F32, (size_t)d);
    OP_SIDES(s)
    {
        op_ws ws = op_ws_alloc(h, s, OPV(h, s, layernorm_workspace, rows, d));
        OP(h, s, layernorm_forward, rows, d, 1e-5f, OP_P(x, s), affine ? OP_P(g, s) : NULL, affine ? OP_P(b, s) : NULL,
           OP_P(y, s), OP_P(mean, s), OP_P(rstd, s));
        OP(h, s, layernorm_backward, rows, d, OP_P(x, s), OP_P(mean, s), OP_P(rstd, s), affine ? OP_P(g, s) : NULL,
           OP_P(dy, s), OP_P(dx, s), affine ? OP_P(dg, s) : NULL, affine ? OP_P(db, s) : NULL, ws.p);
        op_ws_free(h, s, &ws, "layernorm backward");
    }
    op_cmp(h, "y", &y, OP_TOL_ACT(1e-5));
    op_cmp(h, "mean", &mean, OP_TOL_F32(1e-6));
    op_cmp(h, "rstd", &rstd, OP_TOL_F32(1e-6));
    op_cmp(h, "dx", &dx, OP_TOL_ACT(1e-5));
    if (affine) op_cmp(h, "dgamma", &dg, OP_TOL_F32(1e-5)), op_cmp(h, "dbeta", &db, OP_TOL_F32(1e-5));
    op_free(h, &x), op_free(h, &dy), op_free(h, &g), op_free(h, &b), op_free(h, &y), op_free(h, &dx);
    op_free(h, &mean), op_free(h, &rstd), op_free(h, &dg), op_free(h, &db);
}

OP_FAMILY(op_layernorm, "layernorm", run_layernorm, SF_BACKEND_OP_layernorm_forward, SF_BACKEND_OP_layernorm_backward,
          SF_BACKEND_OP_layernorm_workspace);

/* ssa_forward and _backward with c->k heads and scale 0.125 (variant 1: 0.3) on a fused q|k|v of spikes, dq|dk|dv
 * into one tensor of the same strides. Bounds: y exact in fp32 and tf32 with the power-of-two scale (counts times
 * 2^-3), 1e-6 with the other; the 16-bit output bound; the gradients 1e-5, 5e-3 under tf32, twice the output bound
 * in 16 bits (G = scale·Qᵀ·dY is stored in the act type between its products). */
static void run_ssa(op_harness *h, const op_case *c, int v)
{
    const sf_token_shape sh = {c->B, (int32_t)c->n, c->C};
    const int32_t heads = c->k, d = c->C;
    const float scale = v == 0 ? 0.125f : 0.3f;
    snprintf(h->what, sizeof h->what, "ssa tb=%lld n=%d d=%d heads=%d scale=%g", (long long)sh.tb, sh.n, d, heads,
             (double)scale);
    const size_t m = (size_t)(sh.tb * sh.n * d);
    op_ten qkv = spikes(h, c, 3 * d, 81), dy = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 82);
    op_ten y = op_out(h, OP_ACTV, m), dqkv = op_out(h, OP_ACTV, 3 * m);
    OP_SIDES(s)
    {
        op_ws f = op_ws_alloc(h, s, OPV(h, s, ssa_workspace, &sh, heads, false));
        op_ws b = op_ws_alloc(h, s, OPV(h, s, ssa_workspace, &sh, heads, true));
        OP(h, s, ssa_forward, &sh, heads, scale, 3 * d, at(h, s, &qkv, 0), at(h, s, &qkv, d), at(h, s, &qkv, 2 * d),
           OP_P(y, s), f.p);
        OP(h, s, ssa_backward, &sh, heads, scale, 3 * d, at(h, s, &qkv, 0), at(h, s, &qkv, d), at(h, s, &qkv, 2 * d),
           OP_P(dy, s), at(h, s, &dqkv, 0), at(h, s, &dqkv, d), at(h, s, &dqkv, 2 * d), b.p);
        op_ws_free(h, s, &f, "ssa forward");
        op_ws_free(h, s, &b, "ssa backward");
    }
    op_cmp(h, "y", &y, OP_TOL_ACT(v == 0 ? 0.0 : 1e-6));
    op_cmp(h, "dq|dk|dv", &dqkv, (op_tol){0.0, 1e-5, 5e-3, 2 * OP_BF16_ACT, 2 * OP_FP16_ACT});
    op_free(h, &qkv), op_free(h, &dy), op_free(h, &y), op_free(h, &dqkv);
}

OP_FAMILY(op_ssa, "ssa", run_ssa, SF_BACKEND_OP_ssa_forward, SF_BACKEND_OP_ssa_backward, SF_BACKEND_OP_ssa_workspace);

/* The SDSA's products on a fused q|k|v of spikes (kv = Σ_n k·v, y = q·m, dq = m·dy, dm = Σ_n dy·q, dk = dkv·v,
 * dv = dkv·k, into a fused dq|dk|dv) and a mean over tokens of real values with its gradient. Bounds: every product
 * with a 0/1 factor exact (its count or a copy, rounded once); Σ_n of real values 1e-6 (float sums against the CPU's
 * double); the 16-bit output bound. */
static void run_token(op_harness *h, const op_case *c, int v)
{
    const sf_token_shape sh = {c->B, (int32_t)c->n, c->C};
    const int32_t d = c->C;
    const int64_t ld = 3 * d;
    snprintf(h->what, sizeof h->what, "token products tb=%lld n=%d d=%d", (long long)sh.tb, sh.n, d);
    const size_t m = (size_t)(sh.tb * sh.n * d), r = (size_t)(sh.tb * d);
    const op_case sets = {.B = c->B, .n = 1, .density = 0.5};
    op_ten qkv = spikes(h, c, ld, 91), mask = spikes(h, &sets, d, 92), dy = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 93);
    op_ten dkv = op_randn(h, OP_ACTV, r, 0.0f, 1.0f, 94), x = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 95);
    op_ten dmean = op_randn(h, OP_ACTV, r, 0.0f, 1.0f, 96);
    op_ten kv = op_out(h, OP_ACTV, r), y = op_out(h, OP_ACTV, m), dm = op_out(h, OP_ACTV, r);
    op_ten dqkv = op_out(h, OP_ACTV, 3 * m), mean = op_out(h, OP_ACTV, r), dx = op_out(h, OP_ACTV, m);
    const float inv_n = 1.0f / (float)sh.n;
    OP_SIDES(s)
    {
        float *q = at(h, s, &qkv, 0), *k = at(h, s, &qkv, d), *vv = at(h, s, &qkv, 2 * d);
        OP(h, s, token_sum, &sh, 1.0f, k, ld, vv, ld, OP_P(kv, s));
        OP(h, s, token_scale, &sh, 1.0f, OP_P(mask, s), q, ld, OP_P(y, s), d);
        OP(h, s, token_scale, &sh, 1.0f, OP_P(mask, s), OP_P(dy, s), d, at(h, s, &dqkv, 0), ld);
        OP(h, s, token_sum, &sh, 1.0f, OP_P(dy, s), d, q, ld, OP_P(dm, s));
        OP(h, s, token_scale, &sh, 1.0f, OP_P(dkv, s), vv, ld, at(h, s, &dqkv, d), ld);
        OP(h, s, token_scale, &sh, 1.0f, OP_P(dkv, s), k, ld, at(h, s, &dqkv, 2 * d), ld);
        OP(h, s, token_sum, &sh, inv_n, OP_P(x, s), d, NULL, 0, OP_P(mean, s));
        OP(h, s, token_scale, &sh, inv_n, OP_P(dmean, s), NULL, 0, OP_P(dx, s), d);
    }
    op_cmp(h, "kv", &kv, OP_TOL_EXACT);
    op_cmp(h, "q·m", &y, OP_TOL_EXACT);
    op_cmp(h, "dm", &dm, OP_TOL_ACT(1e-6));
    op_cmp(h, "dq|dk|dv", &dqkv, OP_TOL_EXACT);
    op_cmp(h, "mean", &mean, OP_TOL_ACT(1e-6));
    op_cmp(h, "dmean", &dx, OP_TOL_ACT(1e-6));
    op_free(h, &qkv), op_free(h, &mask), op_free(h, &dy), op_free(h, &dkv), op_free(h, &x), op_free(h, &dmean);
    op_free(h, &kv), op_free(h, &y), op_free(h, &dm), op_free(h, &dqkv), op_free(h, &mean), op_free(h, &dx);
}

OP_FAMILY(op_token, "token products", run_token, SF_BACKEND_OP_token_sum, SF_BACKEND_OP_token_scale);

/* transpose of c->B matrices of c->C × c->n (planes to tokens) and back. Exact: a copy. */
static void run_transpose(op_harness *h, const op_case *c, int v)
{
    snprintf(h->what, sizeof h->what, "transpose %lld x %d x %lld", (long long)c->B, c->C, (long long)c->n);
    const size_t m = (size_t)(c->B * c->C * c->n);
    op_ten x = op_randn(h, OP_ACTV, m, 0.0f, 1.0f, 99), y = op_out(h, OP_ACTV, m), back = op_out(h, OP_ACTV, m);
    OP_SIDES(s)
    {
        OP(h, s, transpose, c->B, c->C, c->n, OP_P(x, s), OP_P(y, s));
        OP(h, s, transpose, c->B, c->n, c->C, OP_P(y, s), OP_P(back, s));
    }
    op_cmp(h, "tokens", &y, OP_TOL_EXACT);
    op_cmp(h, "planes", &back, OP_TOL_EXACT);
    op_same(h, 1, "planes back", &x, &back);
    op_free(h, &x), op_free(h, &y), op_free(h, &back);
}

OP_FAMILY(op_transpose, "transpose", run_transpose, SF_BACKEND_OP_transpose);
