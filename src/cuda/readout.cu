/* readout.cu — the leaky-integrator readout over [T, n] (time inside each thread), and softmax cross-entropy and the
 * MSE on the firing rate with their gradients; loss and accuracy on the device in a fixed order (deterministic, no
 * host round trip). Readout and gradients in the backend's activation type (A); sums, logits, loss float. */
#include "cuda/act.cuh"
#include "cuda/ops.cuh"

template <class A> __global__ void leaky_forward_kernel(int64_t T, int64_t n, float a, float c, const A *o, A *r)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float acc = 0.0f;
        for (int64_t t = 0; t < T; t++) {
            acc = a * acc + c * sf_widen(o[t * n + i]);
            r[t * n + i] = sf_narrow<A>(acc);
        }
    }
}

template <class A> __global__ void leaky_backward_kernel(int64_t T, int64_t n, float a, float c, const A *dr, A *doo)
{
    SF_CUDA_GRID_STRIDE(i, n)
    {
        float g = 0.0f; /* ∂L/∂r_t, carried back through r_{t+1} = a·r_t + … */
        for (int64_t t = T - 1; t >= 0; t--) {
            g = sf_widen(dr[t * n + i]) + a * g;
            doo[t * n + i] = sf_narrow<A>(c * g);
        }
    }
}

sf_status sf_cuda_op_leaky_forward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *o, float *r)
{
    if (T * n == 0) return SF_OK;
    sf_cuda_ctx *cx = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(cx->act, [&](auto tag) {
        using A = decltype(tag);
        leaky_forward_kernel<A><<<sf_cuda_blocks(n, 128), 128, 0, cx->stream>>>(T, n, a, c, (const A *)o, (A *)r);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

sf_status sf_cuda_op_leaky_backward(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *dr, float *doo)
{
    if (T * n == 0) return SF_OK;
    sf_cuda_ctx *cx = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(cx->act, [&](auto tag) {
        using A = decltype(tag);
        leaky_backward_kernel<A><<<sf_cuda_blocks(n, 128), 128, 0, cx->stream>>>(T, n, a, c, (const A *)dr, (A *)doo);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

#define SF_XENT_THREADS 256

/* Cross-entropy of one row of K logits against the target q = (1 − eps)·onehot(label) + eps/K; writes
 * (softmax − q)·gscale into g when given. */
template <class Z, class A>
__device__ float xent_row(const Z *z, int32_t K, int32_t label, float eps, float gscale, A *g)
{
    float m = sf_widen(z[0]);
    for (int32_t k = 1; k < K; k++) m = fmaxf(m, sf_widen(z[k]));
    float se = 0.0f, zsum = 0.0f;
    for (int32_t k = 0; k < K; k++) se += expf(sf_widen(z[k]) - m), zsum += sf_widen(z[k]);
    const float lse = m + logf(se), on = 1.0f - eps, every = eps / (float)K;
    if (g)
        for (int32_t k = 0; k < K; k++)
            g[k] = sf_narrow<A>((expf(sf_widen(z[k]) - lse) - (k == label ? on : 0.0f) - every) * gscale);
    return lse - on * sf_widen(z[label]) - every * zsum;
}

/* logits_mean[b, k] = the T-mean of r[·, b, k]: a thread per (b, k), summing over t in order (the CPU's order). */
template <class A> __global__ void mean_logits_kernel(int64_t T, int64_t B, int32_t K, const A *r, float *zmean)
{
    SF_CUDA_GRID_STRIDE(i, B * K)
    {
        const int64_t b = i / K, k = i % K;
        float s = 0.0f;
        for (int64_t t = 0; t < T; t++) s += sf_widen(r[(t * B + b) * K + k]);
        zmean[i] = s / (float)T;
    }
}

/* The first maximum of a row of K (as torch.argmax). */
__device__ int32_t argmax_row(const float *z, int32_t K)
{
    int32_t best = 0;
    for (int32_t k = 1; k < K; k++)
        if (z[k] > z[best]) best = k;
    return best;
}

/* Rows 1 … T−1 of g [T, n] = its row 0 (a gradient of the T-mean is the same at every step). */
template <class A> __global__ void repeat_row_kernel(int64_t T, int64_t n, A *g)
{
    SF_CUDA_GRID_STRIDE(i, (T - 1) * n) g[n + i] = g[i % n];
}

/* The block's loss and correct counts added in a fixed order (shared memory), into stats[0] (divided by div) and
 * stats[1]. */
__device__ void block_stats(double l, double ok, double div, float *stats)
{
    __shared__ double loss[SF_XENT_THREADS], correct[SF_XENT_THREADS];
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
        stats[0] = (float)(loss[0] / div);
        stats[1] = (float)correct[0];
    }
}

/* The logits' T-mean, then one block: thread b takes row b's accuracy and loss and writes its gradient at step 0
 * (per_step: rows (t, b) at every step); other steps repeat step 0. The T-long sums and T·B·K writes use the grid. */
template <class A>
__global__ void softmax_xent_kernel(int64_t T, int64_t B, int32_t K, int32_t per_step, float eps, const A *r,
                                    const int32_t *labels, A *dr, const float *zmean, float *stats)
{
    double l = 0.0, ok = 0.0;
    for (int64_t b = threadIdx.x; b < B; b += blockDim.x) {
        const float *z = zmean + b * K;
        int32_t y = labels[b];
        ok += argmax_row(z, K) == y;
        if (!per_step) {
            /* loss = mean_b CE(z_b): dr_t = (softmax − q)/(B·T) at every step */
            l += xent_row(z, K, y, eps, 1.0f / (float)(B * T), dr ? dr + b * K : (A *)NULL);
        } else {
            for (int64_t t = 0; t < T; t++)
                l += xent_row(r + (t * B + b) * K, K, y, eps, 1.0f / (float)(B * T),
                              dr ? dr + (t * B + b) * K : (A *)NULL);
        }
    }
    block_stats(l, ok, (double)(per_step ? B * T : B), stats);
}

/* logits_mean, then the loss kernel `loss`, then (repeat) step 0's gradient copied to the other steps. */
template <class A, class Loss>
static sf_status readout_loss(sf_cuda_ctx *c, int64_t T, int64_t B, int32_t K, const A *r, A *dr, float *zmean,
                              bool repeat, Loss loss)
{
    mean_logits_kernel<A><<<sf_cuda_blocks(B * K, 256), 256, 0, c->stream>>>(T, B, K, r, zmean);
    SF_CUDA_LAUNCHED();
    loss();
    SF_CUDA_LAUNCHED();
    if (repeat && dr && T > 1) {
        repeat_row_kernel<A><<<sf_cuda_blocks((T - 1) * B * K, 256), 256, 0, c->stream>>>(T, B * K, dr);
        SF_CUDA_LAUNCHED();
    }
    return SF_OK;
}

sf_status sf_cuda_op_softmax_xent(sf_backend *be, int64_t T, int64_t B, int32_t K, int32_t per_step, float eps,
                                  const float *r, const int32_t *labels, float *dr, float *logits_mean, float *stats)
{
    if (T < 1 || B < 1 || K < 1)
        return sf_fail(SF_ERR_INVALID, "softmax cross-entropy: T = %lld, B = %lld, K = %d must be >= 1", (long long)T,
                       (long long)B, K);
    if (!(eps >= 0.0f && eps <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "softmax cross-entropy: label smoothing %g is outside [0, 1]", (double)eps);
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using A = decltype(tag);
        return readout_loss<A>(c, T, B, K, (const A *)r, (A *)dr, logits_mean, !per_step, [&] {
            softmax_xent_kernel<A><<<1, SF_XENT_THREADS, 0, c->stream>>>(T, B, K, per_step, eps, (const A *)r, labels,
                                                                         (A *)dr, logits_mean, stats);
        });
    });
}

/* After the T-mean (the firing rate): one block, thread b takes row b's accuracy, Σ_k (z_k − onehot_k)² and the
 * gradient 2·(z − onehot) / (B·K·T) at step 0, which the other steps repeat. */
template <class A>
__global__ void mse_rate_kernel(int64_t T, int64_t B, int32_t K, const int32_t *labels, A *dr, const float *zmean,
                                float *stats)
{
    double l = 0.0, ok = 0.0;
    const float scale = 2.0f / (float)(B * K * T);
    for (int64_t b = threadIdx.x; b < B; b += blockDim.x) {
        const float *z = zmean + b * K;
        int32_t y = labels[b];
        ok += argmax_row(z, K) == y;
        for (int32_t k = 0; k < K; k++) {
            const float d = z[k] - (k == y ? 1.0f : 0.0f);
            l += (double)d * (double)d;
            if (dr) dr[b * K + k] = sf_narrow<A>(d * scale);
        }
    }
    block_stats(l, ok, (double)(B * K), stats);
}

sf_status sf_cuda_op_mse_rate(sf_backend *be, int64_t T, int64_t B, int32_t K, const float *r, const int32_t *labels,
                              float *dr, float *logits_mean, float *stats)
{
    if (T < 1 || B < 1 || K < 1)
        return sf_fail(SF_ERR_INVALID, "MSE on the firing rate: T = %lld, B = %lld, K = %d must be >= 1", (long long)T,
                       (long long)B, K);
    sf_cuda_ctx *c = sf_cuda_ctx_of(be);
    return sf_cuda_with_act(c->act, [&](auto tag) {
        using A = decltype(tag);
        return readout_loss<A>(c, T, B, K, (const A *)r, (A *)dr, logits_mean, true, [&] {
            mse_rate_kernel<A><<<1, SF_XENT_THREADS, 0, c->stream>>>(T, B, K, labels, (A *)dr, logits_mean, stats);
        });
    });
}
