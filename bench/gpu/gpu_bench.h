/* gpu_bench.h — shared pieces of the GPU benchmark programs: checked CUDA calls, the card's name, the measured
 * ceilings every number is set against (device-to-device copy bandwidth, cuBLAS's GEMM rate in a precision), event
 * timing (median of repeats) and reproducible random inputs. Header-only: each benchmark is one program. */
#ifndef SF_GPU_BENCH_H
#define SF_GPU_BENCH_H

#include "../bench_clock.h"
#include "../bench_randn.h"
#include "spikefuse.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GB_CHECK(call)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#define GB_OK(expr)                                                                                                    \
    do {                                                                                                               \
        sf_status s_ = (expr);                                                                                         \
        if (s_ != SF_OK) {                                                                                             \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #expr, sf_status_str(s_), sf_last_error());     \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* Whether a benchmark whose input is one image repeated over T (direct encoding) tells the net so, as the trainer
 * does (sf_net_set_static_input): yes unless SF_BENCH_STATIC_INPUT=0. */
static inline int gb_static_input(void)
{
    const char *v = getenv("SF_BENCH_STATIC_INPUT");
    return !v || atoi(v) != 0;
}

/* Compiles a benchmark net for (T, B) with the optimizer every benchmark uses: SGD, lr 0.05, momentum 0.9. */
static inline void gb_compile_sgd(sf_net *net, int64_t T, int64_t B)
{
    GB_OK(sf_net_compile(net, T, B));
    sf_optim_params o;
    sf_optim_default_params(&o);
    o.lr = 0.05f;
    o.momentum = 0.9f;
    GB_OK(sf_net_set_optimizer(net, &o));
}

/* The precision named by a benchmark's argument ("fp32", "tf32", "bf16", "fp16"; NULL: fp32). */
static inline sf_precision gb_precision(const char *name)
{
    sf_precision p = SF_PRECISION_FP32;
    if (name && sf_precision_parse(name, &p) != SF_OK) {
        fprintf(stderr, "%s\n", sf_last_error());
        exit(2);
    }
    return p;
}

/* CUDA options from a benchmark's trailing "key=value" arguments: graph=0|1, conv_workspace_mib=N,
 * conv_algo=auto|cudnn|gemm|nhwc|nchw|split, deterministic=0|1 (the sf_cuda_options fields; the rest keep their defaults). */
static inline sf_cuda_options gb_cuda_options(int argc, char **argv, int first)
{
    sf_net_params p;
    sf_net_default_params(&p);
    for (int i = first; i < argc; i++) {
        const char *v = strchr(argv[i], '=');
        size_t k = v ? (size_t)(v - argv[i]) : 0;
        if (k == 5 && strncmp(argv[i], "graph", k) == 0) p.cuda.graph = atoi(v + 1);
        else if (k == 18 && strncmp(argv[i], "conv_workspace_mib", k) == 0) p.cuda.conv_workspace_mib = atoi(v + 1);
        else if (k == 13 && strncmp(argv[i], "deterministic", k) == 0) p.cuda.deterministic = atoi(v + 1);
        else if (!(k == 9 && strncmp(argv[i], "conv_algo", k) == 0 &&
                   sf_conv_algo_parse(v + 1, &p.cuda.conv_algo) == SF_OK)) {
            fprintf(stderr,
                    "option '%s': expected graph=0|1, conv_workspace_mib=N, conv_algo=auto|cudnn|gemm|nhwc|nchw|split or "
                    "deterministic=0|1\n",
                    argv[i]);
            exit(2);
        }
    }
    return p.cuda;
}

static inline int gb_cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static inline float gb_median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, gb_cmp_float);
    return v[n / 2];
}

/* Events around `reps` calls of fn(arg) on `st`, one measurement each, after `warm` untimed calls. */
typedef void (*gb_fn)(void *arg);
static inline float gb_time_ms(gb_fn fn, void *arg, cudaStream_t st, int warm, int reps)
{
    cudaEvent_t a, b;
    GB_CHECK(cudaEventCreate(&a));
    GB_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warm; i++) fn(arg);
    GB_CHECK(cudaStreamSynchronize(st));
    float *ts = malloc(sizeof(float) * (size_t)reps);
    for (int i = 0; i < reps; i++) {
        GB_CHECK(cudaEventRecord(a, st));
        fn(arg);
        GB_CHECK(cudaEventRecord(b, st));
        GB_CHECK(cudaEventSynchronize(b));
        GB_CHECK(cudaEventElapsedTime(&ts[i], a, b));
    }
    float m = gb_median(ts, reps);
    free(ts);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return m;
}

/* The median of `steps` training steps with the input on the device, as the peers keep theirs: three warm-up steps
 * upload x, the timed ones reuse it (sf_net_train_step's NULL input). *upload_ms: one copy of x's `bytes` from its
 * host memory to the device, median of 3: what a step given x itself adds where nothing overlaps the copy. */
static inline double gb_step_ms(sf_net *net, const float *x, size_t bytes, const int32_t *labels, int steps,
                                sf_step_result *r, double *upload_ms)
{
    for (int i = 0; i < 3; i++) GB_OK(sf_net_train_step(net, i == 0 ? x : NULL, labels, r));
    double *ts = malloc(sizeof(double) * (size_t)(steps > 3 ? steps : 3));
    for (int i = 0; i < steps; i++) {
        const double t0 = sf_bench_now_ms();
        GB_OK(sf_net_train_step(net, NULL, labels, r));
        ts[i] = sf_bench_now_ms() - t0;
    }
    qsort(ts, (size_t)steps, sizeof *ts, sf_bench_cmp_double);
    const double ms = ts[steps / 2];
    void *d = NULL;
    GB_CHECK(cudaMalloc(&d, bytes));
    for (int i = 0; i < 3; i++) {
        const double t0 = sf_bench_now_ms();
        GB_CHECK(cudaMemcpy(d, x, bytes, cudaMemcpyHostToDevice));
        ts[i] = sf_bench_now_ms() - t0;
    }
    GB_CHECK(cudaFree(d));
    qsort(ts, 3, sizeof *ts, sf_bench_cmp_double);
    *upload_ms = ts[1];
    free(ts);
    return ms;
}

struct gb_copy {
    void *dst, *src;
    size_t bytes;
    cudaStream_t st;
};
static inline void gb_copy_once(void *arg)
{
    struct gb_copy *c = arg;
    GB_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->st));
}

/* Device-to-device copy bandwidth in GB/s (bytes read + written), 1 GiB copies, median of 10. */
static inline double gb_copy_bandwidth(cudaStream_t st)
{
    struct gb_copy c = {NULL, NULL, (size_t)1 << 30, st};
    GB_CHECK(cudaMalloc(&c.dst, c.bytes));
    GB_CHECK(cudaMalloc(&c.src, c.bytes));
    GB_CHECK(cudaMemsetAsync(c.src, 1, c.bytes, st));
    float ms = gb_time_ms(gb_copy_once, &c, st, 3, 10);
    GB_CHECK(cudaFree(c.dst));
    GB_CHECK(cudaFree(c.src));
    return 2.0 * (double)c.bytes / (ms * 1e-3) / 1e9;
}

struct gb_gemm {
    cublasHandle_t h;
    sf_precision prec;
    int n;
    void *a, *b, *c;
};
static inline void gb_gemm_once(void *arg)
{
    struct gb_gemm *g = arg;
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t t = g->prec == SF_PRECISION_BF16 ? CUDA_R_16BF
                             : g->prec == SF_PRECISION_FP16 ? CUDA_R_16F
                                                            : CUDA_R_32F;
    const cublasComputeType_t ct = g->prec == SF_PRECISION_TF32   ? CUBLAS_COMPUTE_32F_FAST_TF32
                                   : g->prec == SF_PRECISION_FP32 ? CUBLAS_COMPUTE_32F_PEDANTIC
                                                                  : CUBLAS_COMPUTE_32F;
    if (cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->a, t, g->n, g->b, t, g->n, &zero, g->c,
                     t, g->n, ct, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasGemmEx failed\n");
        exit(1);
    }
}

/* n random values of magnitude 1/4 to 2 with random signs and mantissas, as float, or as bf16 / fp16 bit patterns
 * built directly (sign, exponent, mantissa). */
static inline void *gb_host_random(size_t n, sf_precision prec, uint64_t seed)
{
    const bool half = prec == SF_PRECISION_BF16 || prec == SF_PRECISION_FP16;
    void *h = malloc(n * (half ? 2 : 4));
    if (!h) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t r = sf_hash3(seed, 7, i);
        uint32_t sign = (uint32_t)(r & 1), e = (uint32_t)((r >> 1) & 3), m = (uint32_t)(r >> 3) & 0x7fffff;
        if (prec == SF_PRECISION_BF16) ((uint16_t *)h)[i] = (uint16_t)(sign << 15 | (125 + e) << 7 | (m & 0x7f));
        else if (prec == SF_PRECISION_FP16) ((uint16_t *)h)[i] = (uint16_t)(sign << 15 | (13 + e) << 10 | (m & 0x3ff));
        else ((float *)h)[i] = (sign ? -1.0f : 1.0f) * ldexpf(1.0f + (float)m / 8388608.0f, (int)e - 2);
    }
    return h;
}

/* cuBLAS's rate in FLOP/s for a square 8192 GEMM of the precision's operand type (fp32: no tensor cores; tf32:
 * TF32 tensor cores; bf16/fp16: 16-bit operands and output, fp32 accumulation), on random data (zeros run about
 * 13% faster), median of 5: the ceiling of GEMM and convolution work. */
static inline double gb_gemm_rate(sf_precision prec, cudaStream_t st)
{
    struct gb_gemm g = {NULL, prec, 8192, NULL, NULL, NULL};
    const size_t n = (size_t)g.n * g.n, bytes = n * (prec == SF_PRECISION_BF16 || prec == SF_PRECISION_FP16 ? 2 : 4);
    if (cublasCreate(&g.h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(g.h, st) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        exit(1);
    }
    GB_CHECK(cudaMalloc(&g.a, bytes));
    GB_CHECK(cudaMalloc(&g.b, bytes));
    GB_CHECK(cudaMalloc(&g.c, bytes));
    void *h = gb_host_random(n, prec, 1);
    GB_CHECK(cudaMemcpy(g.a, h, bytes, cudaMemcpyHostToDevice));
    GB_CHECK(cudaMemcpy(g.b, h, bytes, cudaMemcpyHostToDevice));
    free(h);
    float ms = gb_time_ms(gb_gemm_once, &g, st, 2, 5);
    cudaFree(g.a), cudaFree(g.b), cudaFree(g.c);
    cublasDestroy(g.h);
    return 2.0 * (double)g.n * g.n * g.n / (ms * 1e-3);
}

static inline void gb_card(char *name, size_t cap)
{
    struct cudaDeviceProp p;
    int dev;
    GB_CHECK(cudaGetDevice(&dev));
    GB_CHECK(cudaGetDeviceProperties(&p, dev));
    char nm[sizeof p.name + 1];
    memcpy(nm, p.name, sizeof p.name);
    nm[sizeof p.name] = 0;
    nm[64] = 0; /* keep the line short: the card's name is well under this */
    snprintf(name, cap, "%.64s (%d SMs, %.0f GiB)", nm, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0);
}

/* Device buffer filled with N(mean, std). */
static inline float *gb_device_randn(size_t n, float mean, float std, uint64_t seed)
{
    float *h = malloc(sizeof(float) * n), *d;
    if (!h) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    sf_bench_randn(h, n, mean, std, seed);
    GB_CHECK(cudaMalloc((void **)&d, sizeof(float) * n));
    GB_CHECK(cudaMemcpy(d, h, sizeof(float) * n, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* Device memory in use (all processes' view of this card), MiB. */
static inline double gb_used_mib(void)
{
    size_t f, t;
    GB_CHECK(cudaMemGetInfo(&f, &t));
    return (double)(t - f) / 1048576.0;
}

/* Appends layer d (kind's defaults with the given size) to a benchmark net. */
static inline void gb_add(sf_net *net, sf_layer_kind kind, int32_t size, int32_t stride)
{
    sf_layer_desc d;
    sf_layer_default_desc(kind, &d); /* LIF: tau=2, θ=1, hard reset to 0, sigmoid α=4 */
    d.out_features = d.out_channels = size;
    if (kind == SF_LAYER_CONV2D) d.kernel = 3, d.stride = stride, d.padding = 1;
    GB_OK(sf_net_add(net, &d, NULL));
}

/* W3's layers (Liang et al.'s CIFAR-10 VGG9) on a net with a 3×32×32 input: Conv(3→128), eight [BN → LIF → Conv]
 * blocks, BN → LIF → Flatten → Linear(8192→1024) → BN → LIF → Linear(1024→512) → BN → LIF → Linear(512→10). */
static inline void gb_vgg9_layers(sf_net *net)
{
    gb_add(net, SF_LAYER_CONV2D, 128, 1);
    const int32_t ch[8] = {128, 128, 256, 256, 256, 512, 512, 512}, st[8] = {1, 2, 1, 1, 2, 1, 1, 2};
    for (int i = 0; i < 8; i++) {
        gb_add(net, SF_LAYER_BATCHNORM, 0, 0);
        gb_add(net, SF_LAYER_LIF, 0, 0);
        gb_add(net, SF_LAYER_CONV2D, ch[i], st[i]);
    }
    const int32_t fc[3] = {1024, 512, 10};
    gb_add(net, SF_LAYER_BATCHNORM, 0, 0);
    gb_add(net, SF_LAYER_LIF, 0, 0);
    gb_add(net, SF_LAYER_FLATTEN, 0, 0);
    for (int i = 0; i < 3; i++) {
        gb_add(net, SF_LAYER_LINEAR, fc[i], 0);
        if (i < 2) {
            gb_add(net, SF_LAYER_BATCHNORM, 0, 0);
            gb_add(net, SF_LAYER_LIF, 0, 0);
        }
    }
}

#endif
