/* lif.c — the time-fused neuron kernels on the CPU (every model): OpenMP over blocks of neurons, all T steps inside
 * one block (neuron_call.c), and the backward as one reverse-time pass per block (recomputing h when the forward did
 * not keep it), with a PLIF's dw summed over the neurons in a fixed order. Spikes (forward) and the nonzero pattern
 * of dx (masked backward) may also come out compact (core/spikes.h), blocks then walking rows segment by segment. */
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

/* Block j (of SF_SPIKE_SEG / SF_CPU_BLOCK) of segment g of sample b, in rows of n neurons (B per step): its flat
 * offset, the emitter of its compact rows into c, and its width (0: past the row's end). */
static int row_block(const sf_spikes *c, int64_t B, int64_t n, int64_t b, int64_t g, int j, int64_t *n0,
                     sf_block_emit *e)
{
    const int64_t first = g * SF_SPIKE_SEG + (int64_t)j * SF_CPU_BLOCK;
    if (first >= n) return 0;
    const int64_t words = sf_spike_words(n), segs = sf_spike_segs(n);
    *n0 = b * n + first;
    *e = (sf_block_emit){c->bits + b * words + first / 32, c->idx ? c->idx + b * n + g * SF_SPIKE_SEG : NULL,
                         c->cnt ? c->cnt + b * segs + g : NULL, B * words, B * n, B * segs, j * SF_CPU_BLOCK};
    return (int)(n - first < SF_CPU_BLOCK ? n - first : SF_CPU_BLOCK);
}

/* The units of work: blocks of SF_CPU_BLOCK neurons (n = 0), or, for compact outputs, one segment of one sample's
 * row (its blocks in order, so that each step's list of the segment comes out ascending). */
static int64_t work_items(int64_t N, int64_t n)
{
    return n ? N / n * sf_spike_segs(n) : (N + SF_CPU_BLOCK - 1) / SF_CPU_BLOCK;
}

/* Calls fn(n0, nb, emitter or NULL) for each block of work item i. */
#define SF_FOR_BLOCKS(N, n, c, i, fn)                                                                               \
    do {                                                                                                            \
        if (!(n)) {                                                                                                 \
            const int64_t n0_ = (i) * SF_CPU_BLOCK;                                                                 \
            fn(n0_, (int)((N) - n0_ < SF_CPU_BLOCK ? (N) - n0_ : SF_CPU_BLOCK), (const sf_block_emit *)NULL);      \
            break;                                                                                                  \
        }                                                                                                           \
        const int64_t segs_ = sf_spike_segs(n);                                                                     \
        for (int j_ = 0; j_ < SF_SPIKE_SEG / SF_CPU_BLOCK; j_++) {                                                  \
            int64_t n0_;                                                                                            \
            sf_block_emit e_;                                                                                       \
            const int nb_ = row_block(c, (N) / (n), n, (i) / segs_, (i) % segs_, j_, &n0_, &e_);                    \
            if (!nb_) break;                                                                                        \
            fn(n0_, nb_, &e_);                                                                                      \
        }                                                                                                           \
    } while (0)

/* Rows of the compact output must tile [T, N]. */
static sf_status check_rows(const char *op, int64_t N, int64_t n)
{
    if (n <= 0 || N % n != 0)
        return sf_fail(SF_ERR_INVALID, "%s: compact output with rows of %lld neurons does not tile N = %lld", op,
                       (long long)n, (long long)N);
    return SF_OK;
}

sf_status sf_cpu_lif_forward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const sf_lif_out *out,
                             const sf_lif_state *st)
{
    sf_neuron_call nc;
    SF_TRY(sf_neuron_call_init(&nc, "LIF forward", p, T, N, st, 0, 0));
    const int64_t n = out->c.bits ? out->row : 0;
    sf_status status = out->c.bits ? check_rows("LIF forward", N, n) : SF_OK;
    const int64_t items = work_items(N, n);
    int64_t spikes = 0;
    if (status == SF_OK) {
#pragma omp parallel if (T * N >= SF_CPU_PARALLEL_MIN)
        {
#pragma omp for schedule(static) reduction(+ : spikes)
            for (int64_t i = 0; i < items; i++) {
#define SF_BLOCK(n0, nb, e) spikes += sf_neuron_block_forward(&nc, n0, nb, x, NULL, NULL, out, e)
                SF_FOR_BLOCKS(N, n, &out->c, i, SF_BLOCK);
#undef SF_BLOCK
            }
            sf_stream_fence();
        }
        if (out->spike_count) *out->spike_count += (float)spikes;
    }
    sf_neuron_call_free(&nc);
    return status;
}

/* One block of the backward: dy rows (sf_neuron_block_dy) → streamed out to dx, with the nonzero pattern of each
 * step's row emitted where e is given; returns the number of nonzero dy. */
static int64_t backward_block(const sf_neuron_call *nc, int64_t n0, int nb, const float *x, const float *h,
                              const float *ds, float *dx, float *rows, double *dk, const sf_block_emit *e)
{
    const int w = SF_CPU_BLOCK;
    sf_neuron_block_dy(nc, n0, nb, x, h, NULL, NULL, ds, rows, 1, dk ? dk + n0 : NULL);
    int64_t nonzero = 0;
    for (int64_t t = 0; t < nc->T; t++) {
        if (e) nonzero += sf_block_emit_row(e, t, rows + t * w, nb);
        sf_stream_row(dx + t * nc->N + n0, rows + t * w, nb);
    }
    return nonzero;
}

/* The backward over rows of n neurons (n = 0: plain blocks) writing dx and, with a mask, where dx is nonzero. */
static sf_status backward(const sf_lif_params *p, int64_t T, int64_t N, int64_t n, const float *x, const float *h,
                          const float *ds, float *dx, const sf_lif_state *st, const sf_spikes *mask, float *count)
{
    sf_neuron_call nc;
    SF_TRY(sf_neuron_call_init(&nc, "LIF backward", p, T, N, st, 0, 0));
    const int plif = sf_neuron_is_plif(&nc);
    sf_status status = n ? check_rows("LIF backward", N, n) : SF_OK;
    if (status == SF_OK && !x && (!h || sf_neuron_backward_reads_x(p)))
        status = sf_fail(SF_ERR_INVALID, "LIF backward: x is NULL (the %s backward reads it%s)",
                         sf_neuron_model_name(p->model), h ? ", also when h is given" : "");
    const int64_t items = work_items(N, n), per_thread = sf_neuron_scratch_floats(&nc);
    float *scratch = NULL;
    double *dk = NULL; /* a PLIF's Σ_t dh·∂h/∂k per neuron */
    int64_t nonzero = 0;
    if (status == SF_OK) status = sf_thread_scratch(per_thread, "LIF backward", &scratch);
    if (status == SF_OK && plif) status = sf_neuron_plif_sums(&nc, &dk);
    if (status != SF_OK) goto done;
#pragma omp parallel if (T * N >= SF_CPU_PARALLEL_MIN)
    {
        float *rows = scratch + omp_get_thread_num() * per_thread;
#pragma omp for schedule(static) reduction(+ : nonzero)
        for (int64_t i = 0; i < items; i++) {
#define SF_BLOCK(n0, nb, e) nonzero += backward_block(&nc, n0, nb, x, h, ds, dx, rows, dk, e)
            SF_FOR_BLOCKS(N, n, mask, i, SF_BLOCK);
#undef SF_BLOCK
        }
        sf_stream_fence();
    }
    if (count) *count += (float)nonzero;
    if (plif) status = sf_neuron_plif_dw(&nc, dk);
done:
    free(dk);
    free(scratch);
    sf_neuron_call_free(&nc);
    return status;
}

sf_status sf_cpu_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *h,
                              const float *ds, float *dx, const sf_lif_state *st)
{
    return backward(p, T, N, 0, x, h, ds, dx, st, NULL, NULL);
}

sf_status sf_cpu_op_lif_backward_masked(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                        const float *x, const float *h, const float *ds, float *dx,
                                        const sf_spikes *mask, float *count, const sf_lif_state *st)
{
    (void)be;
    return backward(p, T, B * n, n, x, h, ds, dx, st, mask, count);
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
