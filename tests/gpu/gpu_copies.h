/* gpu_copies.h — what the GPU tests share: a checked CUDA call and float arrays copied between host and device
 * (header-only, static: each GPU test is one program). The backend runs on a non-blocking stream, which does not wait
 * for the legacy stream's copies and memsets: each helper here waits for its own work to finish, so a kernel the
 * test launches next never races it (a test that did raced, and failed one run in two on an H200). */
#ifndef SF_TESTS_GPU_COPIES_H
#define SF_TESTS_GPU_COPIES_H

#include "testutil.h"

#include <cuda_runtime.h>
#include <stdlib.h>

#define CU(call) CHECK((call) == cudaSuccess, "%s", #call)

/* A device copy of n host floats. */
static float *dev_from(const float *h, size_t n)
{
    float *d = NULL;
    CU(cudaMalloc((void **)&d, 4 * (n ? n : 1)));
    if (n) CU(cudaMemcpy(d, h, 4 * n, cudaMemcpyHostToDevice));
    CU(cudaDeviceSynchronize()); /* a pageable copy may still be in flight when cudaMemcpy returns */
    return d;
}

/* Zeroes n bytes of device memory, finished before it returns. */
static inline void dev_zero(void *d, size_t n)
{
    CU(cudaMemset(d, 0, n));
    CU(cudaDeviceSynchronize());
}

/* A malloc'd host copy of n device floats. */
static float *host_from(const float *d, size_t n)
{
    float *h = malloc(4 * (n ? n : 1));
    if (n) CU(cudaMemcpy(h, d, 4 * n, cudaMemcpyDeviceToHost));
    return h;
}

#endif
