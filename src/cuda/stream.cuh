/* stream.cuh — C-callable access to a CUDA backend's stream, for code that orders its own work with the
 * backend's (benchmarks timing with events, a caller capturing a CUDA graph, the Python interface), and a report
 * of its convolution algorithm choices for benchmarks. */
#ifndef SF_CUDA_STREAM_CUH
#define SF_CUDA_STREAM_CUH

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cudaStream_t every op of this CUDA backend runs on. */
void *sf_cuda_backend_stream(sf_backend *be);

/* Writes (snprintf-style, truncating to cap) one line per cached conv shape and op: the algorithm chosen, its
 * chunks, time and workspace, and the fastest allowed one whatever its workspace. Returns the length wanted. */
size_t sf_cuda_conv_report(sf_backend *be, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
