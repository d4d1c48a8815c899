/* neuron.cuh — the time-fused neuron kernels shared by LIF and fused BN→LIF: one thread per neuron, coalesced
 * over neurons ([T, N] time-major), the time loop inside the thread, equations from core/lif_math.h.
 *
 * Backward without a saved h: a thread recomputes h_t forward into its own column of shared memory, then runs the
 * reverse time loop from there, so x is read once and h never touches device memory (20 bytes per element for
 * forward + backward, the W1 floor). When T steps do not fit, time is cut into segments of S steps; a first
 * forward pass keeps v at each segment start (shared memory too) and each segment is recomputed from its
 * checkpoint, which costs one extra read of x. */
#ifndef SF_CUDA_NEURON_CUH
#define SF_CUDA_NEURON_CUH

#include "cuda/common.cuh"

extern "C" {
#include "core/lif_math.h"
}

/* Steps loaded ahead of their use: enough independent loads in flight per thread to cover memory latency. */
#define SF_NEURON_UNROLL 8

/* The input of neuron n: y_t = (x_t − mean)·invstd·γ + β with its channel's statistics for BN, x_t for a plain LIF. */
struct sf_cu_bn_in {
    int64_t hw;
    int32_t C;
    const float *mean, *var, *gamma, *beta;
    float eps;
};

struct sf_cu_neuron {
    sf_lif_params p;
    int64_t T, N;
    const float *x; /* [T, N] */
    sf_cu_bn_in bn; /* used when the kernel's BN flag is set */
};

/* What the backward does with dy_t = ∂L/∂y_t. */
enum sf_cu_dy_mode {
    SF_DY_WRITE,  /* dx_t = dy_t (plain LIF) */
    SF_DY_SUMS,   /* per neuron: Σ_t dy_t and Σ_t dy_t·x̂_t into sums[n], sums[N + n] (BN pass 1) */
    SF_DY_BN_DX   /* dx_t = γ·invstd·(dy_t − mean(dy) − x̂_t·mean(dy·x̂)) with the sums in dgamma, dbeta (pass 2) */
};

struct sf_cu_affine {
    float mean, invstd, gamma, beta;
    __device__ __forceinline__ float operator()(float x) const { return (x - mean) * invstd * gamma + beta; }
};

template <bool BN> __device__ __forceinline__ sf_cu_affine sf_cu_affine_of(const sf_cu_neuron &a, int64_t n)
{
    sf_cu_affine f = {0.0f, 1.0f, 1.0f, 0.0f};
    if (BN) { /* the same operations, in the same order, as bn_forward: spikes match the unfused path exactly */
        int32_t ch = (int32_t)((n / a.bn.hw) % a.bn.C);
        f.mean = a.bn.mean[ch];
        f.invstd = 1.0f / sqrtf(a.bn.var[ch] + a.bn.eps);
        f.gamma = a.bn.gamma[ch];
        f.beta = a.bn.beta[ch];
    }
    return f;
}

template <bool BN>
__global__ void sf_cu_neuron_forward(sf_cu_neuron a, float *s, uint8_t *s_u8, float *hout, float *count)
{
    int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float spikes = 0.0f;
    if (n < a.N) {
        const sf_lif_coeffs k = sf_lif_coeffs_of(&a.p);
        const int soft = a.p.soft_reset;
        const sf_cu_affine f = sf_cu_affine_of<BN>(a, n);
        float v = k.v0;
        for (int64_t t0 = 0; t0 < a.T; t0 += SF_NEURON_UNROLL) {
            float xs[SF_NEURON_UNROLL];
#pragma unroll
            for (int u = 0; u < SF_NEURON_UNROLL; u++)
                if (t0 + u < a.T) xs[u] = __ldcs(a.x + (t0 + u) * a.N + n);
#pragma unroll
            for (int u = 0; u < SF_NEURON_UNROLL; u++) {
                if (t0 + u >= a.T) break;
                int64_t i = (t0 + u) * a.N + n;
                float h;
                float st = sf_lif_step(&k, soft, BN ? f(xs[u]) : xs[u], &v, &h);
                spikes += st;
                if (s) __stcs(s + i, st);
                if (s_u8) s_u8[i] = (uint8_t)st;
                if (hout) hout[i] = h;
            }
        }
    }
    if (count) { /* exact: per-warp counts are small integers */
        for (int o = 16; o > 0; o >>= 1) spikes += __shfl_down_sync(0xffffffffu, spikes, o);
        if ((threadIdx.x & 31) == 0 && spikes > 0.0f) atomicAdd(count, spikes);
    }
}

/* Forward recompute of steps [t0, t1) from v into the thread's shared-memory column (stride = blockDim.x). */
template <bool BN>
__device__ __forceinline__ void sf_cu_recompute(const sf_cu_neuron &a, const sf_lif_coeffs &k, const sf_cu_affine &f,
                                                int64_t n, int64_t t0, int64_t t1, float v, float *col)
{
    const int soft = a.p.soft_reset;
    for (int64_t t = t0; t < t1; t += SF_NEURON_UNROLL) {
        float xs[SF_NEURON_UNROLL];
#pragma unroll
        for (int u = 0; u < SF_NEURON_UNROLL; u++)
            if (t + u < t1) xs[u] = a.x[(t + u) * a.N + n];
#pragma unroll
        for (int u = 0; u < SF_NEURON_UNROLL; u++) {
            if (t + u >= t1) break;
            float h;
            sf_lif_step(&k, soft, BN ? f(xs[u]) : xs[u], &v, &h);
            col[(t + u - t0) * blockDim.x] = h;
        }
    }
}

/* Backward over [T, N]. h: saved potentials or NULL (recompute through shared memory in segments of S steps,
 * with nseg = ceil(T / S) checkpoints after the S·blockDim.x floats of h). */
template <bool BN, int MODE>
__global__ void sf_cu_neuron_backward(sf_cu_neuron a, const float *hsaved, const float *ds, float *dx, float *sums,
                                      const float *dgamma, const float *dbeta, int64_t S)
{
    extern __shared__ float sf_cu_smem[];
    int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= a.N) return; /* each thread owns its shared-memory column: no barrier below */
    const sf_lif_coeffs k = sf_lif_coeffs_of(&a.p);
    const sf_cu_affine f = sf_cu_affine_of<BN>(a, n);
    float *col = sf_cu_smem + threadIdx.x;
    float *ckpt = sf_cu_smem + S * blockDim.x + threadIdx.x;
    int64_t nseg = hsaved ? 1 : (a.T + S - 1) / S;
    if (!hsaved && nseg > 1) { /* v at each segment start */
        float v = k.v0, h;
        for (int64_t t = 0; t < a.T; t++) {
            if (t % S == 0) ckpt[(t / S) * blockDim.x] = v;
            sf_lif_step(&k, a.p.soft_reset, BN ? f(a.x[t * a.N + n]) : a.x[t * a.N + n], &v, &h);
        }
    }
    float mdy = 0.0f, mdyx = 0.0f;
    if (MODE == SF_DY_BN_DX) {
        float cnt = (float)(a.T * (a.N / a.bn.C));
        int32_t ch = (int32_t)((n / a.bn.hw) % a.bn.C);
        mdy = dbeta[ch] / cnt;
        mdyx = dgamma[ch] / cnt;
    }
    float dv = 0.0f, sdy = 0.0f, sdyx = 0.0f;
    for (int64_t seg = nseg - 1; seg >= 0; seg--) {
        int64_t t0 = hsaved ? 0 : seg * S, t1 = hsaved ? a.T : min(a.T, t0 + S);
        if (!hsaved) sf_cu_recompute<BN>(a, k, f, n, t0, t1, nseg > 1 ? ckpt[seg * blockDim.x] : k.v0, col);
        for (int64_t t = t1 - 1; t >= t0; t -= SF_NEURON_UNROLL) {
            float dsv[SF_NEURON_UNROLL], hv[SF_NEURON_UNROLL], xv[SF_NEURON_UNROLL];
#pragma unroll
            for (int u = 0; u < SF_NEURON_UNROLL; u++) {
                int64_t tt = t - u;
                if (tt < t0) break;
                dsv[u] = __ldcs(ds + tt * a.N + n);
                hv[u] = hsaved ? hsaved[tt * a.N + n] : col[(tt - t0) * blockDim.x];
                if (BN) xv[u] = a.x[tt * a.N + n];
            }
#pragma unroll
            for (int u = 0; u < SF_NEURON_UNROLL; u++) {
                int64_t tt = t - u;
                if (tt < t0) break;
                float dy = k.c * sf_lif_step_back(&a.p, &k, hv[u], dsv[u], &dv);
                if (MODE == SF_DY_WRITE) {
                    __stcs(dx + tt * a.N + n, dy);
                } else {
                    float xhat = (xv[u] - f.mean) * f.invstd;
                    if (MODE == SF_DY_SUMS) {
                        sdy += dy;
                        sdyx += dy * xhat;
                    } else {
                        __stcs(dx + tt * a.N + n, f.gamma * f.invstd * (dy - mdy - xhat * mdyx));
                    }
                }
            }
        }
    }
    if (MODE == SF_DY_SUMS) {
        sums[n] = sdy;
        sums[a.N + n] = sdyx;
    }
}

/* Launches: forward, and backward with the segment length chosen to fit shared memory. */
sf_status sf_cu_neuron_forward_launch(const sf_cu_neuron &a, bool bn, const sf_lif_out *out, cudaStream_t st);
sf_status sf_cu_neuron_backward_launch(const sf_cu_neuron &a, bool bn, int mode, const float *h, const float *ds,
                                       float *dx, float *sums, const float *dgamma, const float *dbeta,
                                       cudaStream_t st);

#endif
