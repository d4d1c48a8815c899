/* bench_spike_linear.c — the event-driven linear layer against cuBLAS (dense) and cuSPARSE's SpMM on the same spikes,
 * at workload W4's shapes (T·B = 6400 rows: 700→1472, 1472→1472, 1472→20) and densities from 1% to 100%: forward ms
 * of cuBLAS SGEMM, of spikefuse's kernel (compact lists in, Wᵀ made per call) and of cuSPARSE SpMM (CSR × row-major
 * Wᵀ, its default and CSR_ALG2 algorithms, the better one), and the weight gradient of cuBLAS and of spikefuse's
 * per-input row lists; CUDA events, median of 20 after 3 warm-ups. cuSPARSE's CSR is built on the host and its
 * Wᵀ given ready (neither timed), which favours it; it also needs the number of spikes on the host, which a training
 * step on the GPU does not have without a synchronisation. The column "fastest" says which forward won.
 * Usage: bench_spike_linear [rows (6400)]. */
#include "cuda/cuda_backend.h"
#include "gpu_bench.h"

#include <cusparse.h>

#define SP_CHECK(call)                                                                                                 \
    do {                                                                                                               \
        cusparseStatus_t e_ = (call);                                                                                  \
        if (e_ != CUSPARSE_STATUS_SUCCESS) {                                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cusparseGetErrorString(e_));               \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

struct op {
    sf_backend *be;
    int64_t rows;
    int32_t in, out;
    float *x, *w, *y, *dy, *dw;
    sf_spikes c;
    void *ws;
    /* cuSPARSE */
    cusparseHandle_t sp;
    cusparseSpMatDescr_t a;
    cusparseDnMatDescr_t b, cm;
    cusparseSpMMAlg_t alg;
    void *buf;
};

static void dense_fwd(void *p)
{
    struct op *o = p;
    GB_OK(o->be->linear_forward(o->be, o->rows, o->in, o->out, o->x, o->w, NULL, o->y));
}
static void sparse_fwd(void *p)
{
    struct op *o = p;
    GB_OK(o->be->spike_linear_forward(o->be, o->rows, o->in, o->out, &o->c, o->w, NULL, o->y, o->ws));
}
static void cusparse_fwd(void *p)
{
    struct op *o = p;
    const float one = 1.0f, zero = 0.0f;
    SP_CHECK(cusparseSpMM(o->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, o->a, o->b,
                          &zero, o->cm, CUDA_R_32F, o->alg, o->buf));
}
static void dense_dw(void *p)
{
    struct op *o = p;
    GB_OK(o->be->linear_backward(o->be, o->rows, o->in, o->out, o->x, o->w, o->dy, NULL, o->dw, NULL));
}
static void sparse_dw(void *p)
{
    struct op *o = p;
    GB_OK(o->be->spike_linear_backward(o->be, o->rows, o->in, o->out, o->c.bits, o->w, o->dy, NULL, NULL, o->dw, NULL,
                                       o->ws));
}

static void *dev(size_t bytes)
{
    void *p;
    GB_CHECK(cudaMalloc(&p, bytes ? bytes : 4));
    return p;
}

static void *up(const void *h, size_t bytes)
{
    void *p = dev(bytes);
    GB_CHECK(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
    return p;
}

/* cuSPARSE's forward time (the better of two algorithms) and its largest difference from spikefuse's y. */
static float time_cusparse(struct op *o, const float *hx, const float *hw, cudaStream_t st, float *maxdiff)
{
    const int64_t rows = o->rows;
    int32_t *rowptr = malloc(sizeof(int32_t) * (size_t)(rows + 1)), *col = malloc(sizeof(int32_t) * (size_t)(rows * o->in + 1));
    int64_t nnz = 0;
    for (int64_t r = 0; r < rows; r++) {
        rowptr[r] = (int32_t)nnz;
        for (int32_t i = 0; i < o->in; i++)
            if (hx[r * o->in + i] != 0.0f) col[nnz++] = i;
    }
    rowptr[rows] = (int32_t)nnz;
    float *ones = malloc(sizeof(float) * (size_t)(nnz + 1)), *wt = malloc(sizeof(float) * (size_t)o->in * o->out);
    for (int64_t k = 0; k < nnz; k++) ones[k] = 1.0f;
    for (int32_t j = 0; j < o->out; j++)
        for (int32_t i = 0; i < o->in; i++) wt[(int64_t)i * o->out + j] = hw[(int64_t)j * o->in + i];
    void *drow = up(rowptr, sizeof(int32_t) * (size_t)(rows + 1)), *dcol = up(col, sizeof(int32_t) * (size_t)(nnz + 1));
    void *dval = up(ones, sizeof(float) * (size_t)(nnz + 1)), *dwt = up(wt, sizeof(float) * (size_t)o->in * o->out);
    float *yc = dev(sizeof(float) * (size_t)(rows * o->out));
    SP_CHECK(cusparseCreateCsr(&o->a, rows, o->in, nnz, drow, dcol, dval, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                               CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    SP_CHECK(cusparseCreateDnMat(&o->b, o->in, o->out, o->out, dwt, CUDA_R_32F, CUSPARSE_ORDER_ROW));
    SP_CHECK(cusparseCreateDnMat(&o->cm, rows, o->out, o->out, yc, CUDA_R_32F, CUSPARSE_ORDER_ROW));
    const cusparseSpMMAlg_t algs[] = {CUSPARSE_SPMM_ALG_DEFAULT, CUSPARSE_SPMM_CSR_ALG2};
    float best = 1e30f;
    for (int k = 0; k < 2; k++) {
        const float one = 1.0f, zero = 0.0f;
        size_t bytes = 0;
        o->alg = algs[k];
        if (cusparseSpMM_bufferSize(o->sp, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &one,
                                    o->a, o->b, &zero, o->cm, CUDA_R_32F, o->alg, &bytes) != CUSPARSE_STATUS_SUCCESS)
            continue;
        o->buf = dev(bytes);
        float ms = gb_time_ms(cusparse_fwd, o, st, 3, 20);
        if (ms < best) best = ms;
        GB_CHECK(cudaFree(o->buf));
    }
    float *a = malloc(sizeof(float) * (size_t)(rows * o->out)), *b = malloc(sizeof(float) * (size_t)(rows * o->out));
    GB_CHECK(cudaStreamSynchronize(st));
    GB_CHECK(cudaMemcpy(a, yc, sizeof(float) * (size_t)(rows * o->out), cudaMemcpyDeviceToHost));
    GB_CHECK(cudaMemcpy(b, o->y, sizeof(float) * (size_t)(rows * o->out), cudaMemcpyDeviceToHost));
    *maxdiff = 0;
    for (int64_t i = 0; i < rows * o->out; i++) *maxdiff = fmaxf(*maxdiff, fabsf(a[i] - b[i]));
    cusparseDestroySpMat(o->a), cusparseDestroyDnMat(o->b), cusparseDestroyDnMat(o->cm);
    cudaFree(drow), cudaFree(dcol), cudaFree(dval), cudaFree(dwt), cudaFree(yc);
    free(rowptr), free(col), free(ones), free(wt), free(a), free(b);
    return best;
}

int main(int argc, char **argv)
{
    const int64_t rows = argc > 1 ? atoll(argv[1]) : 6400;
    char card[256];
    gb_card(card, sizeof card);
    sf_backend *be;
    GB_OK(sf_cuda_backend_create(0, SF_PRECISION_FP32, NULL, &be));
    cudaStream_t st = (cudaStream_t)sf_cuda_backend_stream(be);
    cusparseHandle_t sp;
    SP_CHECK(cusparseCreate(&sp));
    SP_CHECK(cusparseSetStream(sp, st));
    printf("event-driven linear  card: %s  rows %lld  (ms; cuSPARSE without building its CSR)\n", card, (long long)rows);
    printf("%5s %5s %7s | %8s %8s %8s %-9s | %8s %8s | %s\n", "in", "out", "density", "cuBLAS", "spikef.", "cuSPARSE",
           "fastest", "dW BLAS", "dW spkf", "max |y_cusparse - y|");
    const int32_t shapes[][2] = {{700, 1472}, {1472, 1472}, {1472, 20}};
    const float dens[] = {0.01f, 0.02f, 0.05f, 0.1f, 0.2f, 0.5f, 1.0f};
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 7; d++) {
            struct op o = {.be = be, .rows = rows, .in = shapes[s][0], .out = shapes[s][1], .sp = sp};
            const size_t nx = (size_t)(rows * o.in), ny = (size_t)(rows * o.out), nw = (size_t)o.in * o.out;
            float *hx = malloc(sizeof(float) * nx), *hw = malloc(sizeof(float) * nw);
            for (size_t i = 0; i < nx; i++) hx[i] = sf_uniform(3, 1, i) < dens[d] ? 1.0f : 0.0f;
            sf_bench_randn(hw, nw, 0.0f, 0.03f, 4);
            o.x = up(hx, sizeof(float) * nx);
            o.w = up(hw, sizeof(float) * nw);
            o.y = dev(sizeof(float) * ny);
            o.dy = gb_device_randn(ny, 0.0f, 1.0f, 5);
            o.dw = dev(sizeof(float) * nw);
            o.c = (sf_spikes){dev((size_t)rows * (size_t)sf_spike_words(o.in) * 4), dev(nx),
                              dev((size_t)rows * (size_t)sf_spike_segs(o.in) * 4)};
            o.ws = dev(be->spike_linear_workspace(be, rows, o.in, o.out));
            GB_OK(be->spikes_compact(be, rows, o.in, o.x, &o.c, NULL, NULL));
            float t_dense = gb_time_ms(dense_fwd, &o, st, 3, 20), t_ours = gb_time_ms(sparse_fwd, &o, st, 3, 20);
            float diff, t_sp = time_cusparse(&o, hx, hw, st, &diff);
            float t_dwd = gb_time_ms(dense_dw, &o, st, 3, 20), t_dws = gb_time_ms(sparse_dw, &o, st, 3, 20);
            const char *fastest = t_ours <= t_sp && t_ours <= t_dense ? "spikefuse" : t_sp <= t_dense ? "cuSPARSE" : "cuBLAS";
            printf("%5d %5d %6.0f%% | %8.3f %8.3f %8.3f %-9s | %8.3f %8.3f | %.2e\n", o.in, o.out, 100.0 * dens[d],
                   t_dense, t_ours, t_sp, fastest, t_dwd, t_dws, diff);
            fflush(stdout);
            cudaFree(o.x), cudaFree(o.w), cudaFree(o.y), cudaFree(o.dy), cudaFree(o.dw);
            cudaFree(o.c.bits), cudaFree(o.c.idx), cudaFree(o.c.cnt), cudaFree(o.ws);
            free(hx), free(hw);
        }
    cusparseDestroy(sp);
    sf_backend_free(be);
    return 0;
}
