/* bench_w5_plan.c — W5time's memory plan per process (docs/notebook/perf.md, W5), computed on the CPU: under
 * `mpirun -np G bench_w5_plan [shard=0|1]` every process compiles W5time's net (784 → Linear → LIF(4096) → Linear →
 * LIF(4096) → Linear(10), T = 1024, B = 32, recompute, SGD momentum) for its time segment (time_parallel = G), the
 * optimizer state sharded over the segments or whole (shard, default 1); rank 0 prints the largest plan of any
 * process, part by part, and its ratio to one process's whole plan. A measurement program, not a test. */
#include "distributed/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(sf_status s, const char *what)
{
    if (s == SF_OK) return;
    fprintf(stderr, "%s: %s: %s\n", what, sf_status_str(s), sf_last_error());
    exit(1);
}

static void add(sf_net *net, sf_layer_kind kind, int32_t out)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    d.out_features = out;
    die(sf_net_add(net, &d, NULL), "adding a layer");
}

/* The plan of W5time's net on this process of `dist` (NULL: alone). */
static sf_memory_plan plan_of(sf_dist *dist)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.in_channels = 784;
    sf_net *net;
    die(sf_net_create(&p, &net), "creating the net");
    add(net, SF_LAYER_LINEAR, 4096);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_LINEAR, 4096);
    add(net, SF_LAYER_LIF, 0);
    add(net, SF_LAYER_LINEAR, 10);
    if (dist) die(sf_dist_attach(dist, net), "joining the job");
    die(sf_net_compile(net, 1024, 32), "compiling");
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.momentum = 0.9f;
    die(sf_net_set_optimizer(net, &o), "setting the optimizer");
    sf_memory_plan m;
    die(sf_net_memory_plan(net, &m), "the plan");
    sf_net_free(net);
    return m;
}

int main(int argc, char **argv)
{
    sf_dist_params dp;
    sf_dist_default_params(&dp);
    dp.time_parallel = 0; /* every process is one segment of T */
    if (argc > 1 && strncmp(argv[1], "shard=", 6) == 0) dp.shard_optimizer = atoi(argv[1] + 6);
    sf_dist *d;
    die(sf_dist_init(&dp, &d), "joining the job");
    const int P = sf_dist_size(d), me = sf_dist_rank(d);
    /* the largest part of any process: each fills its row, the sum over the world gathers them */
    enum { PARAMS, GRADS, OPTIMIZER, SAVED, WORKSPACE, TOTAL, COLS };
    double *all = calloc((size_t)(P * COLS), sizeof *all), *row = all + me * COLS;
    sf_memory_plan m = plan_of(d);
    const double mib = 1048576.0;
    row[PARAMS] = m.params / mib, row[GRADS] = m.grads / mib, row[OPTIMIZER] = m.optimizer / mib;
    row[SAVED] = m.saved / mib, row[WORKSPACE] = m.workspace / mib, row[TOTAL] = m.total / mib;
    die(sf_dist_sum_all(d, all, P * COLS), "gathering the plans");
    if (me == 0) {
        int worst = 0;
        for (int r = 1; r < P; r++)
            if (all[r * COLS + TOTAL] > all[worst * COLS + TOTAL]) worst = r;
        const double *w = all + worst * COLS;
        const double one = plan_of(NULL).total / mib; /* one process, the whole net */
        printf("W5time plan per process, time_parallel %d, optimizer %s: %.0f MiB (%.3f of one process's %.0f MiB): "
               "parameters %.1f, gradients %.1f, optimizer %.1f, saved %.0f, workspace %.0f\n",
               P, dp.shard_optimizer && P > 1 ? "sharded" : "whole", w[TOTAL], w[TOTAL] / one, one, w[PARAMS],
               w[GRADS], w[OPTIMIZER], w[SAVED], w[WORKSPACE]);
    }
    free(all);
    sf_dist_free(d);
    return 0;
}
