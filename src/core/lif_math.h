/* lif_math.h — the neuron equations (LIF, PLIF, IF, ALIF) and surrogate derivatives, one definition shared by the
 * CPU and CUDA kernels (see include/spikefuse.h for the models). Inline, so each backend compiles it into its own
 * loops. */
#ifndef SF_CORE_LIF_MATH_H
#define SF_CORE_LIF_MATH_H

#include "spikefuse.h"

#include <math.h>

/* A backend may supply its own expf by defining SF_EXPF before including this header (the CPU kernels use a
 * branch-free polynomial one so the sigmoid surrogate vectorises). */
#ifndef SF_EXPF
#define SF_EXPF expf
#endif
/* ... and, for the gradients only (no spike depends on them), a fused multiply-add a·b + c and a division a / b by
 * b >= 1 with looser rounding (the CUDA kernels: one FFMA, one approximate reciprocal). The defaults are the plain
 * expressions, so a backend that supplies neither computes exactly what it did before. */
#ifndef SF_FMAF
#define SF_FMAF(a, b, c) ((a) * (b) + (c))
#endif
#ifndef SF_GRAD_DIV
#define SF_GRAD_DIV(a, b) ((a) / (b))
#endif

#ifdef __CUDACC__
#define SF_HD __host__ __device__ __forceinline__
#else
#define SF_HD static inline
#endif

/* Coefficients of h_t = a·v_{t-1} + c·x_t, the state a neuron starts from, and the ALIF's adaptation. A PLIF's a
 * and c come from its w (sf_plif_coeffs); here they are those of its starting tau. */
typedef struct sf_lif_coeffs {
    float a, c, v0, theta, v_reset;
    float rho, beta; /* ALIF */
} sf_lif_coeffs;

SF_HD sf_lif_coeffs sf_lif_coeffs_of(const sf_lif_params *p)
{
    sf_lif_coeffs k;
    k.a = p->decay > 0.0f ? p->decay : 1.0f - 1.0f / p->tau;
    k.c = p->decay_input ? 1.0f - k.a : 1.0f;
    if (p->model == SF_NEURON_IF) k.a = k.c = 1.0f;
    k.theta = p->v_threshold;
    k.v_reset = p->v_reset;
    k.v0 = p->soft_reset ? 0.0f : p->v_reset;
    k.rho = p->tau_adapt > 0.0f ? expf(-1.0f / p->tau_adapt) : p->rho;
    k.beta = p->beta;
    return k;
}

/* Floats of state per neuron carried across calls (sf_lif_state): v, and the ALIF's b. */
SF_HD int sf_neuron_state_count(const sf_lif_params *p) { return p->model == SF_NEURON_ALIF ? 2 : 1; }

/* Does the backward read the neuron's input x also when h was kept (the full memory mode)? The PLIF's dw needs y_t,
 * and the ALIF's θ_t is not kept: a backend may recompute it from x (the CUDA kernels do). */
SF_HD int sf_neuron_backward_reads_x(const sf_lif_params *p)
{
    return p->model == SF_NEURON_PLIF || p->model == SF_NEURON_ALIF;
}

/* k = sigmoid(w), the PLIF's 1/tau, with a = 1 - k and c = k (decay_input) or 1. In double, rounded once: the same
 * float on the host and the device (their expf may differ by an ulp, which would flip a spike now and then); it is
 * computed once per layer, channel or thread, not per step. */
SF_HD float sf_plif_k(float w) { return (float)(1.0 / (1.0 + exp(-(double)w))); }

SF_HD void sf_plif_coeffs(float w, int decay_input, float *a, float *c)
{
    float k = sf_plif_k(w);
    *a = 1.0f - k;
    *c = decay_input ? k : 1.0f;
}

/* ∂s/∂h at membrane potential h (before θ_grad masking). */
SF_HD float sf_surrogate_grad(sf_surrogate kind, float alpha, float z)
{
    switch (kind) {
    case SF_SURROGATE_SIGMOID: {
        float sg = SF_GRAD_DIV(1.0f, 1.0f + SF_EXPF(-alpha * z));
        return alpha * sg * (1.0f - sg);
    }
    case SF_SURROGATE_ATAN: {
        float u = 1.5707963267948966f * alpha * z;
        return SF_GRAD_DIV(0.5f * alpha, SF_FMAF(u, u, 1.0f));
    }
    case SF_SURROGATE_FAST_SIGMOID: {
        float d = SF_FMAF(alpha, fabsf(z), 1.0f);
        return SF_GRAD_DIV(1.0f, d * d);
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

/* v after a step whose h was h (LIF, PLIF, IF: the threshold does not move), as sf_lif_step computes it. */
SF_HD float sf_lif_v_after(const sf_lif_coeffs *k, int soft_reset, float h)
{
    float s = h >= k->theta ? 1.0f : 0.0f;
    return soft_reset ? h - k->theta * s : (s > 0.0f ? k->v_reset : h);
}

/* One ALIF forward step: θ = θ0 + β·b with b the adaptation of this step (the state b holds it on entry and the next
 * step's, ρ·b + (1 - ρ)·s, on exit); returns s_t, updates v, writes h_t and θ_t. */
SF_HD float sf_alif_threshold(const sf_lif_coeffs *k, float b) { return k->theta + k->beta * b; }
SF_HD float sf_alif_adapt(const sf_lif_coeffs *k, float b, float s) { return k->rho * b + (1.0f - k->rho) * s; }

SF_HD float sf_alif_step(const sf_lif_coeffs *k, int soft_reset, float x, float *v, float *b, float *h_out,
                         float *theta_out)
{
    float theta = sf_alif_threshold(k, *b);
    float h = k->a * *v + k->c * x;
    float s = h >= theta ? 1.0f : 0.0f;
    *v = soft_reset ? h - theta * s : (s > 0.0f ? k->v_reset : h);
    *b = sf_alif_adapt(k, *b, s);
    *h_out = h;
    *theta_out = theta;
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
        dvdh = p->detach_reset ? 1.0f : SF_FMAF(-k->theta, sg, 1.0f);
    else
        dvdh = p->detach_reset ? 1.0f - s : SF_FMAF(k->v_reset - h, sg, 1.0f - s);
    float dh = SF_FMAF(ds, sg, *dv * dvdh);
    if (p->grad_cut && p->use_grad_threshold && h < p->grad_threshold) dh = 0.0f;
    *dv = k->a * dh;
    return dh;
}

/* One ALIF backward step, in reverse time: dv carries ∂L/∂v_t and db ∂L/∂b_{t+1} from step t+1; returns dh_t and
 * sets dv to ∂L/∂v_{t-1} = a·dh_t, db to ∂L/∂b_t = β·∂L/∂θ_t + ρ·db. With σ' the surrogate at z = h - θ:
 *   ∂L/∂s = ds + dv·∂v/∂s·[!detach] + db·(1 - ρ)      ∂v/∂s: hard v_reset - h, soft -θ
 *   dh = ∂L/∂s·σ' + dv·∂v/∂h                          ∂v/∂h: hard 1 - s, soft 1
 *   ∂L/∂θ = -∂L/∂s·σ' + dv·∂v/∂θ                      ∂v/∂θ: hard 0, soft -s
 * detach_reset drops the reset's path through s only: b still sees the spike, and the soft reset's θ its gradient.
 * sf_alif_back is the step given σ', s, ∂v/∂s and whether θ_grad cuts dh. */
SF_HD float sf_alif_back(const sf_lif_params *p, const sf_lif_coeffs *k, float sg, float s, float dvds, int cut,
                         float ds, float *dv, float *db)
{
    float dvdh = p->soft_reset ? 1.0f : 1.0f - s;
    float dvdtheta = p->soft_reset ? -s : 0.0f;
    float dsum = SF_FMAF(*db, 1.0f - k->rho, SF_FMAF(*dv, dvds, ds));
    float dh = SF_FMAF(dsum, sg, *dv * dvdh);
    float dtheta = SF_FMAF(-dsum, sg, *dv * dvdtheta);
    if (cut) dh = 0.0f; /* as the LIF's */
    *db = SF_FMAF(k->beta, dtheta, k->rho * *db);
    *dv = k->a * dh;
    return dh;
}

SF_HD float sf_alif_step_back(const sf_lif_params *p, const sf_lif_coeffs *k, float h, float theta, float ds,
                              float *dv, float *db)
{
    const int below = p->use_grad_threshold && h < p->grad_threshold;
    float sg = below ? 0.0f : sf_surrogate_grad(p->surrogate, p->alpha, h - theta);
    float s = h >= theta ? 1.0f : 0.0f;
    float dvds = p->detach_reset ? 0.0f : (p->soft_reset ? -theta : k->v_reset - h);
    return sf_alif_back(p, k, sg, s, dvds, p->grad_cut && below, ds, dv, db);
}

/* The same step from z = h - θ alone, which is all it reads with detach_reset and no θ_grad: s = [z >= 0] (h - θ
 * rounds to 0 only where h = θ, and keeps its sign otherwise), ∂v/∂s = 0. */
SF_HD float sf_alif_step_back_z(const sf_lif_params *p, const sf_lif_coeffs *k, float z, float ds, float *dv,
                                float *db)
{
    return sf_alif_back(p, k, sf_surrogate_grad(p->surrogate, p->alpha, z), z >= 0.0f ? 1.0f : 0.0f, 0.0f, 0, ds,
                        dv, db);
}

#endif
