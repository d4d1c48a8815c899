/* step_floor.h — the floor of a network's training step that the GPU benchmarks set their times against (W3, W9):
 * the convolutions' and linear layers' multiply-adds (forward, backward-data except where the input takes no
 * gradient, backward-filter; as direct convolution, so Winograd can run under it) at the GEMM rate of the precision
 * measured in the run, plus the bytes the other layers must move in the act type at the copy bandwidth. Per element
 * of a fused BN+LIF input the step floor counts 10 (the statistics read it; the forward reads it and writes spikes;
 * the backward recomputes the spikes, then its two passes read the input and the spikes' gradient and write the
 * input's gradient); every other layer counts its layer_elems. The per-layer floor of a convolution or linear layer
 * is its multiply-adds at the GEMM rate or its bytes (input, output, weights) at the copy bandwidth, whichever is
 * longer, and in the backward also the rerun of its input where that input is recomputed spikes (2 elements);
 * every other layer's is its layer_elems at the copy bandwidth. Reads the engine's plan (core/net_internal.h). */
#ifndef SF_BENCH_STEP_FLOOR_H
#define SF_BENCH_STEP_FLOOR_H

#include "core/net_internal.h"
#include "cuda/cuda_backend.h"
#include "gpu_bench.h"

#include <math.h>

/* Multiply-adds of a convolution or linear layer over the step's rows (0 for the other kinds), and its weights. */
static inline double gb_layer_macs(const sf_net *net, const sf_net_layer *l, double *weights)
{
    const sf_net_tensor *in = &net->tensors[l->in], *out = &net->tensors[l->out];
    *weights = 0.0;
    if (l->d.kind == SF_LAYER_CONV2D) {
        *weights = (double)l->conv.cout * l->conv.cin * l->conv.k * l->conv.k;
        return (double)l->conv.n * l->conv.cout * l->conv.cin * l->conv.k * l->conv.k * l->conv.oh * l->conv.ow;
    }
    if (l->d.kind == SF_LAYER_LINEAR) {
        *weights = (double)in->per_sample * (double)out->per_sample;
        return (double)(net->T * net->B) * *weights;
    }
    return 0.0;
}

/* Elements the layer's non-GEMM work must read and write at least, forward and backward (x its input's, y its
 * output's over the step): an absorbed BN's statistics x, 0; the BN+LIF that absorbs it (or a LIF alone) 2x
 * (read x, write spikes), 3x (read x to recompute, read ds, write dx); a BN alone 3x (statistics, then read and
 * write), 5x (its sums read x and dy, then read both and write dx); a residual add 3y, 3y for the sum (dy copied to
 * both inputs) and 5y for AND or IAND (a, b and dy read, both gradients written); a pool x + y both ways; dropout
 * 2x both ways. */
static inline void gb_layer_elems(const sf_net *net, int32_t i, double *fwd, double *bwd)
{
    const sf_net_layer *l = &net->layers[i];
    const double rows = (double)(net->T * net->B), x = rows * (double)net->tensors[l->in].per_sample,
                 y = rows * (double)net->tensors[l->out].per_sample;
    *fwd = *bwd = 0.0;
    switch (l->d.kind) {
    case SF_LAYER_BATCHNORM:
        if (l->absorbed) *fwd = x;
        else *fwd = 3.0 * x, *bwd = 5.0 * x;
        break;
    case SF_LAYER_LIF: *fwd = 2.0 * x, *bwd = 3.0 * x; break;
    case SF_LAYER_ADD: *fwd = 3.0 * y, *bwd = (l->d.connect == SF_CONNECT_ADD ? 3.0 : 5.0) * y; break;
    case SF_LAYER_AVGPOOL2D:
    case SF_LAYER_MAXPOOL2D: *fwd = *bwd = x + y; break;
    case SF_LAYER_DROPOUT: *fwd = *bwd = 2.0 * x; break;
    default: break;
    }
}

/* FLOPs of the GEMM work of one training step, and the elements the step floor's byte count is taken over. */
static inline void gb_floor_terms(const sf_net *net, double *flops, double *elems)
{
    *flops = *elems = 0.0;
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        const sf_net_tensor *in = &net->tensors[l->in], *out = &net->tensors[l->out];
        double w, f, b;
        *flops += 2.0 * gb_layer_macs(net, l, &w) * (in->requires_grad ? 3.0 : 2.0);
        const bool fused = l->d.kind == SF_LAYER_LIF && l->absorbs >= 0;
        if (fused) *elems += 10.0 * (double)(net->T * net->B) * (double)out->per_sample;
        else if (!(l->d.kind == SF_LAYER_BATCHNORM && l->absorbed)) gb_layer_elems(net, i, &f, &b), *elems += f + b;
    }
}

/* The step floor in ms at `rate` FLOP/s and `bw` GB/s. */
static inline double gb_step_floor_ms(const sf_net *net, double rate, double bw)
{
    double flops, elems;
    gb_floor_terms(net, &flops, &elems);
    return (flops / rate + elems * (double)sf_scalar_size(net->be->act) / (bw * 1e9)) * 1e3;
}

/* Layer i's own floor in ms, forward and backward (the top of this file). */
static inline void gb_layer_floor(const sf_net *net, int32_t i, double rate, double bw, double *fwd, double *bwd)
{
    const sf_net_layer *l = &net->layers[i];
    const sf_net_tensor *in = &net->tensors[l->in], *out = &net->tensors[l->out];
    const double rows = (double)(net->T * net->B), es = (double)sf_scalar_size(net->be->act);
    const double ms_per_elem = es / (bw * 1e9) * 1e3, x = rows * (double)in->per_sample,
                 y = rows * (double)out->per_sample;
    double w;
    const double mac = gb_layer_macs(net, l, &w);
    if (mac > 0.0) {
        const double flop_ms = 2.0 * mac / rate * 1e3;
        *fwd = fmax(flop_ms, (x + y + w) * ms_per_elem);
        *bwd =
            fmax(flop_ms * (in->requires_grad ? 2.0 : 1.0), (x + y + w + (in->requires_grad ? x : 0.0)) * ms_per_elem);
        if (in->keep == SF_KEEP_RECOMPUTE) *bwd += 2.0 * x * ms_per_elem;
        return;
    }
    gb_layer_elems(net, i, fwd, bwd);
    *fwd *= ms_per_elem, *bwd *= ms_per_elem;
}

/* Three profiled steps (synchronised after each layer): each layer's mean times beside its own floor, the totals,
 * the net's summary and the convolution choices. Leaves profiling off. */
static inline void gb_per_layer_table(sf_net *net, const float *x, const int32_t *labels, double rate, double bw)
{
    sf_step_result r;
    GB_OK(sf_net_set_profiling(net, 1));
    for (int i = 0; i < 3; i++) GB_OK(sf_net_train_step(net, x, labels, &r));
    const int32_t nl = sf_net_num_layers(net);
    sf_layer_timing *lt = calloc((size_t)nl, sizeof *lt);
    GB_OK(sf_net_layer_timings(net, lt, nl));
    printf("per-layer (profiling mode, synchronised, mean of 3 steps; layers as in the summary below; each layer's own "
           "floor, and its time over it):\n%5s %-10s %8s %8s %9s %9s %7s %7s\n",
           "layer", "kind", "fwd_ms", "bwd_ms", "fwd_floor", "bwd_floor", "x_fwd", "x_bwd");
    double sf = 0, sb = 0, ff = 0, fb = 0;
    for (int32_t i = 0; i < nl; i++) {
        double lf, lb;
        gb_layer_floor(net, i, rate, bw, &lf, &lb);
        const double f = lt[i].forward_ms / 3, b = lt[i].backward_ms / 3;
        printf("%5d %-10s %8.3f %8.3f %9.3f %9.3f %7.2f %7.2f\n", i, sf_layer_kind_name(net->layers[i].d.kind), f, b,
               lf, lb, lf > 0 ? f / lf : 0.0, lb > 0 ? b / lb : 0.0);
        sf += f, sb += b, ff += lf, fb += lb;
    }
    printf("total fwd %.2f ms (floor %.2f), bwd %.2f ms (floor %.2f)\n%s\n", sf, ff, sb, fb, sf_net_summary(net));
    free(lt);
    static char rep[1 << 17];
    sf_cuda_conv_report(net->be, rep, sizeof rep);
    fputs(rep, stdout);
    GB_OK(sf_net_set_profiling(net, 0));
}

#endif
