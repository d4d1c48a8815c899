/* bench_w2_linear_lif.c — workload W2 (docs/notebook/perf.md, Workloads: the Open Neuromorphic benchmark): Linear(n, n) with
 * bias → LIF (tau=5, atan α=2, detach_reset as in the peer script), x = randn[T=500, B=16, n], loss = sum of output
 * spikes, forward + backward with the weight and bias gradients, n in {4096, 16384}, in the precision named by the
 * argument (bench_w2_linear_lif [fp32|tf32|bf16|fp16]; fp32 without TF32 by default), through the CUDA backend's op
 * table as the network engine drives it: under bf16 / fp16 x, y and the spikes are 16-bit and each step first
 * rewrites the 16-bit copy of the fp32 weights (as the engine does after every update). The LIF backward recomputes
 * h from the linear output and writes its gradient in place; the spike buffer is reused for the loss gradient (ones).
 * Floors, each printed with the time over it: the GEMM work (two n×n×rows products) at the GEMM rate of the same
 * precision measured in this run, and the bytes every step must move at the copy bandwidth. */
#include "cuda/cuda_backend.h"
#include "gpu_bench.h"

#include <cuda.h>

struct w2 {
    sf_backend *be;
    sf_lif_params p;
    int64_t T, B;
    int32_t n;
    float *x, *w, *b, *y, *s, *dw, *db, *count; /* x, y, s in the activation type; w the fp32 master */
    void *w_act;                                /* its 16-bit copy (NULL under fp32 / tf32) */
    uint16_t one16;                             /* 1.0 as a 16-bit pattern of the activation type */
};

static void step(void *arg)
{
    struct w2 *q = arg;
    sf_backend *be = q->be;
    int64_t rows = q->T * q->B, N = q->B * q->n, nn = (int64_t)q->n * q->n;
    const float *w = q->w;
    if (q->w_act) {
        GB_OK(be->convert(be, nn, SF_SCALAR_F32, q->w, be->act, q->w_act));
        w = q->w_act;
    }
    GB_OK(be->linear_forward(be, rows, q->n, q->n, q->x, w, q->b, q->y));
    sf_lif_out out = {.s = q->s, .spike_count = q->count};
    GB_OK(be->zero(be, q->count, sizeof(float)));
    GB_OK(be->lif_forward(be, &q->p, q->T, N, q->y, &out, NULL));
    /* ∂(Σ s)/∂s = 1, written over the spikes, which the loss has consumed */
    union {
        float f;
        unsigned u;
    } one = {1.0f};
    CUstream st = (CUstream)sf_cuda_backend_stream(be);
    CUresult r = q->w_act ? cuMemsetD16Async((CUdeviceptr)q->s, q->one16, (size_t)(rows * q->n), st)
                          : cuMemsetD32Async((CUdeviceptr)q->s, one.u, (size_t)(rows * q->n), st);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuMemsetD*Async failed\n");
        exit(1);
    }
    GB_OK(be->lif_backward(be, &q->p, q->T, N, q->y, NULL, q->s, q->y, NULL));
    GB_OK(be->linear_backward(be, rows, q->n, q->n, q->x, w, q->y, NULL, q->dw, q->db));
}

int main(int argc, char **argv)
{
    char card[256];
    gb_card(card, sizeof card);
    sf_precision prec = gb_precision(argc > 1 ? argv[1] : NULL);
    sf_backend *be;
    GB_OK(sf_cuda_backend_create(0, prec, NULL, &be));
    const size_t es = sf_scalar_size(be->act);
    cudaStream_t stream = (cudaStream_t)sf_cuda_backend_stream(be);
    double bw = gb_copy_bandwidth(NULL), rate = gb_gemm_rate(prec, stream);
    printf("W2 linear-lif fwd+bwd  precision: %s  card: %s  copy bandwidth: %.0f GB/s  GEMM rate (%s): %.0f TFLOP/s\n",
           sf_precision_name(prec), card, bw, sf_precision_name(prec), rate / 1e12);
    printf("%6s %10s %10s %8s %10s %8s %12s %12s %10s\n", "n", "ms", "gemm_floor", "x_gemm", "byte_floor", "x_bytes",
           "tensors_MiB", "device_MiB", "spikes/step");
    const int32_t ns[] = {4096, 16384};
    for (int i = 0; i < 2; i++) {
        double base = gb_used_mib();
        struct w2 q = {.be = be, .T = 500, .B = 16, .n = ns[i]};
        q.one16 = be->act == SF_SCALAR_BF16 ? 0x3f80 : 0x3c00;
        sf_lif_default_params(&q.p);
        q.p.tau = 5.0f;
        q.p.surrogate = SF_SURROGATE_ATAN;
        q.p.alpha = 2.0f;
        q.p.detach_reset = 1;
        size_t rows = (size_t)(q.T * q.B), nn = (size_t)q.n * (size_t)q.n, nx = rows * (size_t)q.n;
        /* PyTorch's Linear init: U(-1/sqrt(n), 1/sqrt(n)); a normal of the same scale fires alike */
        float sc = 1.0f / sqrtf((float)q.n) / sqrtf(3.0f);
        float *x32 = gb_device_randn(nx, 0.0f, 1.0f, 5);
        q.w = gb_device_randn(nn, 0.0f, sc, 6);
        q.b = gb_device_randn((size_t)q.n, 0.0f, sc, 7);
        q.x = x32;
        if (be->act != SF_SCALAR_F32) {
            GB_OK(be->alloc(be, nx * es, (void **)&q.x));
            GB_OK(be->convert(be, (int64_t)nx, SF_SCALAR_F32, x32, be->act, q.x));
            GB_OK(be->alloc(be, nn * es, &q.w_act));
            GB_OK(be->sync(be));
            GB_CHECK(cudaFree(x32));
        }
        size_t act = nx * es;
        GB_OK(be->alloc(be, act, (void **)&q.y));
        GB_OK(be->alloc(be, act, (void **)&q.s));
        GB_OK(be->alloc(be, nn * sizeof(float), (void **)&q.dw));
        GB_OK(be->alloc(be, (size_t)q.n * sizeof(float), (void **)&q.db));
        GB_OK(be->alloc(be, sizeof(float), (void **)&q.count));
        double tensors = (3.0 * act + 2.0 * nn * 4 + (q.w_act ? nn * es : 0) + 2.0 * q.n * 4) / 1048576.0;
        float ms = gb_time_ms(step, &q, stream, 3, 10);
        GB_OK(be->sync(be));
        double dev = gb_used_mib() - base;
        float cnt;
        GB_OK(be->copy_to_host(be, &cnt, q.count, sizeof cnt));
        /* the two products y = x·Wᵀ and dW = dyᵀ·x (the input needs no gradient) */
        double gemm_ms = 2.0 * 2.0 * (double)rows * (double)nn / rate * 1e3;
        /* bytes per step: the weight copy (read fp32, write 16-bit) and the GEMMs' operands (W and x twice, y
         * written, dW written in fp32), LIF forward (read y, write s), the ones over s, LIF backward (read y and
         * ds, write dy), the bias gradient (read dy) */
        double bytes = (q.w_act ? nn * (4.0 + es) : 0.0) + 2.0 * nn * es + 2.0 * nx * es + nx * es + nn * 4.0 +
                       2.0 * nx * es + nx * es + 3.0 * nx * es + nx * es;
        double byte_ms = bytes / (bw * 1e9) * 1e3;
        printf("%6d %10.2f %10.2f %8.2f %10.2f %8.2f %12.0f %12.0f %10.0f\n", q.n, ms, gemm_ms, ms / gemm_ms, byte_ms,
               ms / byte_ms, tensors, dev, cnt);
        cudaFree(q.w), cudaFree(q.b);
        be->release(be, q.x), be->release(be, q.y), be->release(be, q.s), be->release(be, q.dw), be->release(be, q.db);
        be->release(be, q.count);
        if (q.w_act) be->release(be, q.w_act);
    }
    be->destroy(be);
    return 0;
}
