/* bn_lif.c — fused batch norm → neuron (any model) on the CPU (Liang et al., Alg. 1–3): the forward normalises
 * inside the time-fused neuron loop; the backward recomputes y = BN(x) and h per block instead of reading stored
 * tensors.
 *
 * Backward, two passes over blocks of neurons (per-thread scratch of [T × block]):
 *   pass 1: h (recomputed or given) → reverse-time recurrence → dy = c·dh, kept in dx; reduce Σdy and
 *           Σdy·(x − mean) per channel (dbeta and dgamma·std);
 *   pass 2: dx = γ·invstd·(dy − mean(dy) − x̂·mean(dy·x̂)) in place (a split's phase 2 recomputes dy instead: its
 *           phase 1 ran in another call).
 * Channel sums are deterministic (sf_channel_sums): each block adds its neurons over t in double lanes, then per
 * (sample, channel) run into its own slot; the slots are added in a fixed order. A PLIF's dw is summed the same way in
 * pass 1. With a split (sf_bn_split), phase 1 is pass 1 and phase 2 is pass 2 with the sums of every process. */
/* Same options as lif.c, so the inlined block loops (and thus h) are bitwise identical in both files. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif
#include "cpu/cpu_neuron.h"
#include "cpu/channel_sums.h"
#include "cpu/neuron_call.h"
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

static sf_status geom_of(const char *op, int64_t T, sf_bn_shape sh, bn_lif_geom *g)
{
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

/* The block's per-neuron copies of per-channel values. */
static void gather(const bn_lif_geom *g, int64_t n0, int nb, const float *per_channel, float *out)
{
    sf_channel_gather(g->C, g->hw, n0, nb, per_channel, out);
}

/* x is [T, B, C, hw] with sh.rows = T·B; neuron n = (b·C + c)·hw + p of a step, step stride B·C·hw. */
sf_status sf_cpu_op_bn_lif_forward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                                   const float *x, const float *mean, const float *var, float eps,
                                   const float *gamma, const float *beta, const sf_lif_out *out,
                                   const sf_lif_state *st)
{
    (void)be;
    bn_lif_geom g;
    sf_neuron_call nc;
    SF_TRY(geom_of("BN-LIF forward", T, sh, &g));
    SF_TRY(sf_neuron_call_init(&nc, "BN-LIF forward", p, T, g.N, st, g.C, g.hw));
    float *f = NULL;
    sf_status status = sf_cpu_alloc_f32(3 * (int64_t)g.C, "BN-LIF forward", &f);
    if (status != SF_OK) {
        sf_neuron_call_free(&nc);
        return status;
    }
    sf_bn_fold(g.C, mean, var, eps, gamma, beta, f, f + g.C, f + 2 * g.C);
    int64_t spikes = 0;
#pragma omp parallel
    {
#pragma omp for schedule(static) reduction(+ : spikes)
        for (int64_t b = 0; b < g.nblocks; b++) {
            float sc[BLK], sh_[BLK];
            const int64_t n0 = b * BLK;
            const int nb = (int)(g.N - n0 < BLK ? g.N - n0 : BLK);
            gather(&g, n0, nb, f + g.C, sc);
            gather(&g, n0, nb, f + 2 * g.C, sh_);
            spikes += sf_neuron_block_forward(&nc, n0, nb, x, sc, sh_, out, NULL);
        }
        sf_stream_fence();
    }
    if (out->spike_count) *out->spike_count += (float)spikes;
    free(f);
    sf_neuron_call_free(&nc);
    return SF_OK;
}

/* h: [T, N] kept by the forward (full mode) or NULL (recompute). Writes dx [T, N], dgamma [C], dbeta [C] (or, with
 * split, what its phase writes). */
sf_status sf_cpu_op_bn_lif_backward(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                                    const float *x, const float *h, const float *mean, const float *var, float eps,
                                    const float *gamma, const float *beta, const float *ds, float *dx,
                                    float *dgamma, float *dbeta, const sf_lif_state *st, const sf_bn_split *split,
                                    void *planned)
{
    (void)be, (void)planned; /* a block's sums live in its thread's own scratch */
    bn_lif_geom g;
    sf_neuron_call nc;
    SF_TRY(geom_of("BN-LIF backward", T, sh, &g));
    const int phase = split ? split->phase : 0; /* 0: both passes here */
    if (split && (phase < 1 || phase > 2))
        return sf_fail(SF_ERR_INVALID, "BN-LIF backward: split phase %d (expected 1 or 2)", phase);
    if (phase == 1 && (!dgamma || !dbeta))
        return sf_fail(SF_ERR_INVALID, "BN-LIF backward: phase 1 writes its sums into dgamma and dbeta (NULL given)");
    if (phase == 2 && (!split->sum_dy || !split->sum_dyx || split->rows < 1))
        return sf_fail(SF_ERR_INVALID, "BN-LIF backward: phase 2 needs the sums of every part and their rows");
    SF_TRY(sf_neuron_call_init(&nc, "BN-LIF backward", p, T, g.N, st, g.C, g.hw));
    const int64_t C = g.C, per_thread = sf_neuron_scratch_floats(&nc);
    /* a PLIF's dw comes with the reverse-time pass that writes the state: pass 1 (phase 1 or unsplit) */
    const int plif = sf_neuron_is_plif(&nc), want_dw = plif && phase != 2;
    float *f = NULL, *scratch = NULL;
    double *sums = calloc((size_t)C * 2, sizeof *sums), *dk = NULL; /* dk: a PLIF's per-neuron sums */
    sf_channel_sums bn_sums = {0};
    sf_status status = sums ? SF_OK : sf_fail(SF_ERR_NOMEM, "BN-LIF backward: cannot allocate channel sums");
    if (status == SF_OK && phase != 2)
        status = sf_channel_sums_init(&bn_sums, g.N, g.C, g.hw, 2, BLK, "BN-LIF backward");
    if (status == SF_OK && want_dw) status = sf_neuron_plif_sums(&nc, &dk);
    if (status == SF_OK) status = sf_cpu_alloc_f32(5 * C, "BN-LIF backward", &f);
    if (status == SF_OK) status = sf_thread_scratch(per_thread, "BN-LIF backward", &scratch);
    if (status != SF_OK) goto done;

    float *invstd = f, *scale = f + C, *shift = f + 2 * C, *mdy = f + 3 * C, *mdyx = f + 4 * C;
    sf_bn_fold(g.C, mean, var, eps, gamma, beta, invstd, scale, shift);
    if (phase == 2) {
        const double n_all = (double)split->rows * (double)sh.hw;
        for (int64_t c = 0; c < C; c++) {
            mdy[c] = (float)(split->sum_dy[c] / n_all);
            mdyx[c] = (float)(split->sum_dyx[c] / n_all);
        }
        goto pass2;
    }

#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int64_t b = 0; b < g.nblocks; b++) {
            float sc[BLK], sh_[BLK], mu[BLK];
            double sdy[BLK], sdyx[BLK];
            double *bn_vals[2] = {sdy, sdyx};
            const int64_t n0 = b * BLK;
            const int nb = (int)(g.N - n0 < BLK ? g.N - n0 : BLK);
            float *dy = scratch + omp_get_thread_num() * per_thread;
            gather(&g, n0, nb, scale, sc);
            gather(&g, n0, nb, shift, sh_);
            gather(&g, n0, nb, mean, mu);
            sf_neuron_block_dy(&nc, n0, nb, x, h, sc, sh_, ds, dy, 1, dk ? dk + n0 : NULL);
            for (int i = 0; i < nb; i++) sdy[i] = sdyx[i] = 0.0;
            for (int64_t t = 0; t < g.T; t++) {
                const float *xt = x + t * g.N + n0, *dyt = dy + t * BLK;
                for (int i = 0; i < nb; i++) {
                    sdy[i] += (double)dyt[i];
                    sdyx[i] += (double)dyt[i] * ((double)xt[i] - (double)mu[i]);
                }
                if (phase == 0) sf_stream_row(dx + t * g.N + n0, dyt, nb);
            }
            sf_channel_sums_add(&bn_sums, b, nb, bn_vals);
        }
        sf_stream_fence();
    }
    sf_channel_sums_total(&bn_sums, sums);
    if (want_dw && (status = sf_neuron_plif_dw(&nc, dk)) != SF_OK) goto done;
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
        float *dy = scratch + omp_get_thread_num() * per_thread;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < g.nblocks; b++) {
            float sc[BLK], sh_[BLK], mu[BLK], is[BLK], m[BLK], mx[BLK], row[BLK];
            double dk_unused[BLK] = {0}; /* phase 2's dk: dw comes from pass 1 */
            const int64_t n0 = b * BLK;
            const int nb = (int)(g.N - n0 < BLK ? g.N - n0 : BLK);
            gather(&g, n0, nb, scale, sc);
            gather(&g, n0, nb, shift, sh_);
            gather(&g, n0, nb, mean, mu);
            gather(&g, n0, nb, invstd, is);
            gather(&g, n0, nb, mdy, m);
            gather(&g, n0, nb, mdyx, mx);
            if (phase == 2) sf_neuron_block_dy(&nc, n0, nb, x, h, sc, sh_, ds, dy, 0, plif ? dk_unused : NULL);
            for (int64_t t = 0; t < g.T; t++) {
                const float *xt = x + t * g.N + n0, *dyt = phase == 2 ? dy + t * BLK : dx + t * g.N + n0;
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
    sf_channel_sums_free(&bn_sums);
    free(dk);
    sf_neuron_call_free(&nc);
    return status;
}

/* 0: the backward keeps a block's sums in its thread's own scratch, nothing planned. */
size_t sf_cpu_op_bn_lif_scratch(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh)
{
    (void)be, (void)p, (void)T, (void)sh;
    return 0;
}
