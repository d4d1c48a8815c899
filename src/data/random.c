/* random.c — the library's counter-based random numbers (core/rng.h) as the functions of include/spikefuse_train.h,
 * for programs that draw data the way the library does. */
#include "spikefuse_train.h"

#include "core/rng.h"

uint64_t sf_random_bits(uint64_t seed, uint64_t stream, uint64_t index) { return sf_hash3(seed, stream, index); }

float sf_random_uniform(uint64_t seed, uint64_t stream, uint64_t index) { return sf_uniform(seed, stream, index); }
