/* backends.c — backend selection for a device, the public calls that need it (sf_net_create, the device count,
 * the thread count), and the low-level public LIF entry points, which dispatch on the device. */
#include "backends/backends.h"

#include "core/error.h"
#include "core/net_hooks.h"
#include "cpu/cpu_backend.h"
#ifdef SF_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

#include <stdlib.h>

sf_status sf_backend_create(sf_device dev, sf_precision precision, const sf_cuda_options *cuda, sf_backend **out)
{
    *out = NULL;
    if ((unsigned)precision > SF_PRECISION_FP16) return sf_fail(SF_ERR_INVALID, "unknown precision %d", (int)precision);
    switch (dev.kind) {
    case SF_DEVICE_CPU:
        if (precision != SF_PRECISION_FP32)
            return sf_fail(SF_ERR_UNSUPPORTED,
                           "precision %s is a CUDA option: the CPU backend computes in fp32 only (use precision=fp32, "
                           "or device=cuda)",
                           sf_precision_name(precision));
        return sf_cpu_backend_create(out);
    case SF_DEVICE_CUDA:
#ifdef SF_HAVE_CUDA
        SF_TRY(sf_cuda_arch_check(dev.index));
        return sf_cuda_backend_create(dev.index, precision, cuda, out);
#else
        (void)cuda;
        return sf_fail(SF_ERR_UNSUPPORTED, "this build of spikefuse has no CUDA backend (use device cpu, or rebuild "
                                           "with nvcc present and -DSF_CUDA=ON)");
#endif
    }
    return sf_fail(SF_ERR_INVALID, "unknown device kind %d", (int)dev.kind);
}

sf_status sf_net_create(const sf_net_params *p, sf_net **out)
{
    *out = NULL;
    SF_TRY(sf_net_params_check(p));
    sf_backend *be = NULL;
    SF_TRY(sf_backend_create(p->device, p->precision, &p->cuda, &be));
    return sf_net_create_on(p, be, out);
}

void *sf_net_stream(sf_net *net)
{
    sf_net_params p;
    sf_net_get_params(net, &p);
#ifdef SF_HAVE_CUDA
    if (p.device.kind == SF_DEVICE_CUDA) return sf_cuda_backend_stream(sf_net_backend(net));
#endif
    return NULL;
}

int32_t sf_cuda_device_count(void)
{
#ifdef SF_HAVE_CUDA
    return sf_cuda_count_devices();
#else
    return 0;
#endif
}

void *sf_host_alloc(sf_device device, size_t bytes)
{
#ifdef SF_HAVE_CUDA
    if (device.kind == SF_DEVICE_CUDA) return sf_cuda_host_alloc(bytes);
#endif
    return malloc(bytes ? bytes : 1);
}

void sf_host_free(sf_device device, void *p)
{
#ifdef SF_HAVE_CUDA
    if (device.kind == SF_DEVICE_CUDA) {
        sf_cuda_host_free(p);
        return;
    }
#endif
    free(p);
}

void sf_set_num_threads(int32_t n) { sf_cpu_set_threads(n); }

int32_t sf_get_num_threads(void) { return sf_cpu_threads(); }

static sf_status check_lif_call(const sf_lif_params *p, int64_t T, int64_t N, const void *a, const void *b,
                                const void *c)
{
    SF_TRY(sf_lif_params_check(p));
    if (T <= 0 || N < 0)
        return sf_fail(SF_ERR_INVALID, "LIF shape T=%lld N=%lld: need T >= 1, N >= 0", (long long)T, (long long)N);
    if (N > 0 && (!a || !b || !c)) return sf_fail(SF_ERR_INVALID, "LIF: a tensor pointer is NULL");
    return SF_OK;
}

sf_status sf_backend_dtype_check(sf_scalar dtype, sf_device device, const char *op)
{
    static const char *const names[] = {"float32", "bfloat16", "float16"};
    if ((unsigned)dtype > SF_SCALAR_F64) return sf_fail(SF_ERR_INVALID, "%s: unknown activation type %d", op, (int)dtype);
    if (dtype == SF_SCALAR_F32) return SF_OK;
    if (dtype == SF_SCALAR_F64)
        return device.kind == SF_DEVICE_CPU
                   ? SF_OK
                   : sf_fail(SF_ERR_UNSUPPORTED, "%s: float64 runs on the CPU only (no float64 kernels on CUDA): "
                                                 "use device cpu, or float32", op);
#ifdef SF_HAVE_CUDA
    if (device.kind == SF_DEVICE_CUDA) return sf_cuda_arch_check_current(); /* built for every activation type */
#endif
    return sf_fail(SF_ERR_UNSUPPORTED, "%s: no %s kernels on %s in this build (16-bit activations are CUDA's)", op,
                   names[dtype], device.kind == SF_DEVICE_CUDA ? "CUDA" : "the CPU");
}

sf_status sf_lif_forward_typed(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar dtype, const void *x, void *s,
                               const sf_lif_state *st, sf_device device, void *stream)
{
    SF_TRY(check_lif_call(p, T, N, x, s, s));
    SF_TRY(sf_backend_dtype_check(dtype, device, "LIF forward"));
    sf_lif_out out = {.s = s};
    if (N == 0) return SF_OK;
    if (device.kind == SF_DEVICE_CPU)
        return dtype == SF_SCALAR_F64 ? sf_cpu_lif_forward_f64(p, T, N, x, s, st)
                                      : sf_cpu_lif_forward(p, T, N, x, &out, st);
#ifdef SF_HAVE_CUDA
    if (device.kind == SF_DEVICE_CUDA)
        return sf_cuda_lif_forward(p, T, N, dtype, x, &out, st, stream);
#endif
    return sf_fail(SF_ERR_UNSUPPORTED, "LIF forward: device not available in this build");
}

sf_status sf_lif_backward_typed(const sf_lif_params *p, int64_t T, int64_t N, sf_scalar dtype, const void *x,
                                const void *ds, void *dx, const sf_lif_state *st, sf_device device, void *stream)
{
    SF_TRY(check_lif_call(p, T, N, x, ds, dx));
    SF_TRY(sf_backend_dtype_check(dtype, device, "LIF backward"));
    if (N == 0) return SF_OK;
    if (device.kind == SF_DEVICE_CPU)
        return dtype == SF_SCALAR_F64 ? sf_cpu_lif_backward_f64(p, T, N, x, ds, dx, st)
                                      : sf_cpu_lif_backward(p, T, N, x, NULL, ds, dx, st);
#ifdef SF_HAVE_CUDA
    if (device.kind == SF_DEVICE_CUDA)
        return sf_cuda_lif_backward(p, T, N, dtype, x, NULL, ds, dx, st, stream);
#endif
    return sf_fail(SF_ERR_UNSUPPORTED, "LIF backward: device not available in this build");
}

sf_status sf_lif_forward_state(const sf_lif_params *p, int64_t T, int64_t N, const float *x, float *s,
                               const sf_lif_state *st, sf_device device, void *stream)
{
    return sf_lif_forward_typed(p, T, N, SF_SCALAR_F32, x, s, st, device, stream);
}

sf_status sf_lif_backward_state(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *ds,
                                float *dx, const sf_lif_state *st, sf_device device, void *stream)
{
    return sf_lif_backward_typed(p, T, N, SF_SCALAR_F32, x, ds, dx, st, device, stream);
}

sf_status sf_lif_forward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, float *s, sf_device device,
                         void *stream)
{
    return sf_lif_forward_state(p, T, N, x, s, NULL, device, stream);
}

sf_status sf_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *ds, float *dx,
                          sf_device device, void *stream)
{
    return sf_lif_backward_state(p, T, N, x, ds, dx, NULL, device, stream);
}
