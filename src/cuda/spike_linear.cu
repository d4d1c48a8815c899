/* spike_linear.cu — the event-driven linear layer on CUDA (Finkbeiner & Neftci), fixed-order sums, no atomics: the
 * forward adds, per row and 2048-column tile, the rows of a per-call Wᵀ of the active inputs; dW sums rows of dy over
 * per-input row lists (CSC, CUB scan) into dWᵀ, then transposes; dx sums W's rows of nonzero dy (mask), else cuBLAS.
 * Sums in the CPU op's order and operations: fp32 results equal the CPU's. W, Wᵀ, x, y, dy, dx of the activation type
 * T, summed in float and rounded once; dW, dWᵀ float. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"
#include "cuda/spikes.cuh"

#include <cub/device/device_scan.cuh>

enum { THREADS = 256, COLS = 8, TILE_COLS = COLS * THREADS, ROW_CHUNK = 64 };
/* dW: a block per input and tile of WG_TILE columns, WG_AHEAD rows of dy loaded before they are added: an input that
 * fires at most steps has a list as long as dy, which one SM alone would read at a fraction of the card's bandwidth. */
enum { WG_COLS = 2, WG_TILE = WG_COLS * THREADS, WG_AHEAD = 8 };

template <class E> __global__ void transpose_kernel(int64_t rows, int64_t cols, const E *a, E *at)
{
    __shared__ E tile[32][33];
    const int64_t c0 = (int64_t)blockIdx.x * 32, r0 = (int64_t)blockIdx.y * 32;
    for (int k = threadIdx.y; k < 32; k += 8) {
        const int64_t r = r0 + k, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[k][threadIdx.x] = a[r * cols + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += 8) {
        const int64_t c = c0 + k, r = r0 + threadIdx.x;
        if (c < cols && r < rows) at[c * rows + r] = tile[threadIdx.x][k];
    }
}

sf_status sf_cuda_transpose(sf_cuda_ctx *c, sf_scalar t, int64_t rows, int64_t cols, const void *a, void *at)
{
    if (rows == 0 || cols == 0) return SF_OK;
    if ((rows + 31) / 32 > 65535 || (cols + 31) / 32 > INT32_MAX)
        return sf_fail(SF_ERR_INVALID, "transpose: %lld x %lld is too large", (long long)rows, (long long)cols);
    return sf_cuda_with_act(t, [&](auto tag) {
        using E = decltype(tag);
        const dim3 grid((unsigned)((cols + 31) / 32), (unsigned)((rows + 31) / 32));
        transpose_kernel<E><<<grid, dim3(32, 8), 0, c->stream>>>(rows, cols, (const E *)a, (E *)at);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

/* A row's columns [j0, j0 + TILE_COLS): thread t holds j0 + t + q·THREADS. */
__device__ __forceinline__ bool col_ok(int64_t j0, int q, int32_t out)
{
    return j0 + threadIdx.x + (int64_t)q * THREADS < out;
}

template <class T>
__global__ void __launch_bounds__(THREADS)
    forward_kernel(int32_t in, int32_t out, sf_spikes x, const T *wt, const float *b, T *y)
{
    __shared__ int list[SF_SPIKE_SEG];
    const int64_t tiles = (out + TILE_COLS - 1) / TILE_COLS, r = blockIdx.x / tiles,
                  j0 = blockIdx.x % tiles * TILE_COLS;
    float acc[COLS];
#pragma unroll
    for (int q = 0; q < COLS; q++) acc[q] = 0.0f;
    for (int64_t g = 0; g < (in + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG; g++) {
        const int k = sf_cuda_stage_segment(x, in, r, g, list);
        __syncthreads();
        for (int m = 0; m < k; m++) {
            const T *wr = wt + (int64_t)list[m] * out + j0 + threadIdx.x;
#pragma unroll
            for (int q = 0; q < COLS; q++)
                if (col_ok(j0, q, out)) acc[q] += sf_widen(wr[q * THREADS]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < COLS; q++) {
        const int64_t j = j0 + threadIdx.x + (int64_t)q * THREADS;
        if (j < out) y[r * out + j] = sf_narrow<T>(b ? acc[q] + b[j] : acc[q]);
    }
}

/* The scratch: Wᵀ (act type) or dWᵀ (float), then the CSC of x (row indices, per-chunk counts turned offsets, totals, column starts)
 * and CUB's scan storage. */
struct sl_ws {
    void *t;
    int32_t *rowidx, *cnt, *total, *colptr;
    void *scan;
    size_t scan_bytes;
};

static size_t up(size_t n) { return (n + 255) & ~(size_t)255; }

static size_t layout(int64_t rows, int32_t in, int32_t out, void *base, sl_ws *w)
{
    size_t scan_bytes = 0;
    cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, (int32_t *)NULL, (int32_t *)NULL, in + 1);
    const int64_t chunks = (rows + ROW_CHUNK - 1) / ROW_CHUNK;
    const size_t sizes[] = {(size_t)in * (size_t)out * 4, (size_t)rows * (size_t)in * 4, (size_t)chunks * (size_t)in * 4,
                            (size_t)(in + 1) * 4, (size_t)(in + 1) * 4, scan_bytes};
    char *p = (char *)base;
    void *ptr[6];
    size_t total = 0;
    for (int i = 0; i < 6; i++) {
        ptr[i] = p ? p + total : NULL;
        total += up(sizes[i] ? sizes[i] : 4);
    }
    if (w) *w = sl_ws{ptr[0], (int32_t *)ptr[1], (int32_t *)ptr[2], (int32_t *)ptr[3], (int32_t *)ptr[4],
                      ptr[5], scan_bytes};
    return total;
}

size_t sf_cuda_spike_linear_ws(int64_t rows, int32_t in, int32_t out) { return layout(rows, in, out, NULL, NULL); }

size_t sf_cuda_op_spike_linear_workspace(sf_backend *be, int64_t rows, int32_t in, int32_t out)
{
    return sf_cuda_spike_linear_ws(rows, in, out);
}

/* Grids of one block per row (or input) and column tile; the weight gradient's lists index with int32. */
static sf_status check_shape(const char *op, int64_t rows, int32_t in, int32_t out, bool lists)
{
    const int64_t tiles = (out + TILE_COLS - 1) / TILE_COLS;
    bool ok = rows >= 0 && in > 0 && out > 0 && rows * tiles <= INT32_MAX;
    if (lists) ok = ok && (int64_t)in * tiles <= INT32_MAX && (rows + ROW_CHUNK - 1) / ROW_CHUNK <= 65535 &&
                    rows * (int64_t)in <= INT32_MAX;
    if (!ok)
        return sf_fail(SF_ERR_INVALID, "%s: shape rows=%lld in=%d out=%d is empty or too large", op, (long long)rows,
                       in, out);
    return SF_OK;
}

sf_status sf_cuda_op_spike_linear_forward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const sf_spikes *x,
                                          const float *w, const float *b, float *y, void *ws)
{
    SF_TRY(check_shape("spike linear forward", rows, in, out, false));
    if (!x->idx || !x->cnt) return sf_fail(SF_ERR_INVALID, "spike linear forward: the input has no active lists");
    if (rows == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    sl_ws s;
    layout(rows, in, out, ws, &s);
    SF_TRY(sf_cuda_transpose(c, c->act, out, in, w, s.t));
    const int64_t tiles = (out + TILE_COLS - 1) / TILE_COLS;
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        forward_kernel<T><<<(unsigned)(rows * tiles), THREADS, 0, c->stream>>>(in, out, *x, (const T *)s.t, b, (T *)y);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

/* CSC pass 1 and 3: warp w of a block walks bits word blockIdx.x·8 + w of the rows of chunk blockIdx.y, a lane per
 * input. Counting, it writes the chunk's count of each input; filling, it writes the rows from the input's offset. */
template <bool FILL>
__global__ void csc_kernel(int64_t rows, int32_t in, const uint32_t *x, int32_t *cnt, const int32_t *colptr,
                           int32_t *rowidx)
{
    const int64_t words = (in + 31) / 32, w = (int64_t)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (w >= words) return; /* whole warps: no barrier here */
    const int64_t i = w * 32 + lane, c = blockIdx.y, r1 = min(rows, (c + 1) * ROW_CHUNK);
    if (!FILL) {
        int k = 0;
        for (int64_t r = c * ROW_CHUNK; r < r1; r++) k += (x[r * words + w] >> lane) & 1u;
        if (i < in) cnt[c * in + i] = k;
        return;
    }
    if (i >= in) return;
    int32_t pos = colptr[i] + cnt[c * in + i];
    for (int64_t r = c * ROW_CHUNK; r < r1; r++)
        if ((x[r * words + w] >> lane) & 1u) rowidx[pos++] = (int32_t)r;
}

/* Per input: the chunk counts become offsets within its list, their sum its length (total[in] = 0 for the scan). */
__global__ void chunk_offsets_kernel(int64_t chunks, int32_t in, int32_t *cnt, int32_t *total)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i > in) return;
    int32_t run = 0;
    for (int64_t c = 0; i < in && c < chunks; c++) {
        const int32_t v = cnt[c * in + i];
        cnt[c * in + i] = run;
        run += v;
    }
    total[i] = run;
}

/* dWᵀ[i, j] = Σ over the rows r in input i's list (ascending) of dy[r, j]. */
template <class T>
__global__ void __launch_bounds__(THREADS)
    wgrad_kernel(int32_t out, const int32_t *colptr, const int32_t *rowidx, const T *dy, float *dwt)
{
    __shared__ int list[THREADS];
    const int64_t tiles = (out + WG_TILE - 1) / WG_TILE, i = blockIdx.x / tiles, j0 = blockIdx.x % tiles * WG_TILE;
    float acc[WG_COLS];
#pragma unroll
    for (int q = 0; q < WG_COLS; q++) acc[q] = 0.0f;
    const int32_t k0 = colptr[i], k1 = colptr[i + 1];
    for (int32_t base = k0; base < k1; base += THREADS) {
        const int k = min(THREADS, k1 - base);
        if ((int)threadIdx.x < k) list[threadIdx.x] = rowidx[base + threadIdx.x];
        __syncthreads();
        int m = 0;
        for (; m + WG_AHEAD <= k; m += WG_AHEAD) { /* the loads first, then the additions in list order */
            float v[WG_AHEAD][WG_COLS];
#pragma unroll
            for (int u = 0; u < WG_AHEAD; u++) {
                const T *d = dy + (int64_t)list[m + u] * out + j0 + threadIdx.x;
#pragma unroll
                for (int q = 0; q < WG_COLS; q++) v[u][q] = col_ok(j0, q, out) ? sf_widen(d[q * THREADS]) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < WG_AHEAD; u++)
#pragma unroll
                for (int q = 0; q < WG_COLS; q++) acc[q] += v[u][q];
        }
        for (; m < k; m++) {
            const T *d = dy + (int64_t)list[m] * out + j0 + threadIdx.x;
#pragma unroll
            for (int q = 0; q < WG_COLS; q++)
                if (col_ok(j0, q, out)) acc[q] += sf_widen(d[q * THREADS]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < WG_COLS; q++) {
        const int64_t j = j0 + threadIdx.x + (int64_t)q * THREADS;
        if (j < out) dwt[i * out + j] = acc[q];
    }
}

sf_status sf_cuda_spike_weight_grad(sf_cuda_ctx *c, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                    const float *dy, float *dw, void *ws)
{
    SF_TRY(check_shape("spike weight gradient", rows, in, out, true));
    if (rows == 0) return sf_cuda_zero_f32(c, dw, (int64_t)in * out);
    sl_ws s;
    layout(rows, in, out, ws, &s);
    const int64_t words = (in + 31) / 32, chunks = (rows + ROW_CHUNK - 1) / ROW_CHUNK;
    const dim3 grid((unsigned)((words + 7) / 8), (unsigned)chunks);
    csc_kernel<false><<<grid, THREADS, 0, c->stream>>>(rows, in, x, s.cnt, NULL, NULL);
    SF_CUDA_LAUNCHED();
    chunk_offsets_kernel<<<sf_cuda_blocks(in + 1, 256), 256, 0, c->stream>>>(chunks, in, s.cnt, s.total);
    SF_CUDA_LAUNCHED();
    size_t bytes = s.scan_bytes;
    SF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(s.scan, bytes, s.total, s.colptr, in + 1, c->stream));
    csc_kernel<true><<<grid, THREADS, 0, c->stream>>>(rows, in, x, s.cnt, s.colptr, s.rowidx);
    SF_CUDA_LAUNCHED();
    const int64_t tiles = (out + WG_TILE - 1) / WG_TILE;
    SF_TRY(sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        wgrad_kernel<T><<<(unsigned)(in * tiles), THREADS, 0, c->stream>>>(out, s.colptr, s.rowidx, (const T *)dy,
                                                                           (float *)s.t);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    }));
    return sf_cuda_transpose(c, SF_SCALAR_F32, in, out, s.t, dw);
}

/* dx[r, i] = Σ over the nonzero dy[r, j] (the mask's bits, j ascending) of dy[r, j]·W[j, i]: per segment of the
 * mask row, warp 0 lists its nonzero entries and their values, then every thread adds its columns. */
template <class T>
__global__ void __launch_bounds__(THREADS)
    masked_dx_kernel(int32_t in, int32_t out, const T *w, const T *dy, sf_spikes mask, T *dx)
{
    __shared__ int list[SF_SPIKE_SEG];
    __shared__ float vals[SF_SPIKE_SEG];
    __shared__ int len;
    const int64_t tiles = (in + TILE_COLS - 1) / TILE_COLS, r = blockIdx.x / tiles, i0 = blockIdx.x % tiles * TILE_COLS;
    const int64_t wo = (out + 31) / 32;
    float acc[COLS];
#pragma unroll
    for (int q = 0; q < COLS; q++) acc[q] = 0.0f;
    for (int64_t g = 0; g < (out + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG; g++) {
        if (threadIdx.x < 32) {
            const int lane = threadIdx.x;
            const int64_t q = g * (SF_SPIKE_SEG / 32) + lane;
            const uint32_t word = lane < SF_SPIKE_SEG / 32 && q < wo ? mask.bits[r * wo + q] : 0u;
            int pos = __popc(word); /* an exclusive prefix of the words' counts */
            for (int o = 1; o < 32; o <<= 1) {
                const int v = __shfl_up_sync(0xffffffffu, pos, o);
                if (lane >= o) pos += v;
            }
            if (lane == 31) len = pos;
            pos -= __popc(word);
            for (uint32_t m = word; m; m &= m - 1, pos++) {
                const int64_t j = q * 32 + __ffs(m) - 1;
                list[pos] = (int)j;
                vals[pos] = sf_widen(dy[r * out + j]);
            }
        }
        __syncthreads();
        for (int m = 0; m < len; m++) {
            const float gv = vals[m];
            const T *wr = w + (int64_t)list[m] * in + i0 + threadIdx.x;
#pragma unroll
            for (int q = 0; q < COLS; q++)
                if (col_ok(i0, q, in)) acc[q] += gv * sf_widen(wr[q * THREADS]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int q = 0; q < COLS; q++) {
        const int64_t i = i0 + threadIdx.x + (int64_t)q * THREADS;
        if (i < in) dx[r * in + i] = sf_narrow<T>(acc[q]);
    }
}

sf_status sf_cuda_op_spike_linear_backward(sf_backend *be, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                           const float *w, const float *dy, const sf_spikes *dy_mask, float *dx,
                                           float *dw, float *db, void *ws)
{
    SF_TRY(check_shape("spike linear backward", rows, in, out, true));
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    SF_TRY(sf_cuda_spike_weight_grad(c, rows, in, out, x, dy, dw, ws));
    if (db) {
        if (rows == 0) SF_TRY(sf_cuda_zero_f32(c, db, out));
        else SF_TRY(sf_cuda_column_sums(c, rows, out, dy, db));
    }
    if (!dx || rows == 0) return SF_OK;
    if (!dy_mask) return sf_cuda_linear_input_grad(c, rows, in, out, w, dy, dx);
    const int64_t tiles = (in + TILE_COLS - 1) / TILE_COLS;
    if (rows * tiles > INT32_MAX) return sf_fail(SF_ERR_INVALID, "spike linear backward: %lld rows are too many", (long long)rows);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        masked_dx_kernel<T><<<(unsigned)(rows * tiles), THREADS, 0, c->stream>>>(in, out, (const T *)w, (const T *)dy,
                                                                                 *dy_mask, (T *)dx);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}
