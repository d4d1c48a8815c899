/* cpu_neuron.h — the CPU neuron ops: time-fused LIF, batch norm and fused BN→LIF, with the signatures of the
 * matching sf_backend fields (field `foo` is implemented by sf_cpu_op_foo); the CPU backend table points at them.
 *
 * Threading: OpenMP over blocks of contiguous neurons (or channels), the whole time loop inside one block; every
 * reduction uses a fixed chunking and double accumulation, so results are bitwise identical for any thread count.
 *
 * BN: gamma/beta may be NULL (1 and 0: no affine); dgamma/dbeta may be NULL (not wanted). x̂ uses the float
 * invstd = 1/sqrtf(var + eps) and the statistics are reduced in double.
 *
 * Eval mode of BN→LIF: the signatures carry no `training` flag. In evaluation the engine passes the running
 * statistics as mean/var to bn_lif_forward and never calls the backward, so bn_lif_backward always treats
 * mean/var as the batch statistics of x (dx includes the paths through mean and var, as PyTorch's training mode). */
#ifndef SF_CPU_NEURON_H
#define SF_CPU_NEURON_H

#include "core/backend.h"

sf_status sf_cpu_op_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                const sf_lif_out *out, const sf_lif_state *st);
sf_status sf_cpu_op_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                 const float *h, const float *ds, float *dx, const sf_lif_state *st);

sf_status sf_cpu_op_lif_backward_masked(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                        const float *x, const float *h, const float *ds, float *dx,
                                        const sf_spikes *mask, float *count, const sf_lif_state *st);

/* rlif.c: the recurrent LIF layer (core/backend.h). */
size_t sf_cpu_op_rlif_workspace(sf_backend *be, int64_t T, int64_t B, int64_t n);
sf_status sf_cpu_op_rlif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                 const float *x, const float *v, int32_t sparse, const sf_lif_out *out, void *ws);
sf_status sf_cpu_op_rlif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                  const float *x, const float *h, const uint32_t *s_bits, const float *v,
                                  const float *ds, int32_t fwd_sparse, int32_t bwd_sparse, float *dx, float *dv,
                                  const sf_spikes *mask, float *grad_count, void *ws);

sf_status sf_cpu_op_bn_stats(sf_backend *be, sf_bn_shape sh, const float *x, float *mean, float *var);
sf_status sf_cpu_op_bn_forward(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                               float eps, const float *gamma, const float *beta, float *y);
sf_status sf_cpu_op_bn_backward(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean,
                                const float *var, float eps, const float *gamma, const float *dy, float *dx,
                                float *dgamma, float *dbeta);
sf_status sf_cpu_op_bn_update_running(sf_backend *be, sf_bn_shape sh, float momentum, const float *mean,
                                      const float *var, float *running_mean, float *running_var);
sf_status sf_cpu_op_bn_stats_merge(sf_backend *be, int32_t parts, int32_t C, const float *part_stats, float *mean,
                                   float *var);

/* x is [T, B, C, hw] with sh.rows = T·B; neuron n = (b·C + c)·hw + p of a step, step stride B·C·hw. */
sf_status sf_cpu_op_bn_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                                   const float *x, const float *mean, const float *var, float eps,
                                   const float *gamma, const float *beta, const sf_lif_out *out,
                                   const sf_lif_state *st);
/* h: [T, N] kept by the forward (full mode) or NULL (recompute). Writes dx [T, N], dgamma [C], dbeta [C] (or, with
 * split, what its phase writes). */
sf_status sf_cpu_op_bn_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                                    const float *x, const float *h, const float *mean, const float *var, float eps,
                                    const float *gamma, const float *beta, const float *ds, float *dx,
                                    float *dgamma, float *dbeta, const sf_lif_state *st, const sf_bn_split *split,
                                    void *planned);
/* 0: the backward keeps a block's sums in its thread's own scratch, nothing planned. */
size_t sf_cpu_op_bn_lif_scratch(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh);

#endif
