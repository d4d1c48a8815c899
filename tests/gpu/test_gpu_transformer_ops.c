/* test_gpu_transformer_ops.c — the CUDA ops of the spiking transformers (core/transformer.h) against the CPU's, the
 * reference, on random inputs of awkward sizes, under the precisions fp32, tf32, bf16 and fp16: one table of cases,
 * one runner. Every input is drawn on the host, stored on the GPU in its activation type and read back, so the CPU
 * computes on exactly the values the GPU holds; every output starts as NaN on both sides, so an element left
 * unwritten fails.
 *
 * Bounds (relative L2 error of the GPU's result against the CPU's, rounded to the GPU's storage type; 0: bitwise):
 *   0: the SSA forward on 0/1 q, k, v with a power-of-two scale, in every precision (the exact count times the
 *      scale, rounded once: FP32 FMA GEMMs under fp32 and tf32, 16-bit tensor cores with M in the 16-bit type while
 *      n <= 256 (bf16), 2048 (fp16) and in two 16-bit parts past that, which the cases reach); Σ_n k·v, q·m and every
 *      token product with a 0/1 or broadcast factor; the column of a fused q|k|v gradient tensor past its three
 *      blocks stays NaN;
 *   1e-6: the SSA forward with another scale in fp32, LayerNorm's mean and rstd, Σ_n of real values in fp32 (float
 *      sums against the CPU's double);
 *   1e-5: LayerNorm's y, dx, dγ, dβ in fp32, and its dγ, dβ (float sums) in every precision; the SSA's gradients in
 *      fp32; 5e-3 under tf32 (the backward's products on TF32 operands);
 *   16-bit outputs (LayerNorm's y and dx, Σ_n of real values, the SSA's y with another scale): 1e-2 bf16, 2e-3 fp16,
 *      a few roundings of the type; the SSA's gradients twice that (G = scale·Qᵀ·dY is stored in the 16-bit type
 *      between its products).
 * The worst 16-bit error seen is printed. Run by tests/gpu.sh. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_transformer.h"
#include "cuda/cuda_backend.h"
#include "testutil.h"

#include "core/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sf_backend *cpu, *gpu;
static sf_scalar act;     /* the GPU's storage type */
static const char *prec;    /* its precision's name */
static double tol16;        /* the bound of a 16-bit output (1e-5 where outputs are float) */
static double tol_ssa_grad; /* the SSA's gradients: 1e-5 fp32, 5e-3 tf32, twice tol16 in 16 bits */
static double worst;        /* the largest 16-bit error seen */

/* ---------------------------------------------------------------- tensors on both sides */

/* n values: float on the CPU, the act type (or float where wide) on the GPU. */
typedef struct {
    int64_t n;
    bool wide;
    float *c;
    void *g;
} ten;

static size_t gbytes(const ten *t) { return (size_t)(t->n > 0 ? t->n : 1) * (t->wide ? 4 : sf_scalar_size(act)); }

static void *gpu_alloc(size_t bytes)
{
    void *p = NULL;
    CHECK_OK(gpu->alloc(gpu, bytes ? bytes : 4, &p));
    return p;
}

/* The GPU side as host floats (malloc'd). */
static float *fetch(const ten *t)
{
    float *h = malloc((size_t)(t->n + 1) * sizeof *h);
    if (t->wide || act == SF_SCALAR_F32) {
        CHECK_OK(gpu->copy_to_host(gpu, h, t->g, 4 * (size_t)t->n));
        return h;
    }
    float *tmp = gpu_alloc(4 * (size_t)t->n);
    CHECK_OK(gpu->convert(gpu, t->n, act, t->g, SF_SCALAR_F32, tmp));
    CHECK_OK(gpu->copy_to_host(gpu, h, tmp, 4 * (size_t)t->n));
    gpu->release(gpu, tmp);
    return h;
}

/* Host floats into the GPU side (rounded to its type), and the CPU side made the values the GPU holds. */
static void put(ten *t, const float *h)
{
    if (t->wide || act == SF_SCALAR_F32) {
        CHECK_OK(gpu->copy_from_host(gpu, t->g, h, 4 * (size_t)t->n));
    } else {
        float *tmp = gpu_alloc(4 * (size_t)t->n);
        CHECK_OK(gpu->copy_from_host(gpu, tmp, h, 4 * (size_t)t->n));
        CHECK_OK(gpu->convert(gpu, t->n, SF_SCALAR_F32, tmp, act, t->g));
        gpu->release(gpu, tmp);
    }
    float *held = fetch(t);
    memcpy(t->c, held, 4 * (size_t)t->n);
    free(held);
}

/* An output: NaN on both sides (0xff bytes are NaN in float, bf16 and fp16). */
static ten out_of(int64_t n, bool wide)
{
    ten t = {n, wide, malloc((size_t)(n + 1) * 4), NULL};
    t.g = gpu_alloc(gbytes(&t));
    memset(t.c, 0xff, 4 * (size_t)n);
    void *nan = malloc(gbytes(&t));
    memset(nan, 0xff, gbytes(&t));
    CHECK_OK(gpu->copy_from_host(gpu, t.g, nan, gbytes(&t)));
    free(nan);
    return t;
}
static ten out(int64_t n) { return out_of(n, false); }
static ten out_f32(int64_t n) { return out_of(n, true); }

static ten randn_of(int64_t n, float mean, float std, uint64_t seed, bool wide)
{
    ten t = out_of(n, wide);
    float *h = malloc((size_t)(n + 1) * 4);
    tu_randn(h, n, mean, std, seed);
    put(&t, h);
    free(h);
    return t;
}
static ten randn(int64_t n, float mean, float std, uint64_t seed) { return randn_of(n, mean, std, seed, false); }

static ten spikes(int64_t n, float rate, uint64_t seed)
{
    ten t = out(n);
    float *h = malloc((size_t)(n + 1) * 4);
    for (int64_t i = 0; i < n; i++) h[i] = sf_uniform(seed, 9, (uint64_t)i) < rate ? 1.0f : 0.0f;
    put(&t, h);
    free(h);
    return t;
}

/* A view of ten t from element `at` on (a column block of a fused tensor): the same memory on both sides. */
static float *cpu_at(const ten *t, int64_t at) { return t->c + at; }
static float *gpu_at(const ten *t, int64_t at)
{
    return (float *)((char *)t->g + (size_t)at * (t->wide ? 4 : sf_scalar_size(act)));
}

static void drop(ten *t)
{
    free(t->c);
    gpu->release(gpu, t->g);
}

/* The CPU's result rounded to the GPU's type (host floats): what an exact GPU result is. */
static float *cpu_rounded(const ten *t)
{
    ten r = out_of(t->n, t->wide);
    put(&r, t->c);
    float *h = malloc((size_t)(t->n + 1) * 4);
    memcpy(h, r.c, 4 * (size_t)t->n);
    drop(&r);
    return h;
}

/* GPU against CPU over the elements i with i mod ld < cols (the blocks of a fused tensor's rows; ld = cols = 1:
 * all): relative L2 error within tol (0: bitwise equal, NaN for NaN); a 16-bit bound (tol >= tol16 under bf16 or
 * fp16) records the worst error. */
static void cmp_cols(const char *what, const char *name, const ten *t, int64_t ld, int64_t cols, double tol)
{
    float *g = fetch(t), *c = cpu_rounded(t);
    int64_t m = 0, bad = 0;
    for (int64_t i = 0; i < t->n; i++)
        if (i % ld < cols) {
            bad += memcmp(&g[i], &c[i], 4) != 0 && !(isnan(g[i]) && isnan(c[i]));
            g[m] = g[i], c[m] = c[i], m++;
        }
    if (tol == 0.0) {
        CHECK(bad == 0, "%s: %s: %lld of %lld elements differ", what, name, (long long)bad, (long long)m);
    } else {
        const double e = tu_rel_err_f32(g, c, m);
        CHECK(e <= tol, "%s: %s: relative error %.3e > %.0e", what, name, e, tol);
        if (act != SF_SCALAR_F32 && tol >= tol16 && e > worst) worst = e;
    }
    free(g), free(c);
}
static void cmp(const char *what, const char *name, const ten *t, double tol) { cmp_cols(what, name, t, 1, 1, tol); }

/* ---------------------------------------------------------------- the cases */

typedef enum { OP_LAYERNORM, OP_SSA, OP_TOKENS } op_kind;

typedef struct {
    op_kind op;
    int64_t tb;    /* LayerNorm: rows */
    int32_t n, d;  /* LayerNorm: n unused */
    int32_t heads; /* SSA */
    float scale;   /* SSA */
    float rate;    /* spike density of q, k, v, m */
    bool fused;    /* q, k, v the column blocks of one [rows, 3·d + 1] tensor (and their gradients) */
} tcase;

static const tcase cases[] = {
    /* LayerNorm: one row of one channel, odd sizes, Spikformer's width, wider than a warp's 32 lanes many times,
     * more rows than the grid (grid-stride loop, several partial sums per channel) */
    {OP_LAYERNORM, 1, 0, 1, 0, 0, 0, false},
    {OP_LAYERNORM, 37, 0, 33, 0, 0, 0, false},
    {OP_LAYERNORM, 300, 0, 384, 0, 0, 0, false},
    {OP_LAYERNORM, 5, 0, 1000, 0, 0, 0, false},
    {OP_LAYERNORM, 70001, 0, 8, 0, 0, 0, false},
    /* SSA: a fixture-sized block, one token of one channel, odd sizes with 5 heads, W10's sets (196 tokens, 12
     * heads of 32), counts past bf16's integers (the split M under bf16), past fp16's (split under both), one head
     * with a scale that is no power of two, fused q|k|v, dense spikes */
    {OP_SSA, 6, 5, 12, 2, 0.125f, 0.4f, false},
    {OP_SSA, 1, 1, 1, 1, 0.125f, 1.0f, false},
    {OP_SSA, 3, 17, 15, 5, 0.125f, 0.5f, false},
    {OP_SSA, 2, 196, 384, 12, 0.125f, 0.3f, true},
    {OP_SSA, 2, 300, 8, 2, 0.125f, 0.95f, false},
    {OP_SSA, 1, 2500, 16, 2, 0.125f, 0.97f, true},
    {OP_SSA, 2, 9, 8, 1, 0.3f, 0.5f, false},
    {OP_SSA, 4, 64, 96, 3, 0.125f, 0.9f, true},
    /* token sums and scales (SDSA, token mean): a block's, one of one, odd sizes fused, counts past 2048, more sets
     * than a grid's 65535 rows of blocks */
    {OP_TOKENS, 6, 5, 12, 0, 0, 0.5f, false},
    {OP_TOKENS, 1, 1, 1, 0, 0, 1.0f, false},
    {OP_TOKENS, 3, 7, 9, 0, 0, 0.5f, true},
    {OP_TOKENS, 2, 2500, 7, 0, 0, 0.95f, false},
    {OP_TOKENS, 70001, 2, 3, 0, 0, 0.5f, true},
};

static void describe(const tcase *k, char *buf, size_t cap)
{
    static const char *names[] = {"layernorm", "ssa", "tokens"};
    snprintf(buf, cap, "%s %s tb=%lld n=%d d=%d heads=%d scale=%g%s", prec, names[k->op], (long long)k->tb, k->n,
             k->d, k->heads, k->scale, k->fused ? " fused" : "");
}

static void run_layernorm(const tcase *k, const char *what, uint64_t seed)
{
    const int64_t rows = k->tb, n = rows * k->d;
    const int32_t d = k->d;
    ten x = randn(n, 0.5f, 2.0f, seed), dy = randn(n, 0.0f, 1.0f, seed + 1);
    ten gamma = randn_of(d, 1.0f, 0.2f, seed + 2, true), beta = randn_of(d, 0.1f, 0.2f, seed + 3, true);
    ten y = out(n), mean = out_f32(rows), rstd = out_f32(rows), dx = out(n), dg = out_f32(d), db = out_f32(d);
    CHECK_OK(sf_cpu_op_layernorm_forward(cpu, rows, d, 1e-5f, x.c, gamma.c, beta.c, y.c, mean.c, rstd.c));
    CHECK_OK(gpu->layernorm_forward(gpu, rows, d, 1e-5f, x.g, gamma.g, beta.g, y.g, mean.g, rstd.g));
    cmp(what, "y", &y, act == SF_SCALAR_F32 ? 1e-5 : tol16);
    cmp(what, "mean", &mean, 1e-6);
    cmp(what, "rstd", &rstd, 1e-6);
    /* the backward from the CPU's statistics on both sides */
    put(&mean, mean.c);
    put(&rstd, rstd.c);
    const size_t wsb = gpu->layernorm_workspace(gpu, rows, d);
    void *ws = gpu_alloc(wsb);
    CHECK_OK(sf_cpu_op_layernorm_backward(cpu, rows, d, x.c, mean.c, rstd.c, gamma.c, dy.c, dx.c, dg.c, db.c, NULL));
    CHECK_OK(gpu->layernorm_backward(gpu, rows, d, x.g, mean.g, rstd.g, gamma.g, dy.g, dx.g, dg.g, db.g, ws));
    cmp(what, "dx", &dx, act == SF_SCALAR_F32 ? 1e-5 : tol16);
    cmp(what, "dgamma", &dg, 1e-5);
    cmp(what, "dbeta", &db, 1e-5);
    gpu->release(gpu, ws);
    drop(&x), drop(&dy), drop(&gamma), drop(&beta), drop(&y), drop(&mean), drop(&rstd), drop(&dx), drop(&dg);
    drop(&db);
}

/* q, k, v (and dq, dk, dv) as three tensors, or as the blocks of one fused tensor t[0] (rows ld apart) starting at
 * elements at[b] */
typedef struct {
    bool fused;
    ten t[3];
    int64_t ld, at[3];
} qkv;

/* spikes (input) or NaN outputs in the case's layout */
static qkv qkv_of(const tcase *k, bool input, uint64_t seed)
{
    const int64_t rows = k->tb * k->n;
    qkv s = {.fused = k->fused, .ld = k->fused ? 3 * (int64_t)k->d + 1 : k->d};
    for (int b = 0; b < (k->fused ? 1 : 3); b++)
        s.t[b] = input ? spikes(rows * s.ld, k->rate, seed + (uint64_t)b) : out(rows * s.ld);
    for (int b = 0; k->fused && b < 3; b++) s.at[b] = (int64_t)b * k->d;
    return s;
}

static const ten *qkv_ten(const qkv *s, int b) { return s->fused ? &s->t[0] : &s->t[b]; }
static float *qkv_c(const qkv *s, int b) { return cpu_at(qkv_ten(s, b), s->at[b]); }
static float *qkv_g(const qkv *s, int b) { return gpu_at(qkv_ten(s, b), s->at[b]); }

static void qkv_drop(qkv *s)
{
    for (int b = 0; b < (s->fused ? 1 : 3); b++) drop(&s->t[b]);
}

static void run_ssa(const tcase *k, const char *what, uint64_t seed)
{
    const sf_token_shape sh = {k->tb, k->n, k->d};
    const int64_t n = sh.tb * sh.n * sh.d;
    qkv in = qkv_of(k, true, seed), grad = qkv_of(k, false, 0);
    ten dy = randn(n, 0.0f, 1.0f, seed + 5), y = out(n);
    const int32_t h = k->heads;
    const size_t cf = sf_cpu_op_ssa_workspace(cpu, &sh, h, false), cb = sf_cpu_op_ssa_workspace(cpu, &sh, h, true);
    const size_t gf = gpu->ssa_workspace(gpu, &sh, h, false), gb = gpu->ssa_workspace(gpu, &sh, h, true);
    void *wcf = malloc(cf), *wcb = malloc(cb), *wgf = gpu_alloc(gf), *wgb = gpu_alloc(gb);
    CHECK_OK(sf_cpu_op_ssa_forward(cpu, &sh, h, k->scale, in.ld, qkv_c(&in, 0), qkv_c(&in, 1), qkv_c(&in, 2), y.c,
                                   wcf));
    CHECK_OK(gpu->ssa_forward(gpu, &sh, h, k->scale, in.ld, qkv_g(&in, 0), qkv_g(&in, 1), qkv_g(&in, 2), y.g,
                                    wgf));
    const bool pow2 = frexpf(k->scale, &(int){0}) == 0.5f;
    cmp(what, "y", &y, pow2 ? 0.0 : act == SF_SCALAR_F32 ? 1e-6 : tol16);
    CHECK_OK(sf_cpu_op_ssa_backward(cpu, &sh, h, k->scale, in.ld, qkv_c(&in, 0), qkv_c(&in, 1), qkv_c(&in, 2), dy.c,
                                    qkv_c(&grad, 0), qkv_c(&grad, 1), qkv_c(&grad, 2), wcb));
    CHECK_OK(gpu->ssa_backward(gpu, &sh, h, k->scale, in.ld, qkv_g(&in, 0), qkv_g(&in, 1), qkv_g(&in, 2), dy.g,
                                     qkv_g(&grad, 0), qkv_g(&grad, 1), qkv_g(&grad, 2), wgb));
    const double tg = tol_ssa_grad;
    if (k->fused) { /* dq|dk|dv in one tensor: its three blocks, and the NaN column past them must stay NaN */
        cmp_cols(what, "dq|dk|dv", &grad.t[0], grad.ld, 3 * (int64_t)k->d, tg);
        float *g = fetch(&grad.t[0]);
        int64_t touched = 0;
        for (int64_t r = 0; r < sh.tb * sh.n; r++) touched += !isnan(g[r * grad.ld + grad.ld - 1]);
        CHECK(touched == 0, "%s: %lld elements past the fused blocks written", what, (long long)touched);
        free(g);
    } else {
        cmp(what, "dq", &grad.t[0], tg);
        cmp(what, "dk", &grad.t[1], tg);
        cmp(what, "dv", &grad.t[2], tg);
    }
    free(wcf), free(wcb), gpu->release(gpu, wgf), gpu->release(gpu, wgb);
    qkv_drop(&in), qkv_drop(&grad), drop(&dy), drop(&y);
}

static void run_tokens(const tcase *k, const char *what, uint64_t seed)
{
    const sf_token_shape sh = {k->tb, k->n, k->d};
    const int64_t n = sh.tb * sh.n * sh.d, r = sh.tb * sh.d;
    const int32_t d = sh.d;
    qkv in = qkv_of(k, true, seed), grad = qkv_of(k, false, 0);
    ten m = spikes(r, k->rate, seed + 3), x = randn(n, 0.0f, 1.0f, seed + 4), dy = randn(n, 0.0f, 1.0f, seed + 5);
    ten dkv = randn(r, 0.0f, 1.0f, seed + 6), dmean = randn(r, 0.0f, 1.0f, seed + 7);
    ten kv = out(r), y = out(n), dm = out(r), mean = out(r), dx = out(n);
    const int64_t ld = in.ld;
    const float inv_n = 1.0f / (float)sh.n;
    /* kv = Σ_n k·v; y = q·m; dq = m·dy, dm = Σ_n dy·q; dk = dkv·v, dv = dkv·k; a mean and its gradient */
    for (int g = 0; g < 2; g++) {
        sf_backend *be = g ? gpu : cpu;
        float *q = g ? qkv_g(&in, 0) : qkv_c(&in, 0), *kk = g ? qkv_g(&in, 1) : qkv_c(&in, 1);
        float *v = g ? qkv_g(&in, 2) : qkv_c(&in, 2), *dq = g ? qkv_g(&grad, 0) : qkv_c(&grad, 0);
        float *dk = g ? qkv_g(&grad, 1) : qkv_c(&grad, 1), *dv = g ? qkv_g(&grad, 2) : qkv_c(&grad, 2);
#define S(t) (g ? (float *)(t).g : (t).c)
        sf_status (*sum)(sf_backend *, const sf_token_shape *, float, const float *, int64_t, const float *, int64_t,
                         float *) = be->token_sum;
        sf_status (*scale)(sf_backend *, const sf_token_shape *, float, const float *, const float *, int64_t, float *,
                           int64_t) = be->token_scale;
        CHECK_OK(sum(be, &sh, 1.0f, kk, ld, v, ld, S(kv)));
        CHECK_OK(scale(be, &sh, 1.0f, S(m), q, ld, S(y), d));
        CHECK_OK(scale(be, &sh, 1.0f, S(m), S(dy), d, dq, ld));
        CHECK_OK(sum(be, &sh, 1.0f, S(dy), d, q, ld, S(dm)));
        CHECK_OK(scale(be, &sh, 1.0f, S(dkv), v, ld, dk, ld));
        CHECK_OK(scale(be, &sh, 1.0f, S(dkv), kk, ld, dv, ld));
        CHECK_OK(sum(be, &sh, inv_n, S(x), d, NULL, 0, S(mean)));
        CHECK_OK(scale(be, &sh, inv_n, S(dmean), NULL, 0, S(dx), d));
#undef S
    }
    cmp(what, "kv", &kv, 0.0);
    cmp(what, "y", &y, 0.0);
    cmp(what, "dm", &dm, act == SF_SCALAR_F32 ? 1e-6 : tol16);
    cmp(what, "mean", &mean, act == SF_SCALAR_F32 ? 1e-6 : tol16);
    cmp(what, "dx", &dx, 0.0);
    if (k->fused) {
        cmp(what, "dq|dk|dv", &grad.t[0], 0.0);
    } else {
        cmp(what, "dq", &grad.t[0], 0.0);
        cmp(what, "dk", &grad.t[1], 0.0);
        cmp(what, "dv", &grad.t[2], 0.0);
    }
    qkv_drop(&in), qkv_drop(&grad);
    drop(&m), drop(&x), drop(&dy), drop(&dkv), drop(&dmean), drop(&kv), drop(&y), drop(&dm), drop(&mean), drop(&dx);
}

/* The one runner: a case under the current GPU backend. */
static void run_case(const tcase *k, uint64_t seed)
{
    char what[160];
    describe(k, what, sizeof what);
    switch (k->op) {
    case OP_LAYERNORM: run_layernorm(k, what, seed); break;
    case OP_SSA: run_ssa(k, what, seed); break;
    case OP_TOKENS: run_tokens(k, what, seed); break;
    }
}

int main(void)
{
    if (sf_cuda_count_devices() < 1) {
        fprintf(stderr, "test_gpu_transformer_ops: no CUDA device\n");
        return 1;
    }
    CHECK_OK(sf_cpu_backend_create(&cpu));
    /* precision, the 16-bit outputs' bound, the SSA gradients' (tf32: the backward's products are TF32's, the
     * forward stays FP32 FMA and exact) */
    static const struct {
        sf_precision p;
        double tol16, ssa_grad;
    } precs[] = {{SF_PRECISION_FP32, 1e-5, 1e-5},
                 {SF_PRECISION_TF32, 1e-5, 5e-3},
                 {SF_PRECISION_BF16, 1e-2, 2e-2},
                 {SF_PRECISION_FP16, 2e-3, 4e-3}};
    for (size_t p = 0; p < sizeof precs / sizeof precs[0]; p++) {
        CHECK_OK(sf_cuda_backend_create(0, precs[p].p, NULL, &gpu));
        if (!gpu) break;
        act = gpu->act;
        prec = sf_precision_name(precs[p].p);
        tol16 = precs[p].tol16;
        tol_ssa_grad = precs[p].ssa_grad;
        worst = 0.0;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], 1000 * (uint64_t)(i + 1));
        if (act != SF_SCALAR_F32) printf("%s: worst 16-bit error %.3e (bound %.0e)\n", prec, worst, tol16);
        sf_backend_free(gpu);
        gpu = NULL;
    }
    sf_backend_free(cpu);
    return tu_finish("test_gpu_transformer_ops");
}
