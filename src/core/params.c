/* params.c — default parameter structs, their validation and name parsing. */
#include "error.h"
#include "neuron_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const surrogate_names[] = {"sigmoid", "atan", "fast_sigmoid", "rect"};

float sf_surrogate_default_alpha(sf_surrogate s)
{
    switch (s) {
    case SF_SURROGATE_SIGMOID: return 4.0f;
    case SF_SURROGATE_ATAN: return 2.0f;
    case SF_SURROGATE_FAST_SIGMOID: return 10.0f;
    case SF_SURROGATE_RECT: return 1.0f;
    }
    return 1.0f;
}

void sf_lif_default_params(sf_lif_params *p)
{
    memset(p, 0, sizeof *p);
    p->tau = 2.0f;
    p->decay = 0.0f;
    p->decay_input = 1;
    p->v_threshold = 1.0f;
    p->v_reset = 0.0f;
    p->surrogate = SF_SURROGATE_SIGMOID;
    p->alpha = sf_surrogate_default_alpha(p->surrogate);
    p->model = SF_NEURON_LIF;
    p->rho = 0.95f;
    p->beta = 1.8f;
}

static const char *const model_names[] = {"lif", "plif", "if", "alif"};

const char *sf_neuron_model_name(sf_neuron_model m) { return (unsigned)m <= SF_NEURON_ALIF ? model_names[m] : "?"; }

/* The leak of the LIF and ALIF: tau or decay. */
static sf_status check_leak(const sf_lif_params *p)
{
    if (p->decay > 0.0f) {
        if (!(p->decay <= 1.0f)) return sf_fail(SF_ERR_INVALID, "LIF decay = %g: must be in (0, 1]", p->decay);
        if (p->decay_input && p->decay >= 1.0f)
            return sf_fail(SF_ERR_INVALID, "LIF decay = 1 with decay_input scales the input by 0");
    } else if (p->decay < 0.0f || isnan(p->decay)) {
        return sf_fail(SF_ERR_INVALID, "LIF decay = %g: must be in (0, 1], or 0 to use tau", p->decay);
    } else if (!(p->tau >= 1.0f) || isinf(p->tau)) {
        return sf_fail(SF_ERR_INVALID, "LIF tau = %g: must be a finite number >= 1", p->tau);
    }
    return SF_OK;
}

/* What each model adds: PLIF's starting tau, ALIF's adaptation. */
static sf_status check_model(const sf_lif_params *p)
{
    if (p->per_channel && p->model != SF_NEURON_PLIF)
        return sf_fail(SF_ERR_INVALID, "per_channel applies to the PLIF only (this neuron is %s)",
                       sf_neuron_model_name(p->model));
    switch (p->model) {
    case SF_NEURON_LIF: return check_leak(p);
    case SF_NEURON_IF: return SF_OK;
    case SF_NEURON_PLIF:
        if (p->decay != 0.0f)
            return sf_fail(SF_ERR_INVALID, "PLIF decay = %g: the PLIF learns its decay, starting from tau (set decay "
                                           "to 0)",
                           p->decay);
        if (!(p->tau > 1.0f) || isinf(p->tau))
            return sf_fail(SF_ERR_INVALID, "PLIF tau = %g: must be a finite number > 1 (w starts at -ln(tau - 1))",
                           p->tau);
        return SF_OK;
    case SF_NEURON_ALIF:
        SF_TRY(check_leak(p));
        if (!(p->tau_adapt >= 0.0f) || isinf(p->tau_adapt))
            return sf_fail(SF_ERR_INVALID, "ALIF tau_adapt = %g: must be a finite number > 0, or 0 to use rho",
                           p->tau_adapt);
        if (p->tau_adapt == 0.0f && !(p->rho >= 0.0f && p->rho < 1.0f))
            return sf_fail(SF_ERR_INVALID, "ALIF rho = %g: must be in [0, 1)", p->rho);
        if (!(p->beta >= 0.0f) || isinf(p->beta))
            return sf_fail(SF_ERR_INVALID, "ALIF beta = %g: must be a finite number >= 0", p->beta);
        return SF_OK;
    }
    return sf_fail(SF_ERR_INVALID, "neuron model %d is not one of lif, plif, if, alif", (int)p->model);
}

sf_status sf_lif_params_check(const sf_lif_params *p)
{
    if (!p) return sf_fail(SF_ERR_INVALID, "LIF parameters are NULL");
    SF_TRY(check_model(p));
    if (!isfinite(p->v_threshold)) return sf_fail(SF_ERR_INVALID, "LIF v_threshold must be finite");
    if (!isfinite(p->v_reset)) return sf_fail(SF_ERR_INVALID, "LIF v_reset must be finite");
    if ((unsigned)p->surrogate > SF_SURROGATE_RECT)
        return sf_fail(SF_ERR_INVALID, "LIF surrogate %d is not one of sigmoid, atan, fast_sigmoid, rect",
                       (int)p->surrogate);
    if (!(p->alpha > 0.0f) || isinf(p->alpha))
        return sf_fail(SF_ERR_INVALID, "LIF surrogate alpha = %g: must be a finite number > 0", p->alpha);
    if (p->use_grad_threshold && !isfinite(p->grad_threshold))
        return sf_fail(SF_ERR_INVALID, "LIF grad_threshold must be finite");
    if ((unsigned)p->grad_cut > 1) return sf_fail(SF_ERR_INVALID, "LIF grad_cut = %d: must be 0 or 1", p->grad_cut);
    if (p->grad_cut && !p->use_grad_threshold)
        return sf_fail(SF_ERR_INVALID, "LIF grad_cut needs a grad_threshold (it zeroes dL/dh below it)");
    return SF_OK;
}

int64_t sf_lif_ckpt_floats(const sf_lif_params *p, int64_t T, int64_t N)
{
    const int64_t slots = T > 0 ? (T - 1) / SF_LIF_CKPT_STEPS : 0; /* the starts T − 32j > 0 */
    return slots * N * (p->model == SF_NEURON_ALIF ? 2 : 1);
}

sf_status sf_surrogate_parse(const char *name, sf_surrogate *out)
{
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, surrogate_names[i]) == 0) {
            *out = (sf_surrogate)i;
            return SF_OK;
        }
    return sf_fail(SF_ERR_INVALID, "unknown surrogate '%s' (expected sigmoid, atan, fast_sigmoid or rect)",
                   name ? name : "(null)");
}

const char *sf_surrogate_name(sf_surrogate s)
{
    return (unsigned)s <= SF_SURROGATE_RECT ? surrogate_names[s] : "?";
}

void sf_optim_default_params(sf_optim_params *p)
{
    memset(p, 0, sizeof *p);
    p->kind = SF_OPT_SGD;
    p->lr = 0.01f;
    p->beta1 = 0.9f;
    p->beta2 = 0.999f;
    p->eps = 1e-8f;
}

void sf_schedule_default_params(sf_schedule_params *p)
{
    memset(p, 0, sizeof *p);
    p->kind = SF_SCHEDULE_CONSTANT;
    p->step_size = 30;
    p->gamma = 0.1f;
}

float sf_schedule_lr(const sf_schedule_params *p, float base_lr, int64_t epoch, int64_t total_epochs)
{
    switch (p->kind) {
    case SF_SCHEDULE_CONSTANT: return base_lr;
    case SF_SCHEDULE_STEP:
        return base_lr * powf(p->gamma, (float)(p->step_size > 0 ? epoch / p->step_size : 0));
    case SF_SCHEDULE_COSINE: {
        if (total_epochs <= 0) return base_lr;
        double frac = (double)epoch / (double)total_epochs;
        return (float)(p->min_lr + (base_lr - p->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * frac)));
    }
    }
    return base_lr;
}

sf_status sf_device_parse(const char *text, sf_device *out)
{
    if (!text) return sf_fail(SF_ERR_INVALID, "device name is NULL");
    if (strcmp(text, "cpu") == 0) {
        out->kind = SF_DEVICE_CPU;
        out->index = 0;
        return SF_OK;
    }
    if (strncmp(text, "cuda", 4) == 0) {
        const char *rest = text + 4;
        int idx = 0;
        if (*rest == ':') {
            char *end;
            long v = strtol(rest + 1, &end, 10);
            if (end == rest + 1 || *end || v < 0 || v > 1024)
                return sf_fail(SF_ERR_INVALID, "bad device '%s' (expected cpu, cuda or cuda:N)", text);
            idx = (int)v;
        } else if (*rest) {
            return sf_fail(SF_ERR_INVALID, "bad device '%s' (expected cpu, cuda or cuda:N)", text);
        }
        out->kind = SF_DEVICE_CUDA;
        out->index = idx;
        return SF_OK;
    }
    return sf_fail(SF_ERR_INVALID, "bad device '%s' (expected cpu, cuda or cuda:N)", text);
}

/* The position of `name` in names[0..n), -1 when it is not there. */
static int name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

static const char *const precision_names[] = {"fp32", "tf32", "bf16", "fp16"}; /* sf_precision order */
#define SF_PRECISION_COUNT ((int)(sizeof precision_names / sizeof precision_names[0]))

const char *sf_precision_name(sf_precision p) { return (unsigned)p < SF_PRECISION_COUNT ? precision_names[p] : "unknown"; }

sf_status sf_precision_parse(const char *name, sf_precision *out)
{
    int i = name_index(precision_names, SF_PRECISION_COUNT, name);
    if (i >= 0) {
        *out = (sf_precision)i;
        return SF_OK;
    }
    return sf_fail(SF_ERR_INVALID, "unknown precision '%s' (expected fp32, tf32, bf16 or fp16)", name ? name : "(null)");
}

static const char *const conv_algo_names[] = {"auto", "cudnn", "gemm", "nhwc", "nchw", "split"};
#define SF_CONV_ALGO_COUNT ((int)(sizeof conv_algo_names / sizeof conv_algo_names[0]))

const char *sf_conv_algo_name(sf_conv_algo a) { return (unsigned)a < SF_CONV_ALGO_COUNT ? conv_algo_names[a] : "?"; }

sf_status sf_conv_algo_parse(const char *name, sf_conv_algo *out)
{
    int i = name_index(conv_algo_names, SF_CONV_ALGO_COUNT, name);
    if (i >= 0) {
        *out = (sf_conv_algo)i;
        return SF_OK;
    }
    return sf_fail(SF_ERR_INVALID, "unknown conv algorithm '%s' (expected auto, nchw, cudnn, gemm, nhwc or split)",
                   name ? name : "(null)");
}

sf_status sf_plif_state_check(const char *op, const sf_lif_params *p, int64_t N, const sf_lif_state *st, int32_t bn_c,
                              int64_t bn_hw)
{
    if (p->model != SF_NEURON_PLIF) return SF_OK;
    if (!st || !st->w) return sf_fail(SF_ERR_INVALID, "%s: a PLIF needs its w (sf_lif_state.w)", op);
    if (!p->per_channel) {
        if (st->w_channels != 1)
            return sf_fail(SF_ERR_INVALID, "%s: PLIF with one w per layer: w_channels = %d (expected 1)", op,
                           (int)st->w_channels);
        return SF_OK;
    }
    if (st->w_channels < 1 || st->w_hw < 1 || N % ((int64_t)st->w_channels * st->w_hw) != 0)
        return sf_fail(SF_ERR_INVALID, "%s: PLIF w of %d channels of %lld neurons does not divide the %lld neurons of "
                                       "a step",
                       op, (int)st->w_channels, (long long)st->w_hw, (long long)N);
    if (bn_c && (st->w_channels != bn_c || st->w_hw != bn_hw))
        return sf_fail(SF_ERR_INVALID, "%s: PLIF w of %d channels × %lld differs from the batch norm's %d × %lld", op,
                       (int)st->w_channels, (long long)st->w_hw, (int)bn_c, (long long)bn_hw);
    return SF_OK;
}
