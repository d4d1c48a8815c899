/* neuron.cu — launch configuration of the time-fused neuron kernels (neuron.cuh): block size and the
 * shared-memory segment length of the recomputing backward. */
#include "cuda/neuron.cuh"

sf_status sf_cu_neuron_forward_launch(const sf_cu_neuron &a, bool bn, const sf_lif_out *out, cudaStream_t st)
{
    if (a.N == 0) return SF_OK;
    const int threads = 256;
    unsigned blocks = sf_cu_blocks(a.N, threads);
    if (bn)
        sf_cu_neuron_forward<true><<<blocks, threads, 0, st>>>(a, out->s, out->s_u8, out->h, out->spike_count);
    else
        sf_cu_neuron_forward<false><<<blocks, threads, 0, st>>>(a, out->s, out->s_u8, out->h, out->spike_count);
    SF_CU_LAUNCHED();
    return SF_OK;
}

template <bool BN, int MODE>
static sf_status launch_backward(const sf_cu_neuron &a, const float *h, const float *ds, float *dx, float *sums,
                                 const float *dgamma, const float *dbeta, cudaStream_t st)
{
    int threads = 256;
    int64_t S = 0;
    size_t smem = 0;
    if (!h) {
        int dev, optin;
        SF_CU_CHECK(cudaGetDevice(&dev));
        SF_CU_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        /* Smaller blocks as T grows, so several blocks share a multiprocessor's shared memory. */
        int64_t per_thread = 4 * a.T;
        threads = per_thread * 128 * 2 <= optin ? 128 : per_thread * 64 * 2 <= optin ? 64 : 32;
        S = a.T;
        if (per_thread * threads > optin) { /* segments with checkpoints */
            S = optin / (4 * threads) - 1;
            while (S > 1 && (S + (a.T + S - 1) / S) * 4 * threads > optin) S--;
        }
        int64_t nseg = (a.T + S - 1) / S;
        smem = (size_t)(S + (nseg > 1 ? nseg : 0)) * 4 * threads;
        if (smem > 48 * 1024)
            SF_CU_CHECK(cudaFuncSetAttribute(sf_cu_neuron_backward<BN, MODE>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    }
    sf_cu_neuron_backward<BN, MODE>
        <<<sf_cu_blocks(a.N, threads), threads, smem, st>>>(a, h, ds, dx, sums, dgamma, dbeta, S);
    SF_CU_LAUNCHED();
    return SF_OK;
}

sf_status sf_cu_neuron_backward_launch(const sf_cu_neuron &a, bool bn, int mode, const float *h, const float *ds,
                                       float *dx, float *sums, const float *dgamma, const float *dbeta,
                                       cudaStream_t st)
{
    if (a.N == 0) return SF_OK;
    if (!bn) return launch_backward<false, SF_DY_WRITE>(a, h, ds, dx, sums, dgamma, dbeta, st);
    if (mode == SF_DY_SUMS) return launch_backward<true, SF_DY_SUMS>(a, h, ds, dx, sums, dgamma, dbeta, st);
    return launch_backward<true, SF_DY_BN_DX>(a, h, ds, dx, sums, dgamma, dbeta, st);
}
