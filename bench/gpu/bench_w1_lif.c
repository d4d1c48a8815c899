/* bench_w1_lif.c — workload W1 (docs/notebook/perf.md, Workloads): one LIF layer, forward + backward, x[T, M] ~ N(0.6, 1),
 * T·M = 2^25, T in {4, 16, 64, 256} and 1024; tau=2, decay_input, θ=1, hard reset to 0, detach_reset, sigmoid α=4.
 * The backward gets ds ~ N(0, 1) and recomputes h from x (nothing else is kept). x, s, ds and dx are stored in the
 * precision's activation type: fp32 (the workload as defined) or, for bf16 / fp16, 16 bits as a network under that
 * precision stores them. Floor: the bytes per element (fp32 20: the forward reads x, writes s; the backward reads ds
 * and x, writes dx; 16-bit 10) over the copy bandwidth measured in this run; "x floor" is the time over it. The
 * forward keeps checkpoints of v every 32 steps for the backward (0.25 bytes per element on top; "auto_nock" runs
 * without them). From T = 64 on, every launch configuration of `configs` is timed (the automatic one first), so
 * that they compare in one run. Each size and configuration is also checked against a serial host reference on a sample of neurons, on
 * the same (rounded) inputs, so a fast wrong kernel cannot report a time.
 * Usage: bench_w1_lif [T [fp32|bf16|fp16 [config]]] (T 0: all sizes; a config: that one only, for profilers). */
#include "cuda/cuda_backend.h"
#include "core/lif_math.h"
#include "gpu_bench.h"

/* Launch configurations (sf_cuda_lif_tuning: forward neurons per thread and steps ahead, backward segment, steps
 * ahead and neurons per thread; 0 automatic, -1 as long as shared memory allows), with or without the forward's
 * checkpoints of v every 32 steps (sf_lif_state.v_ckpt: 4 bytes written and read per 32 elements, 0.25 bytes per element over the floor). */
static const struct config {
    const char *name;
    int ckpt;
    sf_cuda_lif_tuning tune;
} configs[] = {
    {"auto", 1, {0, 0, 0, 0, 0}},
    {"auto_nock", 0, {0, 0, 0, 0, 0}}, /* without checkpoints: the first pass finds the segment starts */
    {"old", 0, {4, 8, 32, 8, 0}}, /* the automatic choice before long segments: 32-step segments at 32 warps per SM */
    {"bwd_longu8", 0, {0, 0, -1, 8, 0}}, /* long segments, 8 steps ahead */
    {"ck_s32u8", 1, {0, 0, 32, 8, 0}},
    {"ck_s32u32", 1, {0, 0, 32, 32, 0}},
    {"ck_s64u8", 1, {0, 0, 64, 8, 0}},
    {"ck_s64u32", 1, {0, 0, 64, 32, 0}},
    {"ck_s128u32", 1, {0, 0, 128, 32, 0}},
    {"ck_fwd_v1u8", 1, {1, 8, 0, 0, 0}},
    {"ck_fwd_v1u32", 1, {1, 32, 0, 0, 0}},
    {"ck_bwd_v1", 1, {0, 0, 0, 0, 1}}, /* one neuron per backward thread where auto takes four */
};

struct w1 {
    sf_lif_params p;
    sf_scalar t;
    sf_cuda_lif_tuning tune;
    sf_lif_state state; /* v_ckpt, or nothing */
    int64_t T, M;
    void *x, *s, *ds, *dx; /* in type t */
    cudaStream_t st;
};

static void fwd(void *arg)
{
    struct w1 *w = arg;
    sf_lif_out out = {.s = w->s};
    GB_OK(sf_cuda_lif_forward_tuned(&w->p, w->T, w->M, w->t, w->x, &out, &w->state, &w->tune, w->st));
}

static void bwd(void *arg)
{
    struct w1 *w = arg;
    GB_OK(sf_cuda_lif_backward_tuned(&w->p, w->T, w->M, w->t, w->x, NULL, w->ds, w->dx, &w->state, &w->tune, w->st));
}

static void fwd_bwd(void *arg)
{
    fwd(arg);
    bwd(arg);
}

/* A [T, M] tensor of type t as host floats, widened on the device by the backend's conversion. */
static float *host_floats(sf_backend *be, const struct w1 *w, const void *d)
{
    size_t n = (size_t)(w->T * w->M);
    float *h = malloc(4 * n), *wide = (float *)d;
    if (w->t != SF_SCALAR_F32) {
        GB_OK(be->alloc(be, 4 * n, (void **)&wide));
        GB_OK(be->convert(be, (int64_t)n, w->t, d, SF_SCALAR_F32, wide));
    }
    GB_OK(be->copy_to_host(be, h, wide, 4 * n));
    if (wide != d) be->release(be, wide);
    return h;
}

/* Serial reference on every `stride`-th neuron: spike mismatches and ‖dx − ref‖/‖ref‖ (dx rounded to 16 bits under a
 * 16-bit type, so its bound there is that rounding). */
static void check(sf_backend *be, const struct w1 *w, int64_t stride, int64_t *mismatch, double *rel)
{
    float *x = host_floats(be, w, w->x), *s = host_floats(be, w, w->s), *ds = host_floats(be, w, w->ds);
    float *dx = host_floats(be, w, w->dx), *h = malloc(4 * (size_t)w->T);
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

/* A device tensor of n values ~ N(mean, std) in type t (converted from float on the device). */
static void *device_randn(sf_backend *be, sf_scalar t, size_t n, float mean, float std, uint64_t seed)
{
    float *f = gb_device_randn(n, mean, std, seed);
    if (t == SF_SCALAR_F32) return f;
    void *d;
    GB_OK(be->alloc(be, n * sf_scalar_size(t), &d));
    GB_OK(be->convert(be, (int64_t)n, SF_SCALAR_F32, f, t, d));
    GB_OK(be->sync(be));
    GB_CHECK(cudaFree(f));
    return d;
}

int main(int argc, char **argv)
{
    int64_t only = argc > 1 ? atoll(argv[1]) : 0;
    sf_precision prec = gb_precision(argc > 2 ? argv[2] : NULL);
    sf_backend *be; /* its conversions only (bf16, fp16): the kernels run on their own stream */
    GB_OK(sf_cuda_backend_create(0, prec, NULL, &be));
    const sf_scalar t = be->act;
    const double bytes_el = 5.0 * (double)sf_scalar_size(t);
    const char *only_config = argc > 3 ? argv[3] : NULL;
    char card[256];
    cudaStream_t st;
    GB_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    gb_card(card, sizeof card);
    double bw = gb_copy_bandwidth(st);
    printf("W1 lif fwd+bwd  activations: %s (%.0f bytes per element)  card: %s  copy bandwidth: %.0f GB/s (read+write, "
           "1 GiB cudaMemcpy D2D)\n",
           t == SF_SCALAR_F32 ? "fp32" : sf_precision_name(prec), bytes_el, card, bw);
    printf("%5s %9s %-11s %9s %9s %10s %9s %8s %8s %8s %10s %9s\n", "T", "M", "config", "fwd_ms", "bwd_ms",
           "fwdbwd_ms", "floor_ms", "x_floor", "GB/s", "%copy", "spike_err", "dx_relerr");
    const int64_t Ts[] = {4, 16, 64, 256, 1024};
    const int nconfigs = (int)(sizeof configs / sizeof configs[0]);
    /* dx is rounded to the activation type: about 2^-9 (bf16) or 2^-12 (fp16) relative on average */
    const double dx_bound = t == SF_SCALAR_BF16 ? 1e-2 : t == SF_SCALAR_F16 ? 2e-3 : 1e-5;
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        if (only && Ts[i] != only) continue;
        struct w1 w;
        sf_lif_default_params(&w.p);
        w.p.detach_reset = 1;
        w.t = t;
        w.T = Ts[i];
        w.M = ((int64_t)1 << 25) / w.T;
        w.st = st;
        size_t n = (size_t)(w.T * w.M), es = sf_scalar_size(t);
        w.x = device_randn(be, t, n, 0.6f, 1.0f, 11 + (uint64_t)i);
        w.ds = device_randn(be, t, n, 0.0f, 1.0f, 23 + (uint64_t)i);
        GB_CHECK(cudaMalloc(&w.s, es * n));
        GB_CHECK(cudaMalloc(&w.dx, es * n));
        float *ckpt;
        GB_CHECK(cudaMalloc((void **)&ckpt, 4 * (size_t)sf_lif_ckpt_floats(&w.p, w.T, w.M) + 4));
        for (int c = 0; c < (w.T >= 64 || only_config ? nconfigs : 1); c++) {
            if (only_config && strcmp(only_config, configs[c].name) != 0) continue;
            w.tune = configs[c].tune;
            w.state = (sf_lif_state){.v_ckpt = configs[c].ckpt ? ckpt : NULL};
            GB_CHECK(cudaMemset(w.s, 0xff, es * n)); /* poison: unwritten outputs show as NaN */
            GB_CHECK(cudaMemset(w.dx, 0xff, es * n));
            float tf = gb_time_ms(fwd, &w, st, 3, 20);
            float tb = gb_time_ms(bwd, &w, st, 3, 20);
            float tfb = gb_time_ms(fwd_bwd, &w, st, 3, 20);
            GB_CHECK(cudaStreamSynchronize(st));
            int64_t mism;
            double rel;
            check(be, &w, 97, &mism, &rel);
            double floor_ms = bytes_el * (double)n / (bw * 1e9) * 1e3;
            double gbs = bytes_el * (double)n / (tfb * 1e-3) / 1e9;
            printf("%5lld %9lld %-11s %9.3f %9.3f %10.3f %9.3f %8.2f %8.0f %7.1f%% %10lld %9.1e\n", (long long)w.T,
                   (long long)w.M, configs[c].name, tf, tb, tfb, floor_ms, tfb / floor_ms, gbs, 100.0 * gbs / bw,
                   (long long)mism, rel);
            bad |= mism != 0 || !(rel < dx_bound);
        }
        cudaFree(w.x), cudaFree(w.ds), cudaFree(w.s), cudaFree(w.dx), cudaFree(ckpt);
    }
    cudaStreamDestroy(st);
    sf_backend_free(be);
    if (bad) fprintf(stderr, "W1: results differ from the host reference\n");
    return bad;
}
