/* bench_w3_vgg9.c — workload W3 (docs/notebook/perf.md, Workloads): Liang et al.'s CIFAR-10 VGG9 training step on the GPU
 * through the public network API, fp32 (no TF32): input 3×32×32 repeated over T=10, batch 64, Conv(3→128), eight [BN →
 * LIF → Conv] blocks, BN → LIF → Linear(8192→1024) → BN → LIF → Linear(1024→512) → BN → LIF, mean over T,
 * Linear(512→10), cross-entropy, SGD with momentum 0.9. LIF: tau=2, θ=1, hard reset, sigmoid α=4. The net is told
 * its input is static (gb_static_input: the first convolution runs once per image). Reports the median step time
 * with the input on the device, as the peers keep theirs (gb_step_ms: host clock around sf_net_train_step, which ends
 * in a synchronising read of the loss), the host-to-device copy a step given the input adds, the memory plan, the
 * net's peak bytes and the device memory in use, for both memory modes, then a per-layer breakdown (profiling mode
 * synchronises after each layer). Usage: bench_w3_vgg9 [steps [fp32|tf32|bf16|fp16 [option=value ...]]]: the
 * precision (default fp32, TF32 off; bf16 and fp16 keep activations in 16 bits) and CUDA options (gb_cuda_options:
 * graph=0, conv_workspace_mib=N, conv_algo=auto|cudnn|gemm|nhwc|nchw|split, deterministic=1).
 * Floor (step_floor.h): the convolutions' and linear layers' multiply-adds at the GEMM rate of the precision
 * measured in this run, plus the bytes the BN and LIF layers must move in the recompute mode (10 elements per
 * element of a BN+LIF input) at the copy bandwidth; "x floor" is the step over it. The per-layer table puts each
 * layer's profiled times beside its own floor, split the same way. With SF_BENCH_PROFILE_STEP=1 one more
 * recompute-mode step runs between cudaProfilerStart and cudaProfilerStop, for `ncu --profile-from-start off` (with
 * graph=0, the step's kernels one by one; the plan's measurements stay outside the profiled range). */
#include "core/net_internal.h"
#include "cuda/cuda_backend.h"
#include "gpu_bench.h"
#include "step_floor.h"

#include <cuda_profiler_api.h>

static sf_net *vgg9(sf_memory_mode mode, sf_precision prec, const sf_cuda_options *cuda, int64_t T, int64_t B)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.cuda = *cuda;
    p.device = (sf_device){SF_DEVICE_CUDA, 0};
    p.memory = mode;
    p.precision = prec;
    p.in_channels = 3, p.in_height = 32, p.in_width = 32;
    sf_net *net;
    GB_OK(sf_net_create(&p, &net));
    gb_vgg9_layers(net);
    GB_OK(sf_net_set_static_input(net, gb_static_input()));
    gb_compile_sgd(net, T, B);
    return net;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    if (steps < 1) steps = 10;
    const int64_t T = 10, B = 64;
    char card[256];
    gb_card(card, sizeof card);
    double bw = gb_copy_bandwidth(NULL);
    sf_precision prec = gb_precision(argc > 2 ? argv[2] : NULL);
    const sf_cuda_options cuda = gb_cuda_options(argc, argv, 3);
    double rate = gb_gemm_rate(prec, NULL);
    printf("W3 cifar-vgg9 train step T=%lld B=%lld  precision: %s  conv workspace cap: %d MiB  conv: %s  CUDA graph: "
           "%s  deterministic: %s  static input: %s  card: %s  copy bandwidth: %.0f GB/s  GEMM rate: %.0f TFLOP/s\n",
           (long long)T, (long long)B, sf_precision_name(prec), (int)cuda.conv_workspace_mib,
           sf_conv_algo_name(cuda.conv_algo), cuda.graph ? "on" : "off", cuda.deterministic ? "on" : "off",
           gb_static_input() ? "on" : "off", card, bw, rate / 1e12);
    /* CIFAR-like input: one image per sample, the same at every step (direct encoding) */
    size_t img = 3 * 32 * 32;
    float *x = malloc(sizeof(float) * (size_t)(T * B) * img);
    sf_bench_randn(x, (size_t)B * img, 0.0f, 1.0f, 3);
    for (int64_t t = 1; t < T; t++) memcpy(x + (size_t)(t * B) * img, x, sizeof(float) * (size_t)B * img);
    int32_t labels[64];
    for (int b = 0; b < B; b++) labels[b] = (b * 7) % 10;
    printf("%-10s %9s %9s %9s %9s %8s %12s %12s %12s %10s %9s\n", "memory", "ms/step", "upload_ms", "loss", "floor_ms",
           "x_floor", "plan_MiB", "peak_MiB", "device_MiB", "saved_MiB", "recorded");
    for (int mode = 1; mode >= 0; mode--) {
        double base = gb_used_mib();
        sf_net *net = vgg9(mode ? SF_MEMORY_RECOMPUTE : SF_MEMORY_FULL, prec, &cuda, T, B);
        sf_step_result r;
        double upload_ms;
        const double ms = gb_step_ms(net, x, sizeof(float) * (size_t)(T * B) * img, labels, steps, &r, &upload_ms);
        sf_memory_plan plan;
        GB_OK(sf_net_memory_plan(net, &plan));
        const double floor_ms = gb_step_floor_ms(net, rate, bw);
        printf("%-10s %9.2f %9.2f %9.4f %9.2f %8.2f %12.0f %12.0f %12.0f %10.0f %9s\n", mode ? "recompute" : "full", ms,
               upload_ms, r.loss, floor_ms, ms / floor_ms, plan.total / 1048576.0, sf_net_peak_bytes(net) / 1048576.0,
               gb_used_mib() - base, plan.saved / 1048576.0, sf_net_step_replayed(net) ? "yes" : "no");
        if (mode) { /* where the time goes */
            gb_per_layer_table(net, x, labels, rate, bw);
            const char *prof = getenv("SF_BENCH_PROFILE_STEP");
            if (prof && atoi(prof) == 1) { /* one step for a profiler that starts at cudaProfilerStart */
                GB_OK(sf_net_train_step(net, x, labels, &r));
                GB_CHECK(cudaDeviceSynchronize());
                GB_CHECK(cudaProfilerStart());
                GB_OK(sf_net_train_step(net, x, labels, &r));
                GB_CHECK(cudaDeviceSynchronize());
                GB_CHECK(cudaProfilerStop());
                printf("profiled one recompute step (SF_BENCH_PROFILE_STEP)\n");
            }
        }
        sf_net_free(net);
    }
    free(x);
    return 0;
}
