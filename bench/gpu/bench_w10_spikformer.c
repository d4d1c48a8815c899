/* bench_w10_spikformer.c — workload W10 (/work/shared/workloads.md): Spikformer-8-384's training step on the GPU
 * through the public API, as examples/imagenet_spikformer.ini builds it (the config is read, so the benchmark times
 * the example): 3×224×224 input repeated over T=4 (direct encoding), batch 32, the /16 SPS stem to 14×14 tokens, 8
 * blocks of SSA (12 heads) and MLP, the mean over tokens and T, a head to 1000 classes, cross-entropy, AdamW (lr 5e-4,
 * weight decay 0.01: the peer's torch.optim.AdamW(lr=5e-4)), told its input is static as the trainer tells it
 * (gb_static_input). Variant `cifar`: Spikformer-4-384 of
 * examples/cifar10_spikformer.ini on 3×32×32, T=4, batch 64 (8×8 tokens). For the memory modes full, recompute and
 * lean: the median step time with the input on the device, as the peers keep theirs (gb_step_ms: host clock around
 * sf_net_train_step, which ends in a synchronising read of the loss), the host-to-device copy a step given the input
 * adds (upload_ms),
 * the loss, the net's peak bytes, the device memory it holds and the memory plan.
 * Floor: the multiply-adds of the convolutions, token linears and attention products (forward; backward-data except
 * the first layer's; backward-weight; the SSA's backward rebuilds Kᵀ·V and runs four products more) at the bf16 GEMM
 * rate measured in this run, the rate for every precision, plus the bytes the neuron and BN passes move at the
 * measured copy bandwidth in the act type: per element of a fused BN→LIF's input 10 (W3's count: the statistics, the
 * forward's read and spike write, the backward's recompute and its two passes), of a LIF alone 5 (read x, write s;
 * read x and ds, write dx). "x floor" is the step over it. Then the floor's terms and, for recompute mode, a
 * breakdown by layer kind (profiling mode synchronises after each layer).
 * Usage: bench_w10_spikformer [steps [fp32|tf32|bf16|fp16 [w10|cifar [option=value ...]]]] (default 10 fp32 w10; the
 * options: gb_cuda_options's graph=0, conv_workspace_mib=N, conv_algo=..., deterministic=1). */
#include "core/net_internal.h"
#include "gpu_bench.h"
#include "spikefuse_train.h"


typedef struct w10_variant {
    const char *name, *config, *what;
    int64_t T, B;
} w10_variant;

static const w10_variant variants[] = {
    {"w10", "imagenet_spikformer.ini", "Spikformer-8-384 224x224", 4, 32},
    {"cifar", "cifar10_spikformer.ini", "Spikformer-4-384 32x32", 4, 64},
};

/* The variant's net from its example config (found beside this file: CMake compiles it by its full path). */
static sf_net *build(const w10_variant *v, sf_memory_mode mode, sf_precision prec, const sf_cuda_options *cuda)
{
    const char *slash = strrchr(__FILE__, '/');
    char path[1024];
    snprintf(path, sizeof path, "%.*s/../../examples/%s", slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".",
             v->config);
    sf_config *cfg = NULL;
    GB_OK(sf_config_load(path, &cfg));
    cfg->net.device = (sf_device){SF_DEVICE_CUDA, 0};
    cfg->net.memory = mode;
    cfg->net.precision = prec;
    cfg->net.cuda = *cuda;
    sf_net *net = NULL;
    GB_OK(sf_config_build_net(cfg, &net));
    sf_config_free(cfg);
    GB_OK(sf_net_set_static_input(net, gb_static_input()));
    GB_OK(sf_net_compile(net, v->T, v->B));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.kind = SF_OPT_ADAMW;
    o.lr = 5e-4f;
    o.weight_decay = 0.01f;
    GB_OK(sf_net_set_optimizer(net, &o));
    return net;
}

/* Multiply-adds of layer i's forward, and how many passes of that size its backward runs. */
static double layer_macs(const sf_net *net, int32_t i, double *bwd_passes)
{
    const sf_net_layer *l = &net->layers[i];
    const sf_net_tensor *in = &net->tensors[l->in], *out = &net->tensors[l->out];
    const double rows = (double)(net->T * net->B);
    *bwd_passes = in->requires_grad ? 2.0 : 1.0; /* dW, and dx where the input takes a gradient */
    switch (l->d.kind) {
    case SF_LAYER_CONV2D:
        return (double)l->conv.n * l->conv.cout * l->conv.cin * l->conv.k * l->conv.k * l->conv.oh * l->conv.ow;
    case SF_LAYER_LINEAR: /* over T·B rows of a flat input, or T·B·N tokens of c channels */
        return l->tokens ? rows * in->h * (double)in->c * out->c : rows * (double)in->per_sample * out->per_sample;
    case SF_LAYER_SSA: { /* per set and head: Kᵀ·V and Q·M, each n·dh² */
        const double n = out->h, d = out->c, dh = d / l->d.heads;
        *bwd_passes = 2.5; /* M again, G = Qᵀ·dY, dQ, dK, dV: five products of n·dh² */
        return rows * 2.0 * n * d * dh;
    }
    default: *bwd_passes = 0.0; return 0.0;
    }
}

/* The floor's terms: FLOPs of a step, and elements the neuron and BN passes move. */
static void floor_terms(const sf_net *net, double *flops, double *elems)
{
    *flops = *elems = 0.0;
    const double rows = (double)(net->T * net->B);
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        double passes;
        const double mac = layer_macs(net, i, &passes);
        *flops += 2.0 * mac * (1.0 + passes);
        if (l->d.kind == SF_LAYER_LIF)
            *elems += (l->absorbs >= 0 ? 10.0 : 5.0) * rows * (double)net->tensors[l->out].per_sample;
    }
}

/* Profiled forward and backward ms per layer kind, mean of 3 synchronised steps. */
static void kind_breakdown(sf_net *net, const float *x, const int32_t *labels)
{
    sf_step_result r;
    GB_OK(sf_net_set_profiling(net, 1));
    for (int i = 0; i < 3; i++) GB_OK(sf_net_train_step(net, x, labels, &r));
    const int32_t nl = sf_net_num_layers(net);
    sf_layer_timing *lt = calloc((size_t)nl, sizeof *lt);
    GB_OK(sf_net_layer_timings(net, lt, nl));
    double fwd[64] = {0}, bwd[64] = {0};
    int count[64] = {0};
    for (int32_t i = 0; i < nl; i++) {
        const int k = (int)net->layers[i].d.kind;
        if (k < 0 || k >= 64) continue;
        fwd[k] += lt[i].forward_ms / 3, bwd[k] += lt[i].backward_ms / 3, count[k]++;
    }
    printf("per-layer kind (recompute, profiling mode: synchronised after each layer, mean of 3 steps):\n%-11s %6s "
           "%9s %9s\n",
           "kind", "layers", "fwd_ms", "bwd_ms");
    for (int k = 0; k < 64; k++)
        if (count[k])
            printf("%-11s %6d %9.3f %9.3f\n", sf_layer_kind_name((sf_layer_kind)k), count[k], fwd[k], bwd[k]);
    free(lt);
    GB_OK(sf_net_set_profiling(net, 0));
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    if (steps < 1) steps = 10;
    const sf_precision prec = gb_precision(argc > 2 ? argv[2] : NULL);
    const w10_variant *v = &variants[0];
    if (argc > 3) {
        v = NULL;
        for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++)
            if (strcmp(argv[3], variants[k].name) == 0) v = &variants[k];
        if (!v) {
            fprintf(stderr, "variant '%s': expected w10 or cifar\n", argv[3]);
            return 2;
        }
    }
    const sf_cuda_options cuda = gb_cuda_options(argc, argv, 4);
    char card[256];
    gb_card(card, sizeof card);
    const double bw = gb_copy_bandwidth(NULL), bf16_rate = gb_gemm_rate(SF_PRECISION_BF16, NULL);
    printf("W10 %s (%s) train step T=%lld B=%lld AdamW  precision: %s  CUDA graph: %s  static input: %s  card: %s  "
           "copy bandwidth: %.0f GB/s  bf16 GEMM rate: %.0f TFLOP/s\n",
           v->name, v->what, (long long)v->T, (long long)v->B, sf_precision_name(prec), cuda.graph ? "on" : "off",
           gb_static_input() ? "on" : "off", card, bw, bf16_rate / 1e12);
    sf_net *probe = build(v, SF_MEMORY_RECOMPUTE, prec, &cuda);
    const int32_t C = probe->p.in_channels, H = probe->p.in_height, W = probe->p.in_width;
    const int32_t classes = sf_net_classes(probe);
    sf_net_free(probe);
    const size_t img = (size_t)C * H * W;
    float *x = malloc(sizeof(float) * (size_t)(v->T * v->B) * img);
    sf_bench_randn(x, (size_t)v->B * img, 0.0f, 1.0f, 3);
    for (int64_t t = 1; t < v->T; t++) memcpy(x + (size_t)(t * v->B) * img, x, sizeof(float) * (size_t)v->B * img);
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)v->B);
    for (int64_t b = 0; b < v->B; b++) labels[b] = (int32_t)((b * 7) % classes);
    printf("%-10s %9s %9s %9s %9s %8s %10s %11s %10s %10s %9s\n", "memory", "ms/step", "upload_ms", "loss", "floor_ms",
           "x_floor", "peak_MiB", "device_MiB", "plan_MiB", "saved_MiB", "recorded");
    const sf_memory_mode modes[] = {SF_MEMORY_FULL, SF_MEMORY_RECOMPUTE, SF_MEMORY_LEAN};
    double flops_seen = 0.0, elems_seen = 0.0;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        const double base = gb_used_mib();
        sf_net *net = build(v, modes[m], prec, &cuda);
        sf_step_result r;
        double upload_ms;
        const double ms =
            gb_step_ms(net, x, sizeof(float) * (size_t)(v->T * v->B) * img, labels, steps, &r, &upload_ms);
        sf_memory_plan plan;
        GB_OK(sf_net_memory_plan(net, &plan));
        double flops, elems;
        floor_terms(net, &flops, &elems);
        const double floor_ms =
            (flops / bf16_rate + elems * (double)sf_scalar_size(net->be->act) / (bw * 1e9)) * 1e3;
        printf("%-10s %9.2f %9.2f %9.4f %9.2f %8.2f %10.0f %11.0f %10.0f %10.0f %9s\n", sf_memory_mode_name(modes[m]),
               ms, upload_ms, r.loss, floor_ms, ms / floor_ms, sf_net_peak_bytes(net) / 1048576.0, gb_used_mib() - base,
               plan.total / 1048576.0, plan.saved / 1048576.0, sf_net_step_replayed(net) ? "yes" : "no");
        if (modes[m] == SF_MEMORY_RECOMPUTE) flops_seen = flops, elems_seen = elems;
        sf_net_free(net);
    }
    printf("floor terms: %.1f GFLOP of products, %.2f G elements of neuron and BN passes\n", flops_seen / 1e9,
           elems_seen / 1e9);
    sf_net *net = build(v, SF_MEMORY_RECOMPUTE, prec, &cuda);
    kind_breakdown(net, x, labels);
    sf_net_free(net);
    free(x);
    free(labels);
    return 0;
}
