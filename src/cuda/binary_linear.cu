/* binary_linear.cu — fp32 linear layers on 0/1 inputs (spikes) on the tensor cores, to fp32 accuracy (fp32 precision
 * only; the others keep linear.cu's GEMMs): the other operand as three bf16 parts (below 2^-27 dropped), whose products
 * with 0/1 are exact, summed by ONE product over a k that lays the parts side by side. Small layers and large W keep
 * TF32 parts (tf32.cuh) or SGEMM. bf16 rows are padded to 8 values: cuBLAS's Hopper kernels need 16-byte rows.
 * Design: docs/architecture.md, "Spike products"; the times behind each threshold: docs/notebook/perf.md. */
#include "cuda/ops.cuh"

enum {
    SPLIT_ELEMS = 1 << 22, /* the TF32 parts' scratch: 2·SPLIT_ELEMS floats, rows chunked to fit */
    PART_ELEMS = 1 << 26,  /* the bf16 parts' scratch, in bf16 values, rows chunked to fit */
    FWD_W_PARTS = 1 << 23, /* most bf16 values of W's forward parts (16 MiB); more: TF32 parts */
    PARTS_MIN_OUT = 512,   /* fewer outputs: the forward and dx skip the bf16 parts (x's copies cost more) */
    DW_PARTS_MIN_OUT = 192 /* fewer outputs: the backward runs SGEMMs */
};

static bool splits(const sf_cuda_ctx *c) { return c->act == SF_SCALAR_F32 && c->prec == SF_PRECISION_FP32; }

static int64_t pad8(int64_t n) { return (n + 7) / 8 * 8; }

/* Where pack_kernel writes: value j of x's row i goes to each segment s < nseg, at i·row_ld + s·seg_ld + j, as the
 * part of it that `parts` names for s (4 bits per segment, segment 0 lowest; part 0 the largest). Column `cols` (the
 * first pad) may hold a value per row: tail[i], or tail_one where tail is NULL (0: a pad like the others). */
struct parts_layout {
    int nseg;
    unsigned parts;
    int64_t row_ld, seg_ld;
    const float *tail;
    float tail_one;
};

/* Four bf16 values, stored as one 8-byte word. */
union bf16x4 {
    uint2 word;
    __nv_bfloat16 v[4];
};

/* The bf16 parts of x [rows][cols] laid out as L says, for i < rows_pad and j < cols_pad (a multiple of 4, as the
 * layout's strides are): zeros where i ≥ rows or j ≥ cols, so a product whose k or m runs over the pads adds nothing.
 * A thread per 4 columns, over every gridDim.y-th row (sf_cuda_row_grid). */
__global__ void pack_kernel(int64_t rows, int64_t cols, const float *x, int64_t rows_pad, int64_t cols_pad,
                            parts_layout L, __nv_bfloat16 *out)
{
    const int64_t j = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= cols_pad) return;
    for (int64_t i = blockIdx.y; i < rows_pad; i += gridDim.y) {
        float v[4];
        if (i < rows && cols % 4 == 0 && j < cols) {
            const float4 q = *(const float4 *)(x + i * cols + j);
            v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
        } else {
            for (int e = 0; e < 4; e++)
                v[e] = i >= rows       ? 0.0f
                       : j + e < cols  ? x[i * cols + j + e]
                       : j + e == cols ? (L.tail ? L.tail[i] : L.tail_one)
                                       : 0.0f;
        }
        bf16x4 part[3];
        for (int e = 0; e < 4; e++)
            for (int p = 0; p < 3; p++) {
                part[p].v[e] = __float2bfloat16_rn(v[e]);
                v[e] -= __bfloat162float(part[p].v[e]);
            }
        for (int s = 0; s < L.nseg; s++) {
            const unsigned p = L.parts >> 4 * s & 15u;
            *(uint2 *)(out + i * L.row_ld + s * L.seg_ld + j) = p == 0   ? part[0].word
                                                                : p == 1 ? part[1].word
                                                                         : part[2].word;
        }
    }
}

static sf_status pack(sf_cuda_ctx *c, int64_t rows, int64_t cols, const float *x, int64_t rows_pad, int64_t cols_pad,
                      parts_layout L, __nv_bfloat16 *out)
{
    pack_kernel<<<sf_cuda_row_grid(rows_pad, cols_pad / 4, 256), 256, 0, c->stream>>>(rows, cols, x, rows_pad, cols_pad,
                                                                                      L, out);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

/* A bf16 GEMM with fp32 output on the tensor cores: C = op(A)·op(B) + beta·C, column-major. */
static sf_status gemm_bf16(sf_cuda_ctx *c, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                           const __nv_bfloat16 *A, int64_t lda, const __nv_bfloat16 *B, int64_t ldb, float beta,
                           float *C, int64_t ldc)
{
    const float one = 1.0f;
    SF_CUBLAS_CHECK(cublasGemmEx(c->cublas, ta, tb, (int)m, (int)n, (int)k, &one, A, CUDA_R_16BF, (int)lda, B,
                                 CUDA_R_16BF, (int)ldb, &beta, C, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return SF_OK;
}

/* Rows per chunk when each row takes per_row of the `room` bf16 values: even chunks, at least one row. */
static int64_t chunk_rows(int64_t rows, int64_t room, int64_t per_row)
{
    const int64_t most = room / per_row > 0 ? room / per_row : 1, chunks = (rows + most - 1) / most;
    return (rows + chunks - 1) / chunks;
}

/* The parts per segment (parts_layout.parts): all three in order; smallest first (the forward's k: forward_parts); a
 * 0/1 operand is its own first part, in every segment. dx's pairs (part of W, part of dy), smallest first: every
 * product of two parts but those below 2^-24 of the whole (each part is 2^-8 of the one before). */
enum {
    PARTS_IN_ORDER = 0x210u,
    PARTS_SMALL_FIRST = 0x012u,
    PARTS_EXACT = 0x000u,
    DX_W_PARTS = 0x010201u,
    DX_DY_PARTS = 0x001021u
};

/* yᶜ[out, rows] = Wᶜᵀ·xᶜ + b as one bf16 product over k = 3·kin (kin = in + 1 for b, padded to 8): A's column of an
 * output holds W's three parts smallest first, then b's; B's column of a row x three times, then a 1 (the bias costs no
 * pass). Smallest first: the tensor cores cut the low bits of each group's products as they add them to the sum. */
static sf_status forward_parts(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *x, const float *w,
                               const float *b, float *y)
{
    const int64_t kin = pad8(in + (b != NULL)), k = 3 * kin, wparts = (int64_t)out * k;
    const int64_t chunk = chunk_rows(rows, PART_ELEMS - wparts, k);
    void *s;
    SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SPLIT, sizeof(__nv_bfloat16) * (size_t)(wparts + chunk * k), &s));
    __nv_bfloat16 *wq = (__nv_bfloat16 *)s, *xq = wq + wparts;
    SF_TRY(pack(c, out, in, w, out, kin, {3, PARTS_SMALL_FIRST, k, kin, b, 0.0f}, wq));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t r = rows - r0 < chunk ? rows - r0 : chunk;
        SF_TRY(pack(c, r, in, x + r0 * in, r, kin, {3, PARTS_EXACT, k, kin, NULL, b ? 1.0f : 0.0f}, xq));
        SF_TRY(gemm_bf16(c, CUBLAS_OP_T, CUBLAS_OP_N, out, r, k, wq, k, xq, k, 0.0f, y + r0 * out, out));
    }
    return SF_OK;
}

/* y (+beta) = x·Wᵀ with W's two TF32 parts, high then low, in two products, the second added to the first, over W's
 * rows in chunks of at most SPLIT_ELEMS values. */
static sf_status forward_tf32(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *x, const float *w,
                              float beta, float *y)
{
    const float one = 1.0f;
    const int64_t chunk = SPLIT_ELEMS / in > 0 ? SPLIT_ELEMS / in : 1;
    for (int64_t o0 = 0; o0 < out; o0 += chunk) {
        const int64_t m = out - o0 < chunk ? out - o0 : chunk;
        void *s;
        SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SPLIT, 2 * sizeof(float) * (size_t)(m * in), &s));
        SF_TRY(sf_cuda_tf32_stack(c, 1, m * in, w + o0 * in, 2, 2u, (float *)s));
        for (int i = 0; i < 2; i++) {
            const float b = i ? 1.0f : beta;
            SF_CUBLAS_CHECK(cublasGemmEx(c->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)rows, in, &one,
                                         (const float *)s + i * m * in, CUDA_R_32F, in, x, CUDA_R_32F, in, &b, y + o0,
                                         CUDA_R_32F, out, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
        }
    }
    return SF_OK;
}

/* The segment of dy's layout holding part p. */
static int64_t segment_of(unsigned parts, int nseg, int p)
{
    for (int s = 0; s < nseg; s++)
        if ((parts >> 4 * s & 15u) == (unsigned)p) return s;
    return -1;
}

/* dw = xᵀ·dy over `rows` rows of x (0/1 floats, or the bits xbits where not NULL), and dx = dy·W where dx and w are not
 * NULL, in bf16 parts over even row chunks: per row dy's parts (dx: six segments, DX_DY_PARTS' order; else three) and
 * a bf16 x; for dx W's six parts (DX_W_PARTS) once. in not a multiple of 8: dW padded in scratch, then copied out. */
static sf_status split_grads(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *x,
                             const uint32_t *xbits, const float *w, const float *dy, float *dx, float *dw)
{
    const int64_t kin = pad8(in), kout = pad8(out);
    const int nseg = dx ? 6 : 3;
    const unsigned dy_parts = dx ? DX_DY_PARTS : PARTS_IN_ORDER;
    const int64_t wparts = dx ? 6 * kout * kin : 0, per_row = kin + nseg * kout;
    const int64_t chunk = chunk_rows(rows, PART_ELEMS - wparts, per_row);
    const size_t dw_bytes = kin != in ? sizeof(float) * (size_t)(kin * out) : 0;
    void *s;
    SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SPLIT,
                           dw_bytes + sizeof(__nv_bfloat16) * (size_t)(wparts + chunk * per_row), &s));
    float *dwk = dw_bytes ? (float *)s : dw;
    __nv_bfloat16 *wq = (__nv_bfloat16 *)((char *)s + dw_bytes), *xb = wq + wparts, *dyq = xb + chunk * kin;
    /* Aᶜ[kin, 6·kout]: column block s holds W's part of segment s (W's rows as columns), zero columns past out */
    if (dx) SF_TRY(pack(c, out, in, w, kout, kin, {6, DX_W_PARTS, kin, kout * kin, NULL, 0.0f}, wq));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t r = rows - r0 < chunk ? rows - r0 : chunk;
        SF_TRY(pack(c, r, out, dy + r0 * out, r, kout, {nseg, dy_parts, nseg * kout, kout, NULL, 0.0f}, dyq));
        if (dx) /* dxᶜ[in, r] = Aᶜ·dyqᶜ[6·kout, r] */
            SF_TRY(gemm_bf16(c, CUBLAS_OP_N, CUBLAS_OP_N, in, r, 6 * kout, wq, kin, dyq, 6 * kout, 0.0f, dx + r0 * in,
                             in));
        if (xbits) SF_TRY(sf_cuda_spikes_expand_bf16(c, r, in, kin, xbits + r0 * ((in + 31) / 32), xb));
        else SF_TRY(pack(c, r, in, x + r0 * in, r, kin, {1, PARTS_EXACT, kin, 0, NULL, 0.0f}, xb));
        for (int p = 2; p >= 0; p--) /* dWᶜ[kin, out] = xbᶜ[kin, r]·dyᶜ[out, r]ᵀ by parts, the smallest first */
            SF_TRY(gemm_bf16(c, CUBLAS_OP_N, CUBLAS_OP_T, kin, out, r, xb, kin,
                             dyq + segment_of(dy_parts, nseg, p) * kout, nseg * kout, r0 == 0 && p == 2 ? 0.0f : 1.0f,
                             dwk, kin));
    }
    if (dw_bytes)
        SF_CUDA_CHECK(cudaMemcpy2DAsync(dw, sizeof(float) * in, dwk, sizeof(float) * kin, sizeof(float) * in, out,
                                        cudaMemcpyDeviceToDevice, c->stream));
    return SF_OK;
}

/* Whether a layer's backward takes the bf16 parts (else linear.cu's GEMMs). */
static bool takes_parts(const sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out)
{
    return splits(c) && rows > 0 && in > 0 && out >= DW_PARTS_MIN_OUT && rows <= INT32_MAX;
}

sf_status sf_cuda_binary_weight_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const uint32_t *xbits,
                                     float *x, const float *dy, float *dw)
{
    if (rows == 0) return sf_cuda_zero_f32(c, dw, (int64_t)in * out);
    if (takes_parts(c, rows, in, out)) return split_grads(c, rows, in, out, NULL, xbits, NULL, dy, NULL, dw);
    SF_TRY(sf_cuda_spikes_expand(c, rows, in, xbits, x)); /* dWᶜ[in, out] = xᶜ[in, rows]·dyᶜ[out, rows]ᵀ */
    return sf_cuda_gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, (int)rows, x, in, dy, out, 0.0f, dw, in, true);
}

sf_status sf_cuda_op_binary_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                           const float *w, const float *b, float *y)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (!splits(c) || rows == 0 || out == 0 || in == 0 || rows > INT32_MAX)
        return sf_cuda_op_linear_forward(be, rows, in, out, x, w, b, y);
    if (out >= PARTS_MIN_OUT && 3 * (int64_t)out * pad8(in + 1) <= FWD_W_PARTS)
        return forward_parts(c, rows, in, out, x, w, b, y);
    if (b) SF_TRY(sf_cuda_bias_fill(c, rows, out, b, y));
    return forward_tf32(c, rows, in, out, x, w, b ? 1.0f : 0.0f, y);
}

/* The backward of a layer that takes the parts (takes_parts), x as floats or bits. */
static sf_status parts_backward(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const float *x,
                                const uint32_t *xbits, const float *w, const float *dy, float *dx, float *dw, float *db)
{
    /* dx by SGEMM where out is too short for the parts to pay (memory-bound) or W's parts leave too little room */
    if (dx && (out < PARTS_MIN_OUT || 6 * pad8(out) * pad8(in) > PART_ELEMS / 2)) {
        SF_TRY(sf_cuda_linear_input_grad(c, rows, in, out, w, dy, dx));
        dx = NULL;
    }
    SF_TRY(split_grads(c, rows, in, out, x, xbits, w, dy, dx, dw));
    return db ? sf_cuda_column_sums(c, rows, out, dy, db) : SF_OK;
}

sf_status sf_cuda_op_binary_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                            const float *w, const float *dy, float *dx, float *dw, float *db)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (!takes_parts(c, rows, in, out)) return sf_cuda_op_linear_backward(be, rows, in, out, x, w, dy, dx, dw, db);
    return parts_backward(c, rows, in, out, x, NULL, w, dy, dx, dw, db);
}

sf_status sf_cuda_op_binary_linear_backward_bits(sf_backend *be, int64_t rows, int32_t in, int32_t out,
                                                 const uint32_t *xbits, const float *w, const float *dy, float *dx,
                                                 float *dw, float *db)
{
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    if (takes_parts(c, rows, in, out)) return parts_backward(c, rows, in, out, NULL, xbits, w, dy, dx, dw, db);
    void *x; /* the spikes as values, for linear.cu's GEMMs */
    SF_TRY(sf_cuda_scratch(c, SF_CUDA_SCRATCH_SPLIT, sf_scalar_size(c->act) * (size_t)(rows * in), &x));
    SF_TRY(sf_cuda_spikes_expand(c, rows, in, xbits, x));
    return sf_cuda_op_linear_backward(be, rows, in, out, (const float *)x, w, dy, dx, dw, db);
}
