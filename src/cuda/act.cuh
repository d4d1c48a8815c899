/* act.cuh — the activation storage types of the CUDA backend (float, bf16, fp16: core/backend.h's sf_scalar):
 * widening to and rounding from the float registers every kernel computes in, loads and stores of 1 or 4
 * consecutive elements (16 bytes of float, 8 of a 16-bit type), and the dispatch from a run-time type to a
 * template instance. */
#ifndef SF_CUDA_ACT_CUH
#define SF_CUDA_ACT_CUH

#include "cuda/common.cuh"

#include <cuda_fp16.h>

__host__ __device__ __forceinline__ float sf_widen(float v) { return v; }
__device__ __forceinline__ float sf_widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float sf_widen(__half v) { return __half2float(v); }

/* To nearest, ties to even; 0 and 1 (spikes) are exact in every type. */
template <class T> __device__ __forceinline__ T sf_narrow(float v);
template <> __device__ __forceinline__ float sf_narrow<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 sf_narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half sf_narrow<__half>(float v) { return __float2half_rn(v); }

/* Four 16-bit elements as one 8-byte word, and back. */
__device__ __forceinline__ void sf_unpack4(uint2 q, __nv_bfloat16, float *r)
{
    float2 a = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&q.x));
    float2 b = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&q.y));
    r[0] = a.x, r[1] = a.y, r[2] = b.x, r[3] = b.y;
}
__device__ __forceinline__ void sf_unpack4(uint2 q, __half, float *r)
{
    float2 a = __half22float2(*reinterpret_cast<__half2 *>(&q.x));
    float2 b = __half22float2(*reinterpret_cast<__half2 *>(&q.y));
    r[0] = a.x, r[1] = a.y, r[2] = b.x, r[3] = b.y;
}
__device__ __forceinline__ uint2 sf_pack4(const float *r, __nv_bfloat16)
{
    __nv_bfloat162 a = __floats2bfloat162_rn(r[0], r[1]), b = __floats2bfloat162_rn(r[2], r[3]);
    return make_uint2(*reinterpret_cast<unsigned *>(&a), *reinterpret_cast<unsigned *>(&b));
}
__device__ __forceinline__ uint2 sf_pack4(const float *r, __half)
{
    __half2 a = __floats2half2_rn(r[0], r[1]), b = __floats2half2_rn(r[2], r[3]);
    return make_uint2(*reinterpret_cast<unsigned *>(&a), *reinterpret_cast<unsigned *>(&b));
}

/* V (1 or 4) elements at p into r; ONCE: data read exactly once, loaded streaming so that it does not push
 * reusable lines out of L2. p is aligned to V elements. */
template <int V, bool ONCE, class T> __device__ __forceinline__ void sf_ld(const T *p, float *r)
{
    if (V == 1) {
        r[0] = sf_widen(ONCE ? __ldcs(p) : *p);
    } else if constexpr (sizeof(T) == 4) {
        float4 q = ONCE ? __ldcs((const float4 *)p) : *(const float4 *)p;
        r[0] = q.x, r[1] = q.y, r[2] = q.z, r[3] = q.w;
    } else {
        sf_unpack4(ONCE ? __ldcs((const uint2 *)p) : *(const uint2 *)p, T(), r);
    }
}

/* V elements of r to p, streaming (written once, read by a later kernel). */
template <int V, class T> __device__ __forceinline__ void sf_st(T *p, const float *r)
{
    if (V == 1) {
        __stcs(p, sf_narrow<T>(r[0]));
    } else if constexpr (sizeof(T) == 4) {
        __stcs((float4 *)p, make_float4(r[0], r[1], r[2], r[3]));
    } else {
        __stcs((uint2 *)p, sf_pack4(r, T()));
    }
}

/* Calls fn(T()) with T the storage type `t` names. */
template <class Fn> static sf_status sf_cuda_with_act(sf_scalar t, Fn fn)
{
    switch (t) {
    case SF_SCALAR_F32: return fn(float());
    case SF_SCALAR_BF16: return fn(__nv_bfloat16());
    case SF_SCALAR_F16: return fn(__half());
    case SF_SCALAR_F64: break; /* the CPU's only (sf_backend_dtype_check) */
    }
    return sf_fail(SF_ERR_INVALID, "unknown activation storage type %d", (int)t);
}

/* The same type as cuBLAS and cuDNN name it. */
static inline cudaDataType_t sf_cuda_blas_type(sf_scalar t)
{
    return t == SF_SCALAR_BF16 ? CUDA_R_16BF : t == SF_SCALAR_F16 ? CUDA_R_16F : CUDA_R_32F;
}
static inline cudnnDataType_t sf_cudnn_type(sf_scalar t)
{
    return t == SF_SCALAR_BF16 ? CUDNN_DATA_BFLOAT16 : t == SF_SCALAR_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

#endif
