/* rlif_grid.cuh — the recurrent LIF layer's time loops as one cooperative kernel over the whole GPU (rlif_grid.cu),
 * for rlif.cu: a block per SM owns 32 samples and up to 24 neurons, keeps its share of V in shared memory for all T
 * steps, and meets the others at a grid barrier per step. Event-driven forward: the CPU's sums bit for bit; dense
 * forward and backward: TF32-split tensor-core products, the warps' shares added in order (deterministic). Each sets
 * *ran to false, launching nothing, where the shape does not fit the device; the caller then runs its other paths. */
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
