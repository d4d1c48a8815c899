/* precision.cu — bf16 copies of the GEMM/conv operands under SF_PRECISION_BF16, and the conversion of bf16 results
 * back to fp32. The copies live in the backend's scratch (slots below), so parameters, gradients and activations
 * stay fp32 everywhere else; rounding is to nearest even, and 0/1 spikes convert exactly. */
#include "cuda/ops.cuh"

__global__ void f32_to_bf16_kernel(int64_t n, const float *x, __nv_bfloat16 *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void bf16_to_f32_kernel(int64_t n, const __nv_bfloat16 *x, float *y, int accumulate)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = accumulate ? y[i] + __bfloat162float(x[i]) : __bfloat162float(x[i]);
}

sf_status sf_cuda_bf16_copy(sf_cuda_ctx *c, int slot, int64_t n, const float *x, __nv_bfloat16 **out)
{
    void *p;
    SF_TRY(sf_cuda_scratch(c, slot, sizeof(__nv_bfloat16) * (size_t)(n > 0 ? n : 1), &p));
    *out = (__nv_bfloat16 *)p;
    if (x && n > 0) {
        f32_to_bf16_kernel<<<sf_cuda_blocks(n, 256), 256, 0, c->stream>>>(n, x, *out);
        SF_CUDA_LAUNCHED();
    }
    return SF_OK;
}

sf_status sf_cuda_bf16_to_f32(sf_cuda_ctx *c, int64_t n, const __nv_bfloat16 *x, float *y, int accumulate)
{
    if (n <= 0) return SF_OK;
    bf16_to_f32_kernel<<<sf_cuda_blocks(n, 256), 256, 0, c->stream>>>(n, x, y, accumulate);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}
