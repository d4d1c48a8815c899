/* lif_compact.cu — the neuron forward (every model) that writes the compact form of its spikes (core/spikes.h) in the same pass: one
 * block per segment of one sample's row runs all T steps of its SF_SPIKE_SEG neurons, and each step's spikes
 * become a bits word per warp and the segment's list and count (spikes.cuh). s, h and bytes are written where
 * asked, as the plain forward writes them, with the same arithmetic and the same carried state (v_in, v_out, the
 * checkpoints v_ckpt): the spikes are bitwise the same. x and s are of the activation type T (act.cuh), h float. */
#include "cuda/neuron.cuh"
#include "cuda/spikes.cuh"

template <class T, int U, int MODEL>
__global__ void __launch_bounds__(SF_SPIKE_SEG)
    lif_compact_kernel(sf_cuda_neuron a, int64_t n, T *s, uint8_t *s_u8, float *hout, sf_spikes c, float *count)
{
    const T *x = (const T *)a.x;
    __shared__ int wc[2][SF_SPIKE_SEG / 32];
    const int64_t B = a.N / n, segs = (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG;
    const int64_t b = blockIdx.x / segs, j = blockIdx.x % segs * SF_SPIKE_SEG + threadIdx.x;
    const bool valid = j < n;
    const int64_t nf = b * n + (valid ? j : 0); /* lanes past the row's end integrate a real neuron, write nothing */
    const sf_lif_coeffs k = sf_cuda_coeffs<MODEL>(a, nf);
    const int soft = a.p.soft_reset;
    float v = sf_cuda_v0(a, k, nf), ab = MODEL == SF_CUDA_ALIF ? sf_cuda_b0(a, nf) : 0.0f, spikes = 0.0f;
    const int T_ = (int)a.T; /* time in 32 bits (sf_cuda_time_fits) */
    sf_cuda_batch<1, U> next, cur; /* the next batch of x in flight while this one is integrated, as the plain
                                      forward has it (loading each batch when needed took twice its time) */
    sf_cuda_load_batch<1, U, false>(next, x, a.N, nf, 0, 1, 0, T_);
    for (int t0 = 0; t0 < T_; t0 += U) {
        cur = next;
        if (t0 + U < T_) sf_cuda_load_batch<1, U, false>(next, x, a.N, nf, t0 + U, 1, 0, T_);
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t t = t0 + u;
            if (t >= T_) break; /* the same for the whole block */
            float h, theta;
            const float st = sf_cuda_step<MODEL>(k, soft, cur.v[u][0], &v, &ab, &h, &theta);
            const int64_t i = t * a.N + nf;
            if (valid) {
                sf_cuda_ckpt_store<1, MODEL>(a, (int)t, nf, &v, &ab);
                if (s) s[i] = sf_narrow<T>(st);
                if (s_u8) s_u8[i] = (uint8_t)st;
                if (hout) hout[i] = h;
            }
            if (c.cnt) { /* lists: the segment's warps rank their spikes together */
                spikes += (float)sf_cuda_emit_row(c, n, t * B + b, j, valid, st != 0.0f, wc[t & 1]);
            } else { /* bits alone: each warp on its own, no barrier per step */
                const unsigned m = sf_cuda_emit_bits(c, n, t * B + b, j, valid, st != 0.0f);
                if ((threadIdx.x & 31) == 0) spikes += (float)__popc(m);
            }
        }
    }
    if (valid && a.st.v_out) {
        a.st.v_out[nf] = v;
        if (MODEL == SF_CUDA_ALIF) a.st.v_out[a.N + nf] = ab;
    }
    if (count) sf_cuda_add_count(count, spikes);
}

sf_status sf_cuda_lif_compact_forward(const sf_cuda_neuron &a, sf_scalar t, const sf_lif_out *out, cudaStream_t st)
{
    const int64_t n = out->row;
    if (n <= 0 || a.N % n != 0)
        return sf_fail(SF_ERR_INVALID, "LIF forward: compact output with rows of %lld neurons does not tile N = %lld",
                       (long long)n, (long long)a.N);
    const int64_t blocks = a.N / n * ((n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG);
    if (blocks == 0) return SF_OK;
    if (blocks > INT32_MAX) return sf_fail(SF_ERR_INVALID, "LIF forward: N = %lld is too large", (long long)a.N);
    SF_TRY(sf_cuda_time_fits(a, "LIF forward"));
    return sf_cuda_with_act(t, [&](auto tag) {
        using T = decltype(tag);
        T *s = (T *)out->s;
        auto launch = [&](auto model) -> sf_status {
            constexpr int M = decltype(model)::value;
            if (a.T < 8)
                lif_compact_kernel<T, 4, M><<<(unsigned)blocks, SF_SPIKE_SEG, 0, st>>>(a, n, s, out->s_u8, out->h,
                                                                                       out->c, out->spike_count);
            else
                lif_compact_kernel<T, 8, M><<<(unsigned)blocks, SF_SPIKE_SEG, 0, st>>>(a, n, s, out->s_u8, out->h,
                                                                                       out->c, out->spike_count);
            SF_CUDA_LAUNCHED();
            return SF_OK;
        };
        return sf_cuda_with_model(&a.p, launch);
    });
}
