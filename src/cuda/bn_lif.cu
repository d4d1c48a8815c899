/* bn_lif.cu — fused BN → neuron, every model (Liang et al., Alg. 1–3; docs/architecture.md, References). Forward:
 * normalise and integrate in one pass. Backward: pass 1 recomputes y and h, runs the reverse loop, writes dy into dx
 * and keeps Σ_t dy, Σ_t dy·x̂ per neuron, reduced deterministically to dbeta, dgamma; pass 2 turns dy into dx in place
 * (cheaper than Liang et al.'s recompute there: the loop is issue-bound). x, s, ds, dx: activation type; sums float. */
#include "cuda/cuda_backend.h"
#include "cuda/neuron.cuh"
#include "cuda/ops.cuh"
#include "cuda/reduce.cuh"

extern "C" {
#include "core/neuron_check.h"
}

static sf_cuda_neuron bn_neuron(const sf_lif_params *p, int64_t T, sf_bn_shape sh, const void *x, const float *mean,
                                const float *var, float eps, const float *gamma, const float *beta)
{
    sf_cuda_neuron a;
    memset(&a, 0, sizeof a);
    a.p = *p;
    a.k = sf_lif_coeffs_of(p);
    a.T = T;
    a.N = sh.rows / T * sh.c * sh.hw;
    a.x = x;
    a.bn.hw = sh.hw;
    a.bn.C = sh.c;
    a.bn.mean = mean;
    a.bn.var = var;
    a.bn.gamma = gamma;
    a.bn.beta = beta;
    a.bn.eps = eps;
    return a;
}

static sf_status check_rows(int64_t T, sf_bn_shape sh)
{
    if (T <= 0 || sh.rows % T != 0)
        return sf_fail(SF_ERR_INVALID, "BN+LIF: rows = %lld is not a multiple of T = %lld", (long long)sh.rows,
                       (long long)T);
    return SF_OK;
}

sf_status sf_cuda_bn_lif_forward(const sf_lif_params *p, int64_t T, sf_bn_shape sh, sf_scalar t, const void *x,
                                 const float *mean, const float *var, float eps, const float *gamma, const float *beta,
                                 const sf_lif_out *out, const sf_lif_state *st, void *stream)
{
    SF_TRY(check_rows(T, sh));
    SF_TRY(sf_plif_state_check("BN+LIF forward", p, sh.rows / T * sh.c * sh.hw, st, sh.c, sh.hw));
    sf_cuda_neuron a = bn_neuron(p, T, sh, x, mean, var, eps, gamma, beta);
    if (st) a.st = *st;
    return sf_cuda_with_act(t, [&](auto tag) {
        return sf_cuda_neuron_forward_launch<decltype(tag)>(a, true, out, (cudaStream_t)stream);
    });
}

sf_status sf_cuda_op_bn_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh, const float *x,
                                    const float *mean, const float *var, float eps, const float *gamma,
                                    const float *beta, const sf_lif_out *out, const sf_lif_state *st)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_bn_lif_forward(p, T, sh, c->act, x, mean, var, eps, gamma, beta, out, st, c->stream);
}

/* Adds the per-neuron sums of pass 1 over the batch: sums is [2][B, C, hw]. */
struct NeuronSumsF {
    const float *s0, *s1;
    float *dgamma, *dbeta;
    __device__ void term(int64_t i, int32_t, double *a, double *b) const
    {
        *a += s0[i];
        *b += s1[i];
    }
    __device__ void finish(int32_t c, double a, double b, double) const
    {
        dbeta[c] = (float)a;
        dgamma[c] = (float)b;
    }
};

/* Whether the byte ranges of two [n]-element tensors meet. */
static bool overlap(const void *a, const void *b, size_t bytes)
{
    return (const char *)a < (const char *)b + bytes && (const char *)b < (const char *)a + bytes;
}

/* The backward on context c (its type, stream, SMs, scratch; sums, where not NULL, holds the per-neuron sums instead:
 * sums_bytes, the plan's). Pass 1: the reverse time loop, dy into dx, Σdy and Σdy·x̂ per neuron, a PLIF's dw terms;
 * pass 2 turns dy into dx in place (bn.cu). Under a split, phase 1 leaves dy in dx for phase 2. */
static sf_status bn_lif_backward_on(sf_cuda_ctx *c, const sf_lif_params *p, int64_t T, sf_bn_shape sh, const void *x,
                                    const float *h, const float *mean, const float *var, float eps, const float *gamma,
                                    const float *beta, const void *ds, void *dx, float *dgamma, float *dbeta,
                                    const sf_lif_state *st, const sf_bn_split *split, void *sums)
{
    SF_TRY(check_rows(T, sh));
    const int phase = split ? split->phase : 0; /* 0: both passes here */
    if (split && (phase < 1 || phase > 2))
        return sf_fail(SF_ERR_INVALID, "BN+LIF backward: split phase %d (expected 1 or 2)", phase);
    if (phase != 2 && (!dgamma || !dbeta))
        return sf_fail(SF_ERR_INVALID, "BN+LIF backward: dgamma and dbeta are needed (the sums pass writes them)");
    if (phase == 2 && (!split->sum_dy || !split->sum_dyx || split->rows < 1))
        return sf_fail(SF_ERR_INVALID, "BN+LIF backward: phase 2 needs the sums of every part and their rows");
    const size_t bytes = (size_t)(sh.rows * sh.c * sh.hw) * sf_scalar_size(c->act);
    if (!dx || overlap(x, dx, bytes))
        return sf_fail(SF_ERR_INVALID, "BN+LIF backward: dx is %s (it holds ∂L/∂y between the two passes, which "
                                       "then read x)", dx ? "in the bytes of x" : "NULL");
    SF_TRY(sf_plif_state_check("BN+LIF backward", p, sh.rows / T * sh.c * sh.hw, st, sh.c, sh.hw));
    sf_cuda_neuron a = bn_neuron(p, T, sh, x, mean, var, eps, gamma, beta);
    if (st) a.st = *st;
    if (a.N == 0) return SF_OK;
    if (phase != 2) { /* pass 1 */
        const bool plif = p->model == SF_NEURON_PLIF;
        if (!sums)
            SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SUMS, sizeof(float) * (plif ? 3 : 2) * (size_t)a.N, &sums));
        float *s = (float *)sums;
        SF_TRY(sf_cuda_with_act(c->act, [&](auto tag) {
            return sf_cuda_neuron_backward_launch<decltype(tag)>(a, true, h, ds, dx, s, c->stream);
        }));
        SF_TRY(sf_cuda_channel_reduce(c, NeuronSumsF{s, s + a.N, dgamma, dbeta}, sh.rows / T, sh.c, sh.hw));
        if (plif) SF_TRY(sf_cuda_plif_dw(c, a, s + 2 * a.N));
        if (phase == 1) return SF_OK;
    }
    const bool all = phase == 2;
    return sf_cuda_bn_dx(c, sh, (double)((all ? split->rows : sh.rows) * sh.hw), x, mean, var, eps, gamma, dx,
                         all ? split->sum_dyx : dgamma, all ? split->sum_dy : dbeta, dx);
}

sf_status sf_cuda_op_bn_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh, const float *x,
                                     const float *h, const float *mean, const float *var, float eps, const float *gamma,
                                     const float *beta, const float *ds, float *dx, float *dgamma, float *dbeta,
                                     const sf_lif_state *st, const sf_bn_split *split, void *scratch)
{
    return bn_lif_backward_on(sf_cuda_ctx_of(be), p, T, sh, x, h, mean, var, eps, gamma, beta, ds, dx, dgamma, dbeta,
                              st, split, scratch);
}

/* The caller's workspace, cut into the two scratch slots the backward uses: the per-neuron sums (2·N floats, and N
 * more for a PLIF's dw: the size does not depend on the model) and the channel reduction's partials (at most 2·C·P
 * doubles with P <= (4·SMs + C - 1) / C, see reduce.cuh; a PLIF's w has 1 or C channels). */
static size_t sums_bytes(sf_bn_shape sh, int64_t T, int per_neuron)
{
    return (sizeof(float) * (size_t)per_neuron * (size_t)(sh.rows / T * sh.c * sh.hw) + 255) & ~(size_t)255;
}

static sf_status current_sms(int *device, int *sms)
{
    SF_CUDA_CHECK(cudaGetDevice(device));
    SF_CUDA_CHECK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, *device));
    return SF_OK;
}

static size_t partial_bytes(int sms, int32_t C) { return sizeof(double) * 2 * (4 * (size_t)sms + (size_t)C); }

size_t sf_cuda_op_bn_lif_scratch(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh)
{
    (void)be;
    return T > 0 && sh.rows % T == 0 ? sums_bytes(sh, T, p->model == SF_NEURON_PLIF ? 3 : 2) : 0;
}

size_t sf_cuda_bn_lif_workspace(int64_t T, sf_bn_shape sh)
{
    int device, sms;
    if (T <= 0 || sh.rows % T != 0 || current_sms(&device, &sms) != SF_OK) return 0;
    return sums_bytes(sh, T, 3) + partial_bytes(sms, sh.c);
}

sf_status sf_cuda_bn_lif_backward(const sf_lif_params *p, int64_t T, sf_bn_shape sh, sf_scalar t, const void *x,
                                  const float *mean, const float *var, float eps, const float *gamma, const float *beta,
                                  const void *ds, void *dx, float *dgamma, float *dbeta, const sf_lif_state *st,
                                  void *workspace, size_t workspace_bytes, void *stream)
{
    SF_TRY(check_rows(T, sh));
    sf_cuda_ctx c;
    memset(&c, 0, sizeof c);
    SF_TRY(current_sms(&c.device, &c.num_sms));
    const size_t need = sums_bytes(sh, T, 3) + partial_bytes(c.num_sms, sh.c);
    if (!workspace || workspace_bytes < need)
        return sf_fail(SF_ERR_INVALID, "BN+LIF backward: the workspace has %zu bytes, %zu are needed "
                                       "(sf_bn_lif_workspace_bytes)", workspace ? workspace_bytes : 0, need);
    c.act = t;
    c.stream = (cudaStream_t)stream;
    c.scratch[SF_CUDA_SCRATCH_SUMS] = workspace; /* preset slots: sf_cuda_scratch hands them out, never allocates */
    c.scratch_bytes[SF_CUDA_SCRATCH_SUMS] = sums_bytes(sh, T, 3);
    c.scratch[SF_CUDA_SCRATCH_PARTIALS] = (char *)workspace + sums_bytes(sh, T, 3);
    c.scratch_bytes[SF_CUDA_SCRATCH_PARTIALS] = partial_bytes(c.num_sms, sh.c);
    return bn_lif_backward_on(&c, p, T, sh, x, NULL, mean, var, eps, gamma, beta, ds, dx, dgamma, dbeta, st, NULL,
                              NULL);
}
