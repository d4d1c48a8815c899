/* net_pipeline.c — the engine's side of a step that spans several processes (net_hooks.h): the checks at compile
 * time (each kind's, sf_layer_ops.split_check), and the exchanges the forward, the loss and the backward make through
 * the hooks (state between time segments, the gathered output, BN statistics, gradients as they become final). */
#include "core/error.h"
#include "core/layer.h"

#include <string.h>

sf_status sf_net_pipeline_check(const sf_net *net, int64_t T)
{
    const sf_net_hooks *h = &net->hooks;
    if (T % h->nseg != 0)
        return sf_fail(SF_ERR_INVALID, "time_parallel = %d does not divide the %lld time steps (each process runs an "
                                       "equal segment of T)",
                       h->nseg, (long long)T);
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (l->ops->split_check) SF_TRY(l->ops->split_check(net, l, i));
    }
    return SF_OK;
}

bool sf_net_pipelined(const sf_net *net) { return net->hooks.nseg > 1; }

/* --------------------------------------------------------------------------------------------- state */

/* Slot s of `peer` in the time group, received into or sent from it, where the plan gave it. */
static sf_status recv_slot(sf_net *net, int32_t peer, sf_slot s)
{
    const sf_net_hooks *h = &net->hooks;
    if (!sf_net_pipelined(net) || !s.where) return SF_OK;
    return h->recv(h->ctx, peer, sf_net_slot_ptr(net, s), (int64_t)(s.bytes / sizeof(float)));
}

static sf_status send_slot(sf_net *net, int32_t peer, sf_slot s)
{
    const sf_net_hooks *h = &net->hooks;
    if (!sf_net_pipelined(net) || !s.where) return SF_OK;
    return h->send(h->ctx, peer, sf_net_slot_ptr(net, s), (int64_t)(s.bytes / sizeof(float)));
}

sf_status sf_net_recv_from_prev(sf_net *net, sf_slot s) { return recv_slot(net, net->hooks.seg - 1, s); }
sf_status sf_net_send_to_next(sf_net *net, sf_slot s) { return send_slot(net, net->hooks.seg + 1, s); }
sf_status sf_net_recv_from_next(sf_net *net, sf_slot s) { return recv_slot(net, net->hooks.seg + 1, s); }
sf_status sf_net_send_to_prev(sf_net *net, sf_slot s) { return send_slot(net, net->hooks.seg - 1, s); }

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

sf_status sf_net_bn_stats(sf_net *net, sf_bn_shape sh, const float *x, float *mean, float *var, sf_slot gather)
{
    sf_backend *be = net->be;
    const sf_net_hooks *h = &net->hooks;
    if (h->bn_parts == 1) return be->bn_stats(be, sh, x, mean, var);
    float *parts = sf_net_slot_ptr(net, gather);
    float *mine = parts + (int64_t)h->bn_part * 2 * sh.c;
    SF_TRY(be->bn_stats(be, sh, x, mine, mine + sh.c));
    SF_TRY(h->bn_allgather(h->ctx, parts, 2 * (int64_t)sh.c));
    return be->bn_stats_merge(be, h->bn_parts, sh.c, parts, mean, var);
}

int64_t sf_net_bn_rows(const sf_net *net) { return net->T * net->B * net->hooks.bn_parts; }

/* --------------------------------------------------------------------------------------------- gradients */

/* The lowest parameter offset of layer i (and of the layer it absorbs), or n_params when it has none. */
static int64_t first_param(const sf_net *net, int32_t i)
{
    const sf_net_layer *l = &net->layers[i];
    int64_t first = net->n_params;
    if (l->w_off >= 0 && l->w_off < first) first = l->w_off;
    if (l->b_off >= 0 && l->b_off < first) first = l->b_off;
    if (l->absorbs >= 0) {
        int64_t b = first_param(net, l->absorbs);
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
