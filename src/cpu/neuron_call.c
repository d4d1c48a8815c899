/* neuron_call.c — one call of a CPU neuron op: the model's checks and coefficients, and the per-block forward and
 * backward that the LIF op (lif.c) and the fused BN→neuron op (bn_lif.c) share. The forward's variants are inlined
 * with constant flags (sf_block_forward) so every model's loop vectorises. */
/* Same options as the backward loops (neuron_back.c): h is bitwise the same in the forward and its recompute. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif
#include "cpu/neuron_call.h"

#include "cpu/channel_sums.h"

#include "core/error.h"
#include "core/neuron_check.h"

#include <math.h>
#include <stdlib.h>

enum { BLK = SF_CPU_BLOCK };

sf_status sf_neuron_call_init(sf_neuron_call *nc, const char *op, const sf_lif_params *p, int64_t T, int64_t N,
                              const sf_lif_state *st, int32_t bn_c, int64_t bn_hw)
{
    memset(nc, 0, sizeof *nc);
    SF_TRY(sf_lif_params_check(p));
    if (T < 1 || N < 0)
        return sf_fail(SF_ERR_INVALID, "%s: shape T=%lld N=%lld (need T >= 1, N >= 0)", op, (long long)T,
                       (long long)N);
    nc->p = p;
    nc->k = sf_lif_coeffs_of(p);
    nc->T = T;
    nc->N = N;
    nc->st = st;
    nc->w_channels = 1;
    nc->w_hw = N > 0 ? N : 1;
    nc->back = sf_block_backward_for(p);
    if (p->model != SF_NEURON_PLIF) return SF_OK;
    SF_TRY(sf_plif_state_check(op, p, N, st, bn_c, bn_hw));
    if (!p->per_channel) {
        sf_plif_coeffs(st->w[0], p->decay_input, &nc->k.a, &nc->k.c);
        return SF_OK;
    }
    nc->w_channels = st->w_channels;
    nc->w_hw = st->w_hw;
    SF_TRY(sf_cpu_alloc_f32(2 * (int64_t)nc->w_channels, op, &nc->ch));
    for (int32_t c = 0; c < nc->w_channels; c++)
        sf_plif_coeffs(st->w[c], p->decay_input, &nc->ch[c], &nc->ch[nc->w_channels + c]);
    return SF_OK;
}

void sf_neuron_call_free(sf_neuron_call *nc)
{
    free(nc->ch);
    nc->ch = NULL;
}

int64_t sf_neuron_scratch_floats(const sf_neuron_call *nc)
{
    return (nc->p->model == SF_NEURON_ALIF ? 2 : 1) * nc->T * BLK;
}

/* The block's per-neuron a and c of a PLIF with a w per channel (returns 0 for every other neuron). */
static int gather_coeffs(const sf_neuron_call *nc, int64_t n0, int nb, float *a, float *c)
{
    if (!nc->ch) return 0;
    sf_channel_gather(nc->w_channels, nc->w_hw, n0, nb, nc->ch, a);
    sf_channel_gather(nc->w_channels, nc->w_hw, n0, nb, nc->ch + nc->w_channels, c);
    return 1;
}

/* The forward's variants: soft, model and bytes as constants, BN's scale or none. */
#define SF_FWD(soft, alif, bytes, sc, sh, av, cv)                                                                   \
    sf_block_forward(k, soft, alif, 1, bytes, nc->T, nc->N, nb, x, sc, sh, av, cv, v_in, v_out, NULL, 0, s, h, s8,  \
                     emit)
#define SF_FWD_MODELS(bytes, sc, sh)                                                                                \
    (alif ? (soft ? SF_FWD(1, 1, bytes, sc, sh, NULL, NULL) : SF_FWD(0, 1, bytes, sc, sh, NULL, NULL))            \
     : per_neuron ? (soft ? SF_FWD(1, 0, bytes, sc, sh, a, c) : SF_FWD(0, 0, bytes, sc, sh, a, c))                 \
     : (soft ? SF_FWD(1, 0, bytes, sc, sh, NULL, NULL) : SF_FWD(0, 0, bytes, sc, sh, NULL, NULL)))

SF_CPU_CLONES int64_t sf_neuron_block_forward(const sf_neuron_call *nc, int64_t n0, int nb, const float *x,
                                              const float *sc, const float *sh, const sf_lif_out *out,
                                              const sf_block_emit *emit)
{
    const sf_lif_coeffs *k = &nc->k;
    const int soft = nc->p->soft_reset, alif = nc->p->model == SF_NEURON_ALIF;
    float a[BLK], c[BLK];
    const int per_neuron = gather_coeffs(nc, n0, nb, a, c);
    float *s = out->s ? out->s + n0 : NULL, *h = out->h ? out->h + n0 : NULL;
    uint8_t *s8 = out->s_u8 ? out->s_u8 + n0 : NULL;
    const float *v_in = nc->st ? sf_state_at(nc->st->v_in, n0) : NULL;
    float *v_out = nc->st ? sf_state_at_mut(nc->st->v_out, n0) : NULL;
    x += n0;
    if (sc) return s8 ? SF_FWD_MODELS(1, sc, sh) : SF_FWD_MODELS(0, sc, sh);
    return s8 ? SF_FWD_MODELS(1, NULL, NULL) : SF_FWD_MODELS(0, NULL, NULL);
}
#undef SF_FWD
#undef SF_FWD_MODELS

/* h (and the ALIF's θ after it) of one block recomputed into scratch rows of stride BLK. */
#define SF_RECOMPUTE(soft, alif, sc, sh, av, cv)                                                                    \
    sf_block_forward(k, soft, alif, 0, 0, nc->T, nc->N, nb, x, sc, sh, av, cv, v_in, NULL, scratch, BLK, NULL,    \
                     NULL, NULL, NULL)
#define SF_RECOMPUTE_MODELS(sc, sh)                                                                                 \
    (alif ? (soft ? SF_RECOMPUTE(1, 1, sc, sh, NULL, NULL) : SF_RECOMPUTE(0, 1, sc, sh, NULL, NULL))              \
     : per_neuron ? (soft ? SF_RECOMPUTE(1, 0, sc, sh, a, c) : SF_RECOMPUTE(0, 0, sc, sh, a, c))                   \
     : (soft ? SF_RECOMPUTE(1, 0, sc, sh, NULL, NULL) : SF_RECOMPUTE(0, 0, sc, sh, NULL, NULL)))

SF_CPU_CLONES static void recompute(const sf_neuron_call *nc, int nb, const float *x, const float *sc,
                                    const float *sh, const float *a, const float *c, const float *v_in,
                                    float *scratch)
{
    const sf_lif_coeffs *k = &nc->k;
    const int soft = nc->p->soft_reset, alif = nc->p->model == SF_NEURON_ALIF, per_neuron = a != NULL;
    if (sc) (void)SF_RECOMPUTE_MODELS(sc, sh);
    else (void)SF_RECOMPUTE_MODELS(NULL, NULL);
}
#undef SF_RECOMPUTE
#undef SF_RECOMPUTE_MODELS

void sf_neuron_block_dy(const sf_neuron_call *nc, int64_t n0, int nb, const float *x, const float *h,
                        const float *sc, const float *sh, const float *ds, float *scratch, int write_state,
                        double *dk)
{
    const int64_t T = nc->T, N = nc->N;
    const sf_lif_state *st = nc->st;
    const float *v_in = st ? sf_state_at(st->v_in, n0) : NULL;
    float a[BLK], c[BLK];
    const int per_neuron = gather_coeffs(nc, n0, nb, a, c);
    float *th = scratch + T * BLK; /* the ALIF's θ rows */
    sf_block_back io = {.h = scratch, .hs = BLK, .th = th, .ths = BLK, .ds = ds + n0, .dy = scratch, .dys = BLK,
                        .dv_in = st ? sf_state_at(st->dv_in, n0) : NULL,
                        .dv_out = st && write_state ? sf_state_at_mut(st->dv_out, n0) : NULL,
                        .a = per_neuron ? a : NULL, .c = per_neuron ? c : NULL, .x = x ? x + n0 : NULL, .sc = sc,
                        .sh = sh, .v_init = v_in, .dk = dk};
    if (h) {
        io.h = h + n0;
        io.hs = N;
        if (nc->p->model == SF_NEURON_ALIF)
            sf_block_alif_thresholds(&nc->k, T, nb, io.h, N, v_in ? v_in + N : NULL, th, BLK);
    } else {
        recompute(nc, nb, x + n0, sc, sh, io.a, io.c, v_in, scratch);
    }
    nc->back(nc->p, &nc->k, T, N, nb, &io);
}

sf_status sf_neuron_plif_sums(const sf_neuron_call *nc, double **dk)
{
    *dk = calloc((size_t)(nc->N > 0 ? nc->N : 1), sizeof **dk);
    if (!*dk) return sf_fail(SF_ERR_NOMEM, "PLIF backward: cannot allocate %lld sums", (long long)nc->N);
    return SF_OK;
}

sf_status sf_neuron_plif_dw(const sf_neuron_call *nc, const double *dk)
{
    if (!nc->st->dw) return SF_OK;
    double *sums = calloc((size_t)nc->w_channels, sizeof *sums);
    if (!sums) return sf_fail(SF_ERR_NOMEM, "PLIF backward: cannot allocate %d sums", (int)nc->w_channels);
    for (int64_t n = 0, c = 0, pos = 0; n < nc->N; n++) { /* c: the channel of neuron n */
        sums[c] += dk[n];
        if (++pos == nc->w_hw) {
            pos = 0;
            if (++c == nc->w_channels) c = 0;
        }
    }
    for (int32_t c = 0; c < nc->w_channels; c++) {
        double k = sf_plif_k(nc->st->w[c]);
        nc->st->dw[c] = (float)(sums[c] * k * (1.0 - k));
    }
    free(sums);
    return SF_OK;
}
