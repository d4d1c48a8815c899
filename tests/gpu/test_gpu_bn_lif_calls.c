/* test_gpu_bn_lif_calls.c — the public fused BN → LIF calls (sf_bn_lif_forward / sf_bn_lif_backward, which
 * spikefuse.torch.BNLIF runs) on a CUDA device against the same calls on the CPU: spikes exact, dx, dγ, dβ within
 * 1e-4 (float sums in another order), on awkward shapes, with and without state carried across calls (v_in, v_out,
 * dv_in, dv_out), on a non-default stream; the workspace check (too small or NULL: SF_ERR_INVALID); and the typed
 * calls in bfloat16 (LIF and BN+LIF) against the CPU's fp32 on inputs bf16 holds exactly: spikes exact, dx the fp32
 * value rounded to bf16 (within 2^-8 relative). */
#include "gpu_copies.h"
#include "testutil.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const sf_device CPU = {SF_DEVICE_CPU, 0}, GPU = {SF_DEVICE_CUDA, 0};

static double max_rel(const float *a, const float *b, size_t n)
{
    double m = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        m = d > m ? d : m;
        scale = fabs((double)b[i]) > scale ? fabs((double)b[i]) : scale;
    }
    return m / (scale > 1.0 ? scale : 1.0);
}

/* One forward and backward of x [T, B, C, hw] on both devices, the state given when `state` is set. */
static void compare(const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, int state, uint64_t seed)
{
    const size_t n = (size_t)(T * B * C * hw), N = (size_t)(B * C * hw);
    float *x = malloc(4 * n), *ds = malloc(4 * n), *s = malloc(4 * n), *dx = malloc(4 * n);
    float *stat = malloc(4 * 4 * (size_t)C), *v_in = malloc(4 * N), *dv_in = malloc(4 * N), *v_out = malloc(4 * N);
    float *dv_out = malloc(4 * N), dg[64], db[64];
    tu_randn(x, (int64_t)n, 0.4f, 1.5f, seed);
    tu_randn(ds, (int64_t)n, 0.0f, 1.0f, seed + 1);
    tu_randn(v_in, (int64_t)N, 0.2f, 0.4f, seed + 2);
    tu_randn(dv_in, (int64_t)N, 0.0f, 0.5f, seed + 3);
    float *mean = stat, *var = stat + C, *gamma = stat + 2 * C, *beta = stat + 3 * C;
    for (int32_t c = 0; c < C; c++) { /* the statistics as the caller computes them (here: of x, in double) */
        double m = 0.0, q = 0.0;
        int64_t cnt = 0;
        for (int64_t r = 0; r < T * B; r++)
            for (int64_t i = 0; i < hw; i++, cnt++) m += x[(r * C + c) * hw + i];
        m /= (double)cnt;
        for (int64_t r = 0; r < T * B; r++)
            for (int64_t i = 0; i < hw; i++) q += pow(x[(r * C + c) * hw + i] - m, 2);
        mean[c] = (float)m;
        var[c] = (float)(q / (double)cnt);
        gamma[c] = 0.5f + 0.1f * (float)c;
        beta[c] = 0.05f * (float)(c % 3);
    }
    sf_lif_state st = {.v_in = v_in, .v_out = v_out, .dv_in = dv_in, .dv_out = dv_out};
    CHECK_OK(sf_bn_lif_forward(p, T, B, C, hw, SF_SCALAR_F32, x, mean, var, 1e-5f, gamma, beta, s, state ? &st : NULL, CPU, NULL));
    CHECK_OK(sf_bn_lif_backward(p, T, B, C, hw, SF_SCALAR_F32, x, mean, var, 1e-5f, gamma, beta, ds, dx, dg, db,
                                state ? &st : NULL, NULL, 0, CPU, NULL));

    float *d_x = dev_from(x, n), *d_ds = dev_from(ds, n), *d_s = dev_from(x, n), *d_dx = dev_from(x, n);
    float *d_stat = dev_from(stat, 4 * (size_t)C), *d_g = dev_from(gamma, (size_t)C), *d_b = dev_from(beta, (size_t)C);
    float *d_vin = dev_from(v_in, N), *d_dvin = dev_from(dv_in, N), *d_vout = dev_from(x, N), *d_dvout = dev_from(x, N);
    sf_lif_state d_st = {.v_in = d_vin, .v_out = d_vout, .dv_in = d_dvin, .dv_out = d_dvout};
    cudaStream_t stream;
    CU(cudaStreamCreate(&stream));
    size_t ws_bytes = sf_bn_lif_workspace_bytes(T, B, C, hw, GPU);
    CHECK(ws_bytes >= 8 * N, "workspace %zu bytes for N = %zu", ws_bytes, N);
    void *ws = NULL;
    CU(cudaMalloc(&ws, ws_bytes));
    CHECK_OK(sf_bn_lif_forward(p, T, B, C, hw, SF_SCALAR_F32, d_x, d_stat, d_stat + C, 1e-5f, d_stat + 2 * C, d_stat + 3 * C, d_s,
                               state ? &d_st : NULL, GPU, stream));
    CHECK_OK(sf_bn_lif_backward(p, T, B, C, hw, SF_SCALAR_F32, d_x, d_stat, d_stat + C, 1e-5f, d_stat + 2 * C, d_stat + 3 * C, d_ds,
                                d_dx, d_g, d_b, state ? &d_st : NULL, ws, ws_bytes, GPU, stream));
    CU(cudaStreamSynchronize(stream));
    float *gs = host_from(d_s, n), *gdx = host_from(d_dx, n), *gg = host_from(d_g, (size_t)C);
    float *gb = host_from(d_b, (size_t)C), *gv = host_from(d_vout, N), *gdv = host_from(d_dvout, N);
    size_t flips = 0;
    for (size_t i = 0; i < n; i++) flips += gs[i] != s[i];
    CHECK(flips == 0, "T=%lld B=%lld C=%d hw=%lld state=%d: %zu spikes differ", (long long)T, (long long)B, C,
          (long long)hw, state, flips);
    CHECK(max_rel(gdx, dx, n) < 1e-4, "dx error %g", max_rel(gdx, dx, n));
    CHECK(max_rel(gg, dg, (size_t)C) < 1e-4, "dgamma error %g", max_rel(gg, dg, (size_t)C));
    CHECK(max_rel(gb, db, (size_t)C) < 1e-4, "dbeta error %g", max_rel(gb, db, (size_t)C));
    if (state) {
        CHECK(max_rel(gv, v_out, N) < 1e-6, "v_out error %g", max_rel(gv, v_out, N));
        CHECK(max_rel(gdv, dv_out, N) < 1e-4, "dv_out error %g", max_rel(gdv, dv_out, N));
    }
    /* A workspace that is too small, or none, is refused before anything runs. */
    CHECK(sf_bn_lif_backward(p, T, B, C, hw, SF_SCALAR_F32, d_x, d_stat, d_stat + C, 1e-5f, d_stat + 2 * C, d_stat + 3 * C, d_ds,
                             d_dx, d_g, d_b, NULL, ws, ws_bytes - 1, GPU, stream) == SF_ERR_INVALID,
          "a short workspace must fail");
    CHECK(strstr(sf_last_error(), "workspace") != NULL, "message: %s", sf_last_error());
    CHECK(sf_bn_lif_backward(p, T, B, C, hw, SF_SCALAR_F32, d_x, d_stat, d_stat + C, 1e-5f, d_stat + 2 * C, d_stat + 3 * C, d_ds,
                             d_dx, d_g, d_b, NULL, NULL, 0, GPU, stream) == SF_ERR_INVALID,
          "no workspace must fail");
    /* dx in x's bytes would lose x before the second pass reads it */
    CHECK(sf_bn_lif_backward(p, T, B, C, hw, SF_SCALAR_F32, d_x, d_stat, d_stat + C, 1e-5f, d_stat + 2 * C, d_stat + 3 * C, d_ds,
                             d_x + n / 2, d_g, d_b, NULL, ws, ws_bytes, GPU, stream) == SF_ERR_INVALID,
          "dx overlapping x must fail");
    CHECK(strstr(sf_last_error(), "bytes of x") != NULL, "message: %s", sf_last_error());
    CU(cudaStreamDestroy(stream));
    void *dev[] = {d_x, d_ds, d_s, d_dx, d_stat, d_g, d_b, d_vin, d_dvin, d_vout, d_dvout, ws};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaFree(dev[i]);
    void *host[] = {x, ds, s, dx, stat, v_in, dv_in, v_out, dv_out, gs, gdx, gg, gb, gv, gdv};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

/* bf16 bits of a float that bf16 holds exactly (8 significant bits), and a float from bf16 bits. */
static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static float float_of(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* LIF and BN+LIF through the typed calls with bf16 x, ds on the GPU against fp32 on the CPU. */
static void compare_bf16(const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, uint64_t seed)
{
    const size_t n = (size_t)(T * B * C * hw);
    float *x = malloc(4 * n), *ds = malloc(4 * n), *s = malloc(4 * n), *dx = malloc(4 * n), dg[64], db[64];
    uint16_t *x16 = malloc(2 * n), *ds16 = malloc(2 * n), *s16 = malloc(2 * n), *dx16 = malloc(2 * n);
    tu_randn(x, (int64_t)n, 0.4f, 1.5f, seed);
    tu_randn(ds, (int64_t)n, 0.0f, 1.0f, seed + 1);
    for (size_t i = 0; i < n; i++) { /* multiples of 1/64 within ±4: exact in bf16 */
        x[i] = roundf(fmaxf(-4.0f, fminf(4.0f, x[i])) * 64.0f) / 64.0f;
        ds[i] = roundf(fmaxf(-3.0f, fminf(3.0f, ds[i])) * 64.0f) / 64.0f;
        x16[i] = bf16_of(x[i]);
        ds16[i] = bf16_of(ds[i]);
    }
    float stat[4 * 64];
    for (int32_t c = 0; c < C; c++) stat[c] = 0.3f, stat[C + c] = 1.7f, stat[2 * C + c] = 0.9f, stat[3 * C + c] = 0.1f;
    uint16_t *d_x, *d_ds, *d_s, *d_dx;
    CU(cudaMalloc((void **)&d_x, 2 * n));
    CU(cudaMalloc((void **)&d_ds, 2 * n));
    CU(cudaMalloc((void **)&d_s, 2 * n));
    CU(cudaMalloc((void **)&d_dx, 2 * n));
    CU(cudaMemcpy(d_x, x16, 2 * n, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(d_ds, ds16, 2 * n, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize()); /* the backend's stream does not wait for these (gpu_copies.h) */
    float *d_stat = dev_from(stat, 4 * (size_t)C), *d_g = dev_from(stat, (size_t)C), *d_b = dev_from(stat, (size_t)C);
    size_t ws_bytes = sf_bn_lif_workspace_bytes(T, B, C, hw, GPU);
    void *ws = NULL;
    CU(cudaMalloc(&ws, ws_bytes));
    for (int bn = 0; bn < 2; bn++) {
        if (bn) {
            CHECK_OK(sf_bn_lif_forward(p, T, B, C, hw, SF_SCALAR_F32, x, stat, stat + C, 1e-5f, stat + 2 * C,
                                       stat + 3 * C, s, NULL, CPU, NULL));
            CHECK_OK(sf_bn_lif_backward(p, T, B, C, hw, SF_SCALAR_F32, x, stat, stat + C, 1e-5f, stat + 2 * C,
                                        stat + 3 * C, ds, dx, dg, db, NULL, NULL, 0, CPU, NULL));
            CHECK_OK(sf_bn_lif_forward(p, T, B, C, hw, SF_SCALAR_BF16, d_x, d_stat, d_stat + C, 1e-5f,
                                       d_stat + 2 * C, d_stat + 3 * C, d_s, NULL, GPU, NULL));
            CHECK_OK(sf_bn_lif_backward(p, T, B, C, hw, SF_SCALAR_BF16, d_x, d_stat, d_stat + C, 1e-5f,
                                        d_stat + 2 * C, d_stat + 3 * C, d_ds, d_dx, d_g, d_b, NULL, ws, ws_bytes, GPU,
                                        NULL));
        } else {
            const int64_t N = (int64_t)n / T;
            CHECK_OK(sf_lif_forward_typed(p, T, N, SF_SCALAR_F32, x, s, NULL, CPU, NULL));
            CHECK_OK(sf_lif_backward_typed(p, T, N, SF_SCALAR_F32, x, ds, dx, NULL, CPU, NULL));
            CHECK_OK(sf_lif_forward_typed(p, T, N, SF_SCALAR_BF16, d_x, d_s, NULL, GPU, NULL));
            CHECK_OK(sf_lif_backward_typed(p, T, N, SF_SCALAR_BF16, d_x, d_ds, d_dx, NULL, GPU, NULL));
        }
        CU(cudaMemcpy(s16, d_s, 2 * n, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(dx16, d_dx, 2 * n, cudaMemcpyDeviceToHost));
        /* BN keeps dy = ∂L/∂y in bf16 between its passes: dx may differ from fp32's by that rounding, carried
         * through dx = γ·invstd·(dy − mean(dy) − x̂·mean(dy·x̂)); the fp32 dy is the LIF's dx at y = BN(x) */
        const float invstd = 1.0f / sqrtf(1.7f + 1e-5f);
        float *dy = calloc(n, 4), *xhat = calloc(n, 4);
        double mean_dy = 0.0;
        if (bn) {
            for (size_t i = 0; i < n; i++) xhat[i] = (x[i] - 0.3f) * invstd, s[i] = xhat[i] * 0.9f + 0.1f;
            CHECK_OK(sf_lif_backward_typed(p, T, (int64_t)n / T, SF_SCALAR_F32, s, ds, dy, NULL, CPU, NULL));
            CHECK_OK(sf_bn_lif_forward(p, T, B, C, hw, SF_SCALAR_F32, x, stat, stat + C, 1e-5f, stat + 2 * C,
                                       stat + 3 * C, s, NULL, CPU, NULL));
            for (size_t i = 0; i < n; i++) mean_dy += fabs(dy[i]) / (double)n;
        }
        size_t flips = 0, far = 0;
        double scale = 0.0;
        for (size_t i = 0; i < n; i++) scale = fabs(dx[i]) > scale ? fabs(dx[i]) : scale;
        for (size_t i = 0; i < n; i++) {
            flips += float_of(s16[i]) != s[i];
            const double dy_round = 0.9 * invstd * (fabs(dy[i]) + mean_dy * (1.0 + fabs(xhat[i]))) / 256.0;
            far += fabs(float_of(dx16[i]) - dx[i]) > fabs(dx[i]) / 256.0 + dy_round + 1e-4 * scale;
        }
        CHECK(flips == 0, "bf16 %s: %zu spikes differ from fp32", bn ? "BN+LIF" : "LIF", flips);
        CHECK(far == 0, "bf16 %s: %zu of dx are further from fp32's than bf16's rounding of dx (and of dy)",
              bn ? "BN+LIF" : "LIF", far);
        free(dy);
        free(xhat);
    }
    void *dev[] = {d_x, d_ds, d_s, d_dx, d_stat, d_g, d_b, ws};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaFree(dev[i]);
    void *host[] = {x, ds, s, dx, x16, ds16, s16, dx16};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

int main(void)
{
    if (sf_cuda_device_count() < 1) {
        fprintf(stderr, "test_gpu_bn_lif_calls: no CUDA device\n");
        return 1;
    }
    sf_lif_params p;
    sf_lif_default_params(&p);
    p.detach_reset = 1;
    compare(&p, 1, 1, 1, 1, 0, 10);
    compare(&p, 4, 3, 5, 36, 0, 11);
    compare(&p, 4, 3, 5, 36, 1, 12);
    compare(&p, 10, 2, 64, 1, 1, 13); /* a BN1d-like head: hw = 1 */
    p.soft_reset = 1;
    p.surrogate = SF_SURROGATE_ATAN;
    p.alpha = 2.0f;
    compare(&p, 7, 5, 3, 49, 1, 14);
    compare(&p, 64, 2, 8, 16, 0, 15); /* past the 32-step segments of the recompute */
    compare_bf16(&p, 4, 3, 5, 36, 16);
    compare_bf16(&p, 40, 2, 7, 9, 17);
    return tu_finish("test_gpu_bn_lif_calls");
}
