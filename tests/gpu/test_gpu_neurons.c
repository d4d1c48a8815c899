/* test_gpu_neurons.c — the CUDA kernels of the PLIF, IF and ALIF against the CPU ops (themselves checked against
 * PyTorch float64 by test_neurons) on the same inputs: the plain neuron op forward and backward, recompute and full
 * mode, with the state carried in (v and the ALIF's b, their gradients out), a PLIF's w per layer and per channel
 * (dw), and the fused BN→neuron forward and backward (dγ, dβ, dw), over surrogates, resets, detach_reset,
 * decay_input and θ_grad, on awkward sizes: T = 1, odd N, and T long enough for the segmented recompute, where the
 * backward from the forward's checkpoints (sf_lif_state.v_ckpt) must give the same bits as the one without, and
 * small networks at T = 70 whose backward starts at them, against the CPU's. Last, the
 * MSE-on-rate loss op against the CPU's. (The 16-bit storage types, the compact forward and the masked backward of
 * every model are checked with the LIF's, in test_gpu_precision.)
 * Bounds: spikes and v_out exact (the same float operations; the PLIF's k = sigmoid(w) takes the device's expf,
 * which the inputs keep away from a flip); dx, dv_out, dw < 1e-5 relative for the plain op; BN sums, dx, dw < 1e-4
 * (float sums in another order); full == recompute bitwise on the device. */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_layers.h"
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

static void neuron_of(sf_lif_params *p, sf_neuron_model model, int sur, int flags)
{
    sf_lif_default_params(p);
    p->model = model;
    p->surrogate = (sf_surrogate)sur;
    p->alpha = sf_surrogate_default_alpha(p->surrogate);
    p->soft_reset = flags & 1;
    p->detach_reset = (flags >> 1) & 1;
    p->decay_input = model == SF_NEURON_IF || !((flags >> 2) & 1);
    p->use_grad_threshold = (flags >> 3) & 1;
    p->grad_threshold = 0.3f;
    p->rho = 0.9f;
    p->beta = 0.7f;
}

/* Past 32 steps, the backward from the forward's checkpoints (sf_lif_state.v_ckpt) gives the bits of the one that
 * finds its segment starts itself (gdx, gdv, gdw: the device's, host copies): the plain op, state carried in. */
static void check_ckpt_plain(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                             const float *ds, sf_lif_state st, const float *gdx, const float *gdv, const float *gdw,
                             int32_t wc, const char *what)
{
    const int64_t n = T * N, S = p->model == SF_NEURON_ALIF ? 2 : 1;
    float *s = dev_from(gdx, n), *dx = dev_from(gdx, n), *ck = dev_from(gdx, sf_lif_ckpt_floats(p, T, N));
    float *dv = dev_from(gdv, S * N), *dw = dev_from(gdv, wc ? wc : 1);
    dev_zero(dx, 4 * n);
    st.v_ckpt = ck;
    st.v_out = NULL;
    st.dv_out = dv;
    st.dw = wc ? dw : NULL;
    sf_lif_out o = {.s = s};
    CHECK_OK(be->lif_forward(be, p, T, N, x, &o, &st));
    CHECK_OK(be->lif_backward(be, p, T, N, x, NULL, ds, dx, &st));
    CHECK_OK(be->sync(be));
    float *cdx = host_from(dx, n), *cdv = host_from(dv, S * N), *cdw = host_from(dw, wc ? wc : 1);
    CHECK(memcmp(cdx, gdx, 4 * n) == 0 && memcmp(cdv, gdv, 4 * S * N) == 0 && (!wc || memcmp(cdw, gdw, 4 * wc) == 0),
          "%s: the backward from the forward's checkpoints differs (dx %d, dv_out %d, dw %d)", what,
          memcmp(cdx, gdx, 4 * n) != 0, memcmp(cdv, gdv, 4 * S * N) != 0, wc && memcmp(cdw, gdw, 4 * wc) != 0);
    cudaFree(s), cudaFree(dx), cudaFree(ck), cudaFree(dv), cudaFree(dw);
    free(cdx), free(cdv), free(cdw);
}

/* One plain neuron op case: [T, B, C, hw] neurons (C channels for a PLIF's w per channel), the state carried in
 * and out, on the CPU and on the device. */
static void test_plain(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw,
                       int keep_h, const char *what)
{
    const int64_t N = B * C * hw, n = T * N, S = p->model == SF_NEURON_ALIF ? 2 : 1;
    const int32_t wc = p->model == SF_NEURON_PLIF ? (p->per_channel ? C : 1) : 0;
    float *x = randn(n, p->decay_input ? 0.7f : 0.35f, p->decay_input ? 1.0f : 0.6f, 3 + T + N);
    float *ds = randn(n, 0.0f, 1.0f, 4 + T), *vin = randn(S * N, 0.2f, 0.2f, 5), *dvin = randn(S * N, 0.0f, 0.5f, 6);
    float *w = randn(wc ? wc : 1, 0.0f, 0.5f, 7), dw[64] = {0}, gdw[64] = {0};
    for (int64_t i = N; i < S * N; i++) vin[i] = fabsf(vin[i]); /* b >= 0 */
    float *s = calloc(n, 4), *h = calloc(n, 4), *dx = calloc(n, 4), *vout = calloc(S * N, 4);
    float *dvout = calloc(S * N, 4);
    sf_lif_out o = {.s = s, .h = h};
    sf_lif_state st = {.v_in = vin, .v_out = vout, .dv_in = dvin, .dv_out = dvout, .w = w, .dw = dw,
                       .w_channels = wc > 1 ? wc : 1, .w_hw = hw};
    CHECK_OK(sf_cpu_lif_forward(p, T, N, x, &o, &st));
    CHECK_OK(sf_cpu_lif_backward(p, T, N, x, keep_h ? h : NULL, ds, dx, &st));

    float *dx_ = dev_from(x, n), *dds = dev_from(ds, n), *dvin_ = dev_from(vin, S * N), *ddvin = dev_from(dvin, S * N);
    float *ds_ = dev_from(s, n), *dh = dev_from(h, n), *ddx = dev_from(dx, n), *dvout_ = dev_from(vout, S * N);
    float *ddvout = dev_from(dvout, S * N), *dw_ = dev_from(w, wc ? wc : 1), *ddw = dev_from(dw, wc ? wc : 1);
    float *ddx_full = dev_from(dx, n);
    dev_zero(ds_, 4 * n);
    dev_zero(dvout_, 4 * S * N);
    dev_zero(ddvout, 4 * S * N);
    sf_lif_out go = {.s = ds_, .h = dh};
    sf_lif_state gst = {.v_in = dvin_, .v_out = dvout_, .dv_in = ddvin, .dv_out = ddvout, .w = dw_, .dw = ddw,
                        .w_channels = wc > 1 ? wc : 1, .w_hw = hw};
    CHECK_OK(be->lif_forward(be, p, T, N, dx_, &go, &gst));
    CHECK_OK(be->lif_backward(be, p, T, N, dx_, keep_h ? dh : NULL, dds, ddx, &gst));
    CHECK_OK(be->lif_backward(be, p, T, N, dx_, dh, dds, ddx_full, &gst)); /* full mode: must equal */
    CHECK_OK(be->sync(be));
    float *gs = host_from(ds_, n), *gdx = host_from(ddx, n), *gv = host_from(dvout_, S * N);
    float *gdv = host_from(ddvout, S * N), *gfull = host_from(ddx_full, n);
    if (wc) CU(cudaMemcpy(gdw, ddw, 4 * (size_t)wc, cudaMemcpyDeviceToHost));
    CHECK(memcmp(gs, s, 4 * n) == 0, "%s: spikes differ from the CPU", what);
    CHECK(tu_rel_err_f32(gv, vout, S * N) < 1e-6, "%s: state out differs from the CPU (%g)", what,
          tu_rel_err_f32(gv, vout, S * N));
    CHECK(tu_rel_err_f32(gdx, dx, n) < 1e-5 && tu_rel_err_f32(gdv, dvout, S * N) < 1e-5, "%s: dx %g, dv_out %g",
          what, tu_rel_err_f32(gdx, dx, n), tu_rel_err_f32(gdv, dvout, S * N));
    CHECK(memcmp(gdx, gfull, 4 * n) == 0, "%s: the backward from the saved h differs from the recompute", what);
    if (wc) CHECK(tu_rel_err_f32(gdw, dw, wc) < 1e-5, "%s: dw %g", what, tu_rel_err_f32(gdw, dw, wc));
    if (T > SF_LIF_CKPT_STEPS) check_ckpt_plain(be, p, T, N, dx_, dds, gst, gdx, gdv, gdw, wc, what);
    float *devs[] = {dx_, dds, dvin_, ddvin, ds_, dh, ddx, dvout_, ddvout, dw_, ddw, ddx_full};
    for (size_t i = 0; i < sizeof devs / sizeof *devs; i++) cudaFree(devs[i]);
    void *hs[] = {x, ds, vin, dvin, w, s, h, dx, vout, dvout, gs, gdx, gv, gdv, gfull};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) free(hs[i]);
}

/* The same for the fused BN→neuron op (recompute): dx, dγ, dβ and dw bitwise. */
static void check_ckpt_bn(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh, const float *x,
                          const float *const stats[4], const float *ds, sf_lif_state st, const float *gdx,
                          const float *gg, const float *gb, const float *gdw, int32_t wc, const char *what)
{
    const int64_t N = sh.rows / T * sh.c * sh.hw, n = T * N, C = sh.c;
    float *s = dev_from(gdx, n), *dx = dev_from(gdx, n), *ck = dev_from(gdx, sf_lif_ckpt_floats(p, T, N));
    float *dg = dev_from(gg, C), *db = dev_from(gb, C), *dw = dev_from(gg, wc ? wc : 1);
    st.v_ckpt = ck;
    st.dw = wc ? dw : NULL;
    sf_lif_out o = {.s = s};
    CHECK_OK(be->bn_lif_forward(be, p, T, sh, x, stats[0], stats[1], 1e-5f, stats[2], stats[3], &o, &st));
    CHECK_OK(be->bn_lif_backward(be, p, T, sh, x, NULL, stats[0], stats[1], 1e-5f, stats[2], stats[3], ds, dx, dg, db,
                                 &st, NULL, NULL));
    CHECK_OK(be->sync(be));
    float *cdx = host_from(dx, n), *cg = host_from(dg, C), *cb = host_from(db, C), *cdw = host_from(dw, wc ? wc : 1);
    CHECK(memcmp(cdx, gdx, 4 * n) == 0 && memcmp(cg, gg, 4 * C) == 0 && memcmp(cb, gb, 4 * C) == 0 &&
              (!wc || memcmp(cdw, gdw, 4 * wc) == 0),
          "%s: BN: the backward from the forward's checkpoints differs", what);
    cudaFree(s), cudaFree(dx), cudaFree(ck), cudaFree(dg), cudaFree(db), cudaFree(dw);
    free(cdx), free(cg), free(cb), free(cdw);
}

/* One fused BN→neuron case on [T, B, C, hw], batch statistics, both memory modes. */
static void test_bn(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, int keep_h,
                    const char *what)
{
    const int64_t N = B * C * hw, n = T * N;
    const int32_t wc = p->model == SF_NEURON_PLIF ? (p->per_channel ? C : 1) : 0;
    sf_bn_shape sh = {.rows = T * B, .c = C, .hw = hw};
    float *x = randn(n, 0.3f, 1.5f, 31 + T), *ds = randn(n, 0.0f, 1.0f, 32), *g = randn(C, 1.0f, 0.2f, 33);
    float *b = randn(C, 0.8f, 0.3f, 34), *w = randn(wc ? wc : 1, 0.0f, 0.5f, 35);
    float mean[64], var[64], pg[64], pb[64], dw[64] = {0}, gg[64], gb[64], gdw[64] = {0};
    CHECK_OK(sf_cpu_op_bn_stats(NULL, sh, x, mean, var));
    float *s = calloc(n, 4), *h = calloc(n, 4), *dx = calloc(n, 4);
    sf_lif_out o = {.s = s, .h = h};
    sf_lif_state st = {.w = w, .dw = dw, .w_channels = wc > 1 ? wc : 1, .w_hw = hw};
    const sf_lif_state *use = wc ? &st : NULL;
    CHECK_OK(sf_cpu_op_bn_lif_forward(NULL, p, T, sh, x, mean, var, 1e-5f, g, b, &o, use));
    CHECK_OK(sf_cpu_op_bn_lif_backward(NULL, p, T, sh, x, keep_h ? h : NULL, mean, var, 1e-5f, g, b, ds, dx, pg, pb,
                                       use, NULL, NULL));
    float *dx_ = dev_from(x, n), *dds = dev_from(ds, n), *dg_ = dev_from(g, C), *db_ = dev_from(b, C);
    float *dmean = dev_from(mean, C), *dvar = dev_from(var, C), *ds_ = dev_from(s, n), *dh = dev_from(h, n);
    float *ddx = dev_from(dx, n), *dpg = dev_from(pg, C), *dpb = dev_from(pb, C), *dw_ = dev_from(w, wc ? wc : 1);
    float *ddw = dev_from(dw, wc ? wc : 1);
    dev_zero(ds_, 4 * n);
    sf_lif_out go = {.s = ds_, .h = dh};
    sf_lif_state gst = {.w = dw_, .dw = ddw, .w_channels = wc > 1 ? wc : 1, .w_hw = hw};
    const sf_lif_state *guse = wc ? &gst : NULL;
    CHECK_OK(be->bn_lif_forward(be, p, T, sh, dx_, dmean, dvar, 1e-5f, dg_, db_, &go, guse));
    void *sums = NULL; /* the per-neuron sums in a buffer of the caller's, as a net's plan holds them */
    CHECK_OK(be->alloc(be, be->bn_lif_scratch(be, p, T, sh), &sums));
    CHECK_OK(be->bn_lif_backward(be, p, T, sh, dx_, keep_h ? dh : NULL, dmean, dvar, 1e-5f, dg_, db_, dds, ddx, dpg,
                                 dpb, guse, NULL, sums));
    CHECK_OK(be->sync(be));
    float *gs = host_from(ds_, n), *gdx = host_from(ddx, n);
    CU(cudaMemcpy(gg, dpg, 4 * (size_t)C, cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(gb, dpb, 4 * (size_t)C, cudaMemcpyDeviceToHost));
    if (wc) CU(cudaMemcpy(gdw, ddw, 4 * (size_t)wc, cudaMemcpyDeviceToHost));
    CHECK(memcmp(gs, s, 4 * n) == 0, "%s: spikes differ from the CPU", what);
    CHECK(tu_rel_err_f32(gdx, dx, n) < 1e-4 && tu_rel_err_f32(gg, pg, C) < 1e-4 && tu_rel_err_f32(gb, pb, C) < 1e-4,
          "%s: dx %g, dgamma %g, dbeta %g", what, tu_rel_err_f32(gdx, dx, n), tu_rel_err_f32(gg, pg, C),
          tu_rel_err_f32(gb, pb, C));
    if (wc) CHECK(tu_rel_err_f32(gdw, dw, wc) < 1e-4, "%s: dw %g", what, tu_rel_err_f32(gdw, dw, wc));
    if (T > SF_LIF_CKPT_STEPS && !keep_h) {
        const float *stats[4] = {dmean, dvar, dg_, db_};
        check_ckpt_bn(be, p, T, sh, dx_, stats, dds, gst, gdx, gg, gb, gdw, wc, what);
    }
    float *devs[] = {dx_, dds, dg_, db_, dmean, dvar, ds_, dh, ddx, dpg, dpb, dw_, ddw};
    for (size_t i = 0; i < sizeof devs / sizeof *devs; i++) cudaFree(devs[i]);
    be->release(be, sums);
    void *hs[] = {x, ds, g, b, w, s, h, dx, gs, gdx};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) free(hs[i]);
}

static void model_grid(sf_backend *be)
{
    static const struct {
        sf_neuron_model model;
        int per_channel;
        const char *name;
    } models[] = {{SF_NEURON_PLIF, 0, "plif"}, {SF_NEURON_PLIF, 1, "plif/channel"}, {SF_NEURON_IF, 0, "if"},
                  {SF_NEURON_ALIF, 0, "alif"}};
    /* T, B, C, hw: T = 1, odd sizes, a long T (segmented recompute) */
    static const int64_t sizes[][4] = {{1, 3, 5, 7}, {7, 2, 3, 37}, {9, 1, 4, 1}, {200, 2, 3, 17}};
    int k = 0;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++)
        for (int sur = 0; sur < 4; sur++)
            for (int flags = 0; flags < 16; flags += 3) {
                sf_lif_params p;
                neuron_of(&p, models[m].model, sur, flags);
                p.per_channel = models[m].per_channel;
                const int64_t *z = sizes[k++ % 4];
                char what[160];
                snprintf(what, sizeof what, "%s %s flags %d T=%lld B=%lld C=%lld hw=%lld", models[m].name,
                         sf_surrogate_name(p.surrogate), flags, (long long)z[0], (long long)z[1], (long long)z[2],
                         (long long)z[3]);
                test_plain(be, &p, z[0], z[1], (int32_t)z[2], z[3], flags & 1, what);
                test_bn(be, &p, z[0], z[1], (int32_t)z[2], z[3], (flags >> 1) & 1, what);
            }
}

/* 37 inputs → linear 64 → neuron → linear 48 → neuron → linear 5 at T = 70, B = 3, recompute, every model: on the GPU
 * each neuron layer's backward starts its segments at the forward's checkpoints (the plan keeps 1/32 of h for them:
 * 2·3·(64 + 48) floats per state value), on the CPU it recomputes whole sequences; the loss and the gradients agree. */
static sf_net *long_net(sf_device dev, sf_neuron_model model)
{
    sf_net_params np;
    sf_net_default_params(&np);
    np.device = dev;
    np.memory = SF_MEMORY_RECOMPUTE;
    np.in_channels = 37;
    sf_net *net = NULL;
    CHECK_OK(sf_net_create(&np, &net));
    if (!net) return NULL;
    const int32_t sizes[] = {64, 0, 48, 0, 5};
    for (int l = 0; l < 5; l++) {
        sf_layer_desc d;
        sf_layer_default_desc(l % 2 ? SF_LAYER_LIF : SF_LAYER_LINEAR, &d);
        d.out_features = sizes[l];
        d.lif.model = model;
        d.lif.rho = 0.9f;
        d.lif.beta = 0.7f;
        CHECK_OK(sf_net_add(net, &d, NULL));
    }
    CHECK_OK(sf_net_compile(net, 70, 3));
    return net;
}

static void test_long_nets(void)
{
    static float x[70 * 3 * 37];
    tu_randn(x, 70 * 3 * 37, 0.4f, 1.0f, 51);
    int32_t labels[3] = {0, 3, 1};
    const sf_neuron_model models[] = {SF_NEURON_LIF, SF_NEURON_PLIF, SF_NEURON_IF, SF_NEURON_ALIF};
    for (int m = 0; m < 4; m++) {
        sf_net *nets[2] = {long_net((sf_device){SF_DEVICE_CPU, 0}, models[m]),
                           long_net((sf_device){SF_DEVICE_CUDA, 0}, models[m])};
        if (!nets[0] || !nets[1]) return;
        sf_step_result r[2];
        float *grads[2];
        int64_t n[2];
        sf_memory_plan plan[2];
        for (int i = 0; i < 2; i++) {
            CHECK_OK(sf_net_forward(nets[i], x, 1));
            CHECK_OK(sf_net_loss(nets[i], labels, &r[i]));
            CHECK_OK(sf_net_backward(nets[i]));
            grads[i] = tu_net_read_role(nets[i], SF_ROLE_GRAD, &n[i]);
            CHECK_OK(sf_net_memory_plan(nets[i], &plan[i]));
        }
        const char *name = sf_neuron_model_name(models[m]);
        const size_t ckpt = 4 * (size_t)(2 * 3 * (64 + 48) * (models[m] == SF_NEURON_ALIF ? 2 : 1));
        CHECK(plan[1].saved >= plan[0].saved + ckpt && plan[1].saved < plan[0].saved + ckpt + 2 * 256,
              "%s net at T = 70: the GPU plan keeps %zu bytes, the CPU's %zu + %zu of checkpoints (two slots aligned "
              "to 256 bytes) expected", name, plan[1].saved, plan[0].saved, ckpt);
        const double le = fabs((double)r[1].loss - r[0].loss) / fabs((double)r[0].loss);
        const double ge = n[0] == n[1] ? tu_rel_err_f32(grads[1], grads[0], n[0]) : INFINITY;
        CHECK(le < 1e-5 && ge < 1e-5, "%s net at T = 70 from checkpoints: loss %.7g vs the CPU's %.7g (rel %.2e), "
              "gradients rel %.2e", name, r[1].loss, r[0].loss, le, ge);
        for (int i = 0; i < 2; i++) free(grads[i]), sf_net_free(nets[i]);
    }
}

/* The MSE on the firing rate, on the device and on the CPU. */
static void test_mse_rate(sf_backend *be)
{
    const int64_t T = 4, B = 33, K = 10, n = T * B * K;
    float *r = randn(n, 0.3f, 0.4f, 41), dr[4 * 33 * 10], mean[33 * 10], stats[2];
    int32_t labels[33];
    for (int b = 0; b < B; b++) labels[b] = (b * 7) % K;
    CHECK_OK(sf_cpu_op_mse_rate(NULL, T, B, (int32_t)K, r, labels, dr, mean, stats));
    float *dr_ = dev_from(r, n), *ddr = dev_from(r, n), *dmean = dev_from(mean, B * K), *dstats = dev_from(stats, 2);
    int32_t *dlab = NULL;
    CU(cudaMalloc((void **)&dlab, sizeof labels));
    CU(cudaMemcpy(dlab, labels, sizeof labels, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize()); /* the backend's stream does not wait for these (gpu_copies.h) */
    CHECK_OK(be->mse_rate(be, T, B, (int32_t)K, dr_, dlab, ddr, dmean, dstats));
    CHECK_OK(be->sync(be));
    float *gdr = host_from(ddr, n), *gmean = host_from(dmean, B * K), *gstats = host_from(dstats, 2);
    CHECK(fabsf(gstats[0] - stats[0]) <= 1e-6f * fmaxf(1.0f, stats[0]) && gstats[1] == stats[1],
          "mse_rate: loss %g / %g correct on the device, %g / %g on the CPU", gstats[0], gstats[1], stats[0],
          stats[1]);
    CHECK(tu_rel_err_f32(gdr, dr, n) < 1e-6 && tu_rel_err_f32(gmean, mean, B * K) < 1e-6, "mse_rate: dr %g, mean %g",
          tu_rel_err_f32(gdr, dr, n), tu_rel_err_f32(gmean, mean, B * K));
    cudaFree(dr_), cudaFree(ddr), cudaFree(dmean), cudaFree(dstats), cudaFree(dlab);
    free(r), free(gdr), free(gmean), free(gstats);
}

int main(void)
{
    if (sf_cuda_device_count() < 1) {
        fprintf(stderr, "test_gpu_neurons: no CUDA device\n");
        return 1;
    }
    sf_backend *be = NULL;
    CHECK_OK(sf_cuda_backend_create(0, SF_PRECISION_FP32, NULL, &be));
    if (!be) return tu_finish("test_gpu_neurons");
    model_grid(be);
    test_long_nets();
    test_mse_rate(be);
    sf_backend_free(be);
    return tu_finish("test_gpu_neurons");
}
