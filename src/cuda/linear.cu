/* linear.cu — the fully connected layer through cuBLAS. Row-major [rows, features] tensors are column-major
 * [features, rows] to cuBLAS, so y = x·Wᵀ is yᶜ = Wᶜᵀ·xᶜ with W [out, in] seen as column-major [in, out].
 * fp32 with the default math mode (no TF32 tensor ops) unless the backend was created with tf32 (the handle's math
 * mode) or bf16 (operands rounded into bf16 scratch copies, cublasGemmEx with fp32 accumulation and fp32 output). */
#include "cuda/ops.cuh"

#include <limits.h>

__global__ void bias_fill_kernel(int64_t rows, int32_t out, const float *b, float *y)
{
    SF_CUDA_GRID_STRIDE(i, rows * out) y[i] = b[i % out];
}

/* db[j] = Σ_r dy[r, j] in two deterministic steps: blocks of 32 columns × 8 row-lanes sum a chunk of rows each
 * (coalesced over j) into part[p, j]; then one thread per column adds the P partials in order. */
__global__ void column_partials_kernel(int64_t rows, int32_t out, int64_t chunk, const float *dy, float *part)
{
    __shared__ float acc[8][33];
    int32_t j = blockIdx.x * 32 + threadIdx.x;
    int64_t r0 = blockIdx.y * chunk, r1 = min(rows, r0 + chunk);
    float s = 0.0f;
    if (j < out)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) s += dy[r * out + j];
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

sf_status sf_cuda_column_sums(sf_cuda_ctx *c, int64_t rows, int32_t out, const float *dy, float *db)
{
    int64_t colblocks = (out + 31) / 32;
    int64_t P = (8 * (int64_t)c->num_sms + colblocks - 1) / colblocks;
    if (P > (rows + 63) / 64) P = (rows + 63) / 64;
    if (P < 1) P = 1;
    if (P > 65535) P = 65535;
    int64_t chunk = (rows + P - 1) / P;
    void *part;
    SF_TRY(sf_cuda_scratch(c, 1, sizeof(float) * (size_t)P * (size_t)out, &part));
    column_partials_kernel<<<dim3((unsigned)colblocks, (unsigned)P), dim3(32, 8), 0, c->stream>>>(rows, out, chunk, dy,
                                                                                                  (float *)part);
    SF_CUDA_LAUNCHED();
    column_finish_kernel<<<sf_cuda_blocks(out, 128), 128, 0, c->stream>>>(out, (int)P, (const float *)part, db);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

static sf_status check_dims(int64_t rows, int32_t in, int32_t out)
{
    if (rows < 0 || rows > INT_MAX || in < 0 || out < 0)
        return sf_fail(SF_ERR_INVALID, "linear: rows = %lld, in = %d, out = %d outside cuBLAS's int range",
                       (long long)rows, in, out);
    return SF_OK;
}

/* C = op(A)·op(B) + beta·C, column-major, fp32 C; A and B are float, or bf16 when `bf16`. */
static sf_status gemm(sf_cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A,
                      int lda, const void *B, int ldb, float beta, float *C, int ldc, bool bf16)
{
    const float one = 1.0f;
    if (bf16)
        SF_CUBLAS_CHECK(cublasGemmEx(c->cublas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta,
                                     C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        SF_CUBLAS_CHECK(cublasSgemm(c->cublas, ta, tb, m, n, k, &one, (const float *)A, lda, (const float *)B, ldb,
                                    &beta, C, ldc));
    return SF_OK;
}

/* The operand as the GEMM takes it: itself, or its bf16 copy in scratch slot `slot`. */
static sf_status operand(sf_cuda_ctx *c, int slot, int64_t n, const float *x, const void **out)
{
    if (c->prec != SF_PRECISION_BF16) {
        *out = x;
        return SF_OK;
    }
    __nv_bfloat16 *b;
    SF_TRY(sf_cuda_bf16_copy(c, slot, n, x, &b));
    *out = b;
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
        bias_fill_kernel<<<sf_cuda_blocks(rows * out, 256), 256, 0, c->stream>>>(rows, out, b, y);
        SF_CUDA_LAUNCHED();
        beta = 1.0f;
    }
    if (in == 0) return b ? SF_OK : sf_cuda_zero_f32(c, y, rows * out);
    const void *wo, *xo;
    SF_TRY(operand(c, SF_CUDA_BF16_W, (int64_t)out * in, w, &wo));
    SF_TRY(operand(c, SF_CUDA_BF16_IN, rows * in, x, &xo));
    bool bf16 = c->prec == SF_PRECISION_BF16;
    return gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)rows, in, wo, in, xo, in, beta, y, out, bf16);
}

/* dxᶜ[in, rows] = Wᶜ[in, out]·dyᶜ[out, rows], dy already as the GEMM takes it. */
static sf_status input_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *w, const void *dyo,
                            float *dx)
{
    const void *wo;
    SF_TRY(operand(c, SF_CUDA_BF16_W, (int64_t)out * in, w, &wo));
    return gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, in, (int)rows, out, wo, in, dyo, out, 0.0f, dx, in,
                c->prec == SF_PRECISION_BF16);
}

sf_status sf_cuda_op_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                     const float *w, const float *dy, float *dx, float *dw, float *db)
{
    SF_TRY(check_dims(rows, in, out));
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (rows == 0 || out == 0 || in == 0) { /* degenerate: gradients are zero */
        if (dw) SF_TRY(sf_cuda_zero_f32(c, dw, (int64_t)out * in));
        if (db) SF_TRY(sf_cuda_zero_f32(c, db, out));
        if (dx) SF_TRY(sf_cuda_zero_f32(c, dx, rows * in));
        return SF_OK;
    }
    bool bf16 = c->prec == SF_PRECISION_BF16;
    const void *dyo, *xo;
    SF_TRY(operand(c, SF_CUDA_BF16_OUT, rows * out, dy, &dyo));
    if (dx) SF_TRY(input_grad(c, rows, in, out, w, dyo, dx));
    /* dWᶜ[in, out] = xᶜ[in, rows]·dyᶜ[out, rows]ᵀ */
    SF_TRY(operand(c, SF_CUDA_BF16_IN, rows * in, x, &xo));
    SF_TRY(gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)rows, xo, in, dyo, out, 0.0f, dw, in, bf16));
    return db ? sf_cuda_column_sums(c, rows, out, dy, db) : SF_OK;
}

sf_status sf_cuda_linear_input_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *w,
                                    const float *dy, float *dx)
{
    SF_TRY(check_dims(rows, in, out));
    if (rows == 0 || in == 0) return SF_OK;
    if (out == 0) return sf_cuda_zero_f32(c, dx, rows * in);
    const void *dyo;
    SF_TRY(operand(c, SF_CUDA_BF16_OUT, rows * out, dy, &dyo));
    return input_grad(c, rows, in, out, w, dyo, dx);
}
