/* neuron.cu — launch configuration of the time-fused neuron kernels (neuron.cuh): vector width from alignment,
 * block size and shared-memory segment length of the recomputing backward. */
#include "cuda/neuron.cuh"

static bool aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

/* 16-byte accesses need N and every row start divisible by 4, and (BN) 4 neurons of one channel per thread. */
static bool vec4_ok(const sf_cu_neuron &a, bool bn, const void *const *ptrs, int np, const uint8_t *u8)
{
    if (a.N % 4 != 0 || (bn && a.bn.hw % 4 != 0) || !aligned(a.x, 16) || !aligned(u8, 4)) return false;
    for (int i = 0; i < np; i++)
        if (!aligned(ptrs[i], 16)) return false;
    return true;
}

template <bool BN, int V>
static sf_status forward(const sf_cu_neuron &a, const sf_lif_out *o, cudaStream_t st)
{
    const int threads = 256;
    sf_cu_neuron_forward<BN, V, 8>
        <<<sf_cu_blocks((a.N + V - 1) / V, threads), threads, 0, st>>>(a, o->s, o->s_u8, o->h, o->spike_count);
    SF_CU_LAUNCHED();
    return SF_OK;
}

sf_status sf_cu_neuron_forward_launch(const sf_cu_neuron &a, bool bn, const sf_lif_out *out, cudaStream_t st)
{
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

/* threads × V neurons per block; smem bytes for segments of S steps (0: h is given). */
template <bool BN, int MODE, int V, int U>
static sf_status backward(const sf_cu_neuron &a, const bwd_args &b, int threads, int64_t S, size_t smem,
                          cudaStream_t st)
{
    auto kernel = sf_cu_neuron_backward<BN, MODE, V, U>;
    if (smem > 48 * 1024)
        SF_CU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<sf_cu_blocks((a.N + V - 1) / V, threads), threads, smem, st>>>(a, b.h, b.ds, b.dx, b.sums, b.dgamma,
                                                                           b.dbeta, S);
    SF_CU_LAUNCHED();
    return SF_OK;
}

/* Picks the configuration. Recompute: each neuron needs 4·T bytes of shared memory, which caps the neurons a
 * multiprocessor holds as T grows; loads then run further ahead (U steps) to keep enough bytes in flight: four
 * neurons per thread with 8 steps ahead up to T = 64, one neuron per thread with 32 steps beyond. */
template <bool BN, int MODE>
static sf_status backward_config(const sf_cu_neuron &a, const bwd_args &b, cudaStream_t st)
{
    const void *ptrs[] = {b.h, b.ds, b.dx};
    bool v4 = vec4_ok(a, BN, ptrs, 3, NULL);
    if (b.h) return v4 ? backward<BN, MODE, 4, 8>(a, b, 256, 0, 0, st) : backward<BN, MODE, 1, 8>(a, b, 256, 0, 0, st);
    {
        int dev, optin;
        SF_CU_CHECK(cudaGetDevice(&dev));
        SF_CU_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        bool long_t = a.T > 64;
        int V = (v4 && !long_t) ? 4 : 1;
        /* blocks small enough that several share a multiprocessor's shared memory */
        int64_t per_thread = 4 * a.T * V;
        int threads = per_thread * 128 * 3 <= optin ? 128 : per_thread * 64 * 3 <= optin ? 64 : 32;
        int64_t S = a.T;
        if (per_thread * threads > optin) { /* segments with checkpoints */
            S = optin / (4 * V * threads) - 1;
            while (S > 1 && (S + (a.T + S - 1) / S) * 4 * V * threads > optin) S--;
        }
        int64_t nseg = (a.T + S - 1) / S;
        size_t smem = (size_t)(S + (nseg > 1 ? nseg : 0)) * 4 * V * threads;
        if (V == 4) return backward<BN, MODE, 4, 8>(a, b, threads, S, smem, st);
        if (long_t) return backward<BN, MODE, 1, 32>(a, b, threads, S, smem, st);
        return backward<BN, MODE, 1, 8>(a, b, threads, S, smem, st);
    }
}

sf_status sf_cu_neuron_backward_launch(const sf_cu_neuron &a, bool bn, int mode, const float *h, const float *ds,
                                       float *dx, float *sums, const float *dgamma, const float *dbeta,
                                       cudaStream_t st)
{
    if (a.N == 0) return SF_OK;
    bwd_args b = {h, ds, dx, sums, dgamma, dbeta};
    if (!bn) return backward_config<false, SF_DY_WRITE>(a, b, st);
    if (mode == SF_DY_SUMS) return backward_config<true, SF_DY_SUMS>(a, b, st);
    return backward_config<true, SF_DY_BN_DX>(a, b, st);
}
