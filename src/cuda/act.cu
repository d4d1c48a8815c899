/* act.cu — the ops of the activation storage types (act.cuh): conversion between float, bf16 and fp16 (the input
 * upload, the weights' 16-bit copy, reading activations back, a convolution's 16-bit weight gradient widened into
 * the fp32 one) and scaling by a factor in device memory (fp16's loss scale). */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

template <class From, class To> __global__ void convert_kernel(int64_t n, const From *x, To *y, int accumulate)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float v = sf_widen(x[i]);
        y[i] = sf_narrow<To>(accumulate ? sf_widen(y[i]) + v : v);
    }
}

template <class T> __global__ void scale_kernel(int64_t n, const float *factor, T *x)
{
    const float f = *factor;
    SF_CUDA_GRID_STRIDE(i, n) x[i] = sf_narrow<T>(sf_widen(x[i]) * f);
}

static unsigned grid(sf_cuda_ctx *c, int64_t n)
{
    unsigned b = sf_cuda_blocks(n, 256), cap = 32u * (unsigned)c->num_sms;
    return b < cap ? b : cap;
}

/* y = x (accumulate 0) or y += x (1), converted from type `from` to type `to`. */
static sf_status convert(sf_cuda_ctx *c, int64_t n, sf_scalar from, const void *x, sf_scalar to, void *y,
                         int accumulate)
{
    if (n <= 0) return SF_OK;
    return sf_cuda_with_act(from, [&](auto ft) {
        return sf_cuda_with_act(to, [&](auto tt) {
            using F = decltype(ft);
            using T = decltype(tt);
            convert_kernel<F, T><<<grid(c, n), 256, 0, c->stream>>>(n, (const F *)x, (T *)y, accumulate);
            SF_CUDA_LAUNCHED();
            return SF_OK;
        });
    });
}

sf_status sf_cuda_op_convert(sf_backend *be, int64_t n, sf_scalar from, const void *x, sf_scalar to, void *y)
{
    return convert(sf_cuda_ctx_of(be), n, from, x, to, y, 0);
}

sf_status sf_cuda_widen(sf_cuda_ctx *c, int64_t n, const void *x, float *y, int accumulate)
{
    return convert(c, n, c->act, x, SF_SCALAR_F32, y, accumulate);
}

sf_status sf_cuda_op_scale(sf_backend *be, int64_t n, sf_scalar t, const float *factor, void *x)
{
    if (n <= 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(t, [&](auto tag) {
        using T = decltype(tag);
        scale_kernel<T><<<grid(c, n), 256, 0, c->stream>>>(n, factor, (T *)x);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}
