/* add.c — the sum of two tensors of one shape (a residual shortcut: input2 is the block's input). Its backward
 * hands dy to both inputs, elementwise, so any layout will do. */
#include "core/error.h"
#include "core/layer.h"

static sf_status add_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    int32_t o[3];
    sf_net_shape_of(net, l->in2, o);
    if (o[0] != in[0] || o[1] != in[1] || o[2] != in[2])
        return sf_fail(SF_ERR_INVALID, "layer %d (add): shapes %dx%dx%d and %dx%dx%d differ", index, in[0], in[1],
                       in[2], o[0], o[1], o[2]);
    if (sf_net_is_tokens(net, l->in) != sf_net_is_tokens(net, l->in2))
        return sf_fail(SF_ERR_INVALID, "layer %d (add): tensor %d is tokens and tensor %d is not", index,
                       sf_net_is_tokens(net, l->in) ? l->in : l->in2, sf_net_is_tokens(net, l->in) ? l->in2 : l->in);
    return SF_OK;
}

static int64_t elements(const sf_net *net, const sf_net_layer *l)
{
    return sf_net_rows(net) * net->tensors[l->in].per_sample;
}

static sf_status add_forward(sf_net *net, sf_net_layer *l, bool training)
{
    return net->be->add(net->be, elements(net, l), sf_net_act(net, l->in), sf_net_act(net, l->in2),
                        sf_net_act(net, l->out));
}

/* dy into each input's gradient: copied by its first writer, added otherwise (and for the second of one tensor
 * read twice). */
static sf_status add_backward(sf_net *net, sf_net_layer *l)
{
    sf_backend *be = net->be;
    const int32_t i = sf_net_layer_index(net, l);
    const float *dy = sf_net_grad(net, l->out);
    const int32_t ins[2] = {l->in, l->in2};
    const sf_slot tmps[2] = {l->dx_tmp, l->dx_tmp2};
    for (int k = 0; k < 2; k++) {
        if (!net->tensors[sf_net_root(net, ins[k])].requires_grad) continue;
        const bool second_of_same = k == 1 && sf_net_root(net, ins[0]) == sf_net_root(net, ins[1]);
        bool acc = false;
        float *dst = sf_layer_dx_target(net, i, ins[k], tmps[k], &acc);
        if (second_of_same || acc) SF_TRY(be->axpy(be, elements(net, l), 1.0f, dy, sf_net_grad(net, ins[k])));
        else SF_TRY(be->copy(be, dst, dy, (size_t)elements(net, l) * sf_net_act_size(net)));
    }
    return SF_OK;
}

const sf_layer_ops sf_kind_add = {
    .name = "add",
    .inputs = 2,
    .flags = SF_KIND_NHWC | SF_KIND_TOKENS,
    .shape = add_shape,
    .forward = add_forward,
    .backward = add_backward,
};
