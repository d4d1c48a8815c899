/* common.cuh — what every CUDA op file shares: the backend context (stream, cuBLAS/cuDNN handles, scratch,
 * the conv algorithm cache) and its helpers (context.cu), checked-call macros that carry file:line, and
 * launch-size helpers. */
#ifndef SF_CUDA_COMMON_CUH
#define SF_CUDA_COMMON_CUH

#include <math.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "core/backend.h"
#include "core/error.h"
}

struct sf_cuda_conv_entry; /* conv.cu */

/* A device-to-host copy on its way (copy_to_host_async): it lands in the page-locked staging buffer at `offset`. */
typedef struct sf_cuda_host_copy {
    void *dst;
    size_t offset, bytes;
} sf_cuda_host_copy;
#define SF_CUDA_HOST_COPIES 8

/* Scratch slots: per-neuron sums (BN+LIF), per-block partials (reductions), a convolution's 16-bit weight gradient
 * (cuDNN writes its operands' type; conv.cu widens it), the TF32 or bf16 parts of fp32 operands (binary_linear.cu). */
enum {
    SF_CUDA_SCRATCH_SUMS = 0,
    SF_CUDA_SCRATCH_PARTIALS,
    SF_CUDA_SCRATCH_CONV_DW,
    SF_CUDA_SCRATCH_SPLIT,
    SF_CUDA_SCRATCH_SLOTS
};

typedef struct sf_cuda_ctx {
    int device;
    sf_precision prec; /* fixed at creation: fp32 (FMA only), tf32, bf16 or fp16 */
    sf_scalar act;   /* storage of activations and GEMM/conv operands: 16-bit under bf16 and fp16 */
    size_t conv_ws_cap;     /* workspace a conv algorithm may use (sf_cuda_options.conv_workspace_mib) */
    sf_conv_algo conv_algo; /* im2col + SGEMM where it measures faster (auto), never (cudnn), or wherever it
                             * fits (gemm) */
    bool deterministic;     /* sf_cuda_options.deterministic: deterministic algorithms only, chosen without timing */
    int num_sms;
    cudaStream_t stream;
    cublasHandle_t cublas;
    void *cublas_ws; /* cuBLAS's workspace, set once: without it cuBLAS picks other kernels inside a graph capture */
    cudnnHandle_t cudnn;
    void *scratch[SF_CUDA_SCRATCH_SLOTS]; /* grown on demand */
    size_t scratch_bytes[SF_CUDA_SCRATCH_SLOTS];
    unsigned scratch_gen;               /* bumped whenever a scratch buffer moves: graphs recorded before are stale */
    struct sf_cuda_conv_entry *convs;   /* algorithm choices per conv shape */
    int n_convs, cap_convs;
    void *staging; /* page-locked: where copies to the host land before wait_host_copies moves them */
    size_t staging_bytes, staged;
    sf_cuda_host_copy copies[SF_CUDA_HOST_COPIES];
    int n_copies;
    cudaEvent_t copies_done; /* recorded after the last of them */
} sf_cuda_ctx;

/* The context of a CUDA backend; also makes its device current for this host thread. */
sf_cuda_ctx *sf_cuda_ctx_of(sf_backend *be);
/* Scratch slot `slot` (SF_CUDA_SCRATCH_SLOTS) of at least `bytes` on the backend's device, contents undefined; grows by
 * a synchronising cudaMalloc the first time a size is seen, never in steady-state training. */
sf_status sf_cuda_scratch(sf_cuda_ctx *c, int slot, size_t bytes, void **out);

/* Zeroes n floats, or n elements of the backend's activation type, on the backend's stream. */
sf_status sf_cuda_zero_f32(sf_cuda_ctx *c, float *p, int64_t n);
sf_status sf_cuda_zero_act(sf_cuda_ctx *c, void *p, int64_t n);

/* cudaMalloc of `bytes` (0: NULL), failing with the free and total device memory and what it was `what` for. */
sf_status sf_cuda_device_alloc(size_t bytes, void **out, const char *what);

/* Temporaries of the backend-less entry points, in `stream` order, from spikefuse's own pool on the current device,
 * which keeps its memory: the default pool releases at every synchronise, so each call would map fresh memory. */
sf_status sf_cuda_stream_alloc(size_t bytes, cudaStream_t stream, void **out);
sf_status sf_cuda_stream_free(void *p, cudaStream_t stream);

sf_status sf_cuda_fail_cuda(cudaError_t e, const char *file, int line, const char *call);
sf_status sf_cuda_fail_cublas(cublasStatus_t e, const char *file, int line, const char *call);
sf_status sf_cuda_fail_cudnn(cudnnStatus_t e, const char *file, int line, const char *call);

#define SF_CUDA_CHECK(call)                                                                                            \
    do {                                                                                                               \
        cudaError_t sf_e_ = (call);                                                                                    \
        if (sf_e_ != cudaSuccess) return sf_cuda_fail_cuda(sf_e_, __FILE__, __LINE__, #call);                          \
    } while (0)
#define SF_CUBLAS_CHECK(call)                                                                                          \
    do {                                                                                                               \
        cublasStatus_t sf_e_ = (call);                                                                                 \
        if (sf_e_ != CUBLAS_STATUS_SUCCESS) return sf_cuda_fail_cublas(sf_e_, __FILE__, __LINE__, #call);              \
    } while (0)
#define SF_CUDNN_CHECK(call)                                                                                           \
    do {                                                                                                               \
        cudnnStatus_t sf_e_ = (call);                                                                                  \
        if (sf_e_ != CUDNN_STATUS_SUCCESS) return sf_cuda_fail_cudnn(sf_e_, __FILE__, __LINE__, #call);                \
    } while (0)
/* After a kernel launch: launch-configuration errors surface here without synchronising. */
#define SF_CUDA_LAUNCHED() SF_CUDA_CHECK(cudaGetLastError())

/* Blocks of `threads` covering n items, capped for grid-stride loops. */
static inline unsigned sf_cuda_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > (1 << 30)) b = 1 << 30;
    return (unsigned)b;
}

/* A grid over [rows, cols] for kernels that give each thread one column (blocks of `threads` across) and loop over
 * every gridDim.y-th row: enough rows of blocks to fill the GPU, about 2048 blocks in all. */
static inline dim3 sf_cuda_row_grid(int64_t rows, int64_t cols, int threads)
{
    const unsigned across = sf_cuda_blocks(cols, threads);
    const int64_t down = rows < 1 ? 1 : rows < 65535 ? rows : 65535, fill = (2048 + across - 1) / across;
    return dim3(across, (unsigned)(down < fill ? down : fill));
}

#define SF_CUDA_GRID_STRIDE(i, n)                                                                                      \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

#endif
