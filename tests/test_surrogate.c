/* test_surrogate.c — the surrogate derivatives against central finite differences of their smooth primitives,
 * directly (lif_math.h) and through the vectorised CPU backward kernel; the CPU expf; θ_grad masking.
 *
 * Primitives F with F' = the surrogate, z = h - θ:
 *   sigmoid       σ(αz)
 *   atan          atan(π/2·α·z)/π + 1/2
 *   fast_sigmoid  z/(1 + α|z|)
 *   rect          clamp(αz + 1/2, 0, 1)   (checked away from its corners z = ±1/(2α))
 * Central differences with step 1e-4/α in double; the float32 surrogate must agree within 1e-5 relative
 * (plus 1e-6·α absolute, for values near zero); points where the difference straddles a kink are skipped. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_neuron.h"
#include "cpu/neuron_block.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SF_PI 3.14159265358979323846

static double primitive(sf_surrogate kind, double alpha, double z)
{
    switch (kind) {
    case SF_SURROGATE_SIGMOID: return 1.0 / (1.0 + exp(-alpha * z));
    case SF_SURROGATE_ATAN: return atan(SF_PI / 2 * alpha * z) / SF_PI + 0.5;
    case SF_SURROGATE_FAST_SIGMOID: return z / (1.0 + alpha * fabs(z));
    case SF_SURROGATE_RECT: return fmin(fmax(alpha * z + 0.5, 0.0), 1.0);
    }
    return 0;
}

static double central_diff(sf_surrogate kind, double alpha, double z)
{
    const double e = 1e-4 / alpha;
    return (primitive(kind, alpha, z + e) - primitive(kind, alpha, z - e)) / (2 * e);
}

/* Points where a central difference straddles a kink: rect's corners, and fast_sigmoid's |z| at 0 (there the
 * difference quotient is 1/(1 + α·step), not 1). */
static int near_corner(sf_surrogate kind, double alpha, double z)
{
    if (kind == SF_SURROGATE_RECT) return fabs(fabs(z) - 0.5 / alpha) < 1e-3 / alpha;
    if (kind == SF_SURROGATE_FAST_SIGMOID) return fabs(z) < 1e-3 / alpha;
    return 0;
}

static int close_to(double got, double want, double alpha)
{
    return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6 * alpha;
}

/* sf_surrogate_grad (the scalar definition both backends share) on a grid of z. */
static void check_scalar(sf_surrogate kind, float alpha)
{
    int bad = 0, checked = 0;
    double worst = 0;
    for (int i = -400; i <= 400; i++) {
        const float z = (float)i / 100.0f / alpha; /* ±4/α: the whole interesting range */
        if (near_corner(kind, alpha, z)) continue;
        const double fd = central_diff(kind, alpha, z), g = sf_surrogate_grad(kind, alpha, z);
        checked++;
        if (!close_to(g, fd, alpha)) {
            bad++;
            worst = fmax(worst, fabs(g - fd));
        }
    }
    CHECK(bad == 0 && checked > 700, "%s alpha=%g: %d of %d points off the finite difference (worst %.3g)",
          sf_surrogate_name(kind), (double)alpha, bad, checked, worst);
}

/* The backward kernel at T = 1: dx = c·σ'(h) with ds = 1, h = c·x (v0 = 0), for a sweep of x over many blocks. */
static void check_kernel(sf_surrogate kind, float alpha)
{
    const int64_t N = 64 * 12 + 7;
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.surrogate = kind;
    p.alpha = alpha;
    p.decay_input = 0; /* c = 1: dx is the surrogate itself */
    float *x = malloc(N * sizeof *x), *ds = malloc(N * sizeof *ds), *dx = malloc(N * sizeof *dx);
    for (int64_t i = 0; i < N; i++) {
        x[i] = 1.0f + (float)(i - N / 2) * (6.0f / alpha) / (float)N; /* z in ±3/α */
        ds[i] = 1.0f;
    }
    CHECK_OK(sf_cpu_lif_backward(&p, 1, N, x, NULL, ds, dx, NULL));
    int bad = 0, nonzero = 0;
    for (int64_t i = 0; i < N; i++) {
        const double z = (double)x[i] - 1.0;
        if (near_corner(kind, alpha, z)) continue;
        bad += !close_to(dx[i], central_diff(kind, alpha, z), alpha);
        nonzero += dx[i] != 0.0f;
    }
    CHECK(bad == 0 && nonzero > N / 8, "kernel %s alpha=%g: %d neurons off the finite difference (%d nonzero)",
          sf_surrogate_name(kind), (double)alpha, bad, nonzero);
    free(x);
    free(ds);
    free(dx);
}

/* θ_grad: the surrogate is 0 exactly where h < θ_grad and unchanged elsewhere (T = 1 sweep), and over a longer
 * run a θ_grad above every h zeroes dx while one below every h changes nothing. */
static void check_grad_threshold(sf_surrogate kind)
{
    const int64_t N = 300;
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.surrogate = kind;
    p.alpha = sf_surrogate_default_alpha(kind);
    p.decay_input = 0;
    p.grad_threshold = 0.9f;
    float *x = malloc(N * sizeof *x), *ds = malloc(N * sizeof *ds), *dx = malloc(N * sizeof *dx);
    float *dx_open = malloc(N * sizeof *dx_open);
    for (int64_t i = 0; i < N; i++) {
        x[i] = 0.7f + 0.5f * (float)i / (float)N; /* spans θ_grad = 0.9 and θ = 1 */
        ds[i] = 1.0f;
    }
    CHECK_OK(sf_cpu_lif_backward(&p, 1, N, x, NULL, ds, dx_open, NULL));
    p.use_grad_threshold = 1;
    CHECK_OK(sf_cpu_lif_backward(&p, 1, N, x, NULL, ds, dx, NULL));
    int wrong = 0, masked = 0;
    for (int64_t i = 0; i < N; i++) {
        if (x[i] < p.grad_threshold) {
            masked++;
            wrong += dx[i] != 0.0f;
        } else {
            wrong += dx[i] != dx_open[i];
        }
    }
    CHECK(wrong == 0 && masked > 50, "%s θ_grad: %d neurons wrong (%d masked)", sf_surrogate_name(kind), wrong,
          masked);

    const int64_t T = 9, M = 150, n = T * M;
    float *xs = malloc(n * sizeof *xs), *dss = malloc(n * sizeof *dss), *a = malloc(n * sizeof *a);
    float *b = malloc(n * sizeof *b);
    tu_randn(xs, n, 0.6f, 1.0f, 41);
    tu_randn(dss, n, 0.0f, 1.0f, 42);
    p.use_grad_threshold = 0;
    CHECK_OK(sf_cpu_lif_backward(&p, T, M, xs, NULL, dss, a, NULL));
    p.use_grad_threshold = 1;
    p.grad_threshold = -1e30f;
    CHECK_OK(sf_cpu_lif_backward(&p, T, M, xs, NULL, dss, b, NULL));
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "%s: θ_grad below every h must change nothing", sf_surrogate_name(kind));
    p.grad_threshold = 1e30f;
    CHECK_OK(sf_cpu_lif_backward(&p, T, M, xs, NULL, dss, b, NULL));
    int nz = 0;
    for (int64_t i = 0; i < n; i++) nz += b[i] != 0.0f;
    CHECK(nz == 0, "%s: θ_grad above every h must zero dx (%d nonzero)", sf_surrogate_name(kind), nz);
    free(x);
    free(ds);
    free(dx);
    free(dx_open);
    free(xs);
    free(dss);
    free(a);
    free(b);
}

/* The kernels' expf: within 2 ulp of exp over the range the sigmoid uses, NaN kept, no overflow to inf. */
static void check_expf(void)
{
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        const float x = -87.0f + 175.0f * (float)i / 200000.0f;
        const double want = exp((double)x);
        const float got = sf_cpu_expf(x);
        const double ulp = (double)nextafterf((float)want, INFINITY) - (double)(float)want;
        worst = fmax(worst, fabs((double)got - want) / ulp);
    }
    CHECK(worst <= 2.0, "sf_cpu_expf: worst error %.2f ulp", worst);
    CHECK(isnan(sf_cpu_expf(NAN)), "expf(NaN) must be NaN");
    CHECK(isfinite(sf_cpu_expf(1000.0f)) && sf_cpu_expf(1000.0f) > 1e38f, "expf(1000) should clamp to ~3e38");
    CHECK(sf_cpu_expf(-1000.0f) >= 0.0f && sf_cpu_expf(-1000.0f) < 1e-37f, "expf(-1000) should be ~0");
}

int main(void)
{
    const float alphas[4][3] = {{4.0f, 1.0f, 10.0f}, {2.0f, 0.5f, 5.0f}, {10.0f, 1.0f, 25.0f}, {1.0f, 0.5f, 3.0f}};
    for (int k = 0; k < 4; k++) {
        for (int j = 0; j < 3; j++) {
            check_scalar((sf_surrogate)k, alphas[k][j]);
            check_kernel((sf_surrogate)k, alphas[k][j]);
        }
        check_grad_threshold((sf_surrogate)k);
    }
    check_expf();
    return tu_finish("test_surrogate");
}
