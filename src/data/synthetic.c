/* synthetic.c — the synthetic source: labelled spike trains of any shape drawn from a seed (dataset.h's
 * sf_synthetic_params says how), so networks of any input shape can be trained, tested and benchmarked without
 * files. Nothing is stored but the labels; a batch's spikes are drawn in the loader's prefetch thread. */
#include "data/formats.h"

#include "core/error.h"
#include "data/draws.h"

#include <math.h>
#include <string.h>

/* Larger steps than this are refused: 2^26 inputs per step is already 256 MiB of floats per sample and step. */
#define SF_SYNTHETIC_MAX_INPUTS ((int64_t)1 << 26)

sf_status sf_synthetic_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                            sf_dataset **out)
{
    const sf_synthetic_params *sp = &p->synthetic;
    int64_t inputs = 1;
    for (int i = 0; i < 3; i++) {
        if (sp->shape[i] < 1 || sp->shape[i] > 16384)
            return sf_fail(SF_ERR_INVALID, "synthetic input_shape %d×%d×%d: every side must be 1..16384",
                           sp->shape[0], sp->shape[1], sp->shape[2]);
        inputs *= sp->shape[i];
    }
    if (inputs > SF_SYNTHETIC_MAX_INPUTS)
        return sf_fail(SF_ERR_INVALID, "synthetic input_shape %d×%d×%d has more than 2^26 inputs", sp->shape[0],
                       sp->shape[1], sp->shape[2]);
    if (sp->samples < 1 || sp->classes < 1 || sp->classes > SF_DATASET_MAX_CLASSES ||
        !(sp->density > 0.0f && sp->density <= 1.0f))
        return sf_fail(SF_ERR_INVALID,
                       "synthetic data of %lld samples, %d classes, density %g: samples must be >= 1, classes "
                       "1..%d, density in (0, 1]",
                       (long long)sp->samples, sp->classes, sp->density, SF_DATASET_MAX_CLASSES);
    const int64_t count = split == SF_SPLIT_TRAIN ? sp->samples : sp->samples / 4 > 0 ? sp->samples / 4 : 1;
    sf_dataset *ds = NULL;
    SF_TRY(sf_dataset_create_of_type(SF_SAMPLES_SYNTHETIC, count, sp->shape[0], sp->shape[1], sp->shape[2],
                                     sp->classes, &ds));
    for (int64_t i = 0; i < count; i++) ds->labels[i] = (int32_t)(i % sp->classes);
    ds->density = sp->density;
    ds->seed = p->seed;
    ds->split = split;
    *out = ds;
    return SF_OK;
}

/* A uniform draw in (0, 1), never 0, so its logarithm is finite. */
static float open_uniform(uint64_t h) { return ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f); }

/* Spikes of one input over T steps with probability r per step: the steps between spikes are geometric, drawn
 * as floor(log u / log(1 - r)), so the cost follows the spikes, not T. `log_keep` is log(1 - r) (-inf for r = 1:
 * every step spikes). */
static void draw_train(uint64_t key, float log_keep, int64_t T, float *x, size_t step)
{
    uint64_t j = 0;
    for (int64_t t = 0;; t++) {
        const float gap = logf(open_uniform(sf_mix64(key + j++))) / log_keep;
        if (!(gap < (float)(T - t))) return; /* also ends on a NaN, which cannot occur */
        t += (int64_t)gap;
        x[(size_t)t * step] = 1.0f;
    }
}

void sf_synthetic_batch(const sf_dataset *ds, const sf_loader_params *p, const int64_t *idx, int64_t count,
                        float *x)
{
    const int64_t T = p->timesteps;
    const size_t chw = (size_t)ds->channels * ds->height * ds->width, step = (size_t)p->batch * chw;
    const float d = ds->density, m = fminf(0.5f, (1.0f - d) / d);
    const float low = d * (1.0f - m), high = fminf(1.0f, d * (1.0f + m));
    const float log_keep[2] = {low < 1.0f ? log1pf(-low) : -INFINITY, high < 1.0f ? log1pf(-high) : -INFINITY};
    /* Which inputs fire more depends on the class only, so both splits share it; the spikes do not. */
    const uint64_t class_key = sf_draw_key(ds->seed, SF_DRAW_SYNTHETIC, -1);
    const uint64_t spike_key = sf_draw_key(ds->seed, SF_DRAW_SYNTHETIC, ds->split);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < count; b++) {
        float *x0 = x + (size_t)b * chw;
        for (int64_t t = 0; t < T; t++) memset(x0 + (size_t)t * step, 0, chw * sizeof *x0);
        const uint64_t label = ds->labels[idx[b]], sample_key = sf_mix64(spike_key ^ (uint64_t)idx[b]);
        for (size_t q = 0; q < chw; q++) {
            const int above = (int)(sf_hash3(class_key, label, q) & 1);
            draw_train(sf_mix64(sample_key ^ (uint64_t)q), log_keep[above], T, x0 + q, step);
        }
    }
}
