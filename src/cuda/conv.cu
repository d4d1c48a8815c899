/* conv.cu — 2-D convolution, T·B images folded into the batch, on the engine's NCHW tensors. Each op of each shape
 * runs the fastest of its paths measured at plan time (conv_algo can force one): cuDNN on NCHW, cuDNN on NHWC copies
 * in its workspace, im2col + GEMM (conv_gemm.cu), and in fp32 on spikes TF32 products of exact parts (conv_parts.cu),
 * each in the precision's math, within the workspace cap, on batch chunks where faster. Deterministic mode times
 * nothing. Bias kernels are here. Design: docs/architecture.md, Layouts, Spike products, Determinism. */
#include "cuda/act.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/ops.cuh"
#include "cuda/reduce.cuh"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "core/rng.h"
}

enum { SF_CONV_FWD, SF_CONV_BWD_DATA, SF_CONV_BWD_FILTER, SF_CONV_OPS };
/* The layouts cuDNN runs on, and the paths an op can take: cuDNN in one of those layouts, or im2col + GEMM. */
enum { SF_CONV_NCHW, SF_CONV_NHWC, SF_CONV_LAYOUTS };
enum { SF_CONV_PATH_NCHW = SF_CONV_NCHW, SF_CONV_PATH_NHWC = SF_CONV_NHWC, SF_CONV_PATH_GEMM, SF_CONV_PATH_SPLIT,
       SF_CONV_PATHS };

/* One op in one layout: its algorithm, the math type cuDNN measured it in (its descriptor must carry that type: a
 * 16-bit algorithm measured in FMA math fails in tensor-op math with BAD_PARAM on some shapes), and the batch chunk
 * (images per call) with descriptors of that size (chunk 0: no algorithm fits). */
typedef struct sf_cuda_conv_op {
    int algo;
    cudnnMathType_t math;
    cudnnConvolutionDescriptor_t cd;
    int64_t chunk;
    float ms; /* measured time of all chunks */
    size_t ws;
    cudnnTensorDescriptor_t xd, yd;
    cudnnTensorDescriptor_t xn, yn; /* NHWC ops: x and y of a chunk as NCHW, for the copies */
    cudnnTensorDescriptor_t xv;     /* NHWC ops: the cin channels of x's copy, whose pixels are nhwc_channels apart */
    int fastest_algo; /* the fastest allowed algorithm on the whole batch, whatever its workspace (for reports) */
    float fastest_ms;
    size_t fastest_ws;
} sf_cuda_conv_op;

struct sf_cuda_conv_entry {
    sf_conv_shape sh;
    bool tf32_parts; /* runs the products of the split path: tensor-op math, exact-product algorithms, no GEMM path */
    int split_entries[2]; /* the split path's entries in sf_cuda_ctx.convs: 2·cout and cout outputs (-1: none) */
    cudnnFilterDescriptor_t wd[SF_CONV_LAYOUTS]; /* KCRS, KRSC */
    cudnnTensorDescriptor_t wt[SF_CONV_LAYOUTS]; /* the same as tensors, for the filter's copies */
    cudnnConvolutionDescriptor_t cd;
    sf_cuda_conv_op op[SF_CONV_LAYOUTS][SF_CONV_OPS];
    int path[SF_CONV_OPS];
    float nhwc_ms[SF_CONV_OPS], gemm_ms[SF_CONV_OPS], split_ms[SF_CONV_OPS]; /* paths timed whole (0: not measured) */
    int64_t gemm_chunk; /* images per im2col + GEMM call (0: the path does not fit the cap) */
    size_t ws_forward, ws_backward; /* the workspace conv_forward and conv_backward need on the chosen paths */
    bool recorded; /* its choices came from a record (conv_set_choice), not a measurement: nothing to weigh */
};

/* An op may take a choice up to this much slower than its fastest when it needs less workspace, which adds to the
 * plan's peak (docs/architecture.md, Layouts). */
#define LEAN_SLACK 0.03f

/* What the NHWC path keeps in an op's workspace after the algorithm's: filter and weight gradient in KRSC, one chunk's
 * x, y (or dy) and dx in NHWC; each op those it uses, and of x, y, dx only copies of sides the engine keeps NCHW. */
enum { NHWC_W = 1, NHWC_DW = 2, NHWC_X = 4, NHWC_Y = 8, NHWC_DX = 16 };
static const unsigned nhwc_uses[SF_CONV_OPS] = {NHWC_W | NHWC_X | NHWC_Y, NHWC_W | NHWC_Y | NHWC_DX,
                                                NHWC_DW | NHWC_X | NHWC_Y};
typedef struct nhwc_bufs {
    char *w, *dw, *x, *y, *dx;
} nhwc_bufs;

/* The channels of x on the NHWC path: where x is copied from NCHW, cin rounded up to a multiple of 8 with zeros
 * (cuDNN's tensor-core NHWC kernels take multiples of 8; a 3-channel image stem runs several times slower). */
static int32_t nhwc_channels(const sf_conv_shape *sh)
{
    return sh->x_nhwc || sh->cin % 8 == 0 ? sh->cin : (sh->cin + 7) / 8 * 8;
}

static unsigned nhwc_copies(const sf_conv_shape *sh, int op)
{
    unsigned u = nhwc_uses[op];
    if (sh->x_nhwc) u &= ~(unsigned)(NHWC_X | NHWC_DX);
    if (sh->y_nhwc) u &= ~(unsigned)NHWC_Y;
    return u;
}

static size_t align256(size_t b)
{
    return (b + 255) & ~(size_t)255;
}

/* Places the copies `uses` names after `base` (NULL: only sizes them); returns their bytes. */
static size_t nhwc_place(const sf_conv_shape *sh, int64_t chunk, size_t es, unsigned uses, char *base, nhwc_bufs *b)
{
    const int32_t cp = nhwc_channels(sh);
    const size_t nw = (size_t)sh->cout * cp * sh->k * sh->k, nx = (size_t)chunk * cp * sh->h * sh->w,
                 ny = (size_t)chunk * sh->cout * sh->oh * sh->ow;
    const struct {
        unsigned use;
        size_t elems;
        char **at;
    } part[] = {{NHWC_W, nw, &b->w}, {NHWC_DW, nw, &b->dw}, {NHWC_X, nx, &b->x}, {NHWC_Y, ny, &b->y},
                {NHWC_DX, nx, &b->dx}};
    size_t off = 0;
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
        *part[i].at = NULL;
        if (!(uses & part[i].use)) continue;
        if (base) *part[i].at = base + off;
        off += align256(part[i].elems * es);
    }
    return off;
}

/* The workspace of NHWC ops run together (ops: bits 1 << SF_CONV_*; the two backward ops together share a chunk):
 * the largest of their algorithms' workspaces, then their copies, which are placed in ws where it is given. */
static size_t nhwc_layout(const sf_cuda_conv_entry *e, size_t es, unsigned ops, void *ws, nhwc_bufs *b)
{
    size_t algo = 0;
    unsigned uses = 0;
    int64_t chunk = 0;
    for (int o = 0; o < SF_CONV_OPS; o++) {
        if (!(ops & 1u << o)) continue;
        const sf_cuda_conv_op *op = &e->op[SF_CONV_NHWC][o];
        if (op->ws > algo) algo = op->ws;
        uses |= nhwc_copies(&e->sh, o);
        chunk = op->chunk;
    }
    const size_t at = align256(algo);
    return at + nhwc_place(&e->sh, chunk, es, uses, ws ? (char *)ws + at : NULL, b);
}

static void entry_destroy(sf_cuda_conv_entry *e)
{
    for (int l = 0; l < SF_CONV_LAYOUTS; l++) {
        for (int i = 0; i < SF_CONV_OPS; i++) {
            sf_cuda_conv_op *op = &e->op[l][i];
            if (op->xd) cudnnDestroyTensorDescriptor(op->xd);
            if (op->yd) cudnnDestroyTensorDescriptor(op->yd);
            if (op->xn) cudnnDestroyTensorDescriptor(op->xn);
            if (op->xv) cudnnDestroyTensorDescriptor(op->xv);
            if (op->yn) cudnnDestroyTensorDescriptor(op->yn);
            if (op->cd) cudnnDestroyConvolutionDescriptor(op->cd);
        }
        if (e->wd[l]) cudnnDestroyFilterDescriptor(e->wd[l]);
        if (e->wt[l]) cudnnDestroyTensorDescriptor(e->wt[l]);
    }
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

/* Whether algorithm `algo` of op multiplies the operands as they are (direct and implicit or explicit GEMM), which
 * the split path's exact parts need: FFT and Winograd transform them first. */
static bool exact_products(int op, int algo)
{
    switch (op) {
    case SF_CONV_FWD:
        return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
    case SF_CONV_BWD_DATA:
        return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    default:
        return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
    }
}

/* Whether `algo` of op sums its blocks' partials into the output by atomics (backward-data algo_0, backward-filter
 * algo_0, algo_3): with 16-bit outputs each add rounds, and their time depends on values the timing data lacks. */
static bool atomic_sums(int op, int algo)
{
    if (op == SF_CONV_BWD_DATA) return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    return op == SF_CONV_BWD_FILTER &&
           (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3);
}

/* Takes the fastest successful result with an allowed math type (fp32: FMA only, as DEFAULT_MATH may use TF32; TF32
 * parts: fp32 operands as they are), no 16-bit atomic sums, within the cap, or the leanest within LEAN_SLACK of it, if
 * `splits` calls beat op's choice; returns whether the fastest allowed did not fit. Deterministic mode: `perf` is
 * cuDNN's heuristic ranking, the first fit wins, never replaced; outside it gradients may vary in their last bits. */
template <class Perf>
static bool consider(const Perf *perf, int count, int o, int64_t splits, int64_t chunk, sf_precision prec,
                     bool tf32_parts, size_t cap, bool deterministic, sf_cuda_conv_op *op, bool *changed)
{
    bool fastest_too_big = false, first = true;
    int pick = -1;
    float lean_until = 0.0f;
    *changed = false;
    for (int i = 0; i < count; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        const bool ok = tf32_parts ? exact_products(o, (int)perf[i].algo) &&
                                         perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                   : math_ok(perf[i].mathType, prec);
        const bool narrow = prec == SF_PRECISION_BF16 || prec == SF_PRECISION_FP16;
        if (!ok || (narrow && atomic_sums(o, (int)perf[i].algo))) continue;
        if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
        if (first && splits == 1) {
            op->fastest_algo = (int)perf[i].algo;
            op->fastest_ms = perf[i].time;
            op->fastest_ws = perf[i].memory;
        }
        if (perf[i].memory > cap && first) fastest_too_big = true;
        first = false;
        if (perf[i].memory > cap) continue;
        if (pick < 0) {
            pick = i;
            lean_until = perf[i].time * (1.0f + LEAN_SLACK);
            if (deterministic) break;
        } else if (perf[i].time <= lean_until && perf[i].memory < perf[pick].memory) {
            pick = i;
        }
    }
    if (pick < 0) return fastest_too_big;
    const float total = perf[pick].time * (float)splits;
    if (op->chunk == 0 || (!deterministic && total < op->ms)) {
        op->algo = (int)perf[pick].algo;
        op->math = perf[pick].mathType;
        op->chunk = chunk;
        op->ms = total;
        op->ws = perf[pick].memory;
        *changed = true;
    }
    return fastest_too_big;
}

/* The convolution of sh in math type m (fp32 accumulation in every precision). */
static sf_status conv_desc(const sf_conv_shape *sh, cudnnMathType_t m, cudnnConvolutionDescriptor_t *cd)
{
    SF_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(cd));
    SF_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*cd, sh->pad, sh->pad, sh->stride, sh->stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SF_CUDNN_CHECK(cudnnSetConvolutionMathType(*cd, m));
    return SF_OK;
}

static sf_status set_desc(cudnnTensorDescriptor_t d, int layout, cudnnDataType_t t, int64_t n, int32_t c, int32_t h,
                          int32_t w)
{
    SF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, layout == SF_CONV_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, t,
                                              (int)n, c, h, w));
    return SF_OK;
}

/* The descriptors of op's x, y and their copies in `layout` on chunks of n images. */
static sf_status set_op_descs(sf_cuda_conv_op *op, const sf_conv_shape *sh, int layout, cudnnDataType_t dt, int64_t n)
{
    const int32_t cp = layout == SF_CONV_NHWC ? nhwc_channels(sh) : sh->cin;
    SF_TRY(set_desc(op->xd, layout, dt, n, cp, sh->h, sh->w));
    SF_TRY(set_desc(op->yd, layout, dt, n, sh->cout, sh->oh, sh->ow));
    SF_TRY(set_desc(op->xn, SF_CONV_NCHW, dt, n, sh->cin, sh->h, sh->w));
    SF_TRY(set_desc(op->yn, SF_CONV_NCHW, dt, n, sh->cout, sh->oh, sh->ow));
    SF_CUDNN_CHECK(
        cudnnSetTensor4dDescriptorEx(op->xv, dt, (int)n, sh->cin, sh->h, sh->w, sh->h * sh->w * cp, 1, sh->w * cp, cp));
    return SF_OK;
}

/* Measures the three ops in `layout` on chunks of n / splits images, updating the ops this makes faster (NHWC copies
 * come out of the cap first). *more: some op's fastest algorithm (or its copies) still exceeds the cap. */
static sf_status measure(sf_cuda_ctx *c, sf_cuda_conv_entry *e, int layout, int64_t splits, bool *more)
{
    const sf_conv_shape *sh = &e->sh;
    const sf_precision prec = c->prec;
    const cudnnDataType_t dt = sf_cudnn_type(c->act);
    const size_t es = sf_scalar_size(c->act);
    int64_t chunk = sh->n / splits;
    cudnnTensorDescriptor_t xd = NULL, yd = NULL;
    sf_status st = SF_OK;
    int got;
    bool changed, big[SF_CONV_OPS];
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    cudnnFilterDescriptor_t wd = e->wd[layout];
    cudnnStatus_t cs = cudnnCreateTensorDescriptor(&xd);
    if (cs == CUDNN_STATUS_SUCCESS) cs = cudnnCreateTensorDescriptor(&yd);
    if (cs != CUDNN_STATUS_SUCCESS) {
        st = sf_cuda_fail_cudnn(cs, __FILE__, __LINE__, "cudnnCreateTensorDescriptor");
        goto done;
    }
    if ((st = set_desc(xd, layout, dt, chunk, layout == SF_CONV_NHWC ? nhwc_channels(sh) : sh->cin, sh->h, sh->w)) !=
        SF_OK)
        goto done;
    if ((st = set_desc(yd, layout, dt, chunk, sh->cout, sh->oh, sh->ow)) != SF_OK) goto done;
    for (int o = 0; o < SF_CONV_OPS; o++) {
        nhwc_bufs b;
        const size_t copies = layout == SF_CONV_NHWC ? nhwc_place(sh, chunk, es, nhwc_copies(sh, o), NULL, &b) : 0;
        if (copies >= c->conv_ws_cap) {
            big[o] = true;
            continue;
        }
        /* Find measures every algorithm; Get_v7 ranks them by cuDNN's heuristics, the same in every process. */
        const bool det = c->deterministic;
        if (o == SF_CONV_FWD)
            cs = det ? cudnnGetConvolutionForwardAlgorithm_v7(c->cudnn, xd, wd, e->cd, yd,
                                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf)
                     : cudnnFindConvolutionForwardAlgorithm(c->cudnn, xd, wd, e->cd, yd,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, pf);
        else if (o == SF_CONV_BWD_DATA)
            cs = det ? cudnnGetConvolutionBackwardDataAlgorithm_v7(c->cudnn, wd, yd, e->cd, xd,
                                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd)
                     : cudnnFindConvolutionBackwardDataAlgorithm(c->cudnn, wd, yd, e->cd, xd,
                                                                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, pd);
        else
            cs = det ? cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->cudnn, xd, yd, e->cd, wd,
                                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pw)
                     : cudnnFindConvolutionBackwardFilterAlgorithm(c->cudnn, xd, yd, e->cd, wd,
                                                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, pw);
        if (cs != CUDNN_STATUS_SUCCESS) {
            st = sf_cuda_fail_cudnn(cs, __FILE__, __LINE__,
                                    det ? "cudnnGetConvolution*Algorithm_v7" : "cudnnFindConvolution*Algorithm");
            goto done;
        }
        sf_cuda_conv_op *op = &e->op[layout][o];
        const size_t cap = c->conv_ws_cap - copies;
        const bool p = e->tf32_parts;
        big[o] = o == SF_CONV_FWD        ? consider(pf, got, o, splits, chunk, prec, p, cap, det, op, &changed)
                 : o == SF_CONV_BWD_DATA ? consider(pd, got, o, splits, chunk, prec, p, cap, det, op, &changed)
                                         : consider(pw, got, o, splits, chunk, prec, p, cap, det, op, &changed);
        if (changed && (st = set_op_descs(op, sh, layout, dt, chunk)) != SF_OK) goto done;
    }
    /* deterministic: more chunks only while an op has nothing that fits */
    {
        const sf_cuda_conv_op *op = e->op[layout];
        *more = c->deterministic ? op[0].chunk == 0 || op[1].chunk == 0 || op[2].chunk == 0
                                 : big[0] || big[1] || big[2];
    }
done:
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    return st;
}

static sf_status nhwc_forward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const void *x, const void *w, void *y,
                              void *ws);
static sf_status nhwc_backward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const void *x, const void *w,
                               const void *dy, void *dx, float *dw, void *ws, bool add);
static size_t split_layout(const sf_cuda_ctx *c, const sf_cuda_conv_entry *e, int op, void *ws, float **w, float **y);
static sf_status split_forward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const float *x, const float *w, float *y,
                               void *ws);
static sf_status split_backward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const float *x, const float *w,
                                const float *dy, float *dx, float *dw, void *ws);

/* The workspace op o needs on path p of e (cuDNN's own, and the copies or parts the path keeps there). */
static size_t path_ws(const sf_cuda_ctx *c, const sf_cuda_conv_entry *e, int p, int o)
{
    nhwc_bufs b;
    switch (p) {
    case SF_CONV_PATH_GEMM: return sf_cuda_conv_gemm_ws(&e->sh, e->gemm_chunk, sf_scalar_size(c->act));
    case SF_CONV_PATH_NHWC: return nhwc_layout(e, sf_scalar_size(c->act), 1u << o, NULL, &b);
    case SF_CONV_PATH_SPLIT: return split_layout(c, e, o, NULL, NULL, NULL);
    default: return e->op[SF_CONV_NCHW][o].ws;
    }
}

/* The timing buffers: x, dx, w, dw (fp32), y (also dy), workspace. */
enum { TB_X, TB_DX, TB_W, TB_DW, TB_Y, TB_WS, TB_COUNT };

/* One op of a path (im2col + GEMM, cuDNN on NHWC copies or the split path) on the timing buffers. */
static sf_status run_path_op(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, int path, int op, void *const *buf)
{
    const sf_conv_shape *sh = &e->sh;
    void *dx = op == SF_CONV_BWD_DATA ? buf[TB_DX] : NULL;
    float *dw = op == SF_CONV_BWD_FILTER ? (float *)buf[TB_DW] : NULL;
    if (path == SF_CONV_PATH_GEMM) {
        if (op == SF_CONV_FWD)
            return sf_cuda_conv_gemm_forward(c, sh, e->gemm_chunk, buf[TB_X], buf[TB_W], NULL, buf[TB_Y], buf[TB_WS]);
        return sf_cuda_conv_gemm_backward(c, sh, e->gemm_chunk, buf[TB_X], buf[TB_W], buf[TB_Y], dx, dw, buf[TB_WS]);
    }
    if (path == SF_CONV_PATH_SPLIT) {
        const float *x = (const float *)buf[TB_X], *w = (const float *)buf[TB_W];
        if (op == SF_CONV_FWD) return split_forward(c, e, x, w, (float *)buf[TB_Y], buf[TB_WS]);
        return split_backward(c, e, x, w, (const float *)buf[TB_Y], (float *)dx, dw, buf[TB_WS]);
    }
    if (op == SF_CONV_FWD) return nhwc_forward(c, e, buf[TB_X], buf[TB_W], buf[TB_Y], buf[TB_WS]);
    return nhwc_backward(c, e, buf[TB_X], buf[TB_W], buf[TB_Y], dx, dw, buf[TB_WS], false);
}

/* One op of a path: one warm-up run, then the mean of two, by events on the backend's stream. */
static sf_status time_path_op(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, int path, int op, void *const *buf,
                              cudaEvent_t *ev, float *ms)
{
    SF_TRY(run_path_op(c, e, path, op, buf));
    SF_CUDA_CHECK(cudaEventRecord(ev[0], c->stream));
    for (int r = 0; r < 2; r++) SF_TRY(run_path_op(c, e, path, op, buf));
    SF_CUDA_CHECK(cudaEventRecord(ev[1], c->stream));
    SF_CUDA_CHECK(cudaEventSynchronize(ev[1]));
    SF_CUDA_CHECK(cudaEventElapsedTime(ms, ev[0], ev[1]));
    *ms /= 2;
    return SF_OK;
}

/* A timing buffer's values: spikes (0 or 1, one in eight) for the input of a shape of spikes, else uniform in
 * [-1, 1), drawn by index: the libraries' kernels run at other speeds on zeros. */
template <class T> __global__ void timing_fill_kernel(int64_t n, uint64_t stream, bool spikes, T *p)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        const float u = sf_uniform(0x5eedu, stream, (uint64_t)i);
        p[i] = sf_narrow<T>(spikes ? (u < 0.125f ? 1.0f : 0.0f) : 2.0f * u - 1.0f);
    }
}

static sf_status timing_fill(sf_cuda_ctx *c, void *p, size_t n, uint64_t stream, bool spikes)
{
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        timing_fill_kernel<T>
            <<<sf_cuda_blocks((int64_t)n, 256), 256, 0, c->stream>>>((int64_t)n, stream, spikes, (T *)p);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

/* Times the NHWC, im2col + GEMM and split paths of every op that has them into e->nhwc_ms, gemm_ms, split_ms, on
 * buffers of the shape allocated for this (random inputs, zeroed outputs); without room for them nothing is timed. */
static sf_status time_paths(sf_cuda_ctx *c, sf_cuda_conv_entry *e, bool nhwc)
{
    const sf_conv_shape *sh = &e->sh;
    const size_t es = sf_scalar_size(c->act);
    const size_t nx = (size_t)(sh->n * sh->cin * sh->h * sh->w), ny = (size_t)(sh->n * sh->cout * sh->oh * sh->ow),
                 nw = (size_t)sh->cout * sh->cin * sh->k * sh->k;
    size_t ws = e->gemm_chunk ? path_ws(c, e, SF_CONV_PATH_GEMM, 0) : 0;
    for (int o = 0; o < SF_CONV_OPS; o++) {
        const size_t need = nhwc && e->op[SF_CONV_NHWC][o].chunk ? path_ws(c, e, SF_CONV_PATH_NHWC, o) : 0;
        const size_t split = e->split_entries[0] >= 0 ? path_ws(c, e, SF_CONV_PATH_SPLIT, o) : 0;
        if (need > ws) ws = need;
        if (split > ws) ws = split;
    }
    const size_t bytes[TB_COUNT] = {nx * es, nx * es, nw * es, nw * sizeof(float), ny * es, ws};
    void *buf[TB_COUNT] = {NULL};
    cudaEvent_t ev[2] = {NULL, NULL};
    cudaError_t ce = cudaSuccess;
    sf_status st = SF_OK;
    for (int i = 0; i < TB_COUNT && ce == cudaSuccess; i++) {
        ce = cudaMalloc(&buf[i], bytes[i]);
        if (ce == cudaSuccess) ce = cudaMemsetAsync(buf[i], 0, bytes[i], c->stream);
    }
    for (int i = 0; i < 2 && ce == cudaSuccess; i++) ce = cudaEventCreate(&ev[i]);
    const int inputs[] = {TB_X, TB_W, TB_Y};
    for (int i = 0; i < 3 && ce == cudaSuccess && st == SF_OK; i++) {
        const int b = inputs[i];
        st = timing_fill(c, buf[b], bytes[b] / es, (uint64_t)b, b == TB_X && sh->x_binary);
    }
    for (int o = 0; o < SF_CONV_OPS && ce == cudaSuccess && st == SF_OK; o++) {
        if (e->gemm_chunk) st = time_path_op(c, e, SF_CONV_PATH_GEMM, o, buf, ev, &e->gemm_ms[o]);
        if (st == SF_OK && nhwc && e->op[SF_CONV_NHWC][o].chunk)
            st = time_path_op(c, e, SF_CONV_PATH_NHWC, o, buf, ev, &e->nhwc_ms[o]);
        if (st == SF_OK && e->split_entries[0] >= 0)
            st = time_path_op(c, e, SF_CONV_PATH_SPLIT, o, buf, ev, &e->split_ms[o]);
    }
    cudaStreamSynchronize(c->stream);
    for (int i = 0; i < TB_COUNT; i++) cudaFree(buf[i]);
    for (int i = 0; i < 2; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    if (ce == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return SF_OK;
    }
    if (ce != cudaSuccess) return sf_cuda_fail_cuda(ce, __FILE__, __LINE__, "preparing the conv paths' timing");
    return st;
}

static sf_status find(sf_cuda_ctx *c, const sf_conv_shape *sh, bool tf32_parts, int *index);

/* Gives e its split path's entries (2·cout and cout outputs) on the largest chunk of images, dividing the batch,
 * whose three stacked parts of dy fill at most an eighth of the workspace cap (at least one image). */
static sf_status add_split_entries(sf_cuda_ctx *c, sf_cuda_conv_entry *e)
{
    const int64_t stacked_per_img = 3 * (int64_t)sizeof(float) * e->sh.cout * e->sh.oh * e->sh.ow;
    int64_t nb = (int64_t)(c->conv_ws_cap / 8) / stacked_per_img;
    if (nb > e->sh.n) nb = e->sh.n;
    if (nb > 65535) nb = 65535; /* conv_parts.cu's grids */
    if (nb < 1) nb = 1;
    while (e->sh.n % nb) nb--;
    for (int g = 0; g < 2; g++) {
        sf_conv_shape sub = e->sh;
        sub.n = nb;
        sub.cout = (2 - g) * e->sh.cout;
        sub.y_nhwc = true;
        sub.x_binary = false;
        SF_TRY(find(c, &sub, true, &e->split_entries[g]));
    }
    return SF_OK;
}

/* Among the measured paths of op o, the fastest, or the one of least workspace within `slack` of its time (-1: none
 * measured). */
static int lean_fastest(const sf_cuda_ctx *c, const sf_cuda_conv_entry *e, int o, const bool *measured,
                        const float *ms, float slack)
{
    int best = -1;
    for (int p = 0; p < SF_CONV_PATHS; p++)
        if (measured[p] && (best < 0 || ms[p] < ms[best])) best = p;
    if (best < 0) return best;
    const float until = ms[best] * (1.0f + slack);
    int lean = best;
    for (int p = 0; p < SF_CONV_PATHS; p++)
        if (measured[p] && ms[p] <= until && path_ws(c, e, p, o) < path_ws(c, e, lean, o)) lean = p;
    return lean;
}

/* Picks each op's path: the fastest measured or a leaner one (lean_fastest), else the one conv_algo forces
 * (deterministic mode: that one, else cuDNN on NCHW), else any path that has the op. Where the engine keeps a side
 * NHWC, cuDNN on NCHW is out, and im2col + GEMM too if that side is x. The split path: fp32 spike inputs under auto
 * and split, outside deterministic mode; an entry of TF32 parts has no GEMM path (its GEMMs would be SGEMMs). */
static sf_status choose_paths(sf_cuda_ctx *c, sf_cuda_conv_entry *e)
{
    const sf_conv_algo algo = c->conv_algo;
    const bool engine_nhwc = e->sh.x_nhwc || e->sh.y_nhwc, forced_split = algo == SF_CONV_ALGO_SPLIT;
    const bool nhwc = engine_nhwc || algo == SF_CONV_ALGO_NHWC ||
                      ((algo == SF_CONV_ALGO_AUTO || forced_split) && !c->deterministic);
    bool split = e->sh.x_binary && !engine_nhwc && !e->tf32_parts && c->prec == SF_PRECISION_FP32 &&
                 c->act == SF_SCALAR_F32 && (algo == SF_CONV_ALGO_AUTO || forced_split) && !c->deterministic;
    if (!e->tf32_parts && !e->sh.x_nhwc && algo != SF_CONV_ALGO_CUDNN && (algo != SF_CONV_ALGO_NHWC || engine_nhwc))
        e->gemm_chunk = sf_cuda_conv_gemm_chunk(&e->sh, c->conv_ws_cap, sf_scalar_size(c->act));
    if (nhwc) {
        bool more = true;
        for (int64_t splits = 1; splits <= 64 && more && e->sh.n % splits == 0; splits *= 2)
            SF_TRY(measure(c, e, SF_CONV_NHWC, splits, &more));
        for (int o = 0; o < SF_CONV_OPS; o++) { /* the timing below runs them */
            sf_cuda_conv_op *op = &e->op[SF_CONV_NHWC][o];
            if (op->chunk) SF_TRY(conv_desc(&e->sh, op->math, &op->cd));
        }
    }
    if (split) { /* under auto, a shape whose stacked parts cuDNN cannot run goes without the split path */
        const sf_status st = add_split_entries(c, e);
        if (st != SF_OK && forced_split) return st;
        if (st != SF_OK) {
            split = false;
            e->split_entries[0] = e->split_entries[1] = -1;
        }
    }
    const bool timed = !c->deterministic && (algo == SF_CONV_ALGO_AUTO || algo == SF_CONV_ALGO_NCHW || forced_split ||
                                             (algo == SF_CONV_ALGO_NHWC && engine_nhwc));
    if (!c->deterministic && (nhwc || e->gemm_chunk || split)) SF_TRY(time_paths(c, e, nhwc));
    for (int o = 0; o < SF_CONV_OPS; o++) {
        const bool has[SF_CONV_PATHS] = {!engine_nhwc && e->op[SF_CONV_NCHW][o].chunk != 0,
                                         nhwc && e->op[SF_CONV_NHWC][o].chunk != 0, e->gemm_chunk != 0, split};
        /* what auto compares must have been timed (the timing buffers may not have fit) */
        const bool measured[SF_CONV_PATHS] = {has[0], has[1] && e->nhwc_ms[o] > 0, has[2] && e->gemm_ms[o] > 0,
                                              has[3] && e->split_ms[o] > 0};
        const float ms[SF_CONV_PATHS] = {e->op[SF_CONV_NCHW][o].ms, e->nhwc_ms[o], e->gemm_ms[o], e->split_ms[o]};
        const int forced = forced_split && split                      ? SF_CONV_PATH_SPLIT
                           : algo == SF_CONV_ALGO_GEMM                ? SF_CONV_PATH_GEMM
                           : algo == SF_CONV_ALGO_NHWC || engine_nhwc ? SF_CONV_PATH_NHWC
                                                                      : SF_CONV_PATH_NCHW;
        int best = forced == SF_CONV_PATH_SPLIT ? forced : timed ? lean_fastest(c, e, o, measured, ms, LEAN_SLACK) : -1;
        if (best < 0 && has[forced]) best = forced;
        for (int p = 0; best < 0 && p < SF_CONV_PATHS; p++)
            if (has[p]) best = p;
        e->path[o] = best >= 0 ? best : engine_nhwc ? SF_CONV_PATH_NHWC : SF_CONV_PATH_NCHW;
    }
    return SF_OK;
}

/* The workspace of each pass on the paths in e->path, and the descriptors its cuDNN ops run with. */
static sf_status take_paths(sf_cuda_ctx *c, sf_cuda_conv_entry *e)
{
    size_t need[SF_CONV_OPS];
    for (int o = 0; o < SF_CONV_OPS; o++) {
        const int p = e->path[o];
        sf_cuda_conv_op *op = p == SF_CONV_PATH_NCHW || p == SF_CONV_PATH_NHWC ? &e->op[p][o] : NULL;
        if (op && !op->cd) SF_TRY(conv_desc(&e->sh, op->math, &op->cd));
        need[o] = path_ws(c, e, p, o);
    }
    e->ws_forward = need[SF_CONV_FWD];
    e->ws_backward = need[SF_CONV_BWD_DATA] > need[SF_CONV_BWD_FILTER] ? need[SF_CONV_BWD_DATA]
                                                                         : need[SF_CONV_BWD_FILTER];
    /* both backward ops on NHWC copies of one chunk run as one pass that transposes dy once */
    const sf_cuda_conv_op *bd = &e->op[SF_CONV_NHWC][SF_CONV_BWD_DATA], *bf = &e->op[SF_CONV_NHWC][SF_CONV_BWD_FILTER];
    if (e->path[SF_CONV_BWD_DATA] == SF_CONV_PATH_NHWC && e->path[SF_CONV_BWD_FILTER] == SF_CONV_PATH_NHWC &&
        bd->chunk == bf->chunk) {
        nhwc_bufs b;
        const size_t both =
            nhwc_layout(e, sf_scalar_size(c->act), 1u << SF_CONV_BWD_DATA | 1u << SF_CONV_BWD_FILTER, NULL, &b);
        if (both > e->ws_backward) e->ws_backward = both;
    }
    return SF_OK;
}

/* e's shape and descriptors, before any choice. */
static sf_status setup_descriptors(sf_cuda_ctx *c, const sf_conv_shape *sh, sf_cuda_conv_entry *e)
{
    if (sh->n > INT_MAX || sh->n < 1 || sh->cin < 1 || sh->cout < 1 || sh->k < 1 || sh->stride < 1 || sh->pad < 0 ||
        sh->oh != (sh->h + 2 * sh->pad - sh->k) / sh->stride + 1 ||
        sh->ow != (sh->w + 2 * sh->pad - sh->k) / sh->stride + 1)
        return sf_fail(SF_ERR_INVALID,
                       "conv shape n=%lld cin=%d %dx%d cout=%d k=%d stride=%d pad=%d -> %dx%d is "
                       "inconsistent",
                       (long long)sh->n, sh->cin, sh->h, sh->w, sh->cout, sh->k, sh->stride, sh->pad, sh->oh, sh->ow);
    e->sh = *sh;
    const cudnnDataType_t dt = sf_cudnn_type(c->act);
    const int32_t cp = nhwc_channels(sh), k = sh->k;
    for (int l = 0; l < SF_CONV_LAYOUTS; l++) {
        const bool nhwc = l == SF_CONV_NHWC;
        const cudnnTensorFormat_t f = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
        SF_CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->wd[l]));
        SF_CUDNN_CHECK(cudnnSetFilter4dDescriptor(e->wd[l], dt, f, sh->cout, nhwc ? cp : sh->cin, k, k));
        /* KRSC: the cin channels of the copy, cp apart */
        SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->wt[l]));
        if (nhwc)
            SF_CUDNN_CHECK(
                cudnnSetTensor4dDescriptorEx(e->wt[l], dt, sh->cout, sh->cin, k, k, k * k * cp, 1, k * cp, cp));
        else SF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->wt[l], f, dt, sh->cout, sh->cin, k, k));
        for (int o = 0; o < SF_CONV_OPS; o++) {
            sf_cuda_conv_op *op = &e->op[l][o];
            SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&op->xd));
            SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&op->yd));
            SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&op->xn));
            SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&op->yn));
            SF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&op->xv));
        }
    }
    /* measured under fp32: FMA only; tf32, bf16, fp16 and TF32 parts: tensor ops allowed (cuDNN also measures FMA) */
    const bool fma = c->prec == SF_PRECISION_FP32 && !e->tf32_parts;
    return conv_desc(sh, fma ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH, &e->cd);
}

static sf_status setup(sf_cuda_ctx *c, const sf_conv_shape *sh, sf_cuda_conv_entry *e)
{
    SF_TRY(setup_descriptors(c, sh, e));
    bool more = !sh->x_nhwc && !sh->y_nhwc; /* cuDNN on NCHW tensors, where the engine's are */
    for (int64_t splits = 1; splits <= 8 && more && sh->n % splits == 0; splits *= 2)
        SF_TRY(measure(c, e, SF_CONV_NCHW, splits, &more));
    SF_TRY(choose_paths(c, e));
    static const char *const names[SF_CONV_OPS] = {"forward", "backward-data", "backward-filter"};
    for (int o = 0; o < SF_CONV_OPS; o++) {
        const int p = e->path[o];
        if ((p == SF_CONV_PATH_NCHW || p == SF_CONV_PATH_NHWC) && e->op[p][o].chunk == 0)
            return sf_fail(SF_ERR_UNSUPPORTED,
                           "cuDNN offers no %s %s algorithm within %zu MiB of workspace for conv n=%lld cin=%d "
                           "%dx%d cout=%d k=%d stride=%d (raise conv_workspace_mib)",
                           sf_precision_name(c->prec), names[o], c->conv_ws_cap >> 20, (long long)sh->n, sh->cin,
                           sh->h, sh->w, sh->cout, sh->k, sh->stride);
    }
    return take_paths(c, e);
}

/* The index in c->convs of the entry of sh (one of TF32 parts where tf32_parts), set up on first use. Its setup
 * may add the entry of its split path first, so it is built aside and placed last. */
static sf_status find(sf_cuda_ctx *c, const sf_conv_shape *sh, bool tf32_parts, int *index)
{
    for (int i = 0; i < c->n_convs; i++)
        if (sf_conv_shape_equal(&c->convs[i].sh, sh) && c->convs[i].tf32_parts == tf32_parts) {
            *index = i;
            return SF_OK;
        }
    sf_cuda_conv_entry e;
    memset(&e, 0, sizeof e);
    e.tf32_parts = tf32_parts;
    e.split_entries[0] = e.split_entries[1] = -1;
    sf_status s = setup(c, sh, &e);
    if (s == SF_OK && c->n_convs == c->cap_convs) {
        int cap = c->cap_convs ? 2 * c->cap_convs : 16;
        sf_cuda_conv_entry *p = (sf_cuda_conv_entry *)realloc(c->convs, sizeof *p * (size_t)cap);
        if (p) {
            c->convs = p;
            c->cap_convs = cap;
        } else {
            s = sf_fail(SF_ERR_NOMEM, "conv algorithm cache: out of host memory");
        }
    }
    if (s != SF_OK) {
        entry_destroy(&e);
        return s;
    }
    c->convs[c->n_convs] = e;
    *index = c->n_convs++;
    return SF_OK;
}

static sf_status lookup(sf_cuda_ctx *c, const sf_conv_shape *sh, sf_cuda_conv_entry **out)
{
    int i;
    SF_TRY(find(c, sh, false, &i));
    *out = &c->convs[i];
    return SF_OK;
}

size_t sf_cuda_op_conv_workspace(sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass)
{
    sf_cuda_conv_entry *e = NULL;
    /* A failure here is reported again, with its message, by the conv call that follows. */
    if (lookup(sf_cuda_ctx_of(be), sh, &e) != SF_OK) return 0;
    const size_t f = pass & SF_CONV_PASS_FORWARD ? e->ws_forward : 0,
                 b = pass & SF_CONV_PASS_BACKWARD ? e->ws_backward : 0;
    return f > b ? f : b;
}

/* The measured time of op o on path p of e, or -1 where that path was not timed for it. */
static float path_ms(const sf_cuda_conv_entry *e, int p, int o)
{
    switch (p) {
    case SF_CONV_PATH_NCHW:
        return !e->sh.x_nhwc && !e->sh.y_nhwc && e->op[SF_CONV_NCHW][o].chunk ? e->op[SF_CONV_NCHW][o].ms : -1.0f;
    case SF_CONV_PATH_NHWC: return e->op[SF_CONV_NHWC][o].chunk && e->nhwc_ms[o] > 0 ? e->nhwc_ms[o] : -1.0f;
    case SF_CONV_PATH_GEMM: return e->gemm_chunk && e->gemm_ms[o] > 0 ? e->gemm_ms[o] : -1.0f;
    default: return e->split_entries[0] >= 0 && e->split_ms[o] > 0 ? e->split_ms[o] : -1.0f;
    }
}

bool sf_cuda_op_conv_lean(sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass, bool apply, sf_conv_lean *out)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    sf_cuda_conv_entry *e = NULL;
    /* only auto chooses by time; deterministic mode's choices must not depend on a clock */
    if (c->deterministic || c->conv_algo != SF_CONV_ALGO_AUTO || lookup(c, sh, &e) != SF_OK || e->recorded)
        return false;
    const int first = pass & SF_CONV_PASS_FORWARD ? SF_CONV_FWD : SF_CONV_BWD_DATA,
              last = pass & SF_CONV_PASS_BACKWARD ? SF_CONV_BWD_FILTER : SF_CONV_FWD;
    int path[SF_CONV_OPS];
    memcpy(path, e->path, sizeof path);
    float now = 0.0f, then = 0.0f;
    for (int o = first; o <= last; o++) {
        bool measured[SF_CONV_PATHS];
        float ms[SF_CONV_PATHS];
        for (int p = 0; p < SF_CONV_PATHS; p++) measured[p] = (ms[p] = path_ms(e, p, o)) >= 0.0f;
        if (!measured[e->path[o]]) return false; /* a path taken without a time: nothing to weigh it against */
        path[o] = lean_fastest(c, e, o, measured, ms, INFINITY);
        now += ms[e->path[o]];
        then += ms[path[o]];
    }
    int taken[SF_CONV_OPS];
    memcpy(taken, e->path, sizeof taken);
    const size_t ws_now = sf_cuda_op_conv_workspace(be, sh, pass);
    memcpy(e->path, path, sizeof path);
    bool leaner = take_paths(c, e) == SF_OK && sf_cuda_op_conv_workspace(be, sh, pass) < ws_now;
    out->ws = sf_cuda_op_conv_workspace(be, sh, pass);
    out->ms = now;
    out->extra_ms = then - now;
    if (!leaner || !apply) { /* back to the paths it had (their descriptors exist) */
        memcpy(e->path, taken, sizeof taken);
        take_paths(c, e);
    }
    return leaner;
}

/* ---- The choices as text (conv_choices, conv_set_choice), for run directories and for compiles that replay them.
 * One line per entry, in cache order (a split path's entries before the entry using them):
 *   conv N CIN H W COUT K STRIDE PAD OH OW X_NHWC Y_NHWC X_BINARY TF32_PARTS, then per op (fwd, bwd-data, bwd-filter)
 *   PATH ALGO MATH CHUNK (PATH 0 NCHW, 1 NHWC, 2 im2col + GEMM, 3 split; ALGO, MATH: cuDNN's enums; CHUNK: images
 *   per call; 0 0 0 off cuDNN's paths, except the GEMM path's CHUNK). */

size_t sf_cuda_op_conv_choices(sf_backend *be, char *out, size_t cap)
{
    const sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    size_t len = 0;
    bool fits = true; /* once a line does not fit, none is written after it */
    for (int i = 0; i < c->n_convs; i++) {
        const sf_cuda_conv_entry *e = &c->convs[i];
        const sf_conv_shape *sh = &e->sh;
        char line[512];
        int n = snprintf(line, sizeof line, "conv %lld %d %d %d %d %d %d %d %d %d %d %d %d %d", (long long)sh->n,
                         sh->cin, sh->h, sh->w, sh->cout, sh->k, sh->stride, sh->pad, sh->oh, sh->ow, sh->x_nhwc,
                         sh->y_nhwc, sh->x_binary, e->tf32_parts);
        for (int o = 0; o < SF_CONV_OPS; o++) {
            const int p = e->path[o];
            const sf_cuda_conv_op *op = p == SF_CONV_PATH_NCHW || p == SF_CONV_PATH_NHWC ? &e->op[p][o] : NULL;
            n += snprintf(line + n, sizeof line - (size_t)n, " %d %d %d %lld", p, op ? op->algo : 0,
                          op ? (int)op->math : 0,
                          (long long)(op ? op->chunk : p == SF_CONV_PATH_GEMM ? e->gemm_chunk : 0));
        }
        fits = fits && len + (size_t)n + 1 < cap;
        if (fits) {
            memcpy(out + len, line, (size_t)n);
            out[len + (size_t)n] = '\n';
            out[len + (size_t)n + 1] = 0;
        }
        len += (size_t)n + 1;
    }
    if (cap && len == 0) out[0] = 0;
    return len;
}

/* The workspace cuDNN's algorithm `algo` of op o needs in layout l on op's descriptors (a failure: it cannot run). */
static sf_status cudnn_ws(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, int l, int o, sf_cuda_conv_op *op)
{
    cudnnStatus_t cs;
    if (o == SF_CONV_FWD)
        cs = cudnnGetConvolutionForwardWorkspaceSize(c->cudnn, op->xd, e->wd[l], op->cd, op->yd,
                                                     (cudnnConvolutionFwdAlgo_t)op->algo, &op->ws);
    else if (o == SF_CONV_BWD_DATA)
        cs = cudnnGetConvolutionBackwardDataWorkspaceSize(c->cudnn, e->wd[l], op->yd, op->cd, op->xd,
                                                          (cudnnConvolutionBwdDataAlgo_t)op->algo, &op->ws);
    else
        cs = cudnnGetConvolutionBackwardFilterWorkspaceSize(c->cudnn, op->xd, op->yd, op->cd, e->wd[l],
                                                            (cudnnConvolutionBwdFilterAlgo_t)op->algo, &op->ws);
    return cs == CUDNN_STATUS_SUCCESS ? SF_OK : sf_fail(SF_ERR_FORMAT, "cuDNN cannot run it here: %s",
                                                        cudnnGetErrorString(cs));
}

/* Op o of e on the recorded path p (algorithm, math type and chunk for cuDNN's paths, the chunk the GEMM path
 * would take), with the workspace it needs, which must fit the cap as a measurement's choice does. */
static sf_status replay_op(sf_cuda_ctx *c, sf_cuda_conv_entry *e, int o, int p, int algo, int math, long long chunk)
{
    static const int algo_count[SF_CONV_OPS] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
    const sf_conv_shape *sh = &e->sh;
    const bool engine_nhwc = sh->x_nhwc || sh->y_nhwc;
    e->path[o] = p;
    if (p == SF_CONV_PATH_SPLIT) {
        if (!sh->x_binary || engine_nhwc || e->tf32_parts || c->prec != SF_PRECISION_FP32 || c->act != SF_SCALAR_F32)
            return sf_fail(SF_ERR_FORMAT, "the split path needs an fp32 convolution of spikes on NCHW tensors");
        return e->split_entries[0] >= 0 ? SF_OK : add_split_entries(c, e);
    }
    if (p == SF_CONV_PATH_GEMM) {
        if (!e->tf32_parts && !sh->x_nhwc)
            e->gemm_chunk = sf_cuda_conv_gemm_chunk(sh, c->conv_ws_cap, sf_scalar_size(c->act));
        if (e->gemm_chunk == 0 || e->gemm_chunk != chunk)
            return sf_fail(SF_ERR_FORMAT, "im2col + GEMM in chunks of %lld images, where this workspace cap gives %lld",
                           chunk, (long long)e->gemm_chunk);
        return SF_OK;
    }
    if (p != SF_CONV_PATH_NCHW && p != SF_CONV_PATH_NHWC) return sf_fail(SF_ERR_FORMAT, "path %d is none of 0-3", p);
    if (p == SF_CONV_PATH_NCHW && engine_nhwc)
        return sf_fail(SF_ERR_FORMAT, "cuDNN on NCHW, where the engine keeps a side NHWC");
    if (algo < 0 || algo >= algo_count[o] || math < CUDNN_DEFAULT_MATH || math > CUDNN_FMA_MATH || chunk < 1 ||
        sh->n % chunk)
        return sf_fail(SF_ERR_FORMAT, "algorithm %d, math %d or chunk %lld out of range", algo, math, chunk);
    sf_cuda_conv_op *op = &e->op[p][o];
    const cudnnDataType_t dt = sf_cudnn_type(c->act);
    op->algo = algo;
    op->math = (cudnnMathType_t)math;
    op->chunk = chunk;
    SF_TRY(set_op_descs(op, sh, p, dt, chunk));
    if (!op->cd) SF_TRY(conv_desc(sh, op->math, &op->cd));
    SF_TRY(cudnn_ws(c, e, p, o, op));
    nhwc_bufs b;
    const size_t copies = p == SF_CONV_NHWC ? nhwc_place(sh, chunk, sf_scalar_size(c->act), nhwc_copies(sh, o), NULL, &b)
                                            : 0;
    if (op->ws + copies > c->conv_ws_cap)
        return sf_fail(SF_ERR_FORMAT, "it needs %zu MiB of workspace, over conv_workspace_mib (%zu MiB)",
                       (op->ws + copies) >> 20, c->conv_ws_cap >> 20);
    return SF_OK;
}

/* The entry a line of conv_choices describes, built without measuring. */
static sf_status replay(sf_cuda_ctx *c, const char *text, sf_cuda_conv_entry *e)
{
    memset(e, 0, sizeof *e);
    sf_conv_shape sh;
    memset(&sh, 0, sizeof sh);
    int xn, yn, xb, parts, p[SF_CONV_OPS], algo[SF_CONV_OPS], math[SF_CONV_OPS], end = 0;
    long long n, chunk[SF_CONV_OPS];
    if (sscanf(text, "conv %lld %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %lld %d %d %d %lld %d %d %d %lld%n", &n,
               &sh.cin, &sh.h, &sh.w, &sh.cout, &sh.k, &sh.stride, &sh.pad, &sh.oh, &sh.ow, &xn, &yn, &xb, &parts,
               &p[0], &algo[0], &math[0], &chunk[0], &p[1], &algo[1], &math[1], &chunk[1], &p[2], &algo[2], &math[2],
               &chunk[2], &end) != 26 ||
        text[end + strspn(text + end, " \n")] || (unsigned)xn > 1 || (unsigned)yn > 1 || (unsigned)xb > 1 ||
        (unsigned)parts > 1)
        return sf_fail(SF_ERR_FORMAT, "expected 'conv' and 26 numbers (see conv.cu), got '%.80s'", text);
    sh.n = n;
    sh.x_nhwc = xn, sh.y_nhwc = yn, sh.x_binary = xb;
    e->tf32_parts = parts;
    e->split_entries[0] = e->split_entries[1] = -1;
    e->recorded = true;
    SF_TRY(setup_descriptors(c, &sh, e)); /* checks the shape */
    for (int o = 0; o < SF_CONV_OPS; o++) SF_TRY(replay_op(c, e, o, p[o], algo[o], math[o], chunk[o]));
    return take_paths(c, e);
}

sf_status sf_cuda_op_conv_set_choice(sf_backend *be, const char *text)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    sf_cuda_conv_entry e;
    sf_status s = replay(c, text, &e);
    if (s != SF_OK) {
        entry_destroy(&e);
        return sf_fail_context(s, "a recorded convolution choice: ");
    }
    int i = 0; /* the entry it replaces, else a new one (the cache may have grown by its split path's entries) */
    while (i < c->n_convs && !(sf_conv_shape_equal(&c->convs[i].sh, &e.sh) && c->convs[i].tf32_parts == e.tf32_parts))
        i++;
    if (i == c->n_convs && c->n_convs == c->cap_convs) {
        const int cap = c->cap_convs ? 2 * c->cap_convs : 16;
        sf_cuda_conv_entry *grown = (sf_cuda_conv_entry *)realloc(c->convs, sizeof *grown * (size_t)cap);
        if (!grown) {
            entry_destroy(&e);
            return sf_fail(SF_ERR_NOMEM, "conv algorithm cache: out of host memory");
        }
        c->convs = grown;
        c->cap_convs = cap;
    }
    if (i < c->n_convs) entry_destroy(&c->convs[i]);
    else c->n_convs++;
    c->convs[i] = e;
    return SF_OK;
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

/* y[r][co] += b[co] for the rows r (image, pixel) of an NHWC output of n elements: V consecutive elements, of V
 * consecutive channels (C % V == 0), per thread and step; channel arithmetic in 32 bits where n fits. */
template <class T, int V> __global__ void bias_add_nhwc_kernel(int64_t n, int32_t C, const float *b, T *y)
{
    SF_CUDA_GRID_STRIDE(g, n / V)
    {
        const int64_t i = g * V;
        const int32_t c0 = n <= UINT32_MAX ? (int32_t)((uint32_t)i % (uint32_t)C) : (int32_t)(i % C);
        float v[V];
        sf_ld<V, true>(y + i, v);
#pragma unroll
        for (int j = 0; j < V; j++) v[j] += b[c0 + j];
        sf_st<V>(y + i, v);
    }
}

/* db[co] = Σ over images and pixels of dy[img][co][p] (reduce.cuh: fixed order, double sums); an NHWC dy is
 * [img·p][co][1] to the reduction. */
template <class T> struct BiasGradF {
    const T *dy;
    float *db;
    __device__ void term(int64_t i, int32_t, double *a, double *) const { *a += sf_widen(dy[i]); }
    __device__ void finish(int32_t c, double a, double, double) const { db[c] = (float)a; }
};

static sf_status bias_add(sf_cuda_ctx *c, const sf_conv_shape *sh, const float *b, void *y)
{
    const int64_t planes = sh->n * sh->cout, n = planes * sh->oh * sh->ow;
    const int32_t hw = sh->oh * sh->ow, threads = hw >= 256 ? 256 : (hw + 31) / 32 * 32;
    const unsigned blocks = (unsigned)(planes < (1 << 30) ? planes : (1 << 30));
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        const bool v4 = sh->cout % 4 == 0 && (uintptr_t)y % (4 * sizeof(T)) == 0;
        if (sh->y_nhwc && v4)
            bias_add_nhwc_kernel<T, 4><<<sf_cuda_blocks(n / 4, 256), 256, 0, c->stream>>>(n, sh->cout, b, (T *)y);
        else if (sh->y_nhwc)
            bias_add_nhwc_kernel<T, 1><<<sf_cuda_blocks(n, 256), 256, 0, c->stream>>>(n, sh->cout, b, (T *)y);
        else
            bias_add_kernel<T><<<blocks, threads, 0, c->stream>>>(planes, sh->cout, hw, b, (T *)y);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

static sf_status bias_grad(sf_cuda_ctx *c, const sf_conv_shape *sh, const void *dy, float *db)
{
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        const int64_t hw = (int64_t)sh->oh * sh->ow;
        return sf_cuda_channel_reduce(c, BiasGradF<T>{(const T *)dy, db}, sh->y_nhwc ? sh->n * hw : sh->n, sh->cout,
                                      sh->y_nhwc ? 1 : hw);
    });
}

/* Element i of a tensor in the activation type. */
#define AT(p, elems) ((char *)(p) + (size_t)(elems) * es)

/* dst (+)= src between two descriptions of one tensor: a layout copy (cudnnTransformTensor: faster than a tiled
 * transpose of our own, docs/notebook/perf.md). */
static sf_status reorder(sf_cuda_ctx *c, cudnnTensorDescriptor_t from, const void *src, cudnnTensorDescriptor_t to,
                         void *dst, bool add)
{
    float one = 1.0f, beta = add ? 1.0f : 0.0f;
    SF_CUDNN_CHECK(cudnnTransformTensor(c->cudnn, &one, from, src, &beta, to, dst));
    return SF_OK;
}

/* Zeros the `elems` elements of a copy at p whose padded channels (nhwc_channels) no reorder writes. */
static sf_status zero_padding(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, void *p, size_t elems)
{
    if (nhwc_channels(&e->sh) == e->sh.cin) return SF_OK;
    SF_CUDA_CHECK(cudaMemsetAsync(p, 0, elems * sf_scalar_size(c->act), c->stream));
    return SF_OK;
}

/* w (KCRS) as the NHWC path's filter (KRSC, padded channels zero). */
static sf_status filter_copy(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const void *w, void *to)
{
    const sf_conv_shape *sh = &e->sh;
    SF_TRY(zero_padding(c, e, to, (size_t)sh->cout * nhwc_channels(sh) * sh->k * sh->k));
    return reorder(c, e->wt[SF_CONV_NCHW], w, e->wt[SF_CONV_NHWC], to, false);
}

/* One chunk of NCHW x as op's NHWC copy (padded channels zero). */
static sf_status x_copy(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const sf_cuda_conv_op *op, const void *x, void *to)
{
    const sf_conv_shape *sh = &e->sh;
    SF_TRY(zero_padding(c, e, to, (size_t)op->chunk * nhwc_channels(sh) * sh->h * sh->w));
    return reorder(c, op->xn, x, op->xv, to, false);
}

/* y = conv(x, w) by cuDNN on NHWC, chunk by chunk, copying the sides the engine keeps NCHW (no bias). */
static sf_status nhwc_forward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const void *x, const void *w, void *y,
                              void *ws)
{
    const sf_conv_shape *sh = &e->sh;
    const sf_cuda_conv_op *op = &e->op[SF_CONV_NHWC][SF_CONV_FWD];
    const size_t es = sf_scalar_size(c->act);
    const int64_t xs = op->chunk * sh->cin * sh->h * sh->w, ys = op->chunk * sh->cout * sh->oh * sh->ow;
    nhwc_bufs b;
    nhwc_layout(e, es, 1u << SF_CONV_FWD, ws, &b);
    float one = 1.0f, zero = 0.0f;
    SF_TRY(filter_copy(c, e, w, b.w));
    for (int64_t i = 0; i < sh->n / op->chunk; i++) {
        const void *xi = AT(x, i * xs);
        void *yi = AT(y, i * ys);
        if (b.x) {
            SF_TRY(x_copy(c, e, op, xi, b.x));
            xi = b.x;
        }
        SF_CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, op->xd, xi, e->wd[SF_CONV_NHWC], b.w, op->cd,
                                               (cudnnConvolutionFwdAlgo_t)op->algo, ws, op->ws, &zero, op->yd,
                                               b.y ? b.y : yi));
        if (b.y) SF_TRY(reorder(c, op->yd, b.y, op->yn, yi, false));
    }
    return SF_OK;
}

/* dw (fp32 KCRS, if not NULL) and dx (if not NULL) by cuDNN on NHWC, chunk by chunk, each chunk of dy copied once for
 * both; dw reads a chunk's x before dx is written, so dx may be x. add: dw and dx add to what they hold. */
static sf_status nhwc_backward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const void *x, const void *w,
                               const void *dy, void *dx, float *dw, void *ws, bool add)
{
    const sf_conv_shape *sh = &e->sh;
    const sf_cuda_conv_op *d = &e->op[SF_CONV_NHWC][SF_CONV_BWD_DATA], *f = &e->op[SF_CONV_NHWC][SF_CONV_BWD_FILTER];
    const sf_cuda_conv_op *rows = dw ? f : d; /* the chunk and its descriptors */
    const size_t es = sf_scalar_size(c->act);
    const int64_t chunk = rows->chunk, xs = chunk * sh->cin * sh->h * sh->w, ys = chunk * sh->cout * sh->oh * sh->ow,
                  nw = (int64_t)sh->cout * sh->cin * sh->k * sh->k;
    nhwc_bufs b;
    nhwc_layout(e, es, (dx ? 1u << SF_CONV_BWD_DATA : 0) | (dw ? 1u << SF_CONV_BWD_FILTER : 0), ws, &b);
    const bool narrow_dw = c->act != SF_SCALAR_F32;
    void *dw_kcrs = dw; /* a chunk's weight gradient back in KCRS, in the act type (widened into dw) */
    if (dw && narrow_dw) SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_CONV_DW, (size_t)nw * es, &dw_kcrs));
    float one = 1.0f, zero = 0.0f;
    if (dx) SF_TRY(filter_copy(c, e, w, b.w));
    for (int64_t i = 0; i < sh->n / chunk; i++) {
        const void *dyi = AT(dy, i * ys), *xi = AT(x, i * xs);
        if (b.y) {
            SF_TRY(reorder(c, rows->yn, dyi, rows->yd, b.y, false));
            dyi = b.y;
        }
        if (dw) {
            if (b.x) {
                SF_TRY(x_copy(c, e, f, xi, b.x));
                xi = b.x;
            }
            SF_CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, f->xd, xi, f->yd, dyi, f->cd,
                                                          (cudnnConvolutionBwdFilterAlgo_t)f->algo, ws, f->ws, &zero,
                                                          e->wd[SF_CONV_NHWC], b.dw));
            SF_TRY(reorder(c, e->wt[SF_CONV_NHWC], b.dw, e->wt[SF_CONV_NCHW], dw_kcrs, !narrow_dw && (i > 0 || add)));
            if (narrow_dw) SF_TRY(sf_cuda_widen(c, nw, dw_kcrs, dw, i > 0 || add));
        }
        if (dx) {
            void *dxi = AT(dx, i * xs);
            SF_CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->wd[SF_CONV_NHWC], b.w, d->yd, dyi, d->cd,
                                                        (cudnnConvolutionBwdDataAlgo_t)d->algo, ws, d->ws,
                                                        add && !b.dx ? &one : &zero, d->xd, b.dx ? b.dx : dxi));
            if (b.dx) SF_TRY(reorder(c, d->xv, b.dx, d->xn, dxi, add));
        }
    }
    return SF_OK;
}

/* y = conv(x, w) by cuDNN on the NCHW tensors (no bias). */
static sf_status nchw_forward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const void *x, const void *w, void *y,
                              void *ws)
{
    const sf_conv_shape *sh = &e->sh;
    const sf_cuda_conv_op *op = &e->op[SF_CONV_NCHW][SF_CONV_FWD];
    const size_t es = sf_scalar_size(c->act);
    const int64_t xs = op->chunk * sh->cin * sh->h * sh->w, ys = op->chunk * sh->cout * sh->oh * sh->ow;
    float one = 1.0f, zero = 0.0f;
    for (int64_t i = 0; i < sh->n / op->chunk; i++)
        SF_CUDNN_CHECK(cudnnConvolutionForward(c->cudnn, &one, op->xd, AT(x, i * xs), e->wd[SF_CONV_NCHW], w, op->cd,
                                               (cudnnConvolutionFwdAlgo_t)op->algo, ws, op->ws, &zero, op->yd,
                                               AT(y, i * ys)));
    return SF_OK;
}

sf_status sf_cuda_op_conv_forward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                  const float *b, float *y, void *ws)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    sf_cuda_conv_entry *e;
    SF_TRY(lookup(c, sh, &e));
    switch (e->path[SF_CONV_FWD]) {
    case SF_CONV_PATH_GEMM: /* it adds the bias to an NCHW y itself */
        SF_TRY(sf_cuda_conv_gemm_forward(c, sh, e->gemm_chunk, x, w, sh->y_nhwc ? NULL : b, y, ws));
        if (!sh->y_nhwc) return SF_OK;
        break;
    case SF_CONV_PATH_NHWC: SF_TRY(nhwc_forward(c, e, x, w, y, ws)); break;
    case SF_CONV_PATH_SPLIT: SF_TRY(split_forward(c, e, x, w, y, ws)); break;
    default: SF_TRY(nchw_forward(c, e, x, w, y, ws));
    }
    return b ? bias_add(c, sh, b, y) : SF_OK;
}

/* The backward ops that run through cuDNN on the NCHW tensors: dw (if not NULL, summed over chunks; under a 16-bit
 * act type each chunk's comes in that type and is widened into dw) and dx (if not NULL). */
static sf_status nchw_backward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const void *x, const void *w,
                               const void *dy, void *dx, float *dw, void *ws)
{
    const sf_conv_shape *sh = &e->sh;
    const size_t es = sf_scalar_size(c->act);
    const bool narrow_dw = c->act != SF_SCALAR_F32;
    float one = 1.0f, zero = 0.0f;
    const int64_t img_x = (int64_t)sh->cin * sh->h * sh->w, img_y = (int64_t)sh->cout * sh->oh * sh->ow,
                  nw = (int64_t)sh->cout * sh->cin * sh->k * sh->k;
    const sf_cuda_conv_op *f = &e->op[SF_CONV_NCHW][SF_CONV_BWD_FILTER];
    void *dwt = dw; /* where cuDNN writes each chunk's weight gradient */
    if (dw && narrow_dw) SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_CONV_DW, (size_t)nw * es, &dwt));
    for (int64_t i = 0; dw && i < sh->n / f->chunk; i++) {
        SF_CUDNN_CHECK(cudnnConvolutionBackwardFilter(c->cudnn, &one, f->xd, AT(x, i * f->chunk * img_x), f->yd,
                                                      AT(dy, i * f->chunk * img_y), f->cd,
                                                      (cudnnConvolutionBwdFilterAlgo_t)f->algo, ws, f->ws,
                                                      i && !narrow_dw ? &one : &zero, e->wd[SF_CONV_NCHW], dwt));
        if (narrow_dw) SF_TRY(sf_cuda_widen(c, nw, dwt, dw, i > 0));
    }
    const sf_cuda_conv_op *d = &e->op[SF_CONV_NCHW][SF_CONV_BWD_DATA];
    for (int64_t i = 0; dx && i < sh->n / d->chunk; i++)
        SF_CUDNN_CHECK(cudnnConvolutionBackwardData(c->cudnn, &one, e->wd[SF_CONV_NCHW], w, d->yd,
                                                    AT(dy, i * d->chunk * img_y), d->cd,
                                                    (cudnnConvolutionBwdDataAlgo_t)d->algo, ws, d->ws, &zero, d->xd,
                                                    AT(dx, i * d->chunk * img_x)));
    return SF_OK;
}

/* One or both backward ops (dw, dx where not NULL) on one path. */
static sf_status backward_on(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, int path, const float *x, const float *w,
                             const float *dy, float *dx, float *dw, void *ws)
{
    switch (path) {
    case SF_CONV_PATH_GEMM: return sf_cuda_conv_gemm_backward(c, &e->sh, e->gemm_chunk, x, w, dy, dx, dw, ws);
    case SF_CONV_PATH_NHWC: return nhwc_backward(c, e, x, w, dy, dx, dw, ws, false);
    case SF_CONV_PATH_SPLIT: return split_backward(c, e, x, w, dy, dx, dw, ws);
    default: return nchw_backward(c, e, x, w, dy, dx, dw, ws);
    }
}

/* The split path's workspace for op: cuDNN's (the larger of the op's entries'), W's stacked parts or stacked dW (2·nw
 * floats; dx 3·nw: W_hi, [W_lo; W_hi]), a chunk's stacks of y or dy (2 groups; dx 3: dy_hi, [dy_hi; dy_lo]); with ws,
 * *w and *y point into it. Returns its bytes. */
static size_t split_layout(const sf_cuda_ctx *c, const sf_cuda_conv_entry *e, int op, void *ws, float **w, float **y)
{
    const sf_cuda_conv_entry *s2 = &c->convs[e->split_entries[0]], *s1 = &c->convs[e->split_entries[1]];
    const size_t ws2 = path_ws(c, s2, s2->path[op], op),
                 ws1 = op == SF_CONV_BWD_DATA ? path_ws(c, s1, s1->path[op], op) : 0;
    const size_t groups = op == SF_CONV_BWD_DATA ? 3 : 2, cudnn = ws1 > ws2 ? ws1 : ws2,
                 nw = (size_t)e->sh.cout * e->sh.cin * e->sh.k * e->sh.k,
                 ny = (size_t)s2->sh.n * e->sh.cout * e->sh.oh * e->sh.ow;
    const size_t at_w = align256(cudnn), at_y = at_w + align256(groups * nw * sizeof(float));
    if (ws) {
        *w = (float *)((char *)ws + at_w);
        *y = (float *)((char *)ws + at_y);
    }
    return at_y + groups * ny * sizeof(float);
}

/* y = fold(conv(x, [W_hi; W_lo])) chunk by chunk (the entries of stacked parts keep y and dy NHWC: cuDNN's NHWC
 * path, copying x). */
static sf_status split_forward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const float *x, const float *w, float *y,
                               void *ws)
{
    const sf_cuda_conv_entry *s = &c->convs[e->split_entries[0]];
    const sf_conv_shape *sh = &e->sh;
    const int32_t pixels = sh->oh * sh->ow;
    const int64_t nw = (int64_t)sh->cout * sh->cin * sh->k * sh->k, nb = s->sh.n,
                  img_x = (int64_t)sh->cin * sh->h * sh->w, img_y = (int64_t)sh->cout * pixels;
    float *w2 = NULL, *y2 = NULL;
    split_layout(c, e, SF_CONV_FWD, ws, &w2, &y2);
    SF_TRY(sf_cuda_tf32_stack(c, 1, nw, w, 2, 2u, w2));
    for (int64_t i0 = 0; i0 < sh->n; i0 += nb) {
        SF_TRY(nhwc_forward(c, s, x + i0 * img_x, w2, y2, ws));
        SF_TRY(sf_cuda_fold_nchw(c, nb, sh->cout, pixels, 2, y2, y + i0 * img_y));
    }
    return SF_OK;
}

/* dw = fold(Σ over chunks of x ⋆ [dy_hi; dy_lo]), then (as dx may be x) dx = [dy_hi; dy_lo] ·ᵀ [W_lo; W_hi] +
 * dy_hi ·ᵀ W_hi chunk by chunk, each where not NULL. */
static sf_status split_backward(sf_cuda_ctx *c, const sf_cuda_conv_entry *e, const float *x, const float *w,
                                const float *dy, float *dx, float *dw, void *ws)
{
    const sf_cuda_conv_entry *s2 = &c->convs[e->split_entries[0]], *s1 = &c->convs[e->split_entries[1]];
    const sf_conv_shape *sh = &e->sh;
    const int32_t pixels = sh->oh * sh->ow;
    const int64_t nw = (int64_t)sh->cout * sh->cin * sh->k * sh->k, nb = s2->sh.n,
                  img_x = (int64_t)sh->cin * sh->h * sh->w, img_y = (int64_t)sh->cout * pixels;
    float *wp = NULL, *dyp = NULL;
    if (dw) {
        split_layout(c, e, SF_CONV_BWD_FILTER, ws, &wp, &dyp);
        for (int64_t i0 = 0; i0 < sh->n; i0 += nb) {
            SF_TRY(sf_cuda_tf32_stack_nhwc(c, nb, sh->cout, pixels, dy + i0 * img_y, 2, 2u, dyp, NULL));
            SF_TRY(nhwc_backward(c, s2, x + i0 * img_x, NULL, dyp, NULL, wp, ws, i0 > 0));
        }
        SF_TRY(sf_cuda_fold(c, 1, nw, 2, wp, dw));
    }
    if (dx) {
        split_layout(c, e, SF_CONV_BWD_DATA, ws, &wp, &dyp);
        float *w_small = wp + nw, *dy_small = dyp + nb * img_y;
        SF_TRY(sf_cuda_tf32_stack(c, 1, nw, w, 3, 2u, wp)); /* [W_hi; W_lo; W_hi]: W_hi, then w_small */
        for (int64_t i0 = 0; i0 < sh->n; i0 += nb) {
            float *dxi = dx + i0 * img_x;
            SF_TRY(sf_cuda_tf32_stack_nhwc(c, nb, sh->cout, pixels, dy + i0 * img_y, 2, 2u, dy_small, dyp));
            SF_TRY(nhwc_backward(c, s2, x + i0 * img_x, w_small, dy_small, dxi, NULL, ws, false));
            SF_TRY(nhwc_backward(c, s1, x + i0 * img_x, wp, dyp, dxi, NULL, ws, true));
        }
    }
    return SF_OK;
}

sf_status sf_cuda_op_conv_backward(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                                   const float *dy, float *dx, float *dw, float *db, void *ws)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    sf_cuda_conv_entry *e;
    SF_TRY(lookup(c, sh, &e));
    const int pd = e->path[SF_CONV_BWD_DATA], pf = e->path[SF_CONV_BWD_FILTER];
    /* One pass for both where they share a path (and, on NHWC copies, a chunk). Otherwise dx may be x (backend.h):
     * dw, which reads x, runs first, then dx. */
    const bool together = pd == pf && (pd != SF_CONV_PATH_NHWC || e->op[SF_CONV_NHWC][SF_CONV_BWD_DATA].chunk ==
                                                                       e->op[SF_CONV_NHWC][SF_CONV_BWD_FILTER].chunk);
    if (together) {
        SF_TRY(backward_on(c, e, pd, x, w, dy, dx, dw, ws));
    } else {
        if (dw) SF_TRY(backward_on(c, e, pf, x, w, dy, NULL, dw, ws));
        if (dx) SF_TRY(backward_on(c, e, pd, x, w, dy, dx, NULL, ws));
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
    static const char *const paths[] = {"nchw", "nhwc", "im2col_gemm", "split"};
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, __VA_ARGS__)
    PUT("conv algorithms (%s, workspace cap %zu MiB%s): shape | op: path, its algo x chunks, ws MiB | cuDNN on NCHW: "
        "algo x chunks, ms (Find) | the fastest cuDNN NCHW allowed on the whole batch: algo, ms, ws MiB | cuDNN on NHWC "
        "copies: algo x chunks, ms (events, copies included) | im2col+gemm x chunks ms | split path x chunks ms "
        "(events, parts included; 0: not measured); a shape marked 'spikes' has spike inputs, one marked 'parts' runs "
        "the TF32 parts of such a shape\n",
        sf_precision_name(c->prec), c->conv_ws_cap >> 20,
        c->deterministic ? ", deterministic: cuDNN's heuristic rank, no times" : "");
    for (int i = 0; i < c->n_convs; i++) {
        const sf_cuda_conv_entry *e = &c->convs[i];
        const sf_conv_shape *sh = &e->sh;
        const int64_t gc = e->gemm_chunk ? e->gemm_chunk : sh->n;
        for (int o = 0; o < SF_CONV_OPS; o++) {
            const sf_cuda_conv_op *a = &e->op[SF_CONV_NCHW][o], *h = &e->op[SF_CONV_NHWC][o];
            const int p = e->path[o];
            const sf_cuda_conv_op *run = p == SF_CONV_PATH_GEMM || p == SF_CONV_PATH_SPLIT ? NULL : &e->op[p][o];
            const int64_t sc = e->split_entries[0] >= 0 ? sh->n / c->convs[e->split_entries[0]].sh.n : 0;
            const size_t ws = path_ws(c, e, p, o);
            const int64_t chunks = run ? sh->n / run->chunk : p == SF_CONV_PATH_SPLIT ? sc : (sh->n + gc - 1) / gc;
            PUT("n=%lld %d->%d %dx%d s%d%s%s%s | %-10s %-11s %-22s x%lld %6.0f | nchw %-22s x%lld %7.3f | %-22s %7.3f "
                "%6.0f | nhwc %-22s x%lld %7.3f | im2col+gemm x%lld %7.3f | split x%lld %7.3f\n",
                (long long)sh->n, sh->cin, sh->cout, sh->h, sh->w, sh->stride,
                e->tf32_parts ? " parts" : sh->x_binary ? " spikes" : "", sh->x_nhwc ? " x:nhwc" : "",
                sh->y_nhwc ? " y:nhwc" : "", names[o], paths[p],
                run ? algo_name(o, run->algo) : "-", (long long)chunks,
                ws / 1048576.0, algo_name(o, a->algo), (long long)(a->chunk ? sh->n / a->chunk : 0), a->ms,
                algo_name(o, a->fastest_algo), a->fastest_ms, a->fastest_ws / 1048576.0,
                h->chunk ? algo_name(o, h->algo) : "-", (long long)(h->chunk ? sh->n / h->chunk : 0), e->nhwc_ms[o],
                (long long)((sh->n + gc - 1) / gc), e->gemm_ms[o], (long long)sc, e->split_ms[o]);
        }
    }
#undef PUT
    return n;
}
