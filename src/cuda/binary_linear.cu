/* binary_linear.cu — fp32 products with a 0/1 operand (spikes) on the tensor cores, to fp32 accuracy: the product
 * of 0/1 values with a part of the other operand is exact, so only the fp32 sums round.
 *   forward: W as the sum of its two TF32 parts (tf32.cuh; what lies below 2^-22 of it is dropped), two TF32
 *     products with the spikes as they are.
 *   backward: dy as the sum of three bf16 parts (what lies below 2^-27 of it is dropped); dW as three bf16
 *     products with a bf16 copy of the spikes, at twice TF32's rate; dx = dy·W (no spikes in it) as six products
 *     of dy's parts with W's three, all but those below 2^-24 of the whole, where cuBLAS's SGEMM ran at a third of
 *     the speed.
 * A dense dV of the recurrent layer measured 6e-8 relative error against double with TF32 parts, where SGEMM gave
 * 1.2e-7 (1472 × 1472 over 6400 rows, H200); the bf16 parts drop less. Other precisions and activation types keep linear.cu's GEMMs: tf32 is
 * TF32 already, and bf16/fp16 run on the tensor cores with 16-bit operands. The parts are made chunk by chunk in one
 * scratch buffer: at most 2·SPLIT_ELEMS floats, or GRAD_ELEMS bf16 values. */
#include "cuda/ops.cuh"

enum { SPLIT_ELEMS = 1 << 22, GRAD_ELEMS = 1 << 25 };

static bool splits(const sf_cuda_ctx *c) { return c->act == SF_ACT_F32 && c->prec == SF_PRECISION_FP32; }

/* Splits n (at most SPLIT_ELEMS) floats of x into the scratch, sized to them (a small layer's parts take a small
 * slot): part[0] the high TF32 parts, part[1] the low. */
static sf_status split(sf_cuda_ctx *c, int64_t n, const float *x, const float *part[2])
{
    void *s;
    SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SPLIT, 2 * sizeof(float) * (size_t)n, &s));
    SF_TRY(sf_cuda_tf32_stack(c, 1, n, x, 2, 2u, (float *)s));
    part[0] = (const float *)s;
    part[1] = part[0] + n;
    return SF_OK;
}

/* out[p·n + i] for p < parts: x as `parts` bf16 values whose sum is x (each the rest rounded to nearest): one part
 * holds 0/1 exactly, three hold x but for less than 2^-27 of it. */
__global__ void bf16_parts_kernel(int64_t n, const float *x, int parts, __nv_bfloat16 *out)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float rest = x[i];
        for (int p = 0; p < parts; p++) {
            const __nv_bfloat16 h = __float2bfloat16_rn(rest);
            out[p * n + i] = h;
            rest -= __bfloat162float(h);
        }
    }
}

/* C = op(A)·op(B) + beta·C with A given as its two TF32 parts (part[0] + part[1]): two tensor-core products, the
 * second added to the first. */
static sf_status gemm_parts(sf_cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const float *const part[2], int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    const float one = 1.0f;
    for (int i = 0; i < 2; i++) {
        const float b = i ? 1.0f : beta;
        SF_CUBLAS_CHECK(cublasGemmEx(c->cublas, ta, tb, m, n, k, &one, part[i], CUDA_R_32F, lda, B, CUDA_R_32F, ldb,
                                     &b, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    }
    return SF_OK;
}

/* A bf16 GEMM with fp32 output on the tensor cores: C = op(A)·op(B) + beta·C, column-major. */
static sf_status gemm_bf16(sf_cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const __nv_bfloat16 *A, int lda, const __nv_bfloat16 *B, int ldb, float beta, float *C,
                           int ldc)
{
    const float one = 1.0f;
    SF_CUBLAS_CHECK(cublasGemmEx(c->cublas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, &beta, C,
                                 CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return SF_OK;
}

/* The pairs (part of W, part of dy) whose products dx sums, the smallest first: every product of two parts but
 * those below 2^-24 of the whole (the parts shrink by 2^-8 each). */
static const int DX_PAIRS[6][2] = {{1, 1}, {0, 2}, {2, 0}, {0, 1}, {1, 0}, {0, 0}};

/* dw = xᵀ·dy over `rows` rows of x (0/1: floats, or the bits xbits where not NULL) and dy, and dx = dy·W where dx
 * and w are not NULL, all in bf16 parts: dy's three parts in even chunks of rows, with a bf16 copy of x's chunk for
 * dW, and W's three parts for dx. */
static sf_status split_grads(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *x,
                             const uint32_t *xbits, const float *w, const float *dy, float *dx, float *dw)
{
    const int64_t wparts = dx ? 3 * (int64_t)out * in : 0, per_row = (int64_t)in + 3 * (int64_t)out;
    const int64_t room = GRAD_ELEMS - wparts, most = room / per_row > 0 ? room / per_row : 1;
    const int64_t chunks = (rows + most - 1) / most, chunk = (rows + chunks - 1) / chunks;
    void *s;
    SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SPLIT, sizeof(__nv_bfloat16) * (size_t)(wparts + chunk * per_row), &s));
    __nv_bfloat16 *wq = (__nv_bfloat16 *)s, *xb = wq + wparts, *dyp = xb + chunk * in;
    if (dx) {
        bf16_parts_kernel<<<sf_cuda_blocks(wparts / 3, 256), 256, 0, c->stream>>>(wparts / 3, w, 3, wq);
        SF_CUDA_LAUNCHED();
    }
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int r = (int)(rows - r0 < chunk ? rows - r0 : chunk);
        bf16_parts_kernel<<<sf_cuda_blocks((int64_t)r * out, 256), 256, 0, c->stream>>>((int64_t)r * out,
                                                                                       dy + r0 * out, 3, dyp);
        SF_CUDA_LAUNCHED();
        const __nv_bfloat16 *p[3] = {dyp, dyp + (int64_t)r * out, dyp + 2 * (int64_t)r * out};
        for (int k = 0; dx && k < 6; k++) /* dxᶜ[in, r] = Wᶜ[in, out]·dyᶜ[out, r] */
            SF_TRY(gemm_bf16(c, CUBLAS_OP_N, CUBLAS_OP_N, in, r, out, wq + DX_PAIRS[k][0] * (int64_t)out * in, in,
                             p[DX_PAIRS[k][1]], out, k ? 1.0f : 0.0f, dx + r0 * in, in));
        if (xbits) {
            SF_TRY(sf_cuda_spikes_expand_bf16(c, r, in, xbits + r0 * ((in + 31) / 32), xb));
        } else {
            bf16_parts_kernel<<<sf_cuda_blocks((int64_t)r * in, 256), 256, 0, c->stream>>>((int64_t)r * in,
                                                                                          x + r0 * in, 1, xb);
            SF_CUDA_LAUNCHED();
        }
        for (int k = 0; k < 3; k++) /* dWᶜ[in, out] = xᶜ[in, r]·dyᶜ[out, r]ᵀ, the chunks' sums added */
            SF_TRY(gemm_bf16(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, r, xb, in, p[2 - k], out,
                             r0 == 0 && k == 0 ? 0.0f : 1.0f, dw, in));
    }
    return SF_OK;
}

sf_status sf_cuda_binary_weight_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const uint32_t *xbits,
                                     float *x, const float *dy, float *dw)
{
    if (rows == 0) return sf_cuda_zero_f32(c, dw, (int64_t)in * out);
    if (splits(c)) return split_grads(c, rows, in, out, NULL, xbits, NULL, dy, NULL, dw);
    SF_TRY(sf_cuda_spikes_expand(c, rows, in, xbits, x)); /* dWᶜ[in, out] = xᶜ[in, rows]·dyᶜ[out, rows]ᵀ */
    return sf_cuda_gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)rows, x, in, dy, out, 0.0f, dw, in, true);
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
        SF_TRY(gemm_parts(c, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)rows, in, part, in, x, in, beta, y + o0,
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
    /* dx by SGEMM where out is too short for six products to pay (each reads and writes dx: memory-bound below
     * about 512 on an H200) or W's parts would leave too little room */
    if (dx && (out < 512 || 3 * (int64_t)out * in > GRAD_ELEMS / 2)) {
        SF_TRY(sf_cuda_linear_input_grad(c, rows, in, out, w, dy, dx));
        dx = NULL;
    }
    SF_TRY(split_grads(c, rows, in, out, x, NULL, w, dy, dx, dw));
    return db ? sf_cuda_column_sums(c, rows, out, dy, db) : SF_OK;
}
