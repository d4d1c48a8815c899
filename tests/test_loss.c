/* test_loss.c — the leaky readout, both softmax cross-entropy losses (on the T-mean, at every step) and the MSE on the
 * firing rate against PyTorch float64 fixtures: loss, gradient, mean logits and the accuracy count; plus label
 * validation. */
#include "cpu/cpu_layers.h"
#include "testutil.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

#define TOL 1e-6 /* losses and gradients are computed in double from fp32 logits */

static void test_xent(const sf_safetensors *st)
{
    double *count = tu_get_f64(st, "count", 1);
    for (int c = 0; c < (int)count[0]; c++) {
        char name[64], what[128];
#define GET32(field, n) (snprintf(name, sizeof name, "xent%d." field, c), tu_get_f32(st, name, n))
#define GET64(field, n) (snprintf(name, sizeof name, "xent%d." field, c), tu_get_f64(st, name, n))
        double *cfg = GET64("cfg", 5);
        const int64_t T = (int64_t)cfg[0], B = (int64_t)cfg[1];
        const int32_t K = (int32_t)cfg[2], per_step = (int32_t)cfg[3];
        const float eps = (float)cfg[4];
        float *r = GET32("r", T * B * K);
        double *lab = GET64("labels", B), *loss_ref = GET64("loss", 1), *dr_ref = GET64("dr", T * B * K);
        double *mean_ref = GET64("mean", B * K), *correct_ref = GET64("correct", 1);
#undef GET32
#undef GET64
        int32_t *labels = malloc(sizeof(int32_t) * B);
        for (int64_t b = 0; b < B; b++) labels[b] = (int32_t)lab[b];
        float *dr = malloc(sizeof(float) * T * B * K), *mean = malloc(sizeof(float) * B * K), stats[2];
        CHECK_OK(sf_cpu_op_softmax_xent(NULL, T, B, K, per_step, eps, r, labels, dr, mean, stats));
        snprintf(what, sizeof what, "xent %d (T=%lld B=%lld K=%d per_step=%d eps=%g)", c, (long long)T, (long long)B, K,
                 per_step, (double)eps);
        CHECK(fabs(stats[0] - loss_ref[0]) <= TOL * fmax(1.0, fabs(loss_ref[0])), "%s: loss %.9g, expected %.9g",
              what, stats[0], loss_ref[0]);
        CHECK(stats[1] == (float)correct_ref[0], "%s: %g correct, expected %g", what, stats[1], correct_ref[0]);
        char part[160];
        snprintf(part, sizeof part, "%s dr", what);
        tu_expect_close(part, dr, dr_ref, T * B * K, TOL);
        snprintf(part, sizeof part, "%s logits_mean", what);
        tu_expect_close(part, mean, mean_ref, B * K, TOL);
        /* Evaluation: no gradient buffer, same loss. */
        float stats2[2];
        CHECK_OK(sf_cpu_op_softmax_xent(NULL, T, B, K, per_step, eps, r, labels, NULL, mean, stats2));
        CHECK(stats2[0] == stats[0] && stats2[1] == stats[1], "%s: evaluation differs from training", what);
        free(cfg), free(r), free(lab), free(loss_ref), free(dr_ref), free(mean_ref), free(correct_ref);
        free(labels), free(dr), free(mean);
    }
    free(count);

    float r[6] = {0}, mean[6], stats[2];
    int32_t labels[2] = {0, 3};
    CHECK(sf_cpu_op_softmax_xent(NULL, 1, 2, 3, 0, 0.0f, r, labels, NULL, mean, stats) == SF_ERR_INVALID,
          "label 3 of 3 classes accepted");
    labels[1] = -1;
    CHECK(sf_cpu_op_softmax_xent(NULL, 1, 2, 3, 1, 0.0f, r, labels, NULL, mean, stats) == SF_ERR_INVALID,
          "label -1 accepted");
    labels[1] = 2;
    CHECK(sf_cpu_op_softmax_xent(NULL, 1, 2, 3, 0, 1.5f, r, labels, NULL, mean, stats) == SF_ERR_INVALID,
          "label smoothing 1.5 accepted");
    CHECK(sf_cpu_op_softmax_xent(NULL, 1, 2, 3, 0, -0.1f, r, labels, NULL, mean, stats) == SF_ERR_INVALID,
          "label smoothing -0.1 accepted");
}

/* MSE on the firing rate (the T-mean) against the one-hot label. */
static void test_mse(const sf_safetensors *st)
{
    double *count = tu_get_f64(st, "mse_count", 1);
    for (int c = 0; c < (int)count[0]; c++) {
        char name[64], what[128];
#define GET32(field, n) (snprintf(name, sizeof name, "mse%d." field, c), tu_get_f32(st, name, n))
#define GET64(field, n) (snprintf(name, sizeof name, "mse%d." field, c), tu_get_f64(st, name, n))
        double *cfg = GET64("cfg", 3);
        const int64_t T = (int64_t)cfg[0], B = (int64_t)cfg[1];
        const int32_t K = (int32_t)cfg[2];
        float *r = GET32("r", T * B * K);
        double *lab = GET64("labels", B), *loss_ref = GET64("loss", 1), *dr_ref = GET64("dr", T * B * K);
        double *mean_ref = GET64("mean", B * K), *correct_ref = GET64("correct", 1);
#undef GET32
#undef GET64
        int32_t *labels = malloc(sizeof(int32_t) * B);
        for (int64_t b = 0; b < B; b++) labels[b] = (int32_t)lab[b];
        float *dr = malloc(sizeof(float) * T * B * K), *mean = malloc(sizeof(float) * B * K), stats[2], stats2[2];
        CHECK_OK(sf_cpu_op_mse_rate(NULL, T, B, K, r, labels, dr, mean, stats));
        snprintf(what, sizeof what, "mse %d (T=%lld B=%lld K=%d)", c, (long long)T, (long long)B, K);
        CHECK(fabs(stats[0] - loss_ref[0]) <= TOL * fmax(1.0, fabs(loss_ref[0])), "%s: loss %.9g, expected %.9g",
              what, stats[0], loss_ref[0]);
        CHECK(stats[1] == (float)correct_ref[0], "%s: %g correct, expected %g", what, stats[1], correct_ref[0]);
        char part[160];
        snprintf(part, sizeof part, "%s dr", what);
        tu_expect_close(part, dr, dr_ref, T * B * K, TOL);
        snprintf(part, sizeof part, "%s logits_mean", what);
        tu_expect_close(part, mean, mean_ref, B * K, TOL);
        CHECK_OK(sf_cpu_op_mse_rate(NULL, T, B, K, r, labels, NULL, mean, stats2));
        CHECK(stats2[0] == stats[0] && stats2[1] == stats[1], "%s: evaluation differs from training", what);
        free(cfg), free(r), free(lab), free(loss_ref), free(dr_ref), free(mean_ref), free(correct_ref);
        free(labels), free(dr), free(mean);
    }
    free(count);
    float r[6] = {0}, mean[6], stats[2];
    int32_t labels[2] = {0, 3};
    CHECK(sf_cpu_op_mse_rate(NULL, 1, 2, 3, r, labels, NULL, mean, stats) == SF_ERR_INVALID,
          "label 3 of 3 classes accepted");
}

static void test_leaky(const sf_safetensors *st)
{
    double *count = tu_get_f64(st, "leaky_count", 1);
    for (int c = 0; c < (int)count[0]; c++) {
        char name[64], what[96];
#define GET32(field, n) (snprintf(name, sizeof name, "leaky%d." field, c), tu_get_f32(st, name, n))
#define GET64(field, n) (snprintf(name, sizeof name, "leaky%d." field, c), tu_get_f64(st, name, n))
        double *cfg = GET64("cfg", 4);
        const int64_t T = (int64_t)cfg[0], n = (int64_t)cfg[1];
        const float a = (float)cfg[2], cc = (float)cfg[3];
        float *o = GET32("o", T * n), *dr = GET32("dr", T * n);
        double *r_ref = GET64("r", T * n), *do_ref = GET64("do", T * n);
#undef GET32
#undef GET64
        float *r = malloc(sizeof(float) * T * n), *doo = malloc(sizeof(float) * T * n);
        CHECK_OK(sf_cpu_op_leaky_forward(NULL, T, n, a, cc, o, r));
        CHECK_OK(sf_cpu_op_leaky_backward(NULL, T, n, a, cc, dr, doo));
        snprintf(what, sizeof what, "leaky %d (T=%lld n=%lld a=%g c=%g) r", c, (long long)T, (long long)n, a, cc);
        tu_expect_close(what, r, r_ref, T * n, TOL);
        snprintf(what, sizeof what, "leaky %d do", c);
        tu_expect_close(what, doo, do_ref, T * n, TOL);
        free(cfg), free(o), free(dr), free(r_ref), free(do_ref), free(r), free(doo);
    }
    free(count);
}

int main(void)
{
    omp_set_num_threads(2);
    sf_safetensors *st = tu_fixture("layers_loss.safetensors");
    test_xent(st);
    test_mse(st);
    test_leaky(st);
    sf_safetensors_free(st);
    return tu_finish("test_loss");
}
