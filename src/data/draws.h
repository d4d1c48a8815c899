/* draws.h — the random draws of the data pipeline, each a pure function of (seed, purpose, epoch, ...) through the
 * counter-based RNG, so that a resumed run, a prefetching loader and a synchronous one all see the same data. */
#ifndef SF_DATA_DRAWS_H
#define SF_DATA_DRAWS_H

#include "core/rng.h"

#include <stdint.h>

/* One stream per purpose keeps shuffling, augmentation and Poisson spikes independent of each other. */
enum {
    SF_DRAW_SHUFFLE = 0x5348,
    SF_DRAW_AUGMENT = 0x4147,
    SF_DRAW_POISSON = 0x504f,
    SF_DRAW_SYNTHETIC = 0x5359,
    SF_DRAW_CROP = 0x4352 /* image folders' random resized crop and flip */
};

/* The key of one purpose in one epoch; draws within it are sf_hash3(key, a, b) / sf_uniform(key, a, b). */
static inline uint64_t sf_draw_key(uint64_t seed, uint64_t purpose, int64_t epoch)
{
    return sf_hash3(seed, purpose, (uint64_t)epoch);
}

#endif
