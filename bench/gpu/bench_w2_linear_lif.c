/* bench_w2_linear_lif.c — workload W2 (docs/perf.md, Workloads: the Open Neuromorphic benchmark): Linear(n, n) with
 * bias → LIF (tau=5, atan α=2, detach_reset as in the peer script), x = randn[T=500, B=16, n], loss = sum of output
 * spikes, forward + backward with the weight and bias gradients, n in {4096, 16384}, fp32 (no TF32) or the
 * precision named by the argument (bench_w2_linear_lif [fp32|tf32|bf16]), through the
 * CUDA backend's op table as the network engine drives it. The LIF backward recomputes h from the linear output
 * and writes its gradient in place; the spike buffer is reused for the loss gradient (ones). */
#include "cuda/cuda_backend.h"
#include "gpu_bench.h"

#include <cuda.h>

struct w2 {
    sf_backend *be;
    sf_lif_params p;
    int64_t T, B;
    int32_t n;
    float *x, *w, *b, *y, *s, *dw, *db, *count;
};

static void step(void *arg)
{
    struct w2 *q = arg;
    sf_backend *be = q->be;
    int64_t rows = q->T * q->B, N = q->B * q->n;
    GB_OK(be->linear_forward(be, rows, q->n, q->n, q->x, q->w, q->b, q->y));
    sf_lif_out out = {.s = q->s, .spike_count = q->count};
    GB_OK(be->zero(be, q->count, sizeof(float)));
    GB_OK(be->lif_forward(be, &q->p, q->T, N, q->y, &out, NULL));
    /* ∂(Σ s)/∂s = 1, written over the spikes, which the loss has consumed */
    union {
        float f;
        unsigned u;
    } one = {1.0f};
    if (cuMemsetD32Async((CUdeviceptr)q->s, one.u, (size_t)(rows * q->n), (CUstream)sf_cuda_backend_stream(be)) !=
        CUDA_SUCCESS) {
        fprintf(stderr, "cuMemsetD32Async failed\n");
        exit(1);
    }
    GB_OK(be->lif_backward(be, &q->p, q->T, N, q->y, NULL, q->s, q->y, NULL));
    GB_OK(be->linear_backward(be, rows, q->n, q->n, q->x, q->w, q->y, NULL, q->dw, q->db));
}

int main(int argc, char **argv)
{
    char card[256];
    gb_card(card, sizeof card);
    sf_precision prec = gb_precision(argc > 1 ? argv[1] : NULL);
    sf_backend *be;
    GB_OK(sf_cuda_backend_create(0, prec, NULL, &be));
    double bw = gb_copy_bandwidth(NULL);
    printf("W2 linear-lif fwd+bwd  precision: %s  card: %s  copy bandwidth: %.0f GB/s\n", sf_precision_name(prec),
           card, bw);
    printf("%6s %10s %12s %12s %10s\n", "n", "ms", "tensors_MiB", "device_MiB", "spikes/step");
    const int32_t ns[] = {4096, 16384};
    for (int i = 0; i < 2; i++) {
        double base = gb_used_mib();
        struct w2 q = {.be = be, .T = 500, .B = 16, .n = ns[i]};
        sf_lif_default_params(&q.p);
        q.p.tau = 5.0f;
        q.p.surrogate = SF_SURROGATE_ATAN;
        q.p.alpha = 2.0f;
        q.p.detach_reset = 1;
        size_t rows = (size_t)(q.T * q.B), nn = (size_t)q.n * (size_t)q.n;
        /* PyTorch's Linear init: U(-1/sqrt(n), 1/sqrt(n)); a normal of the same scale fires alike */
        float sc = 1.0f / sqrtf((float)q.n) / sqrtf(3.0f);
        q.x = gb_device_randn(rows * (size_t)q.n, 0.0f, 1.0f, 5);
        q.w = gb_device_randn(nn, 0.0f, sc, 6);
        q.b = gb_device_randn((size_t)q.n, 0.0f, sc, 7);
        size_t act = rows * (size_t)q.n * sizeof(float);
        GB_OK(be->alloc(be, act, (void **)&q.y));
        GB_OK(be->alloc(be, act, (void **)&q.s));
        GB_OK(be->alloc(be, nn * sizeof(float), (void **)&q.dw));
        GB_OK(be->alloc(be, (size_t)q.n * sizeof(float), (void **)&q.db));
        GB_OK(be->alloc(be, sizeof(float), (void **)&q.count));
        double tensors = (3.0 * act + 2.0 * nn * 4 + 2.0 * q.n * 4) / 1048576.0;
        float ms = gb_time_ms(step, &q, (cudaStream_t)sf_cuda_backend_stream(be), 3, 10);
        GB_OK(be->sync(be));
        double dev = gb_used_mib() - base;
        float cnt;
        GB_OK(be->copy_to_host(be, &cnt, q.count, sizeof cnt));
        printf("%6d %10.2f %12.0f %12.0f %10.0f\n", q.n, ms, tensors, dev, cnt);
        cudaFree(q.x), cudaFree(q.w), cudaFree(q.b);
        be->release(be, q.y), be->release(be, q.s), be->release(be, q.dw), be->release(be, q.db);
        be->release(be, q.count);
    }
    be->destroy(be);
    return 0;
}
