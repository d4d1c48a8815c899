/* pool2d.c — average and max pooling over square windows per channel, PyTorch's AvgPool2d (count_include_pad) and
 * MaxPool2d, with an optional border of at most kernel/2 (stride 0 means the kernel): two kinds of one geometry, in
 * either layout. A max-pool of spikes is spikes; it keeps where each window's maximum lay (argmax) for its backward. */
#include "core/error.h"
#include "core/layer.h"

static sf_status pool_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    const sf_layer_desc *d = &l->d;
    const char *name = l->ops->name;
    const int32_t h = in[1], w = in[2];
    if (d->kernel == 0 && d->kind == SF_LAYER_AVGPOOL2D) { /* global: one window over the whole plane */
        if (h != w || d->stride || d->padding)
            return sf_fail(SF_ERR_INVALID, "layer %d (%s): size = global needs a square input and no stride or pad, "
                           "got %dx%d, stride %d, pad %d", index, name, h, w, d->stride, d->padding);
        l->pool = (sf_pool_shape){.h = h, .w = w, .k = h, .stride = h, .oh = 1, .ow = 1};
        out[1] = out[2] = 1;
        return SF_OK;
    }
    const int32_t k = d->kernel, s = d->stride ? d->stride : d->kernel, p = d->padding;
    if (k > 0 && (p < 0 || 2 * p > k))
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): padding %d must be in [0, kernel/2] (kernel %d)", index, name, p,
                       k);
    if (k == 0) return sf_fail(SF_ERR_INVALID, "layer %d (%s): size = global is for avgpool only", index, name);
    if (k < 0 || s <= 0 || k > h + 2 * p || k > w + 2 * p)
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): kernel %d, stride %d do not fit the %dx%d input", index, name, k,
                       s, h, w);
    if (d->kind == SF_LAYER_MAXPOOL2D && k * k > 255) /* the argmax is one byte */
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): kernel %d too large (max 15)", index, name, k);
    l->pool = (sf_pool_shape){.h = h, .w = w, .k = k, .stride = s, .pad = p};
    l->pool.oh = (h + 2 * p - k) / s + 1;
    l->pool.ow = (w + 2 * p - k) / s + 1;
    out[1] = l->pool.oh, out[2] = l->pool.ow;
    return SF_OK;
}

/* The planes of all T·B rows, and their layout as the plan decided it. */
static void set_planes(const sf_net *net, sf_net_layer *l)
{
    const sf_net_tensor *x = &net->tensors[l->in];
    l->pool.n = sf_net_rows(net) * x->c;
    l->pool.c = x->nhwc ? x->c : 0;
}

/* ---- average */

static void avg_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index) { set_planes(net, l); }

static sf_status avg_rerun(sf_net *net, const sf_net_layer *l, const float *x, float *y, void *scratch)
{
    return net->be->avgpool_forward(net->be, &l->pool, x, y);
}

static sf_status avg_forward(sf_net *net, sf_net_layer *l, bool training)
{
    return avg_rerun(net, l, sf_net_act(net, l->in), sf_net_act(net, l->out), NULL);
}

static sf_status avg_backward(sf_net *net, sf_net_layer *l)
{
    bool acc = false;
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    if (!dx) return SF_OK;
    SF_TRY(net->be->avgpool_backward(net->be, &l->pool, sf_net_grad(net, l->out), dx));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_avgpool2d = {
    .name = "avgpool2d",
    .inputs = 1,
    .flags = SF_KIND_NHWC,
    .shape = pool_shape,
    .rerun = avg_rerun,
    .plan = avg_plan,
    .forward = avg_forward,
    .backward = avg_backward,
};

/* ---- max */

static void max_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    sf_plan_saved(pl, &l->argmax, (size_t)sf_net_rows(net) * (size_t)net->tensors[l->out].per_sample);
    set_planes(net, l);
}

static sf_status max_forward(sf_net *net, sf_net_layer *l, bool training)
{
    return net->be->maxpool_forward(net->be, &l->pool, sf_net_act(net, l->in), sf_net_act(net, l->out),
                                    sf_net_slot_ptr(net, l->argmax));
}

static sf_status max_backward(sf_net *net, sf_net_layer *l)
{
    bool acc = false;
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    if (!dx) return SF_OK;
    SF_TRY(net->be->maxpool_backward(net->be, &l->pool, sf_net_slot_ptr(net, l->argmax), sf_net_grad(net, l->out), dx));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_maxpool2d = {
    .name = "maxpool2d",
    .inputs = 1,
    .flags = SF_KIND_PASSES_SPIKES | SF_KIND_NHWC,
    .shape = pool_shape,
    .plan = max_plan,
    .forward = max_forward,
    .backward = max_backward,
};
