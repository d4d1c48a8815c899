/* conv.cu — 2-D convolution through cuDNN, NCHW, with T·B images folded into the batch. Algorithms are chosen
 * once per shape by cudnnFind* (measured on the device), restricted to the backend's precision (fp32: FMA math
 * only, no TF32 tensor ops; tf32: tensor ops allowed; bf16 and fp16: x, w, y, dy and dx in that type on the tensor
 * cores with fp32 accumulation — cuDNN's pseudo-bf16 and pseudo-half configurations —, the weight gradient written
 * in that type and widened into the fp32 one) and a bounded workspace, and cached with their descriptors. When the
 * fastest algorithm of an op needs more workspace than the cap, the op is also measured on the batch cut into 2, 4
 * or 8 chunks (workspace shrinks with the chunk) and runs chunk by chunk if that is faster in total; the weight
 * gradient accumulates over the chunks. Each op is also timed as im2col + cuBLAS GEMM (conv_gemm.cu) over chunks
 * that fit the same cap, and runs that way where it beats cuDNN's best. The bias and its gradient are kernels of
 * this file in every precision (a per-channel add, and a deterministic per-channel sum in double).
 * Deterministic mode (sf_cuda_options.deterministic) takes only algorithms cuDNN marks deterministic, and chooses
 * without timing anything, so every process picks the same ones: the first of cuDNN's heuristic ranking
 * (cudnnGetConvolution*Algorithm_v7) that fits the cap on the fewest chunks, im2col + GEMM where none fits (or where
 * conv_algo = gemm asks for it); the bias gradient needs nothing more (it is always the fixed-order sum). */
#include "cuda/act.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/ops.cuh"
#include "cuda/reduce.cuh"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

enum { SF_CONV_FWD, SF_CONV_BWD_DATA, SF_CONV_BWD_FILTER, SF_CONV_OPS };

/* One of the three ops: its algorithm, and the batch chunk (images per call) with descriptors of that size. */
typedef struct sf_cuda_conv_op {
    int algo;
    int64_t chunk;
    float ms; /* measured time of all chunks */
    size_t ws;
    cudnnTensorDescriptor_t xd, yd;
    int fastest_algo; /* the fastest allowed algorithm on the whole batch, whatever its workspace (for reports) */
    float fastest_ms;
    size_t fastest_ws;
    bool gemm;      /* runs as im2col + GEMM over the entry's gemm_chunk instead */
    float gemm_ms;  /* that path's measured time (0: not measured) */
} sf_cuda_conv_op;

struct sf_cuda_conv_entry {
    sf_conv_shape sh;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    sf_cuda_conv_op op[SF_CONV_OPS];
    int64_t gemm_chunk; /* images per im2col + GEMM call (0: the path does not fit the cap) */
    size_t ws;
};

static int same_shape(const sf_conv_shape *a, const sf_conv_shape *b)
{
    return a->n == b->n && a->cin == b->cin && a->h == b->h && a->w == b->w && a->cout == b->cout && a->k == b->k &&
           a->stride == b->stride && a->pad == b->pad && a->oh == b->oh && a->ow == b->ow;
}

static void entry_destroy(sf_cuda_conv_entry *e)
{
    for (int i = 0; i < SF_CONV_OPS; i++) {
        if (e->op[i].xd) cudnnDestroyTensorDescriptor(e->op[i].xd);
        if (e->op[i].yd) cudnnDestroyTensorDescriptor(e->op[i].yd);
    }
    if (e->wd) cudnnDestroyFilterDescriptor(e->wd);
    if (e->cd) cudnnDestroyConvolutionDescriptor(e->cd);
}

void sf_cuda_conv_cache_free(sf_cuda_ctx *c)
{
    for (int i = 0; i < c->n_convs; i++) entry_destroy(&c->convs[i]);
    free(c->convs);
    c->convs = NULL;
    c->n_convs = c->cap_convs = 0;
}

static bool math_ok(cudnnMathType_t m, sf_precision prec)
{
    return m == CUDNN_FMA_MATH || (prec != SF_PRECISION_FP32 && (m == CUDNN_DEFAULT_MATH || m == CUDNN_TENSOR_OP_MATH));
}

/* Takes the fastest measured result that succeeded, uses an allowed math type and fits the workspace cap, if
 * `splits` calls of it beat what op already has. Returns whether the overall fastest allowed result did not fit
 * (then more chunks may pay). fp32: FMA only (cuDNN's DEFAULT_MATH may use TF32 on Ampere and later). Outside
 * deterministic mode determinism is not required (with deterministic algorithms only, the W3 step took 130 ms instead
 * of 111 ms on an H200), so convolution gradients may differ in the last bits from run to run. In deterministic mode
 * `perf` is cuDNN's heuristic ranking (no times): the first deterministic result that fits is taken, and a later
 * (larger) `splits` never replaces it. */
template <class Perf>
static bool consider(const Perf *perf, int count, int64_t splits, int64_t chunk, sf_precision prec, size_t cap,
                     bool deterministic, sf_cuda_conv_op *op, bool *changed)
{
    bool fastest_too_big = false, first = true;
    *changed = false;
    for (int i = 0; i < count; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || !math_ok(perf[i].mathType, prec)) continue;
        if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
        if (first && splits == 1) {
            op->fastest_algo = (int)perf[i].algo;
            op->fastest_ms = perf[i].time;
            op->fastest_ws = perf[i].memory;
        }
        if (perf[i].memory > cap) {
            if (first) fastest_too_big = true;
            first = false;
            continue;
        }
        float total = perf[i].time * (float)splits;
        if (op->chunk == 0 || (!deterministic && total < op->ms)) {
            op->algo = (int)perf[i].algo;
            op->chunk = chunk;
            op->ms = total;
            op->ws = perf[i].memory;
            *changed = true;
        }
        break;
    }
    return fastest_too_big;
}

static sf_status set_nchw(cudnnTensorDescriptor_t d, cudnnDataType_t t, int64_t n, int32_t c, int32_t h, int32_t w)
{
    SF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, t, (int)n, c, h, w));
    return SF_OK;
}

/* Measures the three ops on chunks of n / splits images; updates the ops that this makes faster. *more: some op's
 * fastest algorithm still needs more workspace than the cap. */
static sf_status measure(sf_cuda_ctx *c, sf_cuda_conv_entry *e, int64_t splits, bool *more)
{
    const sf_conv_shape *sh = &e->sh;
    const sf_precision prec = c->prec;
    const cudnnDataType_t dt = sf_cudnn_type(c->act);
    int64_t chunk = sh->n / splits;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    sf_status st = SF_OK;
    int got;
    bool changed, big[SF_CONV_OPS];
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    cudnnStatus_t cs = cudnnCreateTensorDescriptor(&xd);
    if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnCreateTensorDescriptor(&yd);
    if (cs != CUDNN_STATUS_SUCCESS) {
        st = sf_cuda_fail_cudnn(cs, __FILE__, __LINE__, "cudnnCreateTensorDescriptor");
        goto done;
    }
    if ((st = set_nchw(xd, dt, chunk, sh->cin, sh->h, sh->w)) != SF_OK) goto done;
    if ((st = set_nchw(yd, dt, chunk, sh->cout, sh->oh, sh->ow)) != SF_OK) goto done;
    for (int o = 0; o < SF_CONV_OPS; o++) {
        /* Find measures every algorithm; Get_v7 ranks them by cuDNN's heuristics, the same in every process. */
        const bool det = c->deterministic;
        if (o == SF_CONV_FWD)
            cs = det ? cudnnGetConvolutionForwardAlgorithm_v7(c->cudnn, xd, e->wd, e->cd, yd,
                                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf)
                     : cudnnFindConvolutionForwardAlgorithm(c->cudnn, xd, e->wd, e->cd, yd,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf);
        else if (o == SF_CONV_BWD_DATA)
            cs = det ? cudnnGetConvolutionBackwardDataAlgorithm_v7(c->cudnn, e->wd, yd, e->cd, xd,
                                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd)
                     : cudnnFindConvolutionBackwardDataAlgorithm(c->cudnn, e->wd, yd, e->cd, xd,
                                                                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd);
        else
            cs = det ? cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->cudnn, xd, yd, e->cd, e->wd,
                                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pw)
                     : cudnnFindConvolutionBackwardFilterAlgorithm(c->cudnn, xd, yd, e->cd, e->wd,
                                                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pw);
        if (cs != CUDNN_STATUS_SUCCESS) {
            st = sf_cuda_fail_cudnn(cs, __FILE__, __LINE__,
                                    det ? "cudnnGetConvolution*Algorithm_v7" : "cudnnFindConvolution*Algorithm");
            goto done;
        }
        sf_cuda_conv_op *op = &e->op[o];
        const size_t cap = c->conv_ws_cap;
        big[o] = o == SF_CONV_FWD        ? consider(pf, got, splits, chunk, prec, cap, det, op, &changed)
                 : o == SF_CONV_BWD_DATA ? consider(pd, got, splits, chunk, prec, cap, det, op, &changed)
                                         : consider(pw, got, splits, chunk, prec, cap, det, op, &changed);
        if (changed) {
            if ((st = set_nchw(op->xd, dt, chunk, sh->cin, sh->h, sh->w)) != SF_OK) goto done;
            if ((st = set_nchw(op->yd, dt, chunk, sh->cout, sh->oh, sh->ow)) != SF_OK) goto done;
        }
    }
    /* deterministic: more chunks only while an op has nothing that fits */
    *more = c->deterministic ? e->op[0].chunk == 0 || e->op[1].chunk == 0 || e->op[2].chunk == 0
                             : big[0] || big[1] || big[2];
done:
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    return st;
}

/* One op of the im2col + GEMM path on the timing buffers: x, dx, w, dw (fp32), y (also dy), workspace. */
static sf_status run_gemm_op(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, int op, void *const *buf)
{
    if (op == SF_CONV_FWD) return sf_cuda_conv_gemm_forward(c, sh, chunk, buf[0], buf[2], NULL, buf[4], buf[5]);
    return sf_cuda_conv_gemm_backward(c, sh, chunk, buf[0], buf[2], buf[4], op == SF_CONV_BWD_DATA ? buf[1] : NULL,
                                      op == SF_CONV_BWD_FILTER ? (float *)buf[3] : NULL, buf[5]);
}

/* Per op: one warm-up run, then the mean of two, by events on the backend's stream. */
static sf_status time_gemm(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, void *const *buf, cudaEvent_t *ev,
                           float ms[SF_CONV_OPS])
{
    for (int o = 0; o < SF_CONV_OPS; o++) {
        SF_TRY(run_gemm_op(c, sh, chunk, o, buf));
        SF_CUDA_CHECK(cudaEventRecord(ev[0], c->stream));
        for (int r = 0; r < 2; r++) SF_TRY(run_gemm_op(c, sh, chunk, o, buf));
        SF_CUDA_CHECK(cudaEventRecord(ev[1], c->stream));
        SF_CUDA_CHECK(cudaEventSynchronize(ev[1]));
        SF_CUDA_CHECK(cudaEventElapsedTime(&ms[o], ev[0], ev[1]));
        ms[o] /= 2;
    }
    return SF_OK;
}

/* Measures the im2col + GEMM path on zeroed buffers of the shape (allocated for the measurement only) and takes
 * it for each op where it beats what cuDNN measured, or for every op where it fits under conv_algo = gemm. Without
 * room for the buffers the shape keeps cuDNN. */
static sf_status consider_gemm(sf_cuda_ctx *c, sf_cuda_conv_entry *e)
{
    const sf_conv_shape *sh = &e->sh;
    if (c->conv_algo == SF_CONV_ALGO_CUDNN) return SF_OK;
    const size_t es = sf_act_type_size(c->act);
    const int64_t chunk = sf_cuda_conv_gemm_chunk(sh, c->conv_ws_cap, es);
    if (chunk == 0) return SF_OK;
    if (c->deterministic) { /* no timing: cuDNN's deterministic choice, unless forced or missing */
        e->gemm_chunk = chunk;
        for (int o = 0; o < SF_CONV_OPS; o++)
            e->op[o].gemm = c->conv_algo == SF_CONV_ALGO_GEMM || e->op[o].chunk == 0;
        return SF_OK;
    }
    const size_t nx = (size_t)(sh->n * sh->cin * sh->h * sh->w), ny = (size_t)(sh->n * sh->cout * sh->oh * sh->ow),
                 nw = (size_t)sh->cout * sh->cin * sh->k * sh->k;
    const size_t bytes[6] = {nx * es, nx * es, nw * es, nw * sizeof(float), ny * es, sf_cuda_conv_gemm_ws(sh, chunk, es)};
    void *buf[6] = {NULL};
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t ce = cudaSuccess;
    sf_status st = SF_OK;
    for (int i = 0; i < 6 && ce == cudaSuccess; i++) {
        ce = cudaMalloc(&buf[i], bytes[i]);
        if (ce == cudaSuccess) ce = cudaMemsetAsync(buf[i], 0, bytes[i], c->stream);
    }
    for (int i = 0; i < 2 && ce == cudaSuccess; i++) ce = cudaEventCreate(&ev[i]);
    float ms[SF_CONV_OPS] = {0.0f, 0.0f, 0.0f};
    if (ce == cudaSuccess) st = time_gemm(c, sh, chunk, buf, ev, ms);
    cudaStreamSynchronize(c->stream);
    for (int i = 0; i < 6; i++) cudaFree(buf[i]);
    for (int i = 0; i < 2; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    if (ce == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return SF_OK;
    }
    if (ce != cudaSuccess) return sf_cuda_fail_cuda(ce, __FILE__, __LINE__, "preparing the im2col + GEMM timing");
    SF_TRY(st);
    e->gemm_chunk = chunk;
    for (int o = 0; o < SF_CONV_OPS; o++) {
        sf_cuda_conv_op *op = &e->op[o];
        op->gemm_ms = ms[o];
        op->gemm = c->conv_algo == SF_CONV_ALGO_GEMM || op->chunk == 0 || ms[o] < op->ms;
    }
    return SF_OK;
}

static sf_status setup(sf_cuda_ctx *c, const sf_conv_shape *sh, sf_cuda_conv_entry *e)
{
    if (sh->n > INT_MAX || sh->n < 1 || sh->cin < 1 || sh->cout < 1 || sh->k < 1 || sh->stride < 1 || sh->pad < 0 ||
        sh->oh != (sh->h + 2 * sh->pad - sh->k) / sh->stride + 1 ||
        sh->ow != (sh->w + 2 * sh->pad - sh->k) / sh->stride + 1)
        return sf_fail(SF_ERR_INVALID,
                       "conv shape n=%lld cin=%d %dx%d cout=%d k=%d stride=%d pad=%d -> %dx%d is "
                       "inconsistent",
                       (long long)sh->n, sh->cin, sh->h, sh->w, sh->cout, sh->k, sh->stride, sh->pad, sh->oh, sh->ow);
    e->sh = *sh;
    SF_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->wd));
    SF_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e->cd));
    for (int o = 0; o < SF_CONV_OPS; o++) {
        SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->op[o].xd));
        SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->op[o].yd));
    }
    SF_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(e->wd, sf_cudnn_type(c->act), CUDNN_TENSOR_NCHW, sh->cout, sh->cin, sh->k, sh->k));
    SF_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(e->cd, sh->pad, sh->pad, sh->stride, sh->stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    /* fp32: FMA only; tf32, bf16 and fp16: tensor ops (fp32 accumulation in all) */
    SF_CUDNN_CHECK(cudnnSetConvolutionMathType(
        e->cd, c->prec == SF_PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
    bool more = true;
    for (int64_t splits = 1; splits <= 8 && more && sh->n % splits == 0; splits *= 2) SF_TRY(measure(c, e, splits, &more));
    SF_TRY(consider_gemm(c, e));
    static const char *const names[SF_CONV_OPS] = {"forward", "backward-data", "backward-filter"};
    e->ws = 0;
    for (int o = 0; o < SF_CONV_OPS; o++) {
        if (e->op[o].gemm) {
            size_t g = sf_cuda_conv_gemm_ws(sh, e->gemm_chunk, sf_act_type_size(c->act));
            if (g > e->ws) e->ws = g;
            continue;
        }
        if (e->op[o].chunk == 0)
            return sf_fail(SF_ERR_UNSUPPORTED,
                           "cuDNN offers no %s %s algorithm within %zu MiB of workspace for conv n=%lld cin=%d %dx%d "
                           "cout=%d k=%d stride=%d (raise conv_workspace_mib)",
                           sf_precision_name(c->prec), names[o], c->conv_ws_cap >> 20, (long long)sh->n, sh->cin, sh->h,
                           sh->w, sh->cout, sh->k, sh->stride);
        if (e->op[o].ws > e->ws) e->ws = e->op[o].ws;
    }
    return SF_OK;
}

static sf_status lookup(sf_cuda_ctx *c, const sf_conv_shape *sh, sf_cuda_conv_entry **out)
{
    for (int i = 0; i < c->n_convs; i++)
        if (same_shape(&c->convs[i].sh, sh)) {
            *out = &c->convs[i];
            return SF_OK;
        }
    if (c->n_convs == c->cap_convs) {
        int cap = c->cap_convs ? 2 * c->cap_convs : 16;
        sf_cuda_conv_entry *p = (sf_cuda_conv_entry *)realloc(c->convs, sizeof *p * (size_t)cap);
        if (!p) return sf_fail(SF_ERR_NOMEM, "conv algorithm cache: out of host memory");
        c->convs = p;
        c->cap_convs = cap;
    }
    sf_cuda_conv_entry *e = &c->convs[c->n_convs];
    memset(e, 0, sizeof *e);
    sf_status s = setup(c, sh, e);
    if (s != SF_OK) {
        entry_destroy(e);
        return s;
    }
    c->n_convs++;
    *out = e;
    return SF_OK;
}

size_t sf_cuda_op_conv_workspace(sf_backend *be, const sf_conv_shape *sh)
{
    sf_cuda_conv_entry *e = NULL;
    /* A failure here is reported again, with its message, by the conv call that follows. */
    return lookup(sf_cuda_ctx_of(be), sh, &e) == SF_OK ? e->ws : 0;
}

/* y[img][co][p] += b[co]: a block per (image, channel) plane. */
template <class T> __global__ void bias_add_kernel(int64_t planes, int32_t C, int32_t hw, const float *b, T *y)
{
    for (int64_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
        const float bc = b[pl % C];
        T *row = y + pl * hw;
        for (int32_t j = threadIdx.x; j < hw; j += blockDim.x) row[j] = sf_narrow<T>(sf_widen(row[j]) + bc);
    }
}

/* db[co] = Σ over images and pixels of dy[img][co][p] (reduce.cuh: fixed order, double sums). */
template <class T> struct BiasGradF {
    const T *dy;
    float *db;
    __device__ void term(int64_t i, int32_t, double *a, double *) const { *a += sf_widen(dy[i]); }
    __device__ void finish(int32_t c, double a, double, double) const { db[c] = (float)a; }
};

static sf_status bias_add(sf_cuda_ctx *c, const sf_conv_shape *sh, const float *b, void *y)
{
    const int64_t planes = sh->n * sh->cout;
    const int32_t hw = sh->oh * sh->ow, threads = hw >= 256 ? 256 : (hw + 31) / 32 * 32;
    const unsigned blocks = (unsigned)(planes < (1 << 30) ? planes : (1 << 30));
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        bias_add_kernel<T><<<blocks, threads, 0, c->stream>>>(planes, sh->cout, hw, b, (T *)y);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

static sf_status bias_grad(sf_cuda_ctx *c, const sf_conv_shape *sh, const void *dy, float *db)
{
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        return sf_cuda_channel_reduce(c, BiasGradF<T>{(const T *)dy, db}, sh->n, sh->cout,
                                      (int64_t)sh->oh * sh->ow);
    });
}

/* Element i of a tensor in the activation type. */
#define AT(p, elems) ((char *)(p) + (size_t)(elems) * es)

sf_status sf_cuda_op_conv_forward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                  const float *b, float *y, void *ws)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    sf_cuda_conv_entry *e;
    SF_TRY(lookup(c, sh, &e));
    const sf_cuda_conv_op *op = &e->op[SF_CONV_FWD];
    if (op->gemm) return sf_cuda_conv_gemm_forward(c, sh, e->gemm_chunk, x, w, b, y, ws);
    const size_t es = sf_act_type_size(c->act);
    const int64_t xs = op->chunk * sh->cin * sh->h * sh->w, ys = op->chunk * sh->cout * sh->oh * sh->ow;
    float one = 1.0f, zero = 0.0f;
    for (int64_t i = 0; i < sh->n / op->chunk; i++)
        SF_CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, op->xd, AT(x, i * xs), e->wd, w, e->cd,
                                               (cudnnConvolutionFwdAlgo_t)op->algo, ws, op->ws, &zero, op->yd,
                                               AT(y, i * ys)));
    return b ? bias_add(c, sh, b, y) : SF_OK;
}

/* The backward ops that run through cuDNN: dw (if not NULL, summed over chunks; under a 16-bit act type each
 * chunk's comes in that type and is widened into dw) and dx (if not NULL). */
static sf_status cudnn_backward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const float *x, float *dw, float *dx,
                                const float *w, const float *dy, void *ws)
{
    const sf_conv_shape *sh = &e->sh;
    const size_t es = sf_act_type_size(c->act);
    const bool narrow_dw = c->act != SF_ACT_F32;
    float one = 1.0f, zero = 0.0f;
    const int64_t img_x = (int64_t)sh->cin * sh->h * sh->w, img_y = (int64_t)sh->cout * sh->oh * sh->ow,
                  nw = (int64_t)sh->cout * sh->cin * sh->k * sh->k;
    const sf_cuda_conv_op *f = &e->op[SF_CONV_BWD_FILTER];
    void *dwt = dw; /* where cuDNN writes each chunk's weight gradient */
    if (dw && narrow_dw) SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_CONV_DW, (size_t)nw * es, &dwt));
    for (int64_t i = 0; dw && i < sh->n / f->chunk; i++) {
        SF_CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, f->xd, AT(x, i * f->chunk * img_x), f->yd,
                                                      AT(dy, i * f->chunk * img_y), e->cd,
                                                      (cudnnConvolutionBwdFilterAlgo_t)f->algo, ws, f->ws,
                                                      i && !narrow_dw ? &one : &zero, e->wd, dwt));
        if (narrow_dw) SF_TRY(sf_cuda_widen(c, nw, dwt, dw, i > 0));
    }
    const sf_cuda_conv_op *d = &e->op[SF_CONV_BWD_DATA];
    for (int64_t i = 0; dx && i < sh->n / d->chunk; i++)
        SF_CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->wd, w, d->yd, AT(dy, i * d->chunk * img_y),
                                                    e->cd, (cudnnConvolutionBwdDataAlgo_t)d->algo, ws, d->ws, &zero,
                                                    d->xd, AT(dx, i * d->chunk * img_x)));
    return SF_OK;
}

sf_status sf_cuda_op_conv_backward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                   const float *dy, float *dx, float *dw, float *db, void *ws)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    sf_cuda_conv_entry *e;
    SF_TRY(lookup(c, sh, &e));
    const sf_cuda_conv_op *f = &e->op[SF_CONV_BWD_FILTER], *d = &e->op[SF_CONV_BWD_DATA];
    /* dx may be x itself (backend.h): the path that reads x for dw runs first (the GEMM path image chunk by chunk,
     * cuDNN all of dw before any dx), the other path then writes only dx. */
    if (f->gemm) {
        SF_TRY(sf_cuda_conv_gemm_backward(c, sh, e->gemm_chunk, x, w, dy, d->gemm ? dx : NULL, dw, ws));
        if (dx && !d->gemm) SF_TRY(cudnn_backward(c, e, x, NULL, dx, w, dy, ws));
    } else {
        SF_TRY(cudnn_backward(c, e, x, dw, d->gemm ? NULL : dx, w, dy, ws));
        if (dx && d->gemm) SF_TRY(sf_cuda_conv_gemm_backward(c, sh, e->gemm_chunk, x, w, dy, dx, NULL, ws));
    }
    return db ? bias_grad(c, sh, dy, db) : SF_OK;
}

/* Names of cuDNN's algorithm enums, per op, in enum order. */
static const char *algo_name(int op, int algo)
{
    static const char *const fwd[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
                                      "winograd", "winograd_nonfused"};
    static const char *const bwd[] = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
    static const char *const flt[] = {"algo_0", "algo_1", "fft", "algo_3", "winograd", "winograd_nonfused",
                                      "fft_tiling"};
    if (op == SF_CONV_FWD) return algo >= 0 && algo < 8 ? fwd[algo] : "?";
    if (op == SF_CONV_BWD_DATA) return algo >= 0 && algo < 6 ? bwd[algo] : "?";
    return algo >= 0 && algo < 7 ? flt[algo] : "?";
}

size_t sf_cuda_conv_report(sf_backend *be, char *buf, size_t cap)
{
    const sf_cuda_ctx *c = (const sf_cuda_ctx *)be->ctx;
    static const char *const names[SF_CONV_OPS] = {"fwd", "bwd_data", "bwd_filter"};
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, __VA_ARGS__)
    PUT("conv algorithms (%s, workspace cap %zu MiB%s): shape | op: chosen algo x chunks, ms (Find or events), ws MiB "
        "| fastest cuDNN allowed on the whole batch: algo, ms, ws MiB | cuDNN's choice ms, im2col+gemm x chunks ms "
        "(0: not measured)\n",
        sf_precision_name(c->prec), c->conv_ws_cap >> 20,
        c->deterministic ? ", deterministic: cuDNN's heuristic rank, no times" : "");
    for (int i = 0; i < c->n_convs; i++) {
        const sf_cuda_conv_entry *e = &c->convs[i];
        const sf_conv_shape *sh = &e->sh;
        for (int o = 0; o < SF_CONV_OPS; o++) {
            const sf_cuda_conv_op *op = &e->op[o];
            const int64_t gc = e->gemm_chunk ? e->gemm_chunk : sh->n;
            PUT("n=%lld %d->%d %dx%d s%d | %-10s %-22s x%lld %7.3f %6.0f | %-22s %7.3f %6.0f | cudnn %7.3f "
                "im2col+gemm x%lld %7.3f\n",
                (long long)sh->n, sh->cin, sh->cout, sh->h, sh->w, sh->stride, names[o],
                op->gemm ? "im2col_gemm" : algo_name(o, op->algo),
                (long long)(op->gemm ? (sh->n + gc - 1) / gc : sh->n / (op->chunk ? op->chunk : sh->n)),
                op->gemm ? op->gemm_ms : op->ms,
                (op->gemm ? sf_cuda_conv_gemm_ws(sh, gc, sf_act_type_size(c->act)) : op->ws) / 1048576.0,
                algo_name(o, op->fastest_algo), op->fastest_ms, op->fastest_ws / 1048576.0, op->ms,
                (long long)((sh->n + gc - 1) / gc), op->gemm_ms);
        }
    }
#undef PUT
    return n;
}
