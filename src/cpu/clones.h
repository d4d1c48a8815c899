/* clones.h — SF_CPU_CLONES: the hot CPU loops compiled for AVX-512, AVX2 and baseline x86-64, picked at load time
 * (ifunc). Element-wise IEEE arithmetic without contraction (-ffp-contract=off), so all versions give the same bits.
 * `flatten` inlines the helpers whatever gcc's growth limits say: a call left in a loop stops vectorisation. */
#ifndef SF_CPU_CLONES_H
#define SF_CPU_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SF_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#elif defined(__GNUC__)
#define SF_CPU_CLONES __attribute__((flatten))
#else
#define SF_CPU_CLONES
#endif

#endif
