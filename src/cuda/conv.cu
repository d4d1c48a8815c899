/* conv.cu — 2-D convolution through cuDNN, NCHW, with T·B images folded into the batch. Algorithms are chosen
 * once per shape by cudnnFind* (measured on the device), restricted to FMA math (no TF32 tensor ops for fp32
 * unless SF_CUDA_MATH=tf32) and a bounded workspace, and cached with their descriptors. */
#include "cuda/ops.cuh"

#include <limits.h>
#include <stdlib.h>

struct sf_cu_conv_entry {
    sf_conv_shape sh;
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws;
};

static int same_shape(const sf_conv_shape *a, const sf_conv_shape *b)
{
    return a->n == b->n && a->cin == b->cin && a->h == b->h && a->w == b->w && a->cout == b->cout && a->k == b->k &&
           a->stride == b->stride && a->pad == b->pad && a->oh == b->oh && a->ow == b->ow;
}

static void entry_destroy(sf_cu_conv_entry *e)
{
    if (e->xd) cudnnDestroyTensorDescriptor(e->xd);
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

/* The first (fastest measured) result that succeeded, uses an allowed math type and fits the workspace cap (the
 * engine allocates the largest workspace once and shares it between layers; SF_CUDA_CONV_WS_MIB sets the cap).
 * fp32: FMA only (cuDNN's DEFAULT_MATH may use TF32 on Ampere and later). Determinism is not required: with
 * deterministic algorithms only, the W3 step took 130 ms instead of 111 ms on an H200, so convolution gradients may
 * differ in the last bits from run to run. */
template <class Perf, class Algo>
static sf_status pick(const Perf *perf, int count, Algo *out, size_t *ws, const sf_conv_shape *sh, const char *what,
                      bool tf32, size_t cap)
{
    for (int i = 0; i < count; i++) {
        cudnnMathType_t m = perf[i].mathType;
        bool math_ok = m == CUDNN_FMA_MATH || (tf32 && (m == CUDNN_DEFAULT_MATH || m == CUDNN_TENSOR_OP_MATH));
        if (perf[i].status == CUDNN_STATUS_SUCCESS && math_ok && perf[i].memory <= cap) {
            *out = perf[i].algo;
            if (perf[i].memory > *ws) *ws = perf[i].memory;
            return SF_OK;
        }
    }
    return sf_fail(SF_ERR_UNSUPPORTED,
                   "cuDNN offers no %s %s algorithm within %zu MiB of workspace for conv n=%lld cin=%d %dx%d "
                   "cout=%d k=%d stride=%d",
                   tf32 ? "tf32" : "fp32", what, cap >> 20, (long long)sh->n, sh->cin, sh->h, sh->w,
                   sh->cout, sh->k, sh->stride);
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
    SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->xd));
    SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->yd));
    SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->bd));
    SF_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->wd));
    SF_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e->cd));
    int n = (int)sh->n;
    SF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, sh->cin, sh->h, sh->w));
    SF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, sh->cout, sh->oh, sh->ow));
    SF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, sh->cout, 1, 1));
    SF_CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(e->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, sh->cout, sh->cin, sh->k, sh->k));
    SF_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(e->cd, sh->pad, sh->pad, sh->stride, sh->stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    /* fp32 (and fp32emu, which cuDNN does not offer): FMA only; tf32 when opted in */
    bool tf32 = c->math == SF_CU_MATH_TF32;
    SF_CUDNN_CHECK(cudnnSetConvolutionMathType(e->cd, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    int got;
    e->ws = 0;
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    SF_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(c->cudnn, e->xd, e->wd, e->cd, e->yd,
                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf));
    SF_TRY(pick(pf, got, &e->fwd, &e->ws, sh, "forward", tf32, c->conv_ws_cap));
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    SF_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(c->cudnn, e->wd, e->yd, e->cd, e->xd,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd));
    SF_TRY(pick(pd, got, &e->bwd_data, &e->ws, sh, "backward-data", tf32, c->conv_ws_cap));
    cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    SF_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(c->cudnn, e->xd, e->yd, e->cd, e->wd,
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pw));
    SF_TRY(pick(pw, got, &e->bwd_filter, &e->ws, sh, "backward-filter", tf32, c->conv_ws_cap));
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
    float one = 1.0f, zero = 0.0f;
    SF_CUDNN_CHECK(
        cudnnConvolutionForward(c->cudnn, &one, e->xd, x, e->wd, w, e->cd, e->fwd, ws, e->ws, &zero, e->yd, y));
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
    SF_CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, e->xd, x, e->yd, dy, e->cd, e->bwd_filter, ws, e->ws,
                                                  &zero, e->wd, dw));
    if (dx)
        SF_CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->wd, w, e->yd, dy, e->cd, e->bwd_data, ws, e->ws,
                                                    &zero, e->xd, dx));
    if (db) SF_CUDNN_CHECK(cudnnConvolutionBackwardBias(c->cudnn, &one, e->yd, dy, &zero, e->bd, db));
    return SF_OK;
}
