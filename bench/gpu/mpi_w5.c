/* mpi_w5.c — workload W5 (docs/notebook/perf.md, Workloads) on G GPUs of one host, one process per GPU under mpirun
 * (tests/gpu/multi_gpu.sh runs it for G = 1 and the G asked for; NCCL_NVLS_ENABLE=0 in its environment):
 *   mpi_w5 dp [precision] [steps]   W5dp: W3 (VGG9, T=10) with 64 samples per GPU (global batch 64·G), each GPU's
 *                                   own BN statistics (as torch DDP), SGD momentum; gradients all-reduced in 25 MiB
 *                                   buckets during the backward
 *   mpi_w5 time [steps] [tp=N] [shard=0|1] [early=0|1] [bucket=MiB] [precision=fp32|tf32|bf16|fp16]
 *                                   W5time: 784 → Linear → LIF(4096) → Linear → LIF(4096) → Linear(10), T=1024,
 *                                   global batch 32, recompute mode, the time axis split over tp GPUs (default G;
 *                                   tp < G adds G/tp data ranks, each with 32·tp/G samples: 2 × 2 at G = 4);
 *                                   shard: the optimizer state sharded over each time group (default 1, dist.h);
 *                                   early: receives posted when the host enqueues them (default 0, dist.h);
 *                                   bucket: the gradient all-reduce bucket (default 25 MiB; larger than the
 *                                   gradients: one all-reduce at the end of the backward)
 *   mpi_w5 weak [steps]             W5weak: W4rec (bench/w4_net.h) at natural activity with hidden layers of
 *                                   1472·G neurons, data parallel with 64 samples per GPU, Adam, sparse = auto, no
 *                                   CUDA graph at any G (the hooks of a job keep a step off the graph, so G = 1 runs
 *                                   without one too); samples/s per GPU
 *   mpi_w5 curve [steps]            W5dp's loss curve on G GPUs (synchronised BN) against one GPU training on the
 *                                   whole global batch (default 100 steps): how close fp32 reduction order leaves them
 *   mpi_w5 busbw [MiB]              NCCL all-reduce bus bandwidth over the G GPUs (default 256 MiB)
 * Rank 0 prints one line per run: median ms per step (host clock around sf_net_train_step, which ends in a
 * synchronising read of the loss; every rank steps together through the collectives), the loss, the largest
 * per-GPU plan peak (sf_net_peak_bytes) and device memory in use (cudaMemGetInfo, NCCL's buffers included), the card
 * and the NCCL version. W5time and W5weak then run 3 more steps with every exchange timed (sf_dist_profile) and
 * print, per rank, where a step's time goes: waiting for v and ∂L/∂v from the neighbouring segments, the gathered
 * output, the end of the backward (gradient all-reduces), the parameters' all-gather, and the rest (computing); the
 * gradient all-reduces' own time beside the backward; the input's upload (a copy of the same bytes, timed
 * alone on every rank at once); then one step's timeline of the exchanges per rank. */
#include "../w4_net.h"
#include "distributed/dist.h"
#include "gpu_bench.h"


enum { PROFILED_STEPS = 3 };

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

/* One benchmark run: an attached and compiled network, its input of all T steps and this rank's labels. */
typedef struct bench_run {
    sf_dist *d;
    sf_net *net;
    const float *x;
    const int32_t *labels;
    size_t upload_bytes; /* what a step uploads: this segment's steps of x */
    const float *upload_from;
} bench_run;

/* Median host time of `steps` training steps after 3 warm-ups (p10 and p90 beside it). */
static double time_steps(const bench_run *b, int steps, double *p10, double *p90, float *loss)
{
    sf_step_result r;
    for (int i = 0; i < 3; i++) GB_OK(sf_net_train_step(b->net, b->x, b->labels, &r));
    double *ts = malloc(sizeof(double) * (size_t)steps);
    GB_OK(sf_dist_barrier(b->d));
    for (int i = 0; i < steps; i++) {
        double t0 = sf_bench_now_ms();
        GB_OK(sf_net_train_step(b->net, b->x, b->labels, &r));
        ts[i] = sf_bench_now_ms() - t0;
    }
    qsort(ts, (size_t)steps, sizeof *ts, sf_bench_cmp_double);
    double med = ts[steps / 2];
    *p10 = ts[steps / 10];
    *p90 = ts[steps * 9 / 10];
    *loss = r.loss;
    free(ts);
    return med;
}

/* The benchmarks' inputs live in page-locked host memory, as a data loader's batches do when it pins them (PyTorch's
 * pin_memory): a pageable copy goes through the driver's staging buffer at the host's memcpy rate, which the
 * processes of one host share (W5time's upload took 11.4 ms alone on one GPU and 3.8-4.5 ms on each of four). */
static float *pinned_input(size_t n)
{
    float *x = malloc(sizeof(float) * n);
    if (!x) {
        fprintf(stderr, "mpi_w5: out of memory for %zu input values\n", n);
        exit(1);
    }
    GB_CHECK(cudaHostRegister(x, sizeof(float) * n, cudaHostRegisterDefault));
    return x;
}

static void free_input(float *x)
{
    GB_CHECK(cudaHostUnregister(x));
    free(x);
}

/* The input's upload alone: a copy of this step's bytes, every rank at once, median of 3. */
static double upload_ms(const bench_run *b)
{
    void *dev;
    GB_CHECK(cudaMalloc(&dev, b->upload_bytes));
    double t[3];
    for (int i = 0; i < 3; i++) {
        GB_OK(sf_dist_barrier(b->d));
        double t0 = sf_bench_now_ms();
        GB_CHECK(cudaMemcpy(dev, b->upload_from, b->upload_bytes, cudaMemcpyHostToDevice));
        t[i] = sf_bench_now_ms() - t0;
    }
    GB_CHECK(cudaFree(dev));
    qsort(t, 3, sizeof *t, sf_bench_cmp_double);
    return t[1];
}

/* One more step with every exchange timed, as a timeline per rank (rank 0 prints): kind@start+duration in ms from
 * the step's start, which every rank takes together after a barrier; the gradient all-reduces on their own stream
 * among them. Where a pipeline's bubbles fall. */
enum { TIMELINE_SPANS = 64 };
static void timeline(const bench_run *b)
{
    sf_dist *d = b->d;
    const int P = sf_dist_size(d), me = sf_dist_rank(d);
    double *all = calloc((size_t)(P * TIMELINE_SPANS * 3), sizeof *all), *mine = all + me * TIMELINE_SPANS * 3;
    GB_OK(sf_dist_barrier(d));
    GB_OK(sf_dist_profile(d, 1));
    GB_OK(sf_net_train_step(b->net, b->x, b->labels, NULL));
    double ms[SF_DIST_TIMER_COUNT];
    int64_t calls[SF_DIST_TIMER_COUNT];
    GB_OK(sf_dist_profile_read(d, ms, calls));
    const sf_dist_span *sp;
    const int64_t n = sf_dist_profile_spans(d, &sp);
    for (int64_t k = 0; k < n && k < TIMELINE_SPANS; k++) {
        mine[3 * k] = sp[k].what + 1; /* 0: no span */
        mine[3 * k + 1] = sp[k].at_ms;
        mine[3 * k + 2] = sp[k].ms;
    }
    GB_OK(sf_dist_profile(d, 0));
    GB_OK(sf_dist_sum_all(d, all, P * TIMELINE_SPANS * 3));
    for (int r = 0; me == 0 && r < P; r++) {
        printf("  timeline rank %d:", r);
        for (const double *v = all + r * TIMELINE_SPANS * 3; v < all + (r + 1) * TIMELINE_SPANS * 3 && v[0]; v += 3)
            printf(" %s@%.2f+%.2f", sf_dist_timer_name((sf_dist_timer)(v[0] - 1)), v[1], v[2]);
        printf("\n");
    }
    fflush(stdout);
    free(all);
}

/* Where the time of a step goes, per rank (rank 0 prints): PROFILED_STEPS steps with every exchange timed. */
enum { COL_STEP = SF_DIST_TIMER_COUNT, COL_UPLOAD, COLS };
static const int waits[] = {SF_DIST_TIMER_STATE, SF_DIST_TIMER_GRAD_STATE, SF_DIST_TIMER_OUTPUT,
                            SF_DIST_TIMER_BN,    SF_DIST_TIMER_GRADS,      SF_DIST_TIMER_PARAMS};

static void breakdown(const bench_run *b)
{
    sf_dist *d = b->d;
    const int P = sf_dist_size(d), me = sf_dist_rank(d);
    double *all = calloc((size_t)(P * COLS), sizeof *all), *mine = all + me * COLS;
    mine[COL_UPLOAD] = upload_ms(b);
    if (P > 1) GB_OK(sf_dist_profile(d, 1));
    GB_OK(sf_dist_barrier(d));
    double t0 = sf_bench_now_ms();
    for (int i = 0; i < PROFILED_STEPS; i++) GB_OK(sf_net_train_step(b->net, b->x, b->labels, NULL));
    mine[COL_STEP] = (sf_bench_now_ms() - t0) / PROFILED_STEPS;
    int64_t calls[SF_DIST_TIMER_COUNT];
    if (P > 1) {
        GB_OK(sf_dist_profile_read(d, mine, calls));
        GB_OK(sf_dist_profile(d, 0));
    }
    for (int k = 0; k < SF_DIST_TIMER_COUNT; k++) mine[k] /= PROFILED_STEPS;
    GB_OK(sf_dist_sum_all(d, all, P * COLS));
    if (me == 0) {
        double share = 0;
        for (int r = 0; r < P; r++) {
            const double *v = all + r * COLS;
            double waited = 0;
            char line[512];
            int n = snprintf(line, sizeof line, "  rank %d (segment %d): step %.2f ms: waiting", r,
                             r % sf_dist_time_parallel(d), v[COL_STEP]);
            for (size_t k = 0; k < sizeof waits / sizeof *waits; k++) {
                waited += v[waits[k]];
                n += snprintf(line + n, sizeof line - (size_t)n, " %s %.2f", sf_dist_timer_name(waits[k]), v[waits[k]]);
            }
            printf("%s; computing (with the upload) %.2f; gradient all-reduces beside the backward %.2f; input upload "
                   "alone %.2f\n",
                   line, v[COL_STEP] - waited, v[SF_DIST_TIMER_ALLREDUCE], v[COL_UPLOAD]);
            share += waited / v[COL_STEP] / P;
        }
        printf("  waiting share of the step, mean over the ranks: %.1f%% (%d profiled steps)\n", 100 * share,
               PROFILED_STEPS);
        fflush(stdout);
    }
    free(all);
    if (P > 1) timeline(b);
}

/* Times the run and prints rank 0's line; returns the median ms per step. */
static double report(const bench_run *b, const char *what, int steps, double base)
{
    double p10, p90;
    float loss;
    double med = time_steps(b, steps, &p10, &p90, &loss);
    sf_dist *d = b->d;
    double plan = world_max(d, sf_net_peak_bytes(b->net) / 1048576.0), used = world_max(d, gb_used_mib() - base);
    if (sf_dist_rank(d) == 0) {
        char card[256], lib[256];
        gb_card(card, sizeof card);
        sf_dist_describe(lib, sizeof lib);
        printf("%s G=%d: %.2f ms/step (median of %d, p10 %.2f, p90 %.2f) loss %.4f  peak per GPU: plan %.0f MiB, "
               "device %.0f MiB  [%s; %s]\n",
               what, sf_dist_size(d), med, steps, p10, p90, loss, plan, used, card, lib);
        fflush(stdout);
    }
    return med;
}

/* W5dp and W5time: an attached net compiled for (T, B) with SGD momentum on random input ~N(0.5, 1). */
static void run_sgd(sf_dist *d, sf_net *net, const char *what, int64_t T, int64_t B, int32_t in, int steps,
                    double base, int profile)
{
    gb_compile_sgd(net, T, B);
    float *x = pinned_input((size_t)(T * B * in));
    sf_bench_randn(x, (size_t)(T * B * in), 0.5f, 1.0f, 3 + (uint64_t)sf_dist_data_rank(d));
    int32_t labels[64];
    for (int b = 0; b < B; b++) labels[b] = (b * 7 + sf_dist_data_rank(d)) % 10;
    const int64_t Tl = T / sf_dist_time_parallel(d);
    bench_run b = {d, net, x, labels, sizeof(float) * (size_t)(Tl * B * in), x + sf_dist_segment(d) * Tl * B * in};
    report(&b, what, steps, base);
    if (profile) breakdown(&b);
    free_input(x);
}

/* W5weak: W4rec with hidden layers of 1472·G, 64 samples per GPU. */
static void weak(sf_dist *d, int steps, double base)
{
    const int G = sf_dist_size(d);
    const sf_device dev = sf_dist_device(d, (sf_device){SF_DEVICE_CUDA, 0});
    const w4_options o = {.rec = 1, .sparse = SF_SPARSE_AUTO, .device = dev, .T = W4_T, .B = 64};
    const int32_t hidden = W4_HIDDEN * G;
    sf_net *net;
    GB_OK(w4_create(&o, hidden, &net));
    GB_OK(sf_dist_attach(d, net));
    GB_OK(w4_compile(net, &o));
    float *x = pinned_input((size_t)(o.T * o.B * W4_IN));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)o.B);
    w4_batch(o.T, o.B, x, y);
    bench_run b = {d, net, x, y, sizeof(float) * (size_t)(o.T * o.B * W4_IN), x};
    char what[128];
    snprintf(what, sizeof what, "W5weak W4rec natural hidden 2x%d, data parallel, global batch %d", hidden, 64 * G);
    double med = report(&b, what, steps, base);
    if (sf_dist_rank(d) == 0) {
        float rates[2];
        sf_net_firing_rates(net, rates, 2);
        char paths[160];
        w4_paths(net, paths, sizeof paths);
        printf("W5weak G=%d: %.1f samples/s per GPU, hidden rates %.4f %.4f, paths:%s\n", G, o.B / med * 1e3,
               rates[0], rates[1], paths);
        fflush(stdout);
    }
    breakdown(&b);
    free_input(x);
    free(y);
    sf_net_free(net);
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

/* W5time's "key=value" options (tp, shard, early, bucket) into the job's parameters, and its precision (16-bit: the
 * gathered output is too). */
static void time_options(int argc, char **argv, sf_dist_params *dp, sf_precision *prec)
{
    for (int i = 3; i < argc; i++) {
        const char *v = strchr(argv[i], '=');
        if (v && strncmp(argv[i], "tp=", 3) == 0) dp->time_parallel = atoi(v + 1);
        else if (v && strncmp(argv[i], "shard=", 6) == 0) dp->shard_optimizer = atoi(v + 1);
        else if (v && strncmp(argv[i], "early=", 6) == 0) dp->early_receive = atoi(v + 1);
        else if (v && strncmp(argv[i], "bucket=", 7) == 0) dp->bucket_mib = atoi(v + 1);
        else if (v && strncmp(argv[i], "precision=", 10) == 0) *prec = gb_precision(v + 1);
        else {
            fprintf(stderr, "mpi_w5 time: option '%s': expected tp=N, shard=0|1, early=0|1, bucket=MiB or "
                            "precision=P\n",
                    argv[i]);
            exit(2);
        }
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "dp";
    sf_dist_params dp;
    sf_dist_default_params(&dp);
    sf_precision time_prec = SF_PRECISION_FP32;
    if (strcmp(mode, "time") == 0) {
        dp.time_parallel = 0; /* every process is one segment of T, unless tp says otherwise */
        time_options(argc, argv, &dp, &time_prec);
    }
    if (strcmp(mode, "curve") == 0) dp.sync_bn = 1; /* statistics of the whole global batch, as one GPU's */
    sf_dist *d;
    GB_OK(sf_dist_init(&dp, &d));
    GB_CHECK(cudaSetDevice(sf_dist_device(d, (sf_device){SF_DEVICE_CUDA, 0}).index));
    double base = gb_used_mib();
    if (strcmp(mode, "dp") == 0) {
        sf_precision prec = gb_precision(argc > 2 ? argv[2] : NULL);
        int steps = argc > 3 ? atoi(argv[3]) : 20;
        sf_net *net = create(d, prec, 3, 32, 32);
        gb_vgg9_layers(net);
        GB_OK(sf_dist_attach(d, net));
        char what[64];
        snprintf(what, sizeof what, "W5dp %s global batch %d", sf_precision_name(prec), 64 * sf_dist_size(d));
        run_sgd(d, net, what, 10, 64, 3 * 32 * 32, steps > 0 ? steps : 20, base, 0);
        sf_net_free(net);
    } else if (strcmp(mode, "time") == 0) {
        int steps = argc > 2 ? atoi(argv[2]) : 10;
        const int R = sf_dist_data_size(d), G = sf_dist_time_parallel(d);
        if (32 % R != 0) {
            fprintf(stderr, "mpi_w5 time: %d data ranks do not divide the global batch of 32\n", R);
            sf_dist_free(d);
            return 2;
        }
        sf_net *net = create(d, time_prec, 784, 1, 1);
        gb_add(net, SF_LAYER_LINEAR, 4096, 0);
        gb_add(net, SF_LAYER_LIF, 0, 0);
        gb_add(net, SF_LAYER_LINEAR, 4096, 0);
        gb_add(net, SF_LAYER_LIF, 0, 0);
        gb_add(net, SF_LAYER_LINEAR, 10, 0);
        GB_OK(sf_dist_attach(d, net));
        char what[160];
        snprintf(what, sizeof what,
                 "W5time T=1024 B=32 %s time %d x data %d, optimizer %s, receives %s, buckets %d MiB",
                 sf_precision_name(time_prec), G, R, dp.shard_optimizer && G > 1 ? "sharded" : "whole",
                 dp.early_receive ? "early" : "when needed", dp.bucket_mib);
        run_sgd(d, net, what, 1024, 32 / R, 784, steps > 0 ? steps : 10, base, 1);
        sf_net_free(net);
    } else if (strcmp(mode, "weak") == 0) {
        int steps = argc > 2 ? atoi(argv[2]) : 10;
        weak(d, steps > 0 ? steps : 10, base);
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
        fprintf(stderr, "usage: mpi_w5 dp [fp32|tf32|bf16|fp16] [steps] | time [steps] [tp=N] [shard=0|1] [early=0|1] "
                        "[precision=fp32|tf32|bf16|fp16] | weak [steps] | curve [steps] | busbw [MiB]\n");
        sf_dist_free(d);
        return 2;
    }
    sf_dist_free(d);
    return 0;
}
