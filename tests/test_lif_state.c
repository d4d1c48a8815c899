/* test_lif_state.c — the neuron state carried across calls (sf_lif_state) and the two-phase BN→LIF backward
 * (sf_bn_split) on the CPU: a sequence cut into pieces of time, run piece by piece with v and ∂L/∂v handed on,
 * gives the spikes, h, dx and ∂L/∂v of one call over the whole sequence bitwise; BN statistics merged from equal
 * parts (bn_stats_merge) and the split backward agree with the whole batch within float rounding. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_neuron.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *alloc_f(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(float)); }

static int bits_equal(const float *a, const float *b, int64_t n) { return memcmp(a, b, (size_t)n * sizeof *a) == 0; }

/* One LIF layer of N neurons over T steps, whole and in pieces ending at cuts[0] < cuts[1] < ... = T. */
static void check_lif_pieces(const sf_lif_params *p, int64_t T, int64_t N, const int64_t *cuts, int ncuts,
                             int keep_h)
{
    const int64_t n = T * N;
    float *x = alloc_f(n), *ds = alloc_f(n);
    tu_randn(x, n, 0.6f, 1.0f, 101);
    tu_randn(ds, n, 0.0f, 1.0f, 102);
    float *s = alloc_f(n), *h = alloc_f(n), *dx = alloc_f(n), *v_end = alloc_f(N), *dv0 = alloc_f(N);
    sf_lif_out out = {.s = s, .h = h};
    sf_lif_state whole = {.v_out = v_end, .dv_out = dv0};
    CHECK_OK(sf_cpu_lif_forward(p, T, N, x, &out, &whole));
    CHECK_OK(sf_cpu_lif_backward(p, T, N, x, keep_h ? h : NULL, ds, dx, &whole));

    float *ps = alloc_f(n), *ph = alloc_f(n), *pdx = alloc_f(n);
    float *v = alloc_f((int64_t)(ncuts + 1) * N), *dv = alloc_f((int64_t)(ncuts + 1) * N);
    /* v + k·N: v before piece k (k = 0 stays unused: the model's start); dv likewise after piece k */
    for (int k = 0, t0 = 0; k < ncuts; t0 = (int)cuts[k], k++) {
        const int64_t len = cuts[k] - t0;
        sf_lif_out o = {.s = ps + t0 * N, .h = ph + t0 * N};
        sf_lif_state st = {.v_in = k ? v + k * N : NULL, .v_out = v + (k + 1) * N};
        CHECK_OK(sf_cpu_op_lif_forward(NULL, p, len, N, x + t0 * N, &o, &st));
    }
    for (int k = ncuts - 1; k >= 0; k--) {
        const int64_t t0 = k ? cuts[k - 1] : 0, len = cuts[k] - t0;
        sf_lif_state st = {.v_in = k ? v + k * N : NULL, .dv_in = k + 1 < ncuts ? dv + (k + 1) * N : NULL,
                           .dv_out = dv + k * N};
        CHECK_OK(sf_cpu_op_lif_backward(NULL, p, len, N, x + t0 * N, keep_h ? ph + t0 * N : NULL, ds + t0 * N,
                                        pdx + t0 * N, &st));
    }
    CHECK(bits_equal(ps, s, n) && bits_equal(ph, h, n), "surrogate %s soft %d detach %d, %d pieces: spikes or h differ",
          sf_surrogate_name(p->surrogate), p->soft_reset, p->detach_reset, ncuts);
    CHECK(bits_equal(v + ncuts * N, v_end, N), "%d pieces: the last v differs from the whole call's", ncuts);
    CHECK(bits_equal(pdx, dx, n), "surrogate %s soft %d detach %d keep_h %d, %d pieces: dx differs",
          sf_surrogate_name(p->surrogate), p->soft_reset, p->detach_reset, keep_h, ncuts);
    CHECK(bits_equal(dv, dv0, N), "%d pieces: dL/dv before the first step differs", ncuts);
    int64_t fired = 0, nonzero_dv = 0;
    for (int64_t i = 0; i < n; i++) fired += s[i] != 0.0f;
    for (int64_t i = 0; i < N; i++) nonzero_dv += dv0[i] != 0.0f;
    CHECK(fired > n / 50 && nonzero_dv > N / 2, "input fires %lld of %lld, %lld of %lld dL/dv0 nonzero: not a test",
          (long long)fired, (long long)n, (long long)nonzero_dv, (long long)N);
    free(x), free(ds), free(s), free(h), free(dx), free(v_end), free(dv0), free(ps), free(ph), free(pdx), free(v),
        free(dv);
}

/* v_out may be v_in itself and dv_out dv_in itself (a stateful layer updating its state in place). */
static void check_in_place(void)
{
    const int64_t T = 5, N = 70;
    sf_lif_params p;
    sf_lif_default_params(&p);
    float *x = alloc_f(2 * T * N), *ds = alloc_f(2 * T * N), *s = alloc_f(2 * T * N), *s2 = alloc_f(2 * T * N);
    float *dx = alloc_f(2 * T * N), *dx2 = alloc_f(2 * T * N), *v = alloc_f(N), *v1 = alloc_f(N), *dv = alloc_f(N);
    tu_randn(x, 2 * T * N, 0.7f, 1.0f, 7);
    tu_randn(ds, 2 * T * N, 0.0f, 1.0f, 8);
    sf_lif_out o = {.s = s};
    CHECK_OK(sf_cpu_lif_forward(&p, 2 * T, N, x, &o, NULL));
    CHECK_OK(sf_cpu_lif_backward(&p, 2 * T, N, x, NULL, ds, dx, NULL));
    sf_lif_state a = {.v_out = v};
    sf_lif_out o1 = {.s = s2}, o2 = {.s = s2 + T * N};
    CHECK_OK(sf_cpu_lif_forward(&p, T, N, x, &o1, &a));
    memcpy(v1, v, (size_t)N * sizeof *v);
    sf_lif_state b = {.v_in = v, .v_out = v}; /* in place */
    CHECK_OK(sf_cpu_lif_forward(&p, T, N, x + T * N, &o2, &b));
    sf_lif_state c = {.v_in = v1, .dv_out = dv};
    CHECK_OK(sf_cpu_lif_backward(&p, T, N, x + T * N, NULL, ds + T * N, dx2 + T * N, &c));
    sf_lif_state d = {.dv_in = dv, .dv_out = dv}; /* in place */
    CHECK_OK(sf_cpu_lif_backward(&p, T, N, x, NULL, ds, dx2, &d));
    CHECK(bits_equal(s, s2, 2 * T * N) && bits_equal(dx, dx2, 2 * T * N), "in-place state: results differ");
    /* the public entry points take the same state */
    float *s3 = alloc_f(T * N);
    sf_lif_state e = {.v_in = v1};
    sf_device cpu = {SF_DEVICE_CPU, 0};
    CHECK_OK(sf_lif_forward_state(&p, T, N, x + T * N, s3, &e, cpu, NULL));
    CHECK(bits_equal(s3, s + T * N, T * N), "sf_lif_forward_state: spikes differ from the chained whole call");
    free(x), free(ds), free(s), free(s2), free(dx), free(dx2), free(v), free(v1), free(dv), free(s3);
}

/* BN→LIF over x [T, B, C, hw] whole, and as `parts` equal time pieces: statistics merged from the pieces, spikes
 * with the state carried, and the two-phase backward with the pieces' sums added. */
static void check_bn_lif_pieces(int parts, int keep_h)
{
    const int64_t T = 8, B = 3, C = 5, hw = 7, N = B * C * hw, n = T * N, Tp = T / parts;
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.surrogate = SF_SURROGATE_ATAN;
    p.alpha = 2.0f;
    float *x = alloc_f(n), *ds = alloc_f(n), *gamma = alloc_f(C), *beta = alloc_f(C);
    tu_randn(x, n, 0.3f, 1.5f, 31);
    tu_randn(ds, n, 0.0f, 1.0f, 32);
    tu_randn(gamma, C, 1.0f, 0.2f, 33);
    tu_randn(beta, C, 0.8f, 0.3f, 34);
    const float eps = 1e-5f;
    sf_bn_shape sh = {.rows = T * B, .c = (int32_t)C, .hw = hw};
    float *mean = alloc_f(C), *var = alloc_f(C), *s = alloc_f(n), *h = alloc_f(n), *dx = alloc_f(n);
    float *dg = alloc_f(C), *db = alloc_f(C), *dv0 = alloc_f(N);
    CHECK_OK(sf_cpu_op_bn_stats(NULL, sh, x, mean, var));
    sf_lif_out out = {.s = s, .h = h};
    CHECK_OK(sf_cpu_op_bn_lif_forward(NULL, &p, T, sh, x, mean, var, eps, gamma, beta, &out, NULL));
    sf_lif_state whole = {.dv_out = dv0};
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, keep_h ? h : NULL, mean, var, eps, gamma, beta, ds, dx, dg,
                                       db, &whole, NULL, NULL));

    /* statistics: each piece's, merged */
    sf_bn_shape psh = {.rows = Tp * B, .c = (int32_t)C, .hw = hw};
    float *ps = alloc_f((int64_t)parts * 2 * C), *pm = alloc_f(C), *pv = alloc_f(C);
    for (int k = 0; k < parts; k++)
        CHECK_OK(sf_cpu_op_bn_stats(NULL, psh, x + k * Tp * N, ps + k * 2 * C, ps + k * 2 * C + C));
    CHECK_OK(sf_cpu_op_bn_stats_merge(NULL, parts, (int32_t)C, ps, pm, pv));
    CHECK(tu_rel_err_f32(pm, mean, C) < 1e-6 && tu_rel_err_f32(pv, var, C) < 1e-6, "%d parts: merged statistics differ", parts);

    /* forward and backward in pieces with the whole's statistics (so that spikes must match bitwise) */
    float *s2 = alloc_f(n), *h2 = alloc_f(n), *dx2 = alloc_f(n), *v = alloc_f((int64_t)(parts + 1) * N);
    float *dv = alloc_f((int64_t)(parts + 1) * N), *pg = alloc_f((int64_t)parts * C), *pb = alloc_f((int64_t)parts * C);
    for (int k = 0; k < parts; k++) {
        sf_lif_out o = {.s = s2 + k * Tp * N, .h = h2 + k * Tp * N};
        sf_lif_state st = {.v_in = k ? v + k * N : NULL, .v_out = v + (k + 1) * N};
        CHECK_OK(sf_cpu_op_bn_lif_forward(NULL, &p, Tp, psh, x + k * Tp * N, mean, var, eps, gamma, beta, &o, &st));
    }
    CHECK(bits_equal(s2, s, n) && bits_equal(h2, h, n), "BN-LIF in %d pieces: spikes or h differ", parts);
    sf_bn_split one = {.phase = 1};
    for (int k = parts - 1; k >= 0; k--) {
        sf_lif_state st = {.v_in = k ? v + k * N : NULL, .dv_in = k + 1 < parts ? dv + (k + 1) * N : NULL,
                           .dv_out = dv + k * N};
        CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, Tp, psh, x + k * Tp * N, keep_h ? h2 + k * Tp * N : NULL, mean,
                                           var, eps, gamma, beta, ds + k * Tp * N, NULL, pg + k * C, pb + k * C, &st,
                                           &one, NULL));
    }
    float *sum_g = alloc_f(C), *sum_b = alloc_f(C);
    for (int k = 0; k < parts; k++)
        for (int64_t c = 0; c < C; c++) sum_g[c] += pg[k * C + c], sum_b[c] += pb[k * C + c];
    sf_bn_split two = {.phase = 2, .sum_dy = sum_b, .sum_dyx = sum_g, .rows = T * B};
    for (int k = 0; k < parts; k++) {
        sf_lif_state st = {.v_in = k ? v + k * N : NULL, .dv_in = k + 1 < parts ? dv + (k + 1) * N : NULL};
        CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, Tp, psh, x + k * Tp * N, keep_h ? h2 + k * Tp * N : NULL, mean,
                                           var, eps, gamma, beta, ds + k * Tp * N, dx2 + k * Tp * N, NULL, NULL, &st,
                                           &two, NULL));
    }
    CHECK(tu_rel_err_f32(sum_g, dg, C) < 1e-6 && tu_rel_err_f32(sum_b, db, C) < 1e-6, "%d parts: dgamma/dbeta differ (%g, %g)",
          parts, tu_rel_err_f32(sum_g, dg, C), tu_rel_err_f32(sum_b, db, C));
    CHECK(tu_rel_err_f32(dx2, dx, n) < 1e-5, "%d parts keep_h %d: dx differs by %g", parts, keep_h, tu_rel_err_f32(dx2, dx, n));
    CHECK(bits_equal(dv, dv0, N), "%d parts: dL/dv before the first step differs", parts);

    /* bad input is refused */
    sf_bn_split bad = {.phase = 3};
    CHECK(sf_cpu_op_bn_lif_backward(NULL, &p, Tp, psh, x, NULL, mean, var, eps, gamma, beta, ds, dx2, dg, db, NULL,
                                    &bad, NULL) == SF_ERR_INVALID,
          "phase 3 must be rejected");
    CHECK(sf_cpu_op_bn_lif_backward(NULL, &p, Tp, psh, x, NULL, mean, var, eps, gamma, beta, ds, NULL, NULL, NULL, NULL,
                                    &one, NULL) == SF_ERR_INVALID,
          "phase 1 without dgamma/dbeta must be rejected");
    sf_bn_split two_empty = {.phase = 2};
    CHECK(sf_cpu_op_bn_lif_backward(NULL, &p, Tp, psh, x, NULL, mean, var, eps, gamma, beta, ds, dx2, NULL, NULL, NULL,
                                    &two_empty, NULL) == SF_ERR_INVALID,
          "phase 2 without the sums must be rejected");
    CHECK(sf_cpu_op_bn_stats_merge(NULL, 0, (int32_t)C, ps, pm, pv) == SF_ERR_INVALID, "0 parts must be rejected");
    free(x), free(ds), free(gamma), free(beta), free(mean), free(var), free(s), free(h), free(dx), free(dg), free(db),
        free(dv0), free(ps), free(pm), free(pv), free(s2), free(h2), free(dx2), free(v), free(dv), free(pg), free(pb),
        free(sum_g), free(sum_b);
}

int main(void)
{
    const int64_t two[] = {4, 9}, three[] = {1, 5, 9}, ones[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int sur = 0; sur < 4; sur++)
        for (int flags = 0; flags < 8; flags++) {
            sf_lif_params p;
            sf_lif_default_params(&p);
            p.surrogate = (sf_surrogate)sur;
            p.alpha = sf_surrogate_default_alpha(p.surrogate);
            p.soft_reset = flags & 1;
            p.detach_reset = (flags >> 1) & 1;
            p.use_grad_threshold = (flags >> 2) & 1;
            p.grad_threshold = 0.2f;
            check_lif_pieces(&p, 9, 130, two, 2, sur & 1);
            check_lif_pieces(&p, 9, 130, three, 3, !(sur & 1));
        }
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.decay_input = 0;
    p.tau = 3.0f;
    p.v_reset = -0.2f;
    check_lif_pieces(&p, 9, 64, ones, 9, 0);
    check_in_place();
    for (int keep = 0; keep < 2; keep++) {
        check_bn_lif_pieces(2, keep);
        check_bn_lif_pieces(4, keep);
    }
    return tu_finish("test_lif_state");
}
