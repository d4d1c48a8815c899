/* lif.c — the time-fused neuron kernels on the CPU (every model): OpenMP over blocks of neurons, all T steps inside
 * one block (neuron_call.c), and the backward as one reverse-time pass per block (recomputing h when the forward did
 * not keep it), with a PLIF's dw summed over the blocks in a fixed order. */
/* No FP-exception semantics here (results are unchanged): it lets gcc turn the surrogate's branches into selects
 * and vectorise. No FMA contraction (also under -std=gnu11): the AVX-512, AVX2 and baseline clones then give the
 * same bits. It must precede the includes so the inlined lif_math.h functions carry the same options. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif
#include "cpu/cpu_backend.h"
#include "cpu/cpu_neuron.h"
#include "cpu/neuron_call.h"
#include "cpu/parallel.h"
#include "core/error.h"

#include <omp.h>
#include <stdlib.h>

sf_status sf_thread_scratch(int64_t per_thread, const char *what, float **out)
{
    size_t bytes = (size_t)omp_get_max_threads() * (size_t)per_thread * sizeof(float);
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return sf_fail(SF_ERR_NOMEM, "%s: cannot allocate %zu bytes of per-thread scratch", what, bytes);
    return SF_OK;
}

sf_status sf_cpu_lif_forward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const sf_lif_out *out,
                             const sf_lif_state *st)
{
    sf_neuron_call nc;
    SF_TRY(sf_neuron_call_init(&nc, "LIF forward", p, T, N, st, 0, 0));
    const int64_t nblocks = (N + SF_CPU_BLOCK - 1) / SF_CPU_BLOCK;
    int64_t spikes = 0;
#pragma omp parallel if (T * N >= SF_CPU_PARALLEL_MIN)
    {
#pragma omp for schedule(static) reduction(+ : spikes)
        for (int64_t b = 0; b < nblocks; b++) spikes += sf_neuron_block_forward(&nc, b * SF_CPU_BLOCK, x, NULL, NULL, out);
        sf_stream_fence();
    }
    sf_neuron_call_free(&nc);
    if (out->spike_count) *out->spike_count += (float)spikes;
    return SF_OK;
}

sf_status sf_cpu_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *h,
                              const float *ds, float *dx, const sf_lif_state *st)
{
    sf_neuron_call nc;
    SF_TRY(sf_neuron_call_init(&nc, "LIF backward", p, T, N, st, 0, 0));
    const int plif = sf_neuron_is_plif(&nc), want_dw = plif && st->dw;
    sf_status status = SF_OK;
    if (plif && !x)
        status = sf_fail(SF_ERR_INVALID, "LIF backward: a PLIF's backward reads its input x (for ∂h/∂k), also "
                                         "when h is given");
    const int w = SF_CPU_BLOCK;
    const int64_t nblocks = (N + w - 1) / w, per_thread = sf_neuron_scratch_floats(&nc);
    float *scratch = NULL;
    sf_channel_sums dk_sums = {0};
    if (status == SF_OK) status = sf_thread_scratch(per_thread, "LIF backward", &scratch);
    if (status == SF_OK && want_dw) status = sf_neuron_plif_sums_init(&nc, &dk_sums);
    if (status != SF_OK) goto done;
#pragma omp parallel if (T * N >= SF_CPU_PARALLEL_MIN)
    {
        /* h (recomputed or given) → dy rows in the scratch → streamed out to dx. */
        float *rows = scratch + omp_get_thread_num() * per_thread;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < nblocks; b++) {
            const int64_t n0 = b * w;
            const int nb = (int)(N - n0 < w ? N - n0 : w);
            double dk[SF_CPU_BLOCK] = {0}, *dkp = dk;
            sf_neuron_block_dy(&nc, n0, x, h, NULL, NULL, ds, rows, 1, plif ? dk : NULL);
            if (want_dw) sf_channel_sums_add(&dk_sums, b, nb, &dkp);
            for (int64_t t = 0; t < T; t++) sf_stream_row(dx + t * N + n0, rows + t * w, nb);
        }
        sf_stream_fence();
    }
    if (want_dw) status = sf_neuron_plif_dw(&nc, &dk_sums);
done:
    sf_channel_sums_free(&dk_sums);
    free(scratch);
    sf_neuron_call_free(&nc);
    return status;
}

sf_status sf_cpu_op_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                const sf_lif_out *out, const sf_lif_state *st)
{
    (void)be;
    return sf_cpu_lif_forward(p, T, N, x, out, st);
}

sf_status sf_cpu_op_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                                 const float *h, const float *ds, float *dx, const sf_lif_state *st)
{
    (void)be;
    return sf_cpu_lif_backward(p, T, N, x, h, ds, dx, st);
}
