/* test_optim.c — 10-step trajectories of SGD (momentum, Nesterov, weight decay), Adam and AdamW on the quadratic
 * 0.5·Σ d_i (p_i - c_i)² against torch.optim in float64; the C side recomputes each gradient from its own
 * parameters, so errors would compound over the steps. Also the non-finite check and argument validation. */
#include "cpu/cpu_layers.h"
#include "testutil.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 10
#define TOL 1e-5 /* fp32 state over 10 steps against fp64 */

static void test_trajectories(void)
{
    sf_safetensors *st = tu_fixture("layers_optim.safetensors");
    const int64_t n = 37;
    double *count = tu_get_f64(st, "count", 1);
    float *d = tu_get_f32(st, "d", n), *c = tu_get_f32(st, "c", n), *p0 = tu_get_f32(st, "p0", n);
    float *p = malloc(sizeof(float) * n), *g = malloc(sizeof(float) * n);
    float *m = malloc(sizeof(float) * n), *v = malloc(sizeof(float) * n);
    for (int k = 0; k < (int)count[0]; k++) {
        char name[64], what[160];
        snprintf(name, sizeof name, "opt%d.cfg", k);
        double *cfg = tu_get_f64(st, name, 8);
        snprintf(name, sizeof name, "opt%d.traj", k);
        double *traj = tu_get_f64(st, name, (STEPS + 1) * n);
        const int kind = (int)cfg[0];
        const float lr = (float)cfg[1], mom = (float)cfg[2], wd = (float)cfg[4], b1 = (float)cfg[5];
        const float b2 = (float)cfg[6], eps = (float)cfg[7];
        const int nesterov = (int)cfg[3];
        memcpy(p, p0, sizeof(float) * n);
        memset(m, 0, sizeof(float) * n);
        memset(v, 0, sizeof(float) * n);
        for (int64_t s = 1; s <= STEPS; s++) {
            for (int64_t i = 0; i < n; i++) g[i] = d[i] * (p[i] - c[i]);
            if (kind == 0)
                CHECK_OK(sf_cpu_op_sgd_step(NULL, n, lr, mom, nesterov, wd, s, p, g, mom != 0.0f ? m : NULL));
            else
                CHECK_OK(sf_cpu_op_adam_step(NULL, n, lr, b1, b2, eps, wd, kind == 2, s, p, g, m, v));
            snprintf(what, sizeof what, "%s (lr=%g momentum=%g nesterov=%d wd=%g betas=%g,%g eps=%g) step %lld",
                     kind == 0 ? "SGD" : kind == 1 ? "Adam" : "AdamW", lr, mom, nesterov, wd, b1, b2, eps,
                     (long long)s);
            tu_expect_close(what, p, traj + s * n, n, TOL);
        }
        free(cfg), free(traj);
    }
    free(count), free(d), free(c), free(p0), free(p), free(g), free(m), free(v);
    sf_safetensors_free(st);

    float x = 1.0f, y = 1.0f;
    CHECK(sf_cpu_op_sgd_step(NULL, 1, 0.1f, 0.9f, 0, 0.0f, 1, &x, &y, NULL) == SF_ERR_INVALID,
          "SGD momentum without a buffer accepted");
    CHECK(sf_cpu_op_sgd_step(NULL, 1, 0.1f, 0.0f, 1, 0.0f, 1, &x, &y, NULL) == SF_ERR_INVALID,
          "Nesterov without momentum accepted (PyTorch refuses it)");
    CHECK(sf_cpu_op_adam_step(NULL, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 0, &x, &y, &x, &y) == SF_ERR_INVALID,
          "Adam step 0 accepted (steps count from 1)");
    CHECK(sf_cpu_op_adam_step(NULL, 1, 0.1f, 1.0f, 0.999f, 1e-8f, 0.0f, 0, 1, &x, &y, &x, &y) == SF_ERR_INVALID,
          "Adam beta1 = 1 accepted");
}

static void test_check_finite(void)
{
    const int64_t n = 100001;
    float *x = malloc(sizeof(float) * n);
    tu_randn(x, n, 0.0f, 1e30f, 3); /* large but finite: x·0 must stay 0 */
    float flag = 0.0f;
    CHECK_OK(sf_cpu_op_check_finite(NULL, n, x, &flag));
    CHECK(flag == 0.0f, "finite values flagged");
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    const int64_t where[3] = {n - 1, 0, n / 2};
    for (int k = 0; k < 3; k++) {
        const float keep = x[where[k]];
        x[where[k]] = bad[k];
        flag = 0.0f;
        CHECK_OK(sf_cpu_op_check_finite(NULL, n, x, &flag));
        CHECK(flag == 1.0f, "%g at %lld not flagged", bad[k], (long long)where[k]);
        x[where[k]] = keep;
    }
    flag = 1.0f; /* the flag is set, never cleared */
    CHECK_OK(sf_cpu_op_check_finite(NULL, n, x, &flag));
    CHECK(flag == 1.0f, "check_finite cleared the flag");
    free(x);
}

int main(void)
{
    omp_set_num_threads(2);
    test_trajectories();
    test_check_finite();
    return tu_finish("test_optim");
}
