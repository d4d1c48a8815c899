/* test_gpu_ops.c — every op of the CUDA backend against the CPU backend (the reference) on the same random
 * inputs, at awkward sizes (odd counts, T=1, B=1, one channel). Bounds (relative L2 error unless said):
 *   exact: spikes, dropout, add, u8/f32 conversions, maxpool forward and argmax, check_finite, accuracy count;
 *   1e-6: element-wise optimizers, leaky readout, avgpool;   1e-5: BN statistics and backward,
 *   softmax cross-entropy, linear and conv (fp32 FMA math, different summation orders); 1e-6: conv of spikes on
 *   the split path (TF32 parts);
 *   1e-4: LIF and fused BN+LIF gradients (surrogate expf in two libraries, per-channel sums over T·B·H·W), BN
 *   forward (the CPU folds γ·invstd before multiplying: outputs near zero lose digits to cancellation).
 * Then linear and conv again on a backend created with tf32, against the same fp32 CPU results: 1e-3 (operands
 * rounded to 10-bit mantissas: about 3e-4 expected); the worst error seen is printed. The 16-bit precisions store
 * activations in 16 bits: test_gpu_precision.c tests every op under them. */
#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "gemm_cases.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sf_backend *cpu, *gpu;
static double gemm_tol = 1e-5; /* linear and conv bound: the GPU backend's precision decides it */
static double gemm_worst;      /* the largest linear/conv error seen under that precision */
static bool spike_x;           /* test_conv's x is spikes: 0/1 (30% ones), marked so (sf_conv_shape.x_binary) */

/* A tensor on both backends, from the same host data. */
typedef struct {
    size_t bytes;
    void *c, *g;
} pair;

static pair mk(const void *host, size_t bytes)
{
    pair p = {bytes, NULL, NULL};
    CHECK_OK(cpu->alloc(cpu, bytes ? bytes : 4, &p.c));
    CHECK_OK(gpu->alloc(gpu, bytes ? bytes : 4, &p.g));
    if (host && bytes) {
        CHECK_OK(cpu->copy_from_host(cpu, p.c, host, bytes));
        CHECK_OK(gpu->copy_from_host(gpu, p.g, host, bytes));
    } else if (bytes) { /* outputs: poisoned (NaN), so an unwritten element fails */
        void *nan = malloc(bytes);
        memset(nan, 0xff, bytes);
        CHECK_OK(cpu->copy_from_host(cpu, p.c, nan, bytes));
        CHECK_OK(gpu->copy_from_host(gpu, p.g, nan, bytes));
        free(nan);
    }
    return p;
}

static pair randn(size_t n, float mean, float std, uint64_t seed)
{
    float *h = malloc(4 * (n ? n : 1));
    tu_randn(h, (int64_t)n, mean, std, seed);
    pair p = mk(h, 4 * n);
    free(h);
    return p;
}

static pair out(size_t n)
{
    return mk(NULL, 4 * n);
}

static void drop(pair *p)
{
    cpu->release(cpu, p->c);
    gpu->release(gpu, p->g);
}

/* Compares the float tensor on both backends: relative L2 error within tol (tol 0: bitwise equal); returns it. */
static double cmp(const char *what, const pair *p, double tol)
{
    size_t n = p->bytes / 4;
    float *c = malloc(p->bytes + 4), *g = malloc(p->bytes + 4);
    double e = 0.0;
    CHECK_OK(cpu->copy_to_host(cpu, c, p->c, p->bytes));
    CHECK_OK(gpu->copy_to_host(gpu, g, p->g, p->bytes));
    if (tol == 0.0) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += memcmp(&c[i], &g[i], 4) != 0 && !(isnan(c[i]) && isnan(g[i]));
        CHECK(bad == 0, "%s: %zu of %zu elements differ", what, bad, n);
    } else {
        double *r = malloc(8 * (n + 1));
        for (size_t i = 0; i < n; i++) r[i] = c[i];
        e = tu_rel_err(g, r, (int64_t)n);
        CHECK(e <= tol, "%s: rel err %.3e > %.0e", what, e, tol);
        free(r);
    }
    free(c), free(g);
    return e;
}

/* Two float tensors of the GPU side bitwise equal. */
static void same_on_gpu(const char *what, const char *name, const pair *a, const pair *b)
{
    float *x = malloc(a->bytes + 4), *y = malloc(a->bytes + 4);
    CHECK_OK(gpu->copy_to_host(gpu, x, a->g, a->bytes));
    CHECK_OK(gpu->copy_to_host(gpu, y, b->g, a->bytes));
    CHECK(memcmp(x, y, a->bytes) == 0, "%s: %s differs from the float input's", what, name);
    free(x), free(y);
}

/* A linear or conv result (`name` of the op `what`) under the GPU backend's precision. */
static void cmp_gemm(const char *what, const char *name, const pair *p)
{
    char t[192];
    snprintf(t, sizeof t, "%s: %s", what, name);
    double e = cmp(t, p, gemm_tol);
    if (e > gemm_worst) gemm_worst = e;
}

static void cmp_bytes(const char *what, const pair *p)
{
    uint8_t *c = malloc(p->bytes + 1), *g = malloc(p->bytes + 1);
    CHECK_OK(cpu->copy_to_host(cpu, c, p->c, p->bytes));
    CHECK_OK(gpu->copy_to_host(gpu, g, p->g, p->bytes));
    size_t bad = 0;
    for (size_t i = 0; i < p->bytes; i++) bad += c[i] != g[i];
    CHECK(bad == 0, "%s: %zu of %zu bytes differ", what, bad, p->bytes);
    free(c), free(g);
}

/* Runs the op expression on the CPU, then on the GPU, with `be` and S(tensor) naming that side. */
#define RUN(expr)                                                                                                      \
    do {                                                                                                               \
        int side_;                                                                                                     \
        for (side_ = 0; side_ < 2; side_++) {                                                                          \
            sf_backend *be = side_ ? gpu : cpu;                                                                        \
            CHECK_OK(expr);                                                                                            \
        }                                                                                                              \
    } while (0)
#define S(p) (side_ ? (p).g : (p).c)

static void test_lif(void)
{
    const int64_t sizes[][2] = {{1, 1}, {5, 333}, {16, 4096}, {70, 129}};
    int k = 0;
    for (int sg = 0; sg < 4; sg++)
        for (int bits = 0; bits < 8; bits++, k++) {
            sf_lif_params p;
            sf_lif_default_params(&p);
            p.surrogate = (sf_surrogate)sg;
            p.alpha = sf_surrogate_default_alpha(p.surrogate);
            p.soft_reset = bits & 1;
            p.detach_reset = (bits >> 1) & 1;
            p.use_grad_threshold = (bits >> 2) & 1;
            p.grad_threshold = 0.3f;
            p.decay_input = (k % 3) != 0;
            int64_t T = sizes[k % 4][0], N = sizes[k % 4][1];
            size_t n = (size_t)(T * N);
            pair x = randn(n, 0.5f, 1.0f, 100 + (uint64_t)k), ds = randn(n, 0.0f, 1.0f, 200 + (uint64_t)k);
            pair s = out(n), h = out(n), dx = out(n), dxr = out(n), cnt = mk((float[]){0.0f}, 4);
            pair u8 = mk(NULL, n);
            RUN(be->zero(be, S(cnt), 4));
            sf_lif_out oc = {.s = s.c, .s_u8 = u8.c, .h = h.c, .spike_count = cnt.c};
            sf_lif_out og = {.s = s.g, .s_u8 = u8.g, .h = h.g, .spike_count = cnt.g};
            RUN(be->lif_forward(be, &p, T, N, S(x), side_ ? &og : &oc, NULL));
            RUN(be->lif_backward(be, &p, T, N, S(x), S(h), S(ds), S(dx), NULL));
            RUN(be->lif_backward(be, &p, T, N, S(x), NULL, S(ds), S(dxr), NULL));
            char w[160];
            snprintf(w, sizeof w, "lif %s soft=%d detach=%d thr=%d decay_input=%d T=%lld N=%lld",
                     sf_surrogate_name(p.surrogate), p.soft_reset, p.detach_reset, p.use_grad_threshold, p.decay_input,
                     (long long)T, (long long)N);
            cmp(w, &s, 0.0);
            cmp_bytes(w, &u8);
            cmp(w, &cnt, 0.0);
            cmp(w, &h, 1e-6);
            cmp(w, &dx, 1e-4);
            cmp(w, &dxr, 1e-4);
            drop(&x), drop(&ds), drop(&s), drop(&h), drop(&dx), drop(&dxr), drop(&cnt), drop(&u8);
        }
}

static void test_bn(int64_t rows, int32_t C, int64_t hw, uint64_t seed)
{
    sf_bn_shape sh = {rows, C, hw};
    size_t n = (size_t)(rows * C * hw), c = (size_t)C;
    pair x = randn(n, 0.3f, 2.0f, seed), dy = randn(n, 0.0f, 1.0f, seed + 1), g = randn(c, 1.0f, 0.2f, seed + 2);
    pair b = randn(c, 0.1f, 0.2f, seed + 3), mean = out(c), var = out(c), y = out(n), dx = out(n), dg = out(c);
    pair db = out(c), rm = randn(c, 0.0f, 0.1f, seed + 4), rv = randn(c, 1.0f, 0.1f, seed + 5);
    RUN(be->bn_stats(be, sh, S(x), S(mean), S(var)));
    cmp("bn_stats mean", &mean, 1e-5);
    cmp("bn_stats var", &var, 1e-5);
    /* the rest from the same statistics on both sides */
    float *hm = malloc(4 * c), *hv = malloc(4 * c);
    CHECK_OK(cpu->copy_to_host(cpu, hm, mean.c, 4 * c));
    CHECK_OK(cpu->copy_to_host(cpu, hv, var.c, 4 * c));
    CHECK_OK(gpu->copy_from_host(gpu, mean.g, hm, 4 * c));
    CHECK_OK(gpu->copy_from_host(gpu, var.g, hv, 4 * c));
    free(hm), free(hv);
    RUN(be->bn_forward(be, sh, S(x), S(mean), S(var), 1e-5f, S(g), S(b), S(y)));
    cmp("bn_forward", &y, 1e-4); /* the CPU folds γ·invstd first: outputs near 0 lose digits to cancellation */
    RUN(be->bn_backward(be, sh, S(x), S(mean), S(var), 1e-5f, S(g), S(dy), S(dx), S(dg), S(db)));
    cmp("bn_backward dx", &dx, 1e-5);
    cmp("bn_backward dgamma", &dg, 1e-5);
    cmp("bn_backward dbeta", &db, 1e-5);
    if (rows * hw > 1) {
        RUN(be->bn_update_running(be, sh, 0.1f, S(mean), S(var), S(rm), S(rv)));
        cmp("bn running mean", &rm, 1e-6);
        cmp("bn running var", &rv, 1e-6);
    } else { /* one value per channel has no unbiased variance: both refuse */
        CHECK(cpu->bn_update_running(cpu, sh, 0.1f, mean.c, var.c, rm.c, rv.c) == SF_ERR_INVALID, "cpu accepted");
        CHECK(gpu->bn_update_running(gpu, sh, 0.1f, mean.g, var.g, rm.g, rv.g) == SF_ERR_INVALID, "gpu accepted");
    }
    /* fused BN→LIF over T steps, with h kept and recomputed */
    for (int keep = 0; keep < 2; keep++)
        for (int64_t T = 1; T <= rows; T *= rows > 1 ? rows : 2) {
            if (rows % T) continue;
            sf_lif_params p;
            sf_lif_default_params(&p);
            p.surrogate = keep ? SF_SURROGATE_ATAN : SF_SURROGATE_SIGMOID;
            p.alpha = sf_surrogate_default_alpha(p.surrogate);
            pair s = out(n), h = keep ? out(n) : (pair){0, NULL, NULL}, ds = randn(n, 0.0f, 1.0f, seed + 9);
            sf_lif_out oc = {.s = s.c, .h = h.c}, og = {.s = s.g, .h = h.g};
            RUN(be->bn_lif_forward(be, &p, T, sh, S(x), S(mean), S(var), 1e-5f, S(g), S(b), side_ ? &og : &oc, NULL));
            RUN(be->bn_lif_backward(be, &p, T, sh, S(x), keep ? S(h) : NULL, S(mean), S(var), 1e-5f, S(g), S(b), S(ds),
                                    S(dx), S(dg), S(db), NULL, NULL, NULL));
            char w[128];
            snprintf(w, sizeof w, "bn_lif rows=%lld C=%d hw=%lld T=%lld keep_h=%d", (long long)rows, C, (long long)hw,
                     (long long)T, keep);
            cmp(w, &s, 0.0);
            cmp(w, &dx, 1e-4);
            cmp(w, &dg, 1e-4);
            cmp(w, &db, 1e-4);
            drop(&s), drop(&ds);
            if (keep) drop(&h);
            if (rows == 1) break;
        }
    drop(&x), drop(&dy), drop(&g), drop(&b), drop(&mean), drop(&var), drop(&y), drop(&dx), drop(&dg), drop(&db);
    drop(&rm), drop(&rv);
}

static void test_linear(int64_t rows, int32_t in, int32_t o, int bias, int want_dx)
{
    pair x = randn((size_t)(rows * in), 0.0f, 1.0f, 31), w = randn((size_t)o * in, 0.0f, 0.3f, 32);
    pair b = randn((size_t)o, 0.0f, 0.3f, 33), y = out((size_t)(rows * o)), dy = randn((size_t)(rows * o), 0, 1, 34);
    pair dx = out((size_t)(rows * in)), dw = out((size_t)o * in), db = out((size_t)o);
    RUN(be->linear_forward(be, rows, in, o, S(x), S(w), bias ? S(b) : NULL, S(y)));
    RUN(be->linear_backward(be, rows, in, o, S(x), S(w), S(dy), want_dx ? S(dx) : NULL, S(dw), bias ? S(db) : NULL));
    char t[96];
    snprintf(t, sizeof t, "linear rows=%lld in=%d out=%d bias=%d", (long long)rows, in, o, bias);
    cmp_gemm(t, "y", &y);
    cmp_gemm(t, "dw", &dw);
    if (want_dx) cmp_gemm(t, "dx", &dx);
    if (bias) cmp_gemm(t, "db", &db);
    drop(&x), drop(&w), drop(&b), drop(&y), drop(&dy), drop(&dx), drop(&dw), drop(&db);
}

/* binary_linear_forward and _backward on 0/1 inputs (density 0.3): the fp32 CUDA backend's products of bf16 or TF32
 * parts are exact, so they meet the CPU's SGEMM at 1e-6 (TF32 arithmetic would miss it by 300×). The shapes below
 * take each path of binary_linear.cu: bf16 parts (512 outputs or more), TF32 parts and SGEMMs (fewer), padded
 * dimensions, and parts in chunks. */
static void test_binary_linear(int64_t rows, int32_t in, int32_t o, int bias)
{
    float *h = malloc(4 * (size_t)(rows * in));
    tu_randn(h, rows * in, 0.0f, 1.0f, 41);
    for (int64_t i = 0; i < rows * in; i++) h[i] = (float)(h[i] > 0.5244f); /* P(N(0, 1) > 0.5244) = 0.3 */
    pair x = mk(h, 4 * (size_t)(rows * in)), w = randn((size_t)o * in, 0.0f, 0.3f, 42);
    pair b = randn((size_t)o, 0.0f, 0.3f, 43), y = out((size_t)(rows * o)), dy = randn((size_t)(rows * o), 0, 1, 44);
    pair dx = out((size_t)(rows * in)), dw = out((size_t)o * in), db = out((size_t)o);
    RUN(be->binary_linear_forward(be, rows, in, o, S(x), S(w), bias ? S(b) : NULL, S(y)));
    RUN(be->binary_linear_backward(be, rows, in, o, S(x), S(w), S(dy), S(dx), S(dw), bias ? S(db) : NULL));
    char t[96];
    snprintf(t, sizeof t, "binary linear rows=%lld in=%d out=%d bias=%d", (long long)rows, in, o, bias);
    cmp(t, &y, 1e-6);
    cmp(t, &dw, 1e-6);
    cmp(t, &dx, 1e-5);
    if (bias) cmp(t, &db, 1e-5);
    /* the backward from x's spike bits: the same products, so the same bits of output */
    const int64_t words = (in + 31) / 32;
    uint32_t *hb = calloc((size_t)(rows * words), sizeof *hb);
    for (int64_t r = 0; r < rows; r++)
        for (int32_t k = 0; k < in; k++) hb[r * words + k / 32] |= (uint32_t)(h[r * in + k] != 0.0f) << (k % 32);
    pair xb = mk(hb, sizeof *hb * (size_t)(rows * words));
    pair dx2 = out((size_t)(rows * in)), dw2 = out((size_t)o * in), db2 = out((size_t)o);
    CHECK_OK(gpu->binary_linear_backward_bits(gpu, rows, in, o, xb.g, w.g, dy.g, dx2.g, dw2.g, bias ? db2.g : NULL));
    same_on_gpu(t, "dx from bits", &dx, &dx2);
    same_on_gpu(t, "dw from bits", &dw, &dw2);
    if (bias) same_on_gpu(t, "db from bits", &db, &db2);
    drop(&x), drop(&w), drop(&b), drop(&y), drop(&dy), drop(&dx), drop(&dw), drop(&db);
    drop(&xb), drop(&dx2), drop(&dw2), drop(&db2);
    free(h), free(hb);
}

/* [n][c][hw] → [n][hw][c] (to_nhwc), or back. */
static void permute(const float *src, float *dst, int64_t n, int64_t c, int64_t hw, bool to_nhwc)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t q = 0; q < hw; q++) {
                const int64_t nchw = (i * c + ch) * hw + q, nhwc = (i * hw + q) * c + ch;
                dst[to_nhwc ? nhwc : nchw] = src[to_nhwc ? nchw : nhwc];
            }
}

/* A float tensor's CPU side to the host, permuted to NHWC if asked. */
static float *host_of(const pair *p, int64_t n, int64_t c, int64_t hw, bool nhwc)
{
    float *h = malloc(p->bytes + 4), *r = malloc(p->bytes + 4);
    CHECK_OK(cpu->copy_to_host(cpu, h, p->c, p->bytes));
    if (!nhwc) return free(r), h;
    permute(h, r, n, c, hw, true);
    free(h);
    return r;
}

/* The GPU's result g (NHWC if nhwc) against the CPU's NCHW one. */
static void cmp_layout(const char *what, const void *g, const pair *ref, int64_t n, int64_t c, int64_t hw, bool nhwc)
{
    const size_t m = ref->bytes / 4;
    float *gh = malloc(ref->bytes + 4), *gn = malloc(ref->bytes + 4), *ch = host_of(ref, n, c, hw, false);
    double *r = malloc(8 * (m + 1));
    CHECK_OK(gpu->copy_to_host(gpu, gh, g, ref->bytes));
    if (nhwc) permute(gh, gn, n, c, hw, false);
    for (size_t i = 0; i < m; i++) r[i] = ch[i];
    const double e = tu_rel_err(nhwc ? gn : gh, r, (int64_t)m);
    CHECK(e <= gemm_tol, "%s: rel err %.3e > %.0e", what, e, gemm_tol);
    if (e > gemm_worst) gemm_worst = e;
    free(gh), free(gn), free(ch), free(r);
}

/* The conv again on the GPU with x (and dx) and/or y (and dy) NHWC, as the engine keeps tensors between convolutions
 * on such a backend: the results, put back in NCHW, against the CPU's. */
static void conv_layouts(const sf_conv_shape *base, const pair *x, const pair *w, const pair *b, const pair *dy,
                         const pair *y, const pair *dx, const pair *dw, const pair *db, const char *what)
{
    const int64_t hw = (int64_t)base->h * base->w, ohw = (int64_t)base->oh * base->ow;
    for (int v = 1; v < 4; v++) {
        sf_conv_shape sh = *base;
        sh.x_nhwc = v & 1;
        sh.y_nhwc = v >> 1;
        /* 0: no NHWC algorithm fits the cap with the copies (a batch that cannot be chunked under 1 MiB) */
        const size_t bytes = gpu->conv_workspace(gpu, &sh, SF_CONV_PASS_BOTH);
        if (bytes == 0) continue;
        float *xh = host_of(x, sh.n, sh.cin, hw, sh.x_nhwc), *dyh = host_of(dy, sh.n, sh.cout, ohw, sh.y_nhwc);
        void *xg, *dyg, *yg, *dxg, *dwg, *dbg, *ws;
        CHECK_OK(gpu->alloc(gpu, x->bytes, &xg));
        CHECK_OK(gpu->alloc(gpu, dy->bytes, &dyg));
        CHECK_OK(gpu->alloc(gpu, y->bytes, &yg));
        CHECK_OK(gpu->alloc(gpu, dx->bytes, &dxg));
        CHECK_OK(gpu->alloc(gpu, dw->bytes, &dwg));
        CHECK_OK(gpu->alloc(gpu, db->bytes, &dbg));
        CHECK_OK(gpu->alloc(gpu, bytes, &ws));
        CHECK_OK(gpu->copy_from_host(gpu, xg, xh, x->bytes));
        CHECK_OK(gpu->copy_from_host(gpu, dyg, dyh, dy->bytes));
        const bool bias = db->bytes > 0;
        CHECK_OK(gpu->conv_forward(gpu, &sh, xg, w->g, bias ? b->g : NULL, yg, ws));
        CHECK_OK(gpu->conv_backward(gpu, &sh, xg, w->g, dyg, dxg, dwg, bias ? dbg : NULL, ws));
        char t[160];
        snprintf(t, sizeof t, "%s, x %s, y %s", what, sh.x_nhwc ? "NHWC" : "NCHW", sh.y_nhwc ? "NHWC" : "NCHW");
        cmp_layout(t, yg, y, sh.n, sh.cout, ohw, sh.y_nhwc);
        cmp_layout(t, dxg, dx, sh.n, sh.cin, hw, sh.x_nhwc);
        cmp_layout(t, dwg, dw, 1, 1, (int64_t)(dw->bytes / 4), false);
        if (bias) cmp_layout(t, dbg, db, 1, 1, sh.cout, false);
        void *bufs[] = {xg, dyg, yg, dxg, dwg, dbg, ws};
        for (int i = 0; i < 7; i++) gpu->release(gpu, bufs[i]);
        free(xh), free(dyh);
    }
}

/* A GPU workspace of what conv_workspace says `pass` needs, followed by a guard of known bytes: a pass that writes
 * past its stated workspace changes the guard (check_ws_guard). */
enum { WS_GUARD = 4096 };
static void *guarded_ws(const sf_conv_shape *sh, sf_conv_pass pass, size_t *bytes)
{
    *bytes = gpu->conv_workspace(gpu, sh, pass);
    unsigned char guard[WS_GUARD];
    memset(guard, 0xA5, sizeof guard);
    void *ws;
    CHECK_OK(gpu->alloc(gpu, *bytes + WS_GUARD, &ws));
    CHECK_OK(gpu->copy_from_host(gpu, (char *)ws + *bytes, guard, sizeof guard));
    return ws;
}

static void check_ws_guard(void *ws, size_t bytes, const char *what, const char *pass)
{
    unsigned char guard[WS_GUARD];
    CHECK_OK(gpu->copy_to_host(gpu, guard, (char *)ws + bytes, sizeof guard));
    int bad = 0;
    for (int i = 0; i < WS_GUARD; i++) bad += guard[i] != 0xA5;
    CHECK(bad == 0, "%s: the %s wrote %d bytes past its %zu bytes of workspace", what, pass, bad, bytes);
    gpu->release(gpu, ws);
}

static void test_conv(int64_t n, int32_t cin, int32_t hgt, int32_t wid, int32_t cout, int32_t k, int32_t stride,
                      int32_t pad, int bias)
{
    sf_conv_shape sh = {n,   cin, hgt, wid, cout, k, stride, pad, (hgt + 2 * pad - k) / stride + 1,
                        (wid + 2 * pad - k) / stride + 1, false, false, spike_x};
    size_t nx = (size_t)(n * cin * hgt * wid), ny = (size_t)(n * cout * sh.oh * sh.ow),
           nw = (size_t)(cout * cin * k * k);
    float *xh = malloc(4 * nx);
    tu_randn(xh, (int64_t)nx, 0.0f, 1.0f, 41);
    for (size_t i = 0; spike_x && i < nx; i++) xh[i] = (float)(xh[i] > 0.5244f); /* P(N(0, 1) > 0.5244) = 0.3 */
    pair x = mk(xh, 4 * nx), w = randn(nw, 0.0f, 0.2f, 42), b = randn((size_t)cout, 0.0f, 0.2f, 43);
    free(xh);
    pair y = out(ny), dy = randn(ny, 0.0f, 1.0f, 44), dx = out(nx), dw = out(nw), db = out((size_t)cout);
    void *wsc = NULL;
    size_t bc = cpu->conv_workspace(cpu, &sh, SF_CONV_PASS_BOTH), bf, bb;
    CHECK_OK(cpu->alloc(cpu, bc ? bc : 4, &wsc));
    void *wsf = guarded_ws(&sh, SF_CONV_PASS_FORWARD, &bf), *wsb = guarded_ws(&sh, SF_CONV_PASS_BACKWARD, &bb);
    RUN(be->conv_forward(be, &sh, S(x), S(w), bias ? S(b) : NULL, S(y), side_ ? wsf : wsc));
    RUN(be->conv_backward(be, &sh, S(x), S(w), S(dy), S(dx), S(dw), bias ? S(db) : NULL, side_ ? wsb : wsc));
    char t[128];
    snprintf(t, sizeof t, "conv n=%lld %dx%dx%d -> %d k=%d s=%d p=%d%s", (long long)n, cin, hgt, wid, cout, k, stride,
             pad, spike_x ? ", spikes" : "");
    check_ws_guard(wsf, bf, t, "forward");
    check_ws_guard(wsb, bb, t, "backward");
    cmp_gemm(t, "y", &y);
    cmp_gemm(t, "dx", &dx);
    cmp_gemm(t, "dw", &dw);
    if (bias) cmp_gemm(t, "db", &db);
    pair nodb = {0, NULL, NULL};
    conv_layouts(&sh, &x, &w, &b, &dy, &y, &dx, &dw, bias ? &db : &nodb, t);
    cpu->release(cpu, wsc);
    drop(&x), drop(&w), drop(&b), drop(&y), drop(&dy), drop(&dx), drop(&dw), drop(&db);
}

/* The linear and conv cases, at the precision of the current GPU backend. */
static void test_gemm_ops(void) { gemm_cases_run(test_linear, test_conv); }

static void test_pool(int64_t n, int32_t h, int32_t w, int32_t k, int32_t s, int32_t pad)
{
    sf_pool_shape sh = {n, h, w, k, s, (h + 2 * pad - k) / s + 1, (w + 2 * pad - k) / s + 1, pad};
    size_t nx = (size_t)(n * h * w), ny = (size_t)(n * sh.oh * sh.ow);
    /* spikes as pool input: many exact ties, which the first-maximum rule must break alike */
    float *hx = malloc(4 * nx);
    tu_randn(hx, (int64_t)nx, 0.0f, 1.0f, 51);
    for (size_t i = 0; i < nx; i += 2) hx[i] = hx[i] > 0.0f ? 1.0f : 0.0f;
    pair x = mk(hx, 4 * nx), y = out(ny), ym = out(ny), dy = randn(ny, 0.0f, 1.0f, 52), dx = out(nx), dxm = out(nx);
    pair am = mk(NULL, ny);
    free(hx);
    RUN(be->avgpool_forward(be, &sh, S(x), S(y)));
    RUN(be->avgpool_backward(be, &sh, S(dy), S(dx)));
    RUN(be->maxpool_forward(be, &sh, S(x), S(ym), S(am)));
    RUN(be->maxpool_backward(be, &sh, S(am), S(dy), S(dxm)));
    char t[96];
    snprintf(t, sizeof t, "pool n=%lld %dx%d k=%d s=%d pad=%d", (long long)n, h, w, k, s, pad);
    cmp(t, &y, 1e-6);
    cmp(t, &dx, 1e-6);
    cmp(t, &ym, 0.0);
    cmp_bytes(t, &am);
    cmp(t, &dxm, 1e-6);
    drop(&x), drop(&y), drop(&ym), drop(&dy), drop(&dx), drop(&dxm), drop(&am);
}

static void test_elementwise(void)
{
    const int64_t T = 3, n = 1001;
    size_t m = (size_t)(T * n);
    pair x = randn(m, 0.0f, 1.0f, 61), yv = out(m), dxv = out(m), a = randn(m, 0, 1, 62), s = out(m);
    RUN(be->dropout_forward(be, T, n, 0.3f, 7, 11, S(x), S(yv)));
    RUN(be->dropout_backward(be, T, n, 0.3f, 7, 11, S(x), S(dxv)));
    cmp("dropout forward", &yv, 0.0);
    cmp("dropout backward", &dxv, 0.0);
    RUN(be->add(be, (int64_t)m, S(x), S(a), S(s)));
    cmp("add", &s, 0.0);
    RUN(be->axpy(be, (int64_t)m, 0.37f, S(x), S(a)));
    cmp("axpy", &a, 1e-6);
    float *hs = malloc(4 * m);
    for (size_t i = 0; i < m; i++) hs[i] = (float)(i % 3 == 0);
    pair sp = mk(hs, 4 * m), u8 = mk(NULL, m), back = out(m);
    free(hs);
    RUN(be->act_to_u8(be, (int64_t)m, S(sp), S(u8)));
    RUN(be->u8_to_act(be, (int64_t)m, S(u8), S(back)));
    cmp_bytes("act_to_u8", &u8);
    cmp("u8_to_act", &back, 0.0);
    pair flag = mk((float[]){0.0f}, 4);
    RUN(be->check_finite(be, (int64_t)m, S(x), S(flag)));
    cmp("check_finite (finite)", &flag, 0.0);
    float bad[3] = {1.0f, NAN, 2.0f}, inf[2] = {INFINITY, 0.0f};
    pair pb = mk(bad, sizeof bad), pi = mk(inf, sizeof inf), f2 = mk((float[]){0.0f}, 4), f3 = mk((float[]){0.0f}, 4);
    RUN(be->check_finite(be, 3, S(pb), S(f2)));
    RUN(be->check_finite(be, 2, S(pi), S(f3)));
    float g2, g3;
    CHECK_OK(gpu->copy_to_host(gpu, &g2, f2.g, 4));
    CHECK_OK(gpu->copy_to_host(gpu, &g3, f3.g, 4));
    CHECK(g2 == 1.0f && g3 == 1.0f, "check_finite missed NaN (%g) or Inf (%g)", g2, g3);
    drop(&x), drop(&yv), drop(&dxv), drop(&a), drop(&s), drop(&sp), drop(&u8), drop(&back), drop(&flag);
    drop(&pb), drop(&pi), drop(&f2), drop(&f3);
}

static void test_readout_loss(int64_t T, int64_t B, int32_t K)
{
    size_t m = (size_t)(T * B * K);
    pair o = randn(m, 0.0f, 1.0f, 71), r = out(m), dr = randn(m, 0, 1, 72), doo = out(m);
    RUN(be->leaky_forward(be, T, B * K, 0.9f, 0.1f, S(o), S(r)));
    RUN(be->leaky_backward(be, T, B * K, 0.9f, 0.1f, S(dr), S(doo)));
    cmp("leaky forward", &r, 1e-6);
    cmp("leaky backward", &doo, 1e-6);
    int32_t *lab = malloc(4 * (size_t)B);
    for (int64_t b = 0; b < B; b++) lab[b] = (int32_t)((b * 7 + 3) % K);
    pair labels = mk(lab, 4 * (size_t)B);
    free(lab);
    for (int variant = 0; variant < 4; variant++) {
        const int per_step = variant & 1;
        const float eps = variant & 2 ? 0.1f : 0.0f; /* label smoothing */
        pair g = out(m), lm = out((size_t)(B * K)), st = out(2);
        RUN(be->softmax_xent(be, T, B, K, per_step, eps, S(o), (const int32_t *)S(labels), S(g), S(lm), S(st)));
        char t[112];
        snprintf(t, sizeof t, "softmax_xent T=%lld B=%lld K=%d per_step=%d eps=%g", (long long)T, (long long)B, K,
                 per_step, (double)eps);
        cmp(t, &g, 1e-5);
        cmp(t, &lm, 1e-6);
        cmp(t, &st, 1e-6);
        drop(&g), drop(&lm), drop(&st);
    }
    drop(&o), drop(&r), drop(&dr), drop(&doo), drop(&labels);
}

static void test_optim(void)
{
    const int64_t n = 1001;
    for (int variant = 0; variant < 4; variant++) {
        pair p = randn((size_t)n, 0.0f, 1.0f, 81), buf = out((size_t)n), m = randn((size_t)n, 0, 0, 0);
        pair v = randn((size_t)n, 0, 0, 0);
        RUN(be->zero(be, S(m), 4 * (size_t)n));
        RUN(be->zero(be, S(v), 4 * (size_t)n));
        for (int64_t step = 1; step <= 3; step++) {
            pair g = randn((size_t)n, 0.0f, 1.0f, 90 + (uint64_t)step);
            if (variant < 2)
                RUN(be->sgd_step(be, n, 0.1f, 0.9f, variant, 5e-4f, step, S(p), S(g), S(buf)));
            else
                RUN(be->adam_step(be, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, variant - 2, step, S(p), S(g), S(m), S(v)));
            drop(&g);
        }
        char t[64];
        snprintf(t, sizeof t, "%s variant %d after 3 steps", variant < 2 ? "sgd" : "adam", variant);
        cmp(t, &p, 1e-6);
        drop(&p), drop(&buf), drop(&m), drop(&v);
    }
}

/* The linear and conv cases on a backend of the given precision and conv options, against the fp32 CPU results. */
static void gemm_ops_with(sf_precision prec, sf_conv_algo algo, int32_t ws_mib, double tol)
{
    sf_cuda_options opt = {.graph = 1, .conv_workspace_mib = ws_mib, .conv_algo = algo};
    gpu = NULL;
    CHECK_OK(sf_cuda_backend_create(0, prec, &opt, &gpu));
    if (!gpu) return;
    gemm_tol = tol;
    gemm_worst = 0.0;
    test_gemm_ops();
    printf("%s linear/conv, conv %s, workspace %d MiB: worst rel err %.2e (bound %.0e)\n", sf_precision_name(prec),
           sf_conv_algo_name(algo), (int)ws_mib, gemm_worst, gemm_tol);
    if (algo == SF_CONV_ALGO_NHWC) { /* the forced path ran where it fits, not only its NCHW fallback */
        char report[16384];
        sf_cuda_conv_report(gpu, report, sizeof report);
        CHECK(strstr(report, "fwd        nhwc") && strstr(report, "bwd_data   nhwc") && strstr(report, "bwd_filter nhwc"),
              "conv_algo = nhwc at %d MiB: no op ran on NHWC copies:\n%s", (int)ws_mib, report);
    }
    sf_backend_free(gpu);
}

/* The conv cases on spikes in fp32 under conv_algo `algo` (split: every op of every shape on the split path, whose
 * TF32 parts run in chunks of images where the cap is small), against the fp32 CPU results: under split at 1e-6
 * (exact products, only fp32 sums round; a part converted to 16 bits, or small and large products in one
 * tensor-core sum, shows as 1e-6 and more), under auto at the fp32 conv bound (it may take FFT or Winograd). */
static void spike_convs_with(sf_conv_algo algo, int32_t ws_mib)
{
    sf_cuda_options opt = {.graph = 1, .conv_workspace_mib = ws_mib, .conv_algo = algo};
    gpu = NULL;
    CHECK_OK(sf_cuda_backend_create(0, SF_PRECISION_FP32, &opt, &gpu));
    if (!gpu) return;
    gemm_tol = algo == SF_CONV_ALGO_SPLIT ? 1e-6 : 1e-5;
    gemm_worst = 0.0;
    spike_x = true;
    for (size_t i = 0; i < sizeof gemm_conv_cases / sizeof gemm_conv_cases[0]; i++)
        test_conv(gemm_conv_cases[i].n, gemm_conv_cases[i].cin, gemm_conv_cases[i].h, gemm_conv_cases[i].w,
                  gemm_conv_cases[i].cout, gemm_conv_cases[i].k, gemm_conv_cases[i].stride, gemm_conv_cases[i].pad,
                  gemm_conv_cases[i].bias);
    spike_x = false;
    static char report[1 << 17];
    sf_cuda_conv_report(gpu, report, sizeof report);
    printf("fp32 conv of spikes, conv %s, workspace %d MiB: worst rel err %.2e (bound %.0e)\n", sf_conv_algo_name(algo),
           (int)ws_mib, gemm_worst, gemm_tol);
    if (gemm_worst > gemm_tol) fputs(report, stdout); /* which algorithms the failing ops ran */
    if (algo == SF_CONV_ALGO_SPLIT) { /* every op of a spike shape took the split path */
        int spikes = 0, split = 0;
        for (const char *l = report; (l = strstr(l, " spikes |")) != NULL; l++) {
            spikes++;
            const char *end = strchr(l, '\n');
            const char *p = strstr(l, " split ");
            split += p && (!end || p < end) && p < l + 40;
        }
        CHECK(spikes > 0 && split == spikes, "conv_algo = split at %d MiB: %d of %d spike ops on the split path:\n%s",
              (int)ws_mib, split, spikes, report);
    }
    sf_backend_free(gpu);
}

int main(void)
{
    if (sf_cuda_device_count() == 0) {
        fprintf(stderr, "test_gpu_ops: no CUDA device\n");
        return 1;
    }
    CHECK_OK(sf_cpu_backend_create(&cpu));
    CHECK_OK(sf_cuda_backend_create(0, SF_PRECISION_FP32, NULL, &gpu));
    if (!cpu || !gpu) return tu_finish("test_gpu_ops");
    test_lif();
    test_bn(1, 1, 1, 300);
    test_bn(6, 5, 7, 310);
    test_bn(40, 16, 64, 320);
    test_bn(30, 33, 1, 330);
    test_bn(50, 64, 1, 340); /* hw = 1, C % 4 == 0: 4 channels per thread over the rows */
    test_bn(7, 12, 1, 350);
    test_gemm_ops();
    test_binary_linear(64, 700, 1472, 1); /* W4's first layer: in padded to 704, dW copied out of scratch */
    test_binary_linear(7, 33, 5, 0);       /* SGEMMs backward, TF32 parts forward */
    test_binary_linear(1, 1, 1, 1);
    test_binary_linear(50, 61, 300, 1);    /* dW by bf16 parts, dx by SGEMM */
    test_binary_linear(3, 2100, 2003, 1);  /* out padded to 2008 in dx's segments */
    test_binary_linear(3, 9000, 500, 1);   /* the forward's TF32 parts in two chunks of W's rows */
    test_binary_linear(6000, 3, 4000, 0);  /* the backward's dy parts in three chunks of rows */
    test_binary_linear(23000, 1000, 512, 1); /* the forward's copies of x in two chunks of rows */
    test_binary_linear(2, 2400, 2400, 1);  /* W's parts too large for the backward's room: dx by SGEMM */
    test_pool(7, 9, 9, 2, 2, 0);
    test_pool(9, 28, 28, 2, 2, 0); /* windows that tile the plane: the tiled kernels */
    test_pool(4, 12, 6, 3, 3, 0);
    test_pool(3, 4, 8, 4, 4, 0);
    test_pool(3, 9, 9, 3, 2, 0);
    test_pool(1, 5, 6, 3, 1, 0);
    test_pool(6, 16, 16, 3, 2, 1); /* SpikingJelly's ResNet stem */
    test_pool(5, 7, 6, 3, 2, 1);
    test_pool(2, 5, 4, 2, 1, 1);
    test_elementwise();
    test_readout_loss(4, 5, 10);
    test_readout_loss(1, 1, 3);
    test_readout_loss(10, 64, 10);
    test_optim();
    printf("fp32 linear/conv: worst rel err %.2e (bound %.0e)\n", gemm_worst, gemm_tol);
    sf_backend_free(gpu);
    /* a 1 MiB workspace cap makes cuDNN's faster algorithms run on chunks of the batch; conv_algo = gemm runs every
     * conv op that fits through im2col + SGEMM (conv_gemm.cu), on the whole batch and in chunks */
    gemm_ops_with(SF_PRECISION_FP32, SF_CONV_ALGO_AUTO, 1, 1e-5);
    gemm_ops_with(SF_PRECISION_FP32, SF_CONV_ALGO_GEMM, 512, 1e-5);
    gemm_ops_with(SF_PRECISION_FP32, SF_CONV_ALGO_GEMM, 1, 1e-5);
    gemm_ops_with(SF_PRECISION_FP32, SF_CONV_ALGO_CUDNN, 512, 1e-5);
    /* cuDNN on NHWC copies: whole batch, and chunks of the batch where its copies fill a 1 MiB cap */
    gemm_ops_with(SF_PRECISION_FP32, SF_CONV_ALGO_NHWC, 512, 1e-5);
    gemm_ops_with(SF_PRECISION_FP32, SF_CONV_ALGO_NHWC, 1, 1e-5);
    /* TF32 GEMM/conv arithmetic, against the same fp32 CPU results */
    gemm_ops_with(SF_PRECISION_TF32, SF_CONV_ALGO_AUTO, 512, 1e-3);
    gemm_ops_with(SF_PRECISION_TF32, SF_CONV_ALGO_NHWC, 512, 1e-3);
    /* fp32 convolutions of spikes: the fastest path (auto), and TF32 parts forced, on whole batches and in chunks */
    spike_convs_with(SF_CONV_ALGO_AUTO, 512);
    spike_convs_with(SF_CONV_ALGO_SPLIT, 512);
    spike_convs_with(SF_CONV_ALGO_SPLIT, 1);
    sf_backend_free(cpu);
    return tu_finish("test_gpu_ops");
}
