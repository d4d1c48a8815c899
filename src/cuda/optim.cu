/* optim.cu — one fused kernel per optimizer over all parameters (they are one contiguous allocation), with
 * PyTorch's update rules (see core/backend.h). */
#include "cuda/ops.cuh"

#include <math.h>

__global__ void sgd_kernel(int64_t n, float lr, float momentum, int32_t nesterov, float wd, int first, float *p,
                           const float *g, float *buf)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float d = g[i] + wd * p[i];
        if (momentum != 0.0f) {
            float b = first ? d : momentum * buf[i] + d;
            buf[i] = b;
            d = nesterov ? d + momentum * b : b;
        }
        p[i] -= lr * d;
    }
}

__global__ void adam_kernel(int64_t n, float lr, float beta1, float beta2, float eps, float wd, int32_t decoupled,
                            float step_size, float bc2_sqrt, float *p, const float *g, float *m, float *v)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float pi = p[i], gi = g[i];
        if (decoupled)
            pi *= 1.0f - lr * wd;
        else
            gi += wd * pi;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

static unsigned grid(sf_cuda_ctx *c, int64_t n)
{
    unsigned b = sf_cuda_blocks(n, 256), cap = 32u * (unsigned)c->num_sms;
    return b < cap ? b : cap;
}

sf_status sf_cuda_op_sgd_step(sf_backend *be, int64_t n, float lr, float momentum, int32_t nesterov, float wd,
                              int64_t step, float *p, const float *g, float *buf)
{
    if (n == 0) return SF_OK;
    if (step < 1) return sf_fail(SF_ERR_INVALID, "SGD step = %lld: counted from 1", (long long)step);
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    sgd_kernel<<<grid(c, n), 256, 0, c->stream>>>(n, lr, momentum, nesterov, wd, step == 1, p, g, buf);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

sf_status sf_cuda_op_adam_step(sf_backend *be, int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                               int32_t decoupled, int64_t step, float *p, const float *g, float *m, float *v)
{
    if (n == 0) return SF_OK;
    if (step < 1) return sf_fail(SF_ERR_INVALID, "Adam step = %lld: counted from 1", (long long)step);
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    /* bias corrections in double on the host, as PyTorch computes them in Python floats */
    double bc1 = 1.0 - pow((double)beta1, (double)step), bc2 = 1.0 - pow((double)beta2, (double)step);
    adam_kernel<<<grid(c, n), 256, 0, c->stream>>>(n, lr, beta1, beta2, eps, wd, decoupled, (float)(lr / bc1),
                                                   (float)sqrt(bc2), p, g, m, v);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}
