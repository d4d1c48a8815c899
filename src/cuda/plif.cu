/* plif.cu — a PLIF's dw from the sums its backward writes per neuron or per warp (neuron.cuh): the sum over each
 * channel's neurons (or over all of them, for one w), times k(1 - k) with k = sigmoid(w), in reduce.cuh's fixed
 * partition with double partials: the same bits run to run. */
#include "cuda/neuron.cuh"
#include "cuda/reduce.cuh"

struct PlifDwF {
    const float *dk, *w;
    float *dw;
    __device__ void term(int64_t i, int32_t, double *a, double *) const { *a += dk[i]; }
    __device__ void finish(int32_t c, double a, double, double) const
    {
        const double k = sf_plif_k(w[c]);
        dw[c] = (float)(a * k * (1.0 - k));
    }
};

/* The layout of w's channels over the backward's sums: R runs of C channels of hw sums (a sum per neuron, or per
 * warp of 32 where the backward sums them so). */
static void plif_geometry(const sf_cuda_neuron &a, int64_t *R, int32_t *C, int64_t *hw)
{
    *C = a.st.w_channels > 1 ? a.st.w_channels : 1;
    *hw = *C > 1 ? a.st.w_hw : a.N;
    *R = a.N / (*C * *hw);
    if (sf_cuda_plif_warp_sums(a)) *hw /= 32;
}

sf_status sf_cuda_plif_dw(sf_cuda_ctx *c, const sf_cuda_neuron &a, const float *dk)
{
    if (!a.st.dw) return SF_OK;
    int64_t R, hw;
    int32_t C;
    plif_geometry(a, &R, &C, &hw);
    return sf_cuda_channel_reduce(c, PlifDwF{dk, a.st.w, a.st.dw}, R, C, hw);
}

size_t sf_cuda_plif_scratch_bytes(const sf_cuda_neuron &a, int sms)
{
    int64_t R, hw;
    int32_t C;
    plif_geometry(a, &R, &C, &hw);
    return sizeof(float) * (size_t)(a.N + 1) + sizeof(double) * 2 * (size_t)C * (size_t)sf_cuda_channel_parts(sms, R, C, hw);
}

sf_status sf_cuda_plif_dw_into(const sf_cuda_neuron &a, const float *dk, void *partials, int sms, cudaStream_t st)
{
    if (!a.st.dw) return SF_OK;
    int64_t R, hw;
    int32_t C;
    plif_geometry(a, &R, &C, &hw);
    return sf_cuda_channel_reduce_into(PlifDwF{dk, a.st.w, a.st.dw}, R, C, hw, sf_cuda_channel_parts(sms, R, C, hw),
                                       (double *)partials, st);
}
