/* lif.cu — the LIF layer on CUDA: the raw entry points on a caller's stream (low-level public API) and the
 * backend's lif_forward / lif_backward on the backend's stream. */
#include "cuda/neuron.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/ops.cuh"

static sf_cuda_neuron plain(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const sf_lif_state *st)
{
    sf_cuda_neuron a;
    memset(&a, 0, sizeof a);
    a.p = *p;
    a.k = sf_lif_coeffs_of(p);
    a.T = T;
    a.N = N;
    a.x = x;
    if (st) a.st = *st;
    return a;
}

sf_status sf_cuda_lif_forward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const sf_lif_out *out,
                              const sf_lif_state *st, void *stream)
{
    if (out->c.bits) return sf_cuda_lif_compact_forward(plain(p, T, N, x, st), out, (cudaStream_t)stream);
    return sf_cuda_neuron_forward_launch(plain(p, T, N, x, st), false, out, (cudaStream_t)stream);
}

sf_status sf_cuda_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *h,
                               const float *ds, float *dx, const sf_lif_state *st, void *stream)
{
    return sf_cuda_neuron_backward_launch(plain(p, T, N, x, st), false, SF_DY_WRITE, h, ds, dx, NULL, NULL, NULL,
                                          (cudaStream_t)stream);
}

sf_status sf_cuda_op_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                 const sf_lif_out *out, const sf_lif_state *st)
{
    return sf_cuda_lif_forward(p, T, N, x, out, st, sf_cuda_ctx_of(be)->stream);
}

sf_status sf_cuda_op_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                  const float *h, const float *ds, float *dx, const sf_lif_state *st)
{
    return sf_cuda_lif_backward(p, T, N, x, h, ds, dx, st, sf_cuda_ctx_of(be)->stream);
}

/* The backward, then its mask from dx in a second, read-only pass (spikes_compact's kernel: bits and counts). */
sf_status sf_cuda_op_lif_backward_masked(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                         const float *x, const float *h, const float *ds, float *dx,
                                         const sf_spikes *mask, float *count, const sf_lif_state *st)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    SF_TRY(sf_cuda_lif_backward(p, T, B * n, x, h, ds, dx, st, c->stream));
    sf_spikes m = {mask->bits, NULL, mask->cnt};
    return sf_cuda_spikes_compact(c, T * B, n, dx, &m, count, NULL);
}
