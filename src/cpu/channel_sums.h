/* channel_sums.h — per-channel views of neurons laid out as [B, C, hw] per step (neuron n is in channel (n / hw)
 * mod C): copying per-channel values out to a block of neurons, and deterministic per-channel sums of per-neuron
 * values that blocks compute in parallel (BN's dgamma and dbeta, a PLIF's dw). Internal to src/cpu. */
#ifndef SF_CPU_CHANNEL_SUMS_H
#define SF_CPU_CHANNEL_SUMS_H

#include "spikefuse.h"

#include <stdint.h>

/* out[i] = per_channel[channel of neuron n0 + i] for nb neurons. Only the first neuron's channel takes a division:
 * a block is small beside hw·C, and a division per neuron costs more than the whole neuron recurrence at small T. */
void sf_channel_gather(int32_t C, int64_t hw, int64_t n0, int nb, const float *per_channel, float *out);

/* Sums of `width` values per neuron over the N neurons of a step, per channel, computed by blocks of `block`
 * neurons: each block adds its neurons into its own slots (one per (sample, channel) run it touches), then the
 * slots are added in a fixed order, so the result does not depend on which thread ran which block. */
typedef struct sf_channel_sums {
    int64_t N, hw;
    int32_t C, width, block;
    int64_t nblocks;
    double *part;
} sf_channel_sums;

sf_status sf_channel_sums_init(sf_channel_sums *cs, int64_t N, int32_t C, int64_t hw, int32_t width, int32_t block,
                               const char *what);
/* Block b adds its nb neurons' values: vals[j][i] is value j of neuron b·block + i (double: the sums are in double).
 * Each block is added once, by any thread. */
void sf_channel_sums_add(const sf_channel_sums *cs, int64_t b, int nb, double *const *vals);
/* out[c·width + j]: the sum of value j over channel c. */
void sf_channel_sums_total(const sf_channel_sums *cs, double *out);
void sf_channel_sums_free(sf_channel_sums *cs);

#endif
