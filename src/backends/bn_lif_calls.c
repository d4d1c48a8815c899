/* bn_lif_calls.c — the low-level public fused BN → LIF entry points (sf_bn_lif_*, and the batch statistics they
 * take), which dispatch on the device to the backends' kernels without a backend object. */
#include "backends/backends.h"
#include "core/error.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_neuron.h"
#ifdef SF_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <math.h>

static sf_status check_bn_lif_call(const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, float eps,
                                   const void *const *tensors, int n_tensors, sf_bn_shape *sh)
{
    SF_TRY(sf_lif_params_check(p));
    if (T <= 0 || B < 0 || C <= 0 || hw < 0)
        return sf_fail(SF_ERR_INVALID, "BN+LIF shape T=%lld B=%lld C=%d hw=%lld: need T >= 1, C >= 1, B, hw >= 0",
                       (long long)T, (long long)B, (int)C, (long long)hw);
    if (!(eps > 0.0f) || !isfinite(eps)) return sf_fail(SF_ERR_INVALID, "BN+LIF eps = %g: must be > 0", (double)eps);
    for (int i = 0; i < n_tensors; i++)
        if (!tensors[i]) return sf_fail(SF_ERR_INVALID, "BN+LIF: a tensor pointer is NULL");
    *sh = (sf_bn_shape){.rows = T * B, .c = C, .hw = hw};
    return SF_OK;
}

sf_status sf_bn_lif_forward(const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, sf_scalar dtype,
                            const void *x, const float *mean, const float *var, float eps, const float *gamma,
                            const float *beta, void *s, const sf_lif_state *st, sf_device device, void *stream)
{
    sf_bn_shape sh;
    const void *tensors[] = {x, mean, var, gamma, beta, s};
    SF_TRY(check_bn_lif_call(p, T, B, C, hw, eps, tensors, B * hw > 0 ? 6 : 0, &sh));
    SF_TRY(sf_backend_dtype_check(dtype, device, "BN+LIF forward"));
    if (B * hw == 0) return SF_OK;
    sf_lif_out out = {.s = s};
    if (device.kind == SF_DEVICE_CPU && dtype == SF_SCALAR_F64)
        return sf_cpu_bn_lif_forward_f64(p, T, sh, x, mean, var, eps, gamma, beta, s, st);
    if (device.kind == SF_DEVICE_CPU)
        return sf_cpu_op_bn_lif_forward(NULL, p, T, sh, x, mean, var, eps, gamma, beta, &out, st);
#ifdef SF_HAVE_CUDA
    if (device.kind == SF_DEVICE_CUDA)
        return sf_cuda_bn_lif_forward(p, T, sh, dtype, x, mean, var, eps, gamma, beta, &out, st,
                                      stream);
#endif
    return sf_fail(SF_ERR_UNSUPPORTED, "BN+LIF forward: device not available in this build");
}

size_t sf_bn_lif_workspace_bytes(int64_t T, int64_t B, int32_t C, int64_t hw, sf_device device)
{
#ifdef SF_HAVE_CUDA
    if (device.kind == SF_DEVICE_CUDA && T > 0 && B >= 0 && C > 0 && hw >= 0)
        return sf_cuda_bn_lif_workspace(T, (sf_bn_shape){.rows = T * B, .c = C, .hw = hw});
#endif
    return 0;
}

sf_status sf_bn_lif_backward(const sf_lif_params *p, int64_t T, int64_t B, int32_t C, int64_t hw, sf_scalar dtype,
                             const void *x, const float *mean, const float *var, float eps, const float *gamma,
                             const float *beta, const void *ds, void *dx, float *dgamma, float *dbeta,
                             const sf_lif_state *st, void *workspace, size_t workspace_bytes, sf_device device,
                             void *stream)
{
    sf_bn_shape sh;
    const void *tensors[] = {x, mean, var, gamma, beta, ds, dx, dgamma, dbeta};
    SF_TRY(check_bn_lif_call(p, T, B, C, hw, eps, tensors, 9, &sh));
    SF_TRY(sf_backend_dtype_check(dtype, device, "BN+LIF backward"));
    if (device.kind == SF_DEVICE_CPU && dtype == SF_SCALAR_F64)
        return sf_cpu_bn_lif_backward_f64(p, T, sh, x, mean, var, eps, gamma, beta, ds, dx, dgamma, dbeta, st);
    if (device.kind == SF_DEVICE_CPU)
        return sf_cpu_op_bn_lif_backward(NULL, p, T, sh, x, NULL, mean, var, eps, gamma, beta, ds, dx, dgamma, dbeta,
                                         st, NULL, NULL);
#ifdef SF_HAVE_CUDA
    if (device.kind == SF_DEVICE_CUDA)
        return sf_cuda_bn_lif_backward(p, T, sh, dtype, x, mean, var, eps, gamma, beta, ds, dx,
                                       dgamma, dbeta, st, workspace, workspace_bytes, stream);
#endif
    (void)workspace;
    (void)workspace_bytes;
    (void)stream;
    return sf_fail(SF_ERR_UNSUPPORTED, "BN+LIF backward: device not available in this build");
}

sf_status sf_bn_statistics(int64_t rows, int32_t C, int64_t hw, const float *x, float *mean, float *var,
                           sf_device device)
{
    if (rows < 1 || C < 1 || hw < 1)
        return sf_fail(SF_ERR_INVALID, "BN statistics of shape rows=%lld C=%d hw=%lld: each must be >= 1",
                       (long long)rows, (int)C, (long long)hw);
    if (!x || !mean || !var) return sf_fail(SF_ERR_INVALID, "BN statistics: a tensor pointer is NULL");
    if (device.kind != SF_DEVICE_CPU)
        return sf_fail(SF_ERR_UNSUPPORTED, "BN statistics: the CPU only (on CUDA, use the framework's reduction)");
    return sf_cpu_op_bn_stats(NULL, (sf_bn_shape){.rows = rows, .c = C, .hw = hw}, x, mean, var);
}
