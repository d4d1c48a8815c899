/* token_mean.c — the mean over the N tokens of each sample and step, (D, N, 1) → (D, 1, 1): a spiking
 * transformer's head reads it (and the mean readout the mean over T). token_sum with 1/N, back by token_scale. */
#include "core/error.h"
#include "core/layer.h"

static sf_status token_mean_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    if (!sf_net_is_tokens(net, l->in))
        return sf_fail(SF_ERR_INVALID, "layer %d (token_mean): its input, tensor %d, is not tokens (add a tokens "
                       "layer first)", index, l->in);
    out[1] = out[2] = 1;
    return SF_OK;
}

static sf_status token_mean_forward(sf_net *net, sf_net_layer *l, bool training)
{
    const sf_token_shape sh = sf_net_token_shape(net, l->in);
    return net->be->token_sum(net->be, &sh, 1.0f / (float)sh.n, sf_net_act(net, l->in), sh.d, NULL, 0,
                              sf_net_act(net, l->out));
}

static sf_status token_mean_backward(sf_net *net, sf_net_layer *l)
{
    const sf_token_shape sh = sf_net_token_shape(net, l->in);
    bool acc = false;
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    SF_TRY(net->be->token_scale(net->be, &sh, 1.0f / (float)sh.n, sf_net_grad(net, l->out), NULL, 0, dx, sh.d));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_token_mean = {
    .name = "token_mean",
    .inputs = 1,
    .flags = SF_KIND_READS_TOKENS,
    .shape = token_mean_shape,
    .forward = token_mean_forward,
    .backward = token_mean_backward,
};
