/* neuron_back.c — the reverse-time loops of the CPU neuron kernels over one block of neurons (sf_block_backward_fn):
 * one generic loop, specialised per model and surrogate (the LIF and IF also per reset, detach and θ_grad flag), and
 * the ALIF's threshold rows for a backward whose h was kept. */
/* Same options as the forward loops (see lif.c): no FP-exception semantics, no FMA contraction. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif
#include "cpu/neuron_block.h"

enum { MODEL_LIF, MODEL_PLIF, MODEL_ALIF };

/* The generic reverse-time loop; every caller passes constants for the model, the surrogate and (LIF) the flags;
 * the PLIF and ALIF read the flags from p. */
SF_ALWAYS_INLINE void block_backward(const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T, int64_t N, int nb,
                                     const sf_block_back *io, int model, sf_surrogate kind, int soft, int detach,
                                     int grad_threshold)
{
    const sf_lif_coeffs kc = *k; /* local copies: nothing the loop stores can alias them */
    sf_lif_params q = *p;
    q.surrogate = kind;
    if (model == MODEL_LIF) {
        q.soft_reset = soft;
        q.detach_reset = detach;
        q.use_grad_threshold = grad_threshold;
    }
    const float *h = io->h, *th = io->th, *ds = io->ds, *av = io->a, *cv = io->c, *x = io->x, *sc = io->sc,
                *sh = io->sh;
    float *dy = io->dy;
    const int64_t hs = io->hs, ths = io->ths, dys = io->dys;
    const int decay_input = q.decay_input;
    float dv[SF_CPU_BLOCK], db[SF_CPU_BLOCK], vinit[SF_CPU_BLOCK];
    double dk[SF_CPU_BLOCK];
    for (int i = 0; i < nb; i++) {
        dv[i] = io->dv_in ? io->dv_in[i] : 0.0f;
        db[i] = model == MODEL_ALIF && io->dv_in ? io->dv_in[N + i] : 0.0f;
        vinit[i] = io->v_init ? io->v_init[i] : kc.v0;
        dk[i] = 0.0;
    }
    for (int64_t t = T - 1; t >= 0; t--) {
        const float *ht = h + t * hs, *dst = ds + t * N;
        const float *hprev = t > 0 ? ht - hs : NULL, *xt = model == MODEL_PLIF ? x + t * N : NULL;
        const float *tht = model == MODEL_ALIF ? th + t * ths : NULL;
        float *dyt = dy + t * dys;
#pragma omp simd
        for (int i = 0; i < nb; i++) {
            float d = dv[i], dh, c = kc.c;
            if (model == MODEL_ALIF) {
                float e = db[i];
                dh = sf_alif_step_back(&q, &kc, ht[i], tht[i], dst[i], &d, &e);
                db[i] = e;
            } else if (model == MODEL_PLIF) {
                sf_lif_coeffs ki = kc;
                if (av) {
                    ki.a = av[i];
                    ki.c = cv[i];
                }
                c = ki.c;
                dh = sf_lif_step_back(&q, &ki, ht[i], dst[i], &d);
                float vprev = hprev ? sf_lif_v_after(&kc, q.soft_reset, hprev[i]) : vinit[i];
                float y = xt[i];
                if (sc) y = y * sc[i] + sh[i];
                float u = decay_input ? y - vprev : -vprev;
                dk[i] += (double)dh * (double)u;
            } else {
                dh = sf_lif_step_back(&q, &kc, ht[i], dst[i], &d);
            }
            dv[i] = d;
            dyt[i] = c * dh;
        }
    }
    if (io->dv_out)
        for (int i = 0; i < nb; i++) {
            io->dv_out[i] = dv[i];
            if (model == MODEL_ALIF) io->dv_out[N + i] = db[i];
        }
    if (model == MODEL_PLIF)
        for (int i = 0; i < nb; i++) io->dk[i] += dk[i];
}

#define SF_BACK_VARIANT(kind, soft, detach, gt)                                                                     \
    SF_CPU_CLONES static void back_##kind##_##soft##detach##gt(const sf_lif_params *p, const sf_lif_coeffs *k,     \
                                                               int64_t T, int64_t N, int nb,                       \
                                                               const sf_block_back *io)                            \
    {                                                                                                               \
        block_backward(p, k, T, N, nb, io, MODEL_LIF, SF_SURROGATE_##kind, soft, detach, gt);                      \
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

/* The PLIF and ALIF, per surrogate (their flags stay run-time selects). */
#define SF_BACK_MODEL(model, kind)                                                                                  \
    SF_CPU_CLONES static void back_##model##_##kind(const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T,     \
                                                    int64_t N, int nb, const sf_block_back *io)                    \
    {                                                                                                               \
        block_backward(p, k, T, N, nb, io, MODEL_##model, SF_SURROGATE_##kind, 0, 0, 0);                           \
    }
#define SF_BACK_SURROGATES(model)                                                                                   \
    SF_BACK_MODEL(model, SIGMOID) SF_BACK_MODEL(model, ATAN) SF_BACK_MODEL(model, FAST_SIGMOID)                     \
    SF_BACK_MODEL(model, RECT)                                                                                      \
    static const sf_block_backward_fn back_##model[4] = {back_##model##_SIGMOID, back_##model##_ATAN,              \
                                                         back_##model##_FAST_SIGMOID, back_##model##_RECT};
SF_BACK_SURROGATES(PLIF)
SF_BACK_SURROGATES(ALIF)

sf_block_backward_fn sf_block_backward_for(const sf_lif_params *p)
{
    if (p->model == SF_NEURON_PLIF) return back_PLIF[p->surrogate];
    if (p->model == SF_NEURON_ALIF) return back_ALIF[p->surrogate];
    int flags = (p->soft_reset ? 4 : 0) | (p->detach_reset ? 2 : 0) | (p->use_grad_threshold ? 1 : 0);
    return back_table[p->surrogate][flags];
}

SF_CPU_CLONES void sf_block_alif_thresholds(const sf_lif_coeffs *k, int64_t T, int nb, const float *h, int64_t hs,
                                            const float *b_in, float *th, int64_t ths)
{
    const sf_lif_coeffs kc = *k;
    float b[SF_CPU_BLOCK];
    for (int i = 0; i < nb; i++) b[i] = b_in ? b_in[i] : 0.0f;
    for (int64_t t = 0; t < T; t++) {
        const float *ht = h + t * hs;
        float *tht = th + t * ths;
#pragma omp simd
        for (int i = 0; i < nb; i++) {
            float theta = sf_alif_threshold(&kc, b[i]);
            tht[i] = theta;
            b[i] = sf_alif_adapt(&kc, b[i], ht[i] >= theta ? 1.0f : 0.0f);
        }
    }
}
