/* neuron_launch.cuh — launch configuration of the time-fused neuron kernels (neuron.cuh): the forward's vector width
 * and batch, the backward's model and surrogate instance, batch and segment length; a sf_cuda_lif_tuning can force
 * each (benchmarks and tests compare them). Instantiated (SF_CUDA_NEURON_INSTANCES) by neuron_f32.cu, neuron_bf16.cu
 * and neuron_f16.cu, which compile in parallel: the backward has 80 instances per type and model (the ALIF's 48), and
 * the LIF 48 more with four neurons per thread (4 and 8 steps ahead). */
#ifndef SF_CUDA_NEURON_LAUNCH_CUH
#define SF_CUDA_NEURON_LAUNCH_CUH

#include "cuda/neuron.cuh"

#include <type_traits>

static bool aligned(const void *p, size_t a)
{
    return ((uintptr_t)p % a) == 0;
}

/* Calls fn(std::integral_constant<int, SG>) for the run-time surrogate kind. */
template <class Fn> static sf_status with_surrogate(sf_surrogate sg, Fn fn)
{
    switch (sg) {
    case SF_SURROGATE_SIGMOID: return fn(std::integral_constant<int, SF_SURROGATE_SIGMOID>());
    case SF_SURROGATE_ATAN: return fn(std::integral_constant<int, SF_SURROGATE_ATAN>());
    case SF_SURROGATE_FAST_SIGMOID: return fn(std::integral_constant<int, SF_SURROGATE_FAST_SIGMOID>());
    case SF_SURROGATE_RECT: return fn(std::integral_constant<int, SF_SURROGATE_RECT>());
    }
    return sf_fail(SF_ERR_INVALID, "LIF surrogate %d is not one of sigmoid, atan, fast_sigmoid, rect", (int)sg);
}

/* With BN, whether a thread's V neurons may lie in different channels (hw % V != 0; NHWC: hw = 1), so that the PERN
 * instance keeps an affine per neuron. */
template <bool BN, int V> static bool affine_per_neuron(const sf_cuda_neuron &a)
{
    return BN && V > 1 && a.bn.hw % V != 0;
}

/* 4-element forward accesses need N and every row start divisible by 4, and x, s (type T), h and the spike bytes
 * aligned to 4 elements. */
template <class T> static bool vec4_ok(const sf_cuda_neuron &a, const sf_lif_out *o)
{
    return a.N % 4 == 0 && aligned(a.x, 4 * sizeof(T)) && aligned(o->s, 4 * sizeof(T)) && aligned(o->h, 16) &&
           aligned(o->s_u8, 4);
}

template <class T, bool BN, int V, int U>
static sf_status forward(const sf_cuda_neuron &a, const sf_lif_out *o, cudaStream_t st)
{
    const int threads = 256;
    const bool pern = affine_per_neuron<BN, V>(a);
    return sf_cuda_with_model(&a.p, [&](auto model) -> sf_status {
        constexpr int MODEL = decltype(model)::value; /* a PERN instance only where it can apply */
        auto kernel = pern ? sf_cuda_neuron_forward<T, BN, V, U, MODEL, BN && (V > 1)>
                           : sf_cuda_neuron_forward<T, BN, V, U, MODEL, false>;
        kernel<<<sf_cuda_blocks((a.N + V - 1) / V, threads), threads, 0, st>>>(a, (T *)o->s, o->s_u8, o->h,
                                                                              o->spike_count);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

static sf_status multiprocessors(int *sms)
{
    int dev;
    SF_CUDA_CHECK(cudaGetDevice(&dev));
    SF_CUDA_CHECK(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
    return SF_OK;
}

/* Four neurons per thread with 4-element accesses while that leaves two blocks per SM; else (long T) one per thread,
 * next batch in flight, in batches of 32 steps where even that is under two blocks per SM or elements are 16-bit. */
template <class T, bool BN>
static sf_status forward_config(const sf_cuda_neuron &a, const sf_lif_out *out, bool v4, cudaStream_t st)
{
    int sms;
    SF_TRY(multiprocessors(&sms));
    const int64_t two_blocks = 2 * 256 * (int64_t)sms;
    const int tv = a.tune.fwd_vec, tu = a.tune.fwd_ahead;
    if ((tv != 0 && tv != 1 && tv != 4) || (tu != 0 && tu != 8 && tu != 32) || (tv == 4 && tu == 32))
        return sf_fail(SF_ERR_INVALID,
                       "LIF forward tuning: %d neurons per thread, %d steps ahead: expected 1 or 4, "
                       "and 8, or 32 with one neuron",
                       tv, tu);
    const int V = v4 && (tv ? tv : a.N / 4 >= two_blocks ? 4 : 1) == 4 ? 4 : 1; /* 4 only where allowed */
    const int U = tu ? tu : V == 1 && (a.N < two_blocks || sizeof(T) == 2) && a.T >= 64 ? 32 : 8;
    if (V == 4) return forward<T, BN, 4, 8>(a, out, st);
    return U == 32 ? forward<T, BN, 1, 32>(a, out, st) : forward<T, BN, 1, 8>(a, out, st);
}

template <class T>
sf_status sf_cuda_neuron_forward_launch(const sf_cuda_neuron &a, bool bn, const sf_lif_out *out, cudaStream_t st)
{
    if (a.N == 0) return SF_OK;
    SF_TRY(sf_cuda_time_fits(a, "LIF forward"));
    bool v4 = vec4_ok<T>(a, out);
    return bn ? forward_config<T, true>(a, out, v4, st) : forward_config<T, false>(a, out, v4, st);
}

template <class T> struct bwd_args {
    const float *h;
    const T *ds;
    T *dx;
    float *sums;
};

/* 4-neuron backward accesses: N divisible by 4, x, ds and dx aligned to 4 elements (sums are written per neuron). */
template <class T> static bool bwd_vec4_ok(const sf_cuda_neuron &a, const bwd_args<T> &b)
{
    return a.N % 4 == 0 && aligned(a.x, 4 * sizeof(T)) && aligned(b.ds, 4 * sizeof(T)) && aligned(b.dx, 4 * sizeof(T));
}

/* The backward's HARD instance: hard reset and no θ_grad; for the ALIF detach_reset and no θ_grad (either reset),
 * whose recompute keeps one column, z = h − θ, instead of two. */
template <int MODEL> static bool hard_instance(const sf_lif_params &p)
{
    return !p.use_grad_threshold && (MODEL == SF_CUDA_ALIF ? p.detach_reset : !p.soft_reset);
}

/* SF_CUDA_BWD_THREADS·V neurons per block; smem bytes for segments of S steps (0: h is given; V = 1 then). */
template <class T, bool BN, int V, int U, int MODEL>
static sf_status backward(const sf_cuda_neuron &a, const bwd_args<T> &b, int64_t S, size_t smem, cudaStream_t st)
{
    const bool hard = hard_instance<MODEL>(a.p), pern = affine_per_neuron<BN, V>(a);
    const int threads = SF_CUDA_BWD_THREADS;
    return with_surrogate(a.p.surrogate, [&](auto sg) -> sf_status {
        constexpr int SG = decltype(sg)::value;
        constexpr bool P = BN && V > 1; /* a PERN instance only where it can apply */
        auto kernel = hard ? sf_cuda_neuron_backward<T, BN, V, U, SG, true, false, MODEL, false>
                           : sf_cuda_neuron_backward<T, BN, V, U, SG, false, false, MODEL, false>;
        if (pern)
            kernel = hard ? sf_cuda_neuron_backward<T, BN, V, U, SG, true, false, MODEL, P>
                          : sf_cuda_neuron_backward<T, BN, V, U, SG, false, false, MODEL, P>;
        /* saved h: short batches only (32 steps ahead is for the recompute's few threads); not the ALIF's */
        if constexpr (V == 1 && U <= 8 && MODEL != SF_CUDA_ALIF)
            if (b.h)
                kernel = hard ? sf_cuda_neuron_backward<T, BN, 1, U, SG, true, true, MODEL, false>
                              : sf_cuda_neuron_backward<T, BN, 1, U, SG, false, true, MODEL, false>;
        if (smem > 48 * 1024)
            SF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        /* all of the unified L1/shared memory as shared: the recompute's columns are what limits residency */
        if (smem > 0)
            SF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                               cudaSharedmemCarveoutMaxShared));
        const int nseg = S > 0 ? (int)((a.T + S - 1) / S) : 1;
        kernel<<<sf_cuda_blocks((a.N + V - 1) / V, threads), threads, smem, st>>>(a, b.h, b.ds, b.dx, b.sums, (int)S,
                                                                                   nseg);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

/* The backward's configuration: a neuron per thread (four: below), loads 8 steps ahead (4 for T < 8); the ALIF
 * always recomputes (θ is not saved). Recompute: 4 bytes of shared memory per neuron, step and column (h; BN's x; the ALIF's θ unless
 * hard_instance), plus a checkpoint per segment unless the forward kept them (v_ckpt). Kept, past 32 steps: 32-step
 * segments, 64 (32 ahead) where the neurons fill under two blocks per SM, 128 where at most one; not kept: one segment
 * up to T = 64 (32 with several columns), else the longest that fit, 32 ahead. A forced length no multiple of 32 finds
 * its starts by a first pass. Why: docs/architecture.md, "The CUDA neuron kernels". */
template <class T, bool BN, int MODEL>
static sf_status backward_model(const sf_cuda_neuron &given, bwd_args<T> b, cudaStream_t st)
{
    sf_cuda_neuron a = given;
    const sf_cuda_lif_tuning &tu = a.tune;
    SF_TRY(sf_cuda_time_fits(a, "LIF backward"));
    if (MODEL == SF_CUDA_ALIF) b.h = NULL;
    int U = tu.bwd_ahead ? tu.bwd_ahead : a.T < 8 ? 4 : 8;
    if (U != 4 && U != 8 && (U != 32 || b.h))
        return sf_fail(SF_ERR_INVALID, "LIF backward tuning: %d steps ahead: expected 4, 8, or 32 without saved h", U);
    if (b.h)
        return U == 4 ? backward<T, BN, 1, 4, MODEL>(a, b, 0, 0, st) : backward<T, BN, 1, 8, MODEL>(a, b, 0, 0, st);
    int dev, optin, sms;
    SF_CUDA_CHECK(cudaGetDevice(&dev));
    SF_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    SF_TRY(multiprocessors(&sms));
    const int64_t threads = SF_CUDA_BWD_THREADS, ck = MODEL == SF_CUDA_ALIF ? 2 : 1;
    const int64_t cols = 1 + BN + (MODEL == SF_CUDA_ALIF && !hard_instance<MODEL>(a.p));
    const bool kept = a.st.v_ckpt && a.T > SF_LIF_CKPT_STEPS; /* the forward's checkpoints */
    auto ckpt_floats = [&](int64_t S) { /* shared-memory checkpoints: where the segments do not start at kept ones */
        const int64_t nseg = (a.T + S - 1) / S;
        return nseg > 1 && !(kept && S % SF_LIF_CKPT_STEPS == 0) ? ck * nseg : 0;
    };
    auto fits = [&](int64_t S) { return (cols * S + ckpt_floats(S)) * 4 * threads <= optin; };
    int64_t S = tu.bwd_seg > 0 ? tu.bwd_seg : a.T;
    if (kept && tu.bwd_seg == 0) {
        const bool few = a.N < 2 * threads * sms;
        if (!tu.bwd_ahead) U = few ? 32 : 8;
        S = few ? 2 * SF_LIF_CKPT_STEPS : SF_LIF_CKPT_STEPS;
        /* at most one block per SM: longer segments cost no residency and start fewer reverse passes */
        if (a.N <= threads * sms && fits(4 * SF_LIF_CKPT_STEPS)) S = 4 * SF_LIF_CKPT_STEPS;
    } else if (tu.bwd_seg < 0 || (tu.bwd_seg == 0 && a.T > (cols > 1 ? 32 : 64))) {
        if (!tu.bwd_ahead) U = 32;
        const int64_t step = kept ? SF_LIF_CKPT_STEPS : U; /* U divides 32 */
        for (S = (a.T + step - 1) / step * step; S > step && !fits(S); S -= step) { /* the longest that fits */
        }
    }
    if (S > a.T) S = a.T;
    const int64_t nseg = (a.T + S - 1) / S;
    if (!fits(S))
        return sf_fail(tu.bwd_seg ? SF_ERR_INVALID : SF_ERR_UNSUPPORTED,
                       "LIF backward: T = %lld steps in segments of %lld need more shared memory than this GPU has; "
                       "keep h (memory=full) for such sequences",
                       (long long)a.T, (long long)S);
    if (nseg == 1 || ckpt_floats(S)) a.st.v_ckpt = NULL; /* the kernel's sign to start segments at kept ones */
    size_t smem = (size_t)(cols * S + ckpt_floats(S)) * 4 * threads;
    /* four neurons per thread for the LIF's short sequences (one segment, 4 or 8 ahead) where their columns fit and
     * the neurons fill two blocks per SM: four share each step's index and address work */
    const int tv = tu.bwd_vec;
    if (tv != 0 && tv != 1 && tv != 4)
        return sf_fail(SF_ERR_INVALID, "LIF backward tuning: %d neurons per thread: expected 1 or 4", tv);
    if constexpr (MODEL == SF_CUDA_LIF)
        if (U <= 8 && nseg == 1 && bwd_vec4_ok<T>(a, b) && 4 * smem <= (size_t)optin &&
            (tv ? tv == 4 : a.N / 4 >= 2 * threads * sms))
            return U == 4 ? backward<T, BN, 4, 4, MODEL>(a, b, S, 4 * smem, st)
                          : backward<T, BN, 4, 8, MODEL>(a, b, S, 4 * smem, st);
    if (U == 4) return backward<T, BN, 1, 4, MODEL>(a, b, S, smem, st);
    if (U == 32) return backward<T, BN, 1, 32, MODEL>(a, b, S, smem, st);
    return backward<T, BN, 1, 8, MODEL>(a, b, S, smem, st);
}

template <class T, bool BN>
static sf_status backward_config(const sf_cuda_neuron &a, const bwd_args<T> &b, cudaStream_t st)
{
    return sf_cuda_with_model(&a.p, [&](auto model) { return backward_model<T, BN, decltype(model)::value>(a, b, st); });
}

template <class T>
sf_status sf_cuda_neuron_backward_launch(const sf_cuda_neuron &a, bool bn, const float *h, const void *ds, void *dx,
                                         float *sums, cudaStream_t st)
{
    if (a.N == 0) return SF_OK;
    bwd_args<T> b = {h, (const T *)ds, (T *)dx, sums};
    return bn ? backward_config<T, true>(a, b, st) : backward_config<T, false>(a, b, st);
}

#define SF_CUDA_NEURON_INSTANCES(T)                                                                                    \
    template sf_status sf_cuda_neuron_forward_launch<T>(const sf_cuda_neuron &, bool, const sf_lif_out *,              \
                                                        cudaStream_t);                                                 \
    template sf_status sf_cuda_neuron_backward_launch<T>(const sf_cuda_neuron &, bool, const float *, const void *,     \
                                                         void *, float *, cudaStream_t);

#endif
