/* conv_gemm.cu — 2-D convolution as im2col/col2im kernels and one cuBLAS GEMM per chunk of images; conv.cu times it
 * against cuDNN per shape and op (cuDNN's FMA kernels for strided 3×3 convolutions are slow). A chunk of nb images
 * (P = oh·ow, K = cin·k·k): col[K][nb·P], NCHW y and dy transposed to [cout][nb·P] ("CNHW"); an NHWC y, dy
 * (sf_conv_shape.y_nhwc) is [nb·P][cout] as it lies, used in place. x, dx NCHW. Tensors in the activation type T
 * (taps summed in float); dW fp32. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

#include <limits.h>

/* col[r][j] = x[img][ci][oy·s − pad + kh][ox·s − pad + kw] (0 in the padding), r = (ci, kh, kw), j = (img, oy, ox).
 * One grid row per (ci, kh); each thread writes the k rows of its kw for one j, so the index arithmetic (32-bit:
 * sf_cuda_conv_gemm_chunk keeps a chunk's tensors under 2^31 elements) is paid once per k elements. */
template <class T>
__global__ void im2col_kernel(const T *__restrict__ x, T *__restrict__ col, sf_conv_shape sh, int cols)
{
    const int ci = blockIdx.y / sh.k, kh = blockIdx.y - ci * sh.k, p_img = sh.oh * sh.ow;
    T *out = col + (int64_t)blockIdx.y * sh.k * cols;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += gridDim.x * blockDim.x) {
        const int img = j / p_img, p = j - img * p_img, oy = p / sh.ow, ox = p - oy * sh.ow;
        const int iy = oy * sh.stride - sh.pad + kh, ix0 = ox * sh.stride - sh.pad;
        const bool row_in = iy >= 0 && iy < sh.h;
        const T *src = x + ((img * sh.cin + ci) * sh.h + iy) * sh.w;
        for (int kw = 0; kw < sh.k; kw++) {
            const int ix = ix0 + kw;
            out[(int64_t)kw * cols + j] = row_in && ix >= 0 && ix < sh.w ? src[ix] : sf_narrow<T>(0.0f);
        }
    }
}

/* dx[img][ci][iy][ix] = Σ of the col entries im2col took from that pixel: a gather (no atomics), each thread
 * owning one input pixel of the chunk and visiting only the taps that land on the output grid. */
template <class T>
__global__ void col2im_kernel(const T *__restrict__ col, T *__restrict__ dx, sf_conv_shape sh, int nb)
{
    const int hw = sh.h * sh.w, total = nb * sh.cin * hw, cols = nb * sh.oh * sh.ow;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int plane = i / hw, q = i - plane * hw, iy = q / sh.w, ix = q - iy * sh.w;
        const int img = plane / sh.cin, ci = plane - img * sh.cin, base = img * sh.oh * sh.ow;
        const int ty0 = iy + sh.pad, tx0 = ix + sh.pad;
        float sum = 0.0f;
        for (int kh = ty0 % sh.stride; kh < sh.k && kh <= ty0; kh += sh.stride) {
            const int oy = (ty0 - kh) / sh.stride;
            if (oy >= sh.oh) continue;
            for (int kw = tx0 % sh.stride; kw < sh.k && kw <= tx0; kw += sh.stride) {
                const int ox = (tx0 - kw) / sh.stride;
                if (ox >= sh.ow) continue;
                sum += sf_widen(col[(int64_t)((ci * sh.k + kh) * sh.k + kw) * cols + base + oy * sh.ow + ox]);
            }
        }
        dx[i] = sf_narrow<T>(sum);
    }
}

/* Between NCHW y[img][co][p] and CNHW yc[co][img·P + p] for nb images; towards NCHW the bias (if any) is added. */
template <class T>
__global__ void cnhw_kernel(const T *__restrict__ src, T *__restrict__ dst, const float *__restrict__ bias, int cout,
                            int p_img, int nb, bool to_nchw)
{
    const int total = nb * cout * p_img;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int t = i / p_img, p = i - t * p_img, img = t / cout, co = t - img * cout;
        const int ci = (co * nb + img) * p_img + p;
        if (to_nchw)
            dst[i] = bias ? sf_narrow<T>(sf_widen(src[ci]) + bias[co]) : src[ci];
        else
            dst[ci] = src[i];
    }
}

static int64_t rows_k(const sf_conv_shape *sh)
{
    return (int64_t)sh->cin * sh->k * sh->k;
}

/* col, and where y is NCHW its CNHW transpose */
size_t sf_cuda_conv_gemm_ws(const sf_conv_shape *sh, int64_t nb, size_t es)
{
    return (size_t)((rows_k(sh) + (sh->y_nhwc ? 0 : sh->cout)) * nb * sh->oh * sh->ow) * es;
}

int64_t sf_cuda_conv_gemm_chunk(const sf_conv_shape *sh, size_t cap, size_t es)
{
    const size_t one = sf_cuda_conv_gemm_ws(sh, 1, es);
    /* im2col runs one grid row per (ci, kh) (≤ 65535); cuBLAS takes int sizes */
    if (one == 0 || one > cap || rows_k(sh) > 65535) return 0;
    int64_t most = (int64_t)(cap / one);
    if (most > sh->n) most = sh->n;
    /* the kernels index a chunk's x, y and im2col columns in 32 bits */
    const int64_t per_img = (int64_t)sh->cin * sh->h * sh->w > (int64_t)sh->cout * sh->oh * sh->ow
                                ? (int64_t)sh->cin * sh->h * sh->w
                                : (int64_t)sh->cout * sh->oh * sh->ow;
    if (most * per_img > INT_MAX) most = INT_MAX / per_img;
    if (most < 1) return 0;
    const int64_t chunks = (sh->n + most - 1) / most;
    return (sh->n + chunks - 1) / chunks; /* equal chunks, the last one possibly shorter */
}

static unsigned grid_for(sf_cuda_ctx *c, int64_t n)
{
    unsigned b = sf_cuda_blocks(n, 256), most = (unsigned)c->num_sms * 16;
    return b < most ? b : most;
}

template <class T> static sf_status im2col(sf_cuda_ctx *c, const sf_conv_shape *sh, const T *x, int64_t nb, T *col)
{
    const int64_t cols = nb * sh->oh * sh->ow;
    unsigned gx = grid_for(c, cols) / 8 + 1;
    im2col_kernel<T><<<dim3(gx, (unsigned)(sh->cin * sh->k)), 256, 0, c->stream>>>(x, col, *sh, (int)cols);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

/* Between an NCHW y (or dy) and yc; towards y the bias (if any) is added. */
template <class T>
static sf_status cnhw(sf_cuda_ctx *c, const sf_conv_shape *sh, const T *src, T *dst, const float *bias, int64_t nb,
                      bool to_nchw)
{
    cnhw_kernel<T><<<grid_for(c, nb * sh->cout * sh->oh * sh->ow), 256, 0, c->stream>>>(
        src, dst, bias, sh->cout, sh->oh * sh->ow, (int)nb, to_nchw);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

/* Row-major [a][b] matrices are column-major b×a ones to cuBLAS: every product below is written that way. An NHWC
 * y (or dy) of a chunk is row-major [nb·P][cout]. The bias is added only to an NCHW y. */
template <class T>
static sf_status forward(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, const T *x, const T *w,
                         const float *b, T *y, T *ws)
{
    const int64_t img_x = (int64_t)sh->cin * sh->h * sh->w, p_img = (int64_t)sh->oh * sh->ow, K = rows_k(sh);
    T *col = ws;
    for (int64_t i0 = 0; i0 < sh->n; i0 += chunk) {
        const int64_t nb = sh->n - i0 < chunk ? sh->n - i0 : chunk;
        const int m = (int)(nb * p_img);
        T *yi = y + i0 * sh->cout * p_img;
        SF_TRY(im2col(c, sh, x + i0 * img_x, nb, col));
        if (sh->y_nhwc) { /* y[nb·P][cout] = col[K][nb·P]ᵀ · w[cout][K]ᵀ */
            SF_TRY(sf_cuda_gemm(c, CUBLAS_OP_T, CUBLAS_OP_T, sh->cout, m, (int)K, w, (int)K, col, m, 0.0f, yi, sh->cout,
                                false));
        } else { /* yc[cout][nb·P] = w[cout][K] · col[K][nb·P], then transposed into y */
            T *yc = ws + K * chunk * p_img;
            SF_TRY(
                sf_cuda_gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, m, sh->cout, (int)K, col, m, w, (int)K, 0.0f, yc, m, false));
            SF_TRY(cnhw(c, sh, yc, yi, b, nb, true));
        }
    }
    return SF_OK;
}

template <class T>
static sf_status backward(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, const T *x, const T *w, const T *dy,
                          T *dx, float *dw, T *ws)
{
    const int64_t img_x = (int64_t)sh->cin * sh->h * sh->w, p_img = (int64_t)sh->oh * sh->ow, K = rows_k(sh);
    T *col = ws;
    /* dy[cout][nb·P] as cuBLAS reads it: an NCHW dy's CNHW transpose, an NHWC dy ([nb·P][cout]) transposed by the
     * GEMM itself */
    const cublasOperation_t tdy = sh->y_nhwc ? CUBLAS_OP_T : CUBLAS_OP_N;
    for (int64_t i0 = 0; i0 < sh->n; i0 += chunk) {
        const int64_t nb = sh->n - i0 < chunk ? sh->n - i0 : chunk;
        const int m = (int)(nb * p_img), lddy = sh->y_nhwc ? sh->cout : m;
        const T *dyc = dy + i0 * sh->cout * p_img;
        if (!sh->y_nhwc) {
            T *dyt = ws + K * chunk * p_img;
            SF_TRY(cnhw(c, sh, dyc, dyt, (const float *)NULL, nb, false));
            dyc = dyt;
        }
        if (dw) { /* dw[cout][K] (+)= dyc[cout][nb·P] · col[K][nb·P]ᵀ in fp32, summed over the chunks */
            SF_TRY(im2col(c, sh, x + i0 * img_x, nb, col));
            SF_TRY(sf_cuda_gemm(c, CUBLAS_OP_T, tdy, (int)K, sh->cout, m, col, m, dyc, lddy, i0 ? 1.0f : 0.0f, dw,
                                (int)K, true));
        }
        if (dx) { /* dcol[K][nb·P] = w[cout][K]ᵀ · dyc[cout][nb·P], into col's place, then gathered into dx */
            SF_TRY(sf_cuda_gemm(c, tdy, CUBLAS_OP_T, m, (int)K, sh->cout, dyc, lddy, w, (int)K, 0.0f, col, m, false));
            col2im_kernel<T><<<grid_for(c, nb * img_x), 256, 0, c->stream>>>(col, dx + i0 * img_x, *sh, (int)nb);
            SF_CUDA_LAUNCHED();
        }
    }
    return SF_OK;
}

sf_status sf_cuda_conv_gemm_forward(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, const void *x,
                                    const void *w, const float *b, void *y, void *ws)
{
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        return forward<T>(c, sh, chunk, (const T *)x, (const T *)w, b, (T *)y, (T *)ws);
    });
}

sf_status sf_cuda_conv_gemm_backward(sf_cuda_ctx *c, const sf_conv_shape *sh, int64_t chunk, const void *x,
                                     const void *w, const void *dy, void *dx, float *dw, void *ws)
{
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using T = decltype(tag);
        return backward<T>(c, sh, chunk, (const T *)x, (const T *)w, (const T *)dy, (T *)dx, dw, (T *)ws);
    });
}
