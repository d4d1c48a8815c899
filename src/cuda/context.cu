/* context.cu — what every CUDA op file shares at run time (declared in common.cuh): the backend context bound to
 * the current device, error translation with file:line, device allocation with a message a user can act on, and
 * the grow-on-demand scratch buffers, and the stream-ordered temporaries of the backend-less entry points. */
#include "cuda/common.cuh"

#include <mutex>

sf_status sf_cuda_fail_cuda(cudaError_t e, const char *file, int line, const char *call)
{
    (void)cudaGetLastError(); /* clear a sticky launch error so later calls report their own */
    return sf_fail(e == cudaErrorMemoryAllocation ? SF_ERR_NOMEM : SF_ERR_DEVICE, "%s:%d: %s: %s (%s)", file, line,
                   call, cudaGetErrorString(e), cudaGetErrorName(e));
}

sf_status sf_cuda_fail_cublas(cublasStatus_t e, const char *file, int line, const char *call)
{
    return sf_fail(e == CUBLAS_STATUS_ALLOC_FAILED ? SF_ERR_NOMEM : SF_ERR_DEVICE, "%s:%d: %s: %s (%s)", file, line,
                   call, cublasGetStatusString(e), cublasGetStatusName(e));
}

sf_status sf_cuda_fail_cudnn(cudnnStatus_t e, const char *file, int line, const char *call)
{
    return sf_fail(e == CUDNN_STATUS_ALLOC_FAILED ? SF_ERR_NOMEM : SF_ERR_DEVICE, "%s:%d: %s: %s", file, line, call,
                   cudnnGetErrorString(e));
}

sf_cuda_ctx *sf_cuda_ctx_of(sf_backend *be)
{
    sf_cuda_ctx *c = (sf_cuda_ctx *)be->ctx;
    int cur;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != c->device) cudaSetDevice(c->device);
    return c;
}

sf_status sf_cuda_device_alloc(size_t bytes, void **out, const char *what)
{
    *out = NULL;
    if (bytes == 0) return SF_OK;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return sf_fail(SF_ERR_NOMEM,
                       "CUDA out of memory allocating %zu bytes (%.1f MiB) for %s; %.1f MiB free of "
                       "%.1f MiB: use a smaller batch or memory=recompute",
                       bytes, bytes / 1048576.0, what, free_b / 1048576.0, total_b / 1048576.0);
    }
    if (e != cudaSuccess) return sf_cuda_fail_cuda(e, __FILE__, __LINE__, "cudaMalloc");
    return SF_OK;
}

/* One keeping pool per device, made on first use. */
static sf_status keeping_pool(cudaMemPool_t *out)
{
    enum { MAX_DEVICES = 64 };
    static std::mutex lock;
    static cudaMemPool_t pools[MAX_DEVICES];
    int dev;
    SF_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 0 || dev >= MAX_DEVICES)
        return sf_fail(SF_ERR_UNSUPPORTED, "CUDA device %d: at most %d devices", dev, (int)MAX_DEVICES);
    std::lock_guard<std::mutex> hold(lock);
    if (!pools[dev]) {
        cudaMemPoolProps props = {};
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = dev;
        cudaMemPool_t pool = NULL;
        SF_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
        uint64_t keep = UINT64_MAX; /* the release threshold: never trim at a synchronisation */
        SF_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
        pools[dev] = pool;
    }
    *out = pools[dev];
    return SF_OK;
}

sf_status sf_cuda_stream_alloc(size_t bytes, cudaStream_t stream, void **out)
{
    cudaMemPool_t pool = NULL;
    SF_TRY(keeping_pool(&pool));
    SF_CUDA_CHECK(cudaMallocFromPoolAsync(out, bytes, pool, stream));
    return SF_OK;
}

sf_status sf_cuda_stream_free(void *p, cudaStream_t stream)
{
    SF_CUDA_CHECK(cudaFreeAsync(p, stream));
    return SF_OK;
}

sf_status sf_cuda_scratch(sf_cuda_ctx *c, int slot, size_t bytes, void **out)
{
    if (bytes > c->scratch_bytes[slot]) {
        if (c->scratch[slot]) {
            SF_CUDA_CHECK(cudaStreamSynchronize(c->stream)); /* earlier work may still read it */
            SF_CUDA_CHECK(cudaFree(c->scratch[slot]));
            c->scratch[slot] = NULL;
            c->scratch_bytes[slot] = 0;
        }
        SF_TRY(sf_cuda_device_alloc(bytes, &c->scratch[slot], "backend scratch"));
        c->scratch_bytes[slot] = bytes;
        c->scratch_gen++;
    }
    *out = c->scratch[slot];
    return SF_OK;
}

sf_status sf_cuda_zero_f32(sf_cuda_ctx *c, float *p, int64_t n)
{
    if (n > 0) SF_CUDA_CHECK(cudaMemsetAsync(p, 0, sizeof(float) * (size_t)n, c->stream));
    return SF_OK;
}

sf_status sf_cuda_zero_act(sf_cuda_ctx *c, void *p, int64_t n)
{
    if (n > 0) SF_CUDA_CHECK(cudaMemsetAsync(p, 0, sf_scalar_size(c->act) * (size_t)n, c->stream));
    return SF_OK;
}
