/* dropout.c — inverted dropout with one mask for all T steps (a zeroed neuron stays zeroed over the sequence), drawn
 * from the net's seed and a counter that moves every training forward; an identity in evaluation. */
#include "core/error.h"
#include "core/layer.h"

static sf_status dropout_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    if (!(l->d.dropout_p >= 0.0f && l->d.dropout_p < 1.0f))
        return sf_fail(SF_ERR_INVALID, "layer %d (dropout): p = %g must be in [0, 1)", index, l->d.dropout_p);
    return SF_OK;
}

/* Elements of one step: the mask's size. */
static int64_t per_step(const sf_net *net, const sf_net_layer *l) { return net->B * net->tensors[l->in].per_sample; }

static sf_status dropout_forward(sf_net *net, sf_net_layer *l, bool training)
{
    sf_backend *be = net->be;
    const float *x = sf_net_act(net, l->in);
    float *y = sf_net_act(net, l->out);
    if (!training) return be->copy(be, y, x, (size_t)(net->T * per_step(net, l)) * sf_net_act_size(net));
    l->dropout_counter = net->rng_counter++;
    return be->dropout_forward(be, net->T, per_step(net, l), l->d.dropout_p, net->p.seed, l->dropout_counter, x, y);
}

static sf_status dropout_backward(sf_net *net, sf_net_layer *l)
{
    bool acc = false;
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    if (!dx) return SF_OK;
    SF_TRY(net->be->dropout_backward(net->be, net->T, per_step(net, l), l->d.dropout_p, net->p.seed, l->dropout_counter,
                                     sf_net_grad(net, l->out), dx));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_dropout = {
    .name = "dropout",
    .inputs = 1,
    .flags = SF_KIND_STEP_VARIES | SF_KIND_TOKENS,
    .shape = dropout_shape,
    .forward = dropout_forward,
    .backward = dropout_backward,
};
