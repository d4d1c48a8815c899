/* spikes.cuh — device helpers for the compact spike form (core/spikes.h), shared by the kernels that write it (LIF
 * forward, recurrent layer, masks of nonzero gradients, spikes_compact) and those that read its lists. Writers run
 * blocks covering whole segments of a row: thread t takes neuron j = base + t of row r, base and blockDim multiples of
 * SF_SPIKE_SEG, so a warp's ballot is one bits word and a segment's 8 warps rank its spikes with one exchange. */
#ifndef SF_CUDA_SPIKES_CUH
#define SF_CUDA_SPIKES_CUH

#include "cuda/common.cuh"

/* Writes the calling warp's bits word of row r (thread t of the warp: neuron j, a multiple of 32 apart from t) and
 * returns it: no lists, no barrier. */
__device__ __forceinline__ unsigned sf_cuda_emit_bits(const sf_spikes &c, int64_t n, int64_t r, int64_t j, bool valid,
                                                      bool on)
{
    const unsigned m = __ballot_sync(0xffffffffu, valid && on);
    const int64_t j0 = j - (threadIdx.x & 31); /* the warp's first neuron: a multiple of 32 */
    if ((threadIdx.x & 31) == 0 && j0 < n) c.bits[r * ((n + 31) / 32) + j0 / 32] = m;
    return m;
}

/* Writes compact row r (bits; idx and cnt where c has them) for this block's neurons: `on` where the thread's neuron
 * is active, valid where it exists (j < n). Every thread calls it; wc: blockDim/32 ints of shared memory, not to be
 * reused before the caller's next __syncthreads. Returns the warp's active count in its lane 0, 0 in other lanes. */
__device__ __forceinline__ int sf_cuda_emit_row(const sf_spikes &c, int64_t n, int64_t r, int64_t j, bool valid, bool on,
                                                int *wc)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned m = sf_cuda_emit_bits(c, n, r, j, valid, on);
    if (lane == 0) wc[warp] = __popc(m);
    __syncthreads();
    if (c.cnt) {
        const int first = warp & ~(SF_SPIKE_SEG / 32 - 1); /* the segment's first warp */
        int before = 0;
        for (int w = first; w < warp; w++) before += wc[w];
        if (c.idx && valid && on)
            c.idx[r * n + j / SF_SPIKE_SEG * SF_SPIKE_SEG + before + __popc(m & ((1u << lane) - 1u))] =
                (uint8_t)(j % SF_SPIKE_SEG);
        if ((threadIdx.x & (SF_SPIKE_SEG - 1)) == 0 && j < n) {
            int total = 0;
            for (int w = first; w < first + SF_SPIKE_SEG / 32; w++) total += wc[w];
            c.cnt[r * ((n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG) + j / SF_SPIKE_SEG] = total;
        }
    }
    return lane == 0 ? __popc(m) : 0;
}

/* Adds the block's partial counts (one per thread) into *count: exact, the partial sums are small integers. */
__device__ __forceinline__ void sf_cuda_add_count(float *count, float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0 && v > 0.0f) atomicAdd(count, v);
}

/* Stages segment g of row r's list (from idx and cnt) into list[] as neuron indices, for the whole block; returns
 * its length. The caller synchronises before reading list and before the next call. */
__device__ __forceinline__ int sf_cuda_stage_segment(const sf_spikes &c, int64_t n, int64_t r, int64_t g, int *list)
{
    const int k = c.cnt[r * ((n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG) + g];
    for (int m = threadIdx.x; m < k; m += blockDim.x) list[m] = (int)(g * SF_SPIKE_SEG + c.idx[r * n + g * SF_SPIKE_SEG + m]);
    return k;
}

#endif
