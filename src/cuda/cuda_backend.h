/* cuda_backend.h — what the CUDA backend offers the layers above it (src/backends, benchmarks, the Python
 * interface), as a C header: the backend itself, its neuron kernels on a caller's stream, the stream its ops run
 * on, its convolution choices and a description of the CUDA build. */
#ifndef SF_CUDA_BACKEND_H
#define SF_CUDA_BACKEND_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend on CUDA device `device` with the given precision (bf16 and fp16: 16-bit activations, be->act);
 * `opt` NULL takes the defaults. */
sf_status sf_cuda_backend_create(int32_t device, sf_precision precision, const sf_cuda_options *opt, sf_backend **out);

/* The time-fused LIF over [T, N] device arrays on a caller's stream (NULL: default), asynchronous: the op table's
 * lif_forward / lif_backward without a backend. x, out->s, ds, dx in type t; h and the state st float. */
sf_status sf_cuda_lif_forward(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                              const sf_lif_out *out, const sf_lif_state *st, void *stream);
sf_status sf_cuda_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                               const float *h, const void *ds, void *dx, const sf_lif_state *st, void *stream);

/* A forced configuration of those kernels, for benchmarks and tests that compare configurations; 0 in a field is
 * the automatic choice (neuron_launch.cuh says how it chooses). The _tuned calls are the calls above with it. */
typedef struct sf_cuda_lif_tuning {
    int32_t fwd_vec;   /* neurons per forward thread: 1, or 4 where N and the alignment allow */
    int32_t fwd_ahead; /* forward steps loaded ahead: 8, or 32 with one neuron per thread */
    int32_t bwd_seg;   /* recompute segment of the backward, in steps (-1: as long as shared memory allows) */
    int32_t bwd_ahead; /* backward steps loaded ahead: 4, 8, or 32 when h is recomputed */
    int32_t bwd_vec;   /* neurons per backward thread: 1, or 4 where the LIF recomputes in one segment 4 or 8 ahead */
} sf_cuda_lif_tuning;
sf_status sf_cuda_lif_forward_tuned(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                                    const sf_lif_out *out, const sf_lif_state *st, const sf_cuda_lif_tuning *tune,
                                    void *stream);
sf_status sf_cuda_lif_backward_tuned(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar t, const void *x,
                                     const float *h, const void *ds, void *dx, const sf_lif_state *st,
                                     const sf_cuda_lif_tuning *tune, void *stream);

/* Fused BN → LIF on a caller's stream without a backend (the public sf_bn_lif_* calls): the op table's bn_lif_forward /
 * _backward (recompute, no split), x, s, ds, dx in type t; scratch: `workspace`, sf_cuda_bn_lif_workspace bytes. */
size_t sf_cuda_bn_lif_workspace(int64_t T, sf_bn_shape sh);
sf_status sf_cuda_bn_lif_forward(const sf_lif_params *p, int64_t T, sf_bn_shape sh, sf_scalar t, const void *x,
                                 const float *mean, const float *var, float eps, const float *gamma, const float *beta,
                                 const sf_lif_out *out, const sf_lif_state *st, void *stream);
sf_status sf_cuda_bn_lif_backward(const sf_lif_params *p, int64_t T, sf_bn_shape sh, sf_scalar t, const void *x,
                                  const float *mean, const float *var, float eps, const float *gamma, const float *beta,
                                  const void *ds, void *dx, float *dgamma, float *dbeta, const sf_lif_state *st,
                                  void *workspace, size_t workspace_bytes, void *stream);

/* sf_host_alloc and sf_host_free on a CUDA device: page-locked memory, or malloc's where none can be had. */
void *sf_cuda_host_alloc(size_t bytes);
void sf_cuda_host_free(void *p);

/* Usable CUDA devices now (0 when the driver finds none). */
int32_t sf_cuda_count_devices(void);

/* The cudaStream_t every op of this CUDA backend runs on, for code that orders its own work with the backend's
 * (benchmarks timing with events, a caller capturing a CUDA graph, the Python interface). */
void *sf_cuda_backend_stream(sf_backend *be);

/* Writes (snprintf-style, truncating to cap) one line per cached conv shape and op: the algorithm chosen, its
 * chunks, time and workspace, and the fastest allowed one whatever its workspace. Returns the length wanted. */
size_t sf_cuda_conv_report(sf_backend *be, char *buf, size_t cap);

/* "CUDA runtime X.Y (driver X.Y), cuBLAS X.Y.Z, cuDNN X.Y.Z, N device(s)" into buf (snprintf semantics). */
void sf_cuda_describe(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
