/* w4_net.h — workload W4 (docs/notebook/perf.md, Workloads; seed paper 000's setting) as a net of the public API, shared by
 * the CPU benchmark (bench_cpu_w4.c) and the GPU one (bench/gpu/bench_w4.c): 700 inputs of Bernoulli spikes,
 * two hidden layers of 1472 LIF neurons (W4ff) or recurrent LIF neurons (W4rec), a linear readout of 20 classes,
 * cross-entropy on the T-mean of its output, Adam. LIF: tau 2, decay_input, θ 1, hard reset to 0, detach_reset,
 * fast_sigmoid β = 10. Natural activity: PyTorch's default initialisation with the hidden layers' feed-forward
 * weights times 7; fixed activity: every hidden neuron fires at every step (θ = -1e9). Optionally the hidden layers
 * train with seed paper 000's sparse gradient (grad_threshold 0.5, grad_cut). Header-only. */
#ifndef SF_BENCH_W4_NET_H
#define SF_BENCH_W4_NET_H

#include "core/rng.h"
#include "spikefuse.h"

#include <stdint.h>
#include <stdio.h>

enum { W4_IN = 700, W4_HIDDEN = 1472, W4_OUT = 20, W4_T = 100 };
#define W4_DENSITY 0.05f
#define W4_GAIN 7.0f

typedef struct w4_options {
    int rec;              /* W4rec: recurrent hidden layers */
    int fixed;            /* fixed activity */
    sf_sparse_mode sparse;
    sf_device device;
    int64_t T, B;
    int cut;              /* hidden layers with grad_threshold 0.5 and grad_cut (seed paper 000's sparse gradient) */
    int graph;            /* CUDA: replay each step as a CUDA graph */
    sf_precision precision; /* CUDA: fp32 (0, the default), tf32, bf16 or fp16 */
} w4_options;

static inline sf_status w4_add(sf_net *net, sf_layer_kind kind, int32_t out, float gain, const w4_options *o)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d);
    d.out_features = out;
    d.init_gain = gain;
    d.lif.surrogate = SF_SURROGATE_FAST_SIGMOID;
    d.lif.alpha = 10.0f;
    d.lif.detach_reset = 1;
    if (o->fixed) d.lif.v_threshold = -1e9f;
    d.lif.use_grad_threshold = d.lif.grad_cut = o->cut;
    d.lif.grad_threshold = 0.5f;
    return sf_net_add(net, &d, NULL);
}

/* The W4 net's layers with `hidden` neurons in each hidden layer (W4_HIDDEN; W5weak grows it with the GPUs), not
 * compiled yet (a job attaches it first: mpi_w5). */
static inline sf_status w4_create(const w4_options *o, int32_t hidden, sf_net **out)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = o->device;
    p.in_channels = W4_IN;
    p.sparse = o->sparse;
    p.input_spikes = 1;
    p.cuda.graph = o->graph;
    p.precision = o->precision;
    sf_net *net = NULL;
    sf_status s = sf_net_create(&p, &net);
    sf_layer_kind neuron = o->rec ? SF_LAYER_RLIF : SF_LAYER_LIF;
    for (int k = 0; k < 2 && s == SF_OK; k++) {
        s = w4_add(net, SF_LAYER_LINEAR, hidden, W4_GAIN, o);
        if (s == SF_OK) s = w4_add(net, neuron, 0, 1.0f, o);
    }
    if (s == SF_OK) s = w4_add(net, SF_LAYER_LINEAR, W4_OUT, 1.0f, o);
    if (s != SF_OK) {
        sf_net_free(net);
        net = NULL;
    }
    *out = net;
    return s;
}

/* Compiles a W4 net for (T, B) and gives it W4's optimizer: Adam, lr 1e-3. */
static inline sf_status w4_compile(sf_net *net, const w4_options *o)
{
    sf_status s = sf_net_compile(net, o->T, o->B);
    sf_optim_params opt;
    sf_optim_default_params(&opt);
    opt.kind = SF_OPT_ADAM;
    opt.lr = 1e-3f;
    return s == SF_OK ? sf_net_set_optimizer(net, &opt) : s;
}

/* The W4 net, compiled for (T, B), with its Adam optimizer. */
static inline sf_status w4_build(const w4_options *o, sf_net **out)
{
    sf_status s = w4_create(o, W4_HIDDEN, out);
    if (s == SF_OK) s = w4_compile(*out, o);
    if (s != SF_OK) {
        sf_net_free(*out);
        *out = NULL;
    }
    return s;
}

/* The input: Bernoulli(W4_DENSITY) spikes [T, B, 700] and labels, from a fixed seed. */
static inline void w4_batch(int64_t T, int64_t B, float *x, int32_t *labels)
{
    for (int64_t i = 0; i < T * B * W4_IN; i++) x[i] = sf_uniform(4, 1, (uint64_t)i) < W4_DENSITY ? 1.0f : 0.0f;
    for (int64_t b = 0; b < B; b++) labels[b] = (int32_t)(sf_hash3(4, 2, (uint64_t)b) % W4_OUT);
}

/* " L<i> <density> S|D/S|D" for each event-driven layer: its input density and the paths of the last step. */
static inline void w4_paths(const sf_net *net, char *buf, size_t cap)
{
    sf_layer_sparsity q[5];
    sf_net_layer_sparsity(net, q, 5);
    buf[0] = 0;
    for (int i = 0, n = 0; i < 5 && (size_t)n < cap; i++)
        if (q[i].eligible)
            n += snprintf(buf + n, cap - (size_t)n, " L%d %.3f %s/%s", i, q[i].density, q[i].forward_sparse ? "S" : "D",
                          q[i].backward_sparse ? "S" : "D");
}

static inline const char *w4_mode_name(const w4_options *o)
{
    if (o->cut) return o->sparse == SF_SPARSE_OFF ? "dense+cut" : o->sparse == SF_SPARSE_ON ? "sparse+cut" : "auto+cut";
    return o->sparse == SF_SPARSE_OFF ? "dense" : o->sparse == SF_SPARSE_ON ? "sparse" : "auto";
}

#endif
