/* spikes.cu — the CUDA conversions between 0/1 tensors of the activation type (act.cuh) and their compact form
 * (core/spikes.h): one block per segment of a row makes its bits, list and count (spikes_compact, and the masks of
 * nonzero gradients), and spikes_expand writes the values back from the bits. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"
#include "cuda/spikes.cuh"

/* Rows a compaction block takes: their loads are all in flight before the first row is emitted (a block per row
 * and segment, one load per thread, spent its time waiting on the loads: 38 µs for W4's 6400 rows of 700). */
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

sf_status sf_cuda_spikes_compact(sf_cuda_ctx *c, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                 float *count, float *flag)
{
    if (rows < 0 || n < 0) return sf_fail(SF_ERR_INVALID, "spikes_compact: rows = %lld, n = %lld", (long long)rows, (long long)n);
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
