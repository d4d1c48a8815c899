/* nir_lif.c — spikefuse's discrete LIF and NIR's continuous LIF/IF, one mapping for both directions: the Euler step
 * v_t = a·v_{t-1} + (1 - a)·v_leak + k·I_t, a = 1 - dt/tau, k = r·dt/tau, matched to h_t = a·v_{t-1} + c·x_t, a v_leak
 * or another k absorbed by shifting or scaling threshold and reset (docs/nir.md derives it). */
#include "config/config_nir.h"

#include "core/error.h"

#include <math.h>

sf_status sf_lif_to_nir(const sf_lif_params *p, double dt, sf_nir_neuron *out)
{
    if (p->model == SF_NEURON_PLIF || p->model == SF_NEURON_ALIF)
        return sf_fail(SF_ERR_UNSUPPORTED, "the %s neuron has no NIR export here (NIR's LIF has a fixed tau and a "
                                           "fixed threshold)",
                       sf_neuron_model_name(p->model));
    if (p->soft_reset)
        return sf_fail(SF_ERR_UNSUPPORTED, "a soft reset (subtracting the threshold) has no NIR form: NIR's LIF "
                                           "resets to v_reset");
    *out = (sf_nir_neuron){.v_threshold = p->v_threshold, .v_reset = p->v_reset};
    if (p->model == SF_NEURON_IF || p->decay >= 1.0f) { /* a = 1, c = 1: an integrate-and-fire neuron */
        out->is_if = 1;
        out->r = 1.0 / dt;
        return SF_OK;
    }
    out->tau = p->decay > 0.0f ? dt / (1.0 - (double)p->decay) : (double)p->tau * dt;
    out->r = p->decay_input ? 1.0 : out->tau / dt;
    return SF_OK;
}

/* a and b equal to a relative 1e-6 (NIR files hold parameters computed in float32 by some exporters). */
static int close_to(double a, double b) { return fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b)); }

/* The leak a = 1 - dt/tau as spikefuse's tau when tau/dt is a float32 value (what spikefuse and SpikingJelly
 * export), else as decay, so that the kernel's a is the one the file meant. */
static void set_leak(double tau_steps, sf_lif_params *p)
{
    float t = (float)tau_steps;
    if (fabs(tau_steps - (double)t) <= 1e-12 * tau_steps && t >= 1.0f) {
        p->tau = t;
        p->decay = 0.0f;
    } else {
        p->decay = (float)(1.0 - 1.0 / tau_steps);
        p->tau = 2.0f;
        if (p->decay <= 0.0f) { /* a rounds to 0: tau = 1 says the same */
            p->decay = 0.0f;
            p->tau = 1.0f;
        }
    }
}

SF_API sf_status sf_lif_params_from_nir(int32_t is_if, double tau, double r, double v_leak, double v_threshold,
                                        double v_reset, double dt, sf_lif_params *p)
{
    if (!p) return sf_fail(SF_ERR_INVALID, "sf_lif_params_from_nir: NULL parameters");
    if (!(dt > 0.0) || !isfinite(dt)) return sf_fail(SF_ERR_INVALID, "dt = %g: must be > 0", dt);
    const double values[] = {tau, r, v_leak, v_threshold, v_reset};
    for (int i = is_if ? 1 : 0; i < 5; i++)
        if (!isfinite(values[i]) || fabs(values[i]) > 3e38)
            return sf_fail(SF_ERR_UNSUPPORTED, "a neuron parameter is not a finite float");
    double k, theta, reset;
    p->soft_reset = 0;
    if (is_if) {
        k = r * dt;
        theta = v_threshold;
        reset = v_reset;
        p->decay = 1.0f;
        p->decay_input = 0;
    } else {
        double tau_steps = tau / dt;
        if (!(tau_steps >= 1.0) || !(tau_steps <= 1e9))
            return sf_fail(SF_ERR_UNSUPPORTED, "tau = %g is shorter than the time step dt = %g (the Euler step would "
                                               "overshoot) or absurdly long; import with another --dt", tau, dt);
        double a = 1.0 - 1.0 / tau_steps;
        k = r / tau_steps;
        theta = v_threshold - v_leak;
        reset = v_reset - v_leak;
        set_leak(tau_steps, p);
        /* tau = 1 exactly cannot take decay_input (c would be 0): such a neuron goes through the scaling below */
        p->decay_input = a > 0.0 && close_to(k, 1.0 - a) && !close_to(k, 1.0) && !(p->decay == 0.0f && p->tau <= 1.0f);
    }
    if (!(k > 0.0)) return sf_fail(SF_ERR_UNSUPPORTED, "the input scale r·dt/tau = %g is not positive", k);
    if (!p->decay_input && !close_to(k, 1.0)) { /* measure v in units of k: same spikes */
        theta /= k;
        reset /= k;
    }
    if (!(fabs(theta) <= 3e38 && fabs(reset) <= 3e38))
        return sf_fail(SF_ERR_UNSUPPORTED, "the threshold or reset is out of float range after scaling");
    p->v_threshold = (float)theta;
    p->v_reset = (float)reset;
    return sf_lif_params_check(p);
}
