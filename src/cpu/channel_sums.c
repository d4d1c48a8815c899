/* channel_sums.c — per-channel gathers and deterministic per-channel sums over blocks of neurons. */
#include "cpu/channel_sums.h"

#include "core/error.h"

#include <stdlib.h>

void sf_channel_gather(int32_t C, int64_t hw, int64_t n0, int nb, const float *per_channel, float *out)
{
    int64_t c = (n0 / hw) % C, pos = n0 % hw;
    for (int i = 0; i < nb;) { /* one run of a channel's value at a time: a fill the compiler vectorizes */
        const int run = (int)(hw - pos < nb - i ? hw - pos : nb - i);
        const float v = per_channel[c];
        for (int j = 0; j < run; j++) out[i + j] = v;
        i += run;
        pos = 0;
        if (++c == C) c = 0;
    }
}

/* First slot of block b: block b touches (sample, channel) runs n0/hw .. (n0+nb-1)/hw, and run index + block index
 * never collides between blocks. */
static int64_t slot_of(const sf_channel_sums *cs, int64_t b) { return (b * cs->block) / cs->hw + b; }

sf_status sf_channel_sums_init(sf_channel_sums *cs, int64_t N, int32_t C, int64_t hw, int32_t width, int32_t block,
                               const char *what)
{
    cs->N = N;
    cs->C = C;
    cs->hw = hw;
    cs->width = width;
    cs->block = block;
    cs->nblocks = (N + block - 1) / block;
    const int64_t nslots = (cs->nblocks ? slot_of(cs, cs->nblocks - 1) : 0) + block + 1;
    cs->part = calloc((size_t)nslots * (size_t)width, sizeof *cs->part);
    if (!cs->part) return sf_fail(SF_ERR_NOMEM, "%s: cannot allocate partial sums", what);
    return SF_OK;
}

void sf_channel_sums_add(const sf_channel_sums *cs, int64_t b, int nb, double *const *vals)
{
    double *slot = cs->part + cs->width * slot_of(cs, b);
    for (int64_t i = 0, j = 0, pos = (b * cs->block) % cs->hw; i < nb; i++) { /* j: the run of neuron i */
        for (int32_t w = 0; w < cs->width; w++) slot[cs->width * j + w] += vals[w][i];
        if (++pos == cs->hw) {
            pos = 0;
            j++;
        }
    }
}

void sf_channel_sums_total(const sf_channel_sums *cs, double *out)
{
    for (int64_t i = 0; i < (int64_t)cs->C * cs->width; i++) out[i] = 0.0;
    for (int64_t b = 0; b < cs->nblocks; b++) {
        const int64_t n0 = b * cs->block, n1 = (n0 + cs->block < cs->N ? n0 + cs->block : cs->N) - 1;
        const double *slot = cs->part + cs->width * slot_of(cs, b);
        for (int64_t run = n0 / cs->hw, j = 0; run <= n1 / cs->hw; run++, j++)
            for (int32_t w = 0; w < cs->width; w++) out[cs->width * (run % cs->C) + w] += slot[cs->width * j + w];
    }
}

void sf_channel_sums_free(sf_channel_sums *cs)
{
    free(cs->part);
    cs->part = NULL;
}
