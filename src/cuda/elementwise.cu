/* elementwise.cu — add, axpy, spike format conversions and the NaN/Inf check. */
#include "cuda/ops.cuh"

__global__ void add_kernel(int64_t n, const float *a, const float *b, float *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}
__global__ void axpy_kernel(int64_t n, float alpha, const float *x, float *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}
__global__ void u8_to_f32_kernel(int64_t n, const uint8_t *x, float *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = (float)x[i];
}
__global__ void f32_to_u8_kernel(int64_t n, const float *x, uint8_t *y)
{
    SF_CUDA_GRID_STRIDE(i, n) y[i] = x[i] != 0.0f;
}
__global__ void finite_kernel(int64_t n, const float *x, float *flag)
{
    SF_CUDA_GRID_STRIDE(i, n)
    if (!isfinite(x[i])) *flag = 1.0f; /* every writer stores the same value */
}

/* Grid-stride launches: enough blocks to fill the chip several times over, no more. */
#define SF_EW_LAUNCH(kernel, be, n, ...)                                                                               \
    do {                                                                                                               \
        if ((n) == 0) return SF_OK;                                                                                    \
        sf_cuda_ctx *c_ = sf_cuda_ctx_of(be);                                                                          \
        unsigned b_ = sf_cuda_blocks(n, 256), cap_ = 32u * (unsigned)c_->num_sms;                                      \
        unsigned g_ = b_ < cap_ ? b_ : cap_;                                                                           \
        kernel<<<g_, 256, 0, c_->stream>>>(n, __VA_ARGS__);                                                            \
        SF_CUDA_LAUNCHED();                                                                                            \
        return SF_OK;                                                                                                  \
    } while (0)

sf_status sf_cuda_op_add(sf_backend *be, int64_t n, const float *a, const float *b, float *y)
{
    SF_EW_LAUNCH(add_kernel, be, n, a, b, y);
}
sf_status sf_cuda_op_axpy(sf_backend *be, int64_t n, float alpha, const float *x, float *y)
{
    SF_EW_LAUNCH(axpy_kernel, be, n, alpha, x, y);
}
sf_status sf_cuda_op_u8_to_f32(sf_backend *be, int64_t n, const uint8_t *x, float *y)
{
    SF_EW_LAUNCH(u8_to_f32_kernel, be, n, x, y);
}
sf_status sf_cuda_op_f32_to_u8(sf_backend *be, int64_t n, const float *x, uint8_t *y)
{
    SF_EW_LAUNCH(f32_to_u8_kernel, be, n, x, y);
}
sf_status sf_cuda_op_check_finite(sf_backend *be, int64_t n, const float *x, float *flag)
{
    SF_EW_LAUNCH(finite_kernel, be, n, x, flag);
}
