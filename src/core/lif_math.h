/* lif_math.h — the LIF equations and surrogate derivatives, one definition shared by the CPU and CUDA kernels
 * (see include/spikefuse.h for the model). Inline, so each backend compiles it into its own loops. */
#ifndef SF_CORE_LIF_MATH_H
#define SF_CORE_LIF_MATH_H

#include "spikefuse.h"

#include <math.h>

/* A backend may supply its own expf by defining SF_EXPF before including this header (the CPU kernels use a
 * branch-free polynomial one so the sigmoid surrogate vectorises). */
#ifndef SF_EXPF
#define SF_EXPF expf
#endif

#ifdef __CUDACC__
#define SF_HD __host__ __device__ __forceinline__
#else
#define SF_HD static inline
#endif

/* Coefficients of h_t = a·v_{t-1} + c·x_t and the state a neuron starts from. */
typedef struct sf_lif_coeffs {
    float a, c, v0, theta, v_reset;
} sf_lif_coeffs;

SF_HD sf_lif_coeffs sf_lif_coeffs_of(const sf_lif_params *p)
{
    sf_lif_coeffs k;
    k.a = p->decay > 0.0f ? p->decay : 1.0f - 1.0f / p->tau;
    k.c = p->decay_input ? 1.0f - k.a : 1.0f;
    k.theta = p->v_threshold;
    k.v_reset = p->v_reset;
    k.v0 = p->soft_reset ? 0.0f : p->v_reset;
    return k;
}

/* ∂s/∂h at membrane potential h (before θ_grad masking). */
SF_HD float sf_surrogate_grad(sf_surrogate kind, float alpha, float z)
{
    switch (kind) {
    case SF_SURROGATE_SIGMOID: {
        float sg = 1.0f / (1.0f + SF_EXPF(-alpha * z));
        return alpha * sg * (1.0f - sg);
    }
    case SF_SURROGATE_ATAN: {
        float u = 1.5707963267948966f * alpha * z;
        return 0.5f * alpha / (1.0f + u * u);
    }
    case SF_SURROGATE_FAST_SIGMOID: {
        float d = alpha * fabsf(z) + 1.0f;
        return 1.0f / (d * d);
    }
    case SF_SURROGATE_RECT: return fabsf(z) < 0.5f / alpha ? alpha : 0.0f;
    }
    return 0.0f;
}

/* The surrogate with θ_grad applied: zero where h < θ_grad. */
SF_HD float sf_lif_sg(const sf_lif_params *p, float h)
{
    if (p->use_grad_threshold && h < p->grad_threshold) return 0.0f;
    return sf_surrogate_grad(p->surrogate, p->alpha, h - p->v_threshold);
}

/* One forward step: returns s_t, updates v in place (v holds v_{t-1} on entry, v_t on exit), writes h_t. */
SF_HD float sf_lif_step(const sf_lif_coeffs *k, int soft_reset, float x, float *v, float *h_out)
{
    float h = k->a * *v + k->c * x;
    float s = h >= k->theta ? 1.0f : 0.0f;
    *v = soft_reset ? h - k->theta * s : (s > 0.0f ? k->v_reset : h);
    *h_out = h;
    return s;
}

/* One backward step, in reverse time. dv carries ∂L/∂v_t from step t+1 (a·dh_{t+1}); returns dh_t and sets
 * dv to ∂L/∂v_{t-1} = a·dh_t. With z = h - θ, σ' = surrogate:
 *   hard:  v_t = h(1-s) + v_reset·s   →  ∂v/∂h = (1-s) + (v_reset - h)·σ'·[!detach]
 *   soft:  v_t = h - θ·s              →  ∂v/∂h = 1 - θ·σ'·[!detach]
 *   dh_t = ds_t·σ' + dv_t·∂v/∂h, and 0 where h < θ_grad under grad_cut */
SF_HD float sf_lif_step_back(const sf_lif_params *p, const sf_lif_coeffs *k, float h, float ds, float *dv)
{
    float sg = sf_lif_sg(p, h);
    float s = h >= k->theta ? 1.0f : 0.0f;
    float dvdh;
    if (p->soft_reset)
        dvdh = p->detach_reset ? 1.0f : 1.0f - k->theta * sg;
    else
        dvdh = (1.0f - s) + (p->detach_reset ? 0.0f : (k->v_reset - h) * sg);
    float dh = ds * sg + *dv * dvdh;
    if (p->grad_cut && p->use_grad_threshold && h < p->grad_threshold) dh = 0.0f;
    *dv = k->a * dh;
    return dh;
}

#endif
