/* lif_math_typed.h — the neuron equations over an element type, included by lif_math.h (float) and lif_math_f64.h
 * (double), never directly. The includer defines SF_LM_T (the type), SF_LM(name) (the name in that type: name
 * itself for float, name_f64 for double), SF_LM_K(c) (a literal c in that type), SF_LM_EXP (exp for the
 * coefficients), SF_LM_SURROGATE_EXP (exp for the sigmoid surrogate), SF_LM_ABS, and SF_LM_FMA / SF_LM_DIV (the
 * gradients' multiply-add and division); all are undefined at the end. In float these are exactly the expressions
 * the kernels always computed (float literals, the backend's SF_EXPF, SF_FMAF, SF_GRAD_DIV). The sf_lif_params
 * fields are floats: in double the equations take their values exactly and compute from there in double. */
#ifndef SF_LM_T
#error "include core/lif_math.h or core/lif_math_f64.h, not lif_math_typed.h"
#endif

#define T_ SF_LM_T
#define K_ SF_LM_K

/* Coefficients of h_t = a·v_{t-1} + c·x_t, the state a neuron starts from, and the ALIF's adaptation. A PLIF's a
 * and c come from its w (sf_plif_coeffs); here they are those of its starting tau. */
typedef struct SF_LM(sf_lif_coeffs) {
    T_ a, c, v0, theta, v_reset;
    T_ rho, beta; /* ALIF */
} SF_LM(sf_lif_coeffs);

SF_HD SF_LM(sf_lif_coeffs) SF_LM(sf_lif_coeffs_of)(const sf_lif_params *p)
{
    SF_LM(sf_lif_coeffs) k;
    k.a = p->decay > 0.0f ? p->decay : K_(1.0) - K_(1.0) / p->tau;
    k.c = p->decay_input ? K_(1.0) - k.a : K_(1.0);
    if (p->model == SF_NEURON_IF) k.a = k.c = K_(1.0);
    k.theta = p->v_threshold;
    k.v_reset = p->v_reset;
    k.v0 = p->soft_reset ? K_(0.0) : p->v_reset;
    k.rho = p->tau_adapt > 0.0f ? SF_LM_EXP(-K_(1.0) / p->tau_adapt) : p->rho;
    k.beta = p->beta;
    return k;
}

/* k = sigmoid(w), the PLIF's 1/tau, with a = 1 - k and c = k (decay_input) or 1. In double, rounded once: the same
 * float on the host and the device (their expf may differ by an ulp, which would flip a spike now and then); it is
 * computed once per layer, channel or thread, not per step. */
SF_HD T_ SF_LM(sf_plif_k)(T_ w) { return (T_)(1.0 / (1.0 + exp(-(double)w))); }

SF_HD void SF_LM(sf_plif_coeffs)(T_ w, int decay_input, T_ *a, T_ *c)
{
    T_ k = SF_LM(sf_plif_k)(w);
    *a = K_(1.0) - k;
    *c = decay_input ? k : K_(1.0);
}

/* ∂s/∂h at membrane potential h (before θ_grad masking). */
SF_HD T_ SF_LM(sf_surrogate_grad)(sf_surrogate kind, float alpha, T_ z)
{
    switch (kind) {
    case SF_SURROGATE_SIGMOID: {
        T_ sg = SF_LM_DIV(K_(1.0), K_(1.0) + SF_LM_SURROGATE_EXP(-alpha * z));
        return alpha * sg * (K_(1.0) - sg);
    }
    case SF_SURROGATE_ATAN: {
        T_ u = K_(1.5707963267948966) * alpha * z;
        return SF_LM_DIV(K_(0.5) * alpha, SF_LM_FMA(u, u, K_(1.0)));
    }
    case SF_SURROGATE_FAST_SIGMOID: {
        T_ d = SF_LM_FMA(alpha, SF_LM_ABS(z), K_(1.0));
        return SF_LM_DIV(K_(1.0), d * d);
    }
    case SF_SURROGATE_RECT: return SF_LM_ABS(z) < K_(0.5) / alpha ? alpha : K_(0.0);
    }
    return K_(0.0);
}

/* The surrogate with θ_grad applied: zero where h < θ_grad. */
SF_HD T_ SF_LM(sf_lif_sg)(const sf_lif_params *p, T_ h)
{
    if (p->use_grad_threshold && h < p->grad_threshold) return K_(0.0);
    return SF_LM(sf_surrogate_grad)(p->surrogate, p->alpha, h - p->v_threshold);
}

/* One forward step: returns s_t, updates v in place (v holds v_{t-1} on entry, v_t on exit), writes h_t. */
SF_HD T_ SF_LM(sf_lif_step)(const SF_LM(sf_lif_coeffs) *k, int soft_reset, T_ x, T_ *v, T_ *h_out)
{
    T_ h = k->a * *v + k->c * x;
    T_ s = h >= k->theta ? K_(1.0) : K_(0.0);
    *v = soft_reset ? h - k->theta * s : (s > K_(0.0) ? k->v_reset : h);
    *h_out = h;
    return s;
}

/* v after a step whose h was h (LIF, PLIF, IF: the threshold does not move), as sf_lif_step computes it. */
SF_HD T_ SF_LM(sf_lif_v_after)(const SF_LM(sf_lif_coeffs) *k, int soft_reset, T_ h)
{
    T_ s = h >= k->theta ? K_(1.0) : K_(0.0);
    return soft_reset ? h - k->theta * s : (s > K_(0.0) ? k->v_reset : h);
}

/* One ALIF forward step: θ = θ0 + β·b with b the adaptation of this step (the state b holds it on entry and the next
 * step's, ρ·b + (1 - ρ)·s, on exit); returns s_t, updates v, writes h_t and θ_t. */
SF_HD T_ SF_LM(sf_alif_threshold)(const SF_LM(sf_lif_coeffs) *k, T_ b) { return k->theta + k->beta * b; }
SF_HD T_ SF_LM(sf_alif_adapt)(const SF_LM(sf_lif_coeffs) *k, T_ b, T_ s)
{
    return k->rho * b + (K_(1.0) - k->rho) * s;
}

SF_HD T_ SF_LM(sf_alif_step)(const SF_LM(sf_lif_coeffs) *k, int soft_reset, T_ x, T_ *v, T_ *b, T_ *h_out,
                             T_ *theta_out)
{
    T_ theta = SF_LM(sf_alif_threshold)(k, *b);
    T_ h = k->a * *v + k->c * x;
    T_ s = h >= theta ? K_(1.0) : K_(0.0);
    *v = soft_reset ? h - theta * s : (s > K_(0.0) ? k->v_reset : h);
    *b = SF_LM(sf_alif_adapt)(k, *b, s);
    *h_out = h;
    *theta_out = theta;
    return s;
}

/* One backward step, in reverse time. dv carries ∂L/∂v_t from step t+1 (a·dh_{t+1}); returns dh_t and sets
 * dv to ∂L/∂v_{t-1} = a·dh_t. With z = h - θ, σ' = surrogate:
 *   hard:  v_t = h(1-s) + v_reset·s   →  ∂v/∂h = (1-s) + (v_reset - h)·σ'·[!detach]
 *   soft:  v_t = h - θ·s              →  ∂v/∂h = 1 - θ·σ'·[!detach]
 *   dh_t = ds_t·σ' + dv_t·∂v/∂h, and 0 where h < θ_grad under grad_cut */
SF_HD T_ SF_LM(sf_lif_step_back)(const sf_lif_params *p, const SF_LM(sf_lif_coeffs) *k, T_ h, T_ ds, T_ *dv)
{
    T_ sg = SF_LM(sf_lif_sg)(p, h);
    T_ s = h >= k->theta ? K_(1.0) : K_(0.0);
    T_ dvdh;
    if (p->soft_reset)
        dvdh = p->detach_reset ? K_(1.0) : SF_LM_FMA(-k->theta, sg, K_(1.0));
    else
        dvdh = p->detach_reset ? K_(1.0) - s : SF_LM_FMA(k->v_reset - h, sg, K_(1.0) - s);
    T_ dh = SF_LM_FMA(ds, sg, *dv * dvdh);
    if (p->grad_cut && p->use_grad_threshold && h < p->grad_threshold) dh = K_(0.0);
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
SF_HD T_ SF_LM(sf_alif_back)(const sf_lif_params *p, const SF_LM(sf_lif_coeffs) *k, T_ sg, T_ s, T_ dvds, int cut,
                             T_ ds, T_ *dv, T_ *db)
{
    T_ dvdh = p->soft_reset ? K_(1.0) : K_(1.0) - s;
    T_ dvdtheta = p->soft_reset ? -s : K_(0.0);
    T_ dsum = SF_LM_FMA(*db, K_(1.0) - k->rho, SF_LM_FMA(*dv, dvds, ds));
    T_ dh = SF_LM_FMA(dsum, sg, *dv * dvdh);
    T_ dtheta = SF_LM_FMA(-dsum, sg, *dv * dvdtheta);
    if (cut) dh = K_(0.0); /* as the LIF's */
    *db = SF_LM_FMA(k->beta, dtheta, k->rho * *db);
    *dv = k->a * dh;
    return dh;
}

SF_HD T_ SF_LM(sf_alif_step_back)(const sf_lif_params *p, const SF_LM(sf_lif_coeffs) *k, T_ h, T_ theta, T_ ds,
                                  T_ *dv, T_ *db)
{
    const int below = p->use_grad_threshold && h < p->grad_threshold;
    T_ sg = below ? K_(0.0) : SF_LM(sf_surrogate_grad)(p->surrogate, p->alpha, h - theta);
    T_ s = h >= theta ? K_(1.0) : K_(0.0);
    T_ dvds = p->detach_reset ? K_(0.0) : (p->soft_reset ? -theta : k->v_reset - h);
    return SF_LM(sf_alif_back)(p, k, sg, s, dvds, p->grad_cut && below, ds, dv, db);
}

/* The same step from z = h - θ alone, which is all it reads with detach_reset and no θ_grad: s = [z >= 0] (h - θ
 * rounds to 0 only where h = θ, and keeps its sign otherwise), ∂v/∂s = 0. */
SF_HD T_ SF_LM(sf_alif_step_back_z)(const sf_lif_params *p, const SF_LM(sf_lif_coeffs) *k, T_ z, T_ ds, T_ *dv,
                                    T_ *db)
{
    return SF_LM(sf_alif_back)(p, k, SF_LM(sf_surrogate_grad)(p->surrogate, p->alpha, z),
                               z >= K_(0.0) ? K_(1.0) : K_(0.0), K_(0.0), 0, ds, dv, db);
}

#undef T_
#undef K_
#undef SF_LM_T
#undef SF_LM
#undef SF_LM_K
#undef SF_LM_EXP
#undef SF_LM_SURROGATE_EXP
#undef SF_LM_ABS
#undef SF_LM_FMA
#undef SF_LM_DIV
