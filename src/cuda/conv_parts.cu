/* conv_parts.cu — the operands of the split convolution path (conv.cu) and of the spike-input linear layers
 * (binary_linear.cu): an fp32 tensor's two TF32 parts (tf32.cuh) stacked per image in groups, so one tensor-core
 * product over the stacked channels sums the products of several parts, and the sum of stacked results folded
 * back. */
#include "cuda/ops.cuh"
#include "cuda/tf32.cuh"

/* out[img][g][j] = the high (bit g of lo_mask clear) or low TF32 part of x[img][j], for j < block. */
__global__ void tf32_stack_kernel(int64_t n, int64_t block, const float *__restrict__ x, int groups, unsigned lo_mask,
                                  float *__restrict__ out)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        const int64_t img = i / block, j = i - img * block;
        uint32_t part[2];
        sf_tf32_split(x[i], &part[0], &part[1]);
        float *o = out + img * groups * block + j;
        for (int g = 0; g < groups; g++) o[g * block] = __uint_as_float(part[lo_mask >> g & 1]);
    }
}

/* out[img][j] = Σ_g in[img][g][j], the groups in order. */
__global__ void fold_kernel(int64_t n, int64_t block, int groups, const float *__restrict__ in, float *__restrict__ out)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        const int64_t img = i / block, j = i - img * block;
        const float *p = in + img * groups * block + j;
        float s = p[0];
        for (int g = 1; g < groups; g++) s += p[g * block];
        out[i] = s;
    }
}

sf_status sf_cuda_tf32_stack(sf_cuda_ctx *c, int64_t images, int64_t block, const float *x, int groups,
                             unsigned lo_mask, float *out)
{
    const int64_t n = images * block;
    if (n == 0) return SF_OK;
    tf32_stack_kernel<<<sf_cuda_blocks(n, 256), 256, 0, c->stream>>>(n, block, x, groups, lo_mask, out);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

sf_status sf_cuda_fold(sf_cuda_ctx *c, int64_t images, int64_t block, int groups, const float *in, float *out)
{
    const int64_t n = images * block;
    if (n == 0) return SF_OK;
    fold_kernel<<<sf_cuda_blocks(n, 256), 256, 0, c->stream>>>(n, block, groups, in, out);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}
