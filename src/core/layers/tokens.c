/* tokens.c — the end of the SPS stem (Zhou et al. 2023): the planes (C, H, W) of a convolution stack become
 * N = H·W tokens of D = C channels, (C, H·W, 1), the channels-last tensor every token layer reads
 * (core/transformer.h). An NCHW input takes one transpose each way; an NHWC one already lies as tokens and is
 * copied. Spikes stay spikes. */
#include "core/layer.h"

static sf_status tokens_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    out[0] = in[0];
    out[1] = in[1] * in[2];
    out[2] = 1;
    return SF_OK;
}

/* The bytes of the input, where it is NHWC (a copy each way); 0 where it is NCHW (a transpose). */
static size_t nhwc_bytes(const sf_net *net, const sf_net_tensor *x)
{
    return x->nhwc ? (size_t)sf_net_rows(net) * (size_t)x->per_sample * sf_net_act_size(net) : 0;
}

static sf_status tokens_forward(sf_net *net, sf_net_layer *l, bool training)
{
    const sf_net_tensor *x = &net->tensors[l->in];
    if (x->nhwc) return net->be->copy(net->be, sf_net_act(net, l->out), sf_net_act(net, l->in), nhwc_bytes(net, x));
    return net->be->transpose(net->be, sf_net_rows(net), x->c, (int64_t)x->h * x->w, sf_net_act(net, l->in),
                              sf_net_act(net, l->out));
}

static sf_status tokens_backward(sf_net *net, sf_net_layer *l)
{
    const sf_net_tensor *x = &net->tensors[l->in];
    bool acc = false;
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    if (x->nhwc) SF_TRY(net->be->copy(net->be, dx, sf_net_grad(net, l->out), nhwc_bytes(net, x)));
    else
        SF_TRY(net->be->transpose(net->be, sf_net_rows(net), (int64_t)x->h * x->w, x->c, sf_net_grad(net, l->out), dx));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_tokens = {
    .name = "tokens",
    .inputs = 1,
    .flags = SF_KIND_MAKES_TOKENS | SF_KIND_PASSES_SPIKES | SF_KIND_NHWC_EACH,
    .shape = tokens_shape,
    .forward = tokens_forward,
    .backward = tokens_backward,
};
