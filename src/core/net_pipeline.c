/* net_pipeline.c — the engine's side of a step that spans several processes (net_hooks.h): the checks at compile
 * time, and the exchanges the forward, the loss and the backward make through the hooks (neuron state between time
 * segments, the gathered output, BN statistics and sums, gradients as they become final). */
#include "core/error.h"
#include "core/net_internal.h"

#include <string.h>

sf_status sf_net_pipeline_check(const sf_net *net, int64_t T)
{
    const sf_net_hooks *h = &net->hooks;
    if (T % h->nseg != 0)
        return sf_fail(SF_ERR_INVALID, "time_parallel = %d does not divide the %lld time steps (each process runs an "
                                       "equal segment of T)",
                       h->nseg, (long long)T);
    for (int32_t i = 0; h->nseg > 1 && i < net->n_layers; i++)
        if (net->layers[i].d.kind == SF_LAYER_RLIF)
            return sf_fail(SF_ERR_UNSUPPORTED, "layer %d (rlif): a recurrent layer cannot be split over time_parallel "
                                               "segments (each step needs the spikes of the step before)",
                           i);
    if (h->bn_parts == 1) return SF_OK;
    for (int32_t i = 0; i < net->n_layers; i++)
        if (net->layers[i].d.kind == SF_LAYER_BATCHNORM && !net->layers[i].absorbed)
            return sf_fail(SF_ERR_UNSUPPORTED,
                           "layer %d (batch norm) is not directly followed by the LIF that is its only reader: "
                           "statistics over several processes (time_parallel or sync_bn) need the fused BN→LIF",
                           i);
    return SF_OK;
}

bool sf_net_pipelined(const sf_net *net) { return net->hooks.nseg > 1; }

/* --------------------------------------------------------------------------------------------- neuron state */

bool sf_net_neuron_learned(sf_net *net, const sf_net_layer *l, bool grads, sf_lif_state *st)
{
    if (l->d.kind != SF_LAYER_LIF || l->w_off < 0) return false;
    const sf_net_tensor *y = &net->tensors[l->out];
    st->w = net->params + l->w_off;
    st->dw = grads ? net->grads + l->w_off : NULL;
    st->w_channels = (int32_t)l->w_numel; /* 1, or the channels of a w per channel */
    st->w_hw = y->nhwc ? 1 : (int64_t)y->h * y->w; /* channel = (element / w_hw) mod w_channels */
    return true;
}

sf_status sf_net_state_forward(sf_net *net, const sf_net_layer *l, bool training, sf_lif_state *st,
                               const sf_lif_state **out)
{
    *out = NULL;
    memset(st, 0, sizeof *st);
    if (sf_net_neuron_learned(net, l, false, st)) *out = st;
    if (training && (st->v_ckpt = sf_net_slot_ptr(net, l->v_ckpt))) *out = st;
    if (!sf_net_pipelined(net)) return SF_OK;
    const sf_net_hooks *h = &net->hooks;
    float *v_in = sf_net_slot_ptr(net, l->v_in);
    if (v_in) SF_TRY(h->recv(h->ctx, h->seg - 1, v_in, l->v_in.bytes / sizeof(float)));
    st->v_in = v_in;
    st->v_out = sf_net_slot_ptr(net, l->v_out);
    *out = st;
    return SF_OK;
}

sf_status sf_net_state_forward_done(sf_net *net, const sf_net_layer *l)
{
    if (!sf_net_pipelined(net) || !l->v_out.where) return SF_OK;
    const sf_net_hooks *h = &net->hooks;
    return h->send(h->ctx, h->seg + 1, sf_net_slot_ptr(net, l->v_out), l->v_out.bytes / sizeof(float));
}

sf_status sf_net_state_backward(sf_net *net, const sf_net_layer *l, sf_lif_state *st, const sf_lif_state **out)
{
    *out = NULL;
    memset(st, 0, sizeof *st);
    if (sf_net_neuron_learned(net, l, true, st)) *out = st;
    const bool forward_again = sf_net_backward_reruns(net, l);
    if (forward_again && (st->v_ckpt = sf_net_slot_ptr(net, l->v_ckpt))) *out = st;
    if (!sf_net_pipelined(net)) return SF_OK;
    const sf_net_hooks *h = &net->hooks;
    if (forward_again) st->v_in = sf_net_slot_ptr(net, l->v_in);
    float *dv_in = sf_net_slot_ptr(net, l->dv_in);
    if (dv_in) SF_TRY(h->recv(h->ctx, h->seg + 1, dv_in, l->dv_in.bytes / sizeof(float)));
    st->dv_in = dv_in;
    st->dv_out = sf_net_slot_ptr(net, l->dv_out);
    *out = st;
    return SF_OK;
}

sf_status sf_net_state_backward_done(sf_net *net, const sf_net_layer *l)
{
    if (!sf_net_pipelined(net) || !l->dv_out.where) return SF_OK;
    const sf_net_hooks *h = &net->hooks;
    return h->send(h->ctx, h->seg - 1, sf_net_slot_ptr(net, l->dv_out), l->dv_out.bytes / sizeof(float));
}

/* --------------------------------------------------------------------------------------------- loss */

const float *sf_net_gather_output(sf_net *net)
{
    if (!sf_net_pipelined(net)) return sf_net_act(net, net->n_layers);
    return net->out_all;
}

sf_status sf_net_gather_output_ops(sf_net *net)
{
    if (!sf_net_pipelined(net)) return SF_OK;
    const sf_net_hooks *h = &net->hooks;
    const size_t blk = (size_t)(net->T * net->B * sf_net_classes(net)) * sf_net_act_size(net); /* bytes */
    SF_TRY(net->be->copy(net->be, (char *)net->out_all + (size_t)h->seg * blk, sf_net_act(net, net->n_layers), blk));
    return h->time_allgather(h->ctx, net->out_all, blk);
}

sf_status sf_net_scatter_output_grad(sf_net *net, float *grad)
{
    if (!sf_net_pipelined(net) || !grad) return SF_OK;
    const size_t blk = (size_t)(net->T * net->B * sf_net_classes(net)) * sf_net_act_size(net); /* bytes */
    return net->be->copy(net->be, grad, (char *)net->dout_all + (size_t)net->hooks.seg * blk, blk);
}

/* --------------------------------------------------------------------------------------------- batch norm */

sf_status sf_net_bn_stats(sf_net *net, const sf_net_layer *l, sf_bn_shape sh, const float *x, float *mean, float *var)
{
    sf_backend *be = net->be;
    const sf_net_hooks *h = &net->hooks;
    if (h->bn_parts == 1) return be->bn_stats(be, sh, x, mean, var);
    float *parts = sf_net_slot_ptr(net, l->bn_gather);
    float *mine = parts + (int64_t)h->bn_part * 2 * sh.c;
    SF_TRY(be->bn_stats(be, sh, x, mine, mine + sh.c));
    SF_TRY(h->bn_allgather(h->ctx, parts, 2 * (int64_t)sh.c));
    return be->bn_stats_merge(be, h->bn_parts, sh.c, parts, mean, var);
}

int64_t sf_net_bn_rows(const sf_net *net) { return net->T * net->B * net->hooks.bn_parts; }

sf_bn_shape sf_net_bn_shape(const sf_net *net, int32_t t, int64_t rows)
{
    const sf_net_tensor *x = &net->tensors[t];
    const int64_t hw = (int64_t)x->h * x->w;
    if (x->nhwc) return (sf_bn_shape){.rows = rows * hw, .c = x->c, .hw = 1};
    return (sf_bn_shape){.rows = rows, .c = x->c, .hw = hw};
}

sf_status sf_net_bn_lif_backward(sf_net *net, const sf_net_layer *lif, const sf_net_layer *bn, sf_bn_shape sh,
                                 const float *x, const float *h, const float *ds, float *dx, const sf_lif_state *st)
{
    sf_backend *be = net->be;
    const float *mean = sf_net_slot_ptr(net, bn->mean), *var = sf_net_slot_ptr(net, bn->var);
    const float *gamma = bn->w_off >= 0 ? net->params + bn->w_off : NULL;
    const float *beta = bn->b_off >= 0 ? net->params + bn->b_off : NULL;
    float *dgamma = bn->w_off >= 0 ? net->grads + bn->w_off : NULL;
    float *dbeta = bn->b_off >= 0 ? net->grads + bn->b_off : NULL;
    void *scratch = sf_net_slot_ptr(net, lif->bwd_scratch); /* the per-neuron sums between the passes, planned */
    const sf_net_hooks *hk = &net->hooks;
    if (hk->bn_parts == 1) {
        SF_TRY(be->bn_lif_backward(be, &lif->d.lif, net->T, sh, x, h, mean, var, bn->d.bn_eps, gamma, beta, ds, dx,
                                   dgamma, dbeta, st, NULL, scratch));
        return sf_net_state_backward_done(net, lif);
    }
    /* phase 1 (this part's sums and ∂L/∂v for the earlier segment), the sums over the group, phase 2 (dx) */
    float *sums = sf_net_slot_ptr(net, bn->bn_sums);
    const size_t cb = (size_t)sh.c * sizeof(float);
    sf_bn_split one = {.phase = 1};
    SF_TRY(be->bn_lif_backward(be, &lif->d.lif, net->T, sh, x, h, mean, var, bn->d.bn_eps, gamma, beta, ds, dx,
                               dgamma, dbeta, st, &one, scratch));
    SF_TRY(sf_net_state_backward_done(net, lif));
    SF_TRY(be->copy(be, sums, dgamma, cb));
    SF_TRY(be->copy(be, sums + sh.c, dbeta, cb));
    SF_TRY(hk->bn_allreduce(hk->ctx, sums, 2 * (int64_t)sh.c));
    sf_bn_split two = {.phase = 2, .sum_dyx = sums, .sum_dy = sums + sh.c,
                       .rows = sf_net_bn_shape(net, bn->in, sf_net_bn_rows(net)).rows};
    return be->bn_lif_backward(be, &lif->d.lif, net->T, sh, x, h, mean, var, bn->d.bn_eps, gamma, beta, ds, dx, NULL,
                               NULL, st, &two, scratch);
}

/* --------------------------------------------------------------------------------------------- gradients */

/* The lowest parameter offset of layer i (and of the BN fused into it), or n_params when it has none. */
static int64_t first_param(const sf_net *net, int32_t i)
{
    const sf_net_layer *l = &net->layers[i];
    int64_t first = net->n_params;
    if (l->w_off >= 0 && l->w_off < first) first = l->w_off;
    if (l->b_off >= 0 && l->b_off < first) first = l->b_off;
    if (l->fused_bn) {
        int64_t b = first_param(net, l->bn);
        if (b < first) first = b;
    }
    return first;
}

sf_status sf_net_grads_ready(sf_net *net, int32_t i, int64_t *final_from)
{
    const sf_net_hooks *h = &net->hooks;
    int64_t first = first_param(net, i);
    if (!h->grads_ready || first >= *final_from) return SF_OK;
    *final_from = first;
    return h->grads_ready(h->ctx, net->grads, first, net->n_params);
}

sf_status sf_net_grads_done(sf_net *net)
{
    const sf_net_hooks *h = &net->hooks;
    return h->grads_done ? h->grads_done(h->ctx, net->grads, net->n_params) : SF_OK;
}
