/* elementwise.cu — add, axpy, the spike byte conversions and SEW-ResNet's product connect functions on the backend's
 * activation type, and the NaN/Inf check (of float data: the loss and the parameter gradients). */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

template <class T> __global__ void add_kernel(int64_t n, const T *a, const T *b, T *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = sf_narrow<T>(sf_widen(a[i]) + sf_widen(b[i]));
}
template <class T> __global__ void axpy_kernel(int64_t n, float alpha, const T *x, T *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = sf_narrow<T>(sf_widen(y[i]) + alpha * sf_widen(x[i]));
}
template <class T> __global__ void u8_to_act_kernel(int64_t n, const uint8_t *x, T *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = sf_narrow<T>((float)x[i]);
}
template <class T> __global__ void act_to_u8_kernel(int64_t n, const T *x, uint8_t *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = sf_widen(x[i]) != 0.0f;
}
/* The connect functions as y = (offset + sign·a)·b: AND sign 1, offset 0; IAND sign −1, offset 1. */
template <class T> __global__ void connect_kernel(int64_t n, float sign, float offset, const T *a, const T *b, T *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = sf_narrow<T>((offset + sign * sf_widen(a[i])) * sf_widen(b[i]));
}
/* ∂y/∂a = sign·b, ∂y/∂b = offset + sign·a; da or db NULL: not written. */
template <class T>
__global__ void connect_backward_kernel(int64_t n, float sign, float offset, const T *a, const T *b, const T *dy,
                                        T *da, T *db)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        const float g = sf_widen(dy[i]);
        if (da) da[i] = sf_narrow<T>(sign * sf_widen(b[i]) * g);
        if (db) db[i] = sf_narrow<T>((offset + sign * sf_widen(a[i])) * g);
    }
}
__global__ void finite_kernel(int64_t n, const float *x, float *flag)
{
    SF_CUDA_GRID_STRIDE(i, n)
    if (!isfinite(x[i])) *flag = 1.0f; /* every writer stores the same value */
}

/* Grid-stride launches: enough blocks to fill the chip several times over, no more. */
static unsigned grid(sf_cuda_ctx *c, int64_t n)
{
    unsigned b = sf_cuda_blocks(n, 256), cap = 32u * (unsigned)c->num_sms;
    return b < cap ? b : cap;
}

/* Launches kernel<T> over n elements, T the backend's activation type (the arguments may name it). */
#define SF_EW_ACT_LAUNCH(kernel, be, n, ...)                                                                           \
    do {                                                                                                               \
        if ((n) == 0) return SF_OK;                                                                                    \
        sf_cuda_ctx *c_ = sf_cuda_ctx_of(be);                                                                          \
        return sf_cuda_with_act(c_->act, [&](auto tag) {                                                               \
            using T = decltype(tag);                                                                                   \
            kernel<T><<<grid(c_, n), 256, 0, c_->stream>>>(n, __VA_ARGS__);                                            \
            SF_CUDA_LAUNCHED();                                                                                        \
            return SF_OK;                                                                                              \
        });                                                                                                            \
    } while (0)

sf_status sf_cuda_op_add(sf_backend *be, int64_t n, const float *a, const float *b, float *y)
{
    SF_EW_ACT_LAUNCH(add_kernel, be, n, (const T *)a, (const T *)b, (T *)y);
}
sf_status sf_cuda_op_axpy(sf_backend *be, int64_t n, float alpha, const float *x, float *y)
{
    SF_EW_ACT_LAUNCH(axpy_kernel, be, n, alpha, (const T *)x, (T *)y);
}
sf_status sf_cuda_op_u8_to_act(sf_backend *be, int64_t n, const uint8_t *x, float *y)
{
    SF_EW_ACT_LAUNCH(u8_to_act_kernel, be, n, x, (T *)y);
}
sf_status sf_cuda_op_act_to_u8(sf_backend *be, int64_t n, const float *x, uint8_t *y)
{
    SF_EW_ACT_LAUNCH(act_to_u8_kernel, be, n, (const T *)x, y);
}
static sf_status check_connect(const char *op, sf_connect c)
{
    if (c != SF_CONNECT_AND && c != SF_CONNECT_IAND)
        return sf_fail(SF_ERR_INVALID, "%s: connect %d is not and or iand", op, (int)c);
    return SF_OK;
}
sf_status sf_cuda_op_connect_forward(sf_backend *be, sf_connect c, int64_t n, const float *a, const float *b, float *y)
{
    SF_TRY(check_connect("connect_forward", c));
    const float sign = c == SF_CONNECT_AND ? 1.0f : -1.0f, offset = c == SF_CONNECT_AND ? 0.0f : 1.0f;
    SF_EW_ACT_LAUNCH(connect_kernel, be, n, sign, offset, (const T *)a, (const T *)b, (T *)y);
}
sf_status sf_cuda_op_connect_backward(sf_backend *be, sf_connect c, int64_t n, const float *a, const float *b,
                                      const float *dy, float *da, float *db)
{
    SF_TRY(check_connect("connect_backward", c));
    if (!da && !db) return SF_OK;
    const float sign = c == SF_CONNECT_AND ? 1.0f : -1.0f, offset = c == SF_CONNECT_AND ? 0.0f : 1.0f;
    SF_EW_ACT_LAUNCH(connect_backward_kernel, be, n, sign, offset, (const T *)a, (const T *)b, (const T *)dy, (T *)da,
                     (T *)db);
}
sf_status sf_cuda_op_check_finite(sf_backend *be, int64_t n, const float *x, float *flag)
{
    if (n == 0) return SF_OK;
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    finite_kernel<<<grid(c, n), 256, 0, c->stream>>>(n, x, flag);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}
