/* token_ops.cu — per-channel products over a set's tokens (core/transformer.h): token_sum (SDSA's Σ_n k·v, Σ_n dy·q;
 * a token mean) and token_scale (q·m, the gradients through the sum), in the activation type, computed in float.
 * token_sum's 8 lanes each sum every 8th token in order, added in order (no atomics): 0/1 inputs give their exact count
 * (below 2^24) rounded once; token_scale is (alpha·g)·b as the CPU's. transpose: the SPS stem's planes into tokens
 * through a shared tile (exact). */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

enum { TOKEN_LANES = 8 };

template <class T, bool B>
__global__ void token_sum_kernel(int64_t tb, int32_t n, int32_t d, float alpha, const T *a, int64_t lda, const T *b,
                                 int64_t ldb, T *out)
{
    __shared__ float lanes[TOKEN_LANES][33];
    const int32_t c = blockIdx.x * 32 + threadIdx.x;
    for (int64_t t = blockIdx.y; t < tb; t += gridDim.y) {
        float s = 0.0f;
        if (c < d)
            for (int32_t i = threadIdx.y; i < n; i += TOKEN_LANES) {
                const int64_t row = t * n + i;
                const float v = sf_widen(a[row * lda + c]);
                s += B ? v * sf_widen(b[row * ldb + c]) : v;
            }
        lanes[threadIdx.y][threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.y == 0 && c < d) {
            for (int y = 1; y < TOKEN_LANES; y++) s += lanes[y][threadIdx.x];
            out[t * d + c] = sf_narrow<T>(alpha * s);
        }
        __syncthreads();
    }
}

sf_status sf_cuda_op_token_sum(sf_backend *be, const sf_token_shape *sh, float alpha, const float *a, int64_t lda,
                               const float *b, int64_t ldb, float *out)
{
    SF_TRY(sf_token_shape_check("token sum", sh));
    SF_TRY(sf_token_ld_check("token sum", "lda", lda, sh->d));
    if (b) SF_TRY(sf_token_ld_check("token sum", "ldb", ldb, sh->d));
    if (sh->tb == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    const dim3 grid((unsigned)((sh->d + 31) / 32), (unsigned)(sh->tb < 65535 ? sh->tb : 65535));
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        if (b)
            token_sum_kernel<T, true><<<grid, dim3(32, TOKEN_LANES), 0, c->stream>>>(
                sh->tb, sh->n, sh->d, alpha, (const T *)a, lda, (const T *)b, ldb, (T *)out);
        else
            token_sum_kernel<T, false><<<grid, dim3(32, TOKEN_LANES), 0, c->stream>>>(
                sh->tb, sh->n, sh->d, alpha, (const T *)a, lda, nullptr, 0, (T *)out);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

/* A thread per channel over every gridDim.y-th token row; out may be b. */
template <class T, bool B>
__global__ void token_scale_kernel(int64_t rows, int32_t n, int32_t d, float alpha, const T *g, const T *b,
                                   int64_t ldb, T *out, int64_t ldo)
{
    const int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= d) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float s = alpha * sf_widen(g[(r / n) * d + c]);
        out[r * ldo + c] = sf_narrow<T>(B ? s * sf_widen(b[r * ldb + c]) : s);
    }
}

sf_status sf_cuda_op_token_scale(sf_backend *be, const sf_token_shape *sh, float alpha, const float *g,
                                 const float *b, int64_t ldb, float *out, int64_t ldo)
{
    SF_TRY(sf_token_shape_check("token scale", sh));
    SF_TRY(sf_token_ld_check("token scale", "ldo", ldo, sh->d));
    if (b) SF_TRY(sf_token_ld_check("token scale", "ldb", ldb, sh->d));
    const int64_t rows = sh->tb * sh->n;
    if (rows == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    const dim3 grid = sf_cuda_row_grid(rows, sh->d, 128);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        if (b)
            token_scale_kernel<T, true><<<grid, 128, 0, c->stream>>>(rows, sh->n, sh->d, alpha, (const T *)g,
                                                                     (const T *)b, ldb, (T *)out, ldo);
        else
            token_scale_kernel<T, false><<<grid, 128, 0, c->stream>>>(rows, sh->n, sh->d, alpha, (const T *)g,
                                                                      nullptr, 0, (T *)out, ldo);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

enum { TILE = 32, TILE_ROWS = 8 };

/* Block (x, y) of matrix z moves the 32×32 tile at rows 32·y, cols 32·x; a padded column keeps the banks apart. */
template <class T>
__global__ void transpose_kernel(int64_t batch, int64_t rows, int64_t cols, const T *x, T *y)
{
    __shared__ T tile[TILE][TILE + 1];
    for (int64_t z = blockIdx.z; z < batch; z += gridDim.z) {
        const T *xz = x + z * rows * cols;
        T *yz = y + z * rows * cols;
        const int64_t c = (int64_t)blockIdx.x * TILE + threadIdx.x;
        for (int k = threadIdx.y; k < TILE; k += TILE_ROWS) {
            const int64_t r = (int64_t)blockIdx.y * TILE + k;
            if (r < rows && c < cols) tile[k][threadIdx.x] = xz[r * cols + c];
        }
        __syncthreads();
        const int64_t r = (int64_t)blockIdx.y * TILE + threadIdx.x;
        for (int k = threadIdx.y; k < TILE; k += TILE_ROWS) {
            const int64_t cc = (int64_t)blockIdx.x * TILE + k;
            if (r < rows && cc < cols) yz[cc * rows + r] = tile[threadIdx.x][k];
        }
        __syncthreads();
    }
}

sf_status sf_cuda_op_transpose(sf_backend *be, int64_t batch, int64_t rows, int64_t cols, const float *x, float *y)
{
    if (batch < 0 || rows < 0 || cols < 0)
        return sf_fail(SF_ERR_INVALID, "transpose: shape %lld x %lld x %lld must not be negative", (long long)batch,
                       (long long)rows, (long long)cols);
    if (batch == 0 || rows == 0 || cols == 0) return SF_OK;
    if ((cols + TILE - 1) / TILE > INT32_MAX || (rows + TILE - 1) / TILE > 65535)
        return sf_fail(SF_ERR_UNSUPPORTED, "transpose: %lld x %lld matrices exceed the grid", (long long)rows,
                       (long long)cols);
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    const dim3 grid((unsigned)((cols + TILE - 1) / TILE), (unsigned)((rows + TILE - 1) / TILE),
                    (unsigned)(batch < 65535 ? batch : 65535));
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        transpose_kernel<T><<<grid, dim3(TILE, TILE_ROWS), 0, c->stream>>>(batch, rows, cols, (const T *)x, (T *)y);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}
