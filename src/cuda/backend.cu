/* backend.cu — the CUDA backend object: device, one stream with the cuBLAS and cuDNN handles bound to it,
 * device memory, error translation, and the op table filled from the op files (ops.cuh). */
#include "cuda/ops.cuh"
#include "cuda/stream.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sf_status sf_cu_fail_cuda(cudaError_t e, const char *file, int line, const char *call)
{
    (void)cudaGetLastError(); /* clear a sticky launch error so later calls report their own */
    return sf_fail(e == cudaErrorMemoryAllocation ? SF_ERR_NOMEM : SF_ERR_DEVICE, "%s:%d: %s: %s (%s)", file, line,
                   call, cudaGetErrorString(e), cudaGetErrorName(e));
}

sf_status sf_cu_fail_cublas(cublasStatus_t e, const char *file, int line, const char *call)
{
    return sf_fail(e == CUBLAS_STATUS_ALLOC_FAILED ? SF_ERR_NOMEM : SF_ERR_DEVICE, "%s:%d: %s: %s (%s)", file, line,
                   call, cublasGetStatusString(e), cublasGetStatusName(e));
}

sf_status sf_cu_fail_cudnn(cudnnStatus_t e, const char *file, int line, const char *call)
{
    return sf_fail(e == CUDNN_STATUS_ALLOC_FAILED ? SF_ERR_NOMEM : SF_ERR_DEVICE, "%s:%d: %s: %s", file, line, call,
                   cudnnGetErrorString(e));
}

sf_cu_ctx *sf_cu_ctx_of(sf_backend *be)
{
    sf_cu_ctx *c = (sf_cu_ctx *)be->ctx;
    int cur;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != c->device) cudaSetDevice(c->device);
    return c;
}

/* Device allocation with the message a user needs when it fails. */
static sf_status device_alloc(size_t bytes, void **out, const char *what)
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
    if (e != cudaSuccess) return sf_cu_fail_cuda(e, __FILE__, __LINE__, "cudaMalloc");
    return SF_OK;
}

sf_status sf_cu_scratch(sf_cu_ctx *c, int slot, size_t bytes, void **out)
{
    if (bytes > c->scratch_bytes[slot]) {
        if (c->scratch[slot]) {
            SF_CU_CHECK(cudaStreamSynchronize(c->stream)); /* earlier work may still read it */
            SF_CU_CHECK(cudaFree(c->scratch[slot]));
            c->scratch[slot] = NULL;
            c->scratch_bytes[slot] = 0;
        }
        SF_TRY(device_alloc(bytes, &c->scratch[slot], "backend scratch"));
        c->scratch_bytes[slot] = bytes;
        c->scratch_gen++;
    }
    *out = c->scratch[slot];
    return SF_OK;
}

sf_status sf_cu_zero_f32(sf_cu_ctx *c, float *p, int64_t n)
{
    if (n > 0) SF_CU_CHECK(cudaMemsetAsync(p, 0, sizeof(float) * (size_t)n, c->stream));
    return SF_OK;
}

static sf_status cu_alloc(sf_backend *be, size_t bytes, void **out)
{
    sf_cu_ctx_of(be);
    return device_alloc(bytes, out, "a tensor");
}

static void cu_release(sf_backend *be, void *p)
{
    if (!p) return;
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    cudaStreamSynchronize(c->stream); /* nothing queued may still use it */
    cudaFree(p);
}

static sf_status cu_copy_from_host(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    /* From pageable memory this returns once src has been staged, so the caller may reuse src at once. */
    if (bytes) SF_CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    return SF_OK;
}

static sf_status cu_copy_to_host(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    if (!bytes) return SF_OK;
    SF_CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    SF_CU_CHECK(cudaStreamSynchronize(c->stream));
    return SF_OK;
}

static sf_status cu_copy(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    if (bytes) SF_CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    return SF_OK;
}

static sf_status cu_zero(sf_backend *be, void *dst, size_t bytes)
{
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    if (bytes) SF_CU_CHECK(cudaMemsetAsync(dst, 0, bytes, c->stream));
    return SF_OK;
}

static sf_status cu_sync(sf_backend *be)
{
    SF_CU_CHECK(cudaStreamSynchronize(sf_cu_ctx_of(be)->stream));
    return SF_OK;
}

static void cu_destroy(sf_backend *be)
{
    if (!be) return;
    sf_cu_ctx *c = (sf_cu_ctx *)be->ctx;
    if (c) {
        cudaSetDevice(c->device);
        if (c->stream) cudaStreamSynchronize(c->stream);
        sf_cu_conv_cache_free(c);
        for (int i = 0; i < SF_CU_SCRATCH_SLOTS; i++) cudaFree(c->scratch[i]);
        if (c->cudnn) cudnnDestroy(c->cudnn);
        if (c->cublas) cublasDestroy(c->cublas);
        cudaFree(c->cublas_ws);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(be);
}

/* CUDA graphs of the stream's work. ThreadLocal mode: an unsafe call from this thread while recording (a
 * cudaMalloc, a synchronise) fails the recording instead of silently escaping it. */
typedef struct {
    cudaGraphExec_t exec;
    unsigned scratch_gen; /* the scratch buffers the recorded kernels point into */
} cu_graph;

static sf_status cu_graph_begin(sf_backend *be)
{
    SF_CU_CHECK(cudaStreamBeginCapture(sf_cu_ctx_of(be)->stream, cudaStreamCaptureModeThreadLocal));
    return SF_OK;
}

static sf_status cu_graph_end(sf_backend *be, void **out)
{
    *out = NULL;
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (e != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        return sf_cu_fail_cuda(e, __FILE__, __LINE__, "cudaStreamEndCapture");
    }
    cu_graph *cg = (cu_graph *)calloc(1, sizeof *cg);
    if (!cg) {
        cudaGraphDestroy(g);
        return sf_fail(SF_ERR_NOMEM, "CUDA graph: out of host memory");
    }
    e = cudaGraphInstantiate(&cg->exec, g, 0);
    cudaGraphDestroy(g); /* the executable graph is independent of it */
    if (e != cudaSuccess) {
        free(cg);
        return sf_cu_fail_cuda(e, __FILE__, __LINE__, "cudaGraphInstantiate");
    }
    cg->scratch_gen = c->scratch_gen;
    *out = cg;
    return SF_OK;
}

static sf_status cu_graph_launch(sf_backend *be, void *graph)
{
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    cu_graph *cg = (cu_graph *)graph;
    if (cg->scratch_gen != c->scratch_gen)
        return sf_fail(SF_ERR_STATE, "CUDA graph: backend scratch moved since it was recorded");
    SF_CU_CHECK(cudaGraphLaunch(cg->exec, c->stream));
    return SF_OK;
}

static void cu_graph_free(sf_backend *be, void *graph)
{
    if (!graph) return;
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    cudaStreamSynchronize(c->stream); /* a launch may still be running */
    cudaGraphExecDestroy(((cu_graph *)graph)->exec);
    free(graph);
}

static void fill_table(sf_backend *be)
{
    be->name = "cuda";
    be->alloc = cu_alloc;
    be->release = cu_release;
    be->copy_from_host = cu_copy_from_host;
    be->copy_to_host = cu_copy_to_host;
    be->copy = cu_copy;
    be->zero = cu_zero;
    be->sync = cu_sync;
    be->destroy = cu_destroy;
    be->lif_forward = sf_cu_lif_forward;
    be->lif_backward = sf_cu_lif_backward;
    be->bn_stats = sf_cu_bn_stats;
    be->bn_forward = sf_cu_bn_forward;
    be->bn_backward = sf_cu_bn_backward;
    be->bn_update_running = sf_cu_bn_update_running;
    be->bn_lif_forward = sf_cu_bn_lif_forward;
    be->bn_lif_backward = sf_cu_bn_lif_backward;
    be->linear_forward = sf_cu_linear_forward;
    be->linear_backward = sf_cu_linear_backward;
    be->conv_workspace = sf_cu_conv_workspace;
    be->conv_forward = sf_cu_conv_forward;
    be->conv_backward = sf_cu_conv_backward;
    be->avgpool_forward = sf_cu_avgpool_forward;
    be->avgpool_backward = sf_cu_avgpool_backward;
    be->maxpool_forward = sf_cu_maxpool_forward;
    be->maxpool_backward = sf_cu_maxpool_backward;
    be->dropout_forward = sf_cu_dropout_forward;
    be->dropout_backward = sf_cu_dropout_backward;
    be->add = sf_cu_add;
    be->axpy = sf_cu_axpy;
    be->u8_to_f32 = sf_cu_u8_to_f32;
    be->f32_to_u8 = sf_cu_f32_to_u8;
    be->leaky_forward = sf_cu_leaky_forward;
    be->leaky_backward = sf_cu_leaky_backward;
    be->softmax_xent = sf_cu_softmax_xent;
    be->sgd_step = sf_cu_sgd_step;
    be->adam_step = sf_cu_adam_step;
    be->check_finite = sf_cu_check_finite;
    /* SF_CUDA_GRAPH=0 leaves graphs out (to measure the step without them) */
    const char *gr = getenv("SF_CUDA_GRAPH");
    if (!(gr && gr[0] == '0')) {
        be->graph_begin = cu_graph_begin;
        be->graph_end = cu_graph_end;
        be->graph_launch = cu_graph_launch;
        be->graph_free = cu_graph_free;
    }
}

static sf_status init_ctx(sf_cu_ctx *c, int32_t device, sf_precision prec)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return sf_fail(SF_ERR_UNSUPPORTED, "no usable CUDA device (%s); use device cpu",
                       e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    if (device < 0 || device >= count)
        return sf_fail(SF_ERR_UNSUPPORTED, "CUDA device %d requested; this machine has %d", device, count);
    c->device = device;
    SF_CU_CHECK(cudaSetDevice(device));
    SF_CU_CHECK(cudaDeviceGetAttribute(&c->num_sms, cudaDevAttrMultiProcessorCount, device));
    SF_CU_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    SF_CUBLAS_CHECK(cublasCreate(&c->cublas));
    SF_CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    /* One fixed workspace (32 MiB, cuBLAS's recommendation for Hopper) makes cuBLAS choose the same kernels inside
     * and outside a CUDA-graph capture, so a graphed step computes the same bits as a plain one. */
    const size_t cublas_ws = (size_t)32 << 20;
    SF_CU_CHECK(cudaMalloc(&c->cublas_ws, cublas_ws));
    SF_CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->cublas_ws, cublas_ws));
    if ((unsigned)prec > SF_PRECISION_BF16) return sf_fail(SF_ERR_INVALID, "unknown precision %d", (int)prec);
    c->prec = prec;
    /* 512 MiB: on W3 (VGG9, T=10, B=64, H200) 51.1 ms at 2784 MiB peak, against 52.4 ms at 256 MiB (2604 MiB)
     * and no faster at 768 or 1024 MiB (3144 MiB); the workspace is one buffer shared by all layers */
    const char *ws = getenv("SF_CUDA_CONV_WS_MIB");
    c->conv_ws_cap = (size_t)(ws && atol(ws) > 0 ? atol(ws) : 512) << 20;
    const char *gm = getenv("SF_CUDA_CONV_GEMM");
    c->conv_gemm = gm && (gm[0] == '0' || gm[0] == '1') ? gm[0] - '0' : -1;
    /* fp32 stays fp32 unless opted in: no TF32 tensor-op math behind the caller's back. bf16 needs no mode: its
     * GEMMs name bf16 operand types (linear.cu). */
    SF_CUBLAS_CHECK(
        cublasSetMathMode(c->cublas, prec == SF_PRECISION_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    SF_CUDNN_CHECK(cudnnCreate(&c->cudnn));
    SF_CUDNN_CHECK(cudnnSetStream(c->cudnn, c->stream));
    return SF_OK;
}

extern "C" sf_status sf_cuda_backend_create(int32_t device, sf_precision precision, sf_backend **out)
{
    *out = NULL;
    sf_backend *be = (sf_backend *)calloc(1, sizeof *be);
    sf_cu_ctx *c = (sf_cu_ctx *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return sf_fail(SF_ERR_NOMEM, "CUDA backend: out of host memory");
    }
    be->ctx = c;
    fill_table(be);
    sf_status s = init_ctx(c, device, precision);
    if (s != SF_OK) {
        cu_destroy(be);
        return sf_fail_context(s, "creating the CUDA backend (%s) on device %d: ", sf_precision_name(precision), device);
    }
    *out = be;
    return SF_OK;
}

void *sf_cuda_backend_stream(sf_backend *be)
{
    return ((sf_cu_ctx *)be->ctx)->stream;
}

extern "C" int32_t sf_cuda_device_count_impl(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}
