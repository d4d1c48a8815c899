/* bn_lif.c — fused batch norm → LIF on the CPU (Liang et al., Alg. 1–3): the forward normalises inside the
 * time-fused LIF loop; the backward recomputes y = BN(x) and h per block instead of reading stored tensors.
 *
 * Backward, two passes over blocks of neurons (per-thread scratch of [T × block] only):
 *   pass 1: h (recomputed or given) → reverse-time recurrence → dy = c·dh; reduce Σdy and Σdy·(x − mean) per channel
 *           (dbeta and dgamma·std);
 *   pass 2: the same dy again, then dx = γ·invstd·(dy − mean(dy) − x̂·mean(dy·x̂)).
 * Channel sums are deterministic: each block adds its neurons over t in double lanes, then per (sample, channel) run
 * into its own slot; the slots are added in a fixed order. With a split (sf_bn_split), phase 1 is pass 1 and phase 2
 * is pass 2 with the sums of every process. */
/* Same options as lif.c, so the inlined block loops (and thus h) are bitwise identical in both files. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif
#include "cpu/cpu_neuron.h"
#include "cpu/neuron_block.h"
#include "core/error.h"

#include <omp.h>
#include <stdlib.h>

enum { BLK = SF_CPU_BLOCK };

typedef struct bn_lif_geom {
    int64_t T, B, N; /* N = B·C·hw neurons per step */
    int64_t hw;
    int32_t C;
    int64_t nblocks;
} bn_lif_geom;

static sf_status geom_of(const char *op, const sf_lif_params *p, int64_t T, sf_bn_shape sh, bn_lif_geom *g)
{
    SF_TRY(sf_lif_params_check(p));
    SF_TRY(sf_bn_check(op, sh));
    if (T < 1 || sh.rows % T != 0)
        return sf_fail(SF_ERR_INVALID, "%s: rows = %lld is not T·B for T = %lld", op, (long long)sh.rows,
                       (long long)T);
    g->T = T;
    g->B = sh.rows / T;
    g->C = sh.c;
    g->hw = sh.hw;
    g->N = g->B * sh.c * sh.hw;
    g->nblocks = (g->N + BLK - 1) / BLK;
    return SF_OK;
}

/* Per-neuron copies of a per-channel value for the block starting at n0 (channel of n = (n / hw) mod C). Only the
 * first neuron's channel takes a division: a block is small beside hw·C, and divisions per neuron cost more than
 * the whole LIF recurrence at small T. */
static void gather(const bn_lif_geom *g, int64_t n0, int nb, const float *per_channel, float *out)
{
    int64_t c = (n0 / g->hw) % g->C, pos = n0 % g->hw;
    for (int i = 0; i < nb; i++) {
        out[i] = per_channel[c];
        if (++pos == g->hw) {
            pos = 0;
            if (++c == g->C) c = 0;
        }
    }
}

SF_CPU_CLONES static int64_t forward_block(const bn_lif_geom *g, const sf_lif_coeffs *k, int soft, int64_t n0,
                                           const float *x, const float *scale, const float *shift,
                                           const sf_lif_out *out, const sf_lif_state *st)
{
    float sc[BLK], sh[BLK];
    const int nb = (int)(g->N - n0 < BLK ? g->N - n0 : BLK);
    gather(g, n0, nb, scale, sc);
    gather(g, n0, nb, shift, sh);
    float *s = out->s ? out->s + n0 : NULL, *h = out->h ? out->h + n0 : NULL;
    uint8_t *s8 = out->s_u8 ? out->s_u8 + n0 : NULL;
    const float *v_in = st ? sf_state_at(st->v_in, n0) : NULL;
    float *v_out = st ? sf_state_at_mut(st->v_out, n0) : NULL;
#define SF_FWD(soft, bytes)                                                                                        \
    sf_block_forward(k, soft, 1, bytes, g->T, g->N, nb, x + n0, sc, sh, v_in, v_out, NULL, 0, s, h, s8, NULL)
    if (s8) return soft ? SF_FWD(1, 1) : SF_FWD(0, 1);
    return soft ? SF_FWD(1, 0) : SF_FWD(0, 0);
#undef SF_FWD
}

sf_status sf_cpu_op_bn_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                                   const float *x, const float *mean, const float *var, float eps,
                                   const float *gamma, const float *beta, const sf_lif_out *out,
                                   const sf_lif_state *st)
{
    (void)be;
    bn_lif_geom g;
    SF_TRY(geom_of("BN-LIF forward", p, T, sh, &g));
    float *f = NULL;
    SF_TRY(sf_cpu_alloc_f32(3 * (int64_t)g.C, "BN-LIF forward", &f));
    sf_bn_fold(g.C, mean, var, eps, gamma, beta, f, f + g.C, f + 2 * g.C);
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    int64_t spikes = 0;
#pragma omp parallel
    {
#pragma omp for schedule(static) reduction(+ : spikes)
        for (int64_t b = 0; b < g.nblocks; b++)
            spikes += forward_block(&g, &k, p->soft_reset, b * BLK, x, f + g.C, f + 2 * g.C, out, st);
        sf_stream_fence();
    }
    if (out->spike_count) *out->spike_count += (float)spikes;
    free(f);
    return SF_OK;
}

/* dy (= c·dh) of one block into scratch [T × BLK], from the given h or recomputed from x; st as in the LIF ops,
 * dv_out written only when write_dv is set. */
static void block_dy(const bn_lif_geom *g, const sf_lif_params *p, const sf_lif_coeffs *k, sf_block_backward_fn back,
                     int64_t n0, int nb, const float *x, const float *h, const float *sc, const float *sh,
                     const float *ds, float *scratch, const sf_lif_state *st, int write_dv)
{
    const float *dv_in = st ? sf_state_at(st->dv_in, n0) : NULL;
    float *dv_out = st && write_dv ? sf_state_at_mut(st->dv_out, n0) : NULL;
    if (h) {
        back(p, k, g->T, g->N, nb, h + n0, g->N, ds + n0, scratch, BLK, dv_in, dv_out);
    } else {
        sf_block_recompute_h(k, p->soft_reset, g->T, g->N, nb, x + n0, sc, sh, st ? sf_state_at(st->v_in, n0) : NULL,
                             scratch, BLK);
        back(p, k, g->T, g->N, nb, scratch, BLK, ds + n0, scratch, BLK, dv_in, dv_out);
    }
}

/* First slot of block b in the partial-sum array: block b touches (sample, channel) runs n0/hw .. (n0+nb-1)/hw,
 * and run index + block index never collides between blocks. */
static int64_t slot_of(const bn_lif_geom *g, int64_t b) { return (b * BLK) / g->hw + b; }

sf_status sf_cpu_op_bn_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                                    const float *x, const float *h, const float *mean, const float *var, float eps,
                                    const float *gamma, const float *beta, const float *ds, float *dx,
                                    float *dgamma, float *dbeta, const sf_lif_state *st, const sf_bn_split *split)
{
    (void)be;
    bn_lif_geom g;
    SF_TRY(geom_of("BN-LIF backward", p, T, sh, &g));
    const int phase = split ? split->phase : 0; /* 0: both passes here */
    if (split && (phase < 1 || phase > 2))
        return sf_fail(SF_ERR_INVALID, "BN-LIF backward: split phase %d (expected 1 or 2)", phase);
    if (phase == 1 && (!dgamma || !dbeta))
        return sf_fail(SF_ERR_INVALID, "BN-LIF backward: phase 1 writes its sums into dgamma and dbeta (NULL given)");
    if (phase == 2 && (!split->sum_dy || !split->sum_dyx || split->rows < 1))
        return sf_fail(SF_ERR_INVALID, "BN-LIF backward: phase 2 needs the sums of every part and their rows");
    const int64_t C = g.C, nslots = slot_of(&g, g.nblocks - 1) + BLK + 1;
    float *f = NULL, *scratch = NULL;
    double *part = calloc((size_t)nslots * 2, sizeof *part);
    double *sums = calloc((size_t)C * 2, sizeof *sums);
    sf_status status = part && sums ? SF_OK : sf_fail(SF_ERR_NOMEM, "BN-LIF backward: cannot allocate partial sums");
    if (status == SF_OK) status = sf_cpu_alloc_f32(5 * C, "BN-LIF backward", &f);
    if (status == SF_OK) status = sf_thread_scratch(g.T * BLK, "BN-LIF backward", &scratch);
    if (status != SF_OK) goto done;

    float *invstd = f, *scale = f + C, *shift = f + 2 * C, *mdy = f + 3 * C, *mdyx = f + 4 * C;
    sf_bn_fold(g.C, mean, var, eps, gamma, beta, invstd, scale, shift);
    const sf_lif_coeffs k = sf_lif_coeffs_of(p);
    const sf_block_backward_fn back = sf_block_backward_for(p);
    if (phase == 2) {
        const double n_all = (double)split->rows * (double)sh.hw;
        for (int64_t c = 0; c < C; c++) {
            mdy[c] = (float)(split->sum_dy[c] / n_all);
            mdyx[c] = (float)(split->sum_dyx[c] / n_all);
        }
        goto pass2;
    }

#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < g.nblocks; b++) {
        float sc[BLK], sh_[BLK], mu[BLK];
        double sdy[BLK], sdyx[BLK];
        const int64_t n0 = b * BLK;
        const int nb = (int)(g.N - n0 < BLK ? g.N - n0 : BLK);
        float *dy = scratch + omp_get_thread_num() * g.T * BLK;
        gather(&g, n0, nb, scale, sc);
        gather(&g, n0, nb, shift, sh_);
        gather(&g, n0, nb, mean, mu);
        block_dy(&g, p, &k, back, n0, nb, x, h, sc, sh_, ds, dy, st, 1);
        for (int i = 0; i < nb; i++) sdy[i] = sdyx[i] = 0.0;
        for (int64_t t = 0; t < g.T; t++) {
            const float *xt = x + t * g.N + n0, *dyt = dy + t * BLK;
            for (int i = 0; i < nb; i++) {
                sdy[i] += (double)dyt[i];
                sdyx[i] += (double)dyt[i] * ((double)xt[i] - (double)mu[i]);
            }
        }
        double *slot = part + 2 * slot_of(&g, b);
        for (int64_t i = 0, j = 0, pos = n0 % g.hw; i < nb; i++) { /* j: the (sample, channel) run of neuron i */
            slot[2 * j] += sdy[i];
            slot[2 * j + 1] += sdyx[i];
            if (++pos == g.hw) {
                pos = 0;
                j++;
            }
        }
    }
    for (int64_t b = 0; b < g.nblocks; b++) {
        const int64_t n0 = b * BLK, n1 = (n0 + BLK < g.N ? n0 + BLK : g.N) - 1;
        const double *slot = part + 2 * slot_of(&g, b);
        for (int64_t run = n0 / g.hw, j = 0; run <= n1 / g.hw; run++, j++) {
            sums[2 * (run % C)] += slot[2 * j];
            sums[2 * (run % C) + 1] += slot[2 * j + 1];
        }
    }
    const double n = (double)sh.rows * (double)sh.hw;
    for (int64_t c = 0; c < C; c++) {
        const double sdyx = sums[2 * c + 1] * invstd[c]; /* Σ dy·x̂ */
        if (dbeta) dbeta[c] = (float)sums[2 * c];
        if (dgamma) dgamma[c] = (float)sdyx;
        mdy[c] = (float)(sums[2 * c] / n);
        mdyx[c] = (float)(sdyx / n);
    }
    if (phase == 1) goto done;

pass2:
#pragma omp parallel
    {
        float *dy = scratch + omp_get_thread_num() * g.T * BLK;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < g.nblocks; b++) {
            float sc[BLK], sh_[BLK], mu[BLK], is[BLK], m[BLK], mx[BLK], row[BLK];
            const int64_t n0 = b * BLK;
            const int nb = (int)(g.N - n0 < BLK ? g.N - n0 : BLK);
            gather(&g, n0, nb, scale, sc);
            gather(&g, n0, nb, shift, sh_);
            gather(&g, n0, nb, mean, mu);
            gather(&g, n0, nb, invstd, is);
            gather(&g, n0, nb, mdy, m);
            gather(&g, n0, nb, mdyx, mx);
            block_dy(&g, p, &k, back, n0, nb, x, h, sc, sh_, ds, dy, st, 0);
            for (int64_t t = 0; t < g.T; t++) {
                const float *xt = x + t * g.N + n0, *dyt = dy + t * BLK;
#pragma omp simd
                for (int i = 0; i < nb; i++) row[i] = sc[i] * (dyt[i] - m[i] - (xt[i] - mu[i]) * is[i] * mx[i]);
                sf_stream_row(dx + t * g.N + n0, row, nb);
            }
        }
        sf_stream_fence();
    }
done:
    free(scratch);
    free(f);
    free(sums);
    free(part);
    return status;
}
