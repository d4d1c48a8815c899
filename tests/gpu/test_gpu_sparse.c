/* test_gpu_sparse.c — every event-driven CUDA op against the CPU op (the reference) on the same inputs, at densities
 * 0, one spike per row, 5%, 50% and 100%, with T = 1, B = 1 and odd sizes, then small networks run sparse on both
 * devices. Bounds:
 *   bitwise: compact spikes (bits, lists, counts), spikes_expand, the LIF forward with compact output (s, h), the
 *     masks of nonzero gradients, the event-driven linear forward and weight gradient, the masked dx, the
 *     event-driven recurrent forward (spikes, h): the CUDA kernels sum in the CPU's order without FMA;
 *   1e-6: db (float partials on the GPU, double on the CPU), a carried v_out; 1e-5: dx through cuBLAS; the dense
 *     recurrence's h;
 *   1e-4: LIF and recurrent gradients (surrogate arithmetic differs, as in test_gpu_ops), net losses and gradients. */
#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "testutil.h"

#include "core/rng.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static sf_backend *cpu, *gpu;

/* A buffer on both backends from the same host bytes (NULL: zeroed). */
typedef struct {
    size_t bytes;
    void *c, *g;
} pair;

static pair mk(const void *host, size_t bytes)
{
    pair p = {bytes, NULL, NULL};
    size_t b = bytes ? bytes : 4;
    CHECK_OK(cpu->alloc(cpu, b, &p.c));
    CHECK_OK(gpu->alloc(gpu, b, &p.g));
    CHECK_OK(cpu->zero(cpu, p.c, b));
    CHECK_OK(gpu->zero(gpu, p.g, b));
    if (host && bytes) {
        CHECK_OK(cpu->copy_from_host(cpu, p.c, host, bytes));
        CHECK_OK(gpu->copy_from_host(gpu, p.g, host, bytes));
    }
    return p;
}

static void drop(pair *p)
{
    cpu->release(cpu, p->c);
    gpu->release(gpu, p->g);
}

/* Both sides' bytes: equal (tol < 0), or float relative L2 error within tol; returns the error (0 when equal). */
static double cmp(const char *what, const pair *p, double tol)
{
    unsigned char *c = malloc(p->bytes + 4), *g = malloc(p->bytes + 4);
    CHECK_OK(cpu->copy_to_host(cpu, c, p->c, p->bytes));
    CHECK_OK(gpu->copy_to_host(gpu, g, p->g, p->bytes));
    double e = 0;
    if (tol < 0) {
        size_t bad = 0;
        for (size_t i = 0; i < p->bytes; i++) bad += c[i] != g[i];
        CHECK(bad == 0, "%s: %zu of %zu bytes differ", what, bad, p->bytes);
        e = bad ? 1 : 0;
    } else {
        const float *fc = (const float *)c, *fg = (const float *)g;
        double num = 0, den = 0;
        for (size_t i = 0; i < p->bytes / 4; i++) {
            num += ((double)fg[i] - fc[i]) * ((double)fg[i] - fc[i]);
            den += (double)fc[i] * fc[i];
        }
        e = sqrt(num) / fmax(sqrt(den), 1e-30);
        CHECK(e <= tol, "%s: relative error %.3g > %.0e", what, e, tol);
    }
    free(c), free(g);
    return e;
}

#define RUN(expr)                                                                                                      \
    do {                                                                                                               \
        for (int side_ = 0; side_ < 2; side_++) {                                                                      \
            sf_backend *be = side_ ? gpu : cpu;                                                                        \
            CHECK_OK(expr);                                                                                            \
        }                                                                                                              \
    } while (0)
#define S(p) (side_ ? (p).g : (p).c)

/* The number of floats that differ between the sides. */
static int64_t count_diff(const pair *p)
{
    float *c = malloc(p->bytes + 4), *g = malloc(p->bytes + 4);
    CHECK_OK(cpu->copy_to_host(cpu, c, p->c, p->bytes));
    CHECK_OK(gpu->copy_to_host(gpu, g, p->g, p->bytes));
    int64_t k = 0;
    for (size_t i = 0; i < p->bytes / 4; i++) k += c[i] != g[i];
    free(c), free(g);
    return k;
}

/* The compact form of a [rows, n] tensor on both sides (mask: no lists). */
typedef struct {
    pair bits, idx, cnt;
} cpair;

static cpair mkc(int64_t rows, int64_t n, bool lists)
{
    cpair c = {mk(NULL, (size_t)(rows * sf_spike_words(n)) * 4), mk(NULL, lists ? (size_t)(rows * n) : 0),
               mk(NULL, (size_t)(rows * sf_spike_segs(n)) * 4)};
    return c;
}

/* The compact form on the side RUN is at, as a pointer (a compound literal: an lvalue). */
#define SC(c, lists) (&(sf_spikes){S((c).bits), (lists) ? S((c).idx) : NULL, S((c).cnt)})

/* Bits and counts equal on both sides. */
static void cmpc(const char *what, const cpair *c)
{
    char w[200];
    snprintf(w, sizeof w, "%.180s bits", what);
    cmp(w, &c->bits, -1);
    snprintf(w, sizeof w, "%.180s counts", what);
    cmp(w, &c->cnt, -1);
}

static void dropc(cpair *c)
{
    drop(&c->bits), drop(&c->idx), drop(&c->cnt);
}

/* Host spike-making LIF inputs (see test_sparse_ops.c): 1000 fires, -1 never; kind 0 silent, 1 one per row. */
static float *spike_input(int64_t rows, int64_t n, double density, int kind, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)(rows * n + 1));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            bool on = kind == 1 ? i == (r * 7 + 3) % n : kind != 0 && sf_uniform(seed, 3, (uint64_t)(r * n + i)) < density;
            x[r * n + i] = on ? 1000.0f : -1.0f;
        }
    return x;
}

static float *randn_host(int64_t n, float mean, float std, uint64_t seed)
{
    float *x = malloc(sizeof(float) * (size_t)(n + 1));
    tu_randn(x, n, mean, std, seed);
    return x;
}

static const struct {
    int kind;
    double density;
    const char *name;
} densities[] = {{0, 0, "silent"}, {1, 0, "1/n"}, {2, 0.05, "5%"}, {2, 0.5, "50%"}, {2, 1.0, "100%"}};

/* Lists compared exactly where they are defined: the first cnt entries of every segment. */
static void cmp_lists(const char *what, const cpair *c, int64_t rows, int64_t n)
{
    const int64_t segs = sf_spike_segs(n);
    uint8_t *ic = malloc((size_t)(rows * n) + 1), *ig = malloc((size_t)(rows * n) + 1);
    int32_t *cnt = malloc((size_t)(rows * segs) * 4 + 4);
    CHECK_OK(cpu->copy_to_host(cpu, ic, c->idx.c, (size_t)(rows * n)));
    CHECK_OK(gpu->copy_to_host(gpu, ig, c->idx.g, (size_t)(rows * n)));
    CHECK_OK(cpu->copy_to_host(cpu, cnt, c->cnt.c, (size_t)(rows * segs) * 4));
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t g = 0; g < segs; g++)
            for (int32_t m = 0; m < cnt[r * segs + g]; m++) {
                int64_t at = r * n + g * SF_SPIKE_SEG + m;
                bad += ic[at] != ig[at];
            }
    CHECK(bad == 0, "%s: %lld list entries differ", what, (long long)bad);
    free(ic), free(ig), free(cnt);
}

static void test_lif_and_compact(int64_t T, int64_t B, int64_t n, int dk)
{
    char what[128];
    snprintf(what, sizeof what, "LIF compact T=%lld B=%lld n=%lld %s", (long long)T, (long long)B, (long long)n,
             densities[dk].name);
    const int64_t rows = T * B, total = rows * n;
    float *hx = spike_input(rows, n, densities[dk].density, densities[dk].kind, (uint64_t)(n + dk));
    pair x = mk(hx, 4 * (size_t)total), s = mk(NULL, 4 * (size_t)total), h = mk(NULL, 4 * (size_t)total);
    pair cnt = mk(NULL, 4), cnt2 = mk(NULL, 4), flag = mk(NULL, 4), back = mk(NULL, 4 * (size_t)total);
    cpair c = mkc(rows, n, true), d = mkc(rows, n, true);
    sf_lif_params p;
    sf_lif_default_params(&p);
    RUN(be->lif_forward(be, &p, T, B * n, S(x),
                        &(sf_lif_out){.s = S(s), .h = S(h), .spike_count = S(cnt), .c = *SC(c, true), .row = n}, NULL));
    cmp(what, &s, -1);
    cmp(what, &h, -1);
    cmp(what, &cnt, -1);
    cmpc(what, &c);
    cmp_lists(what, &c, rows, n);
    RUN(be->spikes_compact(be, rows, n, S(s), SC(d, true), S(cnt2), S(flag)));
    cmpc("spikes_compact", &d);
    cmp_lists("spikes_compact", &d, rows, n);
    cmp("spikes_compact count", &cnt2, -1);
    cmp("spikes_compact flag", &flag, -1);
    RUN(be->spikes_expand(be, rows, n, S(c.bits), S(back)));
    cmp("spikes_expand", &back, -1);
    cpair e = mkc(rows, n, false); /* bits alone (lean plans): whole words are packed 16 bytes per thread */
    RUN(be->spikes_compact(be, rows, n, S(s), &(sf_spikes){S(e.bits), NULL, NULL}, NULL, NULL));
    char alone[96];
    snprintf(alone, sizeof alone, "spikes_compact, bits alone, %lld rows of %lld", (long long)rows, (long long)n);
    cmp(alone, &e.bits, -1);
    dropc(&e);
    RUN(be->spikes_compact(be, rows, n, S(x), SC(d, true), NULL, S(flag))); /* ±1000, -1: flagged */
    float f = 0;
    CHECK_OK(gpu->copy_to_host(gpu, &f, flag.g, 4));
    CHECK(f == 1.0f, "%s: a non-spike input was not flagged on the GPU", what);
    free(hx);
    drop(&x), drop(&s), drop(&h), drop(&cnt), drop(&cnt2), drop(&flag), drop(&back);
    dropc(&c), dropc(&d);
}

static void test_linear(int64_t rows, int32_t in, int32_t out, int dk)
{
    char what[128];
    snprintf(what, sizeof what, "spike linear %lldx%dx%d %s", (long long)rows, in, out, densities[dk].name);
    float *lif_in = spike_input(rows, in, densities[dk].density, densities[dk].kind, (uint64_t)(in * 3 + dk));
    for (int64_t i = 0; i < rows * in; i++) lif_in[i] = lif_in[i] > 0.0f;
    float *hw = randn_host((int64_t)out * in, 0.0f, 0.3f, 11), *hb = randn_host(out, 0.1f, 0.2f, 12);
    float *hdy = randn_host(rows * out, 0.0f, 1.0f, 13);
    pair x = mk(lif_in, 4 * (size_t)(rows * in)), w = mk(hw, 4 * (size_t)out * in), b = mk(hb, 4 * (size_t)out);
    pair y = mk(NULL, 4 * (size_t)(rows * out)), dy = mk(hdy, 4 * (size_t)(rows * out));
    pair dx = mk(NULL, 4 * (size_t)(rows * in)), dw = mk(NULL, 4 * (size_t)out * in), db = mk(NULL, 4 * (size_t)out);
    size_t wsb = gpu->spike_linear_workspace(gpu, rows, in, out), wsc = cpu->spike_linear_workspace(cpu, rows, in, out);
    pair ws = mk(NULL, wsb > wsc ? wsb : wsc);
    cpair c = mkc(rows, in, true);
    RUN(be->spikes_compact(be, rows, in, S(x), SC(c, true), NULL, NULL));
    RUN(be->spike_linear_forward(be, rows, in, out, SC(c, true), S(w), S(b), S(y), S(ws)));
    cmp(what, &y, -1);
    RUN(be->spike_linear_backward(be, rows, in, out, S(c.bits), S(w), S(dy), NULL, S(dx), S(dw), S(db), S(ws)));
    cmp("dW", &dw, -1);
    cmp("db", &db, 1e-6);
    cmp("dx (cuBLAS)", &dx, 1e-5);
    /* a gradient with zeros and its mask: the masked dx */
    for (int64_t i = 0; i < rows * out; i++)
        if (sf_uniform(14, 1, (uint64_t)i) < 0.8) hdy[i] = 0.0f;
    drop(&dy);
    dy = mk(hdy, 4 * (size_t)(rows * out));
    float *ind = malloc(4 * (size_t)(rows * out) + 4);
    for (int64_t i = 0; i < rows * out; i++) ind[i] = hdy[i] != 0.0f;
    pair pind = mk(ind, 4 * (size_t)(rows * out));
    cpair m = mkc(rows, out, false);
    RUN(be->spikes_compact(be, rows, out, S(pind), SC(m, false), NULL, NULL));
    cmpc("mask", &m);
    RUN(be->spike_linear_backward(be, rows, in, out, S(c.bits), S(w), S(dy), SC(m, false), S(dx), S(dw), NULL, S(ws)));
    cmp("masked dx", &dx, -1);
    cmp("masked dW", &dw, -1);
    free(lif_in), free(hw), free(hb), free(hdy), free(ind);
    drop(&x), drop(&w), drop(&b), drop(&y), drop(&dy), drop(&dx), drop(&dw), drop(&db), drop(&ws), drop(&pind);
    dropc(&c), dropc(&m);
}

static void test_lif_masked(int64_t T, int64_t B, int64_t n, int g)
{
    char what[128];
    snprintf(what, sizeof what, "LIF masked backward T=%lld B=%lld n=%lld θ_grad %d", (long long)T, (long long)B,
             (long long)n, g);
    const int64_t rows = T * B, total = rows * n;
    float *hx = randn_host(total, 0.6f, 1.0f, 21), *hds = randn_host(total, 0.0f, 1.0f, 22);
    pair x = mk(hx, 4 * (size_t)total), ds = mk(hds, 4 * (size_t)total), dx = mk(NULL, 4 * (size_t)total);
    pair cnt = mk(NULL, 4);
    cpair m = mkc(rows, n, false);
    sf_lif_params p;
    tu_seed_neuron(&p, g, 0.6f);
    RUN(be->lif_backward_masked(be, &p, T, B, n, S(x), NULL, S(ds), S(dx), SC(m, false), S(cnt), NULL));
    cmp(what, &dx, 1e-4);
    cmpc(what, &m);
    cmp("nonzero count", &cnt, -1);
    free(hx), free(hds);
    drop(&x), drop(&ds), drop(&dx), drop(&cnt);
    dropc(&m);
}

/* A time segment of a longer run (carried state v_in, v_out, dv_in, dv_out): the compact forward and the masked
 * backward on both sides. */
static void test_lif_state(int64_t T, int64_t B, int64_t n, int g)
{
    char what[128];
    snprintf(what, sizeof what, "LIF state T=%lld B=%lld n=%lld θ_grad %d", (long long)T, (long long)B, (long long)n, g);
    const int64_t rows = T * B, total = rows * n, N = B * n;
    float *hx = spike_input(rows, n, 0.3, 2, (uint64_t)(n + 77)), *hds = randn_host(total, 0.0f, 1.0f, 45);
    float *hv = randn_host(N, 0.3f, 0.4f, 46), *hdv = randn_host(N, 0.0f, 1.0f, 47);
    pair x = mk(hx, 4 * (size_t)total), ds = mk(hds, 4 * (size_t)total), vin = mk(hv, 4 * (size_t)N);
    pair dvin = mk(hdv, 4 * (size_t)N), vout = mk(NULL, 4 * (size_t)N), dvout = mk(NULL, 4 * (size_t)N);
    pair s = mk(NULL, 4 * (size_t)total), dx = mk(NULL, 4 * (size_t)total), cnt = mk(NULL, 4), gcnt = mk(NULL, 4);
    cpair c = mkc(rows, n, true), m = mkc(rows, n, false);
    sf_lif_params p;
    tu_seed_neuron(&p, g, 0.6f);
    RUN(be->lif_forward(be, &p, T, N, S(x), &(sf_lif_out){.s = S(s), .spike_count = S(cnt), .c = *SC(c, true), .row = n},
                        &(sf_lif_state){.v_in = S(vin), .v_out = S(vout)}));
    cmp(what, &s, -1);
    cmp("state v_out", &vout, 1e-6);
    cmpc(what, &c);
    cmp_lists(what, &c, rows, n);
    RUN(be->lif_backward_masked(be, &p, T, B, n, S(x), NULL, S(ds), S(dx), SC(m, false), S(gcnt),
                                &(sf_lif_state){.v_in = S(vin), .dv_in = S(dvin), .dv_out = S(dvout)}));
    cmp("state masked dx", &dx, 1e-4);
    cmp("state dv_out", &dvout, 1e-4);
    free(hx), free(hds), free(hv), free(hdv);
    drop(&x), drop(&ds), drop(&vin), drop(&dvin), drop(&vout), drop(&dvout), drop(&s), drop(&dx), drop(&cnt), drop(&gcnt);
    dropc(&c), dropc(&m);
}

static void test_rlif(int64_t T, int64_t B, int64_t n, int g)
{
    char what[128];
    snprintf(what, sizeof what, "RLIF T=%lld B=%lld n=%lld θ_grad %d", (long long)T, (long long)B, (long long)n, g);
    const int64_t rows = T * B, total = rows * n;
    float *hx = randn_host(total, 0.7f, 1.0f, 31), *hv = randn_host(n * n, 0.0f, 1.5f / sqrtf((float)n), 32);
    float *hds = randn_host(total, 0.0f, 1.0f, 33);
    pair x = mk(hx, 4 * (size_t)total), v = mk(hv, 4 * (size_t)(n * n)), ds = mk(hds, 4 * (size_t)total);
    size_t wb = gpu->rlif_workspace(gpu, T, B, n), wc = cpu->rlif_workspace(cpu, T, B, n);
    pair ws = mk(NULL, wb > wc ? wb : wc);
    sf_lif_params p;
    tu_seed_neuron(&p, g, 0.5f);
    for (int sparse = 0; sparse < 2; sparse++) {
        pair s = mk(NULL, 4 * (size_t)total), h = mk(NULL, 4 * (size_t)total), cnt = mk(NULL, 4), gc = mk(NULL, 4);
        pair dx = mk(NULL, 4 * (size_t)total), dv = mk(NULL, 4 * (size_t)(n * n));
        cpair c = mkc(rows, n, true), m = mkc(rows, n, false);
        RUN(be->rlif_forward(be, &p, T, B, n, S(x), S(v), sparse,
                             &(sf_lif_out){.s = S(s), .h = S(h), .spike_count = S(cnt), .c = *SC(c, true), .row = n},
                             S(ws)));
        char w2[200];
        snprintf(w2, sizeof w2, "%.120s %s forward", what, sparse ? "sparse" : "dense");
        const bool exact = sparse && n <= 8192; /* past 8192 neurons the GPU runs the dense loop */
        /* The dense recurrence sums V·s in cuBLAS's order: a potential within rounding of the threshold may fire on
         * one side only, and the recurrence then carries that on. Allowed there: a few flips (then no gradients). */
        int64_t flips = count_diff(&s);
        CHECK(exact ? flips == 0 : flips <= total / 1000, "%s: %lld of %lld spikes differ", w2, (long long)flips,
              (long long)total);
        if (flips) {
            printf("%s: %lld spikes differ (dense sums in another order); gradients not compared\n", w2, (long long)flips);
            drop(&s), drop(&h), drop(&cnt), drop(&gc), drop(&dx), drop(&dv);
            dropc(&c), dropc(&m);
            continue;
        }
        cmp(w2, &h, exact ? -1 : 1e-5);
        cmp(w2, &cnt, -1);
        cmpc(w2, &c);
        cmp_lists(w2, &c, rows, n);
        const int flags = sparse ? SF_RLIF_SPARSE_DV | SF_RLIF_SPARSE_DY : 0;
        for (int recompute = 0; recompute < 2; recompute++) {
            RUN(be->zero(be, S(gc), 4));
            /* saved h: with the forward's spike bits, as the net passes them */
            RUN(be->rlif_backward(be, &p, T, B, n, S(x), recompute ? NULL : S(h), recompute ? NULL : S(c.bits), S(v),
                                  S(ds), sparse, flags, S(dx), S(dv), SC(m, false), S(gc), S(ws)));
            snprintf(w2, sizeof w2, "%.120s %s backward %s", what, sparse ? "sparse" : "dense", recompute ? "recompute" : "saved h");
            cmp(w2, &dx, 1e-4);
            cmp(w2, &dv, 1e-4);
            cmpc(w2, &m);
            cmp(w2, &gc, -1);
        }
        drop(&s), drop(&h), drop(&cnt), drop(&gc), drop(&dx), drop(&dv);
        dropc(&c), dropc(&m);
    }
    free(hx), free(hv), free(hds);
    drop(&x), drop(&v), drop(&ds), drop(&ws);
}

/* Small nets with every event-driven layer kind, sparse on both devices: losses and gradients agree. */
static void test_nets(void)
{
    for (int rec = 0; rec < 2; rec++) {
        float loss[2] = {0, 0};
        float *grads[2] = {NULL, NULL};
        int64_t ng[2] = {0, 0};
        enum { T = 9, B = 5, IN = 37 };
        float *x = malloc(sizeof(float) * T * B * IN);
        for (int i = 0; i < T * B * IN; i++) x[i] = sf_uniform(41, 1, (uint64_t)i) < 0.2f ? 1.0f : 0.0f;
        int32_t labels[B] = {0, 1, 2, 3, 1};
        for (int dev = 0; dev < 2; dev++) {
            sf_net_params np;
            sf_net_default_params(&np);
            np.device.kind = dev ? SF_DEVICE_CUDA : SF_DEVICE_CPU;
            np.in_channels = IN;
            np.sparse = SF_SPARSE_ON;
            np.input_spikes = 1;
            np.cuda.graph = 0;
            sf_net *net = NULL;
            CHECK_OK(sf_net_create(&np, &net));
            if (!net) return;
            sf_layer_desc d;
            const int32_t sizes[] = {300, 0, 260, 0, 4};
            for (int l = 0; l < 5; l++) {
                sf_layer_default_desc(l % 2 ? (rec && l == 1 ? SF_LAYER_RLIF : SF_LAYER_LIF) : SF_LAYER_LINEAR, &d);
                d.out_features = sizes[l];
                d.init_gain = l % 2 ? 1.0f : 5.0f;
                tu_seed_neuron(&d.lif, 2, 0.4f);
                CHECK_OK(sf_net_add(net, &d, NULL));
            }
            CHECK_OK(sf_net_compile(net, T, B));
            sf_step_result r;
            CHECK_OK(sf_net_forward(net, x, 1));
            CHECK_OK(sf_net_loss(net, labels, &r));
            CHECK_OK(sf_net_backward(net));
            loss[dev] = r.loss;
            grads[dev] = tu_net_read_role(net, SF_ROLE_GRAD, &ng[dev]);
            sf_net_free(net);
        }
        double num = 0, den = 0;
        for (int64_t i = 0; i < ng[0]; i++) {
            num += ((double)grads[1][i] - grads[0][i]) * ((double)grads[1][i] - grads[0][i]);
            den += (double)grads[0][i] * grads[0][i];
        }
        CHECK(ng[0] == ng[1] && sqrt(num) <= 1e-4 * sqrt(den) && fabsf(loss[0] - loss[1]) <= 1e-5f * fabsf(loss[0]),
              "%s net: loss %g vs %g, gradient relative error %.3g", rec ? "recurrent" : "feed-forward", loss[1],
              loss[0], sqrt(num) / fmax(sqrt(den), 1e-30));
        free(grads[0]), free(grads[1]), free(x);
    }
}

int main(void)
{
    if (sf_cuda_device_count() == 0) {
        fprintf(stderr, "test_gpu_sparse: no CUDA device\n");
        return 1;
    }
    CHECK_OK(sf_cpu_backend_create(&cpu));
    CHECK_OK(sf_cuda_backend_create(0, SF_PRECISION_FP32, NULL, &gpu));
    if (!cpu || !gpu) return tu_finish("test_gpu_sparse");
    const int64_t shapes[][3] = {{4, 3, 1000}, {1, 1, 7}, {5, 2, 64}, {3, 4, 300}, {2, 1, 513}, {100, 2, 1472}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int d = 0; d < 5; d++) test_lif_and_compact(shapes[i][0], shapes[i][1], shapes[i][2], d);
    const struct {
        int64_t rows;
        int32_t in, out;
    } lin[] = {{37, 300, 65}, {1, 1, 1}, {12, 513, 17}, {64, 96, 130}, {5, 33, 2100}, {640, 700, 1472}};
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++)
        for (int d = 0; d < 5; d++) test_linear(lin[i].rows, lin[i].in, lin[i].out, d);
    for (int g = 0; g < 3; g++) {
        test_lif_masked(4, 3, 1000, g);
        test_lif_masked(1, 1, 7, g);
        test_lif_masked(20, 2, 300, g);
        test_lif_state(5, 3, 300, g);
        test_lif_state(1, 1, 7, g);
    }
    test_rlif(6, 3, 40, 0);
    test_rlif(6, 3, 40, 2);
    test_rlif(1, 1, 9, 0);
    test_rlif(9, 2, 300, 1);
    test_rlif(20, 4, 1472, 2);
    test_rlif(12, 64, 1472, 0); /* W4's layer: one block per SM in the grid-wide kernels */
    test_rlif(7, 70, 301, 2);   /* three groups of samples, the last one partial; rows of dx not 8-aligned */
    test_rlif(5, 33, 1000, 1);
    test_rlif(3, 2, 8300, 0); /* more than the persistent kernel holds: the dense loop runs */
    test_nets();
    sf_backend_free(gpu);
    sf_backend_free(cpu);
    return tu_finish("test_gpu_sparse");
}
