/* bench_neurons.c — workload W1's shape (docs/notebook/perf.md, Workloads) for every neuron model: one layer, forward +
 * backward (h recomputed from x), x[T, M] ~ N(0.6, 1), ds ~ N(0, 1), T·M = 2^25, T in {4, 16, 64, 256}, fp32; tau=2,
 * decay_input, θ=1, hard reset to 0, detach_reset, sigmoid α=4; the LIF, the PLIF (one w, and a w per channel of 64),
 * the IF (x scaled by 0.5: no leak) and the ALIF (rho 0.9, beta 0.7). Bytes per element each model must move: 20
 * (the forward reads x, writes s; the backward reads ds and x, writes dx; the ALIF's b and θ stay on chip), the
 * PLIF 20 + 8/T (a float per neuron for dw, written and read back by the reduction). Reported against the copy
 * bandwidth measured in this run (target: >= 70%). The forward keeps checkpoints of the state every 32 steps for the
 * backward, as the engine does (sf_lif_state.v_ckpt, 0.25 bytes per element more; ALIF 0.5); past 32 steps each
 * model also runs without them ("nock"). Every size is checked against the CPU ops on the same inputs
 * (spikes exact, dx and dw relative error), so a fast wrong kernel cannot report a time.
 * Usage: bench_neurons [T] (one size only, for profilers). */
#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "gpu_bench.h"

struct run {
    sf_lif_params p;
    sf_lif_state st; /* a PLIF's w and dw (device), the checkpoints */
    int64_t T, M;
    float *x, *s, *ds, *dx;
    cudaStream_t stream;
};

static void fwd(void *arg)
{
    struct run *r = arg;
    sf_lif_out out = {.s = r->s};
    GB_OK(sf_cuda_lif_forward(&r->p, r->T, r->M, SF_SCALAR_F32, r->x, &out, &r->st, r->stream));
}

static void bwd(void *arg)
{
    struct run *r = arg;
    GB_OK(sf_cuda_lif_backward(&r->p, r->T, r->M, SF_SCALAR_F32, r->x, NULL, r->ds, r->dx, &r->st, r->stream));
}

static void fwd_bwd(void *arg)
{
    fwd(arg);
    bwd(arg);
}

static float *to_host(const float *d, size_t n)
{
    float *h = malloc(4 * n);
    GB_CHECK(cudaMemcpy(h, d, 4 * n, cudaMemcpyDeviceToHost));
    return h;
}

static double rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* The same inputs through the CPU ops: spike mismatches, dx and dw relative errors. */
static void check(struct run *r, int32_t wc, const float *w_host, int64_t *mismatch, double *edx, double *edw)
{
    size_t n = (size_t)(r->T * r->M);
    float *x = to_host(r->x, n), *s = to_host(r->s, n), *ds = to_host(r->ds, n), *dx = to_host(r->dx, n);
    float *cs = malloc(4 * n), *cdx = malloc(4 * n), cdw[128] = {0}, gdw[128] = {0};
    sf_lif_state st = r->st;
    st.w = w_host;
    st.dw = cdw;
    sf_lif_out out = {.s = cs};
    GB_OK(sf_cpu_lif_forward(&r->p, r->T, r->M, x, &out, &st));
    GB_OK(sf_cpu_lif_backward(&r->p, r->T, r->M, x, NULL, ds, cdx, &st));
    *mismatch = 0;
    for (size_t i = 0; i < n; i++) *mismatch += s[i] != cs[i];
    *edx = rel_err(dx, cdx, n);
    *edw = 0;
    if (wc) {
        GB_CHECK(cudaMemcpy(gdw, r->st.dw, 4 * (size_t)wc, cudaMemcpyDeviceToHost));
        *edw = rel_err(gdw, cdw, (size_t)wc);
    }
    free(x), free(s), free(ds), free(dx), free(cs), free(cdx);
}

int main(int argc, char **argv)
{
    int64_t only = argc > 1 ? atoll(argv[1]) : 0;
    char card[256];
    cudaStream_t stream;
    GB_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    gb_card(card, sizeof card);
    double bw = gb_copy_bandwidth(stream);
    printf("W1 neuron models fwd+bwd  card: %s  copy bandwidth: %.0f GB/s (read+write, 1 GiB cudaMemcpy D2D)\n", card,
           bw);
    printf("%-13s %5s %9s %8s %8s %9s %8s %7s %7s %9s %9s %9s\n", "model", "T", "M", "fwd_ms", "bwd_ms", "f+b_ms",
           "B/elem", "GB/s", "%copy", "spike_err", "dx_err", "dw_err");
    static const struct {
        const char *name;
        sf_neuron_model model;
        int32_t channels; /* PLIF: w's channels */
        float x_scale;
    } models[] = {{"lif", SF_NEURON_LIF, 0, 1.0f},  {"plif", SF_NEURON_PLIF, 1, 1.0f},
                  {"plif/ch64", SF_NEURON_PLIF, 64, 1.0f}, {"if", SF_NEURON_IF, 0, 0.5f},
                  {"alif", SF_NEURON_ALIF, 0, 1.0f}};
    const int64_t Ts[] = {4, 16, 64, 256};
    int bad = 0;
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++)
        for (int i = 0; i < 4; i++) {
            if (only && Ts[i] != only) continue;
            struct run r;
            memset(&r, 0, sizeof r);
            sf_lif_default_params(&r.p);
            r.p.detach_reset = 1;
            r.p.model = models[m].model;
            r.p.per_channel = models[m].channels > 1;
            r.p.rho = 0.9f;
            r.p.beta = 0.7f;
            r.T = Ts[i];
            r.M = ((int64_t)1 << 25) / r.T;
            r.stream = stream;
            size_t n = (size_t)(r.T * r.M);
            const int32_t wc = models[m].channels;
            float w_host[64];
            for (int32_t c = 0; c < wc; c++) w_host[c] = 0.02f * (float)c - 0.6f; /* tau from 1.5 to 4 */
            if (wc) {
                GB_CHECK(cudaMalloc((void **)&r.st.w, 4 * (size_t)wc));
                GB_CHECK(cudaMalloc((void **)&r.st.dw, 4 * (size_t)wc));
                GB_CHECK(cudaMemcpy((float *)r.st.w, w_host, 4 * (size_t)wc, cudaMemcpyHostToDevice));
                r.st.w_channels = wc;
                r.st.w_hw = r.M / wc;
            }
            r.x = gb_device_randn(n, 0.6f * models[m].x_scale, models[m].x_scale, 11 + (uint64_t)i);
            r.ds = gb_device_randn(n, 0.0f, 1.0f, 23 + (uint64_t)i);
            GB_CHECK(cudaMalloc((void **)&r.s, 4 * n));
            GB_CHECK(cudaMalloc((void **)&r.dx, 4 * n));
            GB_CHECK(cudaMemset(r.s, 0xff, 4 * n)); /* poison: unwritten outputs show as NaN */
            GB_CHECK(cudaMemset(r.dx, 0xff, 4 * n));
            float *ckpt;
            GB_CHECK(cudaMalloc((void **)&ckpt, 4 * (size_t)sf_lif_ckpt_floats(&r.p, r.T, r.M) + 4));
            GB_CHECK(cudaDeviceSynchronize()); /* the backend's non-blocking stream does not wait for these */
            for (int ck = 1; ck >= (r.T > SF_LIF_CKPT_STEPS ? 0 : 1); ck--) { /* the engine's way, then without */
                r.st.v_ckpt = ck ? ckpt : NULL;
                float tf = gb_time_ms(fwd, &r, stream, 3, 20);
                float tb = gb_time_ms(bwd, &r, stream, 3, 20);
                float tfb = gb_time_ms(fwd_bwd, &r, stream, 3, 20);
                int64_t mism;
                double edx, edw;
                check(&r, wc, w_host, &mism, &edx, &edw);
                const double bytes = 20.0 + (wc ? 8.0 / (double)r.T : 0.0);
                const double gbs = bytes * (double)n / (tfb * 1e-3) / 1e9;
                char name[32];
                snprintf(name, sizeof name, "%s%s", models[m].name, ck ? "" : " nock");
                printf("%-13s %5lld %9lld %8.3f %8.3f %9.3f %8.2f %7.0f %6.1f%% %9lld %9.1e %9.1e\n", name,
                       (long long)r.T, (long long)r.M, tf, tb, tfb, bytes, gbs, 100.0 * gbs / bw, (long long)mism,
                       edx, edw);
                bad |= mism != 0 || !(edx < 1e-5) || !(edw < 1e-4);
            }
            cudaFree(r.x), cudaFree(r.ds), cudaFree(r.s), cudaFree(r.dx), cudaFree(ckpt);
            if (wc) cudaFree((void *)r.st.w), cudaFree(r.st.dw);
        }
    cudaStreamDestroy(stream);
    if (bad) fprintf(stderr, "bench_neurons: results differ from the CPU ops\n");
    return bad;
}
