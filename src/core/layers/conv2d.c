/* conv2d.c — the 2-d convolution, PyTorch's Conv2d: square kernel, stride, zero padding, W [cout, cin, k, k]. Its
 * two sides may differ in layout (NHWC on a backend that prefers it, conv_nhwc); the backend copies the NCHW one.
 * Its ops need workspace, planned per pass, and a backend may offer leaner choices of it (conv_lean). On a static
 * input it may run once, on the B samples (once_over_t). */
#include "core/error.h"
#include "core/layer.h"

static void conv_defaults(sf_layer_desc *d)
{
    d->kernel = 3;
    d->stride = 1;
}

static sf_status conv_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    const sf_layer_desc *d = &l->d;
    const int32_t h = in[1], w = in[2];
    if (d->out_channels <= 0 || d->kernel <= 0 || d->stride <= 0 || d->padding < 0)
        return sf_fail(SF_ERR_INVALID, "layer %d (conv2d): out_channels, kernel, stride must be >= 1, padding >= 0",
                       index);
    if (h + 2 * d->padding < d->kernel || w + 2 * d->padding < d->kernel)
        return sf_fail(SF_ERR_INVALID, "layer %d (conv2d): kernel %d larger than the padded input %dx%d", index,
                       d->kernel, h + 2 * d->padding, w + 2 * d->padding);
    l->conv = (sf_conv_shape){
        .cin = in[0], .h = h, .w = w, .cout = d->out_channels, .k = d->kernel, .stride = d->stride, .pad = d->padding};
    l->conv.oh = (h + 2 * d->padding - d->kernel) / d->stride + 1;
    l->conv.ow = (w + 2 * d->padding - d->kernel) / d->stride + 1;
    out[0] = d->out_channels, out[1] = l->conv.oh, out[2] = l->conv.ow;
    return SF_OK;
}

static void conv_sizes(const sf_net_layer *l, const int32_t in[3], sf_kind_sizes *n)
{
    n->weight = (int64_t)l->d.out_channels * in[0] * l->d.kernel * l->d.kernel;
    n->bias = l->d.bias ? l->d.out_channels : 0;
}

static void conv_init(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, float *buffers)
{
    sf_layer_init_uniform(net, l, index, params, l->d.out_channels);
}

static void conv_weight_shape(const sf_net_layer *l, sf_tensor_info *info)
{
    const sf_layer_desc *d = &l->d;
    info->ndim = 4;
    info->shape[0] = d->out_channels;
    info->shape[1] = l->w_numel / ((int64_t)d->out_channels * d->kernel * d->kernel);
    info->shape[2] = info->shape[3] = d->kernel;
}

static bool conv_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k) { return k == 0; }

static sf_status conv_run(sf_net *net, const sf_net_layer *l, bool training, const float *x, float *y, void *scratch)
{
    SF_TRY(net->be->conv_forward(net->be, &l->conv, x, sf_net_weight(net, l->w_off), sf_layer_bias(net, l, training), y,
                                 scratch));
    return l->once_over_t ? sf_layer_repeat_over_t(net, y, net->tensors[l->out].per_sample) : SF_OK;
}

static sf_status conv_rerun(sf_net *net, const sf_net_layer *l, const float *x, float *y, void *scratch)
{
    return conv_run(net, l, true, x, y, scratch);
}

static size_t conv_rerun_workspace(sf_net *net, const sf_net_layer *l)
{
    return net->be->conv_workspace(net->be, &l->conv, SF_CONV_PASS_FORWARD);
}

/* The shape as the plan decided it (layouts, a binary input, T·B images or B once), then each pass's workspace. */
static void conv_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    l->conv.x_nhwc = net->tensors[l->in].nhwc;
    l->conv.y_nhwc = net->tensors[l->out].nhwc;
    l->conv.x_binary = sf_net_tensor_is_binary(net, l->in);
    l->conv.n = l->once_over_t ? net->B : sf_net_rows(net);
    const size_t fwd = net->be->conv_workspace(net->be, &l->conv, SF_CONV_PASS_FORWARD);
    const size_t bwd =
        sf_layer_backward_runs(net, index) ? net->be->conv_workspace(net->be, &l->conv, SF_CONV_PASS_BACKWARD) : 0;
    sf_layer_plan_workspaces(net, pl, l, index, fwd, bwd);
}

static bool conv_lean_workspace(sf_net *net, const sf_net_layer *l, sf_conv_pass pass, bool take, sf_conv_lean *q)
{
    return net->be->conv_lean && net->be->conv_lean(net->be, &l->conv, pass, take, q);
}

static bool conv_same_workspace(const sf_net_layer *a, const sf_net_layer *b)
{
    return sf_conv_shape_equal(&a->conv, &b->conv);
}

static sf_status conv_forward(sf_net *net, sf_net_layer *l, bool training)
{
    return conv_run(net, l, training, sf_net_act(net, l->in), sf_net_act(net, l->out), sf_net_slot_ptr(net, l->sws_f));
}

static sf_status conv_backward(sf_net *net, sf_net_layer *l)
{
    const float *x;
    bool acc = false;
    SF_TRY(sf_layer_input_value(net, l, 0, &x));
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc), *db;
    SF_TRY(sf_layer_bias_grad(net, l, &db));
    if (l->once_over_t) SF_TRY(sf_layer_sum_over_t(net, sf_net_grad(net, l->out), net->tensors[l->out].per_sample));
    SF_TRY(net->be->conv_backward(net->be, &l->conv, x, sf_net_weight(net, l->w_off), sf_net_grad(net, l->out), dx,
                                  sf_net_param_grad(net, l->w_off), db, sf_net_slot_ptr(net, l->sws_b)));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_conv2d = {
    .name = "conv2d",
    .inputs = 1,
    .flags = SF_KIND_NHWC_EACH | SF_KIND_DX_AFTER_X | SF_KIND_BINARY_FAST | SF_KIND_CHANNEL_BIAS | SF_KIND_ONCE_OVER_T,
    .defaults = conv_defaults,
    .shape = conv_shape,
    .sizes = conv_sizes,
    .init = conv_init,
    .weight_shape = conv_weight_shape,
    .needs_input = conv_needs_input,
    .rerun = conv_rerun,
    .rerun_workspace = conv_rerun_workspace,
    .plan = conv_plan,
    .lean_workspace = conv_lean_workspace,
    .same_workspace = conv_same_workspace,
    .forward = conv_forward,
    .backward = conv_backward,
};
