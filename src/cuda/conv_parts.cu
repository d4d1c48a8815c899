/* conv_parts.cu — the operands of the split convolution path (conv.cu) and of the spike-input linear layers
 * (binary_linear.cu): an fp32 tensor's two TF32 parts (tf32.cuh) stacked per image in groups, so one tensor-core
 * product over the stacked channels sums the products of several parts, and the sum of stacked results folded
 * back. The convolutions' stacks are NHWC, which cuDNN's tensor-core kernels take without a copy: NCHW tensors go in
 * and come out through a 32 × 32 tile transpose in shared memory (reads and writes both coalesced). */
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

enum { TILE = 32, TILE_ROWS = 8 };

/* out[img][p][g·C + ch] = the high or low part (bit g of lo_mask) of x[img][ch][p], and hi[img][p][ch] its high
 * part where hi is not NULL: a block per tile of 32 channels × 32 pixels of one image. */
__global__ void tf32_stack_nhwc_kernel(int32_t C, int32_t P, const float *__restrict__ x, int groups, unsigned lo_mask,
                                       float *__restrict__ out, float *__restrict__ hi)
{
    __shared__ float tile[TILE][TILE + 1];
    const int64_t img = blockIdx.z;
    const int32_t c0 = blockIdx.y * TILE, p0 = blockIdx.x * TILE;
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const int32_t ch = c0 + r, p = p0 + threadIdx.x;
        tile[r][threadIdx.x] = ch < C && p < P ? x[(img * C + ch) * P + p] : 0.0f;
    }
    __syncthreads();
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const int32_t p = p0 + r, ch = c0 + threadIdx.x;
        if (p >= P || ch >= C) continue;
        uint32_t part[2];
        sf_tf32_split(tile[threadIdx.x][r], &part[0], &part[1]);
        float *o = out + (img * P + p) * groups * C + ch;
        for (int g = 0; g < groups; g++) o[g * C] = __uint_as_float(part[lo_mask >> g & 1]);
        if (hi) hi[(img * P + p) * C + ch] = __uint_as_float(part[0]);
    }
}

/* out[img][ch][p] = Σ_g in[img][p][g·C + ch], the groups in order. */
__global__ void fold_nchw_kernel(int32_t C, int32_t P, int groups, const float *__restrict__ in,
                                 float *__restrict__ out)
{
    __shared__ float tile[TILE][TILE + 1];
    const int64_t img = blockIdx.z;
    const int32_t c0 = blockIdx.y * TILE, p0 = blockIdx.x * TILE;
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const int32_t p = p0 + r, ch = c0 + threadIdx.x;
        float s = 0.0f;
        if (p < P && ch < C) {
            const float *q = in + (img * P + p) * groups * C + ch;
            s = q[0];
            for (int g = 1; g < groups; g++) s += q[g * C];
        }
        tile[r][threadIdx.x] = s;
    }
    __syncthreads();
    for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
        const int32_t ch = c0 + r, p = p0 + threadIdx.x;
        if (ch < C && p < P) out[(img * C + ch) * P + p] = tile[threadIdx.x][r];
    }
}

static dim3 tiles(int64_t images, int32_t C, int32_t P)
{
    return dim3((unsigned)((P + TILE - 1) / TILE), (unsigned)((C + TILE - 1) / TILE), (unsigned)images);
}

sf_status sf_cuda_tf32_stack_nhwc(sf_cuda_ctx *c, int64_t images, int32_t channels, int32_t pixels, const float *x,
                                  int groups, unsigned lo_mask, float *out, float *hi)
{
    if (images == 0 || channels == 0 || pixels == 0) return SF_OK;
    tf32_stack_nhwc_kernel<<<tiles(images, channels, pixels), dim3(TILE, TILE_ROWS), 0, c->stream>>>(
        channels, pixels, x, groups, lo_mask, out, hi);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

sf_status sf_cuda_fold_nchw(sf_cuda_ctx *c, int64_t images, int32_t channels, int32_t pixels, int groups,
                            const float *in, float *out)
{
    if (images == 0 || channels == 0 || pixels == 0) return SF_OK;
    fold_nchw_kernel<<<tiles(images, channels, pixels), dim3(TILE, TILE_ROWS), 0, c->stream>>>(channels, pixels,
                                                                                             groups, in, out);
    SF_CUDA_LAUNCHED();
    return SF_OK;
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
