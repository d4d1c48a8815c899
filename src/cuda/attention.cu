/* attention.cu — Spikformer's SSA product (core/transformer.h) as batched cuBLAS GEMMs over every (set t, head h),
 * b = t·heads + h: one cublasGemmBatchedEx per product, operand addresses written to the workspace by a kernel, so a
 * call is a few launches whatever the shape. Row-major blocks are column-major (ᶜ) to cuBLAS. The forward is exact for
 * 0/1 q, k, v while n·dh < 2^24 (fp32: FMA GEMMs, never TF32; 16-bit: M in that type up to n = 256 bf16, 2048 fp16,
 * else hi + lo parts, exact while n < 2^16 / 2^22, summed in fp32); the backward follows the backend's precision. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

#include <initializer_list>
#include <limits.h>

/* The largest count the act type holds exactly (integers up to it are exact; past it some round). */
static int64_t exact_counts(sf_scalar t) { return t == SF_SCALAR_BF16 ? 256 : t == SF_SCALAR_F16 ? 2048 : 1 << 24; }

/* Where one GEMM operand of pair b lies: a head's column block of a token tensor (rows ld elements apart), or
 * (dense) the b-th dh×dh matrix of an array. */
struct ssa_operand {
    const char *base;
    int64_t ld;
    int32_t es; /* bytes per element */
    bool dense;
};

enum { SSA_MAX_OPERANDS = 9 };
struct ssa_operands {
    ssa_operand op[SSA_MAX_OPERANDS];
    int count;
};

/* ptrs[j·pairs + b] = the address of operand j for pair b */
__global__ void ssa_pointers_kernel(ssa_operands ops, int64_t pairs, int32_t heads, int32_t n, int32_t dh,
                                    const void **ptrs)
{
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= pairs) return;
    const int64_t t = b / heads, h = b % heads;
    for (int j = 0; j < ops.count; j++) {
        const ssa_operand o = ops.op[j];
        const int64_t at = o.dense ? b * dh * dh : t * n * o.ld + h * dh;
        ptrs[j * pairs + b] = o.base + at * o.es;
    }
}

/* M (fp32) as M_hi + M_lo in the 16-bit type T */
template <class T> __global__ void ssa_split_kernel(int64_t n, const float *m, T *hi, T *lo)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        const T h = sf_narrow<T>(m[i]);
        hi[i] = h;
        lo[i] = sf_narrow<T>(m[i] - sf_widen(h));
    }
}

/* The workspace of one call, byte offsets: the pointer arrays, M (fp32 where the forward splits it), its parts, G
 * (backward), Y in fp32 (forward with split M). */
struct ssa_layout {
    int64_t pairs, dh;
    bool split;
    size_t ptrs, m, parts, g, yf, bytes;
};

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

static ssa_layout ssa_plan(sf_scalar act, const sf_token_shape *sh, int32_t heads, bool backward)
{
    ssa_layout L = {};
    L.pairs = sh->tb * heads;
    L.dh = sh->d / heads;
    L.split = !backward && sh->n > exact_counts(act);
    const size_t es = sf_scalar_size(act), mats = (size_t)(L.pairs * L.dh * L.dh);
    size_t at = 0;
    L.ptrs = at, at += align256(SSA_MAX_OPERANDS * (size_t)L.pairs * sizeof(void *));
    L.m = at, at += align256(mats * (L.split ? sizeof(float) : es));
    L.parts = at, at += L.split ? align256(2 * mats * es) : 0;
    L.g = at, at += backward ? align256(mats * es) : 0;
    L.yf = at, at += L.split ? align256((size_t)(sh->tb * sh->n * sh->d) * sizeof(float)) : 0;
    L.bytes = at;
    return L;
}

size_t sf_cuda_op_ssa_workspace(sf_backend *be, const sf_token_shape *sh, int32_t heads, bool backward)
{
    if (!sh || sh->tb < 1 || sh->n < 1 || sh->d < 1 || heads < 1 || sh->d % heads) return 0; /* the op reports it */
    return ssa_plan(sf_cuda_ctx_of(be)->act, sh, heads, backward).bytes;
}

/* One call: its shape, workspace (w, as L lays it out), the pairs' operand arrays and the storage type. */
struct ssa_call {
    sf_cuda_ctx *c;
    ssa_layout L;
    char *w;
    const void **ptrs;
    size_t es;        /* bytes per stored element */
    cudaDataType_t t; /* the storage type's cuBLAS name */
    int n, d, dh, heads, ld;
};

static ssa_operand token_operand(const void *p, int64_t ld, size_t es) { return {(const char *)p, ld, (int32_t)es, false}; }
static ssa_operand pair_operand(const void *p, size_t es) { return {(const char *)p, 0, (int32_t)es, true}; }

/* Checks the shape and lays out the call; *none: no pairs (tb = 0), nothing to do. */
static sf_status ssa_begin(sf_backend *be, const char *op, const sf_token_shape *sh, int32_t heads, int64_t ld,
                           bool backward, void *ws, ssa_call *k, bool *none)
{
    SF_TRY(sf_ssa_check(op, sh, heads, ld));
    *none = sh->tb == 0;
    if (*none) return SF_OK;
    k->c = sf_cuda_ctx_of(be);
    k->L = ssa_plan(k->c->act, sh, heads, backward);
    if (k->L.pairs > INT_MAX)
        return sf_fail(SF_ERR_INVALID, "%s: %lld (set, head) pairs pass cuBLAS's batch count", op, (long long)k->L.pairs);
    if (!ws) return sf_fail(SF_ERR_INVALID, "%s: workspace is NULL (give it ssa_workspace bytes)", op);
    k->w = (char *)ws;
    k->ptrs = (const void **)(k->w + k->L.ptrs);
    k->es = sf_scalar_size(k->c->act);
    k->t = sf_cuda_blas_type(k->c->act);
    k->n = sh->n, k->d = sh->d, k->dh = (int)k->L.dh, k->heads = heads, k->ld = (int)ld;
    return SF_OK;
}

/* Writes the pointer arrays of the operands (at most SSA_MAX_OPERANDS), operand j's at ptrs + j·pairs. */
static sf_status ssa_pointers(const ssa_call *k, std::initializer_list<ssa_operand> list)
{
    ssa_operands ops = {};
    for (const ssa_operand &o : list) ops.op[ops.count++] = o;
    ssa_pointers_kernel<<<sf_cuda_blocks(k->L.pairs, 128), 128, 0, k->c->stream>>>(ops, k->L.pairs, k->heads, k->n,
                                                                                   k->dh, k->ptrs);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

/* C[b] = alpha·op(A[b])·op(B[b]) + beta·C[b] over every pair, with the arrays of operands ia, ib, ic, A and B of
 * the storage type, C of ct. */
static sf_status ssa_gemm(const ssa_call *k, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int kk,
                          float alpha, int ia, int lda, int ib, int ldb, float beta, int ic, cudaDataType_t ct, int ldc,
                          cublasComputeType_t compute)
{
    const int64_t P = k->L.pairs;
    SF_CUBLAS_CHECK(cublasGemmBatchedEx(k->c->cublas, ta, tb, m, n, kk, &alpha, k->ptrs + ia * P, k->t, lda,
                                        k->ptrs + ib * P, k->t, ldb, &beta, (void *const *)(k->ptrs + ic * P), ct, ldc,
                                        (int)P, compute, CUBLAS_GEMM_DEFAULT));
    return SF_OK;
}

/* M = Kᵀ·V (Mᶜ = Vᶜ·Kᶜᵀ) into operand im, of type ct: exact in every format (file comment), so fp32 runs FMA, never
 * TF32, whatever the backend's precision. */
static cublasComputeType_t exact_compute(const ssa_call *k)
{
    return k->c->act == SF_SCALAR_F32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
}

static sf_status ssa_counts(const ssa_call *k, int iv, int ik, int im, cudaDataType_t ct)
{
    return ssa_gemm(k, CUBLAS_OP_N, CUBLAS_OP_T, k->dh, k->dh, k->n, 1.0f, iv, k->ld, ik, k->ld, 0.0f, im, ct, k->dh,
                    exact_compute(k));
}

sf_status sf_cuda_op_ssa_forward(sf_backend *be, const sf_token_shape *sh, int32_t heads, float scale, int64_t ld,
                                 const float *q, const float *k, const float *v, float *y, void *ws)
{
    ssa_call call = {};
    bool none = true;
    SF_TRY(ssa_begin(be, "SSA forward", sh, heads, ld, false, ws, &call, &none));
    if (none) return SF_OK;
    const ssa_layout &L = call.L;
    const size_t es = call.es;
    const int dh = call.dh;
    char *w = call.w;
    enum { V, K, M, Q, Y, MHI, MLO };
    if (!L.split) {
        SF_TRY(ssa_pointers(&call, {token_operand(v, ld, es), token_operand(k, ld, es), pair_operand(w + L.m, es),
                                    token_operand(q, ld, es), token_operand(y, call.d, es)}));
        SF_TRY(ssa_counts(&call, V, K, M, call.t));
        return ssa_gemm(&call, CUBLAS_OP_N, CUBLAS_OP_N, dh, call.n, dh, scale, M, dh, Q, call.ld, 0.0f, Y, call.t,
                        call.d, exact_compute(&call));
    }
    /* more tokens than the 16-bit type's integers: M in fp32, Y = scale·Q·M_hi + scale·Q·M_lo in fp32 */
    float *yf = (float *)(w + L.yf);
    const int64_t mats = L.pairs * L.dh * L.dh;
    SF_TRY(ssa_pointers(&call, {token_operand(v, ld, es), token_operand(k, ld, es), pair_operand(w + L.m, 4),
                                token_operand(q, ld, es), token_operand(yf, call.d, 4), pair_operand(w + L.parts, es),
                                pair_operand(w + L.parts + mats * es, es)}));
    SF_TRY(ssa_counts(&call, V, K, M, CUDA_R_32F));
    SF_TRY(sf_cuda_with_act(call.c->act, [&](auto tag) {
        using T = decltype(tag);
        ssa_split_kernel<T><<<sf_cuda_blocks(mats, 256), 256, 0, call.c->stream>>>(
            mats, (const float *)(w + L.m), (T *)(w + L.parts), (T *)(w + L.parts + mats * es));
        SF_CUDA_LAUNCHED();
        return SF_OK;
    }));
    for (int part = MHI; part <= MLO; part++)
        SF_TRY(ssa_gemm(&call, CUBLAS_OP_N, CUBLAS_OP_N, dh, call.n, dh, scale, part, dh, Q, call.ld,
                        part == MHI ? 0.0f : 1.0f, Y, CUDA_R_32F, call.d, CUBLAS_COMPUTE_32F));
    return sf_cuda_op_convert(be, sh->tb * call.n * call.d, SF_SCALAR_F32, yf, call.c->act, y);
}

sf_status sf_cuda_op_ssa_backward(sf_backend *be, const sf_token_shape *sh, int32_t heads, float scale, int64_t ld,
                                  const float *q, const float *k, const float *v, const float *dy, float *dq,
                                  float *dk, float *dv, void *ws)
{
    ssa_call call = {};
    bool none = true;
    SF_TRY(ssa_begin(be, "SSA backward", sh, heads, ld, true, ws, &call, &none));
    if (none) return SF_OK;
    const ssa_layout &L = call.L;
    const size_t es = call.es;
    const int n = call.n, d = call.d, dh = call.dh, ldi = call.ld;
    char *w = call.w;
    const cublasComputeType_t real = CUBLAS_COMPUTE_32F; /* the backend's precision: TF32 under tf32 */
    enum { K, V, M, Q, DY, G, DQ, DK, DV };
    SF_TRY(ssa_pointers(&call, {token_operand(k, ld, es), token_operand(v, ld, es), pair_operand(w + L.m, es),
                                token_operand(q, ld, es), token_operand(dy, d, es), pair_operand(w + L.g, es),
                                token_operand(dq, ld, es), token_operand(dk, ld, es), token_operand(dv, ld, es)}));
    /* M = Kᵀ·V rebuilt, G = scale·Qᵀ·dY */
    SF_TRY(ssa_counts(&call, V, K, M, call.t));
    SF_TRY(ssa_gemm(&call, CUBLAS_OP_N, CUBLAS_OP_T, dh, dh, n, scale, DY, d, Q, ldi, 0.0f, G, call.t, dh, real));
    /* dQ = scale·dY·Mᵀ, dK = V·Gᵀ, dV = K·G */
    SF_TRY(ssa_gemm(&call, CUBLAS_OP_T, CUBLAS_OP_N, dh, n, dh, scale, M, dh, DY, d, 0.0f, DQ, call.t, ldi, real));
    SF_TRY(ssa_gemm(&call, CUBLAS_OP_T, CUBLAS_OP_N, dh, n, dh, 1.0f, G, dh, V, ldi, 0.0f, DK, call.t, ldi, real));
    return ssa_gemm(&call, CUBLAS_OP_N, CUBLAS_OP_N, dh, n, dh, 1.0f, G, dh, K, ldi, 0.0f, DV, call.t, ldi, real);
}
