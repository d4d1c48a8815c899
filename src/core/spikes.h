/* spikes.h — the compact form of a binary [rows, n] spike tensor (rows = T·B), which event-driven layers read and the
 * backward keeps: bits [rows, words] uint32, words = ceil(n / 32), neuron k at bit k % 32 of word k / 32; optional idx
 * [rows, n] uint8: segment g of SF_SPIKE_SEG neurons lists its active neurons' offsets k − g·SEG, ascending, from
 * idx[r·n + g·SEG]; optional cnt [rows, segs] int32, each segment's count. A kernel owning a block of a row writes its
 * segments alone; the layout is the same on every backend, so outputs compare bitwise (sf_spikes_row_list reads it). */
#ifndef SF_CORE_SPIKES_H
#define SF_CORE_SPIKES_H

#include <stdint.h>

#define SF_SPIKE_SEG 256

typedef struct sf_spikes {
    uint32_t *bits; /* [rows, words] */
    uint8_t *idx;   /* [rows, n] or NULL */
    int32_t *cnt;   /* [rows, segs] or NULL */
} sf_spikes;

static inline int64_t sf_spike_words(int64_t n) { return (n + 31) / 32; }
static inline int64_t sf_spike_segs(int64_t n) { return (n + SF_SPIKE_SEG - 1) / SF_SPIKE_SEG; }

#endif
