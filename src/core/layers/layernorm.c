/* layernorm.c — LayerNorm over the D channels of each token (or the C features of a (C, 1, 1) input), PyTorch's
 * LayerNorm(D) with its affine γ, β: statistics per row, no running ones, so training and evaluation agree. Its
 * mean and 1/σ per row are saved for the backward (core/transformer.h: layernorm_forward, _backward). */
#include "core/error.h"
#include "core/layer.h"

static sf_status ln_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    if (!l->tokens && (in[1] != 1 || in[2] != 1))
        return sf_fail(SF_ERR_INVALID, "layer %d (layernorm): input is %dx%dx%d: it normalises tokens or features "
                       "(C, 1, 1); add a tokens or flatten layer first", index, in[0], in[1], in[2]);
    if (!(l->d.bn_eps > 0.0f)) return sf_fail(SF_ERR_INVALID, "layer %d (layernorm): eps must be > 0", index);
    return SF_OK;
}

static void ln_sizes(const sf_net_layer *l, const int32_t in[3], sf_kind_sizes *n) { n->weight = n->bias = in[0]; }

/* γ = 1, β = 0 */
static void ln_init(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, float *buffers)
{
    for (int64_t k = 0; k < l->w_numel; k++) params[l->w_off + k] = 1.0f;
    for (int64_t k = 0; k < l->b_numel; k++) params[l->b_off + k] = 0.0f;
}

static bool ln_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k) { return k == 0; }

/* Rows normalised: T·B·N tokens (N = 1 for features). */
static int64_t ln_rows(const sf_net *net, const sf_net_layer *l)
{
    const sf_net_tensor *x = &net->tensors[l->in];
    return sf_net_rows(net) * x->h * x->w;
}

static void ln_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    const int64_t rows = ln_rows(net, l);
    sf_plan_saved(pl, &l->ln_mean, (size_t)rows * sizeof(float));
    sf_plan_saved(pl, &l->ln_rstd, (size_t)rows * sizeof(float));
    sf_layer_plan_workspaces(net, pl, l, index, 0,
                             net->be->layernorm_workspace(net->be, rows, net->tensors[l->in].c));
}

static sf_status ln_forward(sf_net *net, sf_net_layer *l, bool training)
{
    return net->be->layernorm_forward(net->be, ln_rows(net, l), net->tensors[l->in].c, l->d.bn_eps,
                                      sf_net_act(net, l->in), sf_net_param(net, l->w_off), sf_net_param(net, l->b_off),
                                      sf_net_act(net, l->out), sf_net_slot_ptr(net, l->ln_mean),
                                      sf_net_slot_ptr(net, l->ln_rstd));
}

static sf_status ln_backward(sf_net *net, sf_net_layer *l)
{
    const float *x;
    bool acc = false;
    SF_TRY(sf_layer_input_value(net, l, 0, &x));
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    SF_TRY(net->be->layernorm_backward(net->be, ln_rows(net, l), net->tensors[l->in].c, x,
                                       sf_net_slot_ptr(net, l->ln_mean), sf_net_slot_ptr(net, l->ln_rstd),
                                       sf_net_param(net, l->w_off), sf_net_grad(net, l->out), dx,
                                       sf_net_param_grad(net, l->w_off), sf_net_param_grad(net, l->b_off),
                                       sf_net_slot_ptr(net, l->sws_b)));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_layernorm = {
    .name = "layernorm",
    .inputs = 1,
    .flags = SF_KIND_TOKENS | SF_KIND_READS_RERUN | SF_KIND_ALWAYS_DX,
    .shape = ln_shape,
    .sizes = ln_sizes,
    .init = ln_init,
    .needs_input = ln_needs_input,
    .plan = ln_plan,
    .forward = ln_forward,
    .backward = ln_backward,
};
