/* bench_w1_lif.c — workload W1 (docs/perf.md, Workloads): one LIF layer, forward + backward, x[T, M] ~ N(0.6, 1),
 * T·M = 2^25, T in {4, 16, 64, 256} and 1024; tau=2, decay_input, θ=1, hard reset to 0, detach_reset, sigmoid α=4.
 * The backward gets ds ~ N(0, 1) and recomputes h from x (nothing else is kept). Floor: 20 bytes per element over
 * the copy bandwidth measured in this run. From T = 256 on, every launch configuration of `configs` is timed (the
 * automatic one first), so that they compare in one run. Each size and configuration is also checked against a
 * serial host reference on a sample of neurons, so a fast wrong kernel cannot report a time.
 * Usage: bench_w1_lif [T [config]] (one size, one configuration, for profilers). */
#include "cuda/cuda_backend.h"
#include "core/lif_math.h"
#include "gpu_bench.h"

/* Launch configurations (sf_cuda_lif_tuning: forward neurons per thread and steps ahead, backward segment and steps
 * ahead; 0 automatic, -1 as long as shared memory allows). */
static const struct config {
    const char *name;
    sf_cuda_lif_tuning tune;
} configs[] = {
    {"auto", {0, 0, 0, 0}},
    {"old", {4, 8, 32, 8}}, /* the automatic choice before long segments: 32-step segments at 32 warps per SM */
    {"fwd_v1u8", {1, 8, 0, 0}},
    {"bwd_s32u32", {0, 0, 32, 32}},
    {"bwd_s96u8", {0, 0, 96, 8}},   /* two blocks of columns per SM (at 32 steps ahead, 178 registers allow one) */
    {"bwd_longu8", {0, 0, -1, 8}},  /* long segments, 8 steps ahead */
};

struct w1 {
    sf_lif_params p;
    sf_cuda_lif_tuning tune;
    int64_t T, M;
    float *x, *s, *ds, *dx;
    cudaStream_t st;
};

static void fwd(void *arg)
{
    struct w1 *w = arg;
    sf_lif_out out = {.s = w->s};
    GB_OK(sf_cuda_lif_forward_tuned(&w->p, w->T, w->M, w->x, &out, NULL, &w->tune, w->st));
}

static void bwd(void *arg)
{
    struct w1 *w = arg;
    GB_OK(sf_cuda_lif_backward_tuned(&w->p, w->T, w->M, w->x, NULL, w->ds, w->dx, NULL, &w->tune, w->st));
}

static void fwd_bwd(void *arg)
{
    fwd(arg);
    bwd(arg);
}

/* Serial reference on every `stride`-th neuron: spike mismatches and ‖dx − ref‖/‖ref‖. */
static void check(const struct w1 *w, int64_t stride, int64_t *mismatch, double *rel)
{
    size_t n = (size_t)(w->T * w->M);
    float *x = malloc(4 * n), *s = malloc(4 * n), *ds = malloc(4 * n), *dx = malloc(4 * n),
          *h = malloc(4 * (size_t)w->T);
    GB_CHECK(cudaMemcpy(x, w->x, 4 * n, cudaMemcpyDeviceToHost));
    GB_CHECK(cudaMemcpy(s, w->s, 4 * n, cudaMemcpyDeviceToHost));
    GB_CHECK(cudaMemcpy(ds, w->ds, 4 * n, cudaMemcpyDeviceToHost));
    GB_CHECK(cudaMemcpy(dx, w->dx, 4 * n, cudaMemcpyDeviceToHost));
    sf_lif_coeffs k = sf_lif_coeffs_of(&w->p);
    double num = 0, den = 0;
    *mismatch = 0;
    for (int64_t j = 0; j < w->M; j += stride) {
        float v = k.v0;
        for (int64_t t = 0; t < w->T; t++) {
            float st = sf_lif_step(&k, w->p.soft_reset, x[t * w->M + j], &v, &h[t]);
            *mismatch += st != s[t * w->M + j];
        }
        float dv = 0;
        for (int64_t t = w->T - 1; t >= 0; t--) {
            double ref = k.c * sf_lif_step_back(&w->p, &k, h[t], ds[t * w->M + j], &dv);
            double d = dx[t * w->M + j] - ref;
            num += d * d;
            den += ref * ref;
        }
    }
    *rel = sqrt(num / (den > 0 ? den : 1));
    free(x), free(s), free(ds), free(dx), free(h);
}

int main(int argc, char **argv)
{
    int64_t only = argc > 1 ? atoll(argv[1]) : 0;
    const char *only_config = argc > 2 ? argv[2] : NULL;
    char card[256];
    cudaStream_t st;
    GB_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    gb_card(card, sizeof card);
    double bw = gb_copy_bandwidth(st);
    printf("W1 lif fwd+bwd  card: %s  copy bandwidth: %.0f GB/s (read+write, 1 GiB cudaMemcpy D2D)\n", card, bw);
    printf("%5s %9s %-11s %9s %9s %10s %9s %8s %8s %10s %9s\n", "T", "M", "config", "fwd_ms", "bwd_ms", "fwdbwd_ms",
           "floor_ms", "GB/s", "%copy", "spike_err", "dx_relerr");
    const int64_t Ts[] = {4, 16, 64, 256, 1024};
    const int nconfigs = (int)(sizeof configs / sizeof configs[0]);
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        if (only && Ts[i] != only) continue;
        struct w1 w;
        sf_lif_default_params(&w.p);
        w.p.detach_reset = 1;
        w.T = Ts[i];
        w.M = ((int64_t)1 << 25) / w.T;
        w.st = st;
        size_t n = (size_t)(w.T * w.M);
        w.x = gb_device_randn(n, 0.6f, 1.0f, 11 + (uint64_t)i);
        w.ds = gb_device_randn(n, 0.0f, 1.0f, 23 + (uint64_t)i);
        GB_CHECK(cudaMalloc((void **)&w.s, 4 * n));
        GB_CHECK(cudaMalloc((void **)&w.dx, 4 * n));
        for (int c = 0; c < (w.T >= 256 || only_config ? nconfigs : 1); c++) {
            if (only_config && strcmp(only_config, configs[c].name) != 0) continue;
            w.tune = configs[c].tune;
            GB_CHECK(cudaMemset(w.s, 0xff, 4 * n)); /* poison: unwritten outputs show as NaN */
            GB_CHECK(cudaMemset(w.dx, 0xff, 4 * n));
            float tf = gb_time_ms(fwd, &w, st, 3, 20);
            float tb = gb_time_ms(bwd, &w, st, 3, 20);
            float tfb = gb_time_ms(fwd_bwd, &w, st, 3, 20);
            int64_t mism;
            double rel;
            check(&w, 97, &mism, &rel);
            double floor_ms = 20.0 * (double)n / (bw * 1e9) * 1e3;
            double gbs = 20.0 * (double)n / (tfb * 1e-3) / 1e9;
            printf("%5lld %9lld %-11s %9.3f %9.3f %10.3f %9.3f %8.0f %7.1f%% %10lld %9.1e\n", (long long)w.T,
                   (long long)w.M, configs[c].name, tf, tb, tfb, floor_ms, gbs, 100.0 * gbs / bw, (long long)mism, rel);
            bad |= mism != 0 || !(rel < 1e-5);
        }
        cudaFree(w.x), cudaFree(w.ds), cudaFree(w.s), cudaFree(w.dx);
    }
    cudaStreamDestroy(st);
    if (bad) fprintf(stderr, "W1: results differ from the host reference\n");
    return bad;
}
