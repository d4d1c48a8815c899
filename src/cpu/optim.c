/* optim.c — parameter updates over all parameters at once (they live in one allocation): SGD with momentum,
 * Nesterov and weight decay, Adam and AdamW, each following torch.optim's update rule step for step. */
#include "cpu/cpu_layers.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <math.h>

sf_status sf_cpu_op_sgd_step(sf_backend *be, int64_t n, float lr, float momentum, int32_t nesterov, float wd,
                             int64_t step, float *p, const float *g, float *buf)
{
    if (n < 0 || step < 1) return sf_fail(SF_ERR_INVALID, "SGD: n=%lld step=%lld: need n >= 0, step >= 1",
                                          (long long)n, (long long)step);
    if (momentum != 0.0f && !buf) return sf_fail(SF_ERR_INVALID, "SGD: momentum %g needs a buffer", momentum);
    if (nesterov && momentum <= 0.0f) return sf_fail(SF_ERR_INVALID, "SGD: Nesterov needs momentum > 0");
    const int first = step == 1;
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0.0f) d += wd * p[i];
        if (momentum != 0.0f) {
            const float b = first ? d : momentum * buf[i] + d;
            buf[i] = b;
            d = nesterov ? d + momentum * b : b;
        }
        p[i] -= lr * d;
    }
    return SF_OK;
}

sf_status sf_cpu_op_adam_step(sf_backend *be, int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                              int32_t decoupled, int64_t step, float *p, const float *g, float *m, float *v)
{
    if (n < 0 || step < 1) return sf_fail(SF_ERR_INVALID, "Adam: n=%lld step=%lld: need n >= 0, step >= 1",
                                          (long long)n, (long long)step);
    if (!(beta1 >= 0.0f && beta1 < 1.0f) || !(beta2 >= 0.0f && beta2 < 1.0f))
        return sf_fail(SF_ERR_INVALID, "Adam: betas (%g, %g): each must be in [0, 1)", beta1, beta2);
    /* torch: step_size = lr / (1 - beta1^t); denom = sqrt(v) / sqrt(1 - beta2^t) + eps. */
    const float step_size = (float)(lr / (1.0 - pow(beta1, (double)step)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step));
    const float decay = decoupled ? 1.0f - lr * wd : 1.0f;
    const float coupled_wd = decoupled ? 0.0f : wd;
#pragma omp parallel for simd schedule(static) if (n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float pi = p[i] * decay;
        const float gi = g[i] + coupled_wd * pi;
        const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
    }
    return SF_OK;
}
