/* test_gpu_precision.c — the CUDA backend with 16-bit activations (bf16, then fp16) against the CPU backend's fp32
 * ops, the reference. Every input is rounded to the 16-bit type on the host first and the CPU op gets the rounded
 * values, so what is measured is the op's own error: its 16-bit outputs (rounding: relative error up to 2^-8 for
 * bf16, 2^-11 for fp16) and sums in another order. Bounds (relative L2 error unless said):
 *   exact: the conversion op (against a host rounding to nearest even, ties, subnormals and overflow included),
 *     spikes, spike bytes and counts, max-pool values and argmax, byte conversions;
 *   1e-6 / 1e-5: float outputs computed from the same rounded inputs (LIF h, BN statistics and dγ, dβ, biases'
 *     gradients, logits and loss);
 *   1e-4: weight gradients the tensor cores accumulate in fp32 (linear);
 *   half the 16-bit outputs' bound: BN+LIF's dγ, dβ, summed from dy as it is stored between the backward's
 *     passes, in 16 bits (as autocast's batch norm sums its 16-bit incoming gradient; the sums cancel, and a short
 *     channel's error reaches 3e-3 in bf16);
 *   16-bit outputs (LIF and BN+LIF dx, BN, linear, conv, pools, dropout, add, axpy, readout, loss gradient, and a
 *     convolution's weight gradient, which cuDNN writes in 16 bits): 1e-2 for bf16, 2e-3 for fp16 (about 4× the
 *     rounding error of one step on random data);
 * every neuron model's kernels (LIF, PLIF with its dw 1e-4, IF, ALIF; their compact forward and masked backward)
 *   as the LIF's;
 * the LIF and BN+LIF kernels also at long T with the neuron state carried (spikes and v_out exact, ∂L/∂v 1e-5);
 * the event-driven ops (core/spikes.h): compact spikes (bits, lists, counts), spikes_expand, the LIF forward with
 *   compact output (s, h) and the recurrent layer's event-driven forward (s, h, compact output) exact; the
 *   event-driven linear forward and masked dx exactly the CPU's float sums rounded once (same order, same
 *   operations), its dW (float) exact, db 1e-6, the dense dx 16-bit; masks of nonzero gradients mark exactly the
 *   nonzero entries of the GPU's 16-bit dx and the CPU's marks except where its value is below 2^-22; the LIF's
 *   masked dx 16-bit; the recurrent layer's dx and dV 4× the 16-bit bound (each step reads back the 16-bit dx of
 *   the step after), its dense forward's h 1e-5 (cuBLAS's order: spikes may flip, then gradients are skipped);
 * then whole networks: a small conv net's loss within 2% (bf16) / 0.5% (fp16) of the CPU's fp32 loss, its output
 * and gradients within 10% / 5% relative L2 (spikes near the threshold may flip when their input is rounded), fp16's
 * loss scaling (overflowing steps skipped and the scale halved, parameters untouched, growth after 2000 good steps,
 * a NaN loss still fails the step), and 16-bit plans smaller than fp32's; event-driven nets (feed-forward and
 * recurrent, sparse on) within the same bounds, on their sparse paths, fitting a batch; sparse = auto measuring its
 * crossovers in 16 bits. The errors seen are printed. */
#include "core/net_internal.h"
#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "gemm_cases.h"
#include "testutil.h"

#include "core/rng.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static sf_backend *cpu, *gpu;
static sf_act_type act;      /* the GPU backend's storage type */
static const char *prec;     /* its precision's name */
static double tol;           /* the bound of 16-bit outputs */
static double worst;         /* the largest error of a 16-bit output seen */

/* x rounded to `act` (to nearest, ties to even), in double: p significant bits, a smallest step of 2^qmin
 * (subnormals), infinity from half an ulp above the largest finite value. */
static float round16(float x)
{
    const int p = act == SF_ACT_BF16 ? 8 : 11, qmin = act == SF_ACT_BF16 ? -133 : -24;
    const double inf_at = act == SF_ACT_BF16 ? ldexp(2.0 - ldexp(1.0, -8), 127) : 65520.0;
    if (!isfinite(x) || x == 0.0f) return x;
    double a = fabs((double)x);
    if (a >= inf_at) return copysignf(INFINITY, x);
    int e;
    frexp(a, &e);
    int q = e - p < qmin ? qmin : e - p;
    return copysignf((float)ldexp(nearbyint(ldexp(a, -q)), q), x);
}

/* A tensor on both backends: float on the CPU, `act` (or float when wide) on the GPU. */
typedef struct {
    size_t n;
    bool wide;
    float *c;
    void *g;
} ten;

static size_t gbytes(const ten *t) { return t->n * (t->wide ? 4 : sf_act_type_size(act)); }

static void *gpu_alloc(size_t bytes)
{
    void *p = NULL;
    CHECK_OK(gpu->alloc(gpu, bytes ? bytes : 4, &p));
    return p;
}

/* Host floats (representable in the GPU's type) into both sides: the GPU's converted on the device. */
static void put(ten *t, const float *h)
{
    memcpy(t->c, h, 4 * t->n);
    if (t->wide || !t->n) {
        CHECK_OK(gpu->copy_from_host(gpu, t->g, h, 4 * t->n));
        return;
    }
    float *tmp = gpu_alloc(4 * t->n);
    CHECK_OK(gpu->copy_from_host(gpu, tmp, h, 4 * t->n));
    CHECK_OK(gpu->convert(gpu, (int64_t)t->n, SF_ACT_F32, tmp, act, t->g));
    gpu->release(gpu, tmp);
}

/* The GPU side as host floats (malloc'd). */
static float *get(const ten *t)
{
    float *h = malloc(4 * (t->n + 1));
    if (t->wide || !t->n) {
        CHECK_OK(gpu->copy_to_host(gpu, h, t->g, 4 * t->n));
        return h;
    }
    float *tmp = gpu_alloc(4 * t->n);
    CHECK_OK(gpu->convert(gpu, (int64_t)t->n, act, t->g, SF_ACT_F32, tmp));
    CHECK_OK(gpu->copy_to_host(gpu, h, tmp, 4 * t->n));
    gpu->release(gpu, tmp);
    return h;
}

/* An output: NaN on both sides (0xff bytes are NaN in float, bf16 and fp16), so an unwritten element fails. */
static ten out_of(size_t n, bool wide)
{
    ten t = {n, wide, NULL, NULL};
    CHECK_OK(cpu->alloc(cpu, 4 * (n ? n : 1), (void **)&t.c));
    t.g = gpu_alloc(gbytes(&t));
    memset(t.c, 0xff, 4 * n);
    void *nan = malloc(gbytes(&t) + 1);
    memset(nan, 0xff, gbytes(&t));
    CHECK_OK(gpu->copy_from_host(gpu, t.g, nan, gbytes(&t)));
    free(nan);
    return t;
}
static ten out(size_t n) { return out_of(n, false); }
static ten out_f32(size_t n) { return out_of(n, true); }

static ten in_of(size_t n, float mean, float std, uint64_t seed, bool wide)
{
    ten t = out_of(n, wide);
    float *h = malloc(4 * (n + 1));
    tu_randn(h, (int64_t)n, mean, std, seed);
    for (size_t i = 0; !wide && i < n; i++) h[i] = round16(h[i]);
    put(&t, h);
    free(h);
    return t;
}
static ten in(size_t n, float mean, float std, uint64_t seed) { return in_of(n, mean, std, seed, false); }
static ten in_f32(size_t n, float mean, float std, uint64_t seed) { return in_of(n, mean, std, seed, true); }

static void drop(ten *t)
{
    cpu->release(cpu, t->c);
    gpu->release(gpu, t->g);
}

/* Bytes on both sides (spike bytes, argmax, labels). */
typedef struct {
    size_t n;
    void *c, *g;
} raw;

static raw raw_of(const void *host, size_t n)
{
    raw r = {n, NULL, gpu_alloc(n)};
    CHECK_OK(cpu->alloc(cpu, n ? n : 4, &r.c));
    void *fill = malloc(n + 1);
    if (host) memcpy(fill, host, n);
    else memset(fill, 0xff, n);
    memcpy(r.c, fill, n);
    CHECK_OK(gpu->copy_from_host(gpu, r.g, fill, n));
    free(fill);
    return r;
}

static void drop_raw(raw *r)
{
    cpu->release(cpu, r->c);
    gpu->release(gpu, r->g);
}

static void cmp_raw(const char *what, const raw *r)
{
    uint8_t *g = malloc(r->n + 1);
    CHECK_OK(gpu->copy_to_host(gpu, g, r->g, r->n));
    size_t bad = 0;
    for (size_t i = 0; i < r->n; i++) bad += ((const uint8_t *)r->c)[i] != g[i];
    CHECK(bad == 0, "%s %s: %zu of %zu bytes differ", prec, what, bad, r->n);
    free(g);
}

/* The GPU result against the CPU's: relative L2 error within `bound` (0: equal, NaN matching NaN). */
static double cmp(const char *what, const ten *t, double bound)
{
    float *g = get(t);
    double e = 0.0;
    if (bound == 0.0) {
        size_t bad = 0;
        for (size_t i = 0; i < t->n; i++) bad += g[i] != t->c[i] && !(isnan(g[i]) && isnan(t->c[i]));
        CHECK(bad == 0, "%s %s: %zu of %zu elements differ", prec, what, bad, t->n);
    } else {
        double *r = malloc(8 * (t->n + 1));
        for (size_t i = 0; i < t->n; i++) r[i] = t->c[i];
        e = tu_rel_err(g, r, (int64_t)t->n);
        CHECK(e <= bound, "%s %s: rel err %.3e > %.0e", prec, what, e, bound);
        free(r);
    }
    free(g);
    return e;
}

/* A 16-bit output, against the precision's bound. */
static void cmp16(const char *what, const ten *t)
{
    double e = cmp(what, t, tol);
    if (e > worst) worst = e;
}

#define RUN(expr)                                                                                                      \
    do {                                                                                                               \
        for (int side_ = 0; side_ < 2; side_++) {                                                                      \
            sf_backend *be = side_ ? gpu : cpu;                                                                        \
            CHECK_OK(expr);                                                                                            \
        }                                                                                                              \
    } while (0)
#define S(t) (side_ ? (float *)(t).g : (t).c)
#define SR(r) (side_ ? (r).g : (r).c)

static void test_convert(void)
{
    /* ties between neighbours, subnormals, overflow, signed zero, infinities and ordinary values */
    const float special[] = {1.0f + 0x1p-8f,  1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 0x1p-20f,
                             0x1p-24f,        0x1p-25f,          3 * 0x1p-26f,    0x1p-130f,          0x1p-134f,
                             65504.0f,        65519.0f,          65520.0f,        3.4e38f,            -0.0f,
                             INFINITY,        -INFINITY,         -2.5f,           1e-3f,              123456.0f};
    const size_t ns = sizeof special / sizeof special[0], n = 4096;
    float *h = malloc(4 * n), *want = malloc(4 * n);
    tu_randn(h, (int64_t)n, 0.0f, 1.0f, 5);
    for (size_t i = 0; i < n; i++) h[i] *= ldexpf(1.0f, (int)(i % 40) - 20);
    memcpy(h, special, sizeof special);
    for (size_t i = 0; i < n; i++) want[i] = round16(h[i]);
    float *src = gpu_alloc(4 * n), *back = gpu_alloc(4 * n);
    void *mid = gpu_alloc(2 * n), *mid2 = gpu_alloc(2 * n);
    CHECK_OK(gpu->copy_from_host(gpu, src, h, 4 * n));
    CHECK_OK(gpu->convert(gpu, (int64_t)n, SF_ACT_F32, src, act, mid));
    CHECK_OK(gpu->convert(gpu, (int64_t)n, act, mid, act, mid2)); /* same type: a copy */
    CHECK_OK(gpu->convert(gpu, (int64_t)n, act, mid2, SF_ACT_F32, back));
    float *got = malloc(4 * n);
    CHECK_OK(gpu->copy_to_host(gpu, got, back, 4 * n));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], 4) != 0) {
            if (bad++ < 5) fprintf(stderr, "convert %a: device %a, host rounding %a\n", h[i], got[i], want[i]);
        }
    CHECK(bad == 0, "convert: %zu of %zu values differ from rounding to nearest even (%zu special ones first)", bad, n,
          ns);
    /* scale: x *= f with f in device memory, in the 16-bit type and in float */
    const float f = 0.375f;
    float *fd = gpu_alloc(4);
    CHECK_OK(gpu->copy_from_host(gpu, fd, &f, 4));
    CHECK_OK(gpu->scale(gpu, (int64_t)n, act, fd, mid));
    CHECK_OK(gpu->convert(gpu, (int64_t)n, act, mid, SF_ACT_F32, back));
    CHECK_OK(gpu->copy_to_host(gpu, got, back, 4 * n));
    bad = 0;
    for (size_t i = ns; i < n; i++) bad += got[i] != round16(want[i] * f);
    CHECK(bad == 0, "scale (16-bit): %zu values differ", bad);
    CHECK_OK(gpu->scale(gpu, (int64_t)n, SF_ACT_F32, fd, src));
    CHECK_OK(gpu->copy_to_host(gpu, got, src, 4 * n));
    bad = 0;
    for (size_t i = ns; i < n; i++) bad += got[i] != h[i] * f;
    CHECK(bad == 0, "scale (float): %zu values differ", bad);
    gpu->release(gpu, src), gpu->release(gpu, back), gpu->release(gpu, mid), gpu->release(gpu, mid2);
    gpu->release(gpu, fd);
    free(h), free(want), free(got);
}

/* A PLIF's w (one per layer) with its dw, on both sides. w = 0: k = sigmoid(0) = 1/2 exactly on both (the device's
 * expf may differ from the host's by an ulp elsewhere, which could flip a spike; test_gpu_neurons covers other w). */
typedef struct {
    ten w, dw;
    sf_lif_state c, g;
} plif_w;

static plif_w plif_w_of(int64_t N)
{
    plif_w q = {.w = out_f32(1), .dw = out_f32(1)};
    const float w0 = 0.0f;
    put(&q.w, &w0);
    q.c = (sf_lif_state){.w = q.w.c, .dw = q.dw.c, .w_channels = 1, .w_hw = N};
    q.g = (sf_lif_state){.w = q.w.g, .dw = q.dw.g, .w_channels = 1, .w_hw = N};
    return q;
}

#define PLIF_ST(q, p) ((p).model == SF_NEURON_PLIF ? (side_ ? &(q).g : &(q).c) : NULL)

/* Every model's time-fused kernels in the 16-bit storage type: the LIF, then the PLIF (dw: a float sum over the
 * rounded inputs, 1e-4), the IF and the ALIF over the same cases. */
static void test_lif(void)
{
    const int64_t sizes[][2] = {{1, 1}, {5, 333}, {16, 4096}, {70, 129}};
    for (int k = 0; k < 64; k++) {
        sf_lif_params p;
        sf_lif_default_params(&p);
        p.model = (sf_neuron_model)(k / 16);
        p.rho = 0.9f;
        p.beta = 0.7f;
        p.surrogate = (sf_surrogate)(k % 4);
        p.alpha = sf_surrogate_default_alpha(p.surrogate);
        p.soft_reset = (k / 4) & 1;
        p.detach_reset = (k / 8) & 1;
        p.use_grad_threshold = k == 5;
        p.grad_threshold = 0.3f;
        int64_t T = sizes[k % 4][0], N = sizes[k % 4][1];
        size_t n = (size_t)(T * N);
        ten x = in(n, 0.5f, 1.0f, 100 + (uint64_t)k), ds = in(n, 0.0f, 1.0f, 200 + (uint64_t)k);
        ten s = out(n), h = out_f32(n), dx = out(n), dxr = out(n), cnt = out_f32(1);
        raw u8 = raw_of(NULL, n);
        plif_w q = plif_w_of(N);
        RUN(be->zero(be, S(cnt), 4));
        sf_lif_out oc = {.s = s.c, .s_u8 = u8.c, .h = h.c, .spike_count = cnt.c};
        sf_lif_out og = {.s = s.g, .s_u8 = u8.g, .h = h.g, .spike_count = cnt.g};
        RUN(be->lif_forward(be, &p, T, N, S(x), side_ ? &og : &oc, PLIF_ST(q, p)));
        RUN(be->lif_backward(be, &p, T, N, S(x), S(h), S(ds), S(dx), PLIF_ST(q, p)));
        RUN(be->lif_backward(be, &p, T, N, S(x), NULL, S(ds), S(dxr), PLIF_ST(q, p)));
        char w[128];
        snprintf(w, sizeof w, "%s %s soft=%d detach=%d thr=%d T=%lld N=%lld", sf_neuron_model_name(p.model),
                 sf_surrogate_name(p.surrogate), p.soft_reset, p.detach_reset, p.use_grad_threshold, (long long)T,
                 (long long)N);
        cmp(w, &s, 0.0);
        cmp_raw(w, &u8);
        cmp(w, &cnt, 0.0);
        cmp(w, &h, 1e-6);
        cmp16(w, &dx);
        cmp16(w, &dxr);
        if (p.model == SF_NEURON_PLIF) cmp(w, &q.dw, 1e-4);
        drop(&x), drop(&ds), drop(&s), drop(&h), drop(&dx), drop(&dxr), drop(&cnt), drop_raw(&u8);
        drop(&q.w), drop(&q.dw);
    }
}

static void test_bn(int64_t rows, int32_t C, int64_t hw, uint64_t seed)
{
    sf_bn_shape sh = {rows, C, hw};
    size_t n = (size_t)(rows * C * hw), c = (size_t)C;
    ten x = in(n, 0.3f, 2.0f, seed), dy = in(n, 0.0f, 1.0f, seed + 1), g = in_f32(c, 1.0f, 0.2f, seed + 2);
    ten b = in_f32(c, 0.1f, 0.2f, seed + 3), mean = out_f32(c), var = out_f32(c), y = out(n), dx = out(n);
    ten dg = out_f32(c), db = out_f32(c);
    RUN(be->bn_stats(be, sh, S(x), S(mean), S(var)));
    cmp("bn_stats mean", &mean, 1e-5);
    cmp("bn_stats var", &var, 1e-5);
    /* the rest from the CPU's statistics on both sides */
    CHECK_OK(gpu->copy_from_host(gpu, mean.g, mean.c, 4 * c));
    CHECK_OK(gpu->copy_from_host(gpu, var.g, var.c, 4 * c));
    RUN(be->bn_forward(be, sh, S(x), S(mean), S(var), 1e-5f, S(g), S(b), S(y)));
    cmp16("bn_forward", &y);
    RUN(be->bn_backward(be, sh, S(x), S(mean), S(var), 1e-5f, S(g), S(dy), S(dx), S(dg), S(db)));
    cmp16("bn_backward dx", &dx);
    cmp("bn_backward dgamma", &dg, 1e-5);
    cmp("bn_backward dbeta", &db, 1e-5);
    for (int keep = 0; keep < 2; keep++) {
        int64_t T = rows % 4 == 0 ? 4 : 1;
        sf_lif_params p;
        sf_lif_default_params(&p);
        p.surrogate = keep ? SF_SURROGATE_ATAN : SF_SURROGATE_SIGMOID;
        p.alpha = sf_surrogate_default_alpha(p.surrogate);
        ten s = out(n), h = out_f32(keep ? n : 0), ds = in(n, 0.0f, 1.0f, seed + 9);
        sf_lif_out oc = {.s = s.c, .h = keep ? h.c : NULL}, og = {.s = s.g, .h = keep ? h.g : NULL};
        RUN(be->bn_lif_forward(be, &p, T, sh, S(x), S(mean), S(var), 1e-5f, S(g), S(b), side_ ? &og : &oc, NULL));
        RUN(be->bn_lif_backward(be, &p, T, sh, S(x), keep ? S(h) : NULL, S(mean), S(var), 1e-5f, S(g), S(b), S(ds),
                                S(dx), S(dg), S(db), NULL, NULL, NULL));
        char w[128];
        snprintf(w, sizeof w, "bn_lif rows=%lld C=%d hw=%lld T=%lld keep_h=%d", (long long)rows, C, (long long)hw,
                 (long long)T, keep);
        cmp(w, &s, 0.0);
        cmp16(w, &dx);
        cmp(w, &dg, tol / 2);
        cmp(w, &db, tol / 2);
        drop(&s), drop(&h), drop(&ds);
    }
    drop(&x), drop(&dy), drop(&g), drop(&b), drop(&mean), drop(&var), drop(&y), drop(&dx), drop(&dg), drop(&db);
}

/* Long T with the neuron state carried (sf_lif_state: float on both sides) through the 16-bit kernels: LIF at
 * T = 300 (the backward recomputes in segments that end at T, a short one first; the forward runs one neuron per
 * thread, 32 steps ahead) and BN+LIF at T = 100, in one backward call and in two phases (sf_bn_split, the phase-2
 * sums this part's own: the same result). */
static void test_state(void)
{
    sf_lif_params p;
    sf_lif_default_params(&p);
    const int64_t T = 300, N = 97, n = T * N;
    ten x = in((size_t)n, 0.5f, 1.0f, 400), ds = in((size_t)n, 0.0f, 1.0f, 401);
    ten s = out((size_t)n), dx = out((size_t)n);
    ten vin = in_f32((size_t)N, 0.3f, 0.3f, 402), dvin = in_f32((size_t)N, 0.0f, 0.5f, 403);
    ten vout = out_f32((size_t)N), dvout = out_f32((size_t)N);
    sf_lif_state sc = {.v_in = vin.c, .v_out = vout.c, .dv_in = dvin.c, .dv_out = dvout.c};
    sf_lif_state sg = {.v_in = vin.g, .v_out = vout.g, .dv_in = dvin.g, .dv_out = dvout.g};
    sf_lif_out oc = {.s = s.c}, og = {.s = s.g};
    RUN(be->lif_forward(be, &p, T, N, S(x), side_ ? &og : &oc, side_ ? &sg : &sc));
    RUN(be->lif_backward(be, &p, T, N, S(x), NULL, S(ds), S(dx), side_ ? &sg : &sc));
    cmp("lif T=300 with state: spikes", &s, 0.0);
    cmp("lif T=300 with state: v_out", &vout, 0.0);
    cmp16("lif T=300 with state: dx", &dx);
    cmp("lif T=300 with state: dv_out", &dvout, 1e-5);
    drop(&x), drop(&ds), drop(&s), drop(&dx), drop(&vin), drop(&dvin), drop(&vout), drop(&dvout);

    const int64_t Tb = 100, B = 2, hw = 20;
    const int32_t C = 3;
    const int64_t nb = Tb * B * C * hw, Nb = B * C * hw;
    sf_bn_shape sh = {Tb * B, C, hw};
    ten bx = in((size_t)nb, 0.3f, 1.5f, 410), bds = in((size_t)nb, 0.0f, 1.0f, 411);
    ten g = in_f32((size_t)C, 1.0f, 0.2f, 412), b = in_f32((size_t)C, 0.8f, 0.3f, 413);
    ten mean = out_f32((size_t)C), var = out_f32((size_t)C);
    ten bvin = in_f32((size_t)Nb, 0.2f, 0.3f, 414), bdvin = in_f32((size_t)Nb, 0.0f, 0.5f, 415);
    RUN(be->bn_stats(be, sh, S(bx), S(mean), S(var)));
    CHECK_OK(gpu->copy_from_host(gpu, mean.g, mean.c, 4 * (size_t)C)); /* the CPU's statistics on both sides */
    CHECK_OK(gpu->copy_from_host(gpu, var.g, var.c, 4 * (size_t)C));
    for (int split = 0; split < 2; split++) {
        ten bs = out((size_t)nb), bdx = out((size_t)nb), dg = out_f32((size_t)C), db = out_f32((size_t)C);
        ten bdvout = out_f32((size_t)Nb);
        sf_lif_state bc = {.v_in = bvin.c, .dv_in = bdvin.c, .dv_out = bdvout.c};
        sf_lif_state bg = {.v_in = bvin.g, .dv_in = bdvin.g, .dv_out = bdvout.g};
        sf_lif_out boc = {.s = bs.c}, bog = {.s = bs.g};
        RUN(be->bn_lif_forward(be, &p, Tb, sh, S(bx), S(mean), S(var), 1e-5f, S(g), S(b), side_ ? &bog : &boc,
                               side_ ? &bg : &bc));
        if (!split) {
            RUN(be->bn_lif_backward(be, &p, Tb, sh, S(bx), NULL, S(mean), S(var), 1e-5f, S(g), S(b), S(bds), S(bdx),
                                    S(dg), S(db), side_ ? &bg : &bc, NULL, NULL));
        } else {
            sf_bn_split one = {.phase = 1};
            RUN(be->bn_lif_backward(be, &p, Tb, sh, S(bx), NULL, S(mean), S(var), 1e-5f, S(g), S(b), S(bds), S(bdx),
                                    S(dg), S(db), side_ ? &bg : &bc, &one, NULL));
            RUN(be->bn_lif_backward(be, &p, Tb, sh, S(bx), NULL, S(mean), S(var), 1e-5f, S(g), S(b), S(bds), S(bdx),
                                    NULL, NULL, side_ ? &bg : &bc,
                                    &(sf_bn_split){.phase = 2, .sum_dy = S(db), .sum_dyx = S(dg), .rows = Tb * B},
                                    NULL));
        }
        char w[96];
        snprintf(w, sizeof w, "bn_lif T=100 with state, %s", split ? "two phases" : "one call");
        cmp(w, &bs, 0.0);
        cmp16(w, &bdx);
        cmp(w, &dg, tol / 2);
        cmp(w, &db, tol / 2);
        cmp(w, &bdvout, 1e-5);
        drop(&bs), drop(&bdx), drop(&dg), drop(&db), drop(&bdvout);
    }
    drop(&bx), drop(&bds), drop(&g), drop(&b), drop(&mean), drop(&var), drop(&bvin), drop(&bdvin);
}

static void test_linear(int64_t rows, int32_t in_f, int32_t o, int bias, int want_dx)
{
    ten x = in((size_t)(rows * in_f), 0.0f, 1.0f, 31), w = in((size_t)o * in_f, 0.0f, 0.3f, 32);
    ten b = in_f32((size_t)o, 0.0f, 0.3f, 33), y = out((size_t)(rows * o)), dy = in((size_t)(rows * o), 0, 1, 34);
    ten dx = out((size_t)(rows * in_f)), dw = out_f32((size_t)o * in_f), db = out_f32((size_t)o);
    RUN(be->linear_forward(be, rows, in_f, o, S(x), S(w), bias ? S(b) : NULL, S(y)));
    RUN(be->linear_backward(be, rows, in_f, o, S(x), S(w), S(dy), want_dx ? S(dx) : NULL, S(dw), bias ? S(db) : NULL));
    char t[96];
    snprintf(t, sizeof t, "linear rows=%lld in=%d out=%d bias=%d", (long long)rows, in_f, o, bias);
    cmp16(t, &y);
    if (want_dx) cmp16(t, &dx);
    cmp(t, &dw, 1e-4);
    if (bias) cmp(t, &db, 1e-5);
    drop(&x), drop(&w), drop(&b), drop(&y), drop(&dy), drop(&dx), drop(&dw), drop(&db);
}

static void test_conv(int64_t n, int32_t cin, int32_t hgt, int32_t wid, int32_t cout, int32_t k, int32_t stride,
                      int32_t pad, int bias)
{
    sf_conv_shape sh = {n,   cin, hgt, wid, cout, k, stride, pad, (hgt + 2 * pad - k) / stride + 1,
                        (wid + 2 * pad - k) / stride + 1, false, false, false};
    size_t nx = (size_t)(n * cin * hgt * wid), ny = (size_t)(n * cout * sh.oh * sh.ow), nw = (size_t)(cout * cin * k * k);
    ten x = in(nx, 0.0f, 1.0f, 41), w = in(nw, 0.0f, 0.2f, 42), b = in_f32((size_t)cout, 0.0f, 0.2f, 43);
    ten y = out(ny), dy = in(ny, 0.0f, 1.0f, 44), dx = out(nx), dw = out_f32(nw), db = out_f32((size_t)cout);
    void *wsc = NULL, *wsg = NULL;
    size_t bc = cpu->conv_workspace(cpu, &sh, SF_CONV_PASS_BOTH), bg = gpu->conv_workspace(gpu, &sh, SF_CONV_PASS_BOTH);
    CHECK_OK(cpu->alloc(cpu, bc ? bc : 4, &wsc));
    wsg = gpu_alloc(bg);
    RUN(be->conv_forward(be, &sh, S(x), S(w), bias ? S(b) : NULL, S(y), side_ ? wsg : wsc));
    RUN(be->conv_backward(be, &sh, S(x), S(w), S(dy), S(dx), S(dw), bias ? S(db) : NULL, side_ ? wsg : wsc));
    char t[128];
    snprintf(t, sizeof t, "conv n=%lld %dx%dx%d -> %d k=%d s=%d p=%d", (long long)n, cin, hgt, wid, cout, k, stride,
             pad);
    cmp16(t, &y);
    cmp16(t, &dx);
    cmp16(t, &dw); /* through cuDNN it is written in 16 bits */
    if (bias) cmp(t, &db, 1e-5);
    cpu->release(cpu, wsc);
    gpu->release(gpu, wsg);
    drop(&x), drop(&w), drop(&b), drop(&y), drop(&dy), drop(&dx), drop(&dw), drop(&db);
}

static void test_gemm_ops(void) { gemm_cases_run(test_linear, test_conv); }

static void test_pool(int64_t n, int32_t h, int32_t w, int32_t k, int32_t s, int32_t pad)
{
    sf_pool_shape sh = {n, h, w, k, s, (h + 2 * pad - k) / s + 1, (w + 2 * pad - k) / s + 1, pad};
    size_t nx = (size_t)(n * h * w), ny = (size_t)(n * sh.oh * sh.ow);
    float *hx = malloc(4 * nx);
    tu_randn(hx, (int64_t)nx, 0.0f, 1.0f, 51);
    for (size_t i = 0; i < nx; i++) hx[i] = i % 2 ? round16(hx[i]) : hx[i] > 0.0f; /* spikes: exact ties */
    ten x = out(nx), y = out(ny), ym = out(ny), dy = in(ny, 0.0f, 1.0f, 52), dx = out(nx), dxm = out(nx);
    put(&x, hx);
    free(hx);
    raw am = raw_of(NULL, ny);
    RUN(be->avgpool_forward(be, &sh, S(x), S(y)));
    RUN(be->avgpool_backward(be, &sh, S(dy), S(dx)));
    RUN(be->maxpool_forward(be, &sh, S(x), S(ym), SR(am)));
    RUN(be->maxpool_backward(be, &sh, SR(am), S(dy), S(dxm)));
    char t[96];
    snprintf(t, sizeof t, "pool n=%lld %dx%d k=%d s=%d pad=%d", (long long)n, h, w, k, s, pad);
    cmp16(t, &y);
    cmp16(t, &dx);
    cmp(t, &ym, 0.0);
    cmp_raw(t, &am);
    cmp16(t, &dxm);
    drop(&x), drop(&y), drop(&ym), drop(&dy), drop(&dx), drop(&dxm), drop_raw(&am);
}

static void test_elementwise(void)
{
    const int64_t T = 3, n = 1001;
    size_t m = (size_t)(T * n);
    ten x = in(m, 0.0f, 1.0f, 61), y = out(m), dx = out(m), a = in(m, 0, 1, 62), s = out(m);
    RUN(be->dropout_forward(be, T, n, 0.3f, 7, 11, S(x), S(y)));
    RUN(be->dropout_backward(be, T, n, 0.3f, 7, 11, S(x), S(dx)));
    cmp16("dropout forward", &y);
    cmp16("dropout backward", &dx);
    RUN(be->add(be, (int64_t)m, S(x), S(a), S(s)));
    cmp16("add", &s);
    RUN(be->axpy(be, (int64_t)m, 0.37f, S(x), S(a)));
    cmp16("axpy", &a);
    float *hs = malloc(4 * m);
    for (size_t i = 0; i < m; i++) hs[i] = (float)(i % 3 == 0);
    ten sp = out(m), back = out(m);
    put(&sp, hs);
    free(hs);
    raw u8 = raw_of(NULL, m);
    RUN(be->act_to_u8(be, (int64_t)m, S(sp), SR(u8)));
    RUN(be->u8_to_act(be, (int64_t)m, SR(u8), S(back)));
    cmp_raw("act_to_u8", &u8);
    cmp("u8_to_act", &back, 0.0);
    drop(&x), drop(&y), drop(&dx), drop(&a), drop(&s), drop(&sp), drop(&back), drop_raw(&u8);
}

static void test_readout_loss(int64_t T, int64_t B, int32_t K)
{
    size_t m = (size_t)(T * B * K);
    ten o = in(m, 0.0f, 1.0f, 71), r = out(m), dr = in(m, 0, 1, 72), doo = out(m);
    RUN(be->leaky_forward(be, T, B * K, 0.9f, 0.1f, S(o), S(r)));
    RUN(be->leaky_backward(be, T, B * K, 0.9f, 0.1f, S(dr), S(doo)));
    cmp16("leaky forward", &r);
    cmp16("leaky backward", &doo);
    int32_t *lab = malloc(4 * (size_t)B);
    for (int64_t b = 0; b < B; b++) lab[b] = (int32_t)((b * 7 + 3) % K);
    raw labels = raw_of(lab, 4 * (size_t)B);
    free(lab);
    for (int variant = 0; variant < 4; variant++) {
        const int per_step = variant & 1;
        const float eps = variant & 2 ? 0.1f : 0.0f; /* label smoothing */
        ten g = out(m), lm = out_f32((size_t)(B * K)), st = out_f32(2);
        RUN(be->softmax_xent(be, T, B, K, per_step, eps, S(o), (const int32_t *)SR(labels), S(g), S(lm), S(st)));
        char t[112];
        snprintf(t, sizeof t, "softmax_xent T=%lld B=%lld K=%d per_step=%d eps=%g", (long long)T, (long long)B, K,
                 per_step, (double)eps);
        cmp16(t, &g);
        cmp(t, &lm, 1e-6);
        cmp(t, &st, 1e-6);
        drop(&g), drop(&lm), drop(&st);
    }
    drop(&o), drop(&r), drop(&dr), drop(&doo), drop_raw(&labels);
}

/* ---------------------------------------------------------------- event-driven ops (core/spikes.h) */

/* The compact form of a [rows, n] tensor on both sides, 0xff where nothing is written (lists past their counts). */
typedef struct {
    raw bits, idx, cnt;
} craw;

static craw craw_of(int64_t rows, int64_t n, bool lists)
{
    craw c = {raw_of(NULL, (size_t)(rows * sf_spike_words(n)) * 4), raw_of(NULL, lists ? (size_t)(rows * n) : 0),
              raw_of(NULL, (size_t)(rows * sf_spike_segs(n)) * 4)};
    return c;
}

#define SC(c, lists) (&(sf_spikes){SR((c).bits), (lists) ? SR((c).idx) : NULL, SR((c).cnt)})

static void cmp_craw(const char *what, const craw *c)
{
    char w[160];
    snprintf(w, sizeof w, "%.140s bits", what);
    cmp_raw(w, &c->bits);
    snprintf(w, sizeof w, "%.140s lists", what);
    cmp_raw(w, &c->idx);
    snprintf(w, sizeof w, "%.140s counts", what);
    cmp_raw(w, &c->cnt);
}

static void drop_craw(craw *c) { drop_raw(&c->bits), drop_raw(&c->idx), drop_raw(&c->cnt); }

/* A 16-bit output of a kernel that sums in the CPU op's order with its operations: the CPU's float result, rounded
 * once to the type. */
static void cmp_rounded(const char *what, const ten *t)
{
    float *g = get(t);
    size_t bad = 0;
    for (size_t i = 0; i < t->n; i++) bad += g[i] != round16(t->c[i]) && !(isnan(g[i]) && isnan(t->c[i]));
    CHECK(bad == 0, "%s %s: %zu of %zu elements are not the CPU's value rounded", prec, what, bad, t->n);
    free(g);
}

/* A mask of nonzero gradients ([rows, n] bits, with its count) on the GPU marks exactly the nonzero entries of its
 * stored dx, and differs from the CPU's mask (of float values) only where the CPU's value is below 2^-22 in
 * magnitude, which fp16 rounds to 0 or a subnormal that the GPU's own dx may not reach. */
static void cmp_mask(const char *what, const raw *bits, const ten *dx, const ten *count, int64_t rows, int64_t n)
{
    const int64_t words = sf_spike_words(n);
    uint32_t *gb = malloc(bits->n + 4);
    const uint32_t *cb = bits->c;
    CHECK_OK(gpu->copy_to_host(gpu, gb, bits->g, bits->n));
    float *g = get(dx), *gc = get(count);
    int64_t own = 0, other = 0, ones = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            const int bg = (gb[r * words + i / 32] >> (i % 32)) & 1, bc = (cb[r * words + i / 32] >> (i % 32)) & 1;
            ones += bg;
            own += bg != (g[r * n + i] != 0.0f);
            other += bg != bc && fabsf(dx->c[r * n + i]) >= 0x1p-22f;
        }
    CHECK(own == 0 && other == 0 && gc[0] == (float)ones,
          "%s %s mask: %lld bits disagree with the GPU's dx, %lld with the CPU's; count %g of %lld ones", prec, what,
          (long long)own, (long long)other, gc[0], (long long)ones);
    free(gb), free(g), free(gc);
}

/* The LIF forward writing its compact spikes on inputs that fire (1000) or never (-1), at density d; the conversions
 * of those spikes; the LIF backward with its mask of nonzero dx. */
static void test_lif_compact(sf_neuron_model model, int64_t T, int64_t B, int64_t n, double d, int g)
{
    const int64_t rows = T * B, total = rows * n;
    char w[128];
    snprintf(w, sizeof w, "%s compact T=%lld B=%lld n=%lld density %.2f θ_grad %d", sf_neuron_model_name(model),
             (long long)T, (long long)B, (long long)n, d, g);
    float *hx = malloc(4 * (size_t)(total + 1));
    for (int64_t i = 0; i < total; i++) hx[i] = sf_uniform(81, (uint64_t)n, (uint64_t)i) < d ? 1000.0f : -1.0f;
    ten x = out((size_t)total), s = out((size_t)total), h = out_f32((size_t)total), back = out((size_t)total);
    ten cnt = out_f32(1), cnt2 = out_f32(1), flag = out_f32(1), gcnt = out_f32(1), dx = out((size_t)total);
    put(&x, hx);
    free(hx);
    RUN(be->zero(be, S(cnt), 4));
    RUN(be->zero(be, S(cnt2), 4));
    RUN(be->zero(be, S(flag), 4));
    RUN(be->zero(be, S(gcnt), 4));
    craw c = craw_of(rows, n, true), c2 = craw_of(rows, n, true), m = craw_of(rows, n, false);
    sf_lif_params p;
    tu_seed_neuron(&p, g, 0.6f);
    p.model = model;
    plif_w q = plif_w_of(B * n);
    RUN(be->lif_forward(be, &p, T, B * n, S(x),
                        &(sf_lif_out){.s = S(s), .h = S(h), .spike_count = S(cnt), .c = *SC(c, true), .row = n},
                        PLIF_ST(q, p)));
    cmp(w, &s, 0.0);
    cmp(w, &h, 0.0);
    cmp(w, &cnt, 0.0);
    cmp_craw(w, &c);
    RUN(be->spikes_compact(be, rows, n, S(s), SC(c2, true), S(cnt2), S(flag)));
    cmp_craw("spikes_compact", &c2);
    cmp("spikes_compact count", &cnt2, 0.0);
    cmp("spikes_compact flag", &flag, 0.0);
    RUN(be->spikes_expand(be, rows, n, SR(c.bits), S(back)));
    cmp("spikes_expand", &back, 0.0);
    craw c3 = craw_of(rows, n, false); /* bits alone (lean plans): whole words are packed 16 bytes per thread */
    RUN(be->spikes_compact(be, rows, n, S(s), &(sf_spikes){SR(c3.bits), NULL, NULL}, NULL, NULL));
    cmp_raw("spikes_compact, bits alone", &c3.bits);
    drop_craw(&c3);
    RUN(be->spikes_compact(be, rows, n, S(x), SC(c2, true), NULL, S(flag))); /* 1000 and -1: not spikes */
    float *f = get(&flag);
    CHECK(f[0] == 1.0f, "%s %s: a non-spike input was not flagged", prec, w);
    free(f);
    /* the backward with its mask of nonzero dx, on inputs near the threshold (1000 and -1 leave the surrogate's
     * gradients below fp16's range) */
    ten xb = in((size_t)total, 0.6f, 1.0f, 82), ds = in((size_t)total, 0.0f, 1.0f, 83);
    RUN(be->lif_backward_masked(be, &p, T, B, n, S(xb), NULL, S(ds), S(dx), SC(m, false), S(gcnt), PLIF_ST(q, p)));
    cmp16(w, &dx);
    cmp_mask(w, &m.bits, &dx, &gcnt, rows, n);
    if (model == SF_NEURON_PLIF) cmp(w, &q.dw, 1e-4);
    drop(&q.w), drop(&q.dw);
    drop(&x), drop(&s), drop(&h), drop(&back), drop(&cnt), drop(&cnt2), drop(&flag), drop(&gcnt), drop(&dx);
    drop(&xb), drop(&ds);
    drop_craw(&c), drop_craw(&c2), drop_craw(&m);
}

/* The event-driven linear layer: y and the masked dx are the CPU's sums rounded once, dW (float, from the 16-bit
 * dy) equals the CPU's; the dense dx (GEMM) as any 16-bit output. */
static void test_spike_linear(int64_t rows, int32_t in_f, int32_t o, double d)
{
    char w[128];
    snprintf(w, sizeof w, "spike linear %lldx%dx%d density %.2f", (long long)rows, in_f, o, d);
    const size_t nx = (size_t)(rows * in_f), ny = (size_t)(rows * o), nw = (size_t)o * in_f;
    float *hx = malloc(4 * nx + 4), *hdy = malloc(4 * ny + 4), *hind = malloc(4 * ny + 4);
    for (size_t i = 0; i < nx; i++) hx[i] = sf_uniform(91, (uint64_t)in_f, i) < d;
    ten x = out(nx), wt = in(nw, 0.0f, 0.3f, 92), b = in_f32((size_t)o, 0.1f, 0.2f, 93), y = out(ny);
    ten dy = out(ny), dx = out(nx), dw = out_f32(nw), db = out_f32((size_t)o), ind = out(ny);
    put(&x, hx);
    tu_randn(hdy, (int64_t)ny, 0.0f, 1.0f, 94);
    for (size_t i = 0; i < ny; i++) hdy[i] = round16(hdy[i]);
    put(&dy, hdy);
    void *wsc = NULL, *wsg = gpu_alloc(gpu->spike_linear_workspace(gpu, rows, in_f, o));
    CHECK_OK(cpu->alloc(cpu, cpu->spike_linear_workspace(cpu, rows, in_f, o) + 4, &wsc));
    craw c = craw_of(rows, in_f, true), m = craw_of(rows, o, false);
    RUN(be->spikes_compact(be, rows, in_f, S(x), SC(c, true), NULL, NULL));
    cmp_craw(w, &c);
    RUN(be->spike_linear_forward(be, rows, in_f, o, SC(c, true), S(wt), S(b), S(y), side_ ? wsg : wsc));
    cmp_rounded(w, &y);
    RUN(be->spike_linear_backward(be, rows, in_f, o, SR(c.bits), S(wt), S(dy), NULL, S(dx), S(dw), S(db),
                                  side_ ? wsg : wsc));
    cmp(w, &dw, 0.0);
    cmp(w, &db, 1e-6);
    cmp16(w, &dx);
    /* a gradient with zeros: the dx summed over its nonzero entries */
    for (size_t i = 0; i < ny; i++) {
        if (sf_uniform(95, 1, i) < 0.8) hdy[i] = 0.0f;
        hind[i] = hdy[i] != 0.0f;
    }
    put(&dy, hdy);
    put(&ind, hind);
    RUN(be->spikes_compact(be, rows, o, S(ind), SC(m, false), NULL, NULL));
    RUN(be->spike_linear_backward(be, rows, in_f, o, SR(c.bits), S(wt), S(dy), SC(m, false), S(dx), S(dw), NULL,
                                  side_ ? wsg : wsc));
    cmp_rounded(w, &dx);
    cmp(w, &dw, 0.0);
    free(hx), free(hdy), free(hind);
    cpu->release(cpu, wsc);
    gpu->release(gpu, wsg);
    drop(&x), drop(&wt), drop(&b), drop(&y), drop(&dy), drop(&dx), drop(&dw), drop(&db), drop(&ind);
    drop_craw(&c), drop_craw(&m);
}

/* How many spikes differ between the sides. */
static int64_t spike_flips(const ten *s)
{
    float *g = get(s);
    int64_t k = 0;
    for (size_t i = 0; i < s->n; i++) k += g[i] != s->c[i];
    free(g);
    return k;
}

/* The recurrent layer. Event-driven forward: spikes, h and the compact output equal the CPU's (its sums run in the
 * CPU's order over the same 16-bit V); the dense one sums V·s in cuBLAS's order (h within 1e-5; a potential within
 * rounding of the threshold may fire on one side only, and then gradients are not compared). Gradients: dx and dV
 * within 4× the 16-bit bound, since each step's Vᵀ·dy_{t+1} reads back the 16-bit dx of the step after. */
static void test_rlif(int64_t T, int64_t B, int64_t n, int g)
{
    const int64_t rows = T * B, total = rows * n;
    ten x = in((size_t)total, 0.7f, 1.0f, 101), v = in((size_t)(n * n), 0.0f, 1.5f / sqrtf((float)n), 102);
    ten ds = in((size_t)total, 0.0f, 1.0f, 103);
    void *wsc = NULL, *wsg = gpu_alloc(gpu->rlif_workspace(gpu, T, B, n));
    CHECK_OK(cpu->alloc(cpu, cpu->rlif_workspace(cpu, T, B, n) + 4, &wsc));
    sf_lif_params p;
    tu_seed_neuron(&p, g, 0.5f);
    for (int sparse = 0; sparse < 2; sparse++) {
        char w[160];
        snprintf(w, sizeof w, "RLIF T=%lld B=%lld n=%lld θ_grad %d %s", (long long)T, (long long)B, (long long)n, g,
                 sparse ? "sparse" : "dense");
        ten s = out((size_t)total), h = out_f32((size_t)total), cnt = out_f32(1);
        craw c = craw_of(rows, n, true);
        RUN(be->zero(be, S(cnt), 4));
        RUN(be->rlif_forward(be, &p, T, B, n, S(x), S(v), sparse,
                             &(sf_lif_out){.s = S(s), .h = S(h), .spike_count = S(cnt), .c = *SC(c, true), .row = n},
                             side_ ? wsg : wsc));
        const bool exact = sparse && n <= 8192; /* past 8192 neurons the GPU runs the dense loop */
        const int64_t flips = spike_flips(&s);
        CHECK(exact ? flips == 0 : flips <= total / 1000, "%s %s: %lld of %lld spikes differ", prec, w,
              (long long)flips, (long long)total);
        if (flips) {
            printf("%s %s: %lld spikes differ (dense sums in another order); gradients not compared\n", prec, w,
                   (long long)flips);
        } else {
            cmp(w, &h, exact ? 0.0 : 1e-5);
            cmp(w, &cnt, 0.0);
            cmp_craw(w, &c);
            const int flags = sparse ? SF_RLIF_SPARSE_DV | SF_RLIF_SPARSE_DY : 0;
            for (int recompute = 0; recompute < 2; recompute++) {
                ten dx = out((size_t)total), dv = out_f32((size_t)(n * n)), gc = out_f32(1);
                craw m = craw_of(rows, n, false);
                RUN(be->zero(be, S(gc), 4));
                RUN(be->rlif_backward(be, &p, T, B, n, S(x), recompute ? NULL : S(h), NULL, S(v), S(ds), sparse, flags,
                                      S(dx), S(dv), SC(m, false), S(gc), side_ ? wsg : wsc));
                char wb[200];
                snprintf(wb, sizeof wb, "%.160s backward %s", w, recompute ? "recompute" : "saved h");
                double ex = cmp(wb, &dx, 4 * tol), ev = cmp(wb, &dv, 4 * tol);
                cmp_mask(wb, &m.bits, &dx, &gc, rows, n);
                printf("%s %s: dx rel err %.2e, dV %.2e\n", prec, wb, ex, ev);
                drop(&dx), drop(&dv), drop(&gc), drop_craw(&m);
            }
        }
        drop(&s), drop(&h), drop(&cnt), drop_craw(&c);
    }
    cpu->release(cpu, wsc);
    gpu->release(gpu, wsg);
    drop(&x), drop(&v), drop(&ds);
}

static void test_sparse_ops(void)
{
    const int64_t lif[][3] = {{4, 3, 1000}, {1, 1, 7}, {3, 4, 300}, {2, 1, 513}, {3, 2, 512}};
    const double dens[] = {0.0, 0.05, 0.5, 1.0};
    for (int i = 0; i < 5; i++)
        for (int d = 0; d < 4; d++)
            for (int m = 0; m < 4; m++) /* every model at one density each, the LIF at all */
                if (m == 0 || m == d)
                    test_lif_compact((sf_neuron_model)m, lif[i][0], lif[i][1], lif[i][2], dens[d], (i + d) % 3);
    const struct {
        int64_t rows;
        int32_t in, out;
    } lin[] = {{37, 300, 65}, {1, 1, 1}, {12, 513, 17}, {5, 33, 2100}, {640, 700, 1472}};
    for (int i = 0; i < 5; i++)
        for (int d = 0; d < 4; d++) test_spike_linear(lin[i].rows, lin[i].in, lin[i].out, dens[d]);
    test_rlif(6, 3, 40, 0);
    test_rlif(1, 1, 9, 2);
    test_rlif(9, 2, 300, 1);
    test_rlif(20, 4, 1472, 2);
    test_rlif(3, 2, 8300, 0); /* more than the persistent kernel holds: the dense loop runs */
}

/* ---------------------------------------------------------------- whole networks */

enum { NT = 4, NB = 8, NC = 2, NHW = 8, NK = 5 };

static void add(sf_net *net, sf_layer_kind kind, int32_t n) { tu_add_layer(net, kind, n, 1); }

/* The memory mode of the nets image_net makes, and whether their convolutions are chosen without timing (the
 * deterministic choice, the same in every net: test_lean_nets). */
static sf_memory_mode net_memory = SF_MEMORY_RECOMPUTE;
static int net_untimed = 0;

/* An empty net for NC×NHW×NHW inputs on dev in precision, its convolutions as algo asks. */
static sf_net *image_net(sf_device dev, sf_precision precision, sf_conv_algo algo)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = dev;
    p.precision = precision;
    p.memory = net_memory;
    p.cuda.conv_algo = algo;
    p.cuda.deterministic = net_untimed;
    if (net_untimed) p.cuda.conv_lean = 0.0f;
    p.in_channels = NC, p.in_height = NHW, p.in_width = NHW;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&p, &net));
    return net;
}

/* conv → BN → LIF → maxpool → conv → BN → LIF → flatten → linear → LIF → linear, mean readout, SGD. */
static sf_net *small_net(sf_device dev, sf_precision precision)
{
    sf_net *net = image_net(dev, precision, SF_CONV_ALGO_AUTO);
    if (!net) return NULL;
    add(net, SF_LAYER_CONV2D, 8);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_MAXPOOL2D, 0);
    add(net, SF_LAYER_CONV2D, 8);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_FLATTEN, 0);
    add(net, SF_LAYER_LINEAR, 32);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_LINEAR, NK);
    CHECK_OK(sf_net_compile(net, NT, NB));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.lr = 0.1f;
    o.momentum = 0.9f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

static void batch(int step, float *x, int32_t *labels)
{
    tu_randn(x, NT * NB * NC * NHW * NHW, 0.5f, 1.0f, 300 + (uint64_t)step);
    for (int b = 0; b < NB; b++) labels[b] = (b * 3 + step) % NK;
}

static double rel_l2(const float *a, const float *b, int64_t n, double scale)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] / scale - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One forward, loss and backward of the same net (same seed: same initial parameters) on the CPU in fp32 (c) and on
 * the GPU (g): the step results, the loss's relative difference (*le) and the gradients' relative L2 error (*ge).
 * fp16 runs at a loss scale of 256, where the weight gradients cuDNN writes in fp16 cannot overflow (the split step
 * has no skipping); its gradients are those of the scaled loss until the update. */
static void step_both(sf_net *c, sf_net *g, sf_precision p, const float *x, const int32_t *labels, sf_step_result *rc,
                      sf_step_result *rg, double *le, double *ge)
{
    sf_net_state st;
    CHECK_OK(sf_net_get_state(g, &st));
    st.loss_scale = p == SF_PRECISION_FP16 ? 256.0f : 1.0f;
    CHECK_OK(sf_net_set_state(g, &st));
    CHECK_OK(sf_net_forward(c, x, 1));
    CHECK_OK(sf_net_forward(g, x, 1));
    CHECK_OK(sf_net_loss(c, labels, rc));
    CHECK_OK(sf_net_loss(g, labels, rg));
    CHECK_OK(sf_net_backward(c));
    CHECK_OK(sf_net_backward(g));
    *le = fabs((double)rg->loss - rc->loss) / fabs((double)rc->loss);
    int64_t nc, ng;
    float *gc = tu_net_read_role(c, SF_ROLE_GRAD, &nc), *gg = tu_net_read_role(g, SF_ROLE_GRAD, &ng);
    *ge = nc == ng ? rel_l2(gg, gc, nc, st.loss_scale) : INFINITY;
    free(gc), free(gg);
}

/* The small conv net (step_both): loss, output and gradients close; the 16-bit plan keeps fewer bytes; it learns. */
static void test_net(sf_precision p, double loss_tol, double grad_tol)
{
    sf_net *c = small_net((sf_device){SF_DEVICE_CPU, 0}, SF_PRECISION_FP32);
    sf_net *g = small_net((sf_device){SF_DEVICE_CUDA, 0}, p);
    if (!c || !g) return;
    static float x[NT * NB * NC * NHW * NHW];
    int32_t labels[NB];
    batch(0, x, labels);
    sf_step_result rc, rg;
    double le, ge;
    step_both(c, g, p, x, labels, &rc, &rg, &le, &ge);
    CHECK(le <= loss_tol, "%s net: loss %.6g on the GPU, %.6g on the CPU (fp32): rel %.3g > %g", prec, rg.loss,
          rc.loss, le, loss_tol);
    int32_t L = sf_net_num_layers(c);
    float oc[NT * NB * NK], og[NT * NB * NK];
    CHECK_OK(sf_net_read_activation(c, L, oc));
    CHECK_OK(sf_net_read_activation(g, L, og));
    double oe = rel_l2(og, oc, NT * NB * NK, 1.0);
    CHECK(oe <= grad_tol, "%s net: output rel L2 %.3g > %g", prec, oe, grad_tol);
    CHECK(ge <= grad_tol, "%s net: gradients rel L2 %.3g > %g", prec, ge, grad_tol);
    sf_memory_plan pc, pg;
    CHECK_OK(sf_net_memory_plan(c, &pc));
    CHECK_OK(sf_net_memory_plan(g, &pg));
    CHECK(pg.saved < pc.saved, "%s plan keeps %zu bytes, fp32's %zu", prec, pg.saved, pc.saved);
    printf("%s net vs CPU fp32: loss %.6g vs %.6g (rel %.2e), output rel %.2e, gradients rel %.2e; saved %zu vs %zu "
           "bytes\n",
           prec, rg.loss, rc.loss, le, oe, ge, pg.saved, pc.saved);
    /* a few training steps: the 16-bit net learns as the fp32 one does */
    float first = 0, last = 0;
    for (int s = 1; s <= 30; s++) {
        batch(s % 3, x, labels);
        CHECK_OK(sf_net_train_step(g, x, labels, &rg));
        if (s == 1) first = rg.loss;
        last = rg.loss;
    }
    CHECK(last < first, "%s net: loss %.4g after 30 steps on 3 batches, %.4g at the first", prec, last, first);
    sf_net_free(c);
    sf_net_free(g);
}

static double twin_grad_err(sf_net *d, sf_net *g, sf_precision p, const float *x, const int32_t *labels);

/* conv → BN → LIF → conv → BN → add (the first LIF's spikes) → LIF → conv stride 2 → BN → LIF → flatten → linear,
 * every tensor kept for reading. Under conv_algo = nhwc the seven tensors from the first conv to the add's LIF are
 * NHWC; the last conv writes NCHW, as flatten reads its block's spikes so. */
static sf_net *layout_net(sf_device dev, sf_precision precision, sf_conv_algo algo, bool keep)
{
    sf_net *net = image_net(dev, precision, algo);
    if (!net) return NULL;
    CHECK_OK(sf_net_set_keep_activations(net, keep));
    add(net, SF_LAYER_CONV2D, 8);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_CONV2D, 8);
    add(net, SF_LAYER_BATCHNORM, 0);
    sf_layer_desc d;
    sf_layer_default_desc(SF_LAYER_ADD, &d);
    d.input2 = 3; /* the first LIF's spikes */
    CHECK_OK(sf_net_add(net, &d, NULL));
    add(net, SF_LAYER_LIF, 0);
    tu_add_layer(net, SF_LAYER_CONV2D, 16, 2);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_FLATTEN, 0);
    add(net, SF_LAYER_LINEAR, NK);
    CHECK_OK(sf_net_compile(net, NT, NB));
    return net;
}

static int nhwc_tensors(const sf_net *net)
{
    int n = 0;
    for (int32_t t = 0; t <= net->n_layers; t++) n += net->tensors[t].nhwc;
    return n;
}

/* The layout net with NHWC tensors on the GPU in precision p against a reference: in fp32 the CPU (the arithmetic
 * differs only in the order of sums); in 16 bits the same net on NCHW tensors on the GPU in p, as 16-bit potentials
 * that round across θ flip spikes, and the flips cascade through this net's add and three blocks (against the CPU
 * its gradients differ by about 0.3 in either layout). Not in TF32: there each layout's convolutions take the path
 * timed fastest, and a first convolution on im2col + GEMM (TF32-rounded) instead of an FMA kernel of cuDNN's flipped
 * enough spikes for 0.19 of gradient error against the CPU (H200). The loss, the gradients, and every tensor and
 * membrane potential read back (NCHW order on both sides). */
static void test_nhwc_net(sf_precision p, double loss_tol, double grad_tol)
{
    const bool cpu_ref = p == SF_PRECISION_FP32;
    sf_net *r = cpu_ref ? layout_net((sf_device){SF_DEVICE_CPU, 0}, SF_PRECISION_FP32, SF_CONV_ALGO_AUTO, true)
                        : layout_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_CONV_ALGO_NCHW, true);
    sf_net *g = layout_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_CONV_ALGO_NHWC, true);
    if (!r || !g) return;
    CHECK(nhwc_tensors(g) == 7 && nhwc_tensors(r) == 0, "%s layout net: %d and %d NHWC tensors, expected 7 and 0",
          prec, nhwc_tensors(g), nhwc_tensors(r));
    static float x[NT * NB * NC * NHW * NHW];
    int32_t labels[NB];
    batch(0, x, labels);
    sf_step_result rr, rg;
    double le, ge;
    if (cpu_ref) {
        step_both(r, g, p, x, labels, &rr, &rg, &le, &ge);
    } else {
        ge = twin_grad_err(r, g, p, x, labels);
        CHECK_OK(sf_net_loss(r, labels, &rr));
        CHECK_OK(sf_net_loss(g, labels, &rg));
        le = fabs((double)rg.loss - rr.loss) / fabs((double)rr.loss);
    }
    const char *ref = cpu_ref ? "the CPU (fp32)" : "NCHW tensors";
    CHECK(le <= loss_tol, "%s NHWC net: loss %.6g, %.6g on %s: rel %.3g > %g", prec, rg.loss, rr.loss, ref, le,
          loss_tol);
    CHECK(ge <= grad_tol, "%s NHWC net: gradients rel L2 %.3g > %g against %s", prec, ge, grad_tol, ref);
    double worst_t = 0.0;
    for (int32_t t = 1; t <= g->n_layers; t++) {
        if (g->layers[t - 1].absorbed) continue; /* a BN that its LIF runs: its output is never stored */
        const int64_t n = (int64_t)NT * NB * g->tensors[t].per_sample;
        float *vr = malloc(sizeof *vr * (size_t)n), *vg = malloc(sizeof *vg * (size_t)n);
        const bool lif = g->layers[t - 1].d.kind == SF_LAYER_LIF;
        for (int what = 0; what < 1 + lif; what++) {
            CHECK_OK(what ? sf_net_read_membrane(r, t, vr) : sf_net_read_activation(r, t, vr));
            CHECK_OK(what ? sf_net_read_membrane(g, t, vg) : sf_net_read_activation(g, t, vg));
            /* spikes: the share that differs (elements in a wrong order would differ in about half); other values:
             * the relative L2 error */
            const bool spikes = what == 0 && g->tensors[t].binary;
            double e = 0.0;
            if (spikes) {
                for (int64_t i = 0; i < n; i++) e += vg[i] != vr[i];
                e /= (double)n;
            } else {
                e = rel_l2(vg, vr, n, 1.0);
            }
            const double bound = spikes ? 0.05 : grad_tol;
            CHECK(e <= bound, "%s NHWC net: tensor %d %s error %.3g > %g against %s", prec, t,
                  what ? "membrane" : "value", e, bound, ref);
            if (e > worst_t) worst_t = e;
        }
        free(vr), free(vg);
    }
    printf("%s NHWC net vs %s: loss rel %.2e, gradients rel %.2e, tensors read back %.2e\n", prec, ref, le, ge,
           worst_t);
    sf_net_free(r);
    sf_net_free(g);
}

/* memory = lean against recompute on the GPU in precision p, on the small net (conv, max-pool, linear → LIF) and the
 * layout net (NHWC tensors outside fp32, an add, a stride-2 conv), their convolutions chosen alike without timing:
 * the lean backward reruns the layers that feed each neuron from the kept spike bits, so the loss and the gradients
 * of a step, and the parameters after three training steps (the step's CUDA graph), are bitwise the same; the lean
 * plan keeps fewer bytes. */
static void test_lean_nets(sf_precision p)
{
    static float x[NT * NB * NC * NHW * NHW];
    int32_t labels[NB];
    for (int which = 0; which < 2; which++) {
        sf_net *n[2];
        net_untimed = 1;
        for (int m = 0; m < 2; m++) {
            net_memory = m ? SF_MEMORY_LEAN : SF_MEMORY_RECOMPUTE;
            n[m] = which ? layout_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_CONV_ALGO_AUTO, false)
                         : small_net((sf_device){SF_DEVICE_CUDA, 0}, p);
        }
        net_untimed = 0;
        net_memory = SF_MEMORY_RECOMPUTE;
        if (!n[0] || !n[1]) return;
        const char *name = which ? "layout net" : "small net";
        sf_step_result r[2];
        float *g[2], *w[2];
        int64_t ng[2], nw[2];
        sf_memory_plan plan[2];
        for (int m = 0; m < 2; m++) {
            sf_optim_params o;
            sf_optim_default_params(&o);
            o.lr = 0.1f;
            o.momentum = 0.9f;
            if (which) CHECK_OK(sf_net_set_optimizer(n[m], &o));
            batch(0, x, labels);
            CHECK_OK(sf_net_forward(n[m], x, 1));
            CHECK_OK(sf_net_loss(n[m], labels, &r[m]));
            CHECK_OK(sf_net_backward(n[m]));
            g[m] = tu_net_read_role(n[m], SF_ROLE_GRAD, &ng[m]);
            for (int s = 1; s <= 3; s++) {
                batch(s, x, labels);
                sf_step_result ignored;
                CHECK_OK(sf_net_train_step(n[m], x, labels, &ignored));
            }
            w[m] = tu_net_read_role(n[m], SF_ROLE_PARAM, &nw[m]);
            CHECK_OK(sf_net_memory_plan(n[m], &plan[m]));
        }
        CHECK(r[0].loss == r[1].loss, "%s %s lean: loss %.9g, recompute %.9g", prec, name, r[1].loss, r[0].loss);
        CHECK(ng[0] == ng[1] && !memcmp(g[0], g[1], sizeof *g[0] * (size_t)ng[0]),
              "%s %s lean: gradients differ from recompute's (rel %.3g)", prec, name,
              ng[0] == ng[1] ? rel_l2(g[1], g[0], ng[0], 1.0) : INFINITY);
        CHECK(nw[0] == nw[1] && !memcmp(w[0], w[1], sizeof *w[0] * (size_t)nw[0]),
              "%s %s lean: parameters after 3 steps differ from recompute's (rel %.3g)", prec, name,
              nw[0] == nw[1] ? rel_l2(w[1], w[0], nw[0], 1.0) : INFINITY);
        CHECK(plan[1].saved < plan[0].saved, "%s %s: lean keeps %zu bytes, recompute %zu", prec, name, plan[1].saved,
              plan[0].saved);
        printf("%s %s: lean keeps %zu bytes, recompute %zu; workspace %zu / %zu\n", prec, name, plan[1].saved,
               plan[0].saved, plan[1].workspace, plan[0].workspace);
        for (int m = 0; m < 2; m++) free(g[m]), free(w[m]), sf_net_free(n[m]);
    }
}

/* Event-driven nets: input spikes → linear 300 → LIF (or RLIF) → linear 260 → LIF → linear 4, sparse on, θ_grad
 * with grad_cut, on the GPU in precision p (step_both): the loss within test_net's bound of the CPU's fp32, the
 * gradients within its bound of the same net run dense on the GPU in p (θ_grad cuts where the potential crosses it,
 * so a 16-bit potential rounded across θ_grad drops or keeps a whole step's gradient: against fp32 the gradients
 * differ by more than the arithmetic's error; the dense twin in p cuts alike), every eligible layer on its
 * event-driven paths; fifteen Adam steps on that batch (the step's
 * CUDA graph recorded) fit it. A net with sparse = auto measures its crossovers in p at compile: each in [0, 0.5]. */
enum { ST = 9, SB = 5, SIN = 37 };

static sf_net *sparse_net(sf_device dev, sf_precision precision, sf_sparse_mode mode, bool rec)
{
    sf_net_params np;
    sf_net_default_params(&np);
    np.device = dev;
    np.precision = precision;
    np.in_channels = SIN;
    np.sparse = mode;
    np.input_spikes = 1;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&np, &net));
    if (!net) return NULL;
    const int32_t sizes[] = {300, 0, 260, 0, 4};
    for (int l = 0; l < 5; l++) {
        sf_layer_desc d;
        sf_layer_default_desc(l % 2 ? (rec && l == 1 ? SF_LAYER_RLIF : SF_LAYER_LIF) : SF_LAYER_LINEAR, &d);
        d.out_features = sizes[l];
        d.init_gain = l % 2 ? 1.0f : 5.0f;
        tu_seed_neuron(&d.lif, 2, 0.4f);
        CHECK_OK(sf_net_add(net, &d, NULL));
    }
    CHECK_OK(sf_net_compile(net, ST, SB));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = SF_OPT_ADAM;
    o.lr = 0.01f;
    CHECK_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* The gradients of net g against its twin d (same parameters), both on the GPU in p under the same loss scale. */
static double twin_grad_err(sf_net *d, sf_net *g, sf_precision p, const float *x, const int32_t *labels)
{
    sf_net *nets[2] = {d, g};
    for (int i = 0; i < 2; i++) {
        sf_net_state st;
        sf_step_result r;
        CHECK_OK(sf_net_get_state(nets[i], &st));
        st.loss_scale = p == SF_PRECISION_FP16 ? 256.0f : 1.0f;
        CHECK_OK(sf_net_set_state(nets[i], &st));
        CHECK_OK(sf_net_forward(nets[i], x, 1));
        CHECK_OK(sf_net_loss(nets[i], labels, &r));
        CHECK_OK(sf_net_backward(nets[i]));
    }
    int64_t nd, ng;
    float *gd = tu_net_read_role(d, SF_ROLE_GRAD, &nd), *gg = tu_net_read_role(g, SF_ROLE_GRAD, &ng);
    double e = nd == ng ? rel_l2(gg, gd, nd, 1.0) : INFINITY;
    free(gd), free(gg);
    return e;
}

static void test_sparse_nets(sf_precision p, double loss_tol, double grad_tol)
{
    static float x[ST * SB * SIN];
    for (int i = 0; i < ST * SB * SIN; i++) x[i] = sf_uniform(141, 1, (uint64_t)i) < 0.2f ? 1.0f : 0.0f;
    int32_t labels[SB] = {0, 1, 2, 3, 1};
    for (int rec = 0; rec < 2; rec++) {
        const char *kind = rec ? "recurrent" : "feed-forward";
        sf_net *c = sparse_net((sf_device){SF_DEVICE_CPU, 0}, SF_PRECISION_FP32, SF_SPARSE_ON, rec);
        sf_net *d = sparse_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_SPARSE_OFF, rec);
        sf_net *g = sparse_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_SPARSE_ON, rec);
        if (!c || !d || !g) return;
        sf_step_result rc, rg;
        double le, ge;
        const double dense_ge = twin_grad_err(d, g, p, x, labels);
        step_both(c, g, p, x, labels, &rc, &rg, &le, &ge);
        CHECK(le <= loss_tol && dense_ge <= grad_tol, "%s sparse %s net: loss %.6g vs CPU fp32 %.6g (rel %.3g > %g?), "
              "gradients vs the dense net in %s rel L2 %.3g (> %g?)", prec, kind, rg.loss, rc.loss, le, loss_tol, prec,
              dense_ge, grad_tol);
        sf_net_free(d);
        sf_layer_sparsity sp[5];
        CHECK(sf_net_layer_sparsity(g, sp, 5) == 5, "layer count");
        for (int l = 0; l < 5; l++)
            CHECK(!sp[l].eligible || (sp[l].forward_sparse && sp[l].backward_sparse),
                  "%s sparse %s net: layer %d ran forward %s, backward %s", prec, kind, l,
                  sp[l].forward_sparse ? "sparse" : "dense", sp[l].backward_sparse ? "sparse" : "dense");
        printf("%s sparse %s net vs CPU fp32: loss %.6g vs %.6g (rel %.2e), gradients rel %.2e; vs dense in %s: "
               "gradients rel %.2e\n", prec, kind, rg.loss, rc.loss, le, ge, prec, dense_ge);
        float first = 0, last = 0;
        for (int s = 0; s < 15; s++) {
            CHECK_OK(sf_net_train_step(g, x, labels, &rg));
            CHECK(isfinite(rg.loss), "%s sparse %s net: step %d loss %g", prec, kind, s, rg.loss);
            if (s == 0) first = rg.loss;
            last = rg.loss;
        }
        CHECK(last < first, "%s sparse %s net: loss %.4g after 15 steps on one batch, %.4g at the first", prec, kind,
              last, first);
        sf_net_free(c);
        sf_net_free(g);
    }
    sf_net *a = sparse_net((sf_device){SF_DEVICE_CUDA, 0}, p, SF_SPARSE_AUTO, true);
    if (!a) return;
    sf_layer_sparsity sp[5];
    sf_net_layer_sparsity(a, sp, 5);
    for (int l = 0; l < 5; l++)
        CHECK(!sp[l].eligible || (sp[l].crossover_forward >= 0.0f && sp[l].crossover_forward <= 0.5f &&
                                  sp[l].crossover_backward >= 0.0f && sp[l].crossover_backward <= 0.5f),
              "%s auto: layer %d crossovers %g, %g", prec, l, sp[l].crossover_forward, sp[l].crossover_backward);
    sf_net_free(a);
}

static bool params_equal(sf_net *net, const float *ref, int64_t n)
{
    int64_t m;
    float *p = tu_net_read_role(net, SF_ROLE_PARAM, &m);
    bool same = m == n && memcmp(p, ref, (size_t)n * sizeof *p) == 0;
    free(p);
    return same;
}

/* fp16: a step whose gradients overflow is skipped (parameters untouched) and halves the scale, until steps go
 * through; 2000 good steps double it; a NaN loss still fails. */
static void test_loss_scale(void)
{
    sf_net *net = small_net((sf_device){SF_DEVICE_CUDA, 0}, SF_PRECISION_FP16);
    if (!net) return;
    sf_net_state st;
    CHECK_OK(sf_net_get_state(net, &st));
    CHECK(st.loss_scale == 65536.0f && st.loss_scale_steps == 0, "initial scale %g, %lld steps", st.loss_scale,
          (long long)st.loss_scale_steps);
    st.loss_scale = 0x1p40f; /* the loss gradient alone overflows fp16 */
    CHECK_OK(sf_net_set_state(net, &st));
    static float x[NT * NB * NC * NHW * NHW];
    int32_t labels[NB];
    int64_t n;
    float *before = tu_net_read_role(net, SF_ROLE_PARAM, &n);
    sf_step_result r = {0};
    int skipped = 0, step = 0;
    for (; step < 60; step++) {
        batch(step, x, labels);
        CHECK_OK(sf_net_train_step(net, x, labels, &r));
        CHECK(isfinite(r.loss), "step %d: loss %g", step, r.loss);
        if (!r.skipped) break;
        skipped++;
        CHECK(params_equal(net, before, n), "a skipped step changed the parameters");
        CHECK_OK(sf_net_get_state(net, &st));
        CHECK(st.loss_scale == ldexpf(1.0f, 40 - skipped), "after %d skips the scale is %g", skipped, st.loss_scale);
    }
    CHECK(skipped >= 19 && !r.skipped, "%d steps skipped from a scale of 2^40, the last %s", skipped,
          r.skipped ? "skipped too" : "went through");
    CHECK(!params_equal(net, before, n), "the step that went through left the parameters as they were");
    printf("fp16 loss scaling: %d steps skipped from 2^40, then a step at scale 2^%d\n", skipped, 40 - skipped);
    CHECK_OK(sf_net_get_state(net, &st));
    st.loss_scale_steps = 1999;
    float scale = st.loss_scale;
    CHECK_OK(sf_net_set_state(net, &st));
    CHECK_OK(sf_net_train_step(net, x, labels, &r));
    CHECK_OK(sf_net_get_state(net, &st));
    CHECK(r.skipped || (st.loss_scale == 2 * scale && st.loss_scale_steps == 0),
          "after 2000 good steps the scale is %g (was %g), %lld steps", st.loss_scale, scale,
          (long long)st.loss_scale_steps);
    /* a NaN in the readout's bias makes the loss NaN: that is a failure in fp16 too, not a skipped step */
    int32_t last = sf_net_tensor_count(net, SF_ROLE_PARAM) - 1;
    sf_tensor_info ti;
    CHECK_OK(sf_net_tensor_info(net, SF_ROLE_PARAM, last, &ti));
    float *bias = calloc((size_t)ti.numel, sizeof *bias);
    bias[0] = NAN;
    CHECK_OK(sf_net_tensor_write(net, SF_ROLE_PARAM, last, bias));
    free(bias);
    CHECK(sf_net_train_step(net, x, labels, &r) == SF_ERR_NUMERIC, "a NaN loss (%g) did not fail the step", r.loss);
    free(before);
    sf_net_free(net);
}

/* Every op on a backend of precision p, then the linear and conv cases on each conv path. */
static void run_ops(sf_precision p, double bound)
{
    act = p == SF_PRECISION_BF16 ? SF_ACT_BF16 : SF_ACT_F16;
    prec = sf_precision_name(p);
    tol = bound;
    gpu = NULL;
    CHECK_OK(sf_cuda_backend_create(0, p, NULL, &gpu));
    if (!gpu) return;
    CHECK(gpu->act == act, "%s backend stores activations as type %d", prec, (int)gpu->act);
    worst = 0.0;
    test_convert();
    test_lif();
    test_state();
    test_bn(1, 1, 1, 300);
    test_bn(8, 5, 7, 310);
    test_bn(40, 16, 64, 320);
    test_gemm_ops();
    test_pool(7, 9, 9, 2, 2, 0);
    test_pool(5, 28, 28, 2, 2, 0); /* windows that tile the plane: the tiled kernels */
    test_pool(3, 9, 9, 3, 2, 0);
    test_pool(3, 9, 9, 3, 2, 1); /* SpikingJelly's ResNet stem: a border of -inf (max) or counted zeros (avg) */
    test_elementwise();
    test_readout_loss(4, 5, 10);
    test_readout_loss(10, 64, 10);
    test_sparse_ops();
    printf("%s ops, default conv choice: worst 16-bit output rel err %.2e (bound %.0e)\n", prec, worst, tol);
    sf_backend_free(gpu);
    /* the convolutions once more through each path, whole batch and in chunks (1 MiB cap) */
    const sf_conv_algo algos[] = {SF_CONV_ALGO_CUDNN, SF_CONV_ALGO_GEMM, SF_CONV_ALGO_NHWC, SF_CONV_ALGO_AUTO};
    for (int a = 0; a < 4; a++)
        for (int32_t ws = 1; ws <= 512; ws *= 512) {
            sf_cuda_options opt = {.graph = 1, .conv_workspace_mib = ws, .conv_algo = algos[a]};
            gpu = NULL;
            CHECK_OK(sf_cuda_backend_create(0, p, &opt, &gpu));
            if (!gpu) continue;
            worst = 0.0;
            test_gemm_ops();
            printf("%s linear/conv, conv %s, workspace %d MiB: worst rel err %.2e\n", prec, sf_conv_algo_name(algos[a]),
                   (int)ws, worst);
            sf_backend_free(gpu);
        }
}

int main(void)
{
    if (sf_cuda_device_count() == 0) {
        fprintf(stderr, "test_gpu_precision: no CUDA device\n");
        return 1;
    }
    CHECK_OK(sf_cpu_backend_create(&cpu));
    if (!cpu) return tu_finish("test_gpu_precision");
    run_ops(SF_PRECISION_BF16, 1e-2);
    test_net(SF_PRECISION_BF16, 2e-2, 0.1);
    test_nhwc_net(SF_PRECISION_BF16, 2e-2, 0.1);
    /* bf16's 8-bit mantissa: a recurrent net's summed products round differently on the two paths, and θ_grad then cuts
     * a few other steps (0.088 feed-forward, 0.116 recurrent on an H200) */
    test_sparse_nets(SF_PRECISION_BF16, 2e-2, 0.15);
    run_ops(SF_PRECISION_FP16, 2e-3);
    test_net(SF_PRECISION_FP16, 5e-3, 0.05);
    test_nhwc_net(SF_PRECISION_FP16, 5e-3, 0.05);
    prec = sf_precision_name(SF_PRECISION_FP32);
    test_nhwc_net(SF_PRECISION_FP32, 1e-5, 1e-4);
    test_sparse_nets(SF_PRECISION_FP16, 5e-3, 0.05);
    const sf_precision every[] = {SF_PRECISION_FP32, SF_PRECISION_TF32, SF_PRECISION_BF16, SF_PRECISION_FP16};
    for (int k = 0; k < 4; k++) {
        prec = sf_precision_name(every[k]);
        test_lean_nets(every[k]);
    }
    test_loss_scale();
    sf_backend_free(cpu);
    return tu_finish("test_gpu_precision");
}
