/* bench_cpu_net.c — times a full training step (forward, loss, backward, SGD update) of a small conv SNN on the
 * CPU, in both memory modes, and prints the memory plan. A benchmark program, not a test.
 *
 * Net (Fashion-MNIST-sized input 1×28×28): conv 1→16 → BN → LIF → maxpool 2 → conv 16→32 → BN → LIF →
 * maxpool 2 → flatten → linear 1568→10, mean readout, CE. Usage: bench_cpu_net [T] [B] [steps]. */
#include "bench_clock.h"
#include "spikefuse.h"

#include <stdio.h>
#include <stdlib.h>

static void die(sf_status s, const char *what)
{
    if (s == SF_OK) return;
    fprintf(stderr, "%s: %s: %s\n", what, sf_status_str(s), sf_last_error());
    exit(1);
}

static void add(sf_net *net, sf_layer_kind kind, int32_t size)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    if (kind == SF_LAYER_CONV2D) {
        d.out_channels = size;
        d.kernel = 3;
        d.padding = 1;
    }
    if (kind == SF_LAYER_LINEAR) d.out_features = size;
    die(sf_net_add(net, &d, NULL), "add layer");
}

static double run(sf_memory_mode mode, int64_t T, int64_t B, int steps, const float *x, const int32_t *y)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.memory = mode;
    p.in_channels = 1;
    p.in_height = p.in_width = 28;
    sf_net *net;
    die(sf_net_create(&p, &net), "create");
    add(net, SF_LAYER_CONV2D, 16);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_MAXPOOL2D, 0);
    add(net, SF_LAYER_CONV2D, 32);
    add(net, SF_LAYER_BATCHNORM, 0);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_MAXPOOL2D, 0);
    add(net, SF_LAYER_FLATTEN, 0);
    add(net, SF_LAYER_LINEAR, 10);
    die(sf_net_compile(net, T, B), "compile");
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.lr = 0.05f;
    o.momentum = 0.9f;
    die(sf_net_set_optimizer(net, &o), "optimizer");
    double *ms = malloc((size_t)steps * sizeof *ms);
    sf_step_result r;
    for (int i = 0; i < 2; i++) die(sf_net_train_step(net, x, y, &r), "warm-up step");
    for (int i = 0; i < steps; i++) {
        double t0 = sf_bench_now_ms();
        die(sf_net_train_step(net, x, y, &r), "step");
        ms[i] = sf_bench_now_ms() - t0;
    }
    /* One more pass with per-layer timing (synchronising; not part of the median above). */
    die(sf_net_set_profiling(net, 1), "profiling");
    die(sf_net_train_step(net, x, y, &r), "profiled step");
    sf_layer_timing lt[16];
    die(sf_net_layer_timings(net, lt, 16), "timings");
    for (int32_t i = 0; i < sf_net_num_layers(net) && i < 16; i++)
        printf("    layer %2d  forward %7.2f ms  backward %7.2f ms\n", i, lt[i].forward_ms, lt[i].backward_ms);
    die(sf_net_set_profiling(net, 0), "profiling");
    double med = sf_bench_median(ms, steps);
    sf_memory_plan plan;
    die(sf_net_memory_plan(net, &plan), "plan");
    printf("%-9s T=%lld B=%lld  %8.2f ms/step  %8.1f samples/s  loss %.4f  | MiB: params %.2f grads %.2f opt %.2f "
           "saved %.2f workspace %.2f total %.2f\n",
           mode == SF_MEMORY_FULL ? "full" : "recompute", (long long)T, (long long)B, med, B / med * 1e3, r.loss,
           plan.params / 1048576.0, plan.grads / 1048576.0, plan.optimizer / 1048576.0, plan.saved / 1048576.0,
           plan.workspace / 1048576.0, plan.total / 1048576.0);
    free(ms);
    sf_net_free(net);
    return med;
}

int main(int argc, char **argv)
{
    int64_t T = argc > 1 ? atoll(argv[1]) : 4, B = argc > 2 ? atoll(argv[2]) : 64;
    int steps = argc > 3 ? atoi(argv[3]) : 10;
    if (T < 1 || B < 1 || steps < 1) {
        fprintf(stderr, "usage: bench_cpu_net [T >= 1] [B >= 1] [steps >= 1]\n");
        return 2;
    }
    printf("%s\n", sf_build_info());
    float *x = malloc((size_t)(T * B * 28 * 28) * sizeof *x);
    int32_t *y = malloc((size_t)B * sizeof *y);
    srand(1);
    for (int64_t i = 0; i < T * B * 28 * 28; i++) x[i] = (float)rand() / RAND_MAX;
    for (int64_t b = 0; b < B; b++) y[b] = (int32_t)(b % 10);
    run(SF_MEMORY_FULL, T, B, steps, x, y);
    run(SF_MEMORY_RECOMPUTE, T, B, steps, x, y);
    free(x);
    free(y);
    return 0;
}
