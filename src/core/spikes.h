/* spikes.h — the compact form of a binary spike tensor, which event-driven layers consume (Finkbeiner & Neftci's
 * activation sparsity) and the backward keeps (1 bit per neuron and step).
 *
 * A [rows, n] tensor of 0/1 values (rows = T·B, n neurons per row) is held as
 *   bits [rows, words]  uint32, words = ceil(n / 32): neuron k of a row is bit k % 32 of word k / 32;
 *   idx  [rows, n]      uint8 (optional): a row is cut into segments of SF_SPIKE_SEG neurons, and segment g lists
 *                       the offsets (k - g·SF_SPIKE_SEG) of its active neurons, ascending, from idx[r·n + g·SEG];
 *   cnt  [rows, segs]   int32 (optional): the number of active neurons of each segment, segs = ceil(n / SEG).
 * Segments let a kernel that owns a block of neurons of one row write its part of the row's list without knowing
 * the rest: the same layout on every backend, so their outputs compare bitwise. Reading a row's list means walking
 * its segments in order (sf_spikes_row_list). */
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
