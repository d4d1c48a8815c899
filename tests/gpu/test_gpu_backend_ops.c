/* test_gpu_backend_ops.c — the backend op harness (tests/ops/) on the CUDA backend: every row of the case table runs
 * on a CUDA backend of each precision its row names (fp32, tf32, bf16, fp16) against the fp32 CPU backend, the same
 * random inputs on both (rounded to the 16-bit type first under bf16 and fp16, so what is measured is the op's own
 * error), every output poisoned first, with the bounds each family states per precision (op_neuron.c, op_layers.c);
 * the convolutions also take NHWC layouts. Then the convolutions again through every path the backend chooses
 * between (cuDNN on NCHW, im2col + GEMM, cuDNN on NHWC copies, the measured choice) on the whole batch and in chunks
 * (a 1 MiB workspace cap), and the fp32 convolutions of spikes on the split path (products of exact TF32 parts),
 * whose report must show every spike op on it. Last, the table must cover every op of core/backend_ops.h and every
 * op of the CUDA backend must have been called. The largest error of each backend is printed. */
#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "ops/op_harness.h"

#include <stdio.h>
#include <string.h>

static sf_backend *cpu;

/* Runs the rows that have every flag of `need` on a CUDA backend of precision p with the given conv options (NULL:
 * the defaults); returns the backend's conv report (static storage) or NULL when it could not be created. */
static const char *run_on(sf_precision p, const sf_cuda_options *opt, unsigned need, bool exact_parts)
{
    static char report[1 << 17];
    sf_backend *gpu = NULL;
    CHECK_OK(sf_cuda_backend_create(0, p, opt, &gpu));
    if (!gpu) return NULL;
    const sf_scalar act = p == SF_PRECISION_BF16   ? SF_SCALAR_BF16
                          : p == SF_PRECISION_FP16 ? SF_SCALAR_F16
                                                   : SF_SCALAR_F32;
    CHECK(gpu->act == act, "the %s backend stores activations as type %d", sf_precision_name(p), (int)gpu->act);
    op_harness h;
    op_harness_init(&h, cpu, gpu, p, false);
    h.nhwc_layouts = true;
    h.exact_parts = exact_parts;
    op_run_cases(&h, need, 0);
    if (opt)
        printf("%s, conv %s, workspace %d MiB: worst relative error %.2e\n", sf_precision_name(p),
               sf_conv_algo_name(opt->conv_algo), (int)opt->conv_workspace_mib, h.worst);
    else printf("%s, every op: worst relative error %.2e\n", sf_precision_name(p), h.worst);
    sf_cuda_conv_report(gpu, report, sizeof report);
    op_backend_free(gpu);
    return report;
}

/* Under conv_algo = nhwc every pass ran on NHWC copies somewhere (not only its NCHW fallback). */
static void check_nhwc_ran(const char *report, sf_precision p, int32_t ws)
{
    CHECK(strstr(report, "fwd        nhwc") && strstr(report, "bwd_data   nhwc") && strstr(report, "bwd_filter nhwc"),
          "%s, conv_algo = nhwc at %d MiB: no op ran on NHWC copies:\n%s", sf_precision_name(p), (int)ws, report);
}

/* Under conv_algo = split every op of a spike shape ran on the split path. */
static void check_split_ran(const char *report, int32_t ws)
{
    int spikes = 0, split = 0;
    for (const char *l = report; (l = strstr(l, " spikes |")) != NULL; l++) {
        spikes++;
        const char *end = strchr(l, '\n'), *q = strstr(l, " split ");
        split += q && (!end || q < end) && q < l + 40;
    }
    CHECK(spikes > 0 && split == spikes, "conv_algo = split at %d MiB: %d of %d spike ops on the split path:\n%s",
          (int)ws, split, spikes, report);
}

int main(void)
{
    if (sf_cuda_device_count() == 0) {
        fprintf(stderr, "test_gpu_backend_ops: no CUDA device\n");
        return 1;
    }
    CHECK_OK(sf_cpu_backend_create(&cpu));
    if (!cpu) return tu_finish("test_gpu_backend_ops");
    const sf_precision every[] = {SF_PRECISION_FP32, SF_PRECISION_TF32, SF_PRECISION_BF16, SF_PRECISION_FP16};
    const sf_conv_algo paths[] = {SF_CONV_ALGO_CUDNN, SF_CONV_ALGO_GEMM, SF_CONV_ALGO_NHWC, SF_CONV_ALGO_AUTO};
    for (int k = 0; k < 4; k++) {
        run_on(every[k], NULL, 0, false);
        for (int a = 0; a < 4; a++)
            for (int32_t ws = 1; ws <= 512; ws *= 512) {
                if (paths[a] == SF_CONV_ALGO_AUTO && ws == 512) continue; /* the defaults, run above */
                const sf_cuda_options opt = {.graph = 1, .conv_workspace_mib = ws, .conv_algo = paths[a]};
                const char *report = run_on(every[k], &opt, OP_CONV_PATHS, false);
                if (report && paths[a] == SF_CONV_ALGO_NHWC &&
                    (every[k] == SF_PRECISION_FP32 || every[k] == SF_PRECISION_TF32))
                    check_nhwc_ran(report, every[k], ws);
            }
    }
    for (int32_t ws = 512; ws >= 1; ws /= 512) { /* the split path's TF32 parts, in chunks of images under 1 MiB */
        const sf_cuda_options opt = {.graph = 1, .conv_workspace_mib = ws, .conv_algo = SF_CONV_ALGO_SPLIT};
        const char *report = run_on(SF_PRECISION_FP32, &opt, OP_SPIKE_X, true);
        if (report) check_split_ran(report, ws);
    }
    op_coverage("test_gpu_backend_ops");
    sf_backend_free(cpu);
    return tu_finish("test_gpu_backend_ops");
}
