/* bench_cpu_w4.c — workload W4 (docs/notebook/perf.md) on the CPU at batch 16, the size for a 2-core machine: W4ff and W4rec
 * at natural and fixed activity, each dense (sparse = off), event-driven (on), auto, and event-driven with seed paper
 * 000's sparse gradient (grad_threshold 0.5 with grad_cut; the others keep the exact one). Prints per run the median
 * ms per training step (forward, loss, backward, Adam) and samples/s, the compile time (auto measures its
 * crossovers then), the hidden layers' firing rates, the path every event-driven layer took (forward/backward), and
 * the saved bytes of the memory plan; then the speedup of sparse and auto over dense.
 * Usage: bench_cpu_w4 [ff|rec|all] [B (16)] [steps (3)] [T (100)]. A benchmark program, not a test. */
#include "bench_clock.h"
#include "w4_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(sf_status s, const char *what)
{
    if (s == SF_OK) return;
    fprintf(stderr, "%s: %s: %s\n", what, sf_status_str(s), sf_last_error());
    exit(1);
}

/* One run: returns the median ms per step. */
static double run(const w4_options *o, int steps, const float *x, const int32_t *y)
{
    sf_net *net;
    double t0 = sf_bench_now_ms();
    die(w4_build(o, &net), "building the W4 net");
    double compile_ms = sf_bench_now_ms() - t0;
    double *ms = malloc((size_t)steps * sizeof *ms);
    sf_step_result r;
    die(sf_net_train_step(net, x, y, &r), "warm-up step");
    for (int i = 0; i < steps; i++) {
        double t = sf_bench_now_ms();
        die(sf_net_train_step(net, x, y, &r), "step");
        ms[i] = sf_bench_now_ms() - t;
    }
    double med = sf_bench_median(ms, steps);
    float rates[2];
    sf_net_firing_rates(net, rates, 2);
    sf_memory_plan plan;
    die(sf_net_memory_plan(net, &plan), "plan");
    char paths[160];
    w4_paths(net, paths, sizeof paths);
    printf("W4%-3s %-7s %-10s %9.1f ms/step %8.1f samples/s  compile %7.0f ms  rates %.4f %.4f  saved %7.2f MiB  "
           "paths:%s  loss %.4f\n",
           o->rec ? "rec" : "ff", o->fixed ? "fixed" : "natural", w4_mode_name(o), med, (double)o->B / med * 1e3,
           compile_ms, rates[0], rates[1], plan.saved / 1048576.0, paths, r.loss);
    fflush(stdout);
    free(ms);
    sf_net_free(net);
    return med;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    int64_t B = argc > 2 ? atoll(argv[2]) : 16;
    int steps = argc > 3 ? atoi(argv[3]) : 3;
    int64_t T = argc > 4 ? atoll(argv[4]) : W4_T;
    if ((strcmp(which, "ff") && strcmp(which, "rec") && strcmp(which, "all")) || B < 1 || steps < 1 || T < 1) {
        fprintf(stderr, "usage: bench_cpu_w4 [ff|rec|all] [B >= 1] [steps >= 1] [T >= 1]\n");
        return 2;
    }
    printf("%s\nW4 on the CPU: T=%lld B=%lld, %d timed steps after one warm-up (median)\n", sf_build_info(),
           (long long)T, (long long)B, steps);
    float *x = malloc((size_t)(T * B * W4_IN) * sizeof *x);
    int32_t *y = malloc((size_t)B * sizeof *y);
    w4_batch(T, B, x, y);
    const sf_sparse_mode modes[] = {SF_SPARSE_OFF, SF_SPARSE_ON, SF_SPARSE_AUTO, SF_SPARSE_ON};
    for (int rec = 0; rec < 2; rec++) {
        if ((rec && strcmp(which, "ff") == 0) || (!rec && strcmp(which, "rec") == 0)) continue;
        for (int fixed = 0; fixed < 2; fixed++) {
            double ms[4];
            for (int m = 0; m < 4; m++) { /* dense, sparse, auto, sparse with the cut gradient */
                w4_options o = {rec, fixed, modes[m], {SF_DEVICE_CPU, 0}, T, B, m == 3, 0, SF_PRECISION_FP32};
                ms[m] = run(&o, steps, x, y);
            }
            printf("W4%-3s %-7s speedup over dense: sparse %.2fx, auto %.2fx, sparse+cut %.2fx\n", rec ? "rec" : "ff",
                   fixed ? "fixed" : "natural", ms[0] / ms[1], ms[0] / ms[2], ms[0] / ms[3]);
        }
    }
    free(x);
    free(y);
    return 0;
}
