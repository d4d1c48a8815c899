/* binary_linear.cu — fp32 products with a 0/1 operand (spikes) on the tensor cores, exactly: the other operand is
 * the sum of its two TF32 parts (tf32.cuh; what lies below 2^-22 of it is dropped), and the product of 0/1 values
 * with a TF32 part is exact, so only the fp32 sums round. A dense dV of the recurrent layer measured 6e-8 relative
 * error against double this way where SGEMM gave 1.2e-7 (1472 × 1472 over 6400 rows, H200), at tensor-core speed.
 * Other precisions and activation types keep linear.cu's GEMMs: tf32 is TF32 already, and bf16/fp16 run on the
 * tensor cores with 16-bit operands. The parts are made chunk by chunk in a scratch buffer of at most 2·SPLIT_ELEMS
 * floats. */
#include "cuda/ops.cuh"
#include "cuda/tf32.cuh"

enum { SPLIT_ELEMS = 1 << 22 };

static bool splits(const sf_cuda_ctx *c) { return c->act == SF_ACT_F32 && c->prec == SF_PRECISION_FP32; }

__global__ void tf32_split_kernel(int64_t n, const float *x, float *hi, float *lo)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        uint32_t h, l;
        sf_tf32_split(x[i], &h, &l);
        hi[i] = __uint_as_float(h);
        lo[i] = __uint_as_float(l);
    }
}

/* Splits n (at most SPLIT_ELEMS) floats of x into the scratch: part[0] the high TF32 parts, part[1] the low. */
static sf_status split(sf_cuda_ctx *c, int64_t n, const float *x, const float *part[2])
{
    void *s;
    SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SPLIT, 2 * sizeof(float) * (size_t)SPLIT_ELEMS, &s));
    float *hi = (float *)s, *lo = hi + SPLIT_ELEMS;
    tf32_split_kernel<<<sf_cuda_blocks(n, 256), 256, 0, c->stream>>>(n, x, hi, lo);
    SF_CUDA_LAUNCHED();
    part[0] = hi;
    part[1] = lo;
    return SF_OK;
}

/* C = op(A)·op(B) + beta·C with one operand given as its two TF32 parts (part[0] + part[1]: A where a_parts, else
 * B) and the other as `other`: two tensor-core products, the second added to the first. */
static sf_status gemm_parts(sf_cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *const part[2], bool a_parts, const float *other, int lda, int ldb, float beta,
                            float *C, int ldc)
{
    const float one = 1.0f;
    for (int i = 0; i < 2; i++) {
        const float *A = a_parts ? part[i] : other, *B = a_parts ? other : part[i], b = i ? 1.0f : beta;
        SF_CUBLAS_CHECK(cublasGemmEx(c->cublas, ta, tb, m, n, k, &one, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &b, C,
                                     CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    }
    return SF_OK;
}

sf_status sf_cuda_binary_weight_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *x,
                                     const float *dy, float *dw)
{
    /* dWᶜ[in, out] = xᶜ[in, rows]·dyᶜ[out, rows]ᵀ, over rows in chunks (dy's parts), the chunks' sums added */
    if (!splits(c) || rows == 0)
        return sf_cuda_gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)rows, x, in, dy, out, 0.0f, dw, in, true);
    const int64_t chunk = out > 0 && SPLIT_ELEMS / out > 0 ? SPLIT_ELEMS / out : 1;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t r = rows - r0 < chunk ? rows - r0 : chunk;
        const float *part[2];
        SF_TRY(split(c, r * out, dy + r0 * out, part));
        SF_TRY(gemm_parts(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)r, part, false, x + r0 * in, in, out,
                          r0 == 0 ? 0.0f : 1.0f, dw, in));
    }
    return SF_OK;
}

sf_status sf_cuda_op_binary_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                           const float *w, const float *b, float *y)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (!splits(c) || rows == 0 || out == 0 || in == 0 || rows > INT32_MAX)
        return sf_cuda_op_linear_forward(be, rows, in, out, x, w, b, y);
    float beta = 0.0f;
    if (b) {
        SF_TRY(sf_cuda_bias_fill(c, rows, out, b, y));
        beta = 1.0f;
    }
    /* yᶜ[out, rows] = Wᶜᵀ·xᶜ, over W's rows (the outputs) in chunks, each chunk's parts */
    const int64_t chunk = SPLIT_ELEMS / in > 0 ? SPLIT_ELEMS / in : 1;
    for (int64_t o0 = 0; o0 < out; o0 += chunk) {
        const int64_t m = out - o0 < chunk ? out - o0 : chunk;
        const float *part[2];
        SF_TRY(split(c, m * in, w + o0 * in, part));
        SF_TRY(gemm_parts(c, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)rows, in, part, true, x, in, in, beta, y + o0,
                          out));
    }
    return SF_OK;
}

sf_status sf_cuda_op_binary_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                            const float *w, const float *dy, float *dx, float *dw, float *db)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (!splits(c) || rows == 0 || out == 0 || in == 0 || rows > INT32_MAX)
        return sf_cuda_op_linear_backward(be, rows, in, out, x, w, dy, dx, dw, db);
    if (dx) SF_TRY(sf_cuda_linear_input_grad(c, rows, in, out, w, dy, dx));
    SF_TRY(sf_cuda_binary_weight_grad(c, rows, in, out, x, dy, dw));
    return db ? sf_cuda_column_sums(c, rows, out, dy, db) : SF_OK;
}
