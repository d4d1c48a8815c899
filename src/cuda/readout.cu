/* readout.cu — the leaky-integrator readout over [T, n] (time inside each thread) and softmax cross-entropy with
 * its gradient, loss and accuracy computed on the device in a fixed order (deterministic, no host round trip). */
#include "cuda/ops.cuh"

__global__ void leaky_forward_kernel(int64_t T, int64_t n, float a, float c, const float *o, float *r)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float acc = 0.0f;
        for (int64_t t = 0; t < T; t++) {
            acc = a * acc + c * o[t * n + i];
            r[t * n + i] = acc;
        }
    }
}

__global__ void leaky_backward_kernel(int64_t T, int64_t n, float a, float c, const float *dr, float *doo)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float g = 0.0f; /* ∂L/∂r_t, carried back through r_{t+1} = a·r_t + … */
        for (int64_t t = T - 1; t >= 0; t--) {
            g = dr[t * n + i] + a * g;
            doo[t * n + i] = c * g;
        }
    }
}

sf_status sf_cuda_op_leaky_forward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *o, float *r)
{
    if (T * n == 0) return SF_OK;
    leaky_forward_kernel<<<sf_cuda_blocks(n, 128), 128, 0, sf_cuda_ctx_of(be)->stream>>>(T, n, a, c, o, r);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

sf_status sf_cuda_op_leaky_backward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *dr, float *doo)
{
    if (T * n == 0) return SF_OK;
    leaky_backward_kernel<<<sf_cuda_blocks(n, 128), 128, 0, sf_cuda_ctx_of(be)->stream>>>(T, n, a, c, dr, doo);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

#define SF_XENT_THREADS 256

/* Cross-entropy of one row of K logits against `label`; writes (softmax − onehot)·gscale into g when given. */
__device__ float xent_row(const float *z, int32_t K, int32_t label, float gscale, float *g, int64_t gstride,
                          int64_t grows)
{
    float m = z[0];
    for (int32_t k = 1; k < K; k++) m = fmaxf(m, z[k]);
    float se = 0.0f;
    for (int32_t k = 0; k < K; k++) se += expf(z[k] - m);
    float lse = m + logf(se);
    if (g)
        for (int32_t k = 0; k < K; k++) {
            float d = (expf(z[k] - lse) - (k == label ? 1.0f : 0.0f)) * gscale;
            for (int64_t r = 0; r < grows; r++) g[r * gstride + k] = d;
        }
    return lse - z[label];
}

/* One block. Thread b: logits_mean row b, its loss/accuracy; per_step rows are (t, b) pairs. Losses are summed
 * through shared memory in a fixed order. */
__global__ void softmax_xent_kernel(int64_t T, int64_t B, int32_t K, int32_t per_step, const float *r,
                                    const int32_t *labels, float *dr, float *zmean, float *stats)
{
    __shared__ double loss[SF_XENT_THREADS], correct[SF_XENT_THREADS];
    double l = 0.0, ok = 0.0;
    for (int64_t b = threadIdx.x; b < B; b += blockDim.x) {
        float *z = zmean + b * K;
        for (int32_t k = 0; k < K; k++) {
            float s = 0.0f;
            for (int64_t t = 0; t < T; t++) s += r[(t * B + b) * K + k];
            z[k] = s / (float)T;
        }
        int32_t y = labels[b];
        int32_t best = 0;
        for (int32_t k = 1; k < K; k++)
            if (z[k] > z[best]) best = k;
        ok += best == y;
        if (!per_step) {
            /* loss = mean_b CE(z_b): dr_t = (softmax − onehot)/(B·T) at every step */
            l += xent_row(z, K, y, 1.0f / (float)(B * T), dr ? dr + b * K : NULL, B * K, T);
        } else {
            for (int64_t t = 0; t < T; t++)
                l += xent_row(r + (t * B + b) * K, K, y, 1.0f / (float)(B * T), dr ? dr + (t * B + b) * K : NULL, 0, 1);
        }
    }
    loss[threadIdx.x] = l;
    correct[threadIdx.x] = ok;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) {
            loss[threadIdx.x] += loss[threadIdx.x + o];
            correct[threadIdx.x] += correct[threadIdx.x + o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        stats[0] = (float)(loss[0] / (double)(per_step ? B * T : B));
        stats[1] = (float)correct[0];
    }
}

sf_status sf_cuda_op_softmax_xent(sf_backend *be, int64_t T, int64_t B, int32_t K, int32_t per_step, const float *r,
                                  const int32_t *labels, float *dr, float *logits_mean, float *stats)
{
    if (T < 1 || B < 1 || K < 1)
        return sf_fail(SF_ERR_INVALID, "softmax cross-entropy: T = %lld, B = %lld, K = %d must be >= 1", (long long)T,
                       (long long)B, K);
    softmax_xent_kernel<<<1, SF_XENT_THREADS, 0, sf_cuda_ctx_of(be)->stream>>>(T, B, K, per_step, r, labels, dr,
                                                                               logits_mean, stats);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}
