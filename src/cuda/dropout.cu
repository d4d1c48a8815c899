/* dropout.cu — dropout with one mask over all T steps, drawn by sf_dropout_keep exactly as on the CPU (dropout.c),
 * so forward and backward recompute the mask instead of storing it; x, y in the backend's activation type. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

extern "C" {
#include "core/rng.h"
}

/* Thread per mask element, time inside: the hash is computed once per element, not once per step. */
template <class A>
__global__ void dropout_kernel(int64_t T, int64_t n, float p, float scale, uint64_t seed, uint64_t counter, const A *x,
                               A *y)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float m = sf_dropout_keep(seed, counter, (uint64_t)i, p) ? scale : 0.0f;
        for (int64_t t = 0; t < T; t++) y[t * n + i] = sf_narrow<A>(sf_widen(x[t * n + i]) * m);
    }
}

static sf_status dropout(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter, const float *x,
                         float *y)
{
    if (!(p >= 0.0f && p < 1.0f)) return sf_fail(SF_ERR_INVALID, "dropout p = %g: must be in [0, 1)", p);
    if (T * n == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using A = decltype(tag);
        dropout_kernel<A><<<sf_cuda_blocks(n, 256), 256, 0, c->stream>>>(T, n, p, 1.0f / (1.0f - p), seed, counter,
                                                                         (const A *)x, (A *)y);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

sf_status sf_cuda_op_dropout_forward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                     const float *x, float *y)
{
    return dropout(be, T, n, p, seed, counter, x, y);
}

sf_status sf_cuda_op_dropout_backward(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                      const float *dy, float *dx)
{
    return dropout(be, T, n, p, seed, counter, dy, dx);
}
