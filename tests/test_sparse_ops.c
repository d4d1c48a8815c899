/* test_sparse_ops.c — the CPU's event-driven ops against the dense ones, at densities 0, one spike per row, 5%, 50%
 * and 100%, with T = 1, B = 1 and odd sizes:
 *   the LIF forward with compact output gives the dense forward's spikes and h bitwise, and bits, segment lists
 *   and counts that say the same (and equal spikes_compact's of the dense spikes); spikes_expand inverts them;
 *   the event-driven linear forward and backward equal linear_forward / linear_backward within 1e-5 (sums in
 *   another order), with and without a mask of the nonzero output gradient;
 *   the masked LIF backward writes the dense backward's dx bitwise and a mask that marks exactly its nonzeros
 *   (grad_threshold off, on, and with grad_cut);
 *   the recurrent LIF: event-driven and dense recurrence give the same spikes and, within 1e-5, the same h and
 *   gradients; recomputing from x gives what the saved h gives, bitwise. */
#include "cpu/cpu_backend.h"
#include "testutil.h"

#include "core/rng.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static sf_backend *be;

static double rel_ff(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num) / fmax(sqrt(den), 1e-30);
}

static void *zalloc(size_t bytes) { return calloc(1, bytes ? bytes : 1); }

/* Spike-making LIF inputs [rows, n]: 1000 makes a spike whatever the state, -1 never does (tau 2, decay_input,
 * θ 1: v settles at -1). kind: 0 silent, 1 one spike per row, else a Bernoulli density. */
static void spike_input(float *x, int64_t rows, int64_t n, double density, int kind, uint64_t seed)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            bool on = kind == 1 ? i == (r * 7 + 3) % n : kind != 0 && sf_uniform(seed, 3, (uint64_t)(r * n + i)) < density;
            x[r * n + i] = on ? 1000.0f : -1.0f;
        }
}

/* The compact form (bits, lists, counts) says exactly what the float spikes s say. */
static void check_compact(const char *what, int64_t rows, int64_t n, const float *s, const sf_spikes *c)
{
    const int64_t words = sf_spike_words(n), segs = sf_spike_segs(n);
    int64_t bad_bits = 0, bad_lists = 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < n; i++)
            bad_bits += ((c->bits[r * words + i / 32] >> (i % 32)) & 1u) != (s[r * n + i] != 0.0f);
        for (int64_t w = n; w < words * 32; w++) bad_bits += (c->bits[r * words + w / 32] >> (w % 32)) & 1u;
        for (int64_t g = 0; g < segs; g++) {
            int32_t k = 0;
            for (int64_t i = g * SF_SPIKE_SEG; i < n && i < (g + 1) * SF_SPIKE_SEG; i++)
                if (s[r * n + i] != 0.0f) bad_lists += c->idx[r * n + g * SF_SPIKE_SEG + k++] != i - g * SF_SPIKE_SEG;
            bad_lists += c->cnt[r * segs + g] != k;
        }
    }
    CHECK(bad_bits == 0, "%s: %lld bits disagree with the spikes", what, (long long)bad_bits);
    CHECK(bad_lists == 0, "%s: %lld list entries or counts disagree with the spikes", what, (long long)bad_lists);
}

static sf_spikes alloc_spikes(int64_t rows, int64_t n)
{
    return (sf_spikes){zalloc((size_t)(rows * sf_spike_words(n)) * 4), zalloc((size_t)(rows * n)),
                       zalloc((size_t)(rows * sf_spike_segs(n)) * 4)};
}

static void free_spikes(sf_spikes *c)
{
    free(c->bits);
    free(c->idx);
    free(c->cnt);
}

typedef struct shape {
    int64_t T, B, n;
} shape;

static const shape shapes[] = {{4, 3, 1000}, {1, 1, 7}, {5, 2, 64}, {3, 4, 300}, {2, 1, 513}, {1, 3, 33}};
static const struct {
    int kind;
    double density;
    const char *name;
} densities[] = {{0, 0, "silent"}, {1, 0, "1/n"}, {2, 0.05, "5%"}, {2, 0.5, "50%"}, {2, 1.0, "100%"}};

static void test_lif_compact(const shape *sh, int dk)
{
    const int64_t rows = sh->T * sh->B, n = sh->n, N = sh->B * n, total = rows * n;
    char what[96];
    snprintf(what, sizeof what, "LIF compact T=%lld B=%lld n=%lld %s", (long long)sh->T, (long long)sh->B,
             (long long)n, densities[dk].name);
    float *x = malloc(sizeof(float) * (size_t)total), *s1 = zalloc(4 * (size_t)total), *s2 = zalloc(4 * (size_t)total);
    float *h1 = zalloc(4 * (size_t)total), *h2 = zalloc(4 * (size_t)total), *back = zalloc(4 * (size_t)total);
    spike_input(x, rows, n, densities[dk].density, densities[dk].kind, (uint64_t)(n + dk));
    sf_lif_params p;
    sf_lif_default_params(&p);
    float c1 = 0, c2 = 0, c3 = 0, flag = 0;
    sf_lif_out dense = {.s = s1, .h = h1, .spike_count = &c1};
    CHECK_OK(be->lif_forward(be, &p, sh->T, N, x, &dense, NULL));
    sf_spikes c = alloc_spikes(rows, n), d = alloc_spikes(rows, n);
    sf_lif_out comp = {.s = s2, .h = h2, .spike_count = &c2, .c = c, .row = n};
    CHECK_OK(be->lif_forward(be, &p, sh->T, N, x, &comp, NULL));
    CHECK(memcmp(s1, s2, 4 * (size_t)total) == 0 && memcmp(h1, h2, 4 * (size_t)total) == 0,
          "%s: spikes or h differ from the dense forward", what);
    CHECK(c1 == c2, "%s: spike counts %g and %g", what, c1, c2);
    check_compact(what, rows, n, s1, &c);
    double expect = densities[dk].kind == 0 ? 0 : densities[dk].kind == 1 ? (double)rows : -1;
    if (expect >= 0) CHECK(c1 == expect, "%s: %g spikes, expected %g", what, c1, expect);
    if (densities[dk].density == 1.0) CHECK(c1 == (float)total, "%s: %g spikes of %lld", what, c1, (long long)total);

    CHECK_OK(be->spikes_compact(be, rows, n, s1, &d, &c3, &flag));
    CHECK(c3 == c1 && flag == 0.0f, "%s: spikes_compact counted %g (flag %g)", what, c3, flag);
    CHECK(memcmp(c.bits, d.bits, (size_t)(rows * sf_spike_words(n)) * 4) == 0 &&
              memcmp(c.cnt, d.cnt, (size_t)(rows * sf_spike_segs(n)) * 4) == 0,
          "%s: spikes_compact's bits or counts differ from the LIF kernel's", what);
    check_compact("spikes_compact", rows, n, s1, &d);
    CHECK_OK(be->spikes_expand(be, rows, n, c.bits, back));
    CHECK(memcmp(back, s1, 4 * (size_t)total) == 0, "%s: spikes_expand does not give the spikes back", what);
    x[total / 2] = 0.5f; /* not a spike: flagged */
    CHECK_OK(be->spikes_compact(be, rows, n, x, &d, NULL, &flag));
    CHECK(flag == 1.0f, "%s: a value of 0.5 was not flagged", what);
    free_spikes(&c);
    free_spikes(&d);
    free(x), free(s1), free(s2), free(h1), free(h2), free(back);
}

/* A mask of the nonzero entries of v [rows, n] (bits and counts), as lif_backward_masked writes it. */
static sf_spikes mask_of(const float *v, int64_t rows, int64_t n)
{
    sf_spikes m = alloc_spikes(rows, n);
    float *ind = malloc(sizeof(float) * (size_t)(rows * n));
    for (int64_t i = 0; i < rows * n; i++) ind[i] = v[i] != 0.0f;
    free(m.idx);
    m.idx = NULL;
    CHECK_OK(be->spikes_compact(be, rows, n, ind, &m, NULL, NULL));
    free(ind);
    return m;
}

static void test_linear(int64_t rows, int32_t in, int32_t out, int dk)
{
    char what[96];
    snprintf(what, sizeof what, "spike linear %lldx%dx%d %s", (long long)rows, in, out, densities[dk].name);
    const int64_t nx = rows * in, ny = rows * out;
    float *lif_in = malloc(4 * (size_t)nx), *x = zalloc(4 * (size_t)nx), *w = malloc(4 * (size_t)out * in);
    float *b = malloc(4 * (size_t)out), *y1 = zalloc(4 * (size_t)ny), *y2 = zalloc(4 * (size_t)ny);
    float *dy = malloc(4 * (size_t)ny), *dx1 = zalloc(4 * (size_t)nx), *dx2 = zalloc(4 * (size_t)nx);
    float *dw1 = zalloc(4 * (size_t)out * in), *dw2 = zalloc(4 * (size_t)out * in), *db1 = zalloc(4 * (size_t)out),
          *db2 = zalloc(4 * (size_t)out);
    void *ws = malloc(be->spike_linear_workspace(be, rows, in, out));
    spike_input(lif_in, rows, in, densities[dk].density, densities[dk].kind, (uint64_t)(in * 3 + dk));
    for (int64_t i = 0; i < nx; i++) x[i] = lif_in[i] > 0.0f;
    tu_randn(w, (int64_t)out * in, 0.0f, 0.3f, 11);
    tu_randn(b, out, 0.1f, 0.2f, 12);
    tu_randn(dy, ny, 0.0f, 1.0f, 13);
    sf_spikes c = alloc_spikes(rows, in);
    CHECK_OK(be->spikes_compact(be, rows, in, x, &c, NULL, NULL));

    CHECK_OK(be->linear_forward(be, rows, in, out, x, w, b, y1));
    CHECK_OK(be->spike_linear_forward(be, rows, in, out, &c, w, b, y2, ws));
    CHECK(rel_ff(y2, y1, ny) <= 1e-5, "%s: forward relative error %.3g", what, rel_ff(y2, y1, ny));
    if (densities[dk].kind == 0) {
        int64_t bad = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int32_t j = 0; j < out; j++) bad += y2[r * out + j] != b[j];
        CHECK(bad == 0, "%s: a silent input must give the bias exactly (%lld differ)", what, (long long)bad);
    }

    CHECK_OK(be->linear_backward(be, rows, in, out, x, w, dy, dx1, dw1, db1));
    CHECK_OK(be->spike_linear_backward(be, rows, in, out, c.bits, w, dy, NULL, dx2, dw2, db2, ws));
    CHECK(rel_ff(dw2, dw1, (int64_t)out * in) <= 1e-5 || (densities[dk].kind == 0 && rel_ff(dw2, dw1, 1) == 0),
          "%s: dW relative error %.3g", what, rel_ff(dw2, dw1, (int64_t)out * in));
    CHECK(rel_ff(dx2, dx1, nx) <= 1e-5, "%s: dx relative error %.3g", what, rel_ff(dx2, dx1, nx));
    CHECK(memcmp(db1, db2, 4 * (size_t)out) == 0, "%s: db differs", what);

    /* A gradient with zeros (as a θ_grad LIF gives) and its mask: the masked dx and the skipped rows agree too. */
    for (int64_t i = 0; i < ny; i++)
        if (sf_uniform(14, 1, (uint64_t)i) < 0.8) dy[i] = 0.0f;
    for (int32_t j = 0; j < out && rows > 1; j++) dy[out + j] = 0.0f; /* a row without gradient */
    sf_spikes m = mask_of(dy, rows, out);
    CHECK_OK(be->linear_backward(be, rows, in, out, x, w, dy, dx1, dw1, db1));
    CHECK_OK(be->spike_linear_backward(be, rows, in, out, c.bits, w, dy, &m, dx2, dw2, NULL, ws));
    CHECK(rel_ff(dw2, dw1, (int64_t)out * in) <= 1e-5 || densities[dk].kind == 0, "%s masked: dW relative error %.3g",
          what, rel_ff(dw2, dw1, (int64_t)out * in));
    CHECK(rel_ff(dx2, dx1, nx) <= 1e-5, "%s masked: dx relative error %.3g", what, rel_ff(dx2, dx1, nx));
    if (densities[dk].kind == 0)
        for (int64_t i = 0; i < (int64_t)out * in; i++) CHECK(dw2[i] == 0.0f, "%s: silent input, dW != 0", what);
    free_spikes(&c);
    free_spikes(&m);
    free(lif_in), free(x), free(w), free(b), free(y1), free(y2), free(dy), free(dx1), free(dx2), free(dw1), free(dw2);
    free(db1), free(db2), free(ws);
}

static void test_lif_masked(const shape *sh, int grad_threshold, int full)
{
    const int64_t rows = sh->T * sh->B, n = sh->n, N = sh->B * n, total = rows * n;
    char what[96];
    snprintf(what, sizeof what, "LIF masked backward T=%lld B=%lld n=%lld θ_grad %d %s", (long long)sh->T,
             (long long)sh->B, (long long)n, grad_threshold, full ? "full" : "recompute");
    float *x = malloc(4 * (size_t)total), *ds = malloc(4 * (size_t)total), *h = zalloc(4 * (size_t)total);
    float *dx1 = zalloc(4 * (size_t)total), *dx2 = zalloc(4 * (size_t)total);
    tu_randn(x, total, 0.6f, 1.0f, 21);
    tu_randn(ds, total, 0.0f, 1.0f, 22);
    sf_lif_params p;
    tu_seed_neuron(&p, grad_threshold, 0.6f);
    sf_lif_out out = {.h = h};
    CHECK_OK(be->lif_forward(be, &p, sh->T, N, x, &out, NULL));
    const float *hh = full ? h : NULL;
    CHECK_OK(be->lif_backward(be, &p, sh->T, N, x, hh, ds, dx1, NULL));
    sf_spikes m = alloc_spikes(rows, n);
    free(m.idx);
    m.idx = NULL;
    float count = 0;
    CHECK_OK(be->lif_backward_masked(be, &p, sh->T, sh->B, n, x, hh, ds, dx2, &m, &count, NULL));
    CHECK(memcmp(dx1, dx2, 4 * (size_t)total) == 0, "%s: dx differs from lif_backward", what);
    sf_spikes ref = mask_of(dx1, rows, n);
    int64_t nz = 0;
    for (int64_t i = 0; i < total; i++) nz += dx1[i] != 0.0f;
    CHECK(memcmp(m.bits, ref.bits, (size_t)(rows * sf_spike_words(n)) * 4) == 0 &&
              memcmp(m.cnt, ref.cnt, (size_t)(rows * sf_spike_segs(n)) * 4) == 0,
          "%s: the mask does not mark the nonzero dx", what);
    CHECK(count == (float)nz, "%s: counted %g nonzero, there are %lld", what, count, (long long)nz);
    free_spikes(&m);
    free_spikes(&ref);
    free(x), free(ds), free(h), free(dx1), free(dx2);
}

/* Recurrent LIF: dense and event-driven recurrences, saved and recomputed h. */
static void test_rlif(int64_t T, int64_t B, int64_t n, int grad_threshold)
{
    char what[96];
    snprintf(what, sizeof what, "RLIF T=%lld B=%lld n=%lld θ_grad %d", (long long)T, (long long)B, (long long)n,
             grad_threshold);
    const int64_t rows = T * B, total = rows * n;
    float *x = malloc(4 * (size_t)total), *v = malloc(4 * (size_t)(n * n)), *ds = malloc(4 * (size_t)total);
    float *s[2], *h[2], *dx[3], *dv[3], cnt[2] = {0, 0}, gc[3] = {0, 0, 0};
    tu_randn(x, total, 0.7f, 1.0f, 31);
    tu_randn(v, n * n, 0.0f, 1.5f / sqrtf((float)n), 32);
    tu_randn(ds, total, 0.0f, 1.0f, 33);
    sf_lif_params p;
    tu_seed_neuron(&p, grad_threshold, 0.5f);
    void *ws = malloc(be->rlif_workspace(be, T, B, n));
    sf_spikes c[2] = {alloc_spikes(rows, n), alloc_spikes(rows, n)};
    for (int k = 0; k < 2; k++) { /* k = 0 dense, 1 event-driven */
        s[k] = zalloc(4 * (size_t)total), h[k] = zalloc(4 * (size_t)total);
        sf_lif_out out = {.s = s[k], .h = h[k], .spike_count = &cnt[k], .c = c[k], .row = n};
        CHECK_OK(be->rlif_forward(be, &p, T, B, n, x, v, k, &out, ws));
        check_compact(what, rows, n, s[k], &c[k]);
    }
    CHECK(memcmp(s[0], s[1], 4 * (size_t)total) == 0, "%s: dense and event-driven spikes differ", what);
    CHECK(rel_ff(h[1], h[0], total) <= 1e-5, "%s: h relative error %.3g", what, rel_ff(h[1], h[0], total));
    CHECK(cnt[0] == cnt[1] && cnt[0] > 0 && cnt[0] < total, "%s: spike counts %g, %g of %lld", what, cnt[0], cnt[1],
          (long long)total);
    const int flags[3] = {0, SF_RLIF_SPARSE_DV | SF_RLIF_SPARSE_DY, SF_RLIF_SPARSE_DV | SF_RLIF_SPARSE_DY};
    sf_spikes m = alloc_spikes(rows, n);
    free(m.idx);
    m.idx = NULL;
    for (int k = 0; k < 3; k++) { /* dense; event-driven from the saved h and spike bits; event-driven recomputing h */
        dx[k] = zalloc(4 * (size_t)total), dv[k] = zalloc(4 * (size_t)(n * n));
        CHECK_OK(be->rlif_backward(be, &p, T, B, n, x, k == 2 ? NULL : h[k > 0], k == 1 ? c[1].bits : NULL, v, ds,
                                   k > 0, flags[k], dx[k], dv[k], k == 1 ? &m : NULL, &gc[k], ws));
    }
    sf_spikes ref = mask_of(dx[1], rows, n);
    CHECK(memcmp(m.bits, ref.bits, (size_t)(rows * sf_spike_words(n)) * 4) == 0 &&
              memcmp(m.cnt, ref.cnt, (size_t)(rows * sf_spike_segs(n)) * 4) == 0,
          "%s: the mask does not mark the nonzero dx", what);
    free_spikes(&m);
    free_spikes(&ref);
    CHECK(rel_ff(dx[1], dx[0], total) <= 1e-5, "%s: dx relative error %.3g", what, rel_ff(dx[1], dx[0], total));
    CHECK(rel_ff(dv[1], dv[0], n * n) <= 1e-5 || T == 1, "%s: dV relative error %.3g", what, rel_ff(dv[1], dv[0], n * n));
    CHECK(memcmp(dx[1], dx[2], 4 * (size_t)total) == 0 && memcmp(dv[1], dv[2], 4 * (size_t)(n * n)) == 0,
          "%s: recomputing h changed the gradients", what);
    CHECK(gc[0] == gc[1] && gc[1] == gc[2], "%s: nonzero gradient counts %g %g %g", what, gc[0], gc[1], gc[2]);
    if (T == 1)
        for (int64_t i = 0; i < n * n; i++) CHECK(dv[0][i] == 0.0f && dv[1][i] == 0.0f, "%s: T = 1 but dV != 0", what);
    /* One thread gives the event-driven results bitwise (the sweeps split the neurons between threads). */
    const int32_t threads = sf_get_num_threads();
    float *s1 = zalloc(4 * (size_t)total), *h1 = zalloc(4 * (size_t)total), *dx1 = zalloc(4 * (size_t)total);
    float *dv1 = zalloc(4 * (size_t)(n * n)), cnt1 = 0.0f, gc1 = 0.0f;
    sf_set_num_threads(1);
    sf_lif_out one = {.s = s1, .h = h1, .spike_count = &cnt1, .c = c[1], .row = n};
    CHECK_OK(be->rlif_forward(be, &p, T, B, n, x, v, 1, &one, ws));
    CHECK_OK(be->rlif_backward(be, &p, T, B, n, x, h1, NULL, v, ds, 1, flags[1], dx1, dv1, NULL, &gc1, ws));
    sf_set_num_threads(threads);
    CHECK(memcmp(s1, s[1], 4 * (size_t)total) == 0 && memcmp(h1, h[1], 4 * (size_t)total) == 0 &&
              memcmp(dx1, dx[1], 4 * (size_t)total) == 0 && memcmp(dv1, dv[1], 4 * (size_t)(n * n)) == 0 &&
              cnt1 == cnt[1] && gc1 == gc[1],
          "%s: one thread and %d differ", what, threads);
    free(s1), free(h1), free(dx1), free(dv1);
    for (int k = 0; k < 3; k++) free(dx[k]), free(dv[k]);
    for (int k = 0; k < 2; k++) free(s[k]), free(h[k]), free_spikes(&c[k]);
    free(x), free(v), free(ds), free(ws);
}

/* With carried state (a time segment of a longer run: v_in, v_out, dv_in, dv_out), the compact forward and the
 * masked backward give the plain ops' spikes, dx and states bitwise. */
static void test_lif_state(const shape *sh, int grad_threshold)
{
    char what[96];
    snprintf(what, sizeof what, "LIF state T=%lld B=%lld n=%lld g=%d", (long long)sh->T, (long long)sh->B,
             (long long)sh->n, grad_threshold);
    const int64_t n = sh->n, rows = sh->T * sh->B, N = sh->B * n, total = rows * n;
    float *x = malloc(4 * (size_t)total), *ds = malloc(4 * (size_t)total), *vin = malloc(4 * (size_t)N);
    float *dvin = malloc(4 * (size_t)N), *s1 = zalloc(4 * (size_t)total), *s2 = zalloc(4 * (size_t)total);
    float *dx1 = zalloc(4 * (size_t)total), *dx2 = zalloc(4 * (size_t)total);
    float *v1 = zalloc(4 * (size_t)N), *v2 = zalloc(4 * (size_t)N), *dv1 = zalloc(4 * (size_t)N), *dv2 = zalloc(4 * (size_t)N);
    tu_randn(x, total, 0.6f, 1.0f, 41);
    tu_randn(ds, total, 0.0f, 1.0f, 42);
    tu_randn(vin, N, 0.3f, 0.4f, 43);
    tu_randn(dvin, N, 0.0f, 1.0f, 44);
    sf_lif_params p;
    tu_seed_neuron(&p, grad_threshold, 0.6f);
    float c1 = 0, c2 = 0, count = 0;
    sf_lif_state a = {.v_in = vin, .v_out = v1}, b = {.v_in = vin, .v_out = v2};
    CHECK_OK(be->lif_forward(be, &p, sh->T, N, x, &(sf_lif_out){.s = s1, .spike_count = &c1}, &a));
    sf_spikes c = alloc_spikes(rows, n), m = alloc_spikes(rows, n);
    CHECK_OK(be->lif_forward(be, &p, sh->T, N, x, &(sf_lif_out){.s = s2, .spike_count = &c2, .c = c, .row = n}, &b));
    CHECK(memcmp(s1, s2, 4 * (size_t)total) == 0 && c1 == c2, "%s: compact spikes differ", what);
    CHECK(memcmp(v1, v2, 4 * (size_t)N) == 0, "%s: compact v_out differs", what);
    check_compact(what, rows, n, s1, &c);
    sf_lif_state ga = {.v_in = vin, .dv_in = dvin, .dv_out = dv1}, gb = {.v_in = vin, .dv_in = dvin, .dv_out = dv2};
    CHECK_OK(be->lif_backward(be, &p, sh->T, N, x, NULL, ds, dx1, &ga));
    free(m.idx);
    m.idx = NULL;
    CHECK_OK(be->lif_backward_masked(be, &p, sh->T, sh->B, n, x, NULL, ds, dx2, &m, &count, &gb));
    CHECK(memcmp(dx1, dx2, 4 * (size_t)total) == 0, "%s: masked dx differs", what);
    CHECK(memcmp(dv1, dv2, 4 * (size_t)N) == 0, "%s: masked dv_out differs", what);
    free_spikes(&c);
    free_spikes(&m);
    free(x), free(ds), free(vin), free(dvin), free(s1), free(s2), free(dx1), free(dx2), free(v1), free(v2), free(dv1);
    free(dv2);
}

int main(void)
{
    CHECK_OK(sf_cpu_backend_create(&be));
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t d = 0; d < sizeof densities / sizeof densities[0]; d++) test_lif_compact(&shapes[i], (int)d);
    const struct {
        int64_t rows;
        int32_t in, out;
    } lin[] = {{37, 300, 65}, {1, 1, 1}, {12, 513, 17}, {64, 96, 130}, {5, 33, 64}};
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++)
        for (size_t d = 0; d < sizeof densities / sizeof densities[0]; d++)
            test_linear(lin[i].rows, lin[i].in, lin[i].out, (int)d);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int g = 0; g < 3; g++)
            for (int full = 0; full < 2; full++) test_lif_masked(&shapes[i], g, full);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int g = 0; g < 3; g++) test_lif_state(&shapes[i], g);
    test_rlif(6, 3, 40, 0);
    test_rlif(6, 3, 40, 1);
    test_rlif(1, 1, 9, 0);
    test_rlif(9, 2, 300, 1);
    test_rlif(8, 3, 70, 2);
    test_rlif(4, 1, 65, 0);
    test_rlif(3, 70, 130, 1); /* the per-step products over two chunks of rows (64 + 6) */
    test_rlif(2, 129, 64, 2);
    for (int g = 0; g < 3; g++) test_rlif(3, 16, 1100, g); /* several threads, each its own samples */
    sf_backend_free(be);
    return tu_finish("test_sparse_ops");
}
