/* test_transformer_ops.c — the CPU ops of the spiking transformers (core/transformer.h) against PyTorch float64
 * (tests/ref/gen_transformer.py's transformer_ops), and the exactness the engine relies on.
 *
 * Tolerances (relative L2, float32 against float64): LayerNorm y, mean, rstd and gradients 1e-5; the SSA's gradients
 * 1e-5; token sums of real values 1e-6. Bitwise: every forward product of 0/1 spikes (the SSA's y, Σ_n k·v, q·m) is
 * the exact integer count times the scale rounded once (against the fixture, and against counts this test makes on
 * random spikes at sizes where counts pass 256 and 2048); products with a 0/1 factor (q·m's and Σ's gradients);
 * q, k, v read from one fused tensor (rows 3·d + 1 apart) give the dense results and leave the columns between
 * untouched; 1 and 2 threads give the same bits; LayerNorm's dx in place equals dx apart. Bad shapes fail with
 * SF_ERR_INVALID and a message that names the problem. Outputs start as NaN, so an unwritten element fails. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_transformer.h"
#include "testutil.h"

#include "core/rng.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static sf_backend *be;
static const sf_safetensors *fx;

/* fixture tensor "<prefix><i>.<name>" */
static const char *key(const char *prefix, int i, const char *name)
{
    static char k[96];
    snprintf(k, sizeof k, "%s%d.%s", prefix, i, name);
    return k;
}
static float *f32(const char *prefix, int i, const char *name, int64_t n) { return tu_get_f32(fx, key(prefix, i, name), n); }
static double *f64(const char *prefix, int i, const char *name, int64_t n) { return tu_get_f64(fx, key(prefix, i, name), n); }

/* n floats of NaN: an output the op must overwrite */
static float *poisoned(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    memset(p, 0xff, (size_t)(n > 0 ? n : 1) * sizeof *p);
    return p;
}

static void expect_bitwise(const char *what, const float *got, const float *want, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += memcmp(&got[i], &want[i], sizeof *got) != 0;
    CHECK(bad == 0, "%s: %lld of %lld elements differ", what, (long long)bad, (long long)n);
}

/* got equals ref rounded to float (an exact result: the reference is a float's value) */
static void expect_exact(const char *what, const float *got, const double *ref, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += got[i] != (float)ref[i] || !isfinite(got[i]);
    CHECK(bad == 0, "%s: %lld of %lld elements are not the exact result", what, (long long)bad, (long long)n);
}

/* tu_expect_close naming the case and the tensor; a reference that is zero but for float64 rounding (norm below
 * 1e-12: LayerNorm's dγ over one channel, where x̂ = 0) is met by a got of norm below 1e-6 */
static void expect_close(const char *what, const char *name, const float *got, const double *ref, int64_t n,
                         double tol)
{
    double rn = 0.0, gn = 0.0;
    for (int64_t i = 0; i < n; i++) rn += ref[i] * ref[i], gn += (double)got[i] * got[i];
    if (sqrt(rn) < 1e-12) {
        CHECK(sqrt(gn) < 1e-6, "%s: %s: norm %.3g where the reference is 0 (norm %.3g)", what, name, sqrt(gn), sqrt(rn));
        return;
    }
    char w[160];
    snprintf(w, sizeof w, "%s: %s", what, name);
    tu_expect_close(w, got, ref, n, tol);
}

static int count_of(const char *name)
{
    double c = 0;
    CHECK_OK(sf_safetensors_get_f64(fx, name, &c, 1));
    return (int)c;
}

/* ---------------------------------------------------------------- LayerNorm */

static void test_layernorm(void)
{
    for (int i = 0, cases = count_of("ln_count"); i < cases; i++) {
        double c[4];
        CHECK_OK(sf_safetensors_get_f64(fx, key("ln", i, "cfg"), c, 4));
        const int64_t rows = (int64_t)c[0], n = rows * (int64_t)c[1];
        const int32_t d = (int32_t)c[1];
        const int affine = (int)c[2];
        float *x = f32("ln", i, "x", n), *dy = f32("ln", i, "dy", n);
        float *gamma = affine ? f32("ln", i, "gamma", d) : NULL, *beta = affine ? f32("ln", i, "beta", d) : NULL;
        float *y = poisoned(n), *mean = poisoned(rows), *rstd = poisoned(rows), *dx = poisoned(n);
        float *dg = affine ? poisoned(d) : NULL, *db = affine ? poisoned(d) : NULL;
        char what[64];
        snprintf(what, sizeof what, "layernorm %d (rows %lld, d %d)", i, (long long)rows, d);
        CHECK(sf_cpu_op_layernorm_workspace(be, rows, d) == 0, "%s: the CPU needs no workspace", what);
        CHECK_OK(sf_cpu_op_layernorm_forward(be, rows, d, (float)c[3], x, gamma, beta, y, mean, rstd));
        double *ry = f64("ln", i, "y", n), *rm = f64("ln", i, "mean", rows), *rr = f64("ln", i, "rstd", rows);
        double *rdx = f64("ln", i, "dx", n);
        expect_close(what, "y", y, ry, n, 1e-5);
        expect_close(what, "mean", mean, rm, rows, 1e-5);
        expect_close(what, "rstd", rstd, rr, rows, 1e-5);
        CHECK_OK(sf_cpu_op_layernorm_backward(be, rows, d, x, mean, rstd, gamma, dy, dx, dg, db, NULL));
        /* the backward's x̂ comes from the saved float mean, off by up to half an ulp of it: 2^-24·|mean|·rstd of
         * the row's spread; the gradients' bound is 1e-5 or twice that (5e-5 for the case of mean 50, spread 0.1) */
        double off = 0.0;
        for (int64_t r = 0; r < rows; r++) off = fmax(off, ldexp(fabs(rm[r]) * rr[r], -24));
        const double tol = fmax(1e-5, 2 * off);
        expect_close(what, "dx", dx, rdx, n, tol);
        if (affine) {
            double *rdg = f64("ln", i, "dgamma", d), *rdb = f64("ln", i, "dbeta", d);
            expect_close(what, "dgamma", dg, rdg, d, tol);
            expect_close(what, "dbeta", db, rdb, d, 1e-5);
            free(rdg), free(rdb);
        }
        /* in place: dx written over dy, the parameters' sums taken first */
        float *inplace = malloc((size_t)n * sizeof *inplace), *dg2 = affine ? poisoned(d) : NULL;
        memcpy(inplace, dy, (size_t)n * sizeof *inplace);
        CHECK_OK(sf_cpu_op_layernorm_backward(be, rows, d, x, mean, rstd, gamma, inplace, inplace, dg2, NULL, NULL));
        expect_bitwise("layernorm dx in place", inplace, dx, n);
        if (affine) expect_bitwise("layernorm dgamma with dx in place", dg2, dg, d);
        free(x), free(dy), free(gamma), free(beta), free(y), free(mean), free(rstd), free(dx), free(dg), free(db);
        free(ry), free(rm), free(rr), free(rdx), free(inplace), free(dg2);
    }
}

/* ---------------------------------------------------------------- SSA */

/* q, k, v as the column blocks 0, d, 2d of one [rows, ld] tensor (ld = 3·d + 1), the last column NaN */
static float *fuse(int64_t rows, int32_t d, int64_t ld, const float *q, const float *k, const float *v)
{
    float *f = poisoned(rows * ld);
    for (int64_t r = 0; r < rows; r++)
        for (int32_t c = 0; c < d; c++) {
            f[r * ld + c] = q[r * d + c];
            f[r * ld + d + c] = k[r * d + c];
            f[r * ld + 2 * d + c] = v[r * d + c];
        }
    return f;
}

/* block b (0: q, 1: k, 2: v) of a fused tensor as a dense [rows, d] one */
static float *unfuse(int64_t rows, int32_t d, int64_t ld, const float *f, int b)
{
    float *x = malloc((size_t)(rows * d) * sizeof *x);
    for (int64_t r = 0; r < rows; r++) memcpy(x + r * d, f + r * ld + (int64_t)b * d, (size_t)d * sizeof *x);
    return x;
}

static void *workspace(const sf_token_shape *sh, int32_t heads, bool backward)
{
    const size_t bytes = sf_cpu_op_ssa_workspace(be, sh, heads, backward);
    const int64_t dh = sh->d / heads;
    CHECK(bytes == (size_t)(sh->tb * heads * dh * dh) * sizeof(float) * (backward ? 2 : 1),
          "ssa workspace: %zu bytes for tb %lld, d %d, %d heads", bytes, (long long)sh->tb, sh->d, heads);
    return malloc(bytes ? bytes : 1);
}

static void test_ssa_fixture(void)
{
    for (int i = 0, cases = count_of("ssa_count"); i < cases; i++) {
        double c[5];
        CHECK_OK(sf_safetensors_get_f64(fx, key("ssa", i, "cfg"), c, 5));
        const sf_token_shape sh = {(int64_t)c[0], (int32_t)c[1], (int32_t)c[2]};
        const int32_t heads = (int32_t)c[3], d = sh.d;
        const float scale = (float)c[4];
        const int64_t rows = sh.tb * sh.n, n = rows * d;
        float *q = f32("ssa", i, "q", n), *k = f32("ssa", i, "k", n), *v = f32("ssa", i, "v", n);
        float *dy = f32("ssa", i, "dy", n), *y = poisoned(n), *dq = poisoned(n), *dk = poisoned(n), *dv = poisoned(n);
        void *wf = workspace(&sh, heads, false), *wb = workspace(&sh, heads, true);
        char what[96];
        snprintf(what, sizeof what, "ssa %d (tb %lld, n %d, d %d, %d heads, scale %g)", i, (long long)sh.tb, sh.n, d,
                 heads, scale);
        CHECK_OK(sf_cpu_op_ssa_forward(be, &sh, heads, scale, d, q, k, v, y, wf));
        CHECK_OK(sf_cpu_op_ssa_backward(be, &sh, heads, scale, d, q, k, v, dy, dq, dk, dv, wb));
        double *ry = f64("ssa", i, "y", n), *rdq = f64("ssa", i, "dq", n), *rdk = f64("ssa", i, "dk", n);
        double *rdv = f64("ssa", i, "dv", n);
        expect_exact(what, y, ry, n);
        expect_close(what, "dq", dq, rdq, n, 1e-5);
        expect_close(what, "dk", dk, rdk, n, 1e-5);
        expect_close(what, "dv", dv, rdv, n, 1e-5);

        /* the same from one fused q|k|v tensor, into one fused gradient tensor */
        const int64_t ld = 3 * (int64_t)d + 1;
        float *qkv = fuse(rows, d, ld, q, k, v), *dqkv = poisoned(rows * ld), *y2 = poisoned(n);
        CHECK_OK(sf_cpu_op_ssa_forward(be, &sh, heads, scale, ld, qkv, qkv + d, qkv + 2 * d, y2, wf));
        CHECK_OK(sf_cpu_op_ssa_backward(be, &sh, heads, scale, ld, qkv, qkv + d, qkv + 2 * d, dy, dqkv, dqkv + d,
                                        dqkv + 2 * d, wb));
        expect_bitwise("ssa y from a fused q|k|v", y2, y, n);
        const float *dense[3] = {dq, dk, dv};
        for (int b = 0; b < 3; b++) {
            float *part = unfuse(rows, d, ld, dqkv, b);
            expect_bitwise("ssa gradient into a fused tensor", part, dense[b], n);
            free(part);
        }
        int64_t touched = 0;
        for (int64_t r = 0; r < rows; r++) touched += !isnan(dqkv[r * ld + ld - 1]);
        CHECK(touched == 0, "%s: %lld elements past the fused blocks written", what, (long long)touched);
        free(q), free(k), free(v), free(dy), free(y), free(dq), free(dk), free(dv), free(wf), free(wb), free(ry);
        free(rdq), free(rdk), free(rdv), free(qkv), free(dqkv), free(y2);
    }
}

/* 0/1 values with probability p of a one, from a counter hash */
static float *random_spikes(int64_t n, float p, uint64_t seed)
{
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = sf_uniform(seed, 7, (uint64_t)i) < p ? 1.0f : 0.0f;
    return x;
}

/* y of the SSA from integer counts: (float)(Σ_j q[i, j]·Σ_m k[m, j]·v[m, c]) · scale per head, for rows ld apart */
static float *exact_ssa(const sf_token_shape *sh, int32_t heads, float scale, int64_t ld, const float *q,
                        const float *k, const float *v)
{
    const int32_t n = sh->n, d = sh->d, dh = d / heads;
    float *y = malloc((size_t)(sh->tb * n * d) * sizeof *y);
    int64_t *m = malloc((size_t)dh * (size_t)dh * sizeof *m);
    for (int64_t t = 0; t < sh->tb; t++)
        for (int32_t h = 0; h < heads; h++) {
            const int64_t at = t * n * ld + (int64_t)h * dh;
            for (int32_t a = 0; a < dh; a++)
                for (int32_t b = 0; b < dh; b++) {
                    int64_t s = 0;
                    for (int32_t r = 0; r < n; r++) s += (int64_t)k[at + r * ld + a] * (int64_t)v[at + r * ld + b];
                    m[a * dh + b] = s;
                }
            for (int32_t r = 0; r < n; r++)
                for (int32_t b = 0; b < dh; b++) {
                    int64_t s = 0;
                    for (int32_t a = 0; a < dh; a++) s += (int64_t)q[at + r * ld + a] * m[a * dh + b];
                    y[(t * n + r) * d + (int64_t)h * dh + b] = (float)s * scale;
                }
        }
    free(m);
    return y;
}

/* Random spikes at sizes where the counts pass what bf16 (256) and fp16 (2048) hold as integers, odd sizes, one
 * head, one token: y is the exact count times scale, rounded once, for a power-of-two scale and another. */
static void test_ssa_exact(void)
{
    static const struct {
        int64_t tb;
        int32_t n, d, heads;
        float rate;
    } cases[] = {{1, 1, 1, 1, 1.0f}, {3, 17, 15, 5, 0.5f}, {2, 300, 8, 2, 0.9f}, {1, 64, 96, 1, 0.7f},
                 {1, 2500, 4, 1, 0.95f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const sf_token_shape sh = {cases[i].tb, cases[i].n, cases[i].d};
        const int32_t heads = cases[i].heads;
        const int64_t n = sh.tb * sh.n * sh.d;
        float *q = random_spikes(n, cases[i].rate, 3 * i), *k = random_spikes(n, cases[i].rate, 3 * i + 1);
        float *v = random_spikes(n, cases[i].rate, 3 * i + 2), *y = poisoned(n);
        void *ws = workspace(&sh, heads, false);
        const float scales[2] = {0.125f, 0.3f};
        for (int j = 0; j < 2; j++) {
            char what[96];
            snprintf(what, sizeof what, "ssa exact (tb %lld, n %d, d %d, %d heads, scale %g)", (long long)sh.tb, sh.n,
                     sh.d, heads, scales[j]);
            float *want = exact_ssa(&sh, heads, scales[j], sh.d, q, k, v);
            CHECK_OK(sf_cpu_op_ssa_forward(be, &sh, heads, scales[j], sh.d, q, k, v, y, ws));
            expect_bitwise(what, y, want, n);
            free(want);
        }
        free(q), free(k), free(v), free(y), free(ws);
    }
}

/* ---------------------------------------------------------------- token sums and scales (SDSA, token mean) */

static void test_token_fixture(void)
{
    for (int i = 0, cases = count_of("tok_count"); i < cases; i++) {
        double c[3];
        CHECK_OK(sf_safetensors_get_f64(fx, key("tok", i, "cfg"), c, 3));
        const sf_token_shape sh = {(int64_t)c[0], (int32_t)c[1], (int32_t)c[2]};
        const int32_t d = sh.d;
        const int64_t n = sh.tb * sh.n * d, r = sh.tb * d;
        float *q = f32("tok", i, "q", n), *k = f32("tok", i, "k", n), *v = f32("tok", i, "v", n);
        float *m = f32("tok", i, "m", r), *x = f32("tok", i, "x", n), *dkv = f32("tok", i, "dkv", r);
        float *dy = f32("tok", i, "dy", n), *dmean = f32("tok", i, "dmean", r);
        float *kv = poisoned(r), *dk = poisoned(n), *dv = poisoned(n), *y = poisoned(n), *dq = poisoned(n);
        float *dm = poisoned(r), *mean = poisoned(r), *dx = poisoned(n);
        const float inv_n = 1.0f / (float)sh.n;
        char what[96];
        snprintf(what, sizeof what, "token ops %d (tb %lld, n %d, d %d)", i, (long long)sh.tb, sh.n, d);
        /* the SDSA: kv = Σ_n k·v, y = q·m, and back */
        CHECK_OK(sf_cpu_op_token_sum(be, &sh, 1.0f, k, d, v, d, kv));
        CHECK_OK(sf_cpu_op_token_scale(be, &sh, 1.0f, m, q, d, y, d));
        CHECK_OK(sf_cpu_op_token_scale(be, &sh, 1.0f, m, dy, d, dq, d));
        CHECK_OK(sf_cpu_op_token_sum(be, &sh, 1.0f, dy, d, q, d, dm));
        CHECK_OK(sf_cpu_op_token_scale(be, &sh, 1.0f, dkv, v, d, dk, d));
        CHECK_OK(sf_cpu_op_token_scale(be, &sh, 1.0f, dkv, k, d, dv, d));
        /* a mean over the tokens */
        CHECK_OK(sf_cpu_op_token_sum(be, &sh, inv_n, x, d, NULL, 0, mean));
        CHECK_OK(sf_cpu_op_token_scale(be, &sh, inv_n, dmean, NULL, 0, dx, d));
        double *rkv = f64("tok", i, "kv", r), *ry = f64("tok", i, "y", n), *rdq = f64("tok", i, "dq", n);
        double *rdm = f64("tok", i, "dm", r), *rdk = f64("tok", i, "dk", n), *rdv = f64("tok", i, "dv", n);
        double *rmean = f64("tok", i, "mean", r), *rdx = f64("tok", i, "dx", n);
        expect_exact(what, kv, rkv, r);
        expect_exact(what, y, ry, n);
        expect_exact(what, dq, rdq, n);
        expect_exact(what, dk, rdk, n);
        expect_exact(what, dv, rdv, n);
        expect_close(what, "dm", dm, rdm, r, 1e-6);
        expect_close(what, "mean", mean, rmean, r, 1e-6);
        expect_close(what, "dx", dx, rdx, n, 1e-6);
        /* y = q·m in place over a copy of q */
        float *inplace = malloc((size_t)n * sizeof *inplace);
        memcpy(inplace, q, (size_t)n * sizeof *inplace);
        CHECK_OK(sf_cpu_op_token_scale(be, &sh, 1.0f, m, inplace, d, inplace, d));
        expect_bitwise("token scale in place", inplace, y, n);
        free(q), free(k), free(v), free(m), free(x), free(dkv), free(dy), free(dmean), free(kv), free(dk), free(dv);
        free(y), free(dq), free(dm), free(mean), free(dx), free(rkv), free(ry), free(rdq), free(rdm), free(rdk);
        free(rdv), free(rmean), free(rdx), free(inplace);
    }
}

/* Σ_n k·v of random spikes, read from a fused tensor, is the exact count also past 2^11 tokens */
static void test_token_exact(void)
{
    const sf_token_shape sh = {2, 2500, 7};
    const int64_t rows = sh.tb * sh.n, ld = 3 * (int64_t)sh.d + 1;
    float *q = random_spikes(rows * sh.d, 0.9f, 40), *k = random_spikes(rows * sh.d, 0.9f, 41);
    float *v = random_spikes(rows * sh.d, 0.9f, 42), *f = fuse(rows, sh.d, ld, q, k, v), *kv = poisoned(sh.tb * sh.d);
    CHECK_OK(sf_cpu_op_token_sum(be, &sh, 1.0f, f + sh.d, ld, f + 2 * sh.d, ld, kv));
    int64_t bad = 0;
    for (int64_t t = 0; t < sh.tb; t++)
        for (int32_t c = 0; c < sh.d; c++) {
            int64_t s = 0;
            for (int64_t r = 0; r < sh.n; r++) s += (int64_t)(k[(t * sh.n + r) * sh.d + c] * v[(t * sh.n + r) * sh.d + c]);
            bad += kv[t * sh.d + c] != (float)s;
        }
    CHECK(bad == 0, "token sum of 2500 tokens: %lld of %lld counts wrong", (long long)bad, (long long)(sh.tb * sh.d));
    free(q), free(k), free(v), free(f), free(kv);
}

/* ---------------------------------------------------------------- threads, errors */

/* Every op's output with 1 and with 2 threads, on a shape big enough for its parallel loops */
static void test_threads(void)
{
    const sf_token_shape sh = {16, 64, 96};
    const int32_t heads = 3, d = sh.d;
    const int64_t rows = sh.tb * sh.n, n = rows * d;
    float *q = random_spikes(n, 0.3f, 50), *k = random_spikes(n, 0.3f, 51), *v = random_spikes(n, 0.3f, 52);
    float *dy = malloc((size_t)n * sizeof *dy), *gamma = malloc((size_t)d * sizeof *gamma);
    tu_randn(dy, n, 0.0f, 1.0f, 53);
    tu_randn(gamma, d, 1.0f, 0.2f, 54);
    void *ws = workspace(&sh, heads, true);
    float *out[2][7];
    const int threads = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run ? 2 : 1);
        float **o = out[run];
        o[0] = poisoned(n), o[1] = poisoned(n), o[2] = poisoned(n), o[3] = poisoned(n), o[4] = poisoned(rows);
        o[5] = poisoned(rows), o[6] = poisoned(d);
        CHECK_OK(sf_cpu_op_ssa_backward(be, &sh, heads, 0.125f, d, q, k, v, dy, o[0], o[1], o[2], ws));
        CHECK_OK(sf_cpu_op_layernorm_forward(be, rows, d, 1e-5f, dy, gamma, NULL, o[3], o[4], o[5]));
        CHECK_OK(sf_cpu_op_layernorm_backward(be, rows, d, dy, o[4], o[5], gamma, q, o[3], o[6], NULL, NULL));
    }
    omp_set_num_threads(threads);
    const int64_t sizes[7] = {n, n, n, n, rows, rows, d};
    for (int j = 0; j < 7; j++) {
        expect_bitwise("1 against 2 threads", out[1][j], out[0][j], sizes[j]);
        free(out[0][j]), free(out[1][j]);
    }
    float *a = poisoned(sh.tb * d), *b = poisoned(sh.tb * d);
    omp_set_num_threads(1);
    CHECK_OK(sf_cpu_op_token_sum(be, &sh, 1.0f, dy, d, q, d, a));
    omp_set_num_threads(2);
    CHECK_OK(sf_cpu_op_token_sum(be, &sh, 1.0f, dy, d, q, d, b));
    omp_set_num_threads(threads);
    expect_bitwise("token sum, 1 against 2 threads", a, b, sh.tb * d);
    free(a), free(b), free(q), free(k), free(v), free(dy), free(gamma), free(ws);
}

static void expect_invalid(const char *what, sf_status s, const char *needle)
{
    CHECK(s == SF_ERR_INVALID, "%s: %s, want SF_ERR_INVALID", what, sf_status_str(s));
    CHECK(strstr(sf_last_error(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, sf_last_error(), needle);
}

static void test_errors(void)
{
    float x[64] = {0}, y[64];
    const sf_token_shape sh = {1, 2, 6}, no_tokens = {1, 0, 6};
    expect_invalid("3 heads of 4 channels",
                   sf_cpu_op_ssa_forward(be, &(sf_token_shape){1, 2, 4}, 3, 0.125f, 4, x, x, x, y, x),
                   "3 heads do not divide d = 4");
    expect_invalid("ld below d", sf_cpu_op_ssa_backward(be, &sh, 2, 0.125f, 5, x, x, x, x, y, y, y, x), "ld = 5");
    expect_invalid("no workspace", sf_cpu_op_ssa_forward(be, &sh, 2, 0.125f, 6, x, x, x, y, NULL), "workspace");
    expect_invalid("no tokens", sf_cpu_op_token_sum(be, &no_tokens, 1.0f, x, 6, NULL, 0, y), "n=0");
    expect_invalid("ldb below d", sf_cpu_op_token_scale(be, &sh, 1.0f, x, x, 2, y, 6), "ldb = 2");
    expect_invalid("no shape", sf_cpu_op_token_scale(be, NULL, 1.0f, x, NULL, 0, y, 6), "shape is NULL");
    expect_invalid("LayerNorm of no channels", sf_cpu_op_layernorm_forward(be, 2, 0, 1e-5f, x, NULL, NULL, y, y, y),
                   "d >= 1");
    CHECK(sf_cpu_op_ssa_workspace(be, &sh, 4, true) == 0, "workspace of a bad shape: 0 (the op reports it)");
    CHECK_OK(sf_cpu_op_ssa_forward(be, &(sf_token_shape){0, 3, 6}, 2, 0.125f, 6, NULL, NULL, NULL, NULL, NULL));
}

int main(void)
{
    CHECK_OK(sf_cpu_backend_create(&be));
    sf_safetensors *st = tu_fixture("transformer_ops.safetensors");
    fx = st;
    test_layernorm();
    test_ssa_fixture();
    test_ssa_exact();
    test_token_fixture();
    test_token_exact();
    test_threads();
    test_errors();
    sf_safetensors_free(st);
    sf_backend_free(be);
    return tu_finish("test_transformer_ops");
}
