/* rng.h — counter-based random numbers: a value is a pure function of (seed, stream, index), so the CPU and CUDA
 * backends draw identical dropout masks and a resumed run continues the exact sequence. SplitMix64 finaliser. */
#ifndef SF_CORE_RNG_H
#define SF_CORE_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define SF_RNG_HD __host__ __device__ __forceinline__
#else
#define SF_RNG_HD static inline
#endif

SF_RNG_HD uint64_t sf_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

SF_RNG_HD uint64_t sf_hash3(uint64_t seed, uint64_t stream, uint64_t index)
{
    return sf_mix64(sf_mix64(sf_mix64(seed) ^ stream) ^ index);
}

/* Uniform in [0, 1) with 24 random bits (exactly representable in float). */
SF_RNG_HD float sf_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return (float)(sf_hash3(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

/* Dropout keeps element i when its uniform draw is >= p. */
SF_RNG_HD int sf_dropout_keep(uint64_t seed, uint64_t counter, uint64_t i, float p)
{
    return sf_uniform(seed, counter, i) >= p;
}

#endif
