/* neuron.cu — launch configuration of the time-fused neuron kernels (neuron.cuh): the forward's vector width from
 * alignment, the backward's surrogate instance, block size and shared-memory segment length. */
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

/* 16-byte accesses (forward) need N and every row start divisible by 4, and (BN) 4 neurons of one channel. */
static bool vec4_ok(const sf_cuda_neuron &a, bool bn, const void *const *ptrs, int np, const uint8_t *u8)
{
    if (a.N % 4 != 0 || (bn && a.bn.hw % 4 != 0) || !aligned(a.x, 16) || !aligned(u8, 4)) return false;
    for (int i = 0; i < np; i++)
        if (!aligned(ptrs[i], 16)) return false;
    return true;
}

template <bool BN, int V> static sf_status forward(const sf_cuda_neuron &a, const sf_lif_out *o, cudaStream_t st)
{
    const int threads = 256;
    sf_cuda_neuron_forward<BN, V, 8>
        <<<sf_cuda_blocks((a.N + V - 1) / V, threads), threads, 0, st>>>(a, o->s, o->s_u8, o->h, o->spike_count);
    SF_CUDA_LAUNCHED();
    return SF_OK;
}

/* The models these kernels run: the LIF and the IF (the LIF with a = c = 1, from sf_lif_coeffs_of). */
static sf_status check_model(const sf_cuda_neuron &a)
{
    if (a.p.model == SF_NEURON_LIF || a.p.model == SF_NEURON_IF) return SF_OK;
    return sf_fail(SF_ERR_UNSUPPORTED, "the CUDA neuron kernels do not run the %s yet (use device cpu)",
                   sf_neuron_model_name(a.p.model));
}

sf_status sf_cuda_neuron_forward_launch(const sf_cuda_neuron &a, bool bn, const sf_lif_out *out, cudaStream_t st)
{
    SF_TRY(check_model(a));
    if (a.N == 0) return SF_OK;
    const void *ptrs[] = {out->s, out->h};
    bool v4 = vec4_ok(a, bn, ptrs, 2, out->s_u8);
    if (bn) return v4 ? forward<true, 4>(a, out, st) : forward<true, 1>(a, out, st);
    return v4 ? forward<false, 4>(a, out, st) : forward<false, 1>(a, out, st);
}

struct bwd_args {
    const float *h, *ds;
    float *dx, *sums;
    const float *dgamma, *dbeta;
};

/* SF_CUDA_BWD_THREADS neurons per block; smem bytes for segments of S steps (0: h is given). */
template <bool BN, int MODE, int U>
static sf_status backward(const sf_cuda_neuron &a, const bwd_args &b, int64_t S, size_t smem, cudaStream_t st)
{
    const bool hard = !a.p.soft_reset && !a.p.use_grad_threshold;
    const int threads = SF_CUDA_BWD_THREADS;
    return with_surrogate(a.p.surrogate, [&](auto sg) -> sf_status {
        constexpr int SG = decltype(sg)::value;
        auto kernel = b.h ? (hard ? sf_cuda_neuron_backward<BN, MODE, 1, U, SG, true, true>
                                  : sf_cuda_neuron_backward<BN, MODE, 1, U, SG, false, true>)
                          : (hard ? sf_cuda_neuron_backward<BN, MODE, 1, U, SG, true, false>
                                  : sf_cuda_neuron_backward<BN, MODE, 1, U, SG, false, false>);
        if (smem > 48 * 1024)
            SF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        /* all of the unified L1/shared memory as shared: the recompute's columns are what limits residency */
        if (smem > 0)
            SF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                               cudaSharedmemCarveoutMaxShared));
        kernel<<<sf_cuda_blocks(a.N, threads), threads, smem, st>>>(a, b.h, b.ds, b.dx, b.sums, b.dgamma, b.dbeta, S);
        SF_CUDA_LAUNCHED();
        return SF_OK;
    });
}

/* Picks the configuration: one neuron per thread (four per thread with 16-byte accesses needed twice the registers
 * and ran slower: the loop is issue-bound at the occupancy registers and columns allow), loads 8 steps ahead (4 for
 * T < 8, so that batches are full). Recompute: each neuron needs 4 bytes of shared memory per step of a segment
 * (8 with BN, whose column keeps x too); up to T = 64 one segment (BN: 32), beyond that segments of 32 steps (a
 * multiple of the batch; longer where the checkpoints would not fit), so that shared memory lets registers, not
 * columns, bound the resident threads. */
template <bool BN, int MODE>
static sf_status backward_config(const sf_cuda_neuron &a, const bwd_args &b, cudaStream_t st)
{
    const int U = a.T < 8 ? 4 : 8;
    if (b.h) return U == 4 ? backward<BN, MODE, 4>(a, b, 0, 0, st) : backward<BN, MODE, 8>(a, b, 0, 0, st);
    int dev, optin;
    SF_CUDA_CHECK(cudaGetDevice(&dev));
    SF_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const int threads = SF_CUDA_BWD_THREADS, cols = BN ? 2 : 1;
    int64_t S = a.T <= (BN ? 32 : 64) ? a.T : 32;
    if ((cols * S + (a.T + S - 1) / S) * 4 * threads > optin) /* very long T: S near sqrt(T) minimises S + T/S */
        S = ((int64_t)sqrt((double)a.T) + U - 1) / U * U;
    int64_t nseg = (a.T + S - 1) / S;
    if (nseg > 1 && (cols * S + nseg) * 4 * threads > optin)
        return sf_fail(SF_ERR_UNSUPPORTED, "LIF backward: T = %lld steps need more shared memory than this GPU has; "
                       "keep h (memory=full) for such sequences", (long long)a.T);
    size_t smem = (size_t)(cols * S + (nseg > 1 ? nseg : 0)) * 4 * threads;
    if (U == 4) return backward<BN, MODE, 4>(a, b, S, smem, st);
    return backward<BN, MODE, 8>(a, b, S, smem, st);
}

sf_status sf_cuda_neuron_backward_launch(const sf_cuda_neuron &a, bool bn, int mode, const float *h, const float *ds,
                                         float *dx, float *sums, const float *dgamma, const float *dbeta,
                                         cudaStream_t st)
{
    SF_TRY(check_model(a));
    if (a.N == 0) return SF_OK;
    bwd_args b = {h, ds, dx, sums, dgamma, dbeta};
    if (!bn) return backward_config<false, SF_DY_WRITE>(a, b, st);
    if (mode == SF_DY_SUMS) return backward_config<true, SF_DY_SUMS>(a, b, st);
    return backward_config<true, SF_DY_BN_DX>(a, b, st);
}
