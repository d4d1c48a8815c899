/* test_lif.c — the CPU time-fused LIF kernels against PyTorch float64 autograd (tests/ref/gen_neuron.py): every
 * surrogate × reset × detach_reset × decay_input × θ_grad, decay/v_reset/tau variants and awkward shapes.
 *
 * Spikes must match exactly (the fixtures keep every h at least 1e-4 from a breakpoint); h within 1e-6 and dx
 * within 1e-5 relative (L2) error (observed at most 1.2e-6), float32 against float64. Full (h kept) and
 * recompute backward must agree bitwise, and so must 1 and 2 OpenMP threads. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_neuron.h"
#include "testutil.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TOL_H 1e-6
#define TOL_DX 1e-5

static void check_case(const sf_safetensors *st, int idx)
{
    char name[64], key[256];
    snprintf(name, sizeof name, "c%d", idx);
    snprintf(key, sizeof key, "%s.x", name);
    const sf_st_entry *e = sf_safetensors_find(st, key);
    CHECK(e && e->ndim == 2, "%s: missing or not [T, N]", key);
    if (!e || e->ndim != 2) return;
    const int64_t T = e->shape[0], N = e->shape[1], n = T * N;

    snprintf(key, sizeof key, "%s.params", name);
    double *pv = tu_get_f64(st, key, TU_LIF_PARAMS);
    sf_lif_params p;
    tu_lif_params_of(pv, &p);
#define GET32(var, field) snprintf(key, sizeof key, "%s." field, name), var = tu_get_f32(st, key, n)
#define GET64(var, field) snprintf(key, sizeof key, "%s." field, name), var = tu_get_f64(st, key, n)
    float *x, *ds;
    double *s_ref, *h_ref, *dx_ref;
    GET32(x, "x");
    GET32(ds, "ds");
    GET64(s_ref, "s");
    GET64(h_ref, "h");
    GET64(dx_ref, "dx");

    float *s = malloc(n * sizeof *s), *h = malloc(n * sizeof *h), *dx = malloc(n * sizeof *dx);
    float *dx_full = malloc(n * sizeof *dx_full), *s_only = malloc(n * sizeof *s_only);
    uint8_t *s8 = malloc(n);
    float count = 3.0f; /* the kernel adds to it */
    sf_lif_out out = {.s = s, .s_u8 = s8, .h = h, .spike_count = &count};
    CHECK_OK(sf_cpu_op_lif_forward(NULL, &p, T, N, x, &out, NULL));

    int64_t bad = tu_count_diff(s, s_ref, n), bad8 = 0;
    double ref_count = 0;
    for (int64_t i = 0; i < n; i++) {
        bad8 += s8[i] != (uint8_t)s_ref[i];
        ref_count += s_ref[i];
    }
    CHECK(bad == 0 && bad8 == 0, "%s (T=%lld N=%lld, surrogate %s): %lld float / %lld byte spikes differ", name,
          (long long)T, (long long)N, sf_surrogate_name(p.surrogate), (long long)bad, (long long)bad8);
    CHECK(count == (float)(3.0 + ref_count), "%s: spike_count %g, expected 3 + %g", name, count, ref_count);
    snprintf(key, sizeof key, "%s h", name);
    tu_expect_close(key, h, h_ref, n, TOL_H);

    /* Only s requested: the same spikes. */
    sf_lif_out only = {.s = s_only};
    CHECK_OK(sf_cpu_lif_forward(&p, T, N, x, &only, NULL));
    CHECK(memcmp(s_only, s, n * sizeof *s) == 0, "%s: spikes differ when only s is requested", name);

    CHECK_OK(sf_cpu_op_lif_backward(NULL, &p, T, N, x, NULL, ds, dx, NULL));
    snprintf(key, sizeof key, "%s dx (recompute, surrogate %s, soft %d, detach %d, decay_input %d, gt %d)", name,
             sf_surrogate_name(p.surrogate), p.soft_reset, p.detach_reset, p.decay_input, p.use_grad_threshold);
    tu_expect_close(key, dx, dx_ref, n, TOL_DX);
    CHECK_OK(sf_cpu_lif_backward(&p, T, N, x, h, ds, dx_full, NULL));
    CHECK(memcmp(dx, dx_full, n * sizeof *dx) == 0, "%s: full and recompute dx are not bitwise equal", name);

    free(pv);
    free(x);
    free(ds);
    free(s_ref);
    free(h_ref);
    free(dx_ref);
    free(s);
    free(h);
    free(dx);
    free(dx_full);
    free(s_only);
    free(s8);
}

/* Same inputs with 1 and 2 threads: spikes, h and dx bitwise equal. Sizes span several blocks with a remainder,
 * at a short T and a long one (a [T × block] backward scratch beyond L1). */
static void check_threads(sf_surrogate sur, int soft, int64_t T, int64_t N)
{
    const int64_t n = T * N;
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.surrogate = sur;
    p.alpha = sf_surrogate_default_alpha(sur);
    p.soft_reset = soft;
    float *x = malloc(n * sizeof *x), *ds = malloc(n * sizeof *ds);
    tu_randn(x, n, 0.6f, 1.0f, 11 + sur);
    tu_randn(ds, n, 0.0f, 1.0f, 23 + sur);
    float *s[2], *h[2], *dx[2];
    for (int k = 0; k < 2; k++) {
        s[k] = malloc(n * sizeof(float));
        h[k] = malloc(n * sizeof(float));
        dx[k] = malloc(n * sizeof(float));
        omp_set_num_threads(k + 1);
        sf_lif_out out = {.s = s[k], .h = h[k]};
        CHECK_OK(sf_cpu_lif_forward(&p, T, N, x, &out, NULL));
        CHECK_OK(sf_cpu_lif_backward(&p, T, N, x, NULL, ds, dx[k], NULL));
    }
    omp_set_num_threads(2);
    CHECK(memcmp(s[0], s[1], n * sizeof(float)) == 0 && memcmp(h[0], h[1], n * sizeof(float)) == 0 &&
              memcmp(dx[0], dx[1], n * sizeof(float)) == 0,
          "surrogate %s soft %d T=%lld N=%lld: 1 and 2 threads differ", sf_surrogate_name(sur), soft, (long long)T,
          (long long)N);
    int64_t fired = 0;
    for (int64_t i = 0; i < n; i++) fired += s[0][i] != 0.0f;
    CHECK(fired > n / 50 && fired < n / 2, "thread test input fires %lld of %lld: not a meaningful test",
          (long long)fired, (long long)n);
    for (int k = 0; k < 2; k++) {
        free(s[k]);
        free(h[k]);
        free(dx[k]);
    }
    free(x);
    free(ds);
}

/* A neuron's result must not depend on where it sits in a block (vector body or scalar remainder): shifting the
 * neurons by one column gives the same bits. */
static void check_position_independence(void)
{
    const int64_t T = 6, N = 150, n = T * N;
    sf_lif_params p;
    sf_lif_default_params(&p);
    float *x = malloc(n * sizeof *x), *ds = malloc(n * sizeof *ds), *dx = malloc(n * sizeof *dx);
    float *xs = malloc(T * (N + 1) * sizeof *xs), *dss = malloc(T * (N + 1) * sizeof *dss);
    float *dxs = malloc(T * (N + 1) * sizeof *dxs);
    tu_randn(x, n, 0.6f, 1.0f, 5);
    tu_randn(ds, n, 0.0f, 1.0f, 6);
    for (int64_t t = 0; t < T; t++) {
        xs[t * (N + 1)] = 0.0f;
        dss[t * (N + 1)] = 0.0f;
        memcpy(xs + t * (N + 1) + 1, x + t * N, N * sizeof *x);
        memcpy(dss + t * (N + 1) + 1, ds + t * N, N * sizeof *ds);
    }
    CHECK_OK(sf_cpu_lif_backward(&p, T, N, x, NULL, ds, dx, NULL));
    CHECK_OK(sf_cpu_lif_backward(&p, T, N + 1, xs, NULL, dss, dxs, NULL));
    int64_t diff = 0;
    for (int64_t t = 0; t < T; t++) diff += memcmp(dx + t * N, dxs + t * (N + 1) + 1, N * sizeof *dx) != 0;
    CHECK(diff == 0, "dx depends on the neuron's position in its block (%lld rows differ)", (long long)diff);
    free(x);
    free(ds);
    free(dx);
    free(xs);
    free(dss);
    free(dxs);
}

/* Rows that are whole aligned cache lines take the streaming-store path; the same values land as through the
 * plain path (an output offset by one float). */
static void check_streaming(void)
{
    const int64_t T = 7, N = 1024 + 320, n = T * N;
    sf_lif_params p;
    sf_lif_default_params(&p);
    float *x = aligned_alloc(64, n * sizeof(float)), *ds = aligned_alloc(64, n * sizeof(float));
    float *buf[2][3];
    uint8_t *s8[2];
    tu_randn(x, n, 0.6f, 1.0f, 91);
    tu_randn(ds, n, 0.0f, 1.0f, 92);
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 3; j++) buf[k][j] = aligned_alloc(64, (n + 16) * sizeof(float));
        s8[k] = aligned_alloc(64, n + 64);
        float *s = buf[k][0] + k, *h = buf[k][1] + k, *dx = buf[k][2] + k; /* k = 1: not aligned */
        sf_lif_out out = {.s = s, .h = h, .s_u8 = s8[k] + k};
        CHECK_OK(sf_cpu_lif_forward(&p, T, N, x, &out, NULL));
        CHECK_OK(sf_cpu_lif_backward(&p, T, N, x, k ? h : NULL, ds, dx, NULL));
    }
    for (int j = 0; j < 3; j++)
        CHECK(memcmp(buf[0][j], buf[1][j] + 1, n * sizeof(float)) == 0, "output %d: streamed and plain differ", j);
    CHECK(memcmp(s8[0], s8[1] + 1, n) == 0, "byte spikes: streamed and plain differ");
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 3; j++) free(buf[k][j]);
        free(s8[k]);
    }
    free(x);
    free(ds);
}

static void check_errors(void)
{
    sf_lif_params p;
    sf_lif_default_params(&p);
    float x = 0, s = 0;
    sf_lif_out out = {.s = &s};
    CHECK(sf_cpu_lif_forward(&p, 0, 1, &x, &out, NULL) == SF_ERR_INVALID, "T = 0 must be rejected");
    CHECK(strstr(sf_last_error(), "T=0") != NULL, "message should name the shape: %s", sf_last_error());
    p.tau = 0.5f;
    CHECK(sf_cpu_lif_backward(&p, 1, 1, &x, NULL, &x, &s, NULL) == SF_ERR_INVALID, "tau < 1 must be rejected");
    sf_lif_default_params(&p);
    CHECK_OK(sf_cpu_lif_forward(&p, 3, 0, NULL, &out, NULL)); /* no neurons: nothing to do */
}

int main(void)
{
    sf_safetensors *st = tu_fixture("lif.safetensors");
    const sf_st_entry *e = sf_safetensors_find(st, "cases");
    CHECK(e != NULL, "lif.safetensors has no case count");
    double ncases = 0;
    if (e) sf_safetensors_get_f64(st, "cases", &ncases, 1);
    CHECK(ncases >= 74, "expected the 64-case product plus extras, found %g cases", ncases);
    for (int i = 0; i < (int)ncases; i++) check_case(st, i);
    sf_safetensors_free(st);
    for (int sur = 0; sur < 4; sur++)
        for (int soft = 0; soft < 2; soft++) {
            check_threads((sf_surrogate)sur, soft, 23, 1024 * 3 + 77); /* above SF_CPU_PARALLEL_MIN */
            check_threads((sf_surrogate)sur, soft, 300, 128 * 5 + 3);
        }
    check_position_independence();
    check_streaming();
    check_errors();
    return tu_finish("test_lif");
}
