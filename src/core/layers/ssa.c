/* ssa.c — Spikformer's spiking self-attention (Zhou et al. 2023) without softmax: from the q|k|v spikes of one
 * linear(3D) → BN → LIF, (3D, N, 1), per head Y = scale·Q·(KᵀV), (D, N, 1); the attention LIF (threshold 0.5) and
 * the projection are the layers after it. The backward rebuilds KᵀV from q, k, v, which the memory modes keep as
 * they keep any spikes (bytes, or bits in lean mode), never the product; in lean mode the LIF after it reruns this
 * forward instead of keeping Y (rerun). */
#include "core/error.h"
#include "core/layer.h"

#include <math.h>

static void ssa_defaults(sf_layer_desc *d)
{
    d->heads = 8;
    d->attn_scale = 0.125f;
}

/* The shape of the output: D channels of each of q, k, v. */
static sf_token_shape out_shape(const sf_net *net, const sf_net_layer *l) { return sf_net_token_shape(net, l->out); }

static sf_status ssa_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    if (!l->tokens)
        return sf_fail(SF_ERR_INVALID, "layer %d (ssa): its input, tensor %d, is not tokens (add a tokens layer "
                       "first)", index, l->in);
    if (in[0] % 3 != 0)
        return sf_fail(SF_ERR_INVALID, "layer %d (ssa): reads q|k|v, 3·D channels; its input has %d", index, in[0]);
    const int32_t d = in[0] / 3;
    if (l->d.heads < 1 || d % l->d.heads != 0)
        return sf_fail(SF_ERR_INVALID, "layer %d (ssa): heads = %d must divide D = %d", index, l->d.heads, d);
    if (!isfinite(l->d.attn_scale))
        return sf_fail(SF_ERR_INVALID, "layer %d (ssa): scale must be a finite number", index);
    out[0] = d;
    return SF_OK;
}

static bool ssa_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k) { return k == 0; }

static size_t ssa_workspace(sf_net *net, const sf_net_layer *l, bool backward)
{
    const sf_token_shape sh = out_shape(net, l);
    return net->be->ssa_workspace(net->be, &sh, l->d.heads, backward);
}

static sf_status ssa_rerun(sf_net *net, const sf_net_layer *l, const float *x, float *y, void *scratch)
{
    const sf_token_shape sh = out_shape(net, l);
    return net->be->ssa_forward(net->be, &sh, l->d.heads, l->d.attn_scale, 3 * sh.d, x, sf_net_act_at(net, x, sh.d),
                                sf_net_act_at(net, x, 2 * sh.d), y, scratch);
}

static size_t ssa_rerun_workspace(sf_net *net, const sf_net_layer *l) { return ssa_workspace(net, l, false); }

static void ssa_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    sf_layer_plan_workspaces(net, pl, l, index, ssa_workspace(net, l, false), ssa_workspace(net, l, true));
}

static sf_status ssa_forward(sf_net *net, sf_net_layer *l, bool training)
{
    return ssa_rerun(net, l, sf_net_act(net, l->in), sf_net_act(net, l->out), sf_net_slot_ptr(net, l->sws_f));
}

static sf_status ssa_backward(sf_net *net, sf_net_layer *l)
{
    const sf_token_shape sh = out_shape(net, l);
    const int64_t ld = 3 * sh.d;
    const float *x;
    bool acc = false;
    SF_TRY(sf_layer_input_value(net, l, 0, &x));
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    SF_TRY(net->be->ssa_backward(net->be, &sh, l->d.heads, l->d.attn_scale, ld, x, sf_net_act_at(net, x, sh.d),
                                 sf_net_act_at(net, x, 2 * sh.d), sf_net_grad(net, l->out), dx,
                                 sf_net_act_at(net, dx, sh.d), sf_net_act_at(net, dx, 2 * sh.d),
                                 sf_net_slot_ptr(net, l->sws_b)));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_ssa = {
    .name = "ssa",
    .inputs = 1,
    .flags = SF_KIND_TOKENS,
    .defaults = ssa_defaults,
    .shape = ssa_shape,
    .needs_input = ssa_needs_input,
    .rerun = ssa_rerun,
    .rerun_workspace = ssa_rerun_workspace,
    .plan = ssa_plan,
    .forward = ssa_forward,
    .backward = ssa_backward,
};
