/* neuron.cuh — the time-fused neuron kernels shared by LIF and fused BN→LIF, coalesced over neurons ([T, N]
 * time-major), the time loop inside the thread, equations from core/lif_math.h. Forward: one thread per V neurons
 * (V = 4 with 16-byte accesses when sizes and alignment allow, else 1). Backward: one neuron per thread. Loads run
 * U steps ahead of their use.
 *
 * Backward without a saved h: a thread recomputes h_t forward into its own column of shared memory, then runs the
 * reverse time loop from there, so x is read once and h never touches device memory (20 bytes per element for
 * forward + backward, the W1 floor). Past 64 steps, time is cut into segments of S = 32 steps: a first forward
 * pass keeps v at each segment start (shared memory too) and each segment is recomputed from its checkpoint. That
 * reads x once more up to the last segment (T = 256: 23.5 instead of 20 bytes per element) but keeps the columns
 * small enough for several times more resident threads, which the issue-bound loop needs more.
 * BN: the recompute also keeps each step's input x in a second column, so the reverse loop takes x̂ from shared
 * memory instead of reading x from device memory again (8 of the 28 bytes per element of the two passes); such
 * segments are at most 32 steps.
 */
#ifndef SF_CUDA_NEURON_CUH
#define SF_CUDA_NEURON_CUH

#include "cuda/common.cuh"

/* The sigmoid surrogate's exp on the device as ex2.approx (__expf: a multiply and one MUFU instead of expf's
 * range-reduced polynomial, ~10 instructions in the issue-bound backward). Spikes never depend on it, only
 * gradients (a few ulp, inside the tests' 1e-5 relative bound); host code keeps expf. */
__host__ __device__ __forceinline__ float sf_cuda_expf(float x)
{
#ifdef __CUDA_ARCH__
    return __expf(x);
#else
    return expf(x);
#endif
}
#define SF_EXPF sf_cuda_expf

extern "C" {
#include "core/lif_math.h"
}

/* The input of neuron n: y_t = (x_t − mean)·invstd·γ + β with its channel's statistics for BN, x_t for a plain LIF. */
struct sf_cuda_bn_in {
    int64_t hw;
    int32_t C;
    const float *mean, *var, *gamma, *beta;
    float eps;
};

struct sf_cuda_neuron {
    sf_lif_params p;
    sf_lif_coeffs k; /* from p, computed on the host (IEEE division, as the CPU rounds it) */
    int64_t T, N;
    const float *x; /* [T, N] */
    sf_cuda_bn_in bn; /* used when the kernel's BN flag is set */
    sf_lif_state st;  /* [N] each, optional: the state carried across calls (spikefuse.h) */
    int64_t bn_rows;  /* SF_DY_BN_DX: T·B of the whole batch when it spans several processes (0: this one's) */
};

/* v before the first step of neuron n: the carried state or the model's start value. */
__device__ __forceinline__ float sf_cuda_v0(const sf_cuda_neuron &a, const sf_lif_coeffs &k, int64_t n)
{
    return a.st.v_in ? a.st.v_in[n] : k.v0;
}

/* What the backward does with dy_t = ∂L/∂y_t. */
enum sf_cuda_dy_mode {
    SF_DY_WRITE, /* dx_t = dy_t (plain LIF) */
    SF_DY_SUMS,  /* per neuron: Σ_t dy_t and Σ_t dy_t·x̂_t into sums[n], sums[N + n] (BN pass 1) */
    SF_DY_BN_DX /* dx_t = γ·invstd·(dy_t − mean(dy) − x̂_t·mean(dy·x̂)) with the sums in dgamma, dbeta (pass 2) */
};

struct sf_cuda_affine {
    float mean, invstd, gamma, beta;
    /* the same operations, in the same order, as bn_forward: spikes match the unfused path exactly */
    __device__ __forceinline__ float operator()(float x) const
    {
        return (x - mean) * invstd * gamma + beta;
    }
};

/* All V neurons of a thread share a channel (the forward's launcher picks V = 4 for BN only when hw % 4 == 0). */
template <bool BN> __device__ __forceinline__ sf_cuda_affine sf_cuda_affine_of(const sf_cuda_neuron &a, int64_t n)
{
    sf_cuda_affine f = {0.0f, 1.0f, 1.0f, 0.0f};
    if (BN) {
        int32_t ch = (int32_t)((n / a.bn.hw) % a.bn.C);
        f.mean = a.bn.mean[ch];
        f.invstd = __fdiv_rn(1.0f, sqrtf(a.bn.var[ch] + a.bn.eps)); /* IEEE, whatever -prec-div says */
        f.gamma = a.bn.gamma[ch];
        f.beta = a.bn.beta[ch];
    }
    return f;
}

template <int V> __device__ __forceinline__ void sf_cuda_ld(const float *p, float *r)
{
    if (V == 4) {
        float4 q = *(const float4 *)p;
        r[0] = q.x, r[1] = q.y, r[2] = q.z, r[3] = q.w;
    } else {
        r[0] = *p;
    }
}

/* Loads of data read exactly once: streaming, so they do not push reusable lines out of L2. */
template <int V> __device__ __forceinline__ void sf_cuda_ld_once(const float *p, float *r)
{
    if (V == 4) {
        float4 q = __ldcs((const float4 *)p);
        r[0] = q.x, r[1] = q.y, r[2] = q.z, r[3] = q.w;
    } else {
        r[0] = __ldcs(p);
    }
}

template <int V> __device__ __forceinline__ void sf_cuda_st(float *p, const float *r)
{
    if (V == 4)
        __stcs((float4 *)p, make_float4(r[0], r[1], r[2], r[3]));
    else
        __stcs(p, r[0]);
}

template <int V> __device__ __forceinline__ void sf_cuda_st_u8(uint8_t *p, const float *r)
{
    if (V == 4)
        *(uchar4 *)p = make_uchar4((uint8_t)r[0], (uint8_t)r[1], (uint8_t)r[2], (uint8_t)r[3]);
    else
        *p = (uint8_t)r[0];
}

template <bool BN, int V, int U>
__global__ void __launch_bounds__(256)
    sf_cuda_neuron_forward(sf_cuda_neuron a, float *s, uint8_t *s_u8, float *hout, float *count)
{
    int64_t n = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    float spikes = 0.0f;
    if (n < a.N) {
        const sf_lif_coeffs k = a.k;
        const int soft = a.p.soft_reset;
        const sf_cuda_affine f = sf_cuda_affine_of<BN>(a, n);
        float v[V];
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = sf_cuda_v0(a, k, n + j);
        for (int64_t t0 = 0; t0 < a.T; t0 += U) {
            float xs[U][V];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (t0 + u < a.T) sf_cuda_ld<V>(a.x + (t0 + u) * a.N + n, xs[u]);
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (t0 + u < a.T) {
                    int64_t i = (t0 + u) * a.N + n;
                    float st[V], h[V];
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        st[j] = sf_lif_step(&k, soft, BN ? f(xs[u][j]) : xs[u][j], &v[j], &h[j]);
                        spikes += st[j];
                    }
                    if (s) sf_cuda_st<V>(s + i, st);
                    if (s_u8) sf_cuda_st_u8<V>(s_u8 + i, st);
                    if (hout) sf_cuda_st<V>(hout + i, h);
                }
            }
        }
        if (a.st.v_out)
#pragma unroll
            for (int j = 0; j < V; j++) a.st.v_out[n + j] = v[j];
    }
    if (count) { /* exact: per-warp counts are small integers */
        for (int o = 16; o > 0; o >>= 1) spikes += __shfl_down_sync(0xffffffffu, spikes, o);
        if ((threadIdx.x & 31) == 0 && spikes > 0.0f) atomicAdd(count, spikes);
    }
}

/* Threads per block of the backward, a constant so that the column slots of a batch's steps are immediate offsets. */
#define SF_CUDA_BWD_THREADS 256

/* Shared-memory slot of step t (relative to its segment) for this thread's V neurons: 16-byte rows, conflict-free;
 * 32-bit arithmetic (a column area is at most the 227 KiB of shared memory). */
#define SF_COL(base, t) ((base) + ((int)(t)*SF_CUDA_BWD_THREADS + (int)threadIdx.x) * V)

/* U steps of V neurons, loaded together so that all are in flight at once. */
template <int V, int U> struct sf_cuda_batch {
    float v[U][V];
};

/* Loads steps t, t+dir, … (U of them, those in [lo, hi)) of [T, N] tensor p at neuron n. */
template <int V, int U, bool ONCE>
__device__ __forceinline__ void sf_cuda_load_batch(sf_cuda_batch<V, U> &b, const float *p, int64_t N, int64_t n,
                                                   int64_t t, int dir, int64_t lo, int64_t hi)
{
    const float *q = p + t * N + n;
    const int64_t step = dir * N;
    if (t + dir * (U - 1) >= lo && t + dir * (U - 1) < hi) { /* a full batch: straight-line loads, all in flight */
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (ONCE) sf_cuda_ld_once<V>(q + u * step, b.v[u]);
            else sf_cuda_ld<V>(q + u * step, b.v[u]);
        }
        return;
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        int64_t tt = t + dir * u;
        if (tt >= lo && tt < hi) {
            if (ONCE) sf_cuda_ld_once<V>(q + u * step, b.v[u]);
            else sf_cuda_ld<V>(q + u * step, b.v[u]);
        }
    }
}

/* Forward recompute of steps [t0, t1) from v into the thread's shared-memory column (and, BN, x into its column
 * in xsm); the next batch of x is in flight while the current one is integrated. */
template <bool BN, int V, int U>
__device__ __forceinline__ void sf_cuda_recompute(const sf_cuda_neuron &a, int soft, const sf_lif_coeffs &k,
                                                  const sf_cuda_affine &f, int64_t n, int64_t t0, int64_t t1, float *v,
                                                  float *smem, float *xsm)
{
    sf_cuda_batch<V, U> next, cur;
    sf_cuda_load_batch<V, U, false>(next, a.x, a.N, n, t0, 1, t0, t1);
    for (int64_t t = t0; t < t1; t += U) {
        cur = next;
        if (t + U < t1) sf_cuda_load_batch<V, U, false>(next, a.x, a.N, n, t + U, 1, t0, t1);
        auto step = [&](int u) {
            float h[V];
#pragma unroll
            for (int j = 0; j < V; j++) sf_lif_step(&k, soft, BN ? f(cur.v[u][j]) : cur.v[u][j], &v[j], &h[j]);
            if (V == 4)
                *(float4 *)SF_COL(smem, t + u - t0) = make_float4(h[0], h[1], h[2], h[3]);
            else
                *SF_COL(smem, t + u - t0) = h[0];
            if (BN) {
                const float *xv = cur.v[u];
                if (V == 4)
                    *(float4 *)SF_COL(xsm, t + u - t0) = make_float4(xv[0], xv[1], xv[2], xv[3]);
                else
                    *SF_COL(xsm, t + u - t0) = xv[0];
            }
        };
        if (t + U <= t1) { /* full batch: straight-line code */
#pragma unroll
            for (int u = 0; u < U; u++) step(u);
        } else {
#pragma unroll
            for (int u = 0; u < U; u++)
                if (t + u < t1) step(u);
        }
    }
}

/* Backward over [T, N]. h: saved potentials (SAVED) or NULL (recompute through shared memory in segments of S steps,
 * with nseg = ceil(T / S) checkpoints after the S-step area). Loads of ds (and x for BN) run one batch ahead;
 * the first batch of a segment is requested before its recompute, so its latency overlaps that pass. The
 * surrogate is a template argument (SG), and so is the common hard-reset, no-θ_grad case (HARD): the loop is
 * issue-bound at the occupancy registers and columns allow, and run-time switches cost instructions per element
 * (SAVED likewise: a run-time test of hsaved split each step into branches). Launched with SF_CUDA_BWD_THREADS. */
template <bool BN, int MODE, int V, int U, int SG, bool HARD, bool SAVED>
__global__ void __launch_bounds__(SF_CUDA_BWD_THREADS)
    sf_cuda_neuron_backward(sf_cuda_neuron a, const float *hsaved, const float *ds, float *dx, float *sums,
                            const float *dgamma, const float *dbeta, int64_t S)
{
    extern __shared__ float4 sf_cuda_smem4[];
    float *smem = (float *)sf_cuda_smem4;
    int64_t n = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (n >= a.N) return; /* each thread owns its shared-memory column: no barrier below */
    sf_lif_params p = a.p;
    p.surrogate = (sf_surrogate)SG; /* a constant: the compiler keeps only this surrogate's arithmetic */
    if (HARD) {                     /* the common case as constants too: hard reset, no θ_grad */
        p.soft_reset = 0;
        p.use_grad_threshold = 0;
    }
    const sf_lif_coeffs k = a.k;
    const sf_cuda_affine f = sf_cuda_affine_of<BN>(a, n);
    /* [S steps of h][BN: S steps of x][checkpoints], each a column per thread */
    float *xsm = smem + (int)S * SF_CUDA_BWD_THREADS * V;
    float *ckpt = smem + (BN && !SAVED ? 2 : 1) * (int)S * SF_CUDA_BWD_THREADS * V;
    int64_t nseg = SAVED ? 1 : (a.T + S - 1) / S;
    float v[V];
    if (!SAVED && nseg > 1) { /* v at each segment start (S is a multiple of U), x streamed in batches */
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = sf_cuda_v0(a, k, n + j);
        const int64_t tend = (nseg - 1) * S; /* the last segment's start: no further */
        sf_cuda_batch<V, U> next, cur;
        sf_cuda_load_batch<V, U, false>(next, a.x, a.N, n, 0, 1, 0, tend);
        for (int64_t t = 0; t < tend; t += U) {
            cur = next;
            if (t + U < tend) sf_cuda_load_batch<V, U, false>(next, a.x, a.N, n, t + U, 1, 0, tend);
            if (t % S == 0)
#pragma unroll
                for (int j = 0; j < V; j++) SF_COL(ckpt, t / S)[j] = v[j];
#pragma unroll
            for (int u = 0; u < U; u++) {
                float h;
#pragma unroll
                for (int j = 0; j < V; j++)
                    sf_lif_step(&k, p.soft_reset, BN ? f(cur.v[u][j]) : cur.v[u][j], &v[j], &h);
            }
        }
#pragma unroll
        for (int j = 0; j < V; j++) SF_COL(ckpt, nseg - 1)[j] = v[j];
    }
    float mdy = 0.0f, mdyx = 0.0f;
    if (MODE == SF_DY_BN_DX) {
        float cnt = (float)((a.bn_rows ? a.bn_rows : a.T * (a.N / a.bn.C / a.bn.hw)) * a.bn.hw);
        int32_t ch = (int32_t)((n / a.bn.hw) % a.bn.C);
        mdy = dbeta[ch] / cnt;
        mdyx = dgamma[ch] / cnt;
    }
    float dv[V], sdy[V], sdyx[V];
#pragma unroll
    for (int j = 0; j < V; j++) {
        dv[j] = a.st.dv_in ? a.st.dv_in[n + j] : 0.0f;
        sdy[j] = sdyx[j] = 0.0f;
    }
    for (int64_t seg = nseg - 1; seg >= 0; seg--) {
        int64_t t0 = SAVED ? 0 : seg * S, t1 = SAVED ? a.T : min(a.T, t0 + S);
        sf_cuda_batch<V, U> nds, nx, cds, cx;
        sf_cuda_load_batch<V, U, true>(nds, ds, a.N, n, t1 - 1, -1, t0, t1);
        if (BN && SAVED) sf_cuda_load_batch<V, U, false>(nx, a.x, a.N, n, t1 - 1, -1, t0, t1);
        if (!SAVED) {
#pragma unroll
            for (int j = 0; j < V; j++) v[j] = nseg > 1 ? SF_COL(ckpt, seg)[j] : sf_cuda_v0(a, k, n + j);
            sf_cuda_recompute<BN, V, U>(a, p.soft_reset, k, f, n, t0, t1, v, smem, xsm);
        }
        /* dx at step t - u: walks back one row per step (one add instead of a 64-bit multiply-add per element) */
        float *dxt = MODE != SF_DY_SUMS ? dx + (t1 - 1) * a.N + n : NULL;
        for (int64_t t = t1 - 1; t >= t0; t -= U) {
            cds = nds;
            if (BN && SAVED) cx = nx;
            if (t - U >= t0) {
                sf_cuda_load_batch<V, U, true>(nds, ds, a.N, n, t - U, -1, t0, t1);
                if (BN && SAVED) sf_cuda_load_batch<V, U, false>(nx, a.x, a.N, n, t - U, -1, t0, t1);
            }
            auto step = [&](int u) {
                int64_t tt = t - u;
                float out[V], hv[V], xv[V];
                if (SAVED) { /* full mode: h streams in beside ds (and x for BN) */
                    sf_cuda_ld_once<V>(hsaved + tt * a.N + n, hv);
                    if (BN) {
#pragma unroll
                        for (int j = 0; j < V; j++) xv[j] = cx.v[u][j];
                    }
                } else if (V == 4) {
                    float4 q = *(const float4 *)SF_COL(smem, tt - t0);
                    hv[0] = q.x, hv[1] = q.y, hv[2] = q.z, hv[3] = q.w;
                    if (BN) {
                        q = *(const float4 *)SF_COL(xsm, tt - t0);
                        xv[0] = q.x, xv[1] = q.y, xv[2] = q.z, xv[3] = q.w;
                    }
                } else {
                    hv[0] = *SF_COL(smem, tt - t0);
                    if (BN) xv[0] = *SF_COL(xsm, tt - t0);
                }
#pragma unroll
                for (int j = 0; j < V; j++) {
                    float dy = k.c * sf_lif_step_back(&p, &k, hv[j], cds.v[u][j], &dv[j]);
                    float xhat = BN ? (xv[j] - f.mean) * f.invstd : 0.0f;
                    if (MODE == SF_DY_WRITE) out[j] = dy;
                    if (MODE == SF_DY_SUMS) sdy[j] += dy, sdyx[j] += dy * xhat;
                    if (MODE == SF_DY_BN_DX) out[j] = f.gamma * f.invstd * (dy - mdy - xhat * mdyx);
                }
                if (MODE != SF_DY_SUMS) {
                    sf_cuda_st<V>(dxt, out);
                    dxt -= a.N;
                }
            };
            if (t - (U - 1) >= t0) { /* full batch: straight-line code */
#pragma unroll
                for (int u = 0; u < U; u++) step(u);
            } else {
#pragma unroll
                for (int u = 0; u < U; u++)
                    if (t - u >= t0) step(u);
            }
        }
    }
    if (MODE == SF_DY_SUMS)
#pragma unroll
        for (int j = 0; j < V; j++) {
            sums[n + j] = sdy[j];
            sums[a.N + n + j] = sdyx[j];
        }
    if (a.st.dv_out)
#pragma unroll
        for (int j = 0; j < V; j++) a.st.dv_out[n + j] = dv[j];
}

#undef SF_COL

/* Launches: forward, and backward with the vector width, block size and segment length chosen from T, N, the
 * pointers' alignment and the device's shared memory. dx may alias x (each element is read before it is written,
 * by the thread that writes it). */
sf_status sf_cuda_neuron_forward_launch(const sf_cuda_neuron &a, bool bn, const sf_lif_out *out, cudaStream_t st);
/* lif_compact.cu: the plain LIF forward with out->c (the compact spikes) written by the kernel itself. */
sf_status sf_cuda_lif_compact_forward(const sf_cuda_neuron &a, const sf_lif_out *out, cudaStream_t st);
sf_status sf_cuda_neuron_backward_launch(const sf_cuda_neuron &a, bool bn, int mode, const float *h, const float *ds,
                                         float *dx, float *sums, const float *dgamma, const float *dbeta,
                                         cudaStream_t st);

#endif
