/* neuron_back.c — the reverse-time loops of the CPU neuron kernels over one block of neurons (sf_block_backward_fn):
 * one generic loop, specialised per model (the IF is the LIF's), surrogate, reset, detach and θ_grad flag, and the
 * ALIF's threshold rows for a backward whose h was kept. */
/* Same options as the forward loops (see lif.c): no FP-exception semantics, no FMA contraction. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif
#include "cpu/neuron_block.h"

enum { MODEL_LIF, MODEL_PLIF, MODEL_ALIF };

/* The generic reverse-time loop; every caller passes constants for the model, the surrogate and the flags (a flag
 * left to run time stops gcc from vectorising the loop: the PLIF's backward ran 6× slower). */
SF_ALWAYS_INLINE void block_backward(const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T, int64_t N, int nb,
                                     const sf_block_back *io, int model, sf_surrogate kind, int soft, int detach,
                                     int grad_threshold)
{
    const sf_lif_coeffs kc = *k; /* local copies: nothing the loop stores can alias them */
    sf_lif_params q = *p;
    q.surrogate = kind;
    q.soft_reset = soft;
    q.detach_reset = detach;
    q.use_grad_threshold = grad_threshold;
    const float *h = io->h, *th = io->th, *ds = io->ds, *x = io->x;
    float *dy = io->dy;
    const int64_t hs = io->hs, ths = io->ths, dys = io->dys;
    const int decay_input = q.decay_input;
    /* The PLIF's per-neuron a, c and BN fold as arrays in every case, and v_{t-1} in a row of its own: the vector
     * loop then has no run-time test (x·1 + 0 is x; a[i] = k.a is what the forward used). */
    float dv[SF_CPU_BLOCK], db[SF_CPU_BLOCK], vprev[SF_CPU_BLOCK], a[SF_CPU_BLOCK], c[SF_CPU_BLOCK];
    float sc[SF_CPU_BLOCK], sh[SF_CPU_BLOCK];
    float dk[SF_CPU_BLOCK]; /* over the T steps of one neuron: float; the sum over neurons is double */
    for (int i = 0; i < nb; i++) {
        dv[i] = io->dv_in ? io->dv_in[i] : 0.0f;
        db[i] = model == MODEL_ALIF && io->dv_in ? io->dv_in[N + i] : 0.0f;
        a[i] = io->a ? io->a[i] : kc.a;
        c[i] = io->c ? io->c[i] : kc.c;
        sc[i] = io->sc ? io->sc[i] : 1.0f;
        sh[i] = io->sh ? io->sh[i] : 0.0f;
        dk[i] = 0.0f;
    }
    for (int64_t t = T - 1; t >= 0; t--) {
        const float *ht = h + t * hs, *dst = ds + t * N, *xt = model == MODEL_PLIF ? x + t * N : NULL;
        const float *tht = model == MODEL_ALIF ? th + t * ths : NULL;
        float *dyt = dy + t * dys;
        if (model == MODEL_PLIF && t > 0)
            for (int i = 0; i < nb; i++) vprev[i] = sf_lif_v_after(&kc, soft, ht[i - hs]);
        else if (model == MODEL_PLIF)
            for (int i = 0; i < nb; i++) vprev[i] = io->v_init ? io->v_init[i] : kc.v0;
#pragma omp simd
        for (int i = 0; i < nb; i++) {
            float d = dv[i], dh, ci = kc.c;
            if (model == MODEL_ALIF) {
                float e = db[i];
                dh = sf_alif_step_back(&q, &kc, ht[i], tht[i], dst[i], &d, &e);
                db[i] = e;
            } else if (model == MODEL_PLIF) {
                sf_lif_coeffs ki = kc;
                ki.a = a[i];
                ci = c[i];
                dh = sf_lif_step_back(&q, &ki, ht[i], dst[i], &d);
                float y = xt[i] * sc[i] + sh[i];
                float u = decay_input ? y - vprev[i] : -vprev[i];
                dk[i] += dh * u;
            } else {
                dh = sf_lif_step_back(&q, &kc, ht[i], dst[i], &d);
            }
            dv[i] = d;
            dyt[i] = ci * dh;
        }
    }
    if (io->dv_out)
        for (int i = 0; i < nb; i++) {
            io->dv_out[i] = dv[i];
            if (model == MODEL_ALIF) io->dv_out[N + i] = db[i];
        }
    if (model == MODEL_PLIF)
        for (int i = 0; i < nb; i++) io->dk[i] += (double)dk[i];
}

#define SF_BACK_VARIANT(model, kind, soft, detach, gt)                                                              \
    SF_CPU_CLONES static void back_##model##_##kind##_##soft##detach##gt(                                           \
        const sf_lif_params *p, const sf_lif_coeffs *k, int64_t T, int64_t N, int nb, const sf_block_back *io)      \
    {                                                                                                               \
        block_backward(p, k, T, N, nb, io, MODEL_##model, SF_SURROGATE_##kind, soft, detach, gt);                  \
    }
#define SF_BACK_FLAGS(model, kind)                                                                                  \
    SF_BACK_VARIANT(model, kind, 0, 0, 0) SF_BACK_VARIANT(model, kind, 0, 0, 1)                                     \
    SF_BACK_VARIANT(model, kind, 0, 1, 0) SF_BACK_VARIANT(model, kind, 0, 1, 1)                                     \
    SF_BACK_VARIANT(model, kind, 1, 0, 0) SF_BACK_VARIANT(model, kind, 1, 0, 1)                                     \
    SF_BACK_VARIANT(model, kind, 1, 1, 0) SF_BACK_VARIANT(model, kind, 1, 1, 1)
#define SF_BACK_ROW(model, kind)                                                                                    \
    {back_##model##_##kind##_000, back_##model##_##kind##_001, back_##model##_##kind##_010,                        \
     back_##model##_##kind##_011, back_##model##_##kind##_100, back_##model##_##kind##_101,                        \
     back_##model##_##kind##_110, back_##model##_##kind##_111}
/* One table per model: [surrogate][soft·4 + detach·2 + θ_grad]. */
#define SF_BACK_MODEL(model)                                                                                        \
    SF_BACK_FLAGS(model, SIGMOID) SF_BACK_FLAGS(model, ATAN) SF_BACK_FLAGS(model, FAST_SIGMOID)                     \
    SF_BACK_FLAGS(model, RECT)                                                                                      \
    static const sf_block_backward_fn back_##model[4][8] = {SF_BACK_ROW(model, SIGMOID), SF_BACK_ROW(model, ATAN),  \
                                                            SF_BACK_ROW(model, FAST_SIGMOID),                       \
                                                            SF_BACK_ROW(model, RECT)};
SF_BACK_MODEL(LIF)
SF_BACK_MODEL(PLIF)
SF_BACK_MODEL(ALIF)

sf_block_backward_fn sf_block_backward_for(const sf_lif_params *p)
{
    int flags = (p->soft_reset ? 4 : 0) | (p->detach_reset ? 2 : 0) | (p->use_grad_threshold ? 1 : 0);
    if (p->model == SF_NEURON_PLIF) return back_PLIF[p->surrogate][flags];
    if (p->model == SF_NEURON_ALIF) return back_ALIF[p->surrogate][flags];
    return back_LIF[p->surrogate][flags];
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
