/* rlif.c — the recurrent LIF layer: a LIF or IF neuron whose input current at step t is x_t + V·s_{t-1} with its own
 * weight V [n, n] (no bias), so it steps through time. It keeps h in every memory mode (a recompute would be a second
 * sequential pass over T, a product per step), makes its spikes' compact form in its kernels, and its recurrence may
 * run event-driven: the forward from the spike lists, dV from the bits, dy's product from its nonzero pattern. */
#include "core/error.h"
#include "core/layer.h"
#include "core/lif_math.h"

static sf_status rlif_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    const sf_layer_desc *d = &l->d;
    sf_status s = sf_lif_params_check(&d->lif);
    if (s != SF_OK) return sf_fail_context(s, "layer %d (rlif): ", index);
    if (in[1] != 1 || in[2] != 1)
        return sf_fail(SF_ERR_INVALID,
                       "layer %d (rlif): input is %dx%dx%d; a recurrent layer needs a vector "
                       "(add a flatten layer, and a linear layer for its input current)",
                       index, in[0], in[1], in[2]);
    if (d->lif.model != SF_NEURON_LIF && d->lif.model != SF_NEURON_IF)
        return sf_fail(SF_ERR_INVALID, "layer %d (rlif): the recurrent layer runs the lif and if neurons, not the %s",
                       index, sf_neuron_model_name(d->lif.model));
    return SF_OK;
}

static void rlif_sizes(const sf_net_layer *l, const int32_t in[3], sf_kind_sizes *n)
{
    n->weight = (int64_t)in[0] * in[0]; /* V [n, n], no bias */
}

static void rlif_init(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, float *buffers)
{
    sf_layer_init_uniform(net, l, index, params, l->out_c);
}

static void rlif_weight_shape(const sf_net_layer *l, sf_tensor_info *info)
{
    info->ndim = 2;
    info->shape[0] = l->out_c;
    info->shape[1] = l->w_numel / info->shape[0];
}

/* h is kept, so only a model whose backward reads x reads it. */
static bool rlif_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k)
{
    return k == 0 && sf_neuron_backward_reads_x(&l->d.lif);
}

static int64_t neurons(const sf_net *net, const sf_net_layer *l) { return net->tensors[l->out].per_sample; }

static void rlif_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    l->h = (sf_slot){0};
    if (sf_layer_backward_runs(net, index) || net->keep_all)
        sf_plan_saved(pl, &l->h, sf_net_tensor_bytes(net, l->out, sizeof(float)));
    const size_t ws = net->be->rlif_workspace(net->be, net->T, net->B, neurons(net, l));
    sf_layer_plan_workspaces(net, pl, l, index, ws, ws);
}

static sf_status rlif_split_check(const sf_net *net, const sf_net_layer *l, int32_t index)
{
    if (net->hooks.nseg == 1) return SF_OK;
    return sf_fail(SF_ERR_UNSUPPORTED,
                   "layer %d (rlif): a recurrent layer cannot be split over time_parallel "
                   "segments (each step needs the spikes of the step before)",
                   index);
}

static sf_status rlif_forward(sf_net *net, sf_net_layer *l, bool training)
{
    const sf_net_tensor *o = &net->tensors[l->out];
    sf_lif_out out = {.s = sf_net_act(net, l->out), .spike_count = net->spike_counts + l->lif_index};
    if (training || net->keep_all) out.h = sf_net_slot_ptr(net, l->h);
    SF_TRY(sf_net_sparse_decide(net, l)); /* before its lists are asked for */
    if (o->compact) {
        out.c = sf_net_compact_of(net, l->out);
        out.row = o->per_sample;
        if (!sf_net_compact_values(net, l->out)) out.s = NULL;
    }
    return net->be->rlif_forward(net->be, &l->d.lif, net->T, net->B, o->per_sample, sf_net_act(net, l->in),
                                 sf_net_weight(net, l->w_off), l->fwd_sparse, &out, sf_net_slot_ptr(net, l->sws_f));
}

static sf_status rlif_backward(sf_net *net, sf_net_layer *l)
{
    bool acc = false;
    const float *h = sf_net_slot_ptr(net, l->h);
    /* dx_tmp also when the input needs none: the recurrence runs on dy */
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    const sf_net_tensor *in = &net->tensors[sf_net_root(net, l->in)], *out = &net->tensors[sf_net_root(net, l->out)];
    sf_spikes mask = {sf_net_slot_ptr(net, in->gbits), NULL, sf_net_slot_ptr(net, in->gcnt)};
    /* its spikes' bits where the plan kept them for a reader (pipelined segments make them again) */
    const uint32_t *s_bits =
        out->keep == SF_KEEP_BITS && !sf_net_pipelined(net) ? sf_net_slot_ptr(net, out->cbits) : NULL;
    SF_TRY(net->be->rlif_backward(net->be, &l->d.lif, net->T, net->B, neurons(net, l), NULL, h, s_bits,
                                  sf_net_weight(net, l->w_off), sf_net_grad(net, l->out), l->fwd_sparse, l->bwd_flags,
                                  dx, sf_net_param_grad(net, l->w_off), in->gmask ? &mask : NULL,
                                  sf_net_grad_count(net, l->in), sf_net_slot_ptr(net, l->sws_b)));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

/* ---- event-driven: it cannot know its spikes before it runs, so it follows its own previous step */

static bool rlif_event_driven(const sf_net *net, const sf_net_layer *l) { return true; }

static bool rlif_masks_input_grad(const sf_net_layer *l) { return l->d.lif.use_grad_threshold; }

static void rlif_sparse_decide(sf_net *net, sf_net_layer *l)
{
    l->fwd_sparse = sf_net_sparse_below(l->sparse, l->density, l->xfwd);
    l->bwd_flags =
        (sf_net_sparse_below(l->sparse, l->density, l->xbwd) ? SF_RLIF_SPARSE_DV : 0) |
        (l->d.lif.use_grad_threshold && sf_net_sparse_below(l->sparse, l->grad_density, l->xfwd) ? SF_RLIF_SPARSE_DY
                                                                                                 : 0);
}

static void rlif_sparse_measured(sf_net *net, sf_net_layer *l, bool with_backward)
{
    l->density = sf_net_ones_density(net, l->out);
    if (with_backward) l->grad_density = sf_net_grad_density(net, l->in);
}

static sf_status rlif_sparse_tune(sf_net *net, sf_net_layer *l)
{
    return sf_net_tune_rlif(net, &l->d.lif, (int32_t)neurons(net, l), &l->xfwd, &l->xbwd);
}

const sf_layer_ops sf_kind_rlif = {
    .name = "rlif",
    .inputs = 1,
    .flags = SF_KIND_SPIKES | SF_KIND_FIRES | SF_KIND_ALWAYS_DX | SF_KIND_EVENT_OUTPUT,
    .shape = rlif_shape,
    .sizes = rlif_sizes,
    .init = rlif_init,
    .weight_shape = rlif_weight_shape,
    .needs_input = rlif_needs_input,
    .plan = rlif_plan,
    .split_check = rlif_split_check,
    .forward = rlif_forward,
    .backward = rlif_backward,
    .event_driven = rlif_event_driven,
    .masks_input_grad = rlif_masks_input_grad,
    .sparse_decide = rlif_sparse_decide,
    .sparse_measured = rlif_sparse_measured,
    .sparse_tune = rlif_sparse_tune,
};
