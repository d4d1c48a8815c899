/* readout.c — the non-spiking readout (a leaky integrator over time) and the softmax cross-entropy losses with
 * their gradients and the accuracy count. */
#include "cpu/cpu_layers.h"
#include "cpu/parallel.h"

#include "core/error.h"

#include <math.h>

static sf_status check_leaky(int64_t T, int64_t n)
{
    if (T <= 0 || n < 0) return sf_fail(SF_ERR_INVALID, "leaky readout: T=%lld n=%lld: need T >= 1, n >= 0",
                                        (long long)T, (long long)n);
    return SF_OK;
}

/* r_t = a·r_{t-1} + c·o_t with r_0 = 0. */
sf_status sf_cpu_op_leaky_forward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *o, float *r)
{
    SF_TRY(check_leaky(T, n));
#pragma omp parallel for simd schedule(static) if (T * n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float acc = 0.0f;
        for (int64_t t = 0; t < T; t++) {
            acc = a * acc + c * o[t * n + i];
            r[t * n + i] = acc;
        }
    }
    return SF_OK;
}

/* g_t = dr_t + a·g_{t+1} (the gradient reaching r_t), do_t = c·g_t. */
sf_status sf_cpu_op_leaky_backward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *dr,
                                   float *doo)
{
    SF_TRY(check_leaky(T, n));
#pragma omp parallel for simd schedule(static) if (T * n >= SF_CPU_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float g = 0.0f;
        for (int64_t t = T - 1; t >= 0; t--) {
            g = dr[t * n + i] + a * g;
            doo[t * n + i] = c * g;
        }
    }
    return SF_OK;
}

/* Cross-entropy of one row of logits against the target q = (1 − eps)·onehot(label) + eps/K; writes
 * (softmax(z) − q)·scale into dz when given. */
static double row_xent(int32_t K, const float *z, int32_t label, float eps, double scale, float *dz)
{
    double zmax = z[0], zsum = 0.0;
    for (int32_t j = 1; j < K; j++) zmax = z[j] > zmax ? z[j] : zmax;
    double sum = 0.0;
    for (int32_t j = 0; j < K; j++) sum += exp((double)z[j] - zmax), zsum += z[j];
    const double lse = zmax + log(sum), on = 1.0 - (double)eps, every = (double)eps / K;
    if (dz)
        for (int32_t j = 0; j < K; j++)
            dz[j] = (float)((exp((double)z[j] - lse) - (j == label ? on : 0.0) - every) * scale);
    return lse - on * z[label] - every * zsum;
}

static int32_t row_argmax(int32_t K, const float *z)
{
    int32_t best = 0;
    for (int32_t j = 1; j < K; j++)
        if (z[j] > z[best]) best = j; /* first maximum, as torch.argmax */
    return best;
}

/* What both losses share: checks, logits_mean = mean_t r_t (summed in double in time order) and the samples whose
 * argmax of it is their label. */
static sf_status mean_and_correct(const char *loss, int64_t T, int64_t B, int32_t K, const float *r,
                                  const int32_t *labels, float *logits_mean, const float *stats, int64_t *correct)
{
    if (T <= 0 || B <= 0 || K <= 0)
        return sf_fail(SF_ERR_INVALID, "%s: T=%lld B=%lld K=%d: all must be >= 1", loss, (long long)T, (long long)B,
                       K);
    if (!r || !labels || !logits_mean || !stats)
        return sf_fail(SF_ERR_INVALID, "%s: r, labels, logits_mean and stats must not be NULL", loss);
    for (int64_t b = 0; b < B; b++)
        if (labels[b] < 0 || labels[b] >= K)
            return sf_fail(SF_ERR_INVALID, "%s: label %d of sample %lld is outside [0, %d)", loss, labels[b],
                           (long long)b, K);
    const int64_t row = (int64_t)B * K;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < row; i++) {
        double acc = 0.0;
        for (int64_t t = 0; t < T; t++) acc += r[t * row + i];
        logits_mean[i] = (float)(acc / (double)T);
    }
    *correct = 0;
    for (int64_t b = 0; b < B; b++) *correct += row_argmax(K, logits_mean + b * K) == labels[b];
    return SF_OK;
}

sf_status sf_cpu_op_softmax_xent(sf_backend *be, int64_t T, int64_t B, int32_t K, int32_t per_step, float eps,
                                 const float *r, const int32_t *labels, float *dr, float *logits_mean, float *stats)
{
    int64_t correct;
    SF_TRY(mean_and_correct("softmax cross-entropy", T, B, K, r, labels, logits_mean, stats, &correct));
    if (!(eps >= 0.0f && eps <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "softmax cross-entropy: label smoothing %g is outside [0, 1]", (double)eps);
    const int64_t row = (int64_t)B * K;
    double loss = 0.0;
    if (!per_step) {
        /* d loss / d r_t = (softmax(z) - q)/(B·T) for every t, since z = mean_t r_t. */
        const double scale = 1.0 / ((double)B * (double)T);
        for (int64_t b = 0; b < B; b++)
            loss += row_xent(K, logits_mean + b * K, labels[b], eps, scale, dr ? dr + b * K : NULL);
        if (dr)
            for (int64_t t = 1; t < T; t++)
                for (int64_t i = 0; i < row; i++) dr[t * row + i] = dr[i];
        loss /= (double)B;
    } else {
        const double scale = 1.0 / ((double)B * (double)T);
        for (int64_t t = 0; t < T; t++)
            for (int64_t b = 0; b < B; b++) {
                const int64_t o = t * row + b * K;
                loss += row_xent(K, r + o, labels[b], eps, scale, dr ? dr + o : NULL);
            }
        loss /= (double)B * (double)T;
    }
    stats[0] = (float)loss;
    stats[1] = (float)correct;
    return SF_OK;
}

sf_status sf_cpu_op_mse_rate(sf_backend *be, int64_t T, int64_t B, int32_t K, const float *r, const int32_t *labels,
                             float *dr, float *logits_mean, float *stats)
{
    int64_t correct;
    SF_TRY(mean_and_correct("MSE on the firing rate", T, B, K, r, labels, logits_mean, stats, &correct));
    const int64_t row = (int64_t)B * K;
    const double scale = 2.0 / ((double)row * (double)T);
    double loss = 0.0;
    for (int64_t i = 0; i < row; i++) {
        const double d = (double)logits_mean[i] - (i % K == labels[i / K] ? 1.0 : 0.0);
        loss += d * d;
        if (dr) dr[i] = (float)(d * scale);
    }
    if (dr)
        for (int64_t t = 1; t < T; t++)
            for (int64_t i = 0; i < row; i++) dr[t * row + i] = dr[i];
    stats[0] = (float)(loss / (double)row);
    stats[1] = (float)correct;
    return SF_OK;
}
