/* test_batchnorm.c — CPU batch norm and fused BN→LIF against PyTorch float64 autograd (tests/ref/gen_neuron.py):
 * statistics over (T, B, H, W) per channel, forward, backward with batch statistics, running-statistics update,
 * and the fused BN→LIF forward/backward in both memory modes. Shapes include T=1, B=1, a 1-D [T, B, N] case and
 * planes wider than a neuron block.
 *
 * Tolerances (relative L2, float32 against float64): mean/var/y/running 1e-6, h 1e-6, gradients 5e-6 (observed
 * at most 8e-7). Spikes exact.
 * Bitwise: full vs recompute, 1 vs 2 threads, BN→LIF forward vs BN then LIF. */
#include "cpu/cpu_neuron.h"
#include "testutil.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TOL_STAT 1e-6
#define TOL_GRAD 5e-6

typedef struct bn_case {
    sf_lif_params p;
    int64_t T, B, C, hw, n;
    sf_bn_shape sh;
    float eps, momentum;
    float *x, *gamma, *beta, *ds, *bn_dy, *rm, *rv;
    double *mean, *var, *y, *s, *h, *dx, *dgamma, *dbeta, *bn_dx, *bn_dgamma, *bn_dbeta, *rm_ref, *rv_ref;
} bn_case;

static void load_case(const sf_safetensors *st, int idx, bn_case *k)
{
    char key[64];
    double v[TU_LIF_PARAMS], shape[4], em[2];
#define KEY(field) (snprintf(key, sizeof key, "b%d." field, idx), key)
    CHECK_OK(sf_safetensors_get_f64(st, KEY("params"), v, TU_LIF_PARAMS));
    CHECK_OK(sf_safetensors_get_f64(st, KEY("shape"), shape, 4));
    CHECK_OK(sf_safetensors_get_f64(st, KEY("eps_momentum"), em, 2));
    tu_lif_params_of(v, &k->p);
    k->T = (int64_t)shape[0];
    k->B = (int64_t)shape[1];
    k->C = (int64_t)shape[2];
    k->hw = (int64_t)shape[3];
    k->n = k->T * k->B * k->C * k->hw;
    k->sh = (sf_bn_shape){.rows = k->T * k->B, .c = (int32_t)k->C, .hw = k->hw};
    k->eps = (float)em[0];
    k->momentum = (float)em[1];
    const int64_t n = k->n, C = k->C;
    k->x = tu_get_f32(st, KEY("x"), n);
    k->gamma = tu_get_f32(st, KEY("gamma"), C);
    k->beta = tu_get_f32(st, KEY("beta"), C);
    k->ds = tu_get_f32(st, KEY("ds"), n);
    k->bn_dy = tu_get_f32(st, KEY("bn_dy"), n);
    k->rm = tu_get_f32(st, KEY("running_mean0"), C);
    k->rv = tu_get_f32(st, KEY("running_var0"), C);
    k->mean = tu_get_f64(st, KEY("mean"), C);
    k->var = tu_get_f64(st, KEY("var"), C);
    k->y = tu_get_f64(st, KEY("y"), n);
    k->s = tu_get_f64(st, KEY("s"), n);
    k->h = tu_get_f64(st, KEY("h"), n);
    k->dx = tu_get_f64(st, KEY("dx"), n);
    k->dgamma = tu_get_f64(st, KEY("dgamma"), C);
    k->dbeta = tu_get_f64(st, KEY("dbeta"), C);
    k->bn_dx = tu_get_f64(st, KEY("bn_dx"), n);
    k->bn_dgamma = tu_get_f64(st, KEY("bn_dgamma"), C);
    k->bn_dbeta = tu_get_f64(st, KEY("bn_dbeta"), C);
    k->rm_ref = tu_get_f64(st, KEY("running_mean"), C);
    k->rv_ref = tu_get_f64(st, KEY("running_var"), C);
#undef KEY
}

static void free_case(bn_case *k)
{
    void *ps[] = {k->x,    k->gamma, k->beta, k->ds,        k->bn_dy,     k->rm,        k->rv,     k->mean,
                  k->var,  k->y,     k->s,    k->h,         k->dx,        k->dgamma,    k->dbeta,  k->bn_dx,
                  k->bn_dgamma, k->bn_dbeta, k->rm_ref, k->rv_ref};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

static void check_case(const sf_safetensors *st, int idx)
{
    bn_case k;
    load_case(st, idx, &k);
    const int64_t n = k.n, C = k.C;
    char what[160];
#define WHAT(s) (snprintf(what, sizeof what, "b%d [T=%lld B=%lld C=%lld hw=%lld] %s", idx, (long long)k.T,        \
                          (long long)k.B, (long long)C, (long long)k.hw, s), what)
    float *mean = malloc(C * sizeof *mean), *var = malloc(C * sizeof *var);
    float *y = malloc(n * sizeof *y), *dx = malloc(n * sizeof *dx), *dx_full = malloc(n * sizeof *dx_full);
    float *s = malloc(n * sizeof *s), *h = malloc(n * sizeof *h), *s2 = malloc(n * sizeof *s2);
    float *h2 = malloc(n * sizeof *h2), *dy = malloc(n * sizeof *dy), *dx2 = malloc(n * sizeof *dx2);
    float *dg = malloc(C * sizeof *dg), *db = malloc(C * sizeof *db), *dg_full = malloc(C * sizeof *dg_full);
    float *db_full = malloc(C * sizeof *db_full), *dg2 = malloc(C * sizeof *dg2), *db2 = malloc(C * sizeof *db2);

    CHECK_OK(sf_cpu_op_bn_stats(NULL, k.sh, k.x, mean, var));
    tu_expect_close(WHAT("mean"), mean, k.mean, C, TOL_STAT);
    tu_expect_close(WHAT("var"), var, k.var, C, TOL_STAT);

    CHECK_OK(sf_cpu_op_bn_forward(NULL, k.sh, k.x, mean, var, k.eps, k.gamma, k.beta, y));
    tu_expect_close(WHAT("y"), y, k.y, n, TOL_STAT);

    CHECK_OK(sf_cpu_op_bn_backward(NULL, k.sh, k.x, mean, var, k.eps, k.gamma, k.bn_dy, dx, dg, db));
    tu_expect_close(WHAT("BN dx"), dx, k.bn_dx, n, TOL_GRAD);
    tu_expect_close(WHAT("BN dgamma"), dg, k.bn_dgamma, C, TOL_GRAD);
    tu_expect_close(WHAT("BN dbeta"), db, k.bn_dbeta, C, TOL_GRAD);

    CHECK_OK(sf_cpu_op_bn_update_running(NULL, k.sh, k.momentum, mean, var, NULL, k.rm, k.rv));
    tu_expect_close(WHAT("running mean"), k.rm, k.rm_ref, C, TOL_STAT);
    tu_expect_close(WHAT("running var"), k.rv, k.rv_ref, C, TOL_STAT);

    /* Fused forward: spikes exact, h close, and bitwise what BN followed by LIF gives. */
    float count = 0;
    sf_lif_out out = {.s = s, .h = h, .spike_count = &count};
    CHECK_OK(sf_cpu_op_bn_lif_forward(NULL, &k.p, k.T, k.sh, k.x, mean, var, k.eps, k.gamma, k.beta, &out, NULL));
    CHECK(tu_count_diff(s, k.s, n) == 0, "%s", WHAT("spikes differ"));
    tu_expect_close(WHAT("h"), h, k.h, n, TOL_STAT);
    double ref_count = 0;
    for (int64_t i = 0; i < n; i++) ref_count += k.s[i];
    CHECK(count == (float)ref_count, "%s: %g vs %g", WHAT("spike_count"), count, ref_count);
    const int64_t N = n / k.T;
    sf_lif_out out2 = {.s = s2, .h = h2};
    CHECK_OK(sf_cpu_op_lif_forward(NULL, &k.p, k.T, N, y, &out2, NULL));
    CHECK(memcmp(s, s2, n * sizeof *s) == 0 && memcmp(h, h2, n * sizeof *h) == 0, "%s",
          WHAT("fused forward differs bitwise from BN then LIF"));

    /* Fused backward, recompute and full: close to the reference, and bitwise equal to each other. */
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &k.p, k.T, k.sh, k.x, NULL, mean, var, k.eps, k.gamma, k.beta, k.ds,
                                       dx, dg, db, NULL, NULL, NULL));
    tu_expect_close(WHAT("BN-LIF dx"), dx, k.dx, n, TOL_GRAD);
    tu_expect_close(WHAT("BN-LIF dgamma"), dg, k.dgamma, C, TOL_GRAD);
    tu_expect_close(WHAT("BN-LIF dbeta"), db, k.dbeta, C, TOL_GRAD);
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &k.p, k.T, k.sh, k.x, h, mean, var, k.eps, k.gamma, k.beta, k.ds,
                                       dx_full, dg_full, db_full, NULL, NULL, NULL));
    CHECK(memcmp(dx, dx_full, n * sizeof *dx) == 0 && memcmp(dg, dg_full, C * sizeof *dg) == 0 &&
              memcmp(db, db_full, C * sizeof *db) == 0,
          "%s", WHAT("full and recompute gradients are not bitwise equal"));

    /* The unfused path (LIF backward, then BN backward) computes the same function. */
    CHECK_OK(sf_cpu_op_lif_backward(NULL, &k.p, k.T, N, y, NULL, k.ds, dy, NULL));
    CHECK_OK(sf_cpu_op_bn_backward(NULL, k.sh, k.x, mean, var, k.eps, k.gamma, dy, dx2, dg2, db2));
    tu_expect_close(WHAT("unfused dx"), dx2, k.dx, n, TOL_GRAD);
    tu_expect_close(WHAT("unfused dgamma"), dg2, k.dgamma, C, TOL_GRAD);
    free_case(&k);
    void *ps[] = {mean, var, y, dx, dx_full, s, h, s2, h2, dy, dx2, dg, db, dg_full, db_full, dg2, db2};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
#undef WHAT
}

/* Every BN op with 1 and 2 threads on shapes with many row chunks and neuron blocks, at a short and a long T:
 * bitwise equal. */
static void check_threads(int64_t T, int64_t B, int64_t hw)
{
    const int64_t C = 6, n = T * B * C * hw;
    const sf_bn_shape sh = {.rows = T * B, .c = (int32_t)C, .hw = hw};
    sf_lif_params p;
    sf_lif_default_params(&p);
    float *x = malloc(n * sizeof *x), *ds = malloc(n * sizeof *ds), gamma[6], beta[6];
    tu_randn(x, n, 0.3f, 2.0f, 77);
    tu_randn(ds, n, 0.0f, 1.0f, 78);
    for (int c = 0; c < C; c++) {
        gamma[c] = 0.8f + 0.1f * (float)c;
        beta[c] = 0.5f;
    }
    float *out[2][6];
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k + 1);
        float *mean = malloc(C * sizeof(float)), *var = malloc(C * sizeof(float));
        float *s = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
        float *bdx = malloc(n * sizeof(float));
        float *sums = malloc(4 * C * sizeof(float)); /* BN-LIF dgamma, dbeta, then BN dgamma, dbeta */
        CHECK_OK(sf_cpu_op_bn_stats(NULL, sh, x, mean, var));
        sf_lif_out o = {.s = s};
        CHECK_OK(sf_cpu_op_bn_lif_forward(NULL, &p, T, sh, x, mean, var, 1e-5f, gamma, beta, &o, NULL));
        CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, NULL, mean, var, 1e-5f, gamma, beta, ds, dx, sums,
                                           sums + C, NULL, NULL, NULL));
        CHECK_OK(sf_cpu_op_bn_backward(NULL, sh, x, mean, var, 1e-5f, gamma, ds, bdx, sums + 2 * C, sums + 3 * C));
        out[k][0] = mean;
        out[k][1] = var;
        out[k][2] = s;
        out[k][3] = dx;
        out[k][4] = bdx;
        out[k][5] = sums;
    }
    omp_set_num_threads(2);
    const int64_t sizes[6] = {C, C, n, n, n, 4 * C};
    const char *names[6] = {"mean", "var", "BN-LIF spikes", "BN-LIF dx", "BN dx", "dgamma/dbeta"};
    for (int i = 0; i < 6; i++) {
        CHECK(memcmp(out[0][i], out[1][i], sizes[i] * sizeof(float)) == 0,
              "T=%lld B=%lld hw=%lld: %s differs between 1 and 2 threads", (long long)T, (long long)B, (long long)hw,
              names[i]);
        free(out[0][i]);
        free(out[1][i]);
    }
    free(x);
    free(ds);
}

/* BN-LIF with rows of whole aligned cache lines (the streaming-store path) equals the plain path. */
static void check_streaming(void)
{
    const int64_t T = 3, B = 4, C = 4, hw = 144, n = T * B * C * hw;
    const sf_bn_shape sh = {.rows = T * B, .c = (int32_t)C, .hw = hw};
    sf_lif_params p;
    sf_lif_default_params(&p);
    float *x = aligned_alloc(64, n * sizeof(float)), *ds = aligned_alloc(64, n * sizeof(float));
    float mean[4], var[4], gamma[4] = {1.0f, 0.7f, 1.3f, 0.9f}, beta[4] = {0.5f, 0.6f, 0.4f, 0.7f}, dg[2][4], db[2][4];
    tu_randn(x, n, 0.0f, 1.0f, 61);
    tu_randn(ds, n, 0.0f, 1.0f, 62);
    CHECK_OK(sf_cpu_op_bn_stats(NULL, sh, x, mean, var));
    float *s[2], *dx[2];
    for (int k = 0; k < 2; k++) {
        s[k] = aligned_alloc(64, (n + 16) * sizeof(float));
        dx[k] = aligned_alloc(64, (n + 16) * sizeof(float));
        sf_lif_out o = {.s = s[k] + k};
        CHECK_OK(sf_cpu_op_bn_lif_forward(NULL, &p, T, sh, x, mean, var, 1e-5f, gamma, beta, &o, NULL));
        CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, NULL, mean, var, 1e-5f, gamma, beta, ds, dx[k] + k,
                                           dg[k], db[k], NULL, NULL, NULL));
    }
    CHECK(memcmp(s[0], s[1] + 1, n * sizeof(float)) == 0 && memcmp(dx[0], dx[1] + 1, n * sizeof(float)) == 0,
          "BN-LIF: streamed and plain outputs differ");
    for (int k = 0; k < 2; k++) {
        free(s[k]);
        free(dx[k]);
    }
    free(x);
    free(ds);
}

/* Statistics of data with a large offset (|mean| ≫ std) stay accurate. */
static void check_offset_stats(void)
{
    const int64_t rows = 16, hw = 100, n = rows * hw;
    const sf_bn_shape sh = {.rows = rows, .c = 1, .hw = hw};
    float *x = malloc(n * sizeof *x), mean, var;
    tu_randn(x, n, 0.0f, 1.0f, 3);
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; i++) x[i] += 1000.0f;
    for (int64_t i = 0; i < n; i++) m += x[i];
    m /= (double)n;
    for (int64_t i = 0; i < n; i++) v += ((double)x[i] - m) * ((double)x[i] - m);
    v /= (double)n;
    CHECK_OK(sf_cpu_op_bn_stats(NULL, sh, x, &mean, &var));
    CHECK(fabs(mean - m) < 1e-4 && fabs(var - v) < 1e-5 * v, "offset data: mean %g var %g, expected %g %g",
          (double)mean, (double)var, m, v);
    free(x);
}

static void check_errors(void)
{
    float x[4] = {0}, m[1], v[1];
    sf_bn_shape bad = {.rows = 0, .c = 1, .hw = 4};
    CHECK(sf_cpu_op_bn_stats(NULL, bad, x, m, v) == SF_ERR_INVALID, "rows = 0 must be rejected");
    sf_bn_shape one = {.rows = 1, .c = 1, .hw = 1};
    CHECK(sf_cpu_op_bn_update_running(NULL, one, 0.1f, m, v, NULL, m, v) == SF_ERR_INVALID,
          "a single value per channel has no unbiased variance");
    sf_lif_params p;
    sf_lif_default_params(&p);
    sf_bn_shape sh = {.rows = 3, .c = 1, .hw = 1};
    sf_lif_out o = {.s = x};
    m[0] = 0;
    v[0] = 1;
    CHECK(sf_cpu_op_bn_lif_forward(NULL, &p, 2, sh, x, m, v, 1e-5f, NULL, NULL, &o, NULL) == SF_ERR_INVALID,
          "rows = 3 with T = 2 must be rejected");
}

int main(void)
{
    sf_safetensors *st = tu_fixture("bn_lif.safetensors");
    double ncases = 0;
    CHECK_OK(sf_safetensors_get_f64(st, "cases", &ncases, 1));
    CHECK(ncases >= 7, "expected at least 7 BN cases, found %g", ncases);
    for (int i = 0; i < (int)ncases; i++) check_case(st, i);
    sf_safetensors_free(st);
    check_threads(5, 7, 61);
    check_threads(300, 2, 37);
    check_streaming();
    check_offset_stats();
    check_errors();
    return tu_finish("test_batchnorm");
}
