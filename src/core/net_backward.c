/* net_backward.c — the backward pass: layers in reverse order, rebuilding each input a backward needs from where
 * the plan kept it (as it is, as bytes or bits, or recomputed by rerunning the layer that produced it). */
#include "core/error.h"
#include "core/lif_math.h"
#include "core/net_internal.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* The value of tensor `id` in buffer buf (unless it stays where the forward left it): kept as it is, expanded from
 * bytes or bits, recomputed by rerunning the neuron layer that produced it (Liang et al.: store the Conv/FC output
 * only), or, in lean mode, by rerunning the conv, linear or avg-pool layer that produced it from its own input, which
 * goes to `rerun_in` where it has to be rebuilt. */
static sf_status value_into(sf_net *net, int32_t id, float *buf, float *rerun_in, void *rerun_scratch, const float **out)
{
    const sf_net_tensor *x = &net->tensors[sf_net_root(net, id)];
    switch (x->keep) {
    case SF_KEEP_FLOAT: *out = sf_net_slot_ptr(net, x->act); return SF_OK;
    case SF_KEEP_BYTES:
        SF_TRY(net->be->u8_to_act(net->be, sf_net_rows(net) * x->per_sample, sf_net_slot_ptr(net, x->bytes), buf));
        *out = buf;
        return SF_OK;
    case SF_KEEP_BITS:
        if (sf_net_root(net, id) == 0) { /* the input's values stay on the device for the whole step (x = NULL) */
            *out = sf_net_slot_ptr(net, x->act);
            return SF_OK;
        }
        SF_TRY(net->be->spikes_expand(net->be, sf_net_rows(net), x->per_sample, sf_net_slot_ptr(net, x->cbits), buf));
        *out = buf;
        return SF_OK;
    case SF_KEEP_RECOMPUTE: {
        const sf_net_layer *p = &net->layers[x->producer];
        const sf_net_layer *src = p->fused_bn ? &net->layers[p->bn] : p;
        sf_lif_out o = {.s = buf};
        /* a time segment starts from the v its forward received; a PLIF runs with its w */
        sf_lif_state from = {.v_in = sf_net_slot_ptr(net, p->v_in)};
        const bool learned = sf_net_neuron_learned(net, p, false, &from);
        const sf_lif_state *st = sf_net_pipelined(net) || learned ? &from : NULL;
        sf_backend *be = net->be;
        if (!p->fused_bn) {
            SF_TRY(be->lif_forward(be, &p->d.lif, net->T, net->B * net->tensors[p->in].per_sample,
                                   sf_net_slot_ptr(net, net->tensors[sf_net_root(net, p->in)].act), &o, st));
        } else {
            sf_bn_shape sh = sf_net_bn_shape(net, src->in, sf_net_rows(net));
            SF_TRY(be->bn_lif_forward(be, &p->d.lif, net->T, sh,
                                      sf_net_slot_ptr(net, net->tensors[sf_net_root(net, src->in)].act),
                                      sf_net_slot_ptr(net, src->mean), sf_net_slot_ptr(net, src->var), src->d.bn_eps,
                                      sf_net_param(net, src->w_off), sf_net_param(net, src->b_off), &o, st));
        }
        *out = buf;
        return SF_OK;
    }
    case SF_KEEP_RERUN: { /* the producer's input is never rerun itself (plan.c, rerunnable) */
        const sf_net_layer *p = &net->layers[x->producer];
        const float *in;
        SF_TRY(value_into(net, p->in, rerun_in, NULL, NULL, &in));
        SF_TRY(sf_net_synapse_forward(net, p, in, buf, rerun_scratch));
        *out = buf;
        return SF_OK;
    }
    case SF_KEEP_NONE: break;
    }
    return sf_fail(SF_ERR_STATE, "internal: tensor %d was not kept for the backward", id);
}

/* The value of tensor `id` for layer l's backward, in the buffers the plan gave l for it. */
static sf_status input_value(sf_net *net, const sf_net_layer *l, int32_t id, const float **out)
{
    float *buf = l->rebuild_in_grad ? sf_net_grad(net, id) : sf_net_slot_ptr(net, l->in_float);
    return value_into(net, id, buf, sf_net_slot_ptr(net, l->rerun_in), sf_net_slot_ptr(net, l->rerun_scratch), out);
}

/* Where layer `w` writes the gradient of its input `id`: straight into the gradient buffer if it is the first
 * writer, else into `tmp` (then accumulated). NULL when no gradient is wanted. */
static float *dx_target(sf_net *net, int32_t w, int32_t id, sf_slot tmp, bool *accumulate)
{
    const sf_net_tensor *x = &net->tensors[sf_net_root(net, id)];
    *accumulate = false;
    if (!x->requires_grad) return sf_net_slot_ptr(net, tmp); /* NULL unless the op insists on a dx */
    if (x->first_grad_writer == w) return sf_net_grad(net, id);
    *accumulate = true;
    return sf_net_slot_ptr(net, tmp);
}

static sf_status accumulate(sf_net *net, bool acc, int32_t id, const float *tmp)
{
    if (!acc) return SF_OK;
    return net->be->axpy(net->be, sf_net_rows(net) * net->tensors[sf_net_root(net, id)].per_sample, 1.0f, tmp,
                         sf_net_grad(net, id));
}

static sf_status layer_backward(sf_net *net, int32_t i)
{
    sf_backend *be = net->be;
    sf_net_layer *l = &net->layers[i];
    if (l->d.kind == SF_LAYER_FLATTEN || l->absorbed || !net->tensors[l->out].requires_grad) return SF_OK;
    const float *dy = sf_net_grad(net, l->out);
    int64_t n_in = sf_net_rows(net) * net->tensors[l->in].per_sample;
    bool acc = false;
    switch (l->d.kind) {
    case SF_LAYER_LINEAR: {
        if (l->bwd_flags) { /* event-driven; a layer that may be but runs dense this step takes the path below */
            float *dx = dx_target(net, i, l->in, l->dx_tmp, &acc);
            SF_TRY(sf_net_spike_linear_backward(net, l, dy, dx));
            return accumulate(net, acc, l->in, dx);
        }
        const int32_t in = (int32_t)net->tensors[l->in].per_sample;
        const sf_net_tensor *kept = &net->tensors[sf_net_root(net, l->in)];
        if (kept->keep == SF_KEEP_BITS && sf_net_root(net, l->in) != 0 && be->binary_linear_backward_bits) {
            /* the kept bits straight into the products: no float copy of the spikes */
            float *dx = dx_target(net, i, l->in, l->dx_tmp, &acc);
            SF_TRY(be->binary_linear_backward_bits(be, sf_net_rows(net), in, l->d.out_features,
                                                   sf_net_slot_ptr(net, kept->cbits), sf_net_weight(net, l->w_off), dy,
                                                   dx, sf_net_param_grad(net, l->w_off),
                                                   sf_net_param_grad(net, l->b_off)));
            return accumulate(net, acc, l->in, dx);
        }
        const float *x;
        SF_TRY(input_value(net, l, l->in, &x));
        float *dx = dx_target(net, i, l->in, l->dx_tmp, &acc);
        SF_TRY((sf_net_tensor_is_binary(net, l->in) ? be->binary_linear_backward : be->linear_backward)(
            be, sf_net_rows(net), in, l->d.out_features, x, sf_net_weight(net, l->w_off), dy, dx,
            sf_net_param_grad(net, l->w_off), sf_net_param_grad(net, l->b_off)));
        return accumulate(net, acc, l->in, dx);
    }
    case SF_LAYER_CONV2D: {
        const float *x;
        SF_TRY(input_value(net, l, l->in, &x));
        float *dx = dx_target(net, i, l->in, l->dx_tmp, &acc);
        SF_TRY(be->conv_backward(be, &l->conv, x, sf_net_weight(net, l->w_off), dy, dx,
                                 sf_net_param_grad(net, l->w_off), sf_net_param_grad(net, l->b_off),
                                 sf_net_slot_ptr(net, l->bwd_scratch)));
        return accumulate(net, acc, l->in, dx);
    }
    case SF_LAYER_AVGPOOL2D:
    case SF_LAYER_MAXPOOL2D:
    case SF_LAYER_DROPOUT: {
        float *dx = dx_target(net, i, l->in, l->dx_tmp, &acc);
        if (!dx) return SF_OK;
        if (l->d.kind == SF_LAYER_AVGPOOL2D)
            SF_TRY(be->avgpool_backward(be, &l->pool, dy, dx));
        else if (l->d.kind == SF_LAYER_MAXPOOL2D)
            SF_TRY(be->maxpool_backward(be, &l->pool, sf_net_slot_ptr(net, l->argmax), dy, dx));
        else
            SF_TRY(be->dropout_backward(be, net->T, n_in / net->T, l->d.dropout_p, net->p.seed, l->dropout_counter,
                                        dy, dx));
        return accumulate(net, acc, l->in, dx);
    }
    case SF_LAYER_BATCHNORM: {
        const float *x;
        SF_TRY(input_value(net, l, l->in, &x));
        float *dx = dx_target(net, i, l->in, l->dx_tmp, &acc);
        SF_TRY(be->bn_backward(be, sf_net_bn_shape(net, l->in, sf_net_rows(net)), x, sf_net_slot_ptr(net, l->mean),
                               sf_net_slot_ptr(net, l->var), l->d.bn_eps, sf_net_param(net, l->w_off), dy, dx,
                               sf_net_param_grad(net, l->w_off), sf_net_param_grad(net, l->b_off)));
        return accumulate(net, acc, l->in, dx);
    }
    case SF_LAYER_LIF: {
        const float *h = sf_net_keeps_h(net, l) ? sf_net_slot_ptr(net, l->h) : NULL;
        sf_lif_state state;
        const sf_lif_state *st;
        if (!l->fused_bn) {
            float *dx = dx_target(net, i, l->in, l->dx_tmp, &acc);
            if (!dx) return SF_OK;
            const float *x = NULL; /* read when h is recomputed, and by some models always */
            if (!h || sf_neuron_backward_reads_x(&l->d.lif)) SF_TRY(input_value(net, l, l->in, &x));
            SF_TRY(sf_net_state_backward(net, l, &state, &st));
            const sf_net_tensor *in = &net->tensors[sf_net_root(net, l->in)];
            if (in->gmask) { /* the sparse linear layer below sums over the nonzero entries of this dx */
                sf_spikes mask = {sf_net_slot_ptr(net, in->gbits), NULL, sf_net_slot_ptr(net, in->gcnt)};
                SF_TRY(be->lif_backward_masked(be, &l->d.lif, net->T, net->B, in->per_sample, x, h, dy, dx, &mask,
                                               sf_net_grad_count(net, l->in), st));
            } else {
                SF_TRY(be->lif_backward(be, &l->d.lif, net->T, net->B * in->per_sample, x, h, dy, dx, st));
            }
            SF_TRY(sf_net_state_backward_done(net, l));
            return accumulate(net, acc, l->in, dx);
        }
        sf_net_layer *bn = &net->layers[l->bn];
        const float *x;
        SF_TRY(input_value(net, bn, bn->in, &x));
        float *dx = dx_target(net, i, bn->in, bn->dx_tmp, &acc);
        sf_bn_shape sh = sf_net_bn_shape(net, bn->in, sf_net_rows(net));
        SF_TRY(sf_net_state_backward(net, l, &state, &st));
        SF_TRY(sf_net_bn_lif_backward(net, l, bn, sh, x, h, dy, dx, st));
        return accumulate(net, acc, bn->in, dx);
    }
    case SF_LAYER_RLIF: {
        const float *h = sf_net_slot_ptr(net, l->h); /* a recurrent layer always keeps it (sf_net_keeps_h) */
        float *dx = dx_target(net, i, l->in, l->dx_tmp, &acc); /* dx_tmp also when the input needs none: the
                                                                 * recurrence runs on dy */
        const sf_net_tensor *in = &net->tensors[sf_net_root(net, l->in)],
                            *out = &net->tensors[sf_net_root(net, l->out)];
        sf_spikes mask = {sf_net_slot_ptr(net, in->gbits), NULL, sf_net_slot_ptr(net, in->gcnt)};
        /* its spikes' bits where the plan kept them for a reader (pipelined segments make them again) */
        const uint32_t *s_bits =
            out->keep == SF_KEEP_BITS && !sf_net_pipelined(net) ? sf_net_slot_ptr(net, out->cbits) : NULL;
        SF_TRY(be->rlif_backward(be, &l->d.lif, net->T, net->B, net->tensors[l->out].per_sample, NULL, h, s_bits,
                                 sf_net_weight(net, l->w_off), dy, l->fwd_sparse, l->bwd_flags, dx,
                                 sf_net_param_grad(net, l->w_off), in->gmask ? &mask : NULL,
                                 sf_net_grad_count(net, l->in), sf_net_slot_ptr(net, l->sws_b)));
        return accumulate(net, acc, l->in, dx);
    }
    case SF_LAYER_ADD: {
        size_t bytes = (size_t)n_in * sf_net_act_size(net);
        int32_t ins[2] = {l->in, l->in2};
        sf_slot tmps[2] = {l->dx_tmp, l->dx_tmp2};
        for (int k = 0; k < 2; k++) {
            if (!net->tensors[sf_net_root(net, ins[k])].requires_grad) continue;
            bool second_of_same = k == 1 && sf_net_root(net, ins[0]) == sf_net_root(net, ins[1]);
            float *dst = dx_target(net, i, ins[k], tmps[k], &acc);
            if (second_of_same || acc) SF_TRY(be->axpy(be, n_in, 1.0f, dy, sf_net_grad(net, ins[k])));
            else
                SF_TRY(be->copy(be, dst, dy, bytes));
        }
        return SF_OK;
    }
    case SF_LAYER_FLATTEN: break;
    }
    return SF_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

sf_status sf_net_backward(sf_net *net)
{
    if (!net->have_loss) return sf_fail(SF_ERR_STATE, "backward: run a training forward and the loss first");
    sf_backend *be = net->be;
    float *g = sf_net_grad(net, net->n_layers);
    if (net->p.readout == SF_READOUT_LEAKY) {
        int32_t K = sf_net_classes(net);
        float a = 1.0f - 1.0f / net->p.readout_tau;
        float *dout = sf_net_pipelined(net) ? net->dout_all : g;
        if (dout) SF_TRY(be->leaky_backward(be, net->T_all, net->B * K, a, 1.0f - a, net->dreadout, dout));
    }
    SF_TRY(sf_net_scatter_output_grad(net, g));
    int64_t final_from = net->n_params;
    for (int32_t i = net->n_layers - 1; i >= 0; i--) {
        if (!net->profiling) {
            SF_TRY(layer_backward(net, i));
        } else {
            SF_TRY(be->sync(be));
            double t0 = now_ms();
            SF_TRY(layer_backward(net, i));
            SF_TRY(be->sync(be));
            net->layers[i].timing.backward_ms += now_ms() - t0;
        }
        SF_TRY(sf_net_grads_ready(net, i, &final_from));
    }
    SF_TRY(sf_net_grads_done(net));
    net->have_backward = true;
    if (be->host_memory) SF_TRY(sf_net_sparse_after_step(net));
    return SF_OK;
}
