/* lif.c — the neuron layer: LIF, PLIF, IF or ALIF (sf_lif_params.model) over all T steps in one call of the
 * backend's time-fused kernels. It may run the batch norm before it in the same kernels (SF_KIND_RUNS_BN; Liang et
 * al.), keeps h for its backward in full mode or recomputes it from its input, and in recompute mode its spikes are
 * not kept either: a reader's backward reruns this forward (recompute). Over time segments (net_hooks.h) it takes
 * its state from the segment before and sends its last one on, and ∂L/∂v the other way in the backward. */
#include "core/error.h"
#include "core/layer.h"
#include "core/layers/batchnorm.h"
#include "core/lif_math.h"

#include <math.h>
#include <string.h>

/* Does the backward read h the forward kept? In full mode; else it recomputes h from the input. */
static bool keeps_h(const sf_net *net) { return net->p.memory == SF_MEMORY_FULL; }

/* Does the backward run the time loop forward again: to recompute h, or (the ALIF, whose thresholds are not kept)
 * to rebuild θ? Then it needs the segment's start state and reads the forward's checkpoints. */
static bool backward_reruns(const sf_net *net, const sf_net_layer *l)
{
    return !keeps_h(net) || l->d.lif.model == SF_NEURON_ALIF;
}

/* The batch norm this layer runs in its kernels, or NULL. */
static const sf_net_layer *fused_bn(const sf_net *net, const sf_net_layer *l)
{
    return l->absorbs >= 0 ? &net->layers[l->absorbs] : NULL;
}

static sf_status lif_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    sf_status s = sf_lif_params_check(&l->d.lif);
    return s == SF_OK ? SF_OK : sf_fail_context(s, "layer %d (lif): ", index);
}

/* A PLIF learns w, one per layer or per channel. */
static void lif_sizes(const sf_net_layer *l, const int32_t in[3], sf_kind_sizes *n)
{
    if (l->d.lif.model == SF_NEURON_PLIF) n->weight = l->d.lif.per_channel ? in[0] : 1;
}

/* SpikingJelly's start for a PLIF's w: -ln(tau - 1) */
static void lif_init(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, float *buffers)
{
    for (int64_t k = 0; k < l->w_numel; k++) params[l->w_off + k] = (float)-log((double)l->d.lif.tau - 1.0);
}

static const char *lif_label(const sf_net_layer *l) { return sf_neuron_model_name(l->d.lif.model); }

/* It reads its input where it recomputes h, and some models always; fused, the BN's input is read instead. */
static bool lif_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k)
{
    return k == 0 && l->absorbs < 0 && (!keeps_h(net) || sf_neuron_backward_reads_x(&l->d.lif));
}

static int32_t lif_recompute_source(const sf_net *net, const sf_net_layer *l)
{
    const sf_net_layer *bn = fused_bn(net, l);
    return bn ? bn->in : l->in;
}

/* ---- the neuron state a call carries beyond x (sf_lif_state) */

/* A PLIF layer's w (with grads, its dw) and their geometry into st; false (st untouched) for other models. */
static bool learned_w(sf_net *net, const sf_net_layer *l, bool grads, sf_lif_state *st)
{
    if (l->w_off < 0) return false;
    const sf_net_tensor *y = &net->tensors[l->out];
    st->w = net->params + l->w_off;
    st->dw = grads ? net->grads + l->w_off : NULL;
    st->w_channels = (int32_t)l->w_numel;          /* 1, or the channels of a w per channel */
    st->w_hw = y->nhwc ? 1 : (int64_t)y->h * y->w; /* channel = (element / w_hw) mod w_channels */
    return true;
}

/* The forward's: w, the checkpoints a training forward writes for a backward that recomputes, and pipelined, the
 * state received from the segment before and the slot of the one sent on; *out is NULL when there is none. */
static sf_status state_forward(sf_net *net, const sf_net_layer *l, bool training, sf_lif_state *st,
                               const sf_lif_state **out)
{
    *out = NULL;
    memset(st, 0, sizeof *st);
    if (learned_w(net, l, false, st)) *out = st;
    if (training && (st->v_ckpt = sf_net_slot_ptr(net, l->v_ckpt))) *out = st;
    if (!sf_net_pipelined(net)) return SF_OK;
    SF_TRY(sf_net_recv_from_prev(net, l->v_in));
    st->v_in = sf_net_slot_ptr(net, l->v_in);
    st->v_out = sf_net_slot_ptr(net, l->v_out);
    *out = st;
    return SF_OK;
}

/* The backward's: w and dw, the checkpoints and start state of a backward that runs forward again, and pipelined,
 * ∂L/∂v received from the segment after and the slot of the one sent back. */
static sf_status state_backward(sf_net *net, const sf_net_layer *l, sf_lif_state *st, const sf_lif_state **out)
{
    *out = NULL;
    memset(st, 0, sizeof *st);
    if (learned_w(net, l, true, st)) *out = st;
    const bool forward_again = backward_reruns(net, l);
    if (forward_again && (st->v_ckpt = sf_net_slot_ptr(net, l->v_ckpt))) *out = st;
    if (!sf_net_pipelined(net)) return SF_OK;
    if (forward_again) st->v_in = sf_net_slot_ptr(net, l->v_in);
    SF_TRY(sf_net_recv_from_next(net, l->dv_in));
    st->dv_in = sf_net_slot_ptr(net, l->dv_in);
    st->dv_out = sf_net_slot_ptr(net, l->dv_out);
    *out = st;
    return SF_OK;
}

/* ---- the plan */

static void lif_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    const bool runs = sf_layer_backward_runs(net, index);
    const int64_t n = net->B * net->tensors[l->out].per_sample; /* neurons of one step */
    l->h = l->v_ckpt = l->v_in = l->v_out = l->dv_in = l->dv_out = (sf_slot){0};
    if ((keeps_h(net) && runs) || net->keep_all)
        sf_plan_saved(pl, &l->h, sf_net_tensor_bytes(net, l->out, sizeof(float)));
    /* the backward recomputes h (the ALIF's always, for its thresholds) from checkpoints: 1/32 of h */
    if (runs && net->be->neuron_ckpt && backward_reruns(net, l))
        sf_plan_saved(pl, &l->v_ckpt, (size_t)sf_lif_ckpt_floats(&l->d.lif, net->T, n) * sizeof(float));
    const sf_net_layer *bn = fused_bn(net, l);
    if (bn && runs) { /* the fused backward's per-neuron sums between its passes */
        const sf_bn_shape sh = sf_net_bn_shape(net, bn->in, sf_net_rows(net));
        sf_layer_plan_workspaces(net, pl, l, index, 0, net->be->bn_lif_scratch(net->be, &l->d.lif, net->T, sh));
    }
    const sf_net_hooks *h = &net->hooks;
    if (h->nseg > 1) { /* the state at the segment's ends: v, and the ALIF's b; saved, as the transfers read it */
        const size_t bytes = (size_t)(n * sf_neuron_state_count(&l->d.lif)) * sizeof(float);
        const bool first = h->seg == 0, last = h->seg == h->nseg - 1;
        if (!first) sf_plan_saved(pl, &l->v_in, bytes);
        if (!last) sf_plan_saved(pl, &l->v_out, bytes);
        if (!last && runs) sf_plan_saved(pl, &l->dv_in, bytes);
        if (!first && runs) sf_plan_saved(pl, &l->dv_out, bytes);
    }
}

/* ---- forward */

/* The neuron (with its fused BN) over the segment's steps, from the state received, sending its last state on. */
static sf_status neuron_forward(sf_net *net, const sf_net_layer *l, bool training, const sf_lif_out *out)
{
    sf_backend *be = net->be;
    sf_lif_state state;
    const sf_lif_state *st;
    SF_TRY(state_forward(net, l, training, &state, &st));
    const sf_net_layer *bn = fused_bn(net, l);
    if (!bn) {
        const int64_t n = net->B * net->tensors[l->in].per_sample;
        SF_TRY(be->lif_forward(be, &l->d.lif, net->T, n, sf_net_act(net, l->in), out, st));
    } else {
        const float *mean, *var;
        sf_batchnorm_stats(net, bn, training, &mean, &var);
        SF_TRY(be->bn_lif_forward(be, &l->d.lif, net->T, sf_net_bn_shape(net, bn->in, sf_net_rows(net)),
                                  sf_net_act(net, bn->in), mean, var, bn->d.bn_eps, sf_net_param(net, bn->w_off),
                                  sf_net_param(net, bn->b_off), out, st));
    }
    return sf_net_send_to_next(net, l->v_out);
}

/* Spikes, their count, h where planned, the bytes a training forward keeps, and the compact form: written by the
 * kernel itself, or after the fused kernels, which do not make it. */
static sf_status lif_forward(sf_net *net, sf_net_layer *l, bool training)
{
    const sf_net_tensor *o = &net->tensors[l->out];
    float *y = sf_net_act(net, l->out);
    const bool fused = l->absorbs >= 0;
    sf_lif_out out = {.s = y, .spike_count = net->spike_counts + l->lif_index};
    if (training && o->keep == SF_KEEP_BYTES) out.s_u8 = sf_net_slot_ptr(net, o->bytes);
    if (training || net->keep_all) out.h = sf_net_slot_ptr(net, l->h);
    if (o->compact && !fused) {
        out.c = sf_net_compact_of(net, l->out);
        out.row = o->per_sample;
        if (!sf_net_compact_values(net, l->out)) out.s = NULL;
    }
    SF_TRY(neuron_forward(net, l, training, &out));
    if (!o->compact || !fused) return SF_OK;
    sf_spikes c = sf_net_compact_of(net, l->out);
    return net->be->spikes_compact(net->be, sf_net_rows(net), o->per_sample, y, &c, NULL, NULL);
}

/* Its spikes again, for a reader's backward (recompute mode): the forward rerun from the state it started from. */
static sf_status lif_recompute(sf_net *net, const sf_net_layer *l, float *y)
{
    sf_backend *be = net->be;
    sf_lif_out o = {.s = y};
    /* a time segment starts from the v its forward received; a PLIF runs with its w */
    sf_lif_state from = {.v_in = sf_net_slot_ptr(net, l->v_in)};
    const bool learned = learned_w(net, l, false, &from);
    const sf_lif_state *st = sf_net_pipelined(net) || learned ? &from : NULL;
    const sf_net_layer *bn = fused_bn(net, l);
    if (!bn)
        return be->lif_forward(be, &l->d.lif, net->T, net->B * net->tensors[l->in].per_sample, sf_net_act(net, l->in),
                               &o, st);
    return be->bn_lif_forward(be, &l->d.lif, net->T, sf_net_bn_shape(net, bn->in, sf_net_rows(net)),
                              sf_net_act(net, bn->in), sf_net_slot_ptr(net, bn->mean), sf_net_slot_ptr(net, bn->var),
                              bn->d.bn_eps, sf_net_param(net, bn->w_off), sf_net_param(net, bn->b_off), &o, st);
}

/* ---- backward */

/* The fused BN→LIF backward; over several processes in two phases with the sums over the BN group between (which
 * also sends the LIF's ∂L/∂v on after the first). */
static sf_status bn_lif_backward(sf_net *net, const sf_net_layer *lif, const sf_net_layer *bn, const float *x,
                                 const float *h, const float *ds, float *dx, const sf_lif_state *st)
{
    sf_backend *be = net->be;
    const sf_bn_shape sh = sf_net_bn_shape(net, bn->in, sf_net_rows(net));
    const float *mean = sf_net_slot_ptr(net, bn->mean), *var = sf_net_slot_ptr(net, bn->var);
    const float *gamma = sf_net_param(net, bn->w_off), *beta = sf_net_param(net, bn->b_off);
    float *dgamma = sf_net_param_grad(net, bn->w_off), *dbeta = sf_net_param_grad(net, bn->b_off);
    void *scratch = sf_net_slot_ptr(net, lif->sws_b); /* the per-neuron sums between the passes, planned */
    const sf_net_hooks *hk = &net->hooks;
    if (hk->bn_parts == 1) {
        SF_TRY(be->bn_lif_backward(be, &lif->d.lif, net->T, sh, x, h, mean, var, bn->d.bn_eps, gamma, beta, ds, dx,
                                   dgamma, dbeta, st, NULL, scratch));
        return sf_net_send_to_prev(net, lif->dv_out);
    }
    /* phase 1 (this part's sums and ∂L/∂v for the earlier segment), the sums over the group, phase 2 (dx) */
    float *sums = sf_net_slot_ptr(net, bn->bn_sums);
    const size_t cb = (size_t)sh.c * sizeof(float);
    sf_bn_split one = {.phase = 1};
    SF_TRY(be->bn_lif_backward(be, &lif->d.lif, net->T, sh, x, h, mean, var, bn->d.bn_eps, gamma, beta, ds, dx, dgamma,
                               dbeta, st, &one, scratch));
    SF_TRY(sf_net_send_to_prev(net, lif->dv_out));
    SF_TRY(be->copy(be, sums, dgamma, cb));
    SF_TRY(be->copy(be, sums + sh.c, dbeta, cb));
    SF_TRY(hk->bn_allreduce(hk->ctx, sums, 2 * (int64_t)sh.c));
    sf_bn_split two = {.phase = 2,
                       .sum_dyx = sums,
                       .sum_dy = sums + sh.c,
                       .rows = sf_net_bn_shape(net, bn->in, sf_net_bn_rows(net)).rows};
    return be->bn_lif_backward(be, &lif->d.lif, net->T, sh, x, h, mean, var, bn->d.bn_eps, gamma, beta, ds, dx, NULL,
                               NULL, st, &two, scratch);
}

static sf_status lif_backward(sf_net *net, sf_net_layer *l)
{
    sf_backend *be = net->be;
    const int32_t i = sf_net_layer_index(net, l);
    const float *dy = sf_net_grad(net, l->out);
    const float *h = keeps_h(net) ? sf_net_slot_ptr(net, l->h) : NULL;
    sf_lif_state state;
    const sf_lif_state *st;
    bool acc = false;
    const sf_net_layer *bn = fused_bn(net, l);
    if (bn) {
        const float *x;
        SF_TRY(sf_layer_input_value(net, bn, 0, &x));
        float *dx = sf_layer_dx_target(net, i, bn->in, bn->dx_tmp, &acc);
        SF_TRY(state_backward(net, l, &state, &st));
        SF_TRY(bn_lif_backward(net, l, bn, x, h, dy, dx, st));
        return sf_layer_accumulate(net, acc, bn->in, dx);
    }
    float *dx = sf_layer_dx_target(net, i, l->in, l->dx_tmp, &acc);
    if (!dx) return SF_OK;
    const float *x = NULL; /* read when h is recomputed, and by some models always */
    if (!h || sf_neuron_backward_reads_x(&l->d.lif)) SF_TRY(sf_layer_input_value(net, l, 0, &x));
    SF_TRY(state_backward(net, l, &state, &st));
    const sf_net_tensor *in = &net->tensors[sf_net_root(net, l->in)];
    if (in->gmask) { /* the event-driven linear layer below sums over the nonzero entries of this dx */
        sf_spikes mask = {sf_net_slot_ptr(net, in->gbits), NULL, sf_net_slot_ptr(net, in->gcnt)};
        SF_TRY(be->lif_backward_masked(be, &l->d.lif, net->T, net->B, in->per_sample, x, h, dy, dx, &mask,
                                       sf_net_grad_count(net, l->in), st));
    } else {
        SF_TRY(be->lif_backward(be, &l->d.lif, net->T, net->B * in->per_sample, x, h, dy, dx, st));
    }
    SF_TRY(sf_net_send_to_prev(net, l->dv_out));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

static const sf_slot *lif_membrane(const sf_net_layer *l) { return &l->h; }

/* θ_grad zeroes the surrogate below it: its dx has few nonzero entries, whose pattern it writes (unfused). */
static bool lif_masks_input_grad(const sf_net_layer *l) { return l->absorbs < 0 && l->d.lif.use_grad_threshold; }

const sf_layer_ops sf_kind_lif = {
    .name = "lif",
    .inputs = 1,
    .flags =
        SF_KIND_SPIKES | SF_KIND_FIRES | SF_KIND_WRITES_BYTES | SF_KIND_NHWC | SF_KIND_READS_RERUN | SF_KIND_RUNS_BN |
        SF_KIND_TOKENS,
    .weight_name = "w", /* SpikingJelly's ParametricLIFNode.w */
    .shape = lif_shape,
    .sizes = lif_sizes,
    .init = lif_init,
    .label = lif_label,
    .needs_input = lif_needs_input,
    .recompute_source = lif_recompute_source,
    .recompute = lif_recompute,
    .plan = lif_plan,
    .forward = lif_forward,
    .backward = lif_backward,
    .membrane = lif_membrane,
    .masks_input_grad = lif_masks_input_grad,
};
