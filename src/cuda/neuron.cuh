/* neuron.cuh — the time-fused neuron kernels of LIF and fused BN→LIF over [T, N] (time-major, coalesced over
 * neurons), the time loop inside the thread, equations from core/lif_math.h, the model (LIF/IF, PLIF, ALIF) a
 * template parameter. x, s, ds, dx: activation type T (act.cuh); v, h, BN statistics, arithmetic: float; spikes 0/1.
 * A carried state a.st (float [N] each) is v's start in every pass from step 0, takes the last v, and starts and ends
 * ∂L/∂v. Design (vectors, recompute segments, checkpoints): docs/architecture.md, "The CUDA neuron kernels". */
#ifndef SF_CUDA_NEURON_CUH
#define SF_CUDA_NEURON_CUH

#include "cuda/act.cuh"
#include "cuda/cuda_backend.h"

#include <type_traits>

/* The surrogates' device arithmetic, as the backward is issue-bound (host code keeps the plain expressions): exp by
 * ex2.approx, a / b (b >= 1) by rcp.approx, a·b + c as one FFMA despite --fmad=false. Only gradients change (a few
 * ulp, inside the tests' 1e-5 relative bound); spikes never depend on these. */
__host__ __device__ __forceinline__ float sf_cuda_expf(float x)
{
#ifdef __CUDA_ARCH__
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
    return r;
#else
    return expf(x);
#endif
}
__host__ __device__ __forceinline__ float sf_cuda_grad_div(float a, float b)
{
#ifdef __CUDA_ARCH__
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
    return a * r;
#else
    return a / b;
#endif
}
__host__ __device__ __forceinline__ float sf_cuda_fmaf(float a, float b, float c)
{
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return a * b + c;
#endif
}
#define SF_EXPF sf_cuda_expf
#define SF_GRAD_DIV sf_cuda_grad_div
#define SF_FMAF sf_cuda_fmaf

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
    const void *x; /* [T, N] in the kernel's activation type */
    sf_cuda_bn_in bn; /* used when the kernel's BN flag is set */
    sf_cuda_lif_tuning tune; /* a forced launch configuration (zeros: the automatic one) */
    sf_lif_state st;         /* [N] each, optional: the state carried across calls (spikefuse.h) */
};

/* v before the first step of neuron n: the carried state or the model's start value. */
__device__ __forceinline__ float sf_cuda_v0(const sf_cuda_neuron &a, const sf_lif_coeffs &k, int64_t n)
{
    return a.st.v_in ? a.st.v_in[n] : k.v0;
}

/* The kernels count time in 32 bits (indices, loops, checkpoint slots): every launcher checks T first. */
static inline sf_status sf_cuda_time_fits(const sf_cuda_neuron &a, const char *what)
{
    if (a.T <= INT32_MAX) return SF_OK;
    return sf_fail(SF_ERR_UNSUPPORTED, "%s: T = %lld steps; at most %d", what, (long long)a.T, INT32_MAX);
}

/* The kernels' neuron models: the IF runs as the LIF (its a = c = 1 come in a.k). */
enum sf_cuda_model { SF_CUDA_LIF = 0, SF_CUDA_PLIF, SF_CUDA_ALIF };

static inline int sf_cuda_model_of(const sf_lif_params *p)
{
    return p->model == SF_NEURON_PLIF ? SF_CUDA_PLIF : p->model == SF_NEURON_ALIF ? SF_CUDA_ALIF : SF_CUDA_LIF;
}

/* Calls fn(std::integral_constant<int, MODEL>) for the parameters' model. */
template <class Fn> static sf_status sf_cuda_with_model(const sf_lif_params *p, Fn fn)
{
    switch (sf_cuda_model_of(p)) {
    case SF_CUDA_PLIF: return fn(std::integral_constant<int, SF_CUDA_PLIF>());
    case SF_CUDA_ALIF: return fn(std::integral_constant<int, SF_CUDA_ALIF>());
    default: return fn(std::integral_constant<int, SF_CUDA_LIF>());
    }
}

/* Whether a PLIF sums its dw terms per warp (plif.cu then reduces N/32 partials, not N): where each warp's 32 neurons
 * share one w, i.e. the run of one w (N, or a channel's w_hw) is a multiple of 32. */
__host__ __device__ inline bool sf_cuda_plif_warp_sums(const sf_cuda_neuron &a)
{
    return (a.st.w_channels > 1 ? a.st.w_hw : a.N) % 32 == 0;
}

/* The channel of neuron n of [.., C, hw] (n < N), in 32 bits where N fits, without division where hw = 1: a 64-bit
 * division is tens of instructions per neuron, over as few as T = 10 steps. */
__device__ __forceinline__ int32_t sf_cuda_channel_of(int64_t n, int64_t N, int64_t hw, int32_t C)
{
    if (N <= (int64_t)UINT32_MAX) {
        const uint32_t r = hw == 1 ? (uint32_t)n : (uint32_t)n / (uint32_t)hw;
        return (int32_t)(r % (uint32_t)C);
    }
    return (int32_t)((n / hw) % C);
}

/* Neuron n's coefficients: a.k's, with a PLIF's a and c from its channel's w. */
template <int MODEL>
__device__ __forceinline__ sf_lif_coeffs sf_cuda_coeffs(const sf_cuda_neuron &a, int64_t n)
{
    sf_lif_coeffs k = a.k;
    if (MODEL == SF_CUDA_PLIF) {
        const int32_t ch = a.st.w_channels > 1 ? sf_cuda_channel_of(n, a.N, a.st.w_hw, a.st.w_channels) : 0;
        sf_plif_coeffs(a.st.w[ch], a.p.decay_input, &k.a, &k.c);
    }
    return k;
}

/* The ALIF's b before the first step of neuron n: the carried state's second half, or 0. */
__device__ __forceinline__ float sf_cuda_b0(const sf_cuda_neuron &a, int64_t n)
{
    return a.st.v_in ? a.st.v_in[a.N + n] : 0.0f;
}

/* One forward step of neuron model MODEL with coefficients k: s_t, with v (and b) updated and h_t (and θ_t)
 * written. */
template <int MODEL>
__device__ __forceinline__ float sf_cuda_step(const sf_lif_coeffs &k, int soft, float y, float *v, float *b, float *h,
                                              float *theta)
{
    if (MODEL == SF_CUDA_ALIF) return sf_alif_step(&k, soft, y, v, b, h, theta);
    return sf_lif_step(&k, soft, y, v, h);
}

/* Checkpoints (sf_lif_state.v_ckpt): after step t, the state before step t + 1 goes to slot j − 1 where
 * t + 1 = T − j·SF_LIF_CKPT_STEPS (v, then the ALIF's b after all the v slots). */
static_assert((SF_LIF_CKPT_STEPS & (SF_LIF_CKPT_STEPS - 1)) == 0, "checkpoint spacing: a power of two");
template <int V, int MODEL>
__device__ __forceinline__ void sf_cuda_ckpt_store(const sf_cuda_neuron &a, int t, int64_t n, const float *v,
                                                   const float *b)
{
    const int left = (int)a.T - 1 - t; /* time fits 32 bits (the launchers check T) */
    if (left <= 0 || (left & (SF_LIF_CKPT_STEPS - 1)) || !a.st.v_ckpt) return;
    float *slot = a.st.v_ckpt + (int64_t)(left / SF_LIF_CKPT_STEPS - 1) * a.N + n;
#pragma unroll
    for (int j = 0; j < V; j++) {
        slot[j] = v[j];
        if (MODEL == SF_CUDA_ALIF) slot[(a.T - 1) / SF_LIF_CKPT_STEPS * a.N + j] = b[j];
    }
}

/* The state before step t0 = T − j·SF_LIF_CKPT_STEPS (j >= 1) from its checkpoint. */
template <int V, int MODEL>
__device__ __forceinline__ void sf_cuda_ckpt_load(const sf_cuda_neuron &a, int64_t t0, int64_t n, float *v, float *b)
{
    const float *slot = a.st.v_ckpt + ((a.T - t0) / SF_LIF_CKPT_STEPS - 1) * a.N + n;
#pragma unroll
    for (int j = 0; j < V; j++) {
        v[j] = slot[j];
        b[j] = MODEL == SF_CUDA_ALIF ? slot[(a.T - 1) / SF_LIF_CKPT_STEPS * a.N + j] : 0.0f;
    }
}

struct sf_cuda_affine {
    float mean, invstd, gamma, beta;
    /* the same operations, in the same order, as bn_forward: spikes match the unfused path exactly */
    __device__ __forceinline__ float operator()(float x) const
    {
        return (x - mean) * invstd * gamma + beta;
    }
};

/* Neuron n's BN (its channel's statistics and parameters); the identity without BN. */
template <bool BN> __device__ __forceinline__ sf_cuda_affine sf_cuda_affine_of(const sf_cuda_neuron &a, int64_t n)
{
    sf_cuda_affine f = {0.0f, 1.0f, 1.0f, 0.0f};
    if (BN) {
        const int32_t ch = sf_cuda_channel_of(n, a.N, a.bn.hw, a.bn.C);
        f.mean = a.bn.mean[ch];
        f.invstd = __fdiv_rn(1.0f, sqrtf(a.bn.var[ch] + a.bn.eps)); /* IEEE, whatever -prec-div says */
        f.gamma = a.bn.gamma[ch];
        f.beta = a.bn.beta[ch];
    }
    return f;
}

template <int V> __device__ __forceinline__ void sf_cuda_st_u8(uint8_t *p, const float *r)
{
    if (V == 4)
        *(uchar4 *)p = make_uchar4((uint8_t)r[0], (uint8_t)r[1], (uint8_t)r[2], (uint8_t)r[3]);
    else
        *p = (uint8_t)r[0];
}

/* U steps of V neurons, loaded together so that all are in flight at once. */
template <int V, int U> struct sf_cuda_batch {
    float v[U][V];
};

/* Loads steps t, t+dir, … (U of them) of [T, N] tensor p at neuron n, t in [lo, hi); steps outside reload the last
 * in-range one, unused (cheaper than guards). Time fits 32 bits (the launchers check T). */
template <int V, int U, bool ONCE, class T>
__device__ __forceinline__ void sf_cuda_load_batch(sf_cuda_batch<V, U> &b, const T *p, int64_t N, int64_t n, int t,
                                                   int dir, int lo, int hi)
{
    const T *q = p + (int64_t)t * N + n;
    const int64_t step = dir * N;
    if (t + dir * (U - 1) >= lo && t + dir * (U - 1) < hi) { /* a full batch: straight-line loads, all in flight */
#pragma unroll
        for (int u = 0; u < U; u++) sf_ld<V, ONCE>(q + u * step, b.v[u]);
        return;
    }
    const int last = dir > 0 ? hi - 1 : lo; /* the batch's last step in range */
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int tt = dir > 0 ? min(t + u, last) : max(t - u, last);
        sf_ld<V, ONCE>(p + (int64_t)tt * N + n, b.v[u]);
    }
}

/* The forward. BN: PERN says whether a thread's V neurons may lie in different channels (hw % V != 0; NHWC
 * tensors are [rows, C, 1]), each then with its own affine, else all share the first's. */
template <class T, bool BN, int V, int U, int MODEL, bool PERN>
__global__ void __launch_bounds__(256)
    sf_cuda_neuron_forward(sf_cuda_neuron a, T *s, uint8_t *s_u8, float *hout, float *count)
{
    int64_t n = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    float spikes = 0.0f;
    const T *x = (const T *)a.x;
    if (n < a.N) {
        const sf_lif_coeffs k = a.k;
        const int soft = a.p.soft_reset;
        sf_cuda_affine f[PERN ? V : 1];
#pragma unroll
        for (int j = 0; j < (PERN ? V : 1); j++) f[j] = sf_cuda_affine_of<BN>(a, n + j);
        float v[V], b[V], pa[V], pc[V]; /* b: the ALIF's; pa, pc: a PLIF's a and c (V neurons may span channels) */
        /* a PLIF's sigmoid(w) once per thread where its V neurons share a w (at T = 4 it was half the forward's
         * instructions) */
        const bool shared_w = MODEL == SF_CUDA_PLIF && (a.st.w_channels <= 1 || a.st.w_hw % V == 0);
#pragma unroll
        for (int j = 0; j < V; j++) {
            v[j] = sf_cuda_v0(a, k, n + j);
            b[j] = MODEL == SF_CUDA_ALIF ? sf_cuda_b0(a, n + j) : 0.0f;
            if (j > 0 && shared_w) {
                pa[j] = pa[0], pc[j] = pc[0];
                continue;
            }
            const sf_lif_coeffs kj = sf_cuda_coeffs<MODEL>(a, n + j);
            pa[j] = kj.a;
            pc[j] = kj.c;
        }
        const int T_ = (int)a.T; /* time in 32 bits (the launcher checks T) */
        auto step = [&](int t, const float *xv) {
            const int64_t i = (int64_t)t * a.N + n;
            float st[V], h[V];
#pragma unroll
            for (int j = 0; j < V; j++) {
                sf_lif_coeffs kj = k;
                if (MODEL == SF_CUDA_PLIF) kj.a = pa[j], kj.c = pc[j];
                float theta;
                st[j] = sf_cuda_step<MODEL>(kj, soft, BN ? f[PERN ? j : 0](xv[j]) : xv[j], &v[j], &b[j], &h[j],
                                            &theta);
                spikes += st[j];
            }
            sf_cuda_ckpt_store<V, MODEL>(a, t, n, v, b);
            if (s) sf_st<V>(s + i, st);
            if (s_u8) sf_cuda_st_u8<V>(s_u8 + i, st);
            if (hout) sf_st<V>(hout + i, h);
        };
        if (V == 1) { /* the next batch is in flight while this one is integrated (few threads: long T) */
            sf_cuda_batch<V, U> next, cur;
            sf_cuda_load_batch<V, U, false>(next, x, a.N, n, 0, 1, 0, T_);
            for (int t0 = 0; t0 < T_; t0 += U) {
                cur = next;
                if (t0 + U < T_) sf_cuda_load_batch<V, U, false>(next, x, a.N, n, t0 + U, 1, 0, T_);
                /* The last batch's tail predicated (LIF, PLIF below U = 32) or branched (ALIF; U >= 32), whichever
                 * compiles better (counts: docs/notebook/perf.md). */
                constexpr bool branch = U >= 32 || MODEL == SF_CUDA_ALIF;
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (branch && t0 + u >= T_) break;
                    if (branch || t0 + u < T_) step(t0 + u, cur.v[u]);
                }
            }
        } else {
            for (int t0 = 0; t0 < T_; t0 += U) {
                float xs[U][V];
#pragma unroll
                for (int u = 0; u < U; u++) /* past T: the last step again, unused (no predicated loads) */
                    sf_ld<V, false>(x + (int64_t)min(t0 + u, T_ - 1) * a.N + n, xs[u]);
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (t0 + u >= T_) break;
                    step(t0 + u, xs[u]);
                }
            }
        }
        if (a.st.v_out)
#pragma unroll
            for (int j = 0; j < V; j++) {
                a.st.v_out[n + j] = v[j];
                if (MODEL == SF_CUDA_ALIF) a.st.v_out[a.N + n + j] = b[j];
            }
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

/* Forward recompute of steps [t0, t1) from v (ALIF: and b) into the thread's shared column (KEEPX: x into xsm; ALIF:
 * θ into thsm, or with ZCOL z = h − θ instead of h and θ); the next batch of x loads while this one integrates. f: the
 * BN affine of each of the V neurons (PERN) or of all. */
template <class T, bool BN, bool KEEPX, int MODEL, bool ZCOL, int V, int U, bool PERN>
__device__ __forceinline__ void sf_cuda_recompute(const sf_cuda_neuron &a, int soft, const sf_lif_coeffs &k,
                                                  const sf_cuda_affine *f, int64_t n, int t0, int t1, float *v,
                                                  float *b, float *smem, float *xsm, float *thsm)
{
    const T *x = (const T *)a.x;
    sf_cuda_batch<V, U> next, cur;
    sf_cuda_load_batch<V, U, false>(next, x, a.N, n, t0, 1, t0, t1);
    for (int t = t0; t < t1; t += U) {
        cur = next;
        if (t + U < t1) sf_cuda_load_batch<V, U, false>(next, x, a.N, n, t + U, 1, t0, t1);
        auto step = [&](int u) {
            float h[V], th[V];
#pragma unroll
            for (int j = 0; j < V; j++) {
                sf_cuda_step<MODEL>(k, soft, BN ? f[PERN ? j : 0](cur.v[u][j]) : cur.v[u][j], &v[j], &b[j], &h[j],
                                    &th[j]);
                if (ZCOL) h[j] -= th[j];
            }
            if (V == 4)
                *(float4 *)SF_COL(smem, t + u - t0) = make_float4(h[0], h[1], h[2], h[3]);
            else
                *SF_COL(smem, t + u - t0) = h[0];
            if (MODEL == SF_CUDA_ALIF && !ZCOL) {
                if (V == 4)
                    *(float4 *)SF_COL(thsm, t + u - t0) = make_float4(th[0], th[1], th[2], th[3]);
                else
                    *SF_COL(thsm, t + u - t0) = th[0];
            }
            if (KEEPX) {
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
        } else { /* the last steps: a branch out after each, not predicates on every step */
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (t + u >= t1) break;
                step(u);
            }
        }
    }
}

/* Backward over [T, N]: dx_t = ∂L/∂y_t for the neuron's input (BN: its normalised input; Σ_t dy_t and Σ_t dy_t·x̂_t
 * per neuron go to sums[n], sums[N + n] for bn_lif.cu to turn dx into BN's). h: saved (SAVED) or NULL, recomputed in
 * segments of S steps from nseg checkpoints. Shared memory: [S of h][KEEPX: S of x][ALIF: S of θ][per segment: v
 * (ALIF: v, b)]. PLIF: Σ_t dh_t·∂h_t/∂k to sums[n] (BN: sums[2N + n]). SG, HARD (hard reset, no θ_grad; ALIF:
 * detach_reset, z = h − θ alone) and SAVED are template flags: the loop is issue-bound. SF_CUDA_BWD_THREADS wide.
 * PERN: as the forward's, an affine for each of a thread's V neurons (BN on NHWC tensors). */
template <class T, bool BN, int V, int U, int SG, bool HARD, bool SAVED, int MODEL, bool PERN>
__global__ void __launch_bounds__(SF_CUDA_BWD_THREADS, V > 1 ? 2 : 1) /* four neurons: 2 blocks, their columns fit */
    sf_cuda_neuron_backward(sf_cuda_neuron a, const float *hsaved, const T *ds, T *dx, float *sums, int S, int nseg)
{
    static_assert(MODEL == SF_CUDA_LIF || V == 1, "the PLIF and ALIF backward runs one neuron per thread");
    static_assert(!PERN || (BN && V > 1), "an affine per neuron: BN with several neurons per thread");
    static_assert(MODEL != SF_CUDA_ALIF || !SAVED, "the ALIF backward recomputes its thresholds");
    constexpr bool KEEPX = BN;                                /* x in a column too (x̂; a BN+PLIF's y_t) */
    constexpr bool ZCOL = MODEL == SF_CUDA_ALIF && HARD;      /* the ALIF's z = h − θ instead of h and θ */
    constexpr int COLS = 1 + KEEPX + (MODEL == SF_CUDA_ALIF && !ZCOL); /* columns per step */
    constexpr int CK = MODEL == SF_CUDA_ALIF ? 2 : 1;         /* checkpoint floats per segment */
    extern __shared__ float4 sf_cuda_smem4[];
    float *smem = (float *)sf_cuda_smem4;
    int64_t n = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * V;
    if (n >= a.N) return; /* each thread owns its shared-memory column: no barrier below */
    const T *x = (const T *)a.x;
    sf_lif_params p = a.p;
    p.surrogate = (sf_surrogate)SG; /* a constant: the compiler keeps only this surrogate's arithmetic */
    if (HARD) { /* the common case as constants too: hard reset (the ALIF: detach_reset), no θ_grad */
        if (MODEL == SF_CUDA_ALIF)
            p.detach_reset = 1;
        else
            p.soft_reset = 0;
        p.use_grad_threshold = 0;
    }
    const sf_lif_coeffs k = sf_cuda_coeffs<MODEL>(a, n); /* V = 1 for a PLIF: one channel's */
    sf_cuda_affine f[PERN ? V : 1];
#pragma unroll
    for (int j = 0; j < (PERN ? V : 1); j++) f[j] = sf_cuda_affine_of<BN>(a, n + j);
    const int area = (int)S * SF_CUDA_BWD_THREADS * V;
    float *xsm = smem + area, *thsm = smem + (1 + KEEPX) * area, *ckpt = smem + (SAVED ? 1 : COLS) * area;
    /* Segments end at T: segment g >= 1 covers [T - (nseg - g)·S, T - (nseg - 1 - g)·S) and segment 0 the (shorter)
     * rest, so the first pass, which stops where the last segment starts, reads x over T - S steps only. */
    const int T_ = (int)a.T; /* time in 32 bits (the launcher checks T) */
    if (SAVED) nseg = 1;
    const bool given_ckpt = !SAVED && a.st.v_ckpt; /* the launcher passes it only where S is a multiple of 32 */
    float v[V], b[V];
    if (!SAVED && nseg > 1 && !given_ckpt) { /* v (b) at each segment start (slot g for segment g >= 1), x streamed */
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = sf_cuda_v0(a, k, n + j), b[j] = sf_cuda_b0(a, n + j);
        const int tend = T_ - S; /* the last segment's start: no further */
        int next_ck = T_ - (nseg - 1) * S;
        int ck = 1;
        sf_cuda_batch<V, U> next, cur;
        sf_cuda_load_batch<V, U, false>(next, x, a.N, n, 0, 1, 0, tend);
        for (int t = 0; t < tend; t += U) {
            cur = next;
            if (t + U < tend) sf_cuda_load_batch<V, U, false>(next, x, a.N, n, t + U, 1, 0, tend);
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (t + u == next_ck && ck < nseg - 1) {
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        SF_COL(ckpt, CK * ck)[j] = v[j];
                        if (MODEL == SF_CUDA_ALIF) SF_COL(ckpt, CK * ck + 1)[j] = b[j];
                    }
                    ck++;
                    next_ck += S;
                }
                if (t + u < tend) {
                    float h, th;
#pragma unroll
                    for (int j = 0; j < V; j++)
                        sf_cuda_step<MODEL>(k, p.soft_reset, BN ? f[PERN ? j : 0](cur.v[u][j]) : cur.v[u][j], &v[j],
                                            &b[j], &h, &th);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < V; j++) {
            SF_COL(ckpt, CK * (nseg - 1))[j] = v[j];
            if (MODEL == SF_CUDA_ALIF) SF_COL(ckpt, CK * (nseg - 1) + 1)[j] = b[j];
        }
    }
    float dv[V], db[V], sdy[V], sdyx[V], dk = 0.0f, dh_later = 0.0f, h_later = 0.0f; /* dh_{t+1}, h_{t+1} (PLIF) */
#pragma unroll
    for (int j = 0; j < V; j++) {
        dv[j] = a.st.dv_in ? a.st.dv_in[n + j] : 0.0f;
        db[j] = MODEL == SF_CUDA_ALIF && a.st.dv_in ? a.st.dv_in[a.N + n + j] : 0.0f;
        sdy[j] = sdyx[j] = 0.0f;
    }
    for (int seg = nseg - 1; seg >= 0; seg--) {
        const int t1 = SAVED ? T_ : T_ - (nseg - 1 - seg) * S, t0 = SAVED ? 0 : max(t1 - S, 0);
        sf_cuda_batch<V, U> nds, nx, cds, cx;
        sf_cuda_load_batch<V, U, true>(nds, ds, a.N, n, t1 - 1, -1, t0, t1);
        if (KEEPX && SAVED) sf_cuda_load_batch<V, U, false>(nx, x, a.N, n, t1 - 1, -1, t0, t1);
        if (!SAVED) {
            if (seg > 0 && given_ckpt) {
                sf_cuda_ckpt_load<V, MODEL>(a, t0, n, v, b);
            } else {
#pragma unroll
                for (int j = 0; j < V; j++) {
                    v[j] = seg > 0 ? SF_COL(ckpt, CK * seg)[j] : sf_cuda_v0(a, k, n + j);
                    b[j] = MODEL != SF_CUDA_ALIF ? 0.0f
                           : seg > 0              ? SF_COL(ckpt, CK * seg + 1)[j]
                                                  : sf_cuda_b0(a, n + j);
                }
            }
            sf_cuda_recompute<T, BN, KEEPX, MODEL, ZCOL, V, U, PERN>(a, p.soft_reset, k, f, n, t0, t1, v, b, smem,
                                                                      xsm, thsm);
        }
        /* dx at step t - u: walks back one row per step (one add instead of a 64-bit multiply-add per element) */
        T *dxt = dx + (int64_t)(t1 - 1) * a.N + n;
        for (int t = t1 - 1; t >= t0; t -= U) {
            cds = nds;
            if (KEEPX && SAVED) cx = nx;
            if (t - U >= t0) {
                sf_cuda_load_batch<V, U, true>(nds, ds, a.N, n, t - U, -1, t0, t1);
                if (KEEPX && SAVED) sf_cuda_load_batch<V, U, false>(nx, x, a.N, n, t - U, -1, t0, t1);
            }
            auto step = [&](int u) {
                const int tt = t - u;
                float out[V], hv[V], xv[V], thv[V];
                if (SAVED) { /* full mode: h streams in beside ds (and x) */
                    sf_ld<V, true>(hsaved + (int64_t)tt * a.N + n, hv);
                    if (KEEPX) {
#pragma unroll
                        for (int j = 0; j < V; j++) xv[j] = cx.v[u][j];
                    }
                } else if (V == 4) {
                    float4 q = *(const float4 *)SF_COL(smem, tt - t0);
                    hv[0] = q.x, hv[1] = q.y, hv[2] = q.z, hv[3] = q.w;
                    if (KEEPX) {
                        q = *(const float4 *)SF_COL(xsm, tt - t0);
                        xv[0] = q.x, xv[1] = q.y, xv[2] = q.z, xv[3] = q.w;
                    }
                } else {
                    hv[0] = *SF_COL(smem, tt - t0);
                    if (KEEPX) xv[0] = *SF_COL(xsm, tt - t0);
                    if (MODEL == SF_CUDA_ALIF && !ZCOL) thv[0] = *SF_COL(thsm, tt - t0);
                }
#pragma unroll
                for (int j = 0; j < V; j++) {
                    float dh = MODEL != SF_CUDA_ALIF ? sf_lif_step_back(&p, &k, hv[j], cds.v[u][j], &dv[j])
                               : ZCOL ? sf_alif_step_back_z(&p, &k, hv[j], cds.v[u][j], &dv[j], &db[j])
                                      : sf_alif_step_back(&p, &k, hv[j], thv[j], cds.v[u][j], &dv[j], &db[j]);
                    /* BN: as stored, so that its sums and its element-wise pass 2 see the same dy (16 bits) */
                    const float dy = BN ? sf_widen(sf_narrow<T>(k.c * dh)) : k.c * dh;
                    const sf_cuda_affine &fj = f[PERN ? j : 0];
                    float xhat = BN ? (xv[j] - fj.mean) * fj.invstd : 0.0f;
                    if (MODEL == SF_CUDA_PLIF) {
                        const float v_prev = sf_lif_v_after(&k, p.soft_reset, hv[j]); /* v_{t−1} of step tt + 1 */
                        if (KEEPX)
                            dk += (p.decay_input ? dh * fj(xv[j]) : 0.0f) - dh_later * v_prev;
                        else
                            dk += dh_later * ((p.decay_input ? h_later : 0.0f) - v_prev);
                        dh_later = dh;
                        h_later = hv[j];
                    }
                    out[j] = dy;
                    if (BN) sdy[j] += dy, sdyx[j] = SF_FMAF(dy, xhat, sdyx[j]);
                }
                sf_st<V>(dxt, out);
                dxt -= a.N;
            };
            if (t - (U - 1) >= t0) { /* full batch: straight-line code */
#pragma unroll
                for (int u = 0; u < U; u++) step(u);
            } else {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (t - u < t0) break;
                    step(u);
                }
            }
        }
    }
    if (BN)
#pragma unroll
        for (int j = 0; j < V; j++) {
            sums[n + j] = sdy[j];
            sums[a.N + n + j] = sdyx[j];
        }
    if (MODEL == SF_CUDA_PLIF) { /* the first step's v_{t−1} is the start value */
        const float v0 = sf_cuda_v0(a, k, n);
        float *dks = sums + (BN ? 2 * a.N : 0), term = dk - dh_later * v0;
        if (!KEEPX) { /* Σ dh_t·(h_t − v_{t−1}), over c with decay_input */
            term = dk + dh_later * ((p.decay_input ? h_later : 0.0f) - v0);
            if (p.decay_input) term = __fdiv_rn(term, k.c);
        }
        if (sf_cuda_plif_warp_sums(a)) { /* whole warps run here (N is a multiple of 32): a fixed butterfly */
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) term += __shfl_xor_sync(0xffffffffu, term, o);
            if ((threadIdx.x & 31) == 0) dks[n / 32] = term;
        } else {
            dks[n] = term;
        }
    }
    if (a.st.dv_out)
#pragma unroll
        for (int j = 0; j < V; j++) {
            a.st.dv_out[n + j] = dv[j];
            if (MODEL == SF_CUDA_ALIF) a.st.dv_out[a.N + n + j] = db[j];
        }
}

#undef SF_COL

/* Launchers (neuron_launch.cuh, one file per activation type): vector width, block size and segment length from T, N,
 * alignment and shared memory. s, ds, dx of type T; dx (dy with BN) may alias x, since each element is read before
 * the same thread writes it (BN's dx then has no x left to come from). */
template <class T>
sf_status sf_cuda_neuron_forward_launch(const sf_cuda_neuron &a, bool bn, const sf_lif_out *out, cudaStream_t st);
template <class T>
sf_status sf_cuda_neuron_backward_launch(const sf_cuda_neuron &a, bool bn, const float *h, const void *ds, void *dx,
                                         float *sums, cudaStream_t st);
extern template sf_status sf_cuda_neuron_forward_launch<float>(const sf_cuda_neuron &, bool, const sf_lif_out *,
                                                               cudaStream_t);
extern template sf_status sf_cuda_neuron_forward_launch<__nv_bfloat16>(const sf_cuda_neuron &, bool,
                                                                       const sf_lif_out *, cudaStream_t);
extern template sf_status sf_cuda_neuron_forward_launch<__half>(const sf_cuda_neuron &, bool, const sf_lif_out *,
                                                                cudaStream_t);
extern template sf_status sf_cuda_neuron_backward_launch<float>(const sf_cuda_neuron &, bool, const float *,
                                                             const void *, void *, float *, cudaStream_t);
extern template sf_status sf_cuda_neuron_backward_launch<__nv_bfloat16>(const sf_cuda_neuron &, bool, const float *,
                                                             const void *, void *, float *, cudaStream_t);
extern template sf_status sf_cuda_neuron_backward_launch<__half>(const sf_cuda_neuron &, bool, const float *,
                                                             const void *, void *, float *, cudaStream_t);

/* plif.cu: a PLIF's dw (a.st.dw) from its backward's per-neuron (or per-warp) sums dk, with the backend's scratch,
 * or, for the raw entry points, with partials given (sf_cuda_plif_scratch_bytes counts dk and them). */
sf_status sf_cuda_plif_dw(sf_cuda_ctx *c, const sf_cuda_neuron &a, const float *dk);
size_t sf_cuda_plif_scratch_bytes(const sf_cuda_neuron &a, int sms);
sf_status sf_cuda_plif_dw_into(const sf_cuda_neuron &a, const float *dk, void *partials, int sms, cudaStream_t st);

/* lif_compact.cu: the plain LIF forward with out->c (the compact spikes) written by the kernel itself; x and out->s
 * of type t. */
sf_status sf_cuda_lif_compact_forward(const sf_cuda_neuron &a, sf_scalar t, const sf_lif_out *out, cudaStream_t st);

#endif
