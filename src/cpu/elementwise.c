/* elementwise.c — element-wise helpers of the CPU backend: add, axpy, spike format conversions, SEW-ResNet's product
 * connect functions, and the NaN/Inf check that stops training on a non-finite loss or gradient. */
#include "cpu/cpu_layers.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <math.h>

static sf_status check_n(const char *op, int64_t n)
{
    if (n < 0) return sf_fail(SF_ERR_INVALID, "%s: n = %lld is negative", op, (long long)n);
    return SF_OK;
}

sf_status sf_cpu_op_add(sf_backend *be, int64_t n, const float *a, const float *b, float *y)
{
    SF_TRY(check_n("add", n));
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
    return SF_OK;
}

sf_status sf_cpu_op_axpy(sf_backend *be, int64_t n, float alpha, const float *x, float *y)
{
    SF_TRY(check_n("axpy", n));
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
    return SF_OK;
}

sf_status sf_cpu_op_u8_to_act(sf_backend *be, int64_t n, const uint8_t *x, float *y)
{
    SF_TRY(check_n("u8_to_act", n));
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = (float)x[i];
    return SF_OK;
}

sf_status sf_cpu_op_act_to_u8(sf_backend *be, int64_t n, const float *x, uint8_t *y)
{
    SF_TRY(check_n("act_to_u8", n));
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)(x[i] != 0.0f);
    return SF_OK;
}

static sf_status check_connect(const char *op, sf_connect c, int64_t n)
{
    SF_TRY(check_n(op, n));
    if (c != SF_CONNECT_AND && c != SF_CONNECT_IAND)
        return sf_fail(SF_ERR_INVALID, "%s: connect %d is not and or iand", op, (int)c);
    return SF_OK;
}

sf_status sf_cpu_op_connect_forward(sf_backend *be, sf_connect c, int64_t n, const float *a, const float *b, float *y)
{
    SF_TRY(check_connect("connect_forward", c, n));
    const float sign = c == SF_CONNECT_AND ? 1.0f : -1.0f, offset = c == SF_CONNECT_AND ? 0.0f : 1.0f;
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = (offset + sign * a[i]) * b[i];
    return SF_OK;
}

/* y = (offset + sign·a)·b: ∂y/∂a = sign·b, ∂y/∂b = offset + sign·a. */
sf_status sf_cpu_op_connect_backward(sf_backend *be, sf_connect c, int64_t n, const float *a, const float *b,
                                     const float *dy, float *da, float *db)
{
    SF_TRY(check_connect("connect_backward", c, n));
    const float sign = c == SF_CONNECT_AND ? 1.0f : -1.0f, offset = c == SF_CONNECT_AND ? 0.0f : 1.0f;
    if (da) {
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
        for (int64_t i = 0; i < n; i++) da[i] = sign * b[i] * dy[i];
    }
    if (db) {
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
        for (int64_t i = 0; i < n; i++) db[i] = (offset + sign * a[i]) * dy[i];
    }
    return SF_OK;
}

sf_status sf_cpu_op_check_finite(sf_backend *be, int64_t n, const float *x, float *flag)
{
    SF_TRY(check_n("check_finite", n));
    /* x·0 is 0 for finite x and NaN for NaN or ±Inf, so the sum is 0 or NaN in any order: a vectorisable check
     * whose result does not depend on the thread count. */
    float z = 0.0f;
#pragma omp parallel for simd reduction(+ : z) schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) z += x[i] * 0.0f;
    if (isnan(z)) flag[0] = 1.0f;
    return SF_OK;
}
