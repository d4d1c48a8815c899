/* test_pool_dropout.c — avg/max pooling forward/backward against PyTorch float64 fixtures (NCHW, and NHWC equal
 * to it), and dropout's mask statistics, time sharing, scaling and backward. */
#include "core/rng.h"
#include "cpu/cpu_layers.h"
#include "testutil.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-6 /* pooling adds at most k·k fp32 terms */

/* Planes [n][hw] as NHWC images of ch channels ([n/ch][hw][ch]), or back (to_nhwc = 0). */
static void relayout(const float *in, float *out, int64_t n, int64_t hw, int64_t ch, int to_nhwc)
{
    for (int64_t p = 0; p < n; p++)
        for (int64_t q = 0; q < hw; q++) {
            const int64_t nchw = p * hw + q, nhwc = ((p / ch) * hw + q) * ch + p % ch;
            out[to_nhwc ? nhwc : nchw] = in[to_nhwc ? nchw : nhwc];
        }
}

/* The same case with its planes as NHWC images of the most channels (of 4, 3, 2) that divide them: the outputs,
 * put back in plane order, equal the NCHW run's bit for bit. */
static void check_nhwc(sf_pool_shape sh, int is_max, const float *x, const float *dy, const float *y_nchw,
                       const float *dx_nchw, const char *what)
{
    sh.c = sh.n % 4 == 0 ? 4 : sh.n % 3 == 0 ? 3 : sh.n % 2 == 0 ? 2 : 1;
    const int64_t hw = (int64_t)sh.h * sh.w, ohw = (int64_t)sh.oh * sh.ow, nx = sh.n * hw, ny = sh.n * ohw;
    float *xt = malloc(sizeof(float) * nx), *dyt = malloc(sizeof(float) * ny), *yt = malloc(sizeof(float) * ny);
    float *dxt = malloc(sizeof(float) * nx), *y = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx);
    uint8_t *arg = malloc((size_t)ny);
    relayout(x, xt, sh.n, hw, sh.c, 1);
    relayout(dy, dyt, sh.n, ohw, sh.c, 1);
    if (is_max) {
        CHECK_OK(sf_cpu_op_maxpool_forward(NULL, &sh, xt, yt, arg));
        CHECK_OK(sf_cpu_op_maxpool_backward(NULL, &sh, arg, dyt, dxt));
    } else {
        CHECK_OK(sf_cpu_op_avgpool_forward(NULL, &sh, xt, yt));
        CHECK_OK(sf_cpu_op_avgpool_backward(NULL, &sh, dyt, dxt));
    }
    relayout(yt, y, sh.n, ohw, sh.c, 0);
    relayout(dxt, dx, sh.n, hw, sh.c, 0);
    CHECK(memcmp(y, y_nchw, sizeof(float) * ny) == 0 && memcmp(dx, dx_nchw, sizeof(float) * nx) == 0,
          "%s: NHWC (%d channels) differs from NCHW", what, sh.c);
    free(xt), free(dyt), free(yt), free(dxt), free(y), free(dx), free(arg);
}

static void run_pool_case(const sf_safetensors *st, const char *kind, int c)
{
    char name[64], what[128];
#define GET32(field, n) (snprintf(name, sizeof name, "%s%d." field, kind, c), tu_get_f32(st, name, n))
#define GET64(field, n) (snprintf(name, sizeof name, "%s%d." field, kind, c), tu_get_f64(st, name, n))
    double *cfg = GET64("cfg", 8);
    sf_pool_shape sh = {.n = (int64_t)cfg[0], .h = (int32_t)cfg[1], .w = (int32_t)cfg[2], .k = (int32_t)cfg[3],
                        .stride = (int32_t)cfg[4], .oh = (int32_t)cfg[5], .ow = (int32_t)cfg[6],
                        .pad = (int32_t)cfg[7]};
    const int64_t nx = sh.n * sh.h * sh.w, ny = sh.n * sh.oh * sh.ow;
    float *x = GET32("x", nx), *dy = GET32("dy", ny);
    double *y_ref = GET64("y", ny), *dx_ref = GET64("dx", nx);
#undef GET32
#undef GET64
    float *y = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx);
    uint8_t *arg = malloc((size_t)ny);
    const int is_max = kind[0] == 'm';
    if (is_max) {
        CHECK_OK(sf_cpu_op_maxpool_forward(NULL, &sh, x, y, arg));
        CHECK_OK(sf_cpu_op_maxpool_backward(NULL, &sh, arg, dy, dx));
        /* The max is one of the inputs, so the forward is exact. */
        CHECK(tu_count_diff(y, y_ref, ny) == 0, "maxpool %d: forward not exact", c);
    } else {
        CHECK_OK(sf_cpu_op_avgpool_forward(NULL, &sh, x, y));
        CHECK_OK(sf_cpu_op_avgpool_backward(NULL, &sh, dy, dx));
    }
    snprintf(what, sizeof what, "%spool %d (n=%lld %dx%d k=%d s=%d pad=%d) y", kind, c, (long long)sh.n, sh.h, sh.w,
             sh.k, sh.stride, sh.pad);
    tu_expect_close(what, y, y_ref, ny, TOL);
    snprintf(what, sizeof what, "%spool %d dx", kind, c);
    tu_expect_close(what, dx, dx_ref, nx, TOL);
    check_nhwc(sh, is_max, x, dy, y, dx, what);
    free(cfg), free(x), free(dy), free(y_ref), free(dx_ref), free(y), free(dx), free(arg);
}

static void test_pool(void)
{
    sf_safetensors *st = tu_fixture("layers_pool.safetensors");
    double *count = tu_get_f64(st, "count", 1);
    for (int c = 0; c < (int)count[0]; c++) {
        run_pool_case(st, "avg", c);
        run_pool_case(st, "max", c);
    }
    free(count);
    sf_safetensors_free(st);

    /* Ties pick the first maximum and a NaN propagates, as in PyTorch. */
    sf_pool_shape sh = {.n = 1, .h = 2, .w = 2, .k = 2, .stride = 2, .oh = 1, .ow = 1};
    float tie[4] = {1, 3, 3, 0}, nan_in[4] = {1, NAN, 5, 0}, y;
    uint8_t a;
    CHECK_OK(sf_cpu_op_maxpool_forward(NULL, &sh, tie, &y, &a));
    CHECK(y == 3.0f && a == 1, "maxpool tie: y=%g argmax=%d, expected 3 at 1", y, a);
    CHECK_OK(sf_cpu_op_maxpool_forward(NULL, &sh, nan_in, &y, &a));
    CHECK(isnan(y) && a == 1, "maxpool NaN: y=%g argmax=%d, expected NaN at 1", y, a);

    sf_pool_shape bad = {.n = 1, .h = 4, .w = 4, .k = 2, .stride = 2, .oh = 3, .ow = 2};
    CHECK(sf_cpu_op_avgpool_forward(NULL, &bad, tie, &y) == SF_ERR_INVALID, "wrong pool output size accepted");
    bad = (sf_pool_shape){.n = 1, .h = 20, .w = 20, .k = 17, .stride = 1, .oh = 4, .ow = 4};
    CHECK(sf_cpu_op_maxpool_forward(NULL, &bad, tie, &y, &a) == SF_ERR_INVALID, "17x17 window accepted");
    /* a border wider than half the window would leave windows with no pixel in them */
    bad = (sf_pool_shape){.n = 1, .h = 2, .w = 2, .k = 2, .stride = 2, .oh = 2, .ow = 2, .pad = 2};
    CHECK(sf_cpu_op_maxpool_forward(NULL, &bad, tie, &y, &a) == SF_ERR_INVALID, "pad 2 on a 2x2 window accepted");
    /* a window all in the border but one pixel: that pixel wins even when it is below zero */
    sh = (sf_pool_shape){.n = 1, .h = 2, .w = 2, .k = 2, .stride = 2, .oh = 2, .ow = 2, .pad = 1};
    float neg[4] = {-5, -1, -2, -3}, ym[4];
    uint8_t am[4];
    CHECK_OK(sf_cpu_op_maxpool_forward(NULL, &sh, neg, ym, am));
    CHECK(ym[0] == -5 && am[0] == 3 && ym[3] == -3 && am[3] == 0, "bordered maxpool: %g@%d %g@%d, expected -5@3 -3@0",
          ym[0], am[0], ym[3], am[3]);
}

static void test_dropout(void)
{
    const int64_t T = 3, n = 200003;
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    const uint64_t seed = 42, counter = 7;
    float *x = malloc(sizeof(float) * T * n), *y = malloc(sizeof(float) * T * n);
    float *dy = malloc(sizeof(float) * T * n), *dx = malloc(sizeof(float) * T * n);
    tu_randn(x, T * n, 0.0f, 1.0f, 1);
    tu_randn(dy, T * n, 0.0f, 1.0f, 2);
    for (int64_t i = 0; i < T * n; i++) x[i] = x[i] == 0.0f ? 1.0f : x[i]; /* a zero input would hide the mask */

    CHECK_OK(sf_cpu_op_dropout_forward(NULL, T, n, p, seed, counter, x, y));
    CHECK_OK(sf_cpu_op_dropout_backward(NULL, T, n, p, seed, counter, dy, dx));
    int64_t kept = 0, bad_time = 0, bad_scale = 0, bad_rng = 0, bad_back = 0;
    for (int64_t i = 0; i < n; i++) {
        const int keep = y[i] != 0.0f;
        kept += keep;
        bad_rng += keep != sf_dropout_keep(seed, counter, (uint64_t)i, p);
        for (int64_t t = 0; t < T; t++) {
            const int64_t j = t * n + i;
            bad_time += (y[j] != 0.0f) != keep;
            bad_scale += y[j] != (keep ? x[j] * scale : 0.0f);
            bad_back += dx[j] != (keep ? dy[j] * scale : 0.0f);
        }
    }
    /* Keep rate 1 - p within 6 standard deviations of a binomial with n draws. */
    const double rate = (double)kept / (double)n, sd = sqrt(p * (1.0 - p) / (double)n);
    CHECK(fabs(rate - (1.0 - p)) < 6.0 * sd, "dropout keep rate %.5f, expected %.5f ± %.5f", rate, 1.0 - p, 6 * sd);
    CHECK(bad_time == 0, "dropout: %lld positions whose mask changes over time", (long long)bad_time);
    CHECK(bad_scale == 0, "dropout: %lld kept values not scaled by 1/(1-p)", (long long)bad_scale);
    CHECK(bad_rng == 0, "dropout: %lld positions disagree with sf_dropout_keep", (long long)bad_rng);
    CHECK(bad_back == 0, "dropout backward: %lld positions differ from the forward's mask and scale",
          (long long)bad_back);

    /* Another counter draws an independent mask: agreement about p² + (1-p)², far from 1. */
    float *y2 = malloc(sizeof(float) * T * n);
    CHECK_OK(sf_cpu_op_dropout_forward(NULL, 1, n, p, seed, counter + 1, x, y2));
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++) same += (y2[i] != 0.0f) == (y[i] != 0.0f);
    const double agree = (double)same / (double)n, expect = p * p + (1 - p) * (1 - p);
    CHECK(fabs(agree - expect) < 0.01, "dropout: masks of two counters agree on %.4f, expected %.4f", agree, expect);

    /* p = 0 is the identity, p = 1 drops everything (PyTorch's convention), p outside [0, 1] is refused. */
    CHECK_OK(sf_cpu_op_dropout_forward(NULL, T, n, 0.0f, seed, counter, x, y));
    CHECK(memcmp(x, y, sizeof(float) * T * n) == 0, "dropout p=0 not identity");
    CHECK_OK(sf_cpu_op_dropout_forward(NULL, T, n, 1.0f, seed, counter, x, y));
    int64_t nonzero = 0;
    for (int64_t i = 0; i < T * n; i++) nonzero += y[i] != 0.0f;
    CHECK(nonzero == 0, "dropout p=1 left %lld values", (long long)nonzero);
    CHECK(sf_cpu_op_dropout_forward(NULL, T, n, 1.5f, seed, counter, x, y) == SF_ERR_INVALID, "p = 1.5 accepted");
    CHECK(sf_cpu_op_dropout_forward(NULL, T, n, NAN, seed, counter, x, y) == SF_ERR_INVALID, "p = NaN accepted");
    free(x), free(y), free(y2), free(dy), free(dx);
}

int main(void)
{
    omp_set_num_threads(2);
    test_pool();
    test_dropout();
    return tu_finish("test_pool_dropout");
}
