/* tf32.cuh — an fp32 value as the sum of two TF32 parts, for fp32-accurate products on the tensor cores
 * (binary_linear.cu, rlif_grid.cu): hi = x rounded to TF32, lo = x − hi (exact in fp32) rounded again. hi + lo
 * differs from x by less than 2^-22·|x|, and each part is an exact TF32 operand. */
#ifndef SF_CUDA_TF32_CUH
#define SF_CUDA_TF32_CUH

#include <stdint.h>

/* x rounded to TF32 (10 mantissa bits; to nearest, ties away from zero), as a float: two integer instructions, where
 * cvt.rna.tf32.f32 takes about five on sm_90. A carry out of the mantissa moves into the exponent, as it should. */
__device__ __forceinline__ float sf_tf32(float x)
{
    return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
}

__device__ __forceinline__ void sf_tf32_split(float x, uint32_t *hi, uint32_t *lo)
{
    const float h = sf_tf32(x);
    *hi = __float_as_uint(h);
    *lo = __float_as_uint(sf_tf32(x - h));
}

/* The split for operands that go straight into an mma instruction, one instruction fewer: lo truncated to TF32 (its
 * low 13 bits cleared) instead of rounded, so hi + lo differs from x by less than 2^-21·|x|. */
__device__ __forceinline__ void sf_tf32_split_mma(float x, uint32_t *hi, uint32_t *lo)
{
    const float h = sf_tf32(x);
    *hi = __float_as_uint(h);
    *lo = __float_as_uint(x - h) & 0xffffe000u;
}

#endif
