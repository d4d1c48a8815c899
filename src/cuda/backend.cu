/* backend.cu — the CUDA backend object: device, one stream with the cuBLAS and cuDNN handles bound to it, device
 * memory, the op table filled from the op files (ops.cuh), and the training step recorded as a CUDA graph. */
#include "cuda/cuda_backend.h"
#include "cuda/ops.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuBLAS's workspace: one fixed size (cuBLAS's recommendation for Hopper) makes it choose the same kernels inside and
 * outside a CUDA-graph capture, so a graphed step computes the same bits as a plain one. */
#define CUBLAS_WS_BYTES ((size_t)32 << 20)

sf_status sf_cuda_op_alloc(sf_backend *be, size_t bytes, void **out)
{
    sf_cuda_ctx_of(be);
    return sf_cuda_device_alloc(bytes, out, "a tensor");
}

void sf_cuda_op_release(sf_backend *be, void *p)
{
    if (!p) return;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    cudaStreamSynchronize(c->stream); /* nothing queued may still use it */
    cudaFree(p);
}

size_t sf_cuda_op_held_bytes(sf_backend *be)
{
    const sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    size_t n = CUBLAS_WS_BYTES;
    for (int i = 0; i < SF_CUDA_SCRATCH_SLOTS; i++) n += c->scratch_bytes[i];
    return n;
}

sf_status sf_cuda_op_copy_from_host(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    /* From pageable memory this returns once src has been staged, so the caller may reuse src at once; from
     * page-locked memory (sf_host_alloc) the copy runs at the bus's speed but asynchronously, so it is waited for. */
    if (!bytes) return SF_OK;
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, src) == cudaSuccess && a.type == cudaMemoryTypeHost)
        SF_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    (void)cudaGetLastError();
    return SF_OK;
}

sf_status sf_cuda_op_copy_to_host(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (!bytes) return SF_OK;
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    SF_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return SF_OK;
}

sf_status sf_cuda_op_wait_host_copies(sf_backend *be)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (!c->n_copies) return SF_OK;
    SF_CUDA_CHECK(cudaEventSynchronize(c->copies_done));
    for (int i = 0; i < c->n_copies; i++)
        memcpy(c->copies[i].dst, (const char *)c->staging + c->copies[i].offset, c->copies[i].bytes);
    c->n_copies = 0;
    c->staged = 0;
    return SF_OK;
}

/* The copy lands in page-locked staging (a copy to pageable memory would wait for the stream); the staging
 * grows, after the copies on their way have landed, when a copy does not fit. */
sf_status sf_cuda_op_copy_to_host_async(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (!bytes) return SF_OK;
    const size_t at = (c->staged + 15) & ~(size_t)15;
    if (c->n_copies == SF_CUDA_HOST_COPIES || at + bytes > c->staging_bytes) {
        SF_TRY(sf_cuda_op_wait_host_copies(be));
        if (bytes > c->staging_bytes) {
            cudaFreeHost(c->staging);
            c->staging = NULL;
            c->staging_bytes = 0;
            const size_t want = bytes < 4096 ? 4096 : 2 * bytes;
            SF_CUDA_CHECK(cudaMallocHost(&c->staging, want));
            c->staging_bytes = want;
        }
        return sf_cuda_op_copy_to_host_async(be, dst, src, bytes);
    }
    if (!c->copies_done) SF_CUDA_CHECK(cudaEventCreateWithFlags(&c->copies_done, cudaEventDisableTiming));
    SF_CUDA_CHECK(cudaMemcpyAsync((char *)c->staging + at, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    SF_CUDA_CHECK(cudaEventRecord(c->copies_done, c->stream));
    c->copies[c->n_copies++] = (sf_cuda_host_copy){dst, at, bytes};
    c->staged = at + bytes;
    return SF_OK;
}

sf_status sf_cuda_op_copy(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (bytes) SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    return SF_OK;
}

sf_status sf_cuda_op_zero(sf_backend *be, void *dst, size_t bytes)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (bytes) SF_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, c->stream));
    return SF_OK;
}

sf_status sf_cuda_op_sync(sf_backend *be)
{
    SF_CUDA_CHECK(cudaStreamSynchronize(sf_cuda_ctx_of(be)->stream));
    return SF_OK;
}

void sf_cuda_op_destroy(sf_backend *be)
{
    if (!be) return;
    sf_cuda_ctx *c = (sf_cuda_ctx *)be->ctx;
    if (c) {
        cudaSetDevice(c->device);
        if (c->stream) cudaStreamSynchronize(c->stream);
        sf_cuda_conv_cache_free(c);
        for (int i = 0; i < SF_CUDA_SCRATCH_SLOTS; i++) cudaFree(c->scratch[i]);
        if (c->cudnn) cudnnDestroy(c->cudnn);
        if (c->cublas) cublasDestroy(c->cublas);
        cudaFree(c->cublas_ws);
        cudaFreeHost(c->staging);
        if (c->copies_done) cudaEventDestroy(c->copies_done);
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

sf_status sf_cuda_op_graph_begin(sf_backend *be)
{
    SF_CUDA_CHECK(cudaStreamBeginCapture(sf_cuda_ctx_of(be)->stream, cudaStreamCaptureModeThreadLocal));
    return SF_OK;
}

sf_status sf_cuda_op_graph_end(sf_backend *be, void **out)
{
    *out = NULL;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (e != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        return sf_cuda_fail_cuda(e, __FILE__, __LINE__, "cudaStreamEndCapture");
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
        return sf_cuda_fail_cuda(e, __FILE__, __LINE__, "cudaGraphInstantiate");
    }
    cg->scratch_gen = c->scratch_gen;
    *out = cg;
    return SF_OK;
}

sf_status sf_cuda_op_graph_launch(sf_backend *be, void *graph)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    cu_graph *cg = (cu_graph *)graph;
    if (cg->scratch_gen != c->scratch_gen)
        return sf_fail(SF_ERR_STATE, "CUDA graph: backend scratch moved since it was recorded");
    SF_CUDA_CHECK(cudaGraphLaunch(cg->exec, c->stream));
    return SF_OK;
}

void sf_cuda_op_graph_free(sf_backend *be, void *graph)
{
    if (!graph) return;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    cudaStreamSynchronize(c->stream); /* a launch may still be running */
    cudaGraphExecDestroy(((cu_graph *)graph)->exec);
    free(graph);
}

static void fill_table(sf_backend *be, bool graphs)
{
    be->name = "cuda";
#define SF_OP(ret, op, params) be->op = sf_cuda_op_##op;
#include "core/backend_ops.h"
    if (!graphs) {
        be->graph_begin = NULL;
        be->graph_end = NULL;
        be->graph_launch = NULL;
        be->graph_free = NULL;
    }
}

static sf_status init_ctx(sf_cuda_ctx *c, int32_t device, sf_precision prec, const sf_cuda_options *opt)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return sf_fail(SF_ERR_UNSUPPORTED, "no usable CUDA device (%s); use device cpu",
                       e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    if (device < 0 || device >= count)
        return sf_fail(SF_ERR_UNSUPPORTED, "CUDA device %d requested; this machine has %d", device, count);
    c->device = device;
    SF_CUDA_CHECK(cudaSetDevice(device));
    SF_CUDA_CHECK(cudaDeviceGetAttribute(&c->num_sms, cudaDevAttrMultiProcessorCount, device));
    SF_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    SF_CUBLAS_CHECK(cublasCreate(&c->cublas));
    SF_CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    SF_CUDA_CHECK(cudaMalloc(&c->cublas_ws, CUBLAS_WS_BYTES));
    SF_CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->cublas_ws, CUBLAS_WS_BYTES));
    if ((unsigned)prec > SF_PRECISION_FP16) return sf_fail(SF_ERR_INVALID, "unknown precision %d", (int)prec);
    c->prec = prec;
    c->act = prec == SF_PRECISION_BF16 ? SF_SCALAR_BF16 : prec == SF_PRECISION_FP16 ? SF_SCALAR_F16 : SF_SCALAR_F32;
    c->conv_ws_cap = (size_t)opt->conv_workspace_mib << 20;
    c->conv_algo = opt->conv_algo;
    c->deterministic = opt->deterministic != 0;
    /* No atomics in cuBLAS's sums (its default, made explicit: deterministic runs rely on it, as on the fixed
     * workspace above and the one stream). */
    SF_CUBLAS_CHECK(cublasSetAtomicsMode(c->cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
    /* fp32 stays fp32 unless opted in: no TF32 tensor-op math behind the caller's back. bf16 and fp16 need no mode:
     * their GEMMs name 16-bit operand types (linear.cu). */
    SF_CUBLAS_CHECK(
        cublasSetMathMode(c->cublas, prec == SF_PRECISION_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    SF_CUDNN_CHECK(cudnnCreate(&c->cudnn));
    SF_CUDNN_CHECK(cudnnSetStream(c->cudnn, c->stream));
    return SF_OK;
}

sf_status sf_cuda_backend_create(int32_t device, sf_precision precision, const sf_cuda_options *opt, sf_backend **out)
{
    *out = NULL;
    sf_net_params defaults;
    sf_net_default_params(&defaults);
    if (!opt) opt = &defaults.cuda;
    sf_backend *be = (sf_backend *)calloc(1, sizeof *be);
    sf_cuda_ctx *c = (sf_cuda_ctx *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return sf_fail(SF_ERR_NOMEM, "CUDA backend: out of host memory");
    }
    be->ctx = c;
    fill_table(be, opt->graph != 0);
    sf_status s = init_ctx(c, device, precision, opt);
    be->act = c->act;
    be->neuron_ckpt = true;
    /* NHWC tensors between convolutions where the tensor cores run them (auto: tf32, bf16, fp16; docs/notebook/perf.md,
     * Convolutions on NHWC), or where asked */
    be->conv_nhwc =
        c->conv_algo == SF_CONV_ALGO_NHWC || (c->conv_algo == SF_CONV_ALGO_AUTO && c->prec != SF_PRECISION_FP32);
    if (s != SF_OK) {
        sf_cuda_op_destroy(be);
        return sf_fail_context(s, "creating the CUDA backend (%s) on device %d: ", sf_precision_name(precision), device);
    }
    *out = be;
    return SF_OK;
}

void *sf_cuda_backend_stream(sf_backend *be) { return ((sf_cuda_ctx *)be->ctx)->stream; }

void *sf_cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) == cudaSuccess) return p;
    (void)cudaGetLastError(); /* no device, or no page-locked memory left: pageable memory works, only slower */
    return malloc(bytes ? bytes : 1);
}

void sf_cuda_host_free(void *p)
{
    cudaPointerAttributes a;
    if (!p) return;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost) cudaFreeHost(p);
    else free(p);
    (void)cudaGetLastError();
}

int32_t sf_cuda_count_devices(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

void sf_cuda_describe(char *buf, size_t cap)
{
    int runtime = 0, driver = 0, blas[3] = {0, 0, 0};
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver); /* 0 where no driver is installed */
    cublasGetProperty(MAJOR_VERSION, &blas[0]);
    cublasGetProperty(MINOR_VERSION, &blas[1]);
    cublasGetProperty(PATCH_LEVEL, &blas[2]);
    const size_t dnn = cudnnGetVersion(); /* major·10000 + minor·100 + patch since cuDNN 9 */
    snprintf(buf, cap, "CUDA runtime %d.%d (driver %d.%d), cuBLAS %d.%d.%d, cuDNN %zu.%zu.%zu, %d device(s)",
             runtime / 1000, runtime % 1000 / 10, driver / 1000, driver % 1000 / 10, blas[0], blas[1], blas[2],
             dnn / 10000, dnn % 10000 / 100, dnn % 100, (int)sf_cuda_count_devices());
}
