/* bench_w9_sew.c — workload W9 (/work/shared/workloads.md, docs/performance.md): SEW-ResNet-18 (connect ADD, IF neurons,
 * ATan α 2, detach_reset) on ImageNet-shaped input, one full training step on the GPU: [T=4, B=32, 3, 224, 224]
 * (each image repeated over T), 1000 classes, cross-entropy on the mean over T, SGD with momentum 0.9. The network is
 * examples/imagenet_sew_resnet<depth>.ini as the trainer builds it (SEW-ResNet-34 and -50 with depth=34, 50; any
 * config, e.g. the plain Spiking ResNets, with config=PATH), on the device, in the precision and memory modes asked,
 * told its input is static as the trainer tells it (gb_static_input).
 * Reports per memory mode the median step time with the input on the device, as the peers keep theirs (gb_step_ms:
 * host clock around sf_net_train_step, which ends in a synchronising read of the loss), the host-to-device copy a
 * step given the input adds (upload_ms), images/s, the step floor (step_floor.h: the convolutions' and the linear
 * layer's multiply-adds at the GEMM rate of the precision measured in this run, plus the bytes the BN+IF, add and
 * pool layers must move, at the copy bandwidth) and the step over it, the memory plan, the net's peak bytes and the
 * device memory in use; then, for the first mode, a per-layer breakdown (profiling mode, synchronised after each
 * layer) beside each layer's own floor, and the convolution choices.
 * Usage: bench_w9_sew [steps [fp32|tf32|bf16|fp16 [key=value ...]]], run from the repository root: steps (default
 * 10), the precision (default fp32, TF32 off; bf16 and fp16 keep activations in 16 bits), and keys depth=18|34|50,
 * config=PATH, memory=MODE[,MODE...] (full, recompute, lean; default all three), T=N, B=N, layers=0|1 (the per-layer
 * table, default 1), and the CUDA options of gb_cuda_options (graph=0, conv_workspace_mib=N, conv_algo=...,
 * deterministic=1). */
#include "core/net_internal.h"
#include "cuda/cuda_backend.h"
#include "gpu_bench.h"
#include "spikefuse_train.h"
#include "step_floor.h"


typedef struct w9_args {
    int steps, T, B, layers;
    sf_precision prec;
    char config[512];
    sf_memory_mode modes[3];
    int n_modes;
    sf_cuda_options cuda;
} w9_args;

/* This program's keys out of argv[3...]; the rest go to gb_cuda_options. */
static w9_args parse(int argc, char **argv)
{
    w9_args a = {.steps = argc > 1 ? atoi(argv[1]) : 10,
                 .T = 4,
                 .B = 32,
                 .layers = 1,
                 .n_modes = 3,
                 .modes = {SF_MEMORY_FULL, SF_MEMORY_RECOMPUTE, SF_MEMORY_LEAN}};
    if (a.steps < 1) a.steps = 10;
    a.prec = gb_precision(argc > 2 ? argv[2] : NULL);
    snprintf(a.config, sizeof a.config, "examples/imagenet_sew_resnet18.ini");
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    int n_rest = 0;
    rest[n_rest++] = argv[0];
    for (int i = 3; i < argc; i++) {
        const char *v = strchr(argv[i], '=');
        if (!v) {
            rest[n_rest++] = argv[i];
            continue;
        }
        const size_t k = (size_t)(v - argv[i]);
        ++v;
        if (k == 5 && strncmp(argv[i], "depth", k) == 0) {
            if (strcmp(v, "18") && strcmp(v, "34") && strcmp(v, "50")) {
                fprintf(stderr, "depth=%s: expected 18, 34 or 50\n", v);
                exit(2);
            }
            snprintf(a.config, sizeof a.config, "examples/imagenet_sew_resnet%s.ini", v);
        } else if (k == 6 && strncmp(argv[i], "config", k) == 0) {
            snprintf(a.config, sizeof a.config, "%s", v);
        } else if (k == 6 && strncmp(argv[i], "memory", k) == 0) {
            a.n_modes = 0;
            for (const char *p = v; *p && a.n_modes < 3;) {
                const size_t len = strcspn(p, ",");
                const char *names[3] = {"full", "recompute", "lean"};
                int m = -1;
                for (int j = 0; j < 3; j++)
                    if (strlen(names[j]) == len && strncmp(p, names[j], len) == 0) m = j;
                if (m < 0) {
                    fprintf(stderr, "memory=%s: expected full, recompute or lean, comma-separated\n", v);
                    exit(2);
                }
                a.modes[a.n_modes++] = (sf_memory_mode)m;
                p += len + (p[len] == ',');
            }
        } else if (k == 1 && (argv[i][0] == 'T' || argv[i][0] == 'B')) {
            *(argv[i][0] == 'T' ? &a.T : &a.B) = atoi(v);
        } else if (k == 6 && strncmp(argv[i], "layers", k) == 0) {
            a.layers = atoi(v);
        } else {
            rest[n_rest++] = argv[i];
        }
    }
    if (a.T < 1 || a.B < 1 || a.n_modes == 0) {
        fprintf(stderr, "T, B must be at least 1 and memory must name a mode\n");
        exit(2);
    }
    a.cuda = gb_cuda_options(n_rest, rest, 1);
    free(rest);
    return a;
}

static sf_net *build(const w9_args *a, sf_memory_mode mode, int32_t *classes, int32_t *side)
{
    sf_config *cfg = NULL;
    GB_OK(sf_config_load(a->config, &cfg));
    cfg->net.device = (sf_device){SF_DEVICE_CUDA, 0};
    cfg->net.precision = a->prec;
    cfg->net.memory = mode;
    cfg->net.cuda = a->cuda;
    sf_net *net = NULL;
    GB_OK(sf_config_build_net(cfg, &net));
    *classes = cfg->classes;
    *side = cfg->net.in_height;
    if (cfg->net.in_channels != 3 || cfg->net.in_width != *side) {
        fprintf(stderr, "%s: expected a 3xNxN image input\n", a->config);
        exit(2);
    }
    sf_config_free(cfg);
    GB_OK(sf_net_set_static_input(net, gb_static_input()));
    GB_OK(sf_net_compile(net, a->T, a->B));
    return net;
}

int main(int argc, char **argv)
{
    const w9_args a = parse(argc, argv);
    char card[256];
    gb_card(card, sizeof card);
    const double bw = gb_copy_bandwidth(NULL), rate = gb_gemm_rate(a.prec, NULL);
    printf("W9 sew-imagenet train step %s T=%d B=%d  precision: %s  conv workspace cap: %d MiB  conv: %s  CUDA graph: "
           "%s  deterministic: %s  static input: %s  card: %s  copy bandwidth: %.0f GB/s  GEMM rate: %.0f TFLOP/s\n",
           a.config, a.T, a.B, sf_precision_name(a.prec), (int)a.cuda.conv_workspace_mib,
           sf_conv_algo_name(a.cuda.conv_algo), a.cuda.graph ? "on" : "off", a.cuda.deterministic ? "on" : "off",
           gb_static_input() ? "on" : "off", card, bw, rate / 1e12);
    printf("%-10s %9s %9s %9s %9s %9s %8s %12s %12s %12s %10s %9s\n", "memory", "ms/step", "upload_ms", "images/s",
           "loss", "floor_ms", "x_floor", "plan_MiB", "peak_MiB", "device_MiB", "saved_MiB", "recorded");
    float *x = NULL;
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)a.B);
    for (int k = 0; k < a.n_modes; k++) {
        const double base = gb_used_mib();
        int32_t classes, side;
        sf_net *net = build(&a, a.modes[k], &classes, &side);
        const size_t img = (size_t)3 * side * side;
        if (!x) { /* one image per sample, the same at every step (direct encoding) */
            x = malloc(sizeof(float) * (size_t)(a.T * a.B) * img);
            sf_bench_randn(x, (size_t)a.B * img, 0.0f, 1.0f, 9);
            for (int t = 1; t < a.T; t++) memcpy(x + (size_t)t * a.B * img, x, sizeof(float) * (size_t)a.B * img);
            for (int b = 0; b < a.B; b++) labels[b] = (b * 37) % classes;
        }
        sf_step_result r;
        double upload_ms;
        const double ms =
            gb_step_ms(net, x, sizeof(float) * (size_t)(a.T * a.B) * img, labels, a.steps, &r, &upload_ms);
        const double floor_ms = gb_step_floor_ms(net, rate, bw);
        sf_memory_plan plan;
        GB_OK(sf_net_memory_plan(net, &plan));
        printf("%-10s %9.2f %9.2f %9.0f %9.4f %9.2f %8.2f %12.0f %12.0f %12.0f %10.0f %9s\n",
               sf_memory_mode_name(a.modes[k]), ms, upload_ms, a.B * 1e3 / ms, r.loss, floor_ms, ms / floor_ms,
               plan.total / 1048576.0, sf_net_peak_bytes(net) / 1048576.0, gb_used_mib() - base, plan.saved / 1048576.0,
               sf_net_step_replayed(net) ? "yes" : "no");
        if (k == 0 && a.layers) gb_per_layer_table(net, x, labels, rate, bw);
        sf_net_free(net);
    }
    free(x);
    free(labels);
    return 0;
}
