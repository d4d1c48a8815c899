/* test_neurons.c — the CPU PLIF, IF and ALIF kernels (plain and fused after BN) against PyTorch float64 autograd
 * (tests/ref/gen_neuron.py): every surrogate × reset × detach_reset (decay_input and θ_grad alternating), a PLIF's w
 * per layer and per channel (its dw), T = 1, odd sizes, more neurons than a kernel block, and each model's own
 * parameters.
 *
 * Spikes exact (the fixtures keep every h at least 1e-4 from a breakpoint, the ALIF's moving threshold included); h
 * within 1e-6, dx and the parameter gradients within 1e-5 relative (L2) error, float32 against float64. Bitwise:
 * full (h kept) and recompute backward, 1 and 2 OpenMP threads, a sequence run in two pieces with the state carried
 * (sf_lif_state: v and the ALIF's b) and one call; and the fused BN→neuron forward and BN then the neuron.
 * The float64 calls (SF_SCALAR_F64) on every case: spikes exact, gradients within 1e-6 (the fixtures round the
 * coefficients to float32 as the float kernels do, the float64 calls keep them in double: python/tests checks
 * them against a double reference to 1e-12), two pieces bitwise equal to one call; and their refusal on CUDA. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_neuron.h"
#include "testutil.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TOL_H 1e-6
#define TOL_GRAD 1e-5

typedef struct neuron_case {
    char name[32];
    sf_lif_params p;
    int64_t T, N, n;
    float *x, *ds, *w;
    double *s, *h, *dx, *dw;
    int32_t wc; /* w's channels (PLIF), else 0 */
    int64_t whw;
} neuron_case;

static int load_case(const sf_safetensors *st, const char *prefix, int idx, neuron_case *k)
{
    char key[96];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s%d", prefix, idx);
#define KEY(field) (snprintf(key, sizeof key, "%s." field, k->name), key)
    const sf_st_entry *e = sf_safetensors_find(st, KEY("x"));
    CHECK(e && e->ndim == 2, "%s: missing or not [T, N]", key);
    if (!e || e->ndim != 2) return 0;
    k->T = e->shape[0];
    k->N = e->shape[1];
    k->n = k->T * k->N;
    double *pv = tu_get_f64(st, KEY("params"), TU_LIF_PARAMS);
    tu_lif_params_of(pv, &k->p);
    free(pv);
    k->x = tu_get_f32(st, KEY("x"), k->n);
    k->ds = tu_get_f32(st, KEY("ds"), k->n);
    k->s = tu_get_f64(st, KEY("s"), k->n);
    k->h = tu_get_f64(st, KEY("h"), k->n);
    k->dx = tu_get_f64(st, KEY("dx"), k->n);
    if (k->p.model == SF_NEURON_PLIF) {
        double shape[2];
        CHECK_OK(sf_safetensors_get_f64(st, KEY("wshape"), shape, 2));
        k->wc = (int32_t)shape[0];
        k->whw = (int64_t)shape[1];
        k->w = tu_get_f32(st, KEY("w"), k->wc);
        k->dw = tu_get_f64(st, KEY("dw"), k->wc);
    }
#undef KEY
    return 1;
}

static void free_case(neuron_case *k)
{
    void *ps[] = {k->x, k->ds, k->w, k->s, k->h, k->dx, k->dw};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

/* The case's PLIF w (and where dw goes) in a state whose v pointers are those given. */
static sf_lif_state state_of(const neuron_case *k, float *dw)
{
    sf_lif_state st = {0};
    st.w = k->w;
    st.dw = dw;
    st.w_channels = k->wc ? k->wc : 1;
    st.w_hw = k->whw;
    return st;
}

/* The case run in two pieces of time (T0 steps, then the rest) with the state carried, against one call: spikes and
 * dx bitwise equal; a PLIF's dw is the sum of the pieces' (equal within rounding: the pieces sum apart). */
static void check_pieces(const neuron_case *k, const float *s_whole, const float *dx_whole, const float *dw_whole)
{
    const int64_t T0 = k->T / 2, N = k->N, n0 = T0 * N, S = k->p.model == SF_NEURON_ALIF ? 2 : 1;
    if (T0 == 0) return;
    float *s = malloc(k->n * sizeof *s), *dx = malloc(k->n * sizeof *dx);
    float *mid = malloc(S * N * sizeof *mid), *dmid = malloc(S * N * sizeof *dmid);
    float dw[2][64] = {{0}};
    sf_lif_state a = state_of(k, dw[0]), b = state_of(k, dw[1]);
    a.v_out = mid;
    b.v_in = mid;
    b.dv_out = dmid;
    a.dv_in = dmid;
    sf_lif_out oa = {.s = s}, ob = {.s = s + n0};
    CHECK_OK(sf_cpu_lif_forward(&k->p, T0, N, k->x, &oa, &a));
    CHECK_OK(sf_cpu_lif_forward(&k->p, k->T - T0, N, k->x + n0, &ob, &b));
    CHECK_OK(sf_cpu_lif_backward(&k->p, k->T - T0, N, k->x + n0, NULL, k->ds + n0, dx + n0, &b));
    CHECK_OK(sf_cpu_lif_backward(&k->p, T0, N, k->x, NULL, k->ds, dx, &a));
    CHECK(memcmp(s, s_whole, k->n * sizeof *s) == 0, "%s: spikes of two pieces differ from one call", k->name);
    CHECK(memcmp(dx, dx_whole, k->n * sizeof *dx) == 0, "%s: dx of two pieces differs from one call", k->name);
    if (k->wc) {
        double ref[64];
        float sum[64];
        for (int32_t c = 0; c < k->wc; c++) {
            sum[c] = dw[0][c] + dw[1][c];
            ref[c] = dw_whole[c];
        }
        char what[96];
        snprintf(what, sizeof what, "%s dw of two pieces", k->name);
        tu_expect_close(what, sum, ref, k->wc, 1e-5);
    }
    free(s);
    free(dx);
    free(mid);
    free(dmid);
}

/* ---------------------------------------------------------------- float64 */

#define TOL_F64 1e-6 /* against the fixtures' float32-rounded coefficients */

static const sf_device cpu = {SF_DEVICE_CPU, 0};

static double *widen(const float *a, int64_t n)
{
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}

static int64_t count_diff_f64(const double *got, const double *ref, int64_t n)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) k += got[i] != ref[i];
    return k;
}

/* A state for the float64 calls: its arrays are doubles behind sf_lif_state's float pointers (spikefuse.h). */
static sf_lif_state state_f64(const neuron_case *k, const double *w, double *dw)
{
    sf_lif_state st = state_of(k, (float *)dw);
    st.w = (const float *)w;
    return st;
}

/* The case through the public float64 calls, in one call and in two pieces with the (double) state carried. */
static void check_case_f64(const neuron_case *k)
{
    const int64_t n = k->n, T = k->T, N = k->N, T0 = T / 2, n0 = T0 * N, S = k->p.model == SF_NEURON_ALIF ? 2 : 1;
    double *x = widen(k->x, n), *ds = widen(k->ds, n), *w = k->wc ? widen(k->w, k->wc) : NULL;
    double *s = malloc(n * sizeof *s), *dx = malloc(n * sizeof *dx), *s2 = malloc(n * sizeof *s2);
    double *dx2 = malloc(n * sizeof *dx2), *mid = malloc(S * N * sizeof *mid), *dmid = malloc(S * N * sizeof *dmid);
    double dw[64], dwp[2][64];
    char what[96];
    sf_lif_state whole = state_f64(k, w, dw);
    const sf_lif_state *use = k->wc ? &whole : NULL;
    CHECK_OK(sf_lif_forward_typed(&k->p, T, N, SF_SCALAR_F64, x, s, use, cpu, NULL));
    CHECK_OK(sf_lif_backward_typed(&k->p, T, N, SF_SCALAR_F64, x, ds, dx, use, cpu, NULL));
    CHECK(count_diff_f64(s, k->s, n) == 0, "%s float64: spikes differ", k->name);
    snprintf(what, sizeof what, "%s float64 dx", k->name);
    tu_expect_close_f64(what, dx, k->dx, n, TOL_F64);
    if (k->wc) {
        snprintf(what, sizeof what, "%s float64 dw", k->name);
        tu_expect_close_f64(what, dw, k->dw, k->wc, TOL_F64);
    }
    if (T0 > 0) {
        sf_lif_state a = state_f64(k, w, dwp[0]), b = state_f64(k, w, dwp[1]);
        a.v_out = (float *)mid;
        b.v_in = (const float *)mid;
        b.dv_out = (float *)dmid;
        a.dv_in = (const float *)dmid;
        CHECK_OK(sf_lif_forward_typed(&k->p, T0, N, SF_SCALAR_F64, x, s2, &a, cpu, NULL));
        CHECK_OK(sf_lif_forward_typed(&k->p, T - T0, N, SF_SCALAR_F64, x + n0, s2 + n0, &b, cpu, NULL));
        CHECK_OK(sf_lif_backward_typed(&k->p, T - T0, N, SF_SCALAR_F64, x + n0, ds + n0, dx2 + n0, &b, cpu, NULL));
        CHECK_OK(sf_lif_backward_typed(&k->p, T0, N, SF_SCALAR_F64, x, ds, dx2, &a, cpu, NULL));
        CHECK(memcmp(s, s2, n * sizeof *s) == 0 && memcmp(dx, dx2, n * sizeof *dx) == 0,
              "%s float64: two pieces differ from one call", k->name);
        for (int32_t c = 0; c < k->wc; c++) dwp[0][c] += dwp[1][c];
        snprintf(what, sizeof what, "%s float64 dw of two pieces", k->name);
        if (k->wc) tu_expect_close_f64(what, dwp[0], dw, k->wc, 1e-13);
    }
    void *ps[] = {x, ds, w, s, dx, s2, dx2, mid, dmid};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

/* The fused BN→neuron in float64 with x's batch statistics (biased var) in double, against the fixture. */
static void check_bn_case_f64(const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, float eps,
                              const float *x32, const float *gamma32, const float *beta32, const float *ds32,
                              const float *w32, int64_t wc, const double *s_ref, const double *dx_ref,
                              const double *dg_ref, const double *db_ref, const double *dw_ref, int idx)
{
    const int64_t n = T * B * C * hw;
    double *x = widen(x32, n), *ds = widen(ds32, n), *gamma = widen(gamma32, C), *beta = widen(beta32, C);
    double *w = wc ? widen(w32, wc) : NULL, *s = malloc(n * sizeof *s), *dx = malloc(n * sizeof *dx);
    double *stats = calloc(4 * (size_t)C, sizeof *stats), *mean = stats, *var = stats + C, *dg = stats + 2 * C;
    double *db = stats + 3 * C, dw[64];
    const double count = (double)(T * B * hw);
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < n; i++) {
            const int64_t c = i / hw % C;
            if (pass == 0) mean[c] += x[i] / count;
            else var[c] += (x[i] - mean[c]) * (x[i] - mean[c]) / count;
        }
    sf_lif_state st = {.w = (const float *)w, .dw = (float *)dw, .w_channels = (int32_t)(wc > 1 ? C : 1), .w_hw = hw};
    const sf_lif_state *use = wc ? &st : NULL;
    char what[96];
    CHECK_OK(sf_bn_lif_forward(p, T, B, C, hw, SF_SCALAR_F64, x, (const float *)mean, (const float *)var, eps,
                               (const float *)gamma, (const float *)beta, s, use, cpu, NULL));
    CHECK(count_diff_f64(s, s_ref, n) == 0, "b%d float64: spikes differ", idx);
    CHECK_OK(sf_bn_lif_backward(p, T, B, C, hw, SF_SCALAR_F64, x, (const float *)mean, (const float *)var, eps,
                                (const float *)gamma, (const float *)beta, ds, dx, (float *)dg, (float *)db, use, NULL,
                                0, cpu, NULL));
#define CLOSE(name, got, ref, m) (snprintf(what, sizeof what, "b%d float64 %s", idx, name), \
                                  tu_expect_close_f64(what, got, ref, m, TOL_F64))
    CLOSE("dx", dx, dx_ref, n);
    CLOSE("dgamma", dg, dg_ref, C);
    CLOSE("dbeta", db, db_ref, C);
    if (wc) CLOSE("dw", dw, dw_ref, wc);
#undef CLOSE
    void *ps[] = {x, ds, gamma, beta, w, s, dx, stats};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

static void check_case(const sf_safetensors *st, int idx)
{
    neuron_case k;
    if (!load_case(st, "n", idx, &k)) return;
    const int64_t n = k.n, T = k.T, N = k.N;
    char what[160];
#define WHAT(s) (snprintf(what, sizeof what, "%s (%s, T=%lld N=%lld, %s, soft %d, detach %d, di %d, gt %d) %s", k.name, \
                          sf_neuron_model_name(k.p.model), (long long)T, (long long)N,                          \
                          sf_surrogate_name(k.p.surrogate), k.p.soft_reset, k.p.detach_reset, k.p.decay_input,  \
                          k.p.use_grad_threshold, s),                                                            \
                 what)
    float *s = malloc(n * sizeof *s), *h = malloc(n * sizeof *h), *dx = malloc(n * sizeof *dx);
    float *dx_full = malloc(n * sizeof *dx_full), *dx1 = malloc(n * sizeof *dx1);
    float dw[64], dw_full[64], dw1[64];
    sf_lif_state sta = state_of(&k, dw), stf = state_of(&k, dw_full), st1 = state_of(&k, dw1);
    const sf_lif_state *use = k.wc ? &sta : NULL; /* the other models run without a state */
    float count = 0;
    sf_lif_out out = {.s = s, .h = h, .spike_count = &count};
    CHECK_OK(sf_cpu_lif_forward(&k.p, T, N, k.x, &out, use));
    CHECK(tu_count_diff(s, k.s, n) == 0, "%s", WHAT("spikes differ"));
    double ref_count = 0;
    for (int64_t i = 0; i < n; i++) ref_count += k.s[i];
    CHECK(count == (float)ref_count, "%s: %g vs %g", WHAT("spike_count"), count, ref_count);
    tu_expect_close(WHAT("h"), h, k.h, n, TOL_H);

    CHECK_OK(sf_cpu_lif_backward(&k.p, T, N, k.x, NULL, k.ds, dx, use));
    tu_expect_close(WHAT("dx"), dx, k.dx, n, TOL_GRAD);
    if (k.wc) tu_expect_close(WHAT("dw"), dw, k.dw, k.wc, TOL_GRAD);
    CHECK_OK(sf_cpu_lif_backward(&k.p, T, N, k.x, h, k.ds, dx_full, k.wc ? &stf : NULL));
    CHECK(memcmp(dx, dx_full, n * sizeof *dx) == 0 && (!k.wc || memcmp(dw, dw_full, k.wc * sizeof *dw) == 0), "%s",
          WHAT("full and recompute gradients are not bitwise equal"));
    omp_set_num_threads(1);
    CHECK_OK(sf_cpu_lif_backward(&k.p, T, N, k.x, NULL, k.ds, dx1, k.wc ? &st1 : NULL));
    omp_set_num_threads(2);
    CHECK(memcmp(dx, dx1, n * sizeof *dx) == 0 && (!k.wc || memcmp(dw, dw1, k.wc * sizeof *dw) == 0), "%s",
          WHAT("1 and 2 threads differ"));
    check_pieces(&k, s, dx, dw);
    check_case_f64(&k);
#undef WHAT
    free(s);
    free(h);
    free(dx);
    free(dx_full);
    free(dx1);
    free_case(&k);
}

/* ---------------------------------------------------------------- fused BN → neuron */

static void check_bn_case(const sf_safetensors *st, int idx)
{
    char key[64];
    double v[TU_LIF_PARAMS], shape[4], em[2];
#define KEY(field) (snprintf(key, sizeof key, "b%d." field, idx), key)
    CHECK_OK(sf_safetensors_get_f64(st, KEY("params"), v, TU_LIF_PARAMS));
    CHECK_OK(sf_safetensors_get_f64(st, KEY("shape"), shape, 4));
    CHECK_OK(sf_safetensors_get_f64(st, KEY("eps_momentum"), em, 2));
    sf_lif_params p;
    tu_lif_params_of(v, &p);
    const int64_t T = (int64_t)shape[0], B = (int64_t)shape[1], C = (int64_t)shape[2], hw = (int64_t)shape[3];
    const int64_t n = T * B * C * hw, N = n / T, wc = p.model == SF_NEURON_PLIF ? (p.per_channel ? C : 1) : 0;
    const sf_bn_shape sh = {.rows = T * B, .c = (int32_t)C, .hw = hw};
    const float eps = (float)em[0];
    float *x = tu_get_f32(st, KEY("x"), n), *gamma = tu_get_f32(st, KEY("gamma"), C);
    float *beta = tu_get_f32(st, KEY("beta"), C), *ds = tu_get_f32(st, KEY("ds"), n);
    double *s_ref = tu_get_f64(st, KEY("s"), n), *h_ref = tu_get_f64(st, KEY("h"), n);
    double *dx_ref = tu_get_f64(st, KEY("dx"), n), *dg_ref = tu_get_f64(st, KEY("dgamma"), C);
    double *db_ref = tu_get_f64(st, KEY("dbeta"), C);
    float *w = wc ? tu_get_f32(st, KEY("w"), wc) : NULL;
    double *dw_ref = wc ? tu_get_f64(st, KEY("dw"), wc) : NULL;
#undef KEY
    char what[160];
#define WHAT(s) (snprintf(what, sizeof what, "b%d (%s, T=%lld B=%lld C=%lld hw=%lld) %s", idx,                      \
                          sf_neuron_model_name(p.model), (long long)T, (long long)B, (long long)C, (long long)hw, s), \
                 what)
    float *mean = malloc(C * sizeof *mean), *var = malloc(C * sizeof *var), *y = malloc(n * sizeof *y);
    float *s = malloc(n * sizeof *s), *h = malloc(n * sizeof *h), *s2 = malloc(n * sizeof *s2);
    float *h2 = malloc(n * sizeof *h2), *dx = malloc(n * sizeof *dx), *dx_full = malloc(n * sizeof *dx_full);
    float *dx_split = malloc(n * sizeof *dx_split), *dg = malloc(4 * C * sizeof *dg), *db = dg + C;
    float *dg_full = dg + 2 * C, *db_full = dg + 3 * C, dw[3][64];
    sf_lif_state sta = {.w = w, .dw = dw[0], .w_channels = (int32_t)(wc > 1 ? C : 1), .w_hw = hw};
    sf_lif_state stf = sta, sts = sta;
    stf.dw = dw[1];
    sts.dw = dw[2];
    const sf_lif_state *use = wc ? &sta : NULL;

    CHECK_OK(sf_cpu_op_bn_stats(NULL, sh, x, mean, var));
    CHECK_OK(sf_cpu_op_bn_forward(NULL, sh, x, mean, var, eps, gamma, beta, y));
    sf_lif_out out = {.s = s, .h = h};
    CHECK_OK(sf_cpu_op_bn_lif_forward(NULL, &p, T, sh, x, mean, var, eps, gamma, beta, &out, use));
    CHECK(tu_count_diff(s, s_ref, n) == 0, "%s", WHAT("spikes differ"));
    tu_expect_close(WHAT("h"), h, h_ref, n, TOL_H);
    sf_lif_out out2 = {.s = s2, .h = h2};
    CHECK_OK(sf_cpu_op_lif_forward(NULL, &p, T, N, y, &out2, use));
    CHECK(memcmp(s, s2, n * sizeof *s) == 0 && memcmp(h, h2, n * sizeof *h) == 0, "%s",
          WHAT("fused forward differs bitwise from BN then the neuron"));

    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, NULL, mean, var, eps, gamma, beta, ds, dx, dg, db, use,
                                       NULL, NULL));
    tu_expect_close(WHAT("dx"), dx, dx_ref, n, TOL_GRAD);
    tu_expect_close(WHAT("dgamma"), dg, dg_ref, C, TOL_GRAD);
    tu_expect_close(WHAT("dbeta"), db, db_ref, C, TOL_GRAD);
    if (wc) tu_expect_close(WHAT("dw"), dw[0], dw_ref, wc, TOL_GRAD);
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, h, mean, var, eps, gamma, beta, ds, dx_full, dg_full,
                                       db_full, wc ? &stf : NULL, NULL, NULL));
    CHECK(memcmp(dx, dx_full, n * sizeof *dx) == 0 && memcmp(dg, dg_full, 2 * C * sizeof *dg) == 0 &&
              (!wc || memcmp(dw[0], dw[1], wc * sizeof(float)) == 0),
          "%s", WHAT("full and recompute gradients are not bitwise equal"));

    /* Two phases (statistics over several processes, here one): phase 1 writes the sums and dw, phase 2 dx. */
    sf_bn_split one = {.phase = 1};
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, NULL, mean, var, eps, gamma, beta, ds, NULL, dg_full,
                                       db_full, wc ? &sts : NULL, &one, NULL));
    sf_bn_split two = {.phase = 2, .sum_dy = db_full, .sum_dyx = dg_full, .rows = T * B}; /* dgamma is Σ dy·x̂ */
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, NULL, mean, var, eps, gamma, beta, ds, dx_split, NULL,
                                       NULL, wc ? &sts : NULL, &two, NULL));
    tu_expect_close(WHAT("dx in two phases"), dx_split, dx_ref, n, TOL_GRAD);
    if (wc) CHECK(memcmp(dw[0], dw[2], wc * sizeof(float)) == 0, "%s", WHAT("phase 1's dw differs"));
    check_bn_case_f64(&p, T, B, (int32_t)C, hw, eps, x, gamma, beta, ds, w, wc, s_ref, dx_ref, dg_ref, db_ref, dw_ref,
                      idx);
#undef WHAT
    void *ps[] = {x, gamma, beta, ds, s_ref, h_ref, dx_ref, dg_ref, db_ref, w, dw_ref, mean, var, y, s, h, s2, h2,
                  dx, dx_full, dx_split, dg};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

/* ---------------------------------------------------------------- bad input */

static void expect_invalid(const sf_lif_params *p, const sf_lif_state *st, const char *needle, const char *what)
{
    float x[4] = {0}, s[4];
    sf_lif_out out = {.s = s};
    sf_status got = sf_cpu_lif_forward(p, 2, 2, x, &out, st);
    CHECK(got == SF_ERR_INVALID, "%s: expected SF_ERR_INVALID, got %s", what, sf_status_str(got));
    CHECK(strstr(sf_last_error(), needle) != NULL, "%s: the message should name %s: %s", what, needle,
          sf_last_error());
}

static void check_errors(void)
{
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.model = SF_NEURON_ALIF;
    p.rho = 1.0f;
    expect_invalid(&p, NULL, "rho", "ALIF rho = 1");
    p.rho = 0.5f;
    p.beta = -0.1f;
    expect_invalid(&p, NULL, "beta", "ALIF beta < 0");
    p.beta = 1.0f;
    p.tau_adapt = -3.0f;
    expect_invalid(&p, NULL, "tau_adapt", "ALIF tau_adapt < 0");
    sf_lif_default_params(&p);
    p.per_channel = 1;
    expect_invalid(&p, NULL, "per_channel", "per_channel on a LIF");
    sf_lif_default_params(&p);
    p.model = SF_NEURON_PLIF;
    expect_invalid(&p, NULL, "w", "PLIF without w");
    float w[2] = {0, 0};
    sf_lif_state st = {.w = w, .w_channels = 2, .w_hw = 1};
    expect_invalid(&p, &st, "w_channels", "PLIF with one w given two");
    p.per_channel = 1;
    st.w_hw = 3; /* 2 channels of 3 neurons do not divide 2 neurons */
    expect_invalid(&p, &st, "divide", "PLIF channels that do not fit");
    p.per_channel = 0;
    p.tau = 1.0f;
    st.w_channels = 1;
    expect_invalid(&p, &st, "tau", "PLIF tau = 1");
    p.tau = 2.0f;
    p.decay = 0.5f;
    expect_invalid(&p, &st, "decay", "PLIF with decay");
    p.model = (sf_neuron_model)7;
    p.decay = 0.0f;
    expect_invalid(&p, NULL, "model", "unknown model");
    /* IF: tau and decay do not apply, so values that a LIF would refuse pass. */
    sf_lif_default_params(&p);
    p.model = SF_NEURON_IF;
    p.tau = 0.5f;
    float x[2] = {0.6f, 0.6f}, s[2];
    sf_lif_out out = {.s = s};
    CHECK_OK(sf_cpu_lif_forward(&p, 2, 1, x, &out, NULL));
    CHECK(s[0] == 0.0f && s[1] == 1.0f, "IF integrates without a leak: spikes %g %g, expected 0 1", s[0], s[1]);
    /* float64 is the CPU's: a CUDA device is refused, saying so, in any build. */
    double xd[2] = {0.6, 0.6}, sd[2];
    const sf_device cuda = {SF_DEVICE_CUDA, 0};
    sf_status got = sf_lif_forward_typed(&p, 2, 1, SF_SCALAR_F64, xd, sd, NULL, cuda, NULL);
    CHECK(got == SF_ERR_UNSUPPORTED && strstr(sf_last_error(), "float64 runs on the CPU only"),
          "float64 on CUDA: expected SF_ERR_UNSUPPORTED naming the CPU, got %s: %s", sf_status_str(got),
          sf_last_error());
    CHECK_OK(sf_lif_forward_typed(&p, 2, 1, SF_SCALAR_F64, xd, sd, NULL, cpu, NULL));
    CHECK(sd[0] == 0.0 && sd[1] == 1.0, "float64 IF: spikes %g %g, expected 0 1", sd[0], sd[1]);
}

int main(void)
{
    omp_set_num_threads(2);
    sf_safetensors *st = tu_fixture("neurons.safetensors");
    double ncases = 0;
    CHECK_OK(sf_safetensors_get_f64(st, "cases", &ncases, 1));
    CHECK(ncases >= 60, "expected the three models' 48-case products plus extras, found %g", ncases);
    for (int i = 0; i < (int)ncases; i++) check_case(st, i);
    sf_safetensors_free(st);
    st = tu_fixture("bn_neurons.safetensors");
    CHECK_OK(sf_safetensors_get_f64(st, "cases", &ncases, 1));
    CHECK(ncases >= 8, "expected at least 8 BN→neuron cases, found %g", ncases);
    for (int i = 0; i < (int)ncases; i++) check_bn_case(st, i);
    sf_safetensors_free(st);
    check_errors();
    return tu_finish("test_neurons");
}
