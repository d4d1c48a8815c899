/* stream.cuh — C-callable access to a CUDA backend's stream, for code that orders its own work with the
 * backend's (benchmarks timing with events, a caller capturing a CUDA graph, the Python interface). */
#ifndef SF_CUDA_STREAM_CUH
#define SF_CUDA_STREAM_CUH

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cudaStream_t every op of this CUDA backend runs on. */
void *sf_cuda_backend_stream(sf_backend *be);

#ifdef __cplusplus
}
#endif

#endif
