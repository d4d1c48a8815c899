/* linear.c — fully connected layer on the CPU: y = x·Wᵀ + b through OpenBLAS sgemm, and its backward. */
#include "cpu/cpu_layers.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <cblas.h>

static sf_status check_linear(int64_t rows, int32_t in, int32_t out)
{
    if (rows < 0 || in <= 0 || out <= 0 || rows > SF_CPU_BLAS_MAX)
        return sf_fail(SF_ERR_INVALID, "linear: shape rows=%lld in=%d out=%d: need 0 <= rows <= %d, in, out >= 1",
                       (long long)rows, in, out, INT_MAX);
    return SF_OK;
}

sf_status sf_cpu_op_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                   const float *w, const float *b, float *y)
{
    SF_TRY(check_linear(rows, in, out));
    if (rows == 0) return SF_OK;
    float beta = 0.0f;
    if (b) {
        /* Fill every row with the bias and let sgemm accumulate onto it. */
#pragma omp parallel for schedule(static) if (rows * out >= SF_CPU_PARALLEL_MIN)
        for (int64_t r = 0; r < rows; r++)
            for (int32_t j = 0; j < out; j++) y[r * out + j] = b[j];
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, out, in, 1.0f, x, in, w, in, beta, y, out);
    return SF_OK;
}

/* db[j] = Σ_r dy[r, j]: each column is summed in double, in row order, by one thread, so the result does not
 * depend on the thread count. Columns are taken in blocks so a thread streams over contiguous row pieces. */
void sf_cpu_column_sums(int64_t rows, int32_t cols, const float *dy, float *db)
{
    enum { BLOCK = 64 };
    const int64_t nblocks = (cols + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static) if (rows * cols >= SF_CPU_PARALLEL_MIN)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        int32_t j0 = (int32_t)(blk * BLOCK), j1 = j0 + BLOCK < cols ? j0 + BLOCK : cols;
        double acc[BLOCK] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const float *row = dy + r * cols;
            for (int32_t j = j0; j < j1; j++) acc[j - j0] += row[j];
        }
        for (int32_t j = j0; j < j1; j++) db[j] = (float)acc[j - j0];
    }
}

sf_status sf_cpu_op_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                    const float *w, const float *dy, float *dx, float *dw, float *db)
{
    SF_TRY(check_linear(rows, in, out));
    if (rows == 0) {
        for (int64_t i = 0; i < (int64_t)out * in; i++) dw[i] = 0.0f;
        if (db)
            for (int32_t j = 0; j < out; j++) db[j] = 0.0f;
        return SF_OK;
    }
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx,
                    in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, (int)rows, 1.0f, dy, out, x, in, 0.0f, dw, in);
    if (db) sf_cpu_column_sums(rows, out, dy, db);
    return SF_OK;
}

/* The CPU's BLAS has no faster path for 0/1 operands: the binary linear ops are the dense ones. */
sf_status sf_cpu_op_binary_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                          const float *w, const float *b, float *y)
{
    return sf_cpu_op_linear_forward(be, rows, in, out, x, w, b, y);
}

sf_status sf_cpu_op_binary_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                           const float *w, const float *dy, float *dx, float *dw, float *db)
{
    return sf_cpu_op_linear_backward(be, rows, in, out, x, w, dy, dx, dw, db);
}
