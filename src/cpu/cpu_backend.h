/* cpu_backend.h — what the CPU backend offers the layers above it (src/backends): the backend itself, its neuron
 * kernels callable without a backend object (the low-level public LIF API), its thread count and a description. */
#ifndef SF_CPU_BACKEND_H
#define SF_CPU_BACKEND_H

#include "core/backend.h"

sf_status sf_cpu_backend_create(sf_backend **out);

/* The time-fused LIF over [T, N] host arrays (the op table's lif_forward / lif_backward without a backend). */
sf_status sf_cpu_lif_forward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const sf_lif_out *out,
                             const sf_lif_state *st);
sf_status sf_cpu_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *h,
                              const float *ds, float *dx, const sf_lif_state *st);
/* The same calls and the fused BN → neuron in double (SF_SCALAR_F64, spikefuse.h: every array is double; the
 * BN+LIF's x is [T, B, C, hw], sh.rows = T·B), a plain loop over each neuron's steps (neuron_f64.c). */
sf_status sf_cpu_lif_forward_f64(const sf_lif_params *p, int64_t T, int64_t N, const void *x, void *s,
                                 const sf_lif_state *st);
sf_status sf_cpu_lif_backward_f64(const sf_lif_params *p, int64_t T, int64_t N, const void *x, const void *ds, void *dx,
                                  const sf_lif_state *st);
sf_status sf_cpu_bn_lif_forward_f64(const sf_lif_params *p, int64_t T, sf_bn_shape sh, const void *x, const void *mean,
                                    const void *var, float eps, const void *gamma, const void *beta, void *s,
                                    const sf_lif_state *st);
sf_status sf_cpu_bn_lif_backward_f64(const sf_lif_params *p, int64_t T, sf_bn_shape sh, const void *x,
                                     const void *mean, const void *var, float eps, const void *gamma, const void *beta,
                                     const void *ds, void *dx, void *dgamma, void *dbeta, const sf_lif_state *st);

/* OpenMP threads of the CPU kernels and of OpenBLAS (one pool: the OpenMP build of OpenBLAS); n <= 0 keeps the
 * OpenMP default. */
void sf_cpu_set_threads(int32_t n);
int32_t sf_cpu_threads(void);
/* "OpenMP N thread(s); BLAS: <OpenBLAS's build configuration>" into buf (snprintf semantics). */
void sf_cpu_describe(char *buf, size_t cap);

#endif
