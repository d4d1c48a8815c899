/* sdsa.c — the Spike-driven Transformer's spike-driven self-attention (Yao et al. 2023, SDSA): from the q|k|v spikes of
 * one linear(3D) → BN → LIF, (3D, N, 1), the channel mix kv = Σ_N k·v, a LIF of the layer's own (threshold 0.5)
 * making it a 0/1 mask m over D, and Y = q·m, (D, N, 1), spikes (token_sum, the LIF op, token_scale). kv, the mask's h
 * and m ([T, B, D], N times smaller than the tokens) are saved in every mode; q, k, v kept as any spikes. The paper's
 * membrane shortcut is a lif and an add around it. */
#include "core/error.h"
#include "core/layer.h"

static void sdsa_defaults(sf_layer_desc *d) { d->lif.v_threshold = 0.5f; }

static sf_token_shape out_shape(const sf_net *net, const sf_net_layer *l) { return sf_net_token_shape(net, l->out); }

static sf_status sdsa_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    if (!l->tokens)
        return sf_fail(SF_ERR_INVALID, "layer %d (sdsa): its input, tensor %d, is not tokens (add a tokens layer "
                       "first)", index, l->in);
    if (in[0] % 3 != 0)
        return sf_fail(SF_ERR_INVALID, "layer %d (sdsa): reads q|k|v, 3·D channels; its input has %d", index, in[0]);
    const sf_neuron_model m = l->d.lif.model;
    if (m != SF_NEURON_LIF && m != SF_NEURON_IF)
        return sf_fail(SF_ERR_UNSUPPORTED, "layer %d (sdsa): its mask neuron is a lif or if, not a %s", index,
                       sf_neuron_model_name(m));
    sf_status s = sf_lif_params_check(&l->d.lif);
    if (s != SF_OK) return sf_fail_context(s, "layer %d (sdsa): ", index);
    out[0] = in[0] / 3;
    return SF_OK;
}

static bool sdsa_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k) { return k == 0; }

static void sdsa_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    const sf_token_shape sh = out_shape(net, l);
    const size_t n = (size_t)(sh.tb * sh.d), act = n * sf_net_act_size(net);
    sf_plan_saved(pl, &l->kv, act);
    sf_plan_saved(pl, &l->mask_h, n * sizeof(float));
    sf_plan_saved(pl, &l->mask, act);
    l->dmask = l->dkv = (sf_slot){0};
    if (!sf_layer_backward_runs(net, index)) return;
    sf_plan_work(pl, &l->dmask, act, sf_plan_t_bwd(pl, index), sf_plan_t_bwd(pl, index));
    sf_plan_work(pl, &l->dkv, act, sf_plan_t_bwd(pl, index), sf_plan_t_bwd(pl, index));
}

/* The mask neuron steps through time: over several time segments its state would cross them. */
static sf_status sdsa_split_check(const sf_net *net, const sf_net_layer *l, int32_t index)
{
    if (net->hooks.nseg == 1) return SF_OK;
    return sf_fail(SF_ERR_UNSUPPORTED, "layer %d (sdsa) does not run over time segments (time_parallel)", index);
}

static sf_status sdsa_forward(sf_net *net, sf_net_layer *l, bool training)
{
    sf_backend *be = net->be;
    const sf_token_shape sh = out_shape(net, l);
    const int64_t ld = 3 * sh.d;
    const float *x = sf_net_act(net, l->in);
    float *kv = sf_net_slot_ptr(net, l->kv), *m = sf_net_slot_ptr(net, l->mask);
    SF_TRY(be->token_sum(be, &sh, 1.0f, sf_net_act_at(net, x, sh.d), ld, sf_net_act_at(net, x, 2 * sh.d), ld, kv));
    const sf_lif_out o = {.s = m, .h = sf_net_slot_ptr(net, l->mask_h)};
    SF_TRY(be->lif_forward(be, &l->d.lif, net->T, net->B * sh.d, kv, &o, NULL));
    return be->token_scale(be, &sh, 1.0f, m, x, ld, sf_net_act(net, l->out), sh.d);
}

/* dq = m·dy; dm = Σ_N dy·q, through the mask neuron to dkv; dk = dkv·v, dv = dkv·k. */
static sf_status sdsa_backward(sf_net *net, sf_net_layer *l)
{
    sf_backend *be = net->be;
    const sf_token_shape sh = out_shape(net, l);
    const int64_t ld = 3 * sh.d;
    const float *x, *dy = sf_net_grad(net, l->out);
    bool acc = false;
    SF_TRY(sf_layer_input_value(net, l, 0, &x));
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    float *dm = sf_net_slot_ptr(net, l->dmask), *dkv = sf_net_slot_ptr(net, l->dkv);
    SF_TRY(be->token_scale(be, &sh, 1.0f, sf_net_slot_ptr(net, l->mask), dy, sh.d, dx, ld));
    SF_TRY(be->token_sum(be, &sh, 1.0f, dy, sh.d, x, ld, dm));
    SF_TRY(be->lif_backward(be, &l->d.lif, net->T, net->B * sh.d, sf_net_slot_ptr(net, l->kv),
                            sf_net_slot_ptr(net, l->mask_h), dm, dkv, NULL));
    SF_TRY(be->token_scale(be, &sh, 1.0f, dkv, sf_net_act_at(net, x, 2 * sh.d), ld, sf_net_act_at(net, dx, sh.d), ld));
    SF_TRY(be->token_scale(be, &sh, 1.0f, dkv, sf_net_act_at(net, x, sh.d), ld, sf_net_act_at(net, dx, 2 * sh.d), ld));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_sdsa = {
    .name = "sdsa",
    .inputs = 1,
    .flags = SF_KIND_TOKENS | SF_KIND_SPIKES,
    .defaults = sdsa_defaults,
    .shape = sdsa_shape,
    .needs_input = sdsa_needs_input,
    .plan = sdsa_plan,
    .split_check = sdsa_split_check,
    .forward = sdsa_forward,
    .backward = sdsa_backward,
};
