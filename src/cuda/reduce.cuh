/* reduce.cuh — deterministic per-channel reductions over [R, C, hw] (batch-norm statistics and gradients): each
 * channel is split over P parts whose blocks write double partials in a fixed order, then a warp per channel adds
 * them in a fixed order. No atomics, so results are bitwise identical run to run. With hw = 1 (features after a
 * linear layer, NHWC tensors) a channel's elements lie C apart: there a block takes 32 channels side by side over a
 * range of rows, so that a warp reads consecutive elements. */
#ifndef SF_CUDA_REDUCE_CUH
#define SF_CUDA_REDUCE_CUH

#include "cuda/common.cuh"

#define SF_RED_THREADS 512

/* Adds the terms of elements k0 + threadIdx.x, + blockDim.x, … < k1 of channel c (element k: row k / hw, pixel
 * k % hw), in that order. I is the division's index type: 32-bit where a channel's count fits (64-bit made the loop
 * issue-bound). Eight elements' indices come first, then their terms, so that eight loads are in flight. */
template <class I, class F>
__device__ __forceinline__ void sf_cuda_channel_terms(const F &f, I k0, I k1, I hw, int32_t C, int32_t c, double *a,
                                                      double *b)
{
    constexpr int U = 8;
    const I step = blockDim.x;
    auto index = [&](I k) {
        I r = k / hw, j = k - r * hw;
        return ((int64_t)r * C + c) * (int64_t)hw + (int64_t)j;
    };
    I k = k0 + threadIdx.x;
    for (; k < k1 && k1 - k > (U - 1) * step; k += U * step) {
        int64_t i[U];
#pragma unroll
        for (int u = 0; u < U; u++) i[u] = index(k + (I)u * step);
#pragma unroll
        for (int u = 0; u < U; u++) f.term(i[u], c, a, b);
    }
    for (; k < k1; k += step) f.term(index(k), c, a, b);
}

/* F provides: __device__ void term(int64_t i, int32_t c, double *a, double *b) (adds element i's two terms)
 * and __device__ void finish(int32_t c, double a, double b, double count) (writes the channel's results). */
template <class F> __global__ void sf_cuda_channel_partials(F f, int64_t R, int32_t C, int64_t hw, int P, double *part)
{
    __shared__ double sa[SF_RED_THREADS], sb[SF_RED_THREADS];
    int32_t c = blockIdx.x;
    int64_t total = R * hw, chunk = (total + P - 1) / P;
    int64_t k0 = blockIdx.y * chunk, k1 = min(total, k0 + chunk);
    double a = 0.0, b = 0.0;
    if (total + SF_RED_THREADS <= (int64_t)UINT32_MAX)
        sf_cuda_channel_terms<uint32_t>(f, (uint32_t)k0, (uint32_t)k1, (uint32_t)hw, C, c, &a, &b);
    else
        sf_cuda_channel_terms<int64_t>(f, k0, k1, hw, C, c, &a, &b);
    sa[threadIdx.x] = a;
    sb[threadIdx.x] = b;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) {
            sa[threadIdx.x] += sa[threadIdx.x + o];
            sb[threadIdx.x] += sb[threadIdx.x + o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        part[2 * ((int64_t)c * P + blockIdx.y)] = sa[0];
        part[2 * ((int64_t)c * P + blockIdx.y) + 1] = sb[0];
    }
}

enum { SF_RED_ROWS = 16 }; /* rows in flight per block of the hw = 1 kernel (its threads: 32 channels × this) */

/* hw = 1: block (x, p) sums channels 32x … 32x + 31 over part p of the R rows, each thread every SF_RED_ROWS-th row
 * of it in order, then the block adds its rows' sums in a fixed order. */
template <class F> __global__ void sf_cuda_row_partials(F f, int64_t R, int32_t C, int P, double *part)
{
    __shared__ double sa[SF_RED_ROWS][32], sb[SF_RED_ROWS][32];
    const int32_t c = blockIdx.x * 32 + threadIdx.x;
    const int64_t chunk = (R + P - 1) / P, r0 = blockIdx.y * chunk, r1 = min(R, r0 + chunk);
    double a = 0.0, b = 0.0;
    if (c < C) { /* unrolled, so that several rows' loads are in flight before their terms are added (in order) */
#pragma unroll 8
        for (int64_t r = r0 + threadIdx.y; r < r1; r += SF_RED_ROWS) f.term(r * C + c, c, &a, &b);
    }
    sa[threadIdx.y][threadIdx.x] = a;
    sb[threadIdx.y][threadIdx.x] = b;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int y = 1; y < SF_RED_ROWS; y++) a += sa[y][threadIdx.x], b += sb[y][threadIdx.x];
        part[2 * ((int64_t)c * P + blockIdx.y)] = a;
        part[2 * ((int64_t)c * P + blockIdx.y) + 1] = b;
    }
}

/* A warp per channel: lane l adds the channel's parts l, l + 32, … in order (consecutive lanes read consecutive
 * partials), then the lanes' sums meet in a fixed butterfly and lane 0 finishes the channel. */
template <class F> __global__ void sf_cuda_channel_finish(F f, int32_t C, int P, const double *part, double count)
{
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = (int)(threadIdx.x & 31);
    if (c >= C) return; /* whole warps: blockDim.x is a multiple of 32 */
    double a = 0.0, b = 0.0;
    for (int p = lane; p < P; p += 32) {
        a += part[2 * (c * P + p)];
        b += part[2 * (c * P + p) + 1];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    if (lane == 0) f.finish((int32_t)c, a, b, count);
}

/* Parts per channel: enough blocks to fill the chip (sms multiprocessors), none with fewer than a few thousand
 * elements (hw = 1: a block holds 32 channels, and a part at least 128 rows). */
static inline int64_t sf_cuda_channel_parts(int sms, int64_t R, int32_t C, int64_t hw)
{
    const int64_t blocks = hw == 1 ? (C + 31) / 32 : C;
    int64_t P = (4 * (int64_t)sms + blocks - 1) / blocks, pmax = hw == 1 ? (R + 127) / 128 : (R * hw + 4095) / 4096;
    if (P > pmax) P = pmax;
    if (P < 1) P = 1;
    if (P > 65535) P = 65535;
    return P;
}

/* The reduction with P blocks per channel and its partials part [2·C·P doubles] given, on stream st. */
template <class F>
sf_status sf_cuda_channel_reduce_into(F f, int64_t R, int32_t C, int64_t hw, int64_t P, double *part, cudaStream_t st)
{
    if (C == 0) return SF_OK;
    if (hw == 1)
        sf_cuda_row_partials<F><<<dim3((unsigned)((C + 31) / 32), (unsigned)P), dim3(32, SF_RED_ROWS), 0, st>>>(
            f, R, C, (int)P, part);
    else
        sf_cuda_channel_partials<F><<<dim3((unsigned)C, (unsigned)P), SF_RED_THREADS, 0, st>>>(f, R, C, hw, (int)P,
                                                                                                part);
    SF_CUDA_LAUNCHED();
    sf_cuda_channel_finish<F>
        <<<sf_cuda_blocks(32 * (int64_t)C, 128), 128, 0, st>>>(f, C, (int)P, part, (double)(R * hw));
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

template <class F> sf_status sf_cuda_channel_reduce(sf_cuda_ctx *ctx, F f, int64_t R, int32_t C, int64_t hw)
{
    if (C == 0) return SF_OK;
    const int64_t P = sf_cuda_channel_parts(ctx->num_sms, R, C, hw);
    void *part;
    SF_TRY(sf_cuda_scratch(ctx, SF_CUDA_SCRATCH_PARTIALS, sizeof(double) * 2 * (size_t)C * (size_t)P, &part));
    return sf_cuda_channel_reduce_into(f, R, C, hw, P, (double *)part, ctx->stream);
}

#endif
