/* conv.cu — 2-D convolution through cuDNN, NCHW, with T·B images folded into the batch. Algorithms are chosen
 * once per shape by cudnnFind* (measured on the device), restricted to FMA math (no TF32 tensor ops for fp32
 * unless SF_CUDA_MATH=tf32) and a bounded workspace, and cached with their descriptors. When the fastest algorithm
 * of an op needs more workspace than the cap, the op is also measured on the batch cut into 2, 4 or 8 chunks
 * (workspace shrinks with the chunk) and runs chunk by chunk if that is faster in total; the weight gradient
 * accumulates over the chunks. */
#include "cuda/ops.cuh"

#include <limits.h>
#include <stdlib.h>

enum { SF_CONV_FWD, SF_CONV_BWD_DATA, SF_CONV_BWD_FILTER, SF_CONV_OPS };

/* One of the three ops: its algorithm, and the batch chunk (images per call) with descriptors of that size. */
typedef struct sf_cu_conv_op {
    int algo;
    int64_t chunk;
    float ms; /* measured time of all chunks */
    size_t ws;
    cudnnTensorDescriptor_t xd, yd;
} sf_cu_conv_op;

struct sf_cu_conv_entry {
    sf_conv_shape sh;
    cudnnTensorDescriptor_t yd, bd; /* the whole batch's output, and the bias */
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    sf_cu_conv_op op[SF_CONV_OPS];
    size_t ws;
};

static int same_shape(const sf_conv_shape *a, const sf_conv_shape *b)
{
    return a->n == b->n && a->cin == b->cin && a->h == b->h && a->w == b->w && a->cout == b->cout && a->k == b->k &&
           a->stride == b->stride && a->pad == b->pad && a->oh == b->oh && a->ow == b->ow;
}

static void entry_destroy(sf_cu_conv_entry *e)
{
    for (int i = 0; i < SF_CONV_OPS; i++) {
        if (e->op[i].xd) cudnnDestroyTensorDescriptor(e->op[i].xd);
        if (e->op[i].yd) cudnnDestroyTensorDescriptor(e->op[i].yd);
    }
    if (e->yd) cudnnDestroyTensorDescriptor(e->yd);
    if (e->bd) cudnnDestroyTensorDescriptor(e->bd);
    if (e->wd) cudnnDestroyFilterDescriptor(e->wd);
    if (e->cd) cudnnDestroyConvolutionDescriptor(e->cd);
}

void sf_cu_conv_cache_free(sf_cu_ctx *c)
{
    for (int i = 0; i < c->n_convs; i++) entry_destroy(&c->convs[i]);
    free(c->convs);
    c->convs = NULL;
    c->n_convs = c->cap_convs = 0;
}

static bool math_ok(cudnnMathType_t m, bool tf32)
{
    return m == CUDNN_FMA_MATH || (tf32 && (m == CUDNN_DEFAULT_MATH || m == CUDNN_TENSOR_OP_MATH));
}

/* Takes the fastest measured result that succeeded, uses an allowed math type and fits the workspace cap, if
 * `splits` calls of it beat what op already has. Returns whether the overall fastest allowed result did not fit
 * (then more chunks may pay). fp32: FMA only (cuDNN's DEFAULT_MATH may use TF32 on Ampere and later). Determinism
 * is not required: with deterministic algorithms only, the W3 step took 130 ms instead of 111 ms on an H200, so
 * convolution gradients may differ in the last bits from run to run. */
template <class Perf>
static bool consider(const Perf *perf, int count, int64_t splits, int64_t chunk, bool tf32, size_t cap,
                     sf_cu_conv_op *op, bool *changed)
{
    bool fastest_too_big = false, first = true;
    *changed = false;
    for (int i = 0; i < count; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || !math_ok(perf[i].mathType, tf32)) continue;
        if (perf[i].memory > cap) {
            if (first) fastest_too_big = true;
            first = false;
            continue;
        }
        float total = perf[i].time * (float)splits;
        if (op->chunk == 0 || total < op->ms) {
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

static sf_status set_nchw(cudnnTensorDescriptor_t d, int64_t n, int32_t c, int32_t h, int32_t w)
{
    SF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)n, c, h, w));
    return SF_OK;
}

/* Measures the three ops on chunks of n / splits images; updates the ops that this makes faster. *more: some op's
 * fastest algorithm still needs more workspace than the cap. */
static sf_status measure(sf_cu_ctx *c, sf_cu_conv_entry *e, int64_t splits, bool *more)
{
    const sf_conv_shape *sh = &e->sh;
    bool tf32 = c->math == SF_CU_MATH_TF32;
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
        st = sf_cu_fail_cudnn(cs, __FILE__, __LINE__, "cudnnCreateTensorDescriptor");
        goto done;
    }
    if ((st = set_nchw(xd, chunk, sh->cin, sh->h, sh->w)) != SF_OK) goto done;
    if ((st = set_nchw(yd, chunk, sh->cout, sh->oh, sh->ow)) != SF_OK) goto done;
    for (int o = 0; o < SF_CONV_OPS; o++) {
        if (o == SF_CONV_FWD)
            cs = cudnnFindConvolutionForwardAlgorithm(c->cudnn, xd, e->wd, e->cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                      &got, pf);
        else if (o == SF_CONV_BWD_DATA)
            cs = cudnnFindConvolutionBackwardDataAlgorithm(c->cudnn, e->wd, yd, e->cd, xd,
                                                           CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd);
        else
            cs = cudnnFindConvolutionBackwardFilterAlgorithm(c->cudnn, xd, yd, e->cd, e->wd,
                                                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pw);
        if (cs != CUDNN_STATUS_SUCCESS) {
            st = sf_cu_fail_cudnn(cs, __FILE__, __LINE__, "cudnnFindConvolution*Algorithm");
            goto done;
        }
        sf_cu_conv_op *op = &e->op[o];
        big[o] = o == SF_CONV_FWD        ? consider(pf, got, splits, chunk, tf32, c->conv_ws_cap, op, &changed)
                 : o == SF_CONV_BWD_DATA ? consider(pd, got, splits, chunk, tf32, c->conv_ws_cap, op, &changed)
                                         : consider(pw, got, splits, chunk, tf32, c->conv_ws_cap, op, &changed);
        if (changed) {
            if ((st = set_nchw(op->xd, chunk, sh->cin, sh->h, sh->w)) != SF_OK) goto done;
            if ((st = set_nchw(op->yd, chunk, sh->cout, sh->oh, sh->ow)) != SF_OK) goto done;
        }
    }
    *more = big[0] || big[1] || big[2];
done:
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    return st;
}

static sf_status setup(sf_cu_ctx *c, const sf_conv_shape *sh, sf_cu_conv_entry *e)
{
    if (sh->n > INT_MAX || sh->n < 1 || sh->cin < 1 || sh->cout < 1 || sh->k < 1 || sh->stride < 1 || sh->pad < 0 ||
        sh->oh != (sh->h + 2 * sh->pad - sh->k) / sh->stride + 1 ||
        sh->ow != (sh->w + 2 * sh->pad - sh->k) / sh->stride + 1)
        return sf_fail(SF_ERR_INVALID,
                       "conv shape n=%lld cin=%d %dx%d cout=%d k=%d stride=%d pad=%d -> %dx%d is "
                       "inconsistent",
                       (long long)sh->n, sh->cin, sh->h, sh->w, sh->cout, sh->k, sh->stride, sh->pad, sh->oh, sh->ow);
    e->sh = *sh;
    SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->yd));
    SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->bd));
    SF_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->wd));
    SF_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e->cd));
    for (int o = 0; o < SF_CONV_OPS; o++) {
        SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->op[o].xd));
        SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->op[o].yd));
    }
    SF_TRY(set_nchw(e->yd, sh->n, sh->cout, sh->oh, sh->ow));
    SF_TRY(set_nchw(e->bd, 1, sh->cout, 1, 1));
    SF_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(e->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, sh->cout, sh->cin, sh->k, sh->k));
    SF_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(e->cd, sh->pad, sh->pad, sh->stride, sh->stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    /* fp32 (and fp32emu, which cuDNN does not offer): FMA only; tf32 when opted in */
    bool tf32 = c->math == SF_CU_MATH_TF32;
    SF_CUDNN_CHECK(cudnnSetConvolutionMathType(e->cd, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    bool more = true;
    for (int64_t splits = 1; splits <= 8 && more && sh->n % splits == 0; splits *= 2) SF_TRY(measure(c, e, splits, &more));
    static const char *const names[SF_CONV_OPS] = {"forward", "backward-data", "backward-filter"};
    e->ws = 0;
    for (int o = 0; o < SF_CONV_OPS; o++) {
        if (e->op[o].chunk == 0)
            return sf_fail(SF_ERR_UNSUPPORTED,
                           "cuDNN offers no %s %s algorithm within %zu MiB of workspace for conv n=%lld cin=%d %dx%d "
                           "cout=%d k=%d stride=%d (raise SF_CUDA_CONV_WS_MIB)",
                           tf32 ? "tf32" : "fp32", names[o], c->conv_ws_cap >> 20, (long long)sh->n, sh->cin, sh->h,
                           sh->w, sh->cout, sh->k, sh->stride);
        if (e->op[o].ws > e->ws) e->ws = e->op[o].ws;
    }
    return SF_OK;
}

static sf_status lookup(sf_cu_ctx *c, const sf_conv_shape *sh, sf_cu_conv_entry **out)
{
    for (int i = 0; i < c->n_convs; i++)
        if (same_shape(&c->convs[i].sh, sh)) {
            *out = &c->convs[i];
            return SF_OK;
        }
    if (c->n_convs == c->cap_convs) {
        int cap = c->cap_convs ? 2 * c->cap_convs : 16;
        sf_cu_conv_entry *p = (sf_cu_conv_entry *)realloc(c->convs, sizeof *p * (size_t)cap);
        if (!p) return sf_fail(SF_ERR_NOMEM, "conv algorithm cache: out of host memory");
        c->convs = p;
        c->cap_convs = cap;
    }
    sf_cu_conv_entry *e = &c->convs[c->n_convs];
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

size_t sf_cu_conv_workspace(sf_backend *be, const sf_conv_shape *sh)
{
    sf_cu_conv_entry *e = NULL;
    /* A failure here is reported again, with its message, by the conv call that follows. */
    return lookup(sf_cu_ctx_of(be), sh, &e) == SF_OK ? e->ws : 0;
}

sf_status sf_cu_conv_forward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w, const float *b,
                             float *y, void *ws)
{
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    sf_cu_conv_entry *e;
    SF_TRY(lookup(c, sh, &e));
    const sf_cu_conv_op *op = &e->op[SF_CONV_FWD];
    const int64_t xs = op->chunk * sh->cin * sh->h * sh->w, ys = op->chunk * sh->cout * sh->oh * sh->ow;
    float one = 1.0f, zero = 0.0f;
    for (int64_t i = 0; i < sh->n / op->chunk; i++)
        SF_CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, op->xd, x + i * xs, e->wd, w, e->cd,
                                               (cudnnConvolutionFwdAlgo_t)op->algo, ws, op->ws, &zero, op->yd,
                                               y + i * ys));
    if (b) SF_CUDNN_CHECK(cudnnAddTensor(c->cudnn, &one, e->bd, b, &one, e->yd, y));
    return SF_OK;
}

sf_status sf_cu_conv_backward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w, const float *dy,
                              float *dx, float *dw, float *db, void *ws)
{
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    sf_cu_conv_entry *e;
    SF_TRY(lookup(c, sh, &e));
    float one = 1.0f, zero = 0.0f;
    const int64_t img_x = (int64_t)sh->cin * sh->h * sh->w, img_y = (int64_t)sh->cout * sh->oh * sh->ow;
    const sf_cu_conv_op *f = &e->op[SF_CONV_BWD_FILTER];
    for (int64_t i = 0; i < sh->n / f->chunk; i++) /* the weight gradient accumulates over the chunks */
        SF_CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, f->xd, x + i * f->chunk * img_x, f->yd,
                                                      dy + i * f->chunk * img_y, e->cd,
                                                      (cudnnConvolutionBwdFilterAlgo_t)f->algo, ws, f->ws,
                                                      i ? &one : &zero, e->wd, dw));
    const sf_cu_conv_op *d = &e->op[SF_CONV_BWD_DATA];
    if (dx)
        for (int64_t i = 0; i < sh->n / d->chunk; i++)
            SF_CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->wd, w, d->yd, dy + i * d->chunk * img_y,
                                                        e->cd, (cudnnConvolutionBwdDataAlgo_t)d->algo, ws, d->ws,
                                                        &zero, d->xd, dx + i * d->chunk * img_x));
    if (db) SF_CUDNN_CHECK(cudnnConvolutionBackwardBias(c->cudnn, &one, e->yd, dy, &zero, e->bd, db));
    return SF_OK;
}
