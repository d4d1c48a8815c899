/* mpi_w5.c — workload W5 (docs/perf.md, Workloads) on G GPUs of one host, one process per GPU under mpirun
 * (tests/gpu/multi_gpu.sh runs it for G = 1 and 2; NCCL_NVLS_ENABLE=0 in its environment):
 *   mpi_w5 dp [precision] [steps]   W5dp: W3 (VGG9, T=10) with 64 samples per GPU (global batch 64·G), each GPU's
 *                                   own BN statistics (as torch DDP), SGD momentum; gradients all-reduced in 25 MiB
 *                                   buckets during the backward
 *   mpi_w5 time [steps [precision]] W5time: 784 → Linear → LIF(4096) → Linear → LIF(4096) → Linear(10), T=1024,
 *                                   B=32, the time axis split over the G GPUs (time_parallel = G), recompute mode
 *                                   (precision fp32, tf32, bf16 or fp16, as gb_precision reads it; default fp32)
 *   mpi_w5 curve [steps]            W5dp's loss curve on G GPUs (synchronised BN) against one GPU training on the
 *                                   whole global batch (default 100 steps): how close fp32 reduction order leaves them
 *   mpi_w5 busbw [MiB]              NCCL all-reduce bus bandwidth over the G GPUs (default 256 MiB)
 * Rank 0 prints one line per run: median ms per step (host clock around sf_net_train_step, which ends in a
 * synchronising read of the loss; every rank steps together through the collectives), the loss, the largest
 * per-GPU plan peak (sf_net_peak_bytes) and device memory in use (cudaMemGetInfo, NCCL's buffers included), the card
 * and the NCCL version. */
#include "dist/dist.h"
#include "gpu_bench.h"

#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The largest of each process's value. */
static double world_max(sf_dist *d, double v)
{
    const int P = sf_dist_size(d), me = sf_dist_rank(d);
    double *all = calloc((size_t)P, sizeof *all), m = 0;
    all[me] = v;
    GB_OK(sf_dist_sum_all(d, all, P));
    for (int i = 0; i < P; i++) m = all[i] > m ? all[i] : m;
    free(all);
    return m;
}

static sf_net *create(sf_dist *d, sf_precision prec, int32_t c, int32_t h, int32_t w)
{
    sf_net_params p;
    sf_net_default_params(&p);
    p.device = sf_dist_device(d, (sf_device){SF_DEVICE_CUDA, 0});
    p.precision = prec;
    p.in_channels = c, p.in_height = h, p.in_width = w;
    sf_net *net;
    GB_OK(sf_net_create(&p, &net));
    return net;
}

/* Times `steps` training steps after 3 warm-ups and prints rank 0's line. */
static void run(sf_dist *d, sf_net *net, const char *what, int64_t T, int64_t B, int32_t in, int steps, double base)
{
    GB_OK(sf_dist_attach(d, net));
    gb_compile_sgd(net, T, B);
    float *x = malloc(sizeof(float) * (size_t)(T * B * in));
    sf_bench_randn(x, (size_t)(T * B * in), 0.5f, 1.0f, 3 + (uint64_t)sf_dist_data_rank(d));
    int32_t labels[64];
    for (int b = 0; b < B; b++) labels[b] = (b * 7 + sf_dist_data_rank(d)) % 10;
    sf_step_result r;
    for (int i = 0; i < 3; i++) GB_OK(sf_net_train_step(net, x, labels, &r));
    double *ts = malloc(sizeof(double) * (size_t)steps);
    GB_OK(sf_dist_barrier(d));
    for (int i = 0; i < steps; i++) {
        double t0 = now_ms();
        GB_OK(sf_net_train_step(net, x, labels, &r));
        ts[i] = now_ms() - t0;
    }
    qsort(ts, (size_t)steps, sizeof *ts, cmp_double);
    double plan = world_max(d, sf_net_peak_bytes(net) / 1048576.0), used = world_max(d, gb_used_mib() - base);
    if (sf_dist_rank(d) == 0) {
        char card[256], lib[256];
        gb_card(card, sizeof card);
        sf_dist_describe(lib, sizeof lib);
        printf("%s G=%d: %.2f ms/step (median of %d, p10 %.2f, p90 %.2f) loss %.4f  peak per GPU: plan %.0f MiB, "
               "device %.0f MiB  [%s; %s]\n",
               what, sf_dist_size(d), ts[steps / 2], steps, ts[steps / 10], ts[steps * 9 / 10], r.loss, plan, used,
               card, lib);
        fflush(stdout);
    }
    free(ts);
    free(x);
}

/* W5dp's loss curve on G GPUs against one GPU with the whole global batch (64·G, synchronised BN), same inputs:
 * the largest relative difference of the loss over `steps` SGD steps and of the parameters at the end. */
static void curve(sf_dist *d, int steps)
{
    const int G = sf_dist_size(d), r = sf_dist_rank(d);
    const int64_t T = 10, B = 64, Bg = B * G, in = 3 * 32 * 32;
    sf_net *net = create(d, SF_PRECISION_FP32, 3, 32, 32), *ref = NULL;
    gb_vgg9_layers(net);
    GB_OK(sf_dist_attach(d, net));
    gb_compile_sgd(net, T, B);
    if (r == 0) { /* the reference: one GPU, the whole global batch */
        ref = create(d, SF_PRECISION_FP32, 3, 32, 32);
        gb_vgg9_layers(ref);
        gb_compile_sgd(ref, T, Bg);
    }
    float *x = malloc(sizeof(float) * (size_t)(T * Bg * in)), *xl = malloc(sizeof(float) * (size_t)(T * B * in));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)Bg);
    double worst = 0, first = 0, last = 0;
    for (int i = 0; i < steps; i++) {
        sf_bench_randn(x, (size_t)(Bg * in), 0.5f, 1.0f, 100 + (uint64_t)i); /* direct encoding: the same at every step */
        for (int64_t t = 1; t < T; t++) memcpy(x + t * Bg * in, x, sizeof(float) * (size_t)(Bg * in));
        for (int64_t b = 0; b < Bg; b++) labels[b] = (int32_t)((b * 7 + i) % 10);
        for (int64_t t = 0; t < T; t++) memcpy(xl + t * B * in, x + (t * Bg + r * B) * in, sizeof(float) * (size_t)(B * in));
        sf_step_result rd, rr = {0};
        GB_OK(sf_net_train_step(net, xl, labels + r * B, &rd));
        double loss = rd.loss;
        GB_OK(sf_dist_sum_all(d, &loss, 1));
        loss /= G;
        if (ref) {
            GB_OK(sf_net_train_step(ref, x, labels, &rr));
            double e = fabs(loss - rr.loss) / fabs(rr.loss);
            worst = e > worst ? e : worst;
            if (i == 0) first = rr.loss;
            last = rr.loss;
        }
    }
    if (ref) {
        double num = 0, den = 0;
        for (int32_t k = 0; k < sf_net_tensor_count(ref, SF_ROLE_PARAM); k++) {
            sf_tensor_info ti;
            GB_OK(sf_net_tensor_info(ref, SF_ROLE_PARAM, k, &ti));
            float *a = malloc(sizeof(float) * (size_t)ti.numel), *b = malloc(sizeof(float) * (size_t)ti.numel);
            GB_OK(sf_net_tensor_read(net, SF_ROLE_PARAM, k, a));
            GB_OK(sf_net_tensor_read(ref, SF_ROLE_PARAM, k, b));
            for (int64_t j = 0; j < ti.numel; j++) num += ((double)a[j] - b[j]) * ((double)a[j] - b[j]), den += (double)b[j] * b[j];
            free(a);
            free(b);
        }
        char lib[256];
        sf_dist_describe(lib, sizeof lib);
        printf("W5dp loss curve fp32, global batch %lld, sync BN, %d steps: G=%d vs 1 GPU: loss %.4f -> %.4f, largest "
               "relative loss difference %.2e, parameters at the end %.2e  [%s]\n",
               (long long)Bg, steps, G, first, last, worst, sqrt(num / (den > 0 ? den : 1)), lib);
        sf_net_free(ref);
    }
    free(x);
    free(xl);
    free(labels);
    sf_net_free(net);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "dp";
    sf_dist_params dp;
    sf_dist_default_params(&dp);
    if (strcmp(mode, "time") == 0) dp.time_parallel = 0; /* every process is one segment of T */
    if (strcmp(mode, "curve") == 0) dp.sync_bn = 1;      /* statistics of the whole global batch, as one GPU's */
    sf_dist *d;
    GB_OK(sf_dist_init(&dp, &d));
    GB_CHECK(cudaSetDevice(sf_dist_device(d, (sf_device){SF_DEVICE_CUDA, 0}).index));
    double base = gb_used_mib();
    if (strcmp(mode, "dp") == 0) {
        sf_precision prec = gb_precision(argc > 2 ? argv[2] : NULL);
        int steps = argc > 3 ? atoi(argv[3]) : 20;
        sf_net *net = create(d, prec, 3, 32, 32);
        gb_vgg9_layers(net);
        char what[64];
        snprintf(what, sizeof what, "W5dp %s global batch %d", sf_precision_name(prec), 64 * sf_dist_size(d));
        run(d, net, what, 10, 64, 3 * 32 * 32, steps > 0 ? steps : 20, base);
        sf_net_free(net);
    } else if (strcmp(mode, "time") == 0) {
        int steps = argc > 2 ? atoi(argv[2]) : 10;
        sf_precision prec = gb_precision(argc > 3 ? argv[3] : NULL); /* 16-bit: the gathered output is too */
        sf_net *net = create(d, prec, 784, 1, 1);
        gb_add(net, SF_LAYER_LINEAR, 4096, 0);
        gb_add(net, SF_LAYER_LIF, 0, 0);
        gb_add(net, SF_LAYER_LINEAR, 4096, 0);
        gb_add(net, SF_LAYER_LIF, 0, 0);
        gb_add(net, SF_LAYER_LINEAR, 10, 0);
        char what[64];
        snprintf(what, sizeof what, "W5time T=1024 B=32 %s", sf_precision_name(prec));
        run(d, net, what, 1024, 32, 784, steps > 0 ? steps : 10, base);
        sf_net_free(net);
    } else if (strcmp(mode, "curve") == 0) {
        curve(d, argc > 2 ? atoi(argv[2]) : 100);
    } else if (strcmp(mode, "busbw") == 0) {
        size_t mib = argc > 2 ? (size_t)atoi(argv[2]) : 256;
        sf_net *net = create(d, SF_PRECISION_FP32, 1, 1, 1); /* a network gives the transport its device */
        gb_add(net, SF_LAYER_LINEAR, 10, 0);
        GB_OK(sf_dist_attach(d, net));
        double gbps = 0;
        if (sf_dist_size(d) > 1) GB_OK(sf_dist_allreduce_busbw(d, mib << 20, 20, &gbps));
        if (sf_dist_rank(d) == 0) {
            char lib[256];
            sf_dist_describe(lib, sizeof lib);
            printf("all-reduce %zu MiB over %d GPUs: bus bandwidth %.1f GB/s (median of 20)  [%s]\n", mib,
                   sf_dist_size(d), gbps, lib);
        }
        sf_net_free(net);
    } else {
        fprintf(stderr, "usage: mpi_w5 dp [fp32|tf32|bf16|fp16] [steps] | time [steps [fp32|tf32|bf16|fp16]] | "
                        "curve [steps] | busbw [MiB]\n");
        sf_dist_free(d);
        return 2;
    }
    sf_dist_free(d);
    return 0;
}
