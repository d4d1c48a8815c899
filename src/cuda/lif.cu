/* lif.cu — the neuron layer (every model) on CUDA: the raw entry points on a caller's stream (low-level public API,
 * benchmarks) and the backend's lif_forward / lif_backward on the backend's stream, in its activation type. A PLIF's
 * backward writes per-neuron sums that plif.cu reduces to dw: in the backend's scratch, or, for the raw entry
 * points, in memory taken and given back in stream order (sf_cuda_stream_alloc). */
#include "cuda/neuron.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/ops.cuh"

extern "C" {
#include "core/neuron_check.h"
}

static sf_cuda_neuron plain(const sf_lif_params *p, int64_t T, int64_t N, const void *x, const sf_lif_state *st,
                            const sf_cuda_lif_tuning *tune)
{
    sf_cuda_neuron a;
    memset(&a, 0, sizeof a);
    a.p = *p;
    a.k = sf_lif_coeffs_of(p);
    a.T = T;
    a.N = N;
    a.x = x;
    if (st) a.st = *st;
    if (tune) a.tune = *tune;
    return a;
}

sf_status sf_cuda_lif_forward_tuned(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                                    const sf_lif_out *out, const sf_lif_state *st, const sf_cuda_lif_tuning *tune,
                                    void *stream)
{
    SF_TRY(sf_plif_state_check("LIF forward", p, N, st, 0, 0));
    if (out->c.bits) return sf_cuda_lif_compact_forward(plain(p, T, N, x, st, tune), t, out, (cudaStream_t)stream);
    return sf_cuda_with_act(t, [&](auto tag) {
        return sf_cuda_neuron_forward_launch<decltype(tag)>(plain(p, T, N, x, st, tune), false, out,
                                                            (cudaStream_t)stream);
    });
}

/* The backward with a backend's context (c: its scratch holds a PLIF's sums) or without (c NULL: stream-ordered
 * memory for them). */
static sf_status backward(sf_cuda_ctx *c, const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                          const float *h, const void *ds, void *dx, const sf_lif_state *st,
                          const sf_cuda_lif_tuning *tune, cudaStream_t stream)
{
    SF_TRY(sf_plif_state_check("LIF backward", p, N, st, 0, 0));
    const sf_cuda_neuron a = plain(p, T, N, x, st, tune);
    auto launch = [&](float *sums) {
        return sf_cuda_with_act(t, [&](auto tag) {
            return sf_cuda_neuron_backward_launch<decltype(tag)>(a, false, h, ds, dx, sums, stream);
        });
    };
    if (p->model != SF_NEURON_PLIF || N == 0) return launch(NULL);
    if (c) {
        void *sums;
        SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SUMS, sizeof(float) * (size_t)N, &sums));
        SF_TRY(launch((float *)sums));
        return sf_cuda_plif_dw(c, a, (const float *)sums);
    }
    int dev, sms;
    SF_CUDA_CHECK(cudaGetDevice(&dev));
    SF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    void *mem;
    SF_TRY(sf_cuda_stream_alloc(sf_cuda_plif_scratch_bytes(a, sms), stream, &mem));
    float *sums = (float *)mem;
    sf_status s = launch(sums);
    if (s == SF_OK) s = sf_cuda_plif_dw_into(a, sums, sums + N + (N & 1), sms, stream); /* partials 8-byte aligned */
    sf_status f = sf_cuda_stream_free(mem, stream);
    return s != SF_OK ? s : f;
}

sf_status sf_cuda_lif_backward_tuned(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                                     const float *h, const void *ds, void *dx, const sf_lif_state *st,
                                     const sf_cuda_lif_tuning *tune, void *stream)
{
    return backward(NULL, p, T, N, t, x, h, ds, dx, st, tune, (cudaStream_t)stream);
}

sf_status sf_cuda_lif_forward(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                              const sf_lif_out *out, const sf_lif_state *st, void *stream)
{
    return sf_cuda_lif_forward_tuned(p, T, N, t, x, out, st, NULL, stream);
}

sf_status sf_cuda_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                               const float *h, const void *ds, void *dx, const sf_lif_state *st, void *stream)
{
    return sf_cuda_lif_backward_tuned(p, T, N, t, x, h, ds, dx, st, NULL, stream);
}

sf_status sf_cuda_op_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                 const sf_lif_out *out, const sf_lif_state *st)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_lif_forward(p, T, N, c->act, x, out, st, c->stream);
}

sf_status sf_cuda_op_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                  const float *h, const float *ds, float *dx, const sf_lif_state *st)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return backward(c, p, T, N, c->act, x, h, ds, dx, st, NULL, c->stream);
}

/* The backward, then its mask from dx in a second, read-only pass (spikes_compact's kernel: bits and counts). */
sf_status sf_cuda_op_lif_backward_masked(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                         const float *x, const float *h, const float *ds, float *dx,
                                         const sf_spikes *mask, float *count, const sf_lif_state *st)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    SF_TRY(backward(c, p, T, B * n, c->act, x, h, ds, dx, st, NULL, c->stream));
    sf_spikes m = {mask->bits, NULL, mask->cnt};
    return sf_cuda_spikes_compact(c, T * B, n, dx, &m, count, NULL);
}
