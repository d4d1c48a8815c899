/* lif.c — the time-fused LIF kernels on the CPU: OpenMP over blocks of neurons, all T steps inside one block,
 * and the backward as one reverse-time pass (recomputing h per block when the forward did not keep it). */
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
#include "cpu/neuron_block.h"
#include "cpu/parallel.h"
#include "core/error.h"

#include <omp.h>
#include <stdlib.h>

SF_CPU_CLONES void sf_block_recompute_h(const sf_lif_coeffs *k, int soft, int64_t T, int64_t N, int nb,
                                        const float *x, const float *sc, const float *sh, const float *v_in,
                                        float *scratch, int64_t hs)
{
#define SF_RECOMPUTE(soft, sc, sh)                                                                                 \
    sf_block_forward(k, soft, 0, 0, T, N, nb, x, sc, sh, v_in, NULL, scratch, hs, NULL, NULL, NULL, NULL)
    if (sc) {
        if (soft) SF_RECOMPUTE(1, sc, sh);
        else SF_RECOMPUTE(0, sc, sh);
    } else {
        if (soft) SF_RECOMPUTE(1, NULL, NULL);
        else SF_RECOMPUTE(0, NULL, NULL);
    }
#undef SF_RECOMPUTE
}

/* The generic reverse-time loop; every caller passes constants for the surrogate and flags. */
SF_ALWAYS_INLINE void block_backward(const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T, int64_t N, int nb,
                                     const float *h, int64_t hs, const float *ds, float *dy, int64_t dys,
                                     const float *dv_in, float *dv_out, sf_surrogate kind, int soft, int detach,
                                     int grad_threshold)
{
    const sf_lif_coeffs kc = *k; /* local copies: nothing the loop stores can alias them */
    sf_lif_params q = *p;
    q.surrogate = kind;
    q.soft_reset = soft;
    q.detach_reset = detach;
    q.use_grad_threshold = grad_threshold;
    const float c = kc.c;
    float dv[SF_CPU_BLOCK];
    for (int i = 0; i < nb; i++) dv[i] = dv_in ? dv_in[i] : 0.0f;
    for (int64_t t = T - 1; t >= 0; t--) {
        const float *ht = h + t * hs, *dst = ds + t * N;
        float *dyt = dy + t * dys;
#pragma omp simd
        for (int i = 0; i < nb; i++) {
            float d = dv[i];
            float dh = sf_lif_step_back(&q, &kc, ht[i], dst[i], &d);
            dv[i] = d;
            dyt[i] = c * dh;
        }
    }
    if (dv_out)
        for (int i = 0; i < nb; i++) dv_out[i] = dv[i];
}

#define SF_BACK_VARIANT(kind, soft, detach, gt)                                                                     \
    SF_CPU_CLONES static void back_##kind##_##soft##detach##gt(const sf_lif_params *p, const sf_lif_coeffs *k,     \
                                                               int64_t T, int64_t N, int nb, const float *h,       \
                                                               int64_t hs, const float *ds, float *dy, int64_t dys, \
                                                               const float *dv_in, float *dv_out)                  \
    {                                                                                                               \
        block_backward(p, k, T, N, nb, h, hs, ds, dy, dys, dv_in, dv_out, SF_SURROGATE_##kind, soft, detach, gt);  \
    }
#define SF_BACK_FLAGS(kind)                                                                                         \
    SF_BACK_VARIANT(kind, 0, 0, 0) SF_BACK_VARIANT(kind, 0, 0, 1) SF_BACK_VARIANT(kind, 0, 1, 0)                    \
    SF_BACK_VARIANT(kind, 0, 1, 1) SF_BACK_VARIANT(kind, 1, 0, 0) SF_BACK_VARIANT(kind, 1, 0, 1)                    \
    SF_BACK_VARIANT(kind, 1, 1, 0) SF_BACK_VARIANT(kind, 1, 1, 1)
SF_BACK_FLAGS(SIGMOID)
SF_BACK_FLAGS(ATAN)
SF_BACK_FLAGS(FAST_SIGMOID)
SF_BACK_FLAGS(RECT)

#define SF_BACK_ROW(kind)                                                                                           \
    {back_##kind##_000, back_##kind##_001, back_##kind##_010, back_##kind##_011,                                   \
     back_##kind##_100, back_##kind##_101, back_##kind##_110, back_##kind##_111}
static const sf_block_backward_fn back_table[4][8] = {SF_BACK_ROW(SIGMOID), SF_BACK_ROW(ATAN),
                                                        SF_BACK_ROW(FAST_SIGMOID), SF_BACK_ROW(RECT)};

sf_block_backward_fn sf_block_backward_for(const sf_lif_params *p)
{
    int flags = (p->soft_reset ? 4 : 0) | (p->detach_reset ? 2 : 0) | (p->use_grad_threshold ? 1 : 0);
    return back_table[p->surrogate][flags];
}

sf_status sf_thread_scratch(int64_t per_thread, const char *what, float **out)
{
    size_t bytes = (size_t)omp_get_max_threads() * (size_t)per_thread * sizeof(float);
    *out = malloc(bytes ? bytes : 1);
    if (!*out) return sf_fail(SF_ERR_NOMEM, "%s: cannot allocate %zu bytes of per-thread scratch", what, bytes);
    return SF_OK;
}

static sf_status check_shape(const char *op, const sf_lif_params *p, int64_t T, int64_t N)
{
    SF_TRY(sf_lif_params_check(p));
    if (T < 1 || N < 0)
        return sf_fail(SF_ERR_INVALID, "%s: shape T=%lld N=%lld (need T >= 1, N >= 0)", op, (long long)T,
                       (long long)N);
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

SF_CPU_CLONES static int64_t forward_block(const sf_lif_coeffs *k, int soft, int64_t T, int64_t N, int64_t n0, int nb,
                                           const float *x, const sf_lif_out *out, const sf_lif_state *st,
                                           const sf_block_emit *e)
{
    float *s = out->s ? out->s + n0 : NULL, *h = out->h ? out->h + n0 : NULL;
    uint8_t *s8 = out->s_u8 ? out->s_u8 + n0 : NULL;
    const float *v_in = st ? sf_state_at(st->v_in, n0) : NULL;
    float *v_out = st ? sf_state_at_mut(st->v_out, n0) : NULL;
#define SF_FWD(soft, bytes)                                                                                        \
    sf_block_forward(k, soft, 1, bytes, T, N, nb, x + n0, NULL, NULL, v_in, v_out, NULL, 0, s, h, s8, e)
    if (s8) return soft ? SF_FWD(1, 1) : SF_FWD(0, 1);
    return soft ? SF_FWD(1, 0) : SF_FWD(0, 0);
#undef SF_FWD
}

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
    SF_TRY(check_shape("LIF forward", p, T, N));
    const int64_t n = out->c.bits ? out->row : 0;
    if (out->c.bits) SF_TRY(check_rows("LIF forward", N, n));
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    const int64_t items = work_items(N, n);
    int64_t spikes = 0;
#pragma omp parallel if (T * N >= SF_CPU_PARALLEL_MIN)
    {
#pragma omp for schedule(static) reduction(+ : spikes)
        for (int64_t i = 0; i < items; i++) {
#define SF_BLOCK(n0, nb, e) spikes += forward_block(&k, p->soft_reset, T, N, n0, nb, x, out, st, e)
            SF_FOR_BLOCKS(N, n, &out->c, i, SF_BLOCK);
#undef SF_BLOCK
        }
        sf_stream_fence();
    }
    if (out->spike_count) *out->spike_count += (float)spikes;
    return SF_OK;
}

/* One block of the backward: h (given, or recomputed into the scratch rows from st's v_in) → dy rows → streamed out
 * to dx, with the nonzero pattern of each step's row emitted where e is given; returns the number of nonzero dy. */
static int64_t backward_block(const sf_lif_params *p, const sf_lif_coeffs *k, sf_block_backward_fn back, int64_t T,
                              int64_t N, int64_t n0, int nb, const float *x, const float *h, const float *ds, float *dx,
                              const sf_lif_state *st, float *rows, const sf_block_emit *e)
{
    const int w = SF_CPU_BLOCK;
    const float *dv_in = st ? sf_state_at(st->dv_in, n0) : NULL;
    float *dv_out = st ? sf_state_at_mut(st->dv_out, n0) : NULL;
    if (h) {
        back(p, k, T, N, nb, h + n0, N, ds + n0, rows, w, dv_in, dv_out);
    } else {
        sf_block_recompute_h(k, p->soft_reset, T, N, nb, x + n0, NULL, NULL, st ? sf_state_at(st->v_in, n0) : NULL,
                             rows, w);
        back(p, k, T, N, nb, rows, w, ds + n0, rows, w, dv_in, dv_out);
    }
    int64_t nonzero = 0;
    for (int64_t t = 0; t < T; t++) {
        if (e) nonzero += sf_block_emit_row(e, t, rows + t * w, nb);
        sf_stream_row(dx + t * N + n0, rows + t * w, nb);
    }
    return nonzero;
}

/* The backward over rows of n neurons (n = 0: plain blocks) writing dx and, with a mask, where dx is nonzero. */
static sf_status backward(const sf_lif_params *p, int64_t T, int64_t N, int64_t n, const float *x, const float *h,
                          const float *ds, float *dx, const sf_lif_state *st, const sf_spikes *mask, float *count)
{
    if (N == 0) return SF_OK;
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    const sf_block_backward_fn back = sf_block_backward_for(p);
    const int64_t items = work_items(N, n), per_thread = T * SF_CPU_BLOCK;
    float *scratch = NULL;
    int64_t nonzero = 0;
    SF_TRY(sf_thread_scratch(per_thread, "LIF backward", &scratch));
#pragma omp parallel if (T * N >= SF_CPU_PARALLEL_MIN)
    {
        float *rows = scratch + omp_get_thread_num() * per_thread;
#pragma omp for schedule(static) reduction(+ : nonzero)
        for (int64_t i = 0; i < items; i++) {
#define SF_BLOCK(n0, nb, e) nonzero += backward_block(p, &k, back, T, N, n0, nb, x, h, ds, dx, st, rows, e)
            SF_FOR_BLOCKS(N, n, mask, i, SF_BLOCK);
#undef SF_BLOCK
        }
        sf_stream_fence();
    }
    free(scratch);
    if (count) *count += (float)nonzero;
    return SF_OK;
}

sf_status sf_cpu_lif_backward(const sf_lif_params *p, int64_t T, int64_t N, const float *x, const float *h,
                              const float *ds, float *dx, const sf_lif_state *st)
{
    SF_TRY(check_shape("LIF backward", p, T, N));
    return backward(p, T, N, 0, x, h, ds, dx, st, NULL, NULL);
}

sf_status sf_cpu_op_lif_backward_masked(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                        const float *x, const float *h, const float *ds, float *dx,
                                        const sf_spikes *mask, float *count, const sf_lif_state *st)
{
    SF_TRY(check_shape("LIF backward", p, T, B * n));
    SF_TRY(check_rows("LIF backward", B * n, n));
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
