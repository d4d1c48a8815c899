/* test_gpu_state.c — the CUDA neuron kernels with the state carried across calls (sf_lif_state) and the two-phase
 * BN→LIF backward (sf_bn_split), against the CPU ops given the same inputs and state: LIF forward and backward with
 * v_in, v_out, dv_in, dv_out at a short T and a long one (the segmented recompute), full and recompute modes; BN→LIF
 * phases 1 and 2 with the state, up to T = 300 (several segments); bn_stats_merge.
 * Bounds: spikes and v_out exact (the same float operations); dx, dv_out < 1e-5 relative (the device's expf);
 * BN sums and dx < 1e-4 (float sums in another order); merged statistics < 1e-6. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_neuron.h"
#include "cuda/cuda_backend.h"
#include "gpu_copies.h"
#include "testutil.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *randn(int64_t n, float mean, float std, uint64_t seed)
{
    float *x = malloc(4 * (size_t)(n ? n : 1));
    tu_randn(x, n, mean, std, seed);
    return x;
}

/* Index of the first value that differs bitwise (-1: none), and how many do. */
static int64_t first_difference(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4) != 0) return i;
    return -1;
}

static int64_t count_differences(const float *a, const float *b, int64_t n)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) c += memcmp(a + i, b + i, 4) != 0;
    return c;
}

static void test_lif_state(sf_backend *be, sf_surrogate sur, int64_t T, int64_t N, int keep_h)
{
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.surrogate = sur;
    p.alpha = sf_surrogate_default_alpha(sur);
    const int64_t n = T * N;
    float *x = randn(n, 0.6f, 1.0f, 3 + T), *ds = randn(n, 0.0f, 1.0f, 4 + T);
    float *vin = randn(N, 0.3f, 0.3f, 5), *dvin = randn(N, 0.0f, 0.5f, 6);
    float *s = calloc(n, 4), *h = calloc(n, 4), *dx = calloc(n, 4), *vout = calloc(N, 4), *dvout = calloc(N, 4);
    sf_lif_out o = {.s = s, .h = h};
    sf_lif_state st = {.v_in = vin, .v_out = vout, .dv_in = dvin, .dv_out = dvout};
    CHECK_OK(sf_cpu_lif_forward(&p, T, N, x, &o, &st));
    CHECK_OK(sf_cpu_lif_backward(&p, T, N, x, keep_h ? h : NULL, ds, dx, &st));

    float *dx_ = dev_from(x, n), *dds = dev_from(ds, n), *dvin_ = dev_from(vin, N), *ddvin = dev_from(dvin, N);
    float *ds_ = dev_from(s, n), *dh = dev_from(h, n), *ddx = dev_from(dx, n), *dvout_ = dev_from(vout, N);
    float *ddvout = dev_from(dvout, N);
    dev_zero(ds_, 4 * n);
    dev_zero(dvout_, 4 * N);
    dev_zero(ddvout, 4 * N);
    sf_lif_out go = {.s = ds_, .h = keep_h ? dh : NULL};
    sf_lif_state gst = {.v_in = dvin_, .v_out = dvout_, .dv_in = ddvin, .dv_out = ddvout};
    CHECK_OK(be->lif_forward(be, &p, T, N, dx_, &go, &gst));
    CHECK_OK(be->lif_backward(be, &p, T, N, dx_, keep_h ? dh : NULL, dds, ddx, &gst));
    CHECK_OK(be->sync(be));
    float *gs = host_from(ds_, n), *gdx = host_from(ddx, n), *gv = host_from(dvout_, N), *gdv = host_from(ddvout, N);
    int64_t bad_s = first_difference(gs, s, n), bad_v = first_difference(gv, vout, N);
    CHECK(bad_s < 0 && bad_v < 0,
          "LIF %s T=%lld N=%lld keep_h %d: %lld spikes differ from the CPU (first t=%lld n=%lld: %g, CPU %g), %lld v_out "
          "(first n=%lld: %.9g, CPU %.9g)",
          sf_surrogate_name(sur), (long long)T, (long long)N, keep_h, (long long)count_differences(gs, s, n),
          (long long)(bad_s < 0 ? -1 : bad_s / N), (long long)(bad_s < 0 ? -1 : bad_s % N), bad_s < 0 ? 0.0 : gs[bad_s],
          bad_s < 0 ? 0.0 : s[bad_s], (long long)count_differences(gv, vout, N), (long long)bad_v,
          bad_v < 0 ? 0.0 : gv[bad_v], bad_v < 0 ? 0.0 : vout[bad_v]);
    CHECK(tu_rel_err_f32(gdx, dx, n) < 1e-5 && tu_rel_err_f32(gdv, dvout, N) < 1e-5, "LIF %s T=%lld keep_h %d: dx %g, dv_out %g",
          sf_surrogate_name(sur), (long long)T, keep_h, tu_rel_err_f32(gdx, dx, n), tu_rel_err_f32(gdv, dvout, N));
    float *devs[] = {dx_, dds, dvin_, ddvin, ds_, dh, ddx, dvout_, ddvout};
    for (size_t i = 0; i < sizeof devs / sizeof *devs; i++) cudaFree(devs[i]);
    free(x), free(ds), free(vin), free(dvin), free(s), free(h), free(dx), free(vout), free(dvout), free(gs), free(gdx),
        free(gv), free(gdv);
}

static void test_bn_lif_split(sf_backend *be, int64_t T, int keep_h)
{
    const int64_t B = 3, C = 6, hw = 12, N = B * C * hw, n = T * N;
    sf_lif_params p;
    sf_lif_default_params(&p);
    sf_bn_shape sh = {.rows = T * B, .c = (int32_t)C, .hw = hw};
    float *x = randn(n, 0.3f, 1.5f, 21), *ds = randn(n, 0.0f, 1.0f, 22), *g = randn(C, 1.0f, 0.2f, 23);
    float *b = randn(C, 0.8f, 0.3f, 24), *vin = randn(N, 0.2f, 0.3f, 25), *dvin = randn(N, 0.0f, 0.5f, 26);
    float mean[6], var[6], sums[12];
    CHECK_OK(sf_cpu_op_bn_stats(NULL, sh, x, mean, var));
    float *s = calloc(n, 4), *h = calloc(n, 4), *dx = calloc(n, 4), *dvout = calloc(N, 4), pg[6], pb[6];
    sf_lif_out o = {.s = s, .h = h};
    sf_lif_state st = {.v_in = vin, .dv_in = dvin, .dv_out = dvout};
    CHECK_OK(sf_cpu_op_bn_lif_forward(NULL, &p, T, sh, x, mean, var, 1e-5f, g, b, &o, &st));
    sf_bn_split one = {.phase = 1};
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, keep_h ? h : NULL, mean, var, 1e-5f, g, b, ds, NULL, pg,
                                       pb, &st, &one, NULL));
    /* phase 2 as if three processes had given these sums */
    for (int c = 0; c < C; c++) sums[c] = 3.0f * pg[c], sums[C + c] = 3.0f * pb[c];
    sf_bn_split two = {.phase = 2, .sum_dyx = sums, .sum_dy = sums + C, .rows = 3 * T * B};
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, &p, T, sh, x, keep_h ? h : NULL, mean, var, 1e-5f, g, b, ds, dx, NULL,
                                       NULL, &st, &two, NULL));

    float *dx_ = dev_from(x, n), *dds = dev_from(ds, n), *dg = dev_from(g, C), *db = dev_from(b, C);
    float *dm = dev_from(mean, C), *dvar = dev_from(var, C), *dvin_ = dev_from(vin, N), *ddvin = dev_from(dvin, N);
    float *ds_ = dev_from(s, n), *dh = dev_from(h, n), *ddx = dev_from(dx, n), *ddvout = dev_from(dvout, N);
    float *dpg = dev_from(pg, C), *dpb = dev_from(pb, C), *dsums = dev_from(sums, 2 * C);
    dev_zero(ddx, 4 * n);
    dev_zero(ddvout, 4 * N);
    sf_lif_out go = {.s = ds_};
    sf_lif_state gst = {.v_in = dvin_, .dv_in = ddvin, .dv_out = ddvout};
    CHECK_OK(be->bn_lif_forward(be, &p, T, sh, dx_, dm, dvar, 1e-5f, dg, db, &go, &gst));
    CHECK_OK(be->bn_lif_backward(be, &p, T, sh, dx_, keep_h ? dh : NULL, dm, dvar, 1e-5f, dg, db, dds, ddx, dpg, dpb,
                                 &gst, &one, NULL));
    sf_bn_split gtwo = {.phase = 2, .sum_dyx = dsums, .sum_dy = dsums + C, .rows = 3 * T * B};
    CHECK_OK(be->bn_lif_backward(be, &p, T, sh, dx_, keep_h ? dh : NULL, dm, dvar, 1e-5f, dg, db, dds, ddx, NULL, NULL,
                                 &gst, &gtwo, NULL));
    CHECK_OK(be->sync(be));
    float *gs = host_from(ds_, n), *gdx = host_from(ddx, n), *gdv = host_from(ddvout, N), *gpg = host_from(dpg, C);
    float *gpb = host_from(dpb, C);
    CHECK(memcmp(gs, s, 4 * n) == 0, "BN-LIF T=%lld with v_in: spikes differ from the CPU", (long long)T);
    CHECK(tu_rel_err_f32(gpg, pg, C) < 1e-4 && tu_rel_err_f32(gpb, pb, C) < 1e-4, "BN-LIF phase 1 T=%lld: sums differ (%g, %g)",
          (long long)T, tu_rel_err_f32(gpg, pg, C), tu_rel_err_f32(gpb, pb, C));
    CHECK(tu_rel_err_f32(gdx, dx, n) < 1e-4 && tu_rel_err_f32(gdv, dvout, N) < 1e-5, "BN-LIF phase 2 T=%lld keep_h %d: dx %g, dv_out %g",
          (long long)T, keep_h, tu_rel_err_f32(gdx, dx, n), tu_rel_err_f32(gdv, dvout, N));

    /* the merge of three parts' statistics */
    float parts[3 * 12], mm[6], mv[6];
    for (int q = 0; q < 3; q++)
        for (int c = 0; c < C; c++) parts[q * 2 * C + c] = mean[c] + 0.1f * q, parts[q * 2 * C + C + c] = var[c] * (1 + q);
    CHECK_OK(sf_cpu_op_bn_stats_merge(NULL, 3, (int32_t)C, parts, mm, mv));
    float *dparts = dev_from(parts, 3 * 2 * C), *dmm = dev_from(mm, C), *dmv = dev_from(mv, C);
    CHECK_OK(be->bn_stats_merge(be, 3, (int32_t)C, dparts, dmm, dmv));
    CHECK_OK(be->sync(be));
    float *gmm = host_from(dmm, C), *gmv = host_from(dmv, C);
    CHECK(memcmp(gmm, mm, 4 * C) == 0 && memcmp(gmv, mv, 4 * C) == 0, "bn_stats_merge differs from the CPU's");
    float *devs[] = {dx_, dds, dg, db, dm, dvar, dvin_, ddvin, ds_, dh, ddx, ddvout, dpg, dpb, dsums, dparts, dmm, dmv};
    for (size_t i = 0; i < sizeof devs / sizeof *devs; i++) cudaFree(devs[i]);
    free(x), free(ds), free(g), free(b), free(vin), free(dvin), free(s), free(h), free(dx), free(dvout), free(gs),
        free(gdx), free(gdv), free(gpg), free(gpb), free(gmm), free(gmv);
}

int main(void)
{
    if (sf_cuda_device_count() < 1) {
        fprintf(stderr, "test_gpu_state: no CUDA device\n");
        return 1;
    }
    sf_backend *be = NULL;
    CHECK_OK(sf_cuda_backend_create(0, SF_PRECISION_FP32, NULL, &be));
    if (!be) return tu_finish("test_gpu_state");
    for (int sur = 0; sur < 4; sur++)
        for (int keep = 0; keep < 2; keep++) {
            test_lif_state(be, (sf_surrogate)sur, 7, 1001, keep);
            test_lif_state(be, (sf_surrogate)sur, 200, 515, keep); /* segmented recompute with checkpoints */
        }
    for (int keep = 0; keep < 2; keep++) {
        test_bn_lif_split(be, 6, keep);
        test_bn_lif_split(be, 70, keep);
        test_bn_lif_split(be, 300, keep); /* several recompute segments that end at T, a short first one */
    }
    sf_backend_free(be);
    return tu_finish("test_gpu_state");
}
