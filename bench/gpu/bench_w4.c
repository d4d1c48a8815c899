/* bench_w4.c — workload W4 (docs/notebook/perf.md, Workloads; bench/w4_net.h) on one GPU: W4ff and W4rec at natural and fixed
 * activity, each run dense (sparse = off), event-driven (on), auto, and event-driven with grad_threshold 0.5 and
 * grad_cut (seed paper 000's sparse gradient; dense runs keep the exact gradient, as the peers do), every training
 * step replayed as a CUDA graph and, for W4rec, also without one. The input batch is uploaded once and stays on the
 * device (x = NULL after the first step), as the peers build theirs on the GPU; two more dense runs upload its
 * [T, B, 700] floats at every step, as a training loop does: from pageable memory, and from page-locked memory
 * (sf_host_alloc, what spikefuse's loaders fill when the net is on a GPU). Per run: the median ms per full training
 * step (CUDA events, 10 steps after 3 of warm-up), samples/s, the hidden layers' firing rates, each event-driven layer's
 * input density and paths, the memory plan's saved bytes and the device memory the net allocated. Then the speedups
 * over dense.
 * Usage: bench_w4 [ff|rec|all] [B (64)] [fp32|tf32|bf16|fp16 (fp32)]. The peers run in the same session:
 * ../shared/peers/peers_w4.py. */
#include "../w4_net.h"
#include "cuda/cuda_backend.h"
#include "gpu_bench.h"

#include <string.h>

struct step_arg {
    sf_net *net;
    const float *x;
    const int32_t *y;
    int upload; /* every step uploads x; else the first does, and the rest run on it (x = NULL) */
};

static void one_step(void *arg)
{
    struct step_arg *a = arg;
    sf_step_result r;
    GB_OK(sf_net_train_step(a->net, a->x, a->y, &r));
    if (!a->upload) a->x = NULL;
}

static float run(const w4_options *o, const float *x, const int32_t *y, int upload)
{
    sf_net *net;
    GB_OK(w4_build(o, &net));
    struct step_arg a = {net, x, y, upload};
    float ms = gb_time_ms(one_step, &a, (cudaStream_t)NULL, 3, 10); /* each step ends in a read-back: synchronised */
    double peak = sf_net_peak_bytes(net) / 1048576.0;
    float rates[2];
    sf_net_firing_rates(net, rates, 2);
    sf_memory_plan plan;
    GB_OK(sf_net_memory_plan(net, &plan));
    char paths[160];
    w4_paths(net, paths, sizeof paths);
    printf("W4%-3s %-7s %-10s graph %d%s %8.2f ms/step %8.0f samples/s  rates %.4f %.4f  saved %7.1f MiB  device %7.0f "
           "MiB  paths:%s\n",
           o->rec ? "rec" : "ff", o->fixed ? "fixed" : "natural", w4_mode_name(o), o->graph,
           upload ? " upload" : "", ms,
           (double)o->B / ms * 1e3, rates[0], rates[1], plan.saved / 1048576.0, peak, paths);
    fflush(stdout);
    sf_net_free(net);
    return ms;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    const int64_t B = argc > 2 ? atoll(argv[2]) : 64;
    const sf_precision prec = gb_precision(argc > 3 ? argv[3] : NULL);
    if ((strcmp(which, "ff") && strcmp(which, "rec") && strcmp(which, "all")) || B < 1) {
        fprintf(stderr, "usage: bench_w4 [ff|rec|all] [B >= 1] [fp32|tf32|bf16|fp16]\n");
        return 2;
    }
    char card[256];
    gb_card(card, sizeof card);
    printf("W4  card: %s  copy bandwidth: %.0f GB/s  T=%d B=%lld in=%d hidden=2x%d out=%d input density %.2f  %s\n",
           card, gb_copy_bandwidth(NULL), W4_T, (long long)B, W4_IN, W4_HIDDEN, W4_OUT, W4_DENSITY,
           sf_precision_name(prec));
    float *x = malloc(sizeof(float) * (size_t)(W4_T * B * W4_IN));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)B);
    const sf_device gpu = {SF_DEVICE_CUDA, 0};
    float *x_locked = sf_host_alloc(gpu, sizeof(float) * (size_t)(W4_T * B * W4_IN));
    if (!x || !y || !x_locked) {
        fprintf(stderr, "bench_w4: out of host memory\n");
        return 1;
    }
    w4_batch(W4_T, B, x, y);
    memcpy(x_locked, x, sizeof(float) * (size_t)(W4_T * B * W4_IN));
    for (int rec = 0; rec < 2; rec++) {
        if ((rec && strcmp(which, "ff") == 0) || (!rec && strcmp(which, "rec") == 0)) continue;
        for (int fixed = 0; fixed < 2; fixed++) {
            const w4_options runs[] = {
                {rec, fixed, SF_SPARSE_OFF, gpu, W4_T, B, 0, 1, prec},
                {rec, fixed, SF_SPARSE_ON, gpu, W4_T, B, 0, 1, prec},
                {rec, fixed, SF_SPARSE_AUTO, gpu, W4_T, B, 0, 1, prec},
                {rec, fixed, SF_SPARSE_ON, gpu, W4_T, B, 1, 1, prec},
                {rec, fixed, SF_SPARSE_OFF, gpu, W4_T, B, 0, 0, prec},
                {rec, fixed, SF_SPARSE_ON, gpu, W4_T, B, 0, 0, prec},
            };
            float ms[6];
            int nruns = rec ? 6 : 4; /* the recurrent loop's launches: with and without a graph */
            for (int i = 0; i < nruns; i++) ms[i] = run(&runs[i], x, y, 0);
            const float uploaded = run(&runs[0], x, y, 1), uploaded_locked = run(&runs[0], x_locked, y, 1);
            printf("W4%-3s %-7s speedup over dense: sparse %.2fx, auto %.2fx, sparse+cut %.2fx", rec ? "rec" : "ff",
                   fixed ? "fixed" : "natural", ms[0] / ms[1], ms[0] / ms[2], ms[0] / ms[3]);
            if (rec) printf("; without a graph: dense %.2f ms, sparse %.2f ms", ms[4], ms[5]);
            printf("; dense with the input uploaded at every step %.2f ms (page-locked: %.2f ms)", uploaded,
                   uploaded_locked);
            printf("\n");
        }
    }
    free(x);
    sf_host_free(gpu, x_locked);
    free(y);
    return 0;
}
