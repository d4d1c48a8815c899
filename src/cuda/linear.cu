/* linear.cu — the fully connected layer through cuBLAS, and the GEMM every GEMM-based op of the backend calls.
 * Row-major [rows, features] is column-major [features, rows] to cuBLAS: y = x·Wᵀ is yᶜ = Wᶜᵀ·xᶜ. Operands in the
 * activation type, dW in fp32 (the master gradient), fp32 accumulation; TF32 only under tf32 (the handle's math
 * mode); bf16 and fp16 on the tensor cores. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

#include <limits.h>

/* A thread per column, its value kept in a register, over every gridDim.y-th row: no 64-bit modulo per element. */
template <class T> __global__ void bias_fill_kernel(int64_t rows, int32_t out, const float *b, T *y)
{
    const int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= out) return;
    const T v = sf_narrow<T>(b[j]);
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) y[r * out + j] = v;
}

/* db[j] = Σ_r dy[r, j] in two deterministic steps: blocks of 32 columns × 8 row-lanes sum a chunk of rows each
 * (coalesced over j) into part[p, j]; then one thread per column adds the P partials in order. */
template <class T>
__global__ void column_partials_kernel(int64_t rows, int32_t out, int64_t chunk, const T *dy, float *part)
{
    __shared__ float acc[8][33];
    int32_t j = blockIdx.x * 32 + threadIdx.x;
    int64_t r0 = blockIdx.y * chunk, r1 = min(rows, r0 + chunk);
    float s = 0.0f;
    if (j < out)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) s += sf_widen(dy[r * out + j]);
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && j < out) {
        for (int y = 1; y < 8; y++) s += acc[y][threadIdx.x];
        part[(int64_t)blockIdx.y * out + j] = s;
    }
}

__global__ void column_finish_kernel(int32_t out, int P, const float *part, float *db)
{
    int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= out) return;
    float s = 0.0f;
    for (int p = 0; p < P; p++) s += part[(int64_t)p * out + j];
    db[j] = s;
}

template <class T> static sf_status column_sums(sf_cuda_ctx *c, int64_t rows, int32_t out, const T *dy, float *db)
{
    int64_t colblocks = (out + 31) / 32;
    int64_t P = (8 * (int64_t)c->num_sms + colblocks - 1) / colblocks;
    if (P > (rows + 63) / 64) P = (rows + 63) / 64;
    if (P < 1) P = 1;
    if (P > 65535) P = 65535;
    int64_t chunk = (rows + P - 1) / P;
    void *part;
    SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_PARTIALS, sizeof(float) * (size_t)P * (size_t)out, &part));
    column_partials_kernel<T><<<dim3((unsigned)colblocks, (unsigned)P), dim3(32, 8), 0, c->stream>>>(rows, out, chunk,
                                                                                                     dy, (float *)part);
    SF_CUDA_LAUNCHED();
    column_finish_kernel<<<sf_cuda_blocks(out, 128), 128, 0, c->stream>>>(out, (int)P, (const float *)part, db);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

sf_status sf_cuda_column_sums(sf_cuda_ctx *c, int64_t rows, int32_t out, const float *dy, float *db)
{
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        return column_sums<T>(c, rows, out, (const T *)dy, db);
    });
}

static sf_status check_dims(int64_t rows, int32_t in, int32_t out)
{
    if (rows < 0 || rows > INT_MAX || in < 0 || out < 0)
        return sf_fail(SF_ERR_INVALID, "linear: rows = %lld, in = %d, out = %d outside cuBLAS's int range",
                       (long long)rows, in, out);
    return SF_OK;
}

sf_status sf_cuda_bias_fill(sf_cuda_ctx *c, int64_t rows, int32_t out, const float *b, float *y)
{
    if (rows <= 0 || out <= 0) return SF_OK;
    const dim3 grid = sf_cuda_row_grid(rows, out, 256);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        bias_fill_kernel<T><<<grid, 256, 0, c->stream>>>(rows, out, b, (T *)y);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

sf_status sf_cuda_gemm(sf_cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A,
                       int lda, const void *B, int ldb, float beta, void *C, int ldc, bool c_float)
{
    const float one = 1.0f;
    if (c->act == SF_SCALAR_F32) {
        SF_CUBLAS_CHECK(cublasSgemm(c->cublas, ta, tb, m, n, k, &one, (const float *)A, lda, (const float *)B, ldb,
                                    &beta, (float *)C, ldc));
        return SF_OK;
    }
    const cudaDataType_t t = sf_cuda_blas_type(c->act);
    SF_CUBLAS_CHECK(cublasGemmEx(c->cublas, ta, tb, m, n, k, &one, A, t, lda, B, t, ldb, &beta, C,
                                 c_float ? CUDA_R_32F : t, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return SF_OK;
}

sf_status sf_cuda_op_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                    const float *w, const float *b, float *y)
{
    SF_TRY(check_dims(rows, in, out));
    if (rows == 0 || out == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    float beta = 0.0f;
    if (b) {
        SF_TRY(sf_cuda_bias_fill(c, rows, out, b, y));
        beta = 1.0f;
    }
    if (in == 0) return b ? SF_OK : be->zero(be, y, (size_t)(rows * out) * sf_scalar_size(c->act));
    return sf_cuda_gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)rows, in, w, in, x, in, beta, y, out, false);
}

/* dxᶜ[in, rows] = Wᶜ[in, out]·dyᶜ[out, rows] */
static sf_status input_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *w, const float *dy,
                            float *dx)
{
    return sf_cuda_gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, in, (int)rows, out, w, in, dy, out, 0.0f, dx, in, false);
}

sf_status sf_cuda_op_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                     const float *w, const float *dy, float *dx, float *dw, float *db)
{
    SF_TRY(check_dims(rows, in, out));
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (rows == 0 || out == 0 || in == 0) { /* degenerate: gradients are zero */
        if (dw) SF_TRY(sf_cuda_zero_f32(c, dw, (int64_t)out * in));
        if (db) SF_TRY(sf_cuda_zero_f32(c, db, out));
        if (dx) SF_TRY(sf_cuda_zero_act(c, dx, rows * in));
        return SF_OK;
    }
    if (dx) SF_TRY(input_grad(c, rows, in, out, w, dy, dx));
    /* dWᶜ[in, out] = xᶜ[in, rows]·dyᶜ[out, rows]ᵀ, in fp32 */
    SF_TRY(sf_cuda_gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)rows, x, in, dy, out, 0.0f, dw, in, true));
    return db ? sf_cuda_column_sums(c, rows, out, dy, db) : SF_OK;
}

sf_status sf_cuda_linear_input_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *w,
                                    const float *dy, float *dx)
{
    SF_TRY(check_dims(rows, in, out));
    if (rows == 0 || in == 0) return SF_OK;
    if (out == 0) return sf_cuda_zero_act(c, dx, rows * in);
    return input_grad(c, rows, in, out, w, dy, dx);
}
