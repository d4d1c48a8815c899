/* rlif_grid.cuh — the recurrent LIF layer's time loops as one cooperative kernel over the whole GPU (rlif_grid.cu),
 * for rlif.cu. Each block keeps its share of V in shared memory for all T steps and the blocks meet at a grid-wide
 * barrier once per step, so a step costs a few microseconds instead of a GEMM launch and a step kernel.
 * A block owns 32 samples and a share of the neurons (at most 24), so that the blocks are one per SM.
 *   forward (event-driven): a warp per sample, a lane per neuron: it sums its row of V over the inputs that spiked at
 *     the step before (the bits every block wrote at that step), in ascending input order: the CPU's sums, bit for
 *     bit.
 *   forward (dense) and backward (dense dy): the rows s_{t-1} (from the bits) or dy_{t+1} of the block's samples are
 *     staged in chunks, and each warp multiplies its share of each chunk into the block's 32 samples × 24 neurons
 *     on the tensor cores, in fp32 through TF32 splits (three products; two where the rows are 0/1 spikes); the
 *     warps' shares are added in warp order: deterministic.
 * Each sets *ran to false (and launches nothing) where the shape does not fit the device's shared memory or
 * co-resident blocks; the caller then runs its other paths. */
#ifndef SF_CUDA_RLIF_GRID_CUH
#define SF_CUDA_RLIF_GRID_CUH

#include "cuda/common.cuh"

/* Writes the spikes (s, h where not NULL) and out->c (bits, and idx, cnt where c has them) of the recurrence over x
 * [T, B, n] with V [n, n] (activation type), event-driven or dense. */
sf_status sf_cuda_rlif_grid_forward(sf_cuda_ctx *c, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                    const void *x, const void *v, bool event_driven, const sf_lif_out *out, bool *ran);

/* dx (activation type) from h, ds and V; mask (bits and cnt, may have bits NULL) marks the nonzero entries of dx as
 * stored; count (may be NULL) gets their number added. */
sf_status sf_cuda_rlif_grid_backward(sf_cuda_ctx *c, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                     const float *h, const void *v, const void *ds, void *dx, const sf_spikes *mask,
                                     float *count, bool *ran);

#endif
