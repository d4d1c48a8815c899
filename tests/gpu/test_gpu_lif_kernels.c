/* test_gpu_lif_kernels.c — the CUDA neuron kernels against a serial host reference built from the same
 * core/lif_math.h: LIF forward/backward for every option combination (4 surrogates × hard/soft reset × detach_reset
 * × decay_input × θ_grad, plus v_reset ≠ 0 and an explicit decay) on awkward sizes (T=1, N=1, odd N, T long enough
 * for the segmented recompute), the full mode (h kept) against the recompute mode, and fused BN→LIF forward and
 * backward with batch statistics against a double-precision host reference; every LIF case and forced configuration
 * again in two pieces with the state carried across (sf_lif_state), which must give the same bits, and from the
 * forward's checkpoints of v (past 32 steps), which must hold the host's v and give the same bits.
 * Bounds: spikes exact (both sides round the same float operations); LIF dx relative error < 1e-5 (only expf
 * differs by an ulp); BN+LIF dx, dγ, dβ < 1e-4 (float sums in a different order); full == recompute bitwise. */
#include "cuda/cuda_backend.h"
#include "core/lif_math.h"
#include "gpu_copies.h"
#include "testutil.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *dev_poison(size_t n)
{
    float *d = NULL;
    CU(cudaMalloc((void **)&d, 4 * (n ? n : 1)));
    CU(cudaMemset(d, 0xff, 4 * (n ? n : 1))); /* NaN: an unwritten element fails the comparison */
    CU(cudaDeviceSynchronize());                /* before the backend's non-blocking stream writes it (gpu_copies.h) */
    return d;
}

static double *to_f64(const float *x, size_t n)
{
    double *d = malloc(8 * (n ? n : 1));
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* Host reference over [T, N] inputs y (already the neuron input): s, h and dy = ∂L/∂y. */
static void host_lif(const sf_lif_params *p, int64_t T, int64_t N, const float *y, const float *ds, float *s, float *h,
                     float *dy)
{
    sf_lif_coeffs k = sf_lif_coeffs_of(p);
    for (int64_t j = 0; j < N; j++) {
        float v = k.v0;
        for (int64_t t = 0; t < T; t++) s[t * N + j] = sf_lif_step(&k, p->soft_reset, y[t * N + j], &v, &h[t * N + j]);
        float dv = 0.0f;
        for (int64_t t = T - 1; t >= 0; t--)
            dy[t * N + j] = k.c * sf_lif_step_back(p, &k, h[t * N + j], ds[t * N + j], &dv);
    }
}

/* The sequence cut after T1 steps and run as two calls in the same configuration, the state carried (v_out -> v_in
 * forward; backward in reverse order, dv_out -> dv_in, the first piece's dv_out written over its dv_in), gives the one
 * call's spikes, h and dx (gs, gh, gdx: host copies) bitwise. */
static void check_pieces(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *ds,
                         const sf_cuda_lif_tuning *tune, const float *gs, const float *gh, const float *gdx,
                         const char *what)
{
    size_t n = (size_t)(T * N);
    const int64_t T1 = T / 3 + 1, off = T1 * N;
    float *s = dev_poison(n), *h = dev_poison(n), *dx = dev_poison(n), *v1 = dev_poison((size_t)N);
    float *dv = dev_poison((size_t)N);
    sf_lif_out o1 = {.s = s, .h = h}, o2 = {.s = s + off, .h = h + off};
    sf_lif_state st1 = {.v_out = v1}, st2 = {.v_in = v1, .dv_out = dv}, back1 = {.dv_in = dv, .dv_out = dv};
    CHECK_OK(sf_cuda_lif_forward_tuned(p, T1, N, SF_SCALAR_F32, x, &o1, &st1, tune, NULL));
    CHECK_OK(sf_cuda_lif_forward_tuned(p, T - T1, N, SF_SCALAR_F32, x + off, &o2, &st2, tune, NULL));
    CHECK_OK(
        sf_cuda_lif_backward_tuned(p, T - T1, N, SF_SCALAR_F32, x + off, NULL, ds + off, dx + off, &st2, tune, NULL));
    CHECK_OK(sf_cuda_lif_backward_tuned(p, T1, N, SF_SCALAR_F32, x, NULL, ds, dx, &back1, tune, NULL));
    CU(cudaDeviceSynchronize());
    float *ps = host_from(s, n), *ph = host_from(h, n), *pdx = host_from(dx, n);
    CHECK(memcmp(ps, gs, 4 * n) == 0 && memcmp(ph, gh, 4 * n) == 0 && memcmp(pdx, gdx, 4 * n) == 0,
          "%s: in pieces of %lld and %lld steps with the state carried, spikes %d h %d dx %d differ from one call",
          what, (long long)T1, (long long)(T - T1), memcmp(ps, gs, 4 * n) != 0, memcmp(ph, gh, 4 * n) != 0,
          memcmp(pdx, gdx, 4 * n) != 0);
    free(ps), free(ph), free(pdx);
    cudaFree(s), cudaFree(h), cudaFree(dx), cudaFree(v1), cudaFree(dv);
}

/* A forward that keeps checkpoints (sf_lif_state.v_ckpt) holds the host's v before each of their steps (h: the host's
 * potentials), and the backward that starts its segments there gives the recompute's dx (gdx) bitwise. */
static void check_ckpt(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *ds,
                       const sf_cuda_lif_tuning *tune, const float *h, const float *gdx, const char *what)
{
    const size_t n = (size_t)(T * N), nck = (size_t)sf_lif_ckpt_floats(p, T, N);
    float *s = dev_poison(n), *dx = dev_poison(n), *ck = dev_poison(nck);
    sf_lif_out o = {.s = s};
    sf_lif_state st = {.v_ckpt = ck};
    CHECK_OK(sf_cuda_lif_forward_tuned(p, T, N, SF_SCALAR_F32, x, &o, &st, tune, NULL));
    CHECK_OK(sf_cuda_lif_backward_tuned(p, T, N, SF_SCALAR_F32, x, NULL, ds, dx, &st, tune, NULL));
    CU(cudaDeviceSynchronize());
    float *gck = host_from(ck, nck), *cdx = host_from(dx, n);
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    int64_t bad = 0;
    for (int64_t j = 1; j * SF_LIF_CKPT_STEPS < T; j++) /* the state before step T − 32j: v after the step before */
        for (int64_t i = 0; i < N; i++)
            bad += gck[(j - 1) * N + i] != sf_lif_v_after(&k, p->soft_reset, h[(T - j * SF_LIF_CKPT_STEPS - 1) * N + i]);
    CHECK(bad == 0, "%s: %lld checkpoints differ from the host's v", what, (long long)bad);
    CHECK(memcmp(cdx, gdx, 4 * n) == 0, "%s: the backward from the forward's checkpoints differs from the recompute",
          what);
    free(gck), free(cdx);
    cudaFree(s), cudaFree(dx), cudaFree(ck);
}

static void test_lif_tuned(const sf_lif_params *p, int64_t T, int64_t N, uint64_t seed, const sf_cuda_lif_tuning *tune,
                           const char *what)
{
    size_t n = (size_t)(T * N);
    float *x = malloc(4 * n), *ds = malloc(4 * n), *s = malloc(4 * n), *h = malloc(4 * n), *dx = malloc(4 * n);
    tu_randn(x, (int64_t)n, p->decay_input ? 0.6f : 0.3f, p->decay_input ? 1.0f : 0.6f, seed);
    tu_randn(ds, (int64_t)n, 0.0f, 1.0f, seed + 1);
    host_lif(p, T, N, x, ds, s, h, dx);
    float *dx_ = dev_from(x, n), *dds = dev_from(ds, n), *ds_ = dev_poison(n), *dh = dev_poison(n);
    float *ddx = dev_poison(n), *ddx_full = dev_poison(n), *dcount = dev_from((float[]){0.0f}, 1);
    uint8_t *du8 = NULL;
    CU(cudaMalloc((void **)&du8, n ? n : 1));
    sf_lif_out out = {.s = ds_, .s_u8 = du8, .h = dh, .spike_count = dcount};
    CHECK_OK(sf_cuda_lif_forward_tuned(p, T, N, SF_SCALAR_F32, dx_, &out, NULL, tune, NULL));
    CHECK_OK(sf_cuda_lif_backward_tuned(p, T, N, SF_SCALAR_F32, dx_, NULL, dds, ddx, NULL, tune, NULL));
    CHECK_OK(sf_cuda_lif_backward(p, T, N, SF_SCALAR_F32, dx_, dh, dds, ddx_full, NULL, NULL));
    CU(cudaDeviceSynchronize());
    float *gs = host_from(ds_, n), *gh = host_from(dh, n), *gdx = host_from(ddx, n), *gfull = host_from(ddx_full, n);
    float *gcount = host_from(dcount, 1);
    uint8_t *gu8 = malloc(n ? n : 1);
    if (n) CU(cudaMemcpy(gu8, du8, n, cudaMemcpyDeviceToHost));
    double *rs = to_f64(s, n), *rdx = to_f64(dx, n), *rh = to_f64(h, n);
    int64_t diff = tu_count_diff(gs, rs, (int64_t)n), u8diff = 0;
    double count = 0;
    for (size_t i = 0; i < n; i++) {
        u8diff += gu8[i] != (uint8_t)s[i];
        count += s[i];
    }
    CHECK(diff == 0 && u8diff == 0, "%s: %lld float / %lld byte spikes differ", what, (long long)diff,
          (long long)u8diff);
    CHECK(gcount[0] == (float)count, "%s: spike_count %g, expected %g", what, gcount[0], count);
    double eh = tu_rel_err(gh, rh, (int64_t)n), edx = tu_rel_err(gdx, rdx, (int64_t)n);
    CHECK(eh == 0.0, "%s: h differs (rel %.2e)", what, eh);
    CHECK(edx < 1e-5, "%s: dx rel err %.2e", what, edx);
    CHECK(memcmp(gdx, gfull, 4 * n) == 0, "%s: backward from saved h differs from the recompute", what);
    if (T > 1) check_pieces(p, T, N, dx_, dds, tune, gs, gh, gdx, what);
    if (T > SF_LIF_CKPT_STEPS) check_ckpt(p, T, N, dx_, dds, tune, h, gdx, what);
    free(x), free(ds), free(s), free(h), free(dx), free(gs), free(gh), free(gdx), free(gfull), free(gcount);
    free(gu8), free(rs), free(rdx), free(rh);
    cudaFree(dx_), cudaFree(dds), cudaFree(ds_), cudaFree(dh), cudaFree(ddx), cudaFree(ddx_full), cudaFree(dcount);
    cudaFree(du8);
}

static void test_lif(const sf_lif_params *p, int64_t T, int64_t N, uint64_t seed, const char *what)
{
    test_lif_tuned(p, T, N, seed, NULL, what);
}

/* Every launch configuration a benchmark may force gives the same spikes and dx as the host, on sizes where segments
 * and batches do not divide T and N is no multiple of 4 (T = 300: a 76-step first segment at the automatic 224). */
static void lif_tunings(void)
{
    const sf_cuda_lif_tuning tunes[] = {{0, 0, 0, 0, 0},   {1, 32, 0, 0, 0},  {1, 8, 0, 0, 0},  {4, 8, 32, 8, 0},
                                        {0, 0, 32, 32, 0}, {0, 0, 96, 32, 0}, {0, 0, -1, 8, 0}, {0, 0, 40, 4, 0}};
    const int64_t sizes[][2] = {{300, 97}, {1024, 64}, {257, 1028}, {65, 3}};
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.detach_reset = 1;
    for (int i = 0; i < (int)(sizeof tunes / sizeof tunes[0]); i++)
        for (int j = 0; j < 4; j++) {
            char what[160];
            const sf_cuda_lif_tuning *t = &tunes[i];
            snprintf(what, sizeof what, "LIF T=%lld N=%lld tuning fwd %d/%d bwd seg %d ahead %d",
                     (long long)sizes[j][0], (long long)sizes[j][1], t->fwd_vec, t->fwd_ahead, t->bwd_seg,
                     t->bwd_ahead);
            test_lif_tuned(&p, sizes[j][0], sizes[j][1], 300 + (uint64_t)(4 * i + j), t, what);
        }
    /* four neurons per backward thread, forced, on short sequences (one segment; 4 ahead below T = 8), N no multiple
     * of 4 falling back */
    const sf_cuda_lif_tuning vec4[] = {{0, 0, 0, 8, 4}, {4, 8, 0, 0, 4}, {1, 8, 0, 8, 1}, {0, 0, 0, 4, 4}};
    const int64_t short_sizes[][2] = {{10, 1028}, {8, 4096}, {33, 260}, {64, 4100}, {12, 97}, {4, 1028}, {3, 260},
                                      {5, 4100}, {1, 8}};
    for (int i = 0; i < (int)(sizeof vec4 / sizeof vec4[0]); i++)
        for (int j = 0; j < (int)(sizeof short_sizes / sizeof short_sizes[0]); j++) {
            char what[160];
            snprintf(what, sizeof what, "LIF T=%lld N=%lld backward %d neurons per thread",
                     (long long)short_sizes[j][0], (long long)short_sizes[j][1], vec4[i].bwd_vec);
            test_lif_tuned(&p, short_sizes[j][0], short_sizes[j][1], 400 + (uint64_t)(8 * i + j), &vec4[i], what);
        }
    /* what cannot run is refused, not run wrongly */
    const sf_cuda_lif_tuning bad[] = {
        {3, 8, 0, 0, 0}, {4, 32, 0, 0, 0}, {0, 0, 0, 16, 0}, {0, 0, 100000, 8, 0}, {0, 0, 0, 8, 3}};
    float *d = dev_poison(64 * 300);
    sf_lif_out out = {.s = d};
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        sf_status s = i < 2 ? sf_cuda_lif_forward_tuned(&p, 300, 64, SF_SCALAR_F32, d, &out, NULL, &bad[i], NULL)
                            : sf_cuda_lif_backward_tuned(&p, 300, 64, SF_SCALAR_F32, d, NULL, d, d, NULL, &bad[i], NULL);
        CHECK(s == SF_ERR_INVALID, "tuning %d accepted: %s", i, sf_status_str(s));
    }
    cudaFree(d);
}

static void lif_option_grid(void)
{
    const int64_t sizes[][2] = {{1, 1}, {7, 333}, {64, 1025}, {1, 4097}};
    int cases = 0;
    for (int sg = 0; sg < 4; sg++)
        for (int bits = 0; bits < 16; bits++) {
            sf_lif_params p;
            sf_lif_default_params(&p);
            p.surrogate = (sf_surrogate)sg;
            p.alpha = sf_surrogate_default_alpha(p.surrogate);
            p.soft_reset = bits & 1;
            p.detach_reset = (bits >> 1) & 1;
            p.decay_input = (bits >> 2) & 1;
            p.use_grad_threshold = (bits >> 3) & 1;
            p.grad_threshold = 0.4f;
            p.tau = 1.5f + (float)(bits % 5);
            if (sg == 1 && bits == 5) p.v_reset = -0.3f;
            if (sg == 2 && bits == 6) p.decay = 0.8f;
            const int64_t *sz = sizes[cases++ % 4];
            char what[128];
            snprintf(what, sizeof what, "LIF %s soft=%d detach=%d decay_input=%d grad_thr=%d T=%lld N=%lld",
                     sf_surrogate_name(p.surrogate), p.soft_reset, p.detach_reset, p.decay_input, p.use_grad_threshold,
                     (long long)sz[0], (long long)sz[1]);
            test_lif(&p, sz[0], sz[1], 1000 + (uint64_t)cases, what);
        }
    /* long T: the backward recomputes h in checkpointed segments of shared memory */
    sf_lif_params p;
    sf_lif_default_params(&p);
    test_lif(&p, 2500, 97, 7, "LIF T=2500 (segmented recompute)");
    p.soft_reset = 1;
    p.surrogate = SF_SURROGATE_ATAN;
    test_lif(&p, 4000, 33, 8, "LIF T=4000 soft atan (segmented recompute)");
    test_lif(&p, 300, 100003, 9, "LIF T=300 N=100003");
}

/* Fused BN→LIF with batch statistics against a host reference (BN in float in the kernel's order, sums in double). */
static void test_bn_lif(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, int keep_h,
                        uint64_t seed)
{
    int64_t N = B * C * hw;
    size_t n = (size_t)(T * N);
    double cnt = (double)(T * B * hw);
    float *x = malloc(4 * n), *ds = malloc(4 * n), *y = malloc(4 * n), *s = malloc(4 * n), *h = malloc(4 * n);
    float *dy = malloc(4 * n), *gamma = malloc(4 * (size_t)C), *beta = malloc(4 * (size_t)C);
    float *mean = malloc(4 * (size_t)C), *var = malloc(4 * (size_t)C), eps = 1e-5f;
    tu_randn(x, (int64_t)n, 0.5f, 1.5f, seed);
    tu_randn(ds, (int64_t)n, 0.0f, 1.0f, seed + 1);
    tu_randn(gamma, C, 1.0f, 0.3f, seed + 2);
    tu_randn(beta, C, 0.2f, 0.3f, seed + 3);
    for (int32_t c = 0; c < C; c++) {
        double s1 = 0, s2 = 0;
        for (int64_t r = 0; r < T * B; r++)
            for (int64_t j = 0; j < hw; j++) s1 += x[(r * C + c) * hw + j];
        double m = s1 / cnt;
        for (int64_t r = 0; r < T * B; r++)
            for (int64_t j = 0; j < hw; j++) s2 += (x[(r * C + c) * hw + j] - m) * (x[(r * C + c) * hw + j] - m);
        mean[c] = (float)m;
        var[c] = (float)(s2 / cnt);
    }
    for (size_t i = 0; i < n; i++) {
        int32_t c = (int32_t)((i / (size_t)hw) % (size_t)C);
        float invstd = 1.0f / sqrtf(var[c] + eps);
        y[i] = (x[i] - mean[c]) * invstd * gamma[c] + beta[c];
    }
    host_lif(p, T, N, y, ds, s, h, dy);
    double *rdg = calloc((size_t)C, 8), *rdb = calloc((size_t)C, 8), *rdx = malloc(8 * n);
    for (size_t i = 0; i < n; i++) {
        int32_t c = (int32_t)((i / (size_t)hw) % (size_t)C);
        double invstd = 1.0 / sqrt((double)var[c] + eps);
        rdb[c] += dy[i];
        rdg[c] += dy[i] * (x[i] - mean[c]) * invstd;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t c = (int32_t)((i / (size_t)hw) % (size_t)C);
        double invstd = 1.0 / sqrt((double)var[c] + eps), xhat = (x[i] - mean[c]) * invstd;
        rdx[i] = gamma[c] * invstd * (dy[i] - rdb[c] / cnt - xhat * rdg[c] / cnt);
    }
    sf_bn_shape sh = {T * B, C, hw};
    float *dx_ = dev_from(x, n), *dds = dev_from(ds, n), *dg = dev_from(gamma, (size_t)C),
          *db = dev_from(beta, (size_t)C);
    float *dmean = dev_poison((size_t)C), *dvar = dev_poison((size_t)C), *ds_ = dev_poison(n);
    float *dh = keep_h ? dev_poison(n) : NULL, *ddx = dev_poison(n), *ddg = dev_poison((size_t)C);
    float *ddb = dev_poison((size_t)C);
    CHECK_OK(be->bn_stats(be, sh, dx_, dmean, dvar));
    float *gm = NULL, *gv = NULL;
    CHECK_OK(be->sync(be));
    gm = host_from(dmean, (size_t)C);
    gv = host_from(dvar, (size_t)C);
    double *rm = to_f64(mean, (size_t)C), *rv = to_f64(var, (size_t)C);
    char what[160];
    snprintf(what, sizeof what, "BN+LIF T=%lld B=%lld C=%d hw=%lld %s h=%s", (long long)T, (long long)B, C,
             (long long)hw, sf_surrogate_name(p->surrogate), keep_h ? "kept" : "recomputed");
    CHECK(tu_rel_err(gm, rm, C) < 1e-5 && tu_rel_err(gv, rv, C) < 1e-5, "%s: bn_stats mean %.2e var %.2e", what,
          tu_rel_err(gm, rm, C), tu_rel_err(gv, rv, C));
    /* the kernels use the host statistics so that spikes can be compared exactly */
    CU(cudaMemcpy(dmean, mean, 4 * (size_t)C, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dvar, var, 4 * (size_t)C, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize()); /* the backend's stream does not wait for these (gpu_copies.h) */
    sf_lif_out out = {.s = ds_, .h = dh};
    CHECK_OK(be->bn_lif_forward(be, p, T, sh, dx_, dmean, dvar, eps, dg, db, &out, NULL));
    CHECK_OK(
        be->bn_lif_backward(be, p, T, sh, dx_, dh, dmean, dvar, eps, dg, db, dds, ddx, ddg, ddb, NULL, NULL, NULL));
    CHECK_OK(be->sync(be));
    float *gs = host_from(ds_, n), *gdx = host_from(ddx, n), *gdg = host_from(ddg, (size_t)C);
    float *gdb = host_from(ddb, (size_t)C);
    double *rs = to_f64(s, n);
    int64_t diff = tu_count_diff(gs, rs, (int64_t)n);
    CHECK(diff == 0, "%s: %lld spikes differ", what, (long long)diff);
    double e1 = tu_rel_err(gdx, rdx, (int64_t)n), e2 = tu_rel_err(gdg, rdg, C), e3 = tu_rel_err(gdb, rdb, C);
    CHECK(e1 < 1e-4 && e2 < 1e-4 && e3 < 1e-4, "%s: rel err dx %.2e dgamma %.2e dbeta %.2e", what, e1, e2, e3);
    free(x), free(ds), free(y), free(s), free(h), free(dy), free(gamma), free(beta), free(mean), free(var);
    free(rdg), free(rdb), free(rdx), free(gm), free(gv), free(rm), free(rv), free(gs), free(gdx), free(gdg), free(gdb);
    free(rs);
    cudaFree(dx_), cudaFree(dds), cudaFree(dg), cudaFree(db), cudaFree(dmean), cudaFree(dvar), cudaFree(ds_);
    cudaFree(dh), cudaFree(ddx), cudaFree(ddg), cudaFree(ddb);
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "test_gpu_lif_kernels: no CUDA device\n");
        return 1;
    }
    lif_option_grid();
    lif_tunings();
    sf_backend *be;
    CHECK_OK(sf_cuda_backend_create(0, SF_PRECISION_FP32, NULL, &be));
    sf_lif_params p;
    sf_lif_default_params(&p);
    test_bn_lif(be, &p, 1, 1, 1, 1, 0, 50);
    test_bn_lif(be, &p, 3, 2, 5, 7, 0, 51);
    test_bn_lif(be, &p, 3, 2, 5, 7, 1, 52);
    p.surrogate = SF_SURROGATE_ATAN;
    p.alpha = 2.0f;
    p.soft_reset = 1;
    test_bn_lif(be, &p, 4, 3, 16, 64, 0, 53);
    test_bn_lif(be, &p, 10, 2, 33, 1, 1, 54);
    test_bn_lif(be, &p, 100, 2, 3, 20, 0, 55); /* past 32 steps: one long segment at 32 steps ahead */
    test_bn_lif(be, &p, 300, 1, 2, 33, 0, 56); /* segments that end at T, a short first one */
    /* NHWC tensors ([rows, C, 1]) and other hw % 4 != 0, with enough neurons for 4 per thread: the forward's 4
     * neurons span channels (and rows); pass 2 walks rows with 4 channels per thread (C / 4 = 3 groups: a grid
     * rounded to a multiple of 3) */
    test_bn_lif(be, &p, 3, 2400, 128, 1, 0, 57);
    test_bn_lif(be, &p, 2, 25600, 12, 1, 1, 58);
    test_bn_lif(be, &p, 2, 2400, 64, 2, 0, 59);
    /* the backward's four neurons per thread (one segment, enough neurons): an affine per neuron on NHWC
     * (hw = 1) and across a batch's rows (hw = 2), one shared where hw % 4 = 0 */
    test_bn_lif(be, &p, 10, 2200, 128, 1, 0, 60);
    test_bn_lif(be, &p, 8, 2200, 64, 2, 0, 61);
    test_bn_lif(be, &p, 12, 80, 16, 256, 0, 62);
    /* and on T < 8 (4 steps ahead): the SEW-ResNet's and Spikformer's T = 4 */
    test_bn_lif(be, &p, 4, 2200, 128, 1, 0, 63);
    test_bn_lif(be, &p, 3, 2200, 64, 2, 0, 64);
    test_bn_lif(be, &p, 4, 80, 16, 256, 0, 65);
    be->destroy(be);
    return tu_finish("test_gpu_lif_kernels");
}
