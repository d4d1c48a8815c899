/* linear.cu — the fully connected layer through cuBLAS. Row-major [rows, features] tensors are column-major
 * [features, rows] to cuBLAS, so y = x·Wᵀ is yᶜ = Wᶜᵀ·xᶜ with W [out, in] seen as column-major [in, out].
 * fp32 with the default math mode: no TF32 tensor ops unless a caller opts in. */
#include "cuda/ops.cuh"

#include <limits.h>

__global__ void bias_fill_kernel(int64_t rows, int32_t out, const float *b, float *y)
{
    SF_CU_GRID_STRIDE(i, rows * out) y[i] = b[i % out];
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

static sf_status column_sums(sf_cu_ctx *c, int64_t rows, int32_t out, const float *dy, float *db)
{
    int64_t colblocks = (out + 31) / 32;
    int64_t P = (8 * (int64_t)c->num_sms + colblocks - 1) / colblocks;
    if (P > (rows + 63) / 64) P = (rows + 63) / 64;
    if (P < 1) P = 1;
    if (P > 65535) P = 65535;
    int64_t chunk = (rows + P - 1) / P;
    void *part;
    SF_TRY(sf_cu_scratch(c, 1, sizeof(float) * (size_t)P * (size_t)out, &part));
    column_partials_kernel<<<dim3((unsigned)colblocks, (unsigned)P), dim3(32, 8), 0, c->stream>>>(rows, out, chunk, dy,
                                                                                                  (float *)part);
    SF_CU_LAUNCHED();
    column_finish_kernel<<<sf_cu_blocks(out, 128), 128, 0, c->stream>>>(out, (int)P, (const float *)part, db);
    SF_CU_LAUNCHED();
    return SF_OK;
}

static sf_status check_dims(int64_t rows, int32_t in, int32_t out)
{
    if (rows < 0 || rows > INT_MAX || in < 0 || out < 0)
        return sf_fail(SF_ERR_INVALID, "linear: rows = %lld, in = %d, out = %d outside cuBLAS's int range",
                       (long long)rows, in, out);
    return SF_OK;
}

sf_status sf_cu_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x, const float *w,
                               const float *b, float *y)
{
    SF_TRY(check_dims(rows, in, out));
    if (rows == 0 || out == 0) return SF_OK;
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    float one = 1.0f, beta = 0.0f;
    if (b) {
        bias_fill_kernel<<<sf_cu_blocks(rows * out, 256), 256, 0, c->stream>>>(rows, out, b, y);
        SF_CU_LAUNCHED();
        beta = 1.0f;
    }
    if (in == 0) return b ? SF_OK : sf_cu_zero_f32(c, y, rows * out);
    SF_CUBLAS_CHECK(
        cublasSgemm(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, (int)rows, in, &one, w, in, x, in, &beta, y, out));
    return SF_OK;
}

sf_status sf_cu_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x, const float *w,
                                const float *dy, float *dx, float *dw, float *db)
{
    SF_TRY(check_dims(rows, in, out));
    sf_cu_ctx *c = sf_cu_ctx_of(be);
    float one = 1.0f, zero = 0.0f;
    if (rows == 0 || out == 0 || in == 0) { /* degenerate: gradients are zero */
        if (dw) SF_TRY(sf_cu_zero_f32(c, dw, (int64_t)out * in));
        if (db) SF_TRY(sf_cu_zero_f32(c, db, out));
        if (dx) SF_TRY(sf_cu_zero_f32(c, dx, rows * in));
        return SF_OK;
    }
    if (dx) /* dxᶜ[in, rows] = Wᶜ[in, out]·dyᶜ[out, rows] */
        SF_CUBLAS_CHECK(
            cublasSgemm(c->cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, (int)rows, out, &one, w, in, dy, out, &zero, dx, in));
    /* dWᶜ[in, out] = xᶜ[in, rows]·dyᶜ[out, rows]ᵀ */
    SF_CUBLAS_CHECK(
        cublasSgemm(c->cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)rows, &one, x, in, dy, out, &zero, dw, in));
    return db ? column_sums(c, rows, out, dy, db) : SF_OK;
}
