/* test_linear_conv.c — linear and conv2d forward/backward of the CPU backend against PyTorch float64 fixtures
 * (tests/ref/gen_layers.py), including awkward shapes, plus shape validation and thread-count independence of the
 * bias gradients. */
#include "cpu/cpu_layers.h"
#include "testutil.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* fp32 arithmetic against an fp64 reference on fp32-exact inputs: sums of at most a few thousand terms. */
#define TOL 1e-5

static int32_t cfg_at(const double *cfg, int i) { return (int32_t)cfg[i]; }

static void test_linear(void)
{
    sf_safetensors *st = tu_fixture("layers_linear.safetensors");
    double *count = tu_get_f64(st, "count", 1);
    for (int c = 0; c < (int)count[0]; c++) {
        char name[64], what[96];
#define GET32(field, n) (snprintf(name, sizeof name, "lin%d." field, c), tu_get_f32(st, name, n))
#define GET64(field, n) (snprintf(name, sizeof name, "lin%d." field, c), tu_get_f64(st, name, n))
        double *cfg = GET64("cfg", 4);
        const int64_t rows = cfg_at(cfg, 0);
        const int32_t in = cfg_at(cfg, 1), out = cfg_at(cfg, 2), bias = cfg_at(cfg, 3);
        float *x = GET32("x", rows * in), *w = GET32("w", (int64_t)out * in), *dy = GET32("dy", rows * out);
        float *b = bias ? GET32("b", out) : NULL;
        double *y_ref = GET64("y", rows * out), *dx_ref = GET64("dx", rows * in);
        double *dw_ref = GET64("dw", (int64_t)out * in), *db_ref = bias ? GET64("db", out) : NULL;
        float *y = malloc(sizeof(float) * rows * out), *dx = malloc(sizeof(float) * rows * in);
        float *dw = malloc(sizeof(float) * out * in), *db = malloc(sizeof(float) * out);

        CHECK_OK(sf_cpu_op_linear_forward(NULL, rows, in, out, x, w, b, y));
        snprintf(what, sizeof what, "linear %d (rows=%lld in=%d out=%d) y", c, (long long)rows, in, out);
        tu_expect_close(what, y, y_ref, rows * out, TOL);
        CHECK_OK(sf_cpu_op_linear_backward(NULL, rows, in, out, x, w, dy, dx, dw, bias ? db : NULL));
        snprintf(what, sizeof what, "linear %d dx", c);
        tu_expect_close(what, dx, dx_ref, rows * in, TOL);
        snprintf(what, sizeof what, "linear %d dw", c);
        tu_expect_close(what, dw, dw_ref, (int64_t)out * in, TOL);
        if (bias) {
            snprintf(what, sizeof what, "linear %d db", c);
            tu_expect_close(what, db, db_ref, out, TOL);
            /* The bias sum runs in a fixed order: one thread or two give the same bits. */
            float *db1 = malloc(sizeof(float) * out);
            omp_set_num_threads(1);
            CHECK_OK(sf_cpu_op_linear_backward(NULL, rows, in, out, x, w, dy, NULL, dw, db1));
            omp_set_num_threads(2);
            CHECK(memcmp(db1, db, sizeof(float) * out) == 0, "linear %d: db differs between 1 and 2 threads", c);
            free(db1);
        }
#undef GET32
#undef GET64
        free(cfg), free(x), free(w), free(dy), free(b), free(y_ref), free(dx_ref), free(dw_ref), free(db_ref);
        free(y), free(dx), free(dw), free(db);
    }
    free(count);
    sf_safetensors_free(st);

    float one = 1.0f, y0;
    CHECK(sf_cpu_op_linear_forward(NULL, 1, 0, 1, &one, &one, NULL, &y0) == SF_ERR_INVALID, "in = 0 accepted");
    CHECK(sf_cpu_op_linear_forward(NULL, -1, 1, 1, &one, &one, NULL, &y0) == SF_ERR_INVALID, "rows < 0 accepted");
}

static void run_conv_case(const sf_safetensors *st, int c)
{
    char name[64], what[128];
#define GET32(field, n) (snprintf(name, sizeof name, "conv%d." field, c), tu_get_f32(st, name, n))
#define GET64(field, n) (snprintf(name, sizeof name, "conv%d." field, c), tu_get_f64(st, name, n))
    double *cfg = GET64("cfg", 11);
    sf_conv_shape sh = {.n = cfg_at(cfg, 0), .cin = cfg_at(cfg, 1), .h = cfg_at(cfg, 2), .w = cfg_at(cfg, 3),
                        .cout = cfg_at(cfg, 4), .k = cfg_at(cfg, 5), .stride = cfg_at(cfg, 6), .pad = cfg_at(cfg, 7),
                        .oh = cfg_at(cfg, 9), .ow = cfg_at(cfg, 10)};
    const int bias = cfg_at(cfg, 8);
    const int64_t nx = sh.n * sh.cin * sh.h * sh.w, ny = sh.n * sh.cout * sh.oh * sh.ow;
    const int64_t nw = (int64_t)sh.cout * sh.cin * sh.k * sh.k;
    float *x = GET32("x", nx), *w = GET32("w", nw), *dy = GET32("dy", ny), *b = bias ? GET32("b", sh.cout) : NULL;
    double *y_ref = GET64("y", ny), *dx_ref = GET64("dx", nx), *dw_ref = GET64("dw", nw);
    double *db_ref = bias ? GET64("db", sh.cout) : NULL;
#undef GET32
#undef GET64
    float *y = malloc(sizeof(float) * ny), *dx = malloc(sizeof(float) * nx), *dw = malloc(sizeof(float) * nw);
    float *db = malloc(sizeof(float) * sh.cout);
    void *ws = NULL;
    size_t wsb = sf_cpu_op_conv_workspace(NULL, &sh, SF_CONV_PASS_BOTH);
    CHECK(wsb > 0, "conv %d: workspace is 0", c);
    CHECK(posix_memalign(&ws, 64, wsb) == 0, "workspace allocation");

    snprintf(what, sizeof what, "conv %d (n=%lld %d->%d %dx%d k=%d s=%d p=%d)", c, (long long)sh.n, sh.cin, sh.cout,
             sh.h, sh.w, sh.k, sh.stride, sh.pad);
    char part[160];
    CHECK_OK(sf_cpu_op_conv_forward(NULL, &sh, x, w, b, y, ws));
    snprintf(part, sizeof part, "%s y", what);
    tu_expect_close(part, y, y_ref, ny, TOL);
    CHECK_OK(sf_cpu_op_conv_backward(NULL, &sh, x, w, dy, dx, dw, bias ? db : NULL, ws));
    snprintf(part, sizeof part, "%s dx", what);
    tu_expect_close(part, dx, dx_ref, nx, TOL);
    snprintf(part, sizeof part, "%s dw", what);
    tu_expect_close(part, dw, dw_ref, nw, TOL);
    if (bias) {
        snprintf(part, sizeof part, "%s db", what);
        tu_expect_close(part, db, db_ref, sh.cout, TOL);
        float *db1 = malloc(sizeof(float) * sh.cout);
        omp_set_num_threads(1);
        CHECK_OK(sf_cpu_op_conv_backward(NULL, &sh, x, w, dy, NULL, dw, db1, ws));
        omp_set_num_threads(2);
        CHECK(memcmp(db1, db, sizeof(float) * sh.cout) == 0, "%s: db differs between 1 and 2 threads", what);
        free(db1);
    }
    /* First layer: no dx wanted; dw must not change. */
    float *dw2 = malloc(sizeof(float) * nw);
    CHECK_OK(sf_cpu_op_conv_backward(NULL, &sh, x, w, dy, NULL, dw2, NULL, ws));
    snprintf(part, sizeof part, "%s dw without dx", what);
    tu_expect_close(part, dw2, dw_ref, nw, TOL);
    free(dw2);
    free(cfg), free(x), free(w), free(dy), free(b), free(y_ref), free(dx_ref), free(dw_ref), free(db_ref);
    free(y), free(dx), free(dw), free(db), free(ws);
}

static void test_conv(void)
{
    sf_safetensors *st = tu_fixture("layers_conv.safetensors");
    double *count = tu_get_f64(st, "count", 1);
    for (int c = 0; c < (int)count[0]; c++) run_conv_case(st, c);
    free(count);
    sf_safetensors_free(st);

    /* The last fixture case must really span several chunks of scratch, or the chunking went untested. */
    sf_conv_shape big = {.n = 10, .cin = 32, .h = 32, .w = 32, .cout = 8, .k = 3, .stride = 1, .pad = 1,
                         .oh = 32, .ow = 32};
    size_t all_at_once = (size_t)big.n * (2 * 32 * 9 + 8) * 32 * 32 * sizeof(float);
    CHECK(sf_cpu_op_conv_workspace(NULL, &big, SF_CONV_PASS_BOTH) < all_at_once, "conv workspace does not chunk (%zu bytes)",
          sf_cpu_op_conv_workspace(NULL, &big, SF_CONV_PASS_BOTH));

    sf_conv_shape bad = big;
    bad.oh = 31;
    float z = 0;
    CHECK(sf_cpu_op_conv_forward(NULL, &bad, &z, &z, NULL, &z, &z) == SF_ERR_INVALID, "wrong oh accepted");
    CHECK(sf_cpu_op_conv_workspace(NULL, &bad, SF_CONV_PASS_BOTH) == 0, "workspace of an invalid shape");
    CHECK(sf_cpu_op_conv_forward(NULL, &big, &z, &z, NULL, &z, NULL) == SF_ERR_INVALID, "NULL workspace accepted");
}

int main(void)
{
    omp_set_num_threads(2);
    test_linear();
    test_conv();
    return tu_finish("test_linear_conv");
}
