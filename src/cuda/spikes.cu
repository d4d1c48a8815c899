/* spikes.cu — the CUDA conversions between 0/1 tensors of the activation type (act.cuh) and their compact form
 * (core/spikes.h): one block per segment of a row makes its bits, list and count (spikes_compact, and the masks of
 * nonzero gradients), and spikes_expand writes the values back from the bits. Rows of whole words (n a multiple of
 * 32) are one flat run of words: bits alone are packed, and values written back, 16 bytes per thread. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"
#include "cuda/spikes.cuh"

/* Rows a compaction block takes: their loads are all in flight before the first row is emitted (a row per block
 * waited on its loads: docs/notebook/perf.md, "W4rec's recurrent kernels"). */
enum { COMPACT_ROWS = 8 };

template <class T>
__global__ void __launch_bounds__(SF_SPIKE_SEG)
    compact_kernel(int64_t rows, int64_t n, const T *x, sf_spikes c, float *count, float *flag)
{
    __shared__ int wc[SF_SPIKE_SEG / 32];
    const int64_t segs = (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG;
    const int64_t r0 = blockIdx.x / segs * COMPACT_ROWS, j = blockIdx.x % segs * SF_SPIKE_SEG + threadIdx.x;
    const bool valid = j < n;
    float v[COMPACT_ROWS];
#pragma unroll
    for (int u = 0; u < COMPACT_ROWS; u++) v[u] = valid && r0 + u < rows ? sf_widen(x[(r0 + u) * n + j]) : 0.0f;
    int ones = 0;
#pragma unroll
    for (int u = 0; u < COMPACT_ROWS; u++) {
        if (r0 + u >= rows) break; /* the same for the whole block */
        if (flag && v[u] != 0.0f && v[u] != 1.0f) *flag = 1.0f; /* every writer writes the same value */
        sf_cuda_emit_row(c, n, r0 + u, j, valid, v[u] != 0.0f, wc);
        if (threadIdx.x == 0)
            for (int w = 0; w < SF_SPIKE_SEG / 32; w++) ones += wc[w];
        __syncthreads(); /* wc is rewritten for the next row */
    }
    /* one atomic per block: one per warp kept the compaction waiting on a single address */
    if (count && threadIdx.x == 0 && ones) atomicAdd(count, (float)ones);
}

/* A thread per column k < ld of a row (rows ld apart, zeros past n), over every gridDim.y-th row (sf_cuda_row_grid):
 * no 64-bit division per value. */
template <class T> __global__ void expand_kernel(int64_t rows, int64_t n, int64_t ld, const uint32_t *bits, T *y)
{
    const int64_t words = (n + 31) / 32, k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= ld) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        y[r * ld + k] = sf_narrow<T>(k < n ? (float)((bits[r * words + k / 32] >> (k % 32)) & 1u) : 0.0f);
}

/* Values per 16-byte access, and the lanes that share a word of bits. */
template <class T> struct sf_cuda_vec16 {
    static constexpr int E = 16 / (int)sizeof(T), L = 32 / E;
};

/* Bits alone, from a flat run of `words` words of values: each thread loads 16 bytes; whole warps stay in the loop for
 * the shuffle that ORs a word's parts (faster than the general kernel: docs/notebook/perf.md, "spikes as bits"). */
template <class T> __global__ void pack_kernel(int64_t words, const T *x, uint32_t *bits)
{
    constexpr int E = sf_cuda_vec16<T>::E, L = sf_cuda_vec16<T>::L;
    const int64_t chunks = words * L, step = (int64_t)gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k - lane < chunks; k += step) {
        uint32_t m = 0;
        if (k < chunks) {
            const uint4 q = __ldcs((const uint4 *)(x + k * E));
            const T *v = (const T *)&q;
#pragma unroll
            for (int e = 0; e < E; e++) m |= (uint32_t)(sf_widen(v[e]) != 0.0f) << (e + (int)(k % L) * E);
        }
#pragma unroll
        for (int o = 1; o < L; o <<= 1) m |= __shfl_xor_sync(0xffffffffu, m, o);
        if (k < chunks && k % L == 0) bits[k / L] = m;
    }
}

/* The values back from a flat run of words: 16 bytes per thread, the word shared by L neighbouring threads. */
template <class T> __global__ void unpack_kernel(int64_t words, const uint32_t *bits, T *y)
{
    constexpr int E = sf_cuda_vec16<T>::E, L = sf_cuda_vec16<T>::L;
    const int64_t chunks = words * L, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < chunks; k += step) {
        const uint32_t w = bits[k / L] >> ((int)(k % L) * E);
        uint4 q;
        T *v = (T *)&q;
#pragma unroll
        for (int e = 0; e < E; e++) v[e] = sf_narrow<T>((float)((w >> e) & 1u));
        __stcs((uint4 *)(y + k * E), q);
    }
}

/* Whether [rows, n] values at p are one flat run of words that 16-byte accesses can take. */
static bool flat_words(int64_t n, const void *p) { return n % 32 == 0 && (uintptr_t)p % 16 == 0; }

/* Enough blocks of 256 for the machine; each thread loops. */
static unsigned flat_blocks(int64_t chunks) { return sf_cuda_blocks(chunks < (1 << 22) ? chunks : (1 << 22), 256); }

sf_status sf_cuda_spikes_compact(sf_cuda_ctx *c, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                 float *count, float *flag)
{
    if (rows < 0 || n < 0) return sf_fail(SF_ERR_INVALID, "spikes_compact: rows = %lld, n = %lld", (long long)rows, (long long)n);
    if (!out->idx && !out->cnt && !count && !flag && flat_words(n, x)) {
        const int64_t words = rows * n / 32;
        if (words == 0) return SF_OK;
        return sf_cuda_with_act(c->act, [&](auto tag) {
            using T = decltype(tag);
            pack_kernel<T><<<flat_blocks(words * sf_cuda_vec16<T>::L), 256, 0, c->stream>>>(words, (const T *)x,
                                                                                         out->bits);
            SF_CUDA_LAUNCHED();
            return SF_OK;
        });
    }
    const int64_t blocks = (rows + COMPACT_ROWS - 1) / COMPACT_ROWS * ((n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG);
    if (blocks == 0) return SF_OK;
    if (blocks > INT32_MAX) return sf_fail(SF_ERR_INVALID, "spikes_compact: %lld rows of %lld are too many", (long long)rows, (long long)n);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        compact_kernel<T><<<(unsigned)blocks, SF_SPIKE_SEG, 0, c->stream>>>(rows, n, (const T *)x, *out, count, flag);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

sf_status sf_cuda_op_spikes_compact(sf_backend *be, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                    float *count, float *flag)
{
    return sf_cuda_spikes_compact(sf_cuda_ctx_of(be), rows, n, x, out, count, flag);
}

sf_status sf_cuda_spikes_expand(sf_cuda_ctx *c, int64_t rows, int64_t n, const uint32_t *bits, void *y)
{
    if (rows < 0 || n < 0) return sf_fail(SF_ERR_INVALID, "spikes_expand: rows = %lld, n = %lld", (long long)rows, (long long)n);
    if (rows * n == 0) return SF_OK;
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        if (flat_words(n, y)) {
            const int64_t words = rows * n / 32;
            unpack_kernel<T><<<flat_blocks(words * sf_cuda_vec16<T>::L), 256, 0, c->stream>>>(words, bits, (T *)y);
            SF_CUDA_LAUNCHED();
            return SF_OK;
        }
        expand_kernel<T><<<sf_cuda_row_grid(rows, n, 256), 256, 0, c->stream>>>(rows, n, n, bits, (T *)y);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

sf_status sf_cuda_op_spikes_expand(sf_backend *be, int64_t rows, int64_t n, const uint32_t *bits, float *y)
{
    return sf_cuda_spikes_expand(sf_cuda_ctx_of(be), rows, n, bits, y);
}

sf_status sf_cuda_spikes_expand_bf16(sf_cuda_ctx *c, int64_t rows, int64_t n, int64_t ld, const uint32_t *bits,
                                     __nv_bfloat16 *y)
{
    if (rows * ld == 0) return SF_OK;
    expand_kernel<__nv_bfloat16><<<sf_cuda_row_grid(rows, ld, 256), 256, 0, c->stream>>>(rows, n, ld, bits, y);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}
