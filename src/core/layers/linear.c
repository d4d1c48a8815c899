/* linear.c — the linear layer: y = x·Wᵀ + b over T·B rows of a flattened input (B once on a static input:
 * once_over_t), PyTorch's Linear. Where its input is spikes it may run event-driven (Finkbeiner & Neftci): the
 * forward sums the weight columns of the active inputs from the compact form's lists, the backward reads the kept
 * bits (and, where the θ_grad neuron layer after it writes one, the nonzero pattern of dy); sparse.c chooses the
 * path per step from the measured density. On tokens (D, N, 1) it is the token linear of the spiking transformers:
 * the same ops over T·B·N rows of D features, dense. */
#include "core/error.h"
#include "core/layer.h"

static sf_status linear_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    const sf_layer_desc *d = &l->d;
    if (d->out_features <= 0) return sf_fail(SF_ERR_INVALID, "layer %d (linear): out_features must be >= 1", index);
    if (!l->tokens && (in[1] != 1 || in[2] != 1))
        return sf_fail(SF_ERR_INVALID, "layer %d (linear): input is %dx%dx%d; add a flatten layer first", index, in[0],
                       in[1], in[2]);
    out[0] = d->out_features; /* on tokens, N stays */
    return SF_OK;
}

static void linear_sizes(const sf_net_layer *l, const int32_t in[3], sf_kind_sizes *n)
{
    n->weight = (int64_t)l->d.out_features * in[0] * (l->tokens ? 1 : in[1] * in[2]);
    n->bias = l->d.bias ? l->d.out_features : 0;
}

static void linear_init(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, float *buffers)
{
    sf_layer_init_uniform(net, l, index, params, l->d.out_features);
}

static void linear_weight_shape(const sf_net_layer *l, sf_tensor_info *info)
{
    info->ndim = 2;
    info->shape[0] = l->d.out_features;
    info->shape[1] = l->w_numel / info->shape[0];
}

static bool linear_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k) { return k == 0; }

/* Features of a row: a token's channels, or the whole flattened input; rows: T·B, times N on tokens. */
static int32_t in_features(const sf_net *net, const sf_net_layer *l)
{
    const sf_net_tensor *x = &net->tensors[l->in];
    return (int32_t)(l->tokens ? x->c : x->per_sample);
}
static int64_t rows(const sf_net *net, const sf_net_layer *l)
{
    return l->once_over_t ? net->B : sf_net_rows(net) * (l->tokens ? net->tensors[l->in].h : 1);
}

/* The dense forward; spikes known to be 0/1 take the backend's faster product for them. */
static sf_status dense_forward(sf_net *net, const sf_net_layer *l, bool training, const float *x, float *y)
{
    sf_backend *be = net->be;
    SF_TRY((sf_net_tensor_is_binary(net, l->in) ? be->binary_linear_forward : be->linear_forward)(
        be, rows(net, l), in_features(net, l), l->d.out_features, x, sf_net_weight(net, l->w_off),
        sf_layer_bias(net, l, training), y));
    return l->once_over_t ? sf_layer_repeat_over_t(net, y, net->tensors[l->out].per_sample) : SF_OK;
}

static sf_status linear_rerun(sf_net *net, const sf_net_layer *l, const float *x, float *y, void *scratch)
{
    return dense_forward(net, l, true, x, y);
}

/* The forward of a layer reading spikes: event-driven from the lists, or dense from the values (expanded from the
 * bits where the producer did not write them this step). */
static sf_status spike_forward(sf_net *net, sf_net_layer *l, bool training, float *y)
{
    SF_TRY(sf_net_sparse_decide(net, l));
    sf_backend *be = net->be;
    const int32_t in = in_features(net, l), t = sf_net_root(net, l->in);
    sf_spikes c = sf_net_compact_of(net, t);
    if (l->fwd_sparse)
        return be->spike_linear_forward(be, sf_net_rows(net), in, l->d.out_features, &c, sf_net_weight(net, l->w_off),
                                        sf_layer_bias(net, l, training), y, sf_net_slot_ptr(net, l->sws_f));
    float *x = sf_net_act(net, t);
    if (t != 0 && !sf_net_compact_values(net, t)) SF_TRY(be->spikes_expand(be, sf_net_rows(net), in, c.bits, x));
    return be->binary_linear_forward(be, sf_net_rows(net), in, l->d.out_features, x, sf_net_weight(net, l->w_off),
                                     sf_layer_bias(net, l, training), y);
}

static sf_status linear_forward(sf_net *net, sf_net_layer *l, bool training)
{
    float *y = sf_net_act(net, l->out);
    if (l->sparse != SF_SPARSE_OFF) return spike_forward(net, l, training, y);
    return dense_forward(net, l, training, sf_net_act(net, l->in), y);
}

/* The event-driven backward from the input's kept bits (and dy's nonzero pattern where it has one). */
static sf_status spike_backward(sf_net *net, sf_net_layer *l, const float *dy, float *dx, float *db)
{
    sf_backend *be = net->be;
    const sf_net_tensor *o = &net->tensors[l->out];
    const uint32_t *bits = sf_net_slot_ptr(net, net->tensors[sf_net_root(net, l->in)].cbits);
    sf_spikes mask = {sf_net_slot_ptr(net, o->gbits), NULL, sf_net_slot_ptr(net, o->gcnt)};
    return be->spike_linear_backward(be, sf_net_rows(net), in_features(net, l), l->d.out_features, bits,
                                     sf_net_weight(net, l->w_off), dy, o->gmask ? &mask : NULL, dx,
                                     sf_net_param_grad(net, l->w_off), db, sf_net_slot_ptr(net, l->sws_b));
}

static sf_status linear_backward(sf_net *net, sf_net_layer *l)
{
    sf_backend *be = net->be;
    const int32_t i = sf_net_layer_index(net, l);
    const float *dy = sf_net_grad(net, l->out);
    bool acc = false;
    float *dw = sf_net_param_grad(net, l->w_off), *db;
    SF_TRY(sf_layer_bias_grad(net, l, &db));
    if (l->bwd_flags) { /* event-driven; a layer that may be but runs dense this step takes the paths below */
        float *dx = sf_layer_dx_target(net, i, l->in, l->dx_tmp, &acc);
        SF_TRY(spike_backward(net, l, dy, dx, db));
        return sf_layer_accumulate(net, acc, l->in, dx);
    }
    const int32_t in = in_features(net, l);
    const sf_net_tensor *kept = &net->tensors[sf_net_root(net, l->in)];
    if (kept->keep == SF_KEEP_BITS && sf_net_root(net, l->in) != 0 && be->binary_linear_backward_bits && !l->tokens) {
        /* the kept bits straight into the products: no float copy of the spikes */
        float *dx = sf_layer_dx_target(net, i, l->in, l->dx_tmp, &acc);
        SF_TRY(be->binary_linear_backward_bits(be, sf_net_rows(net), in, l->d.out_features,
                                               sf_net_slot_ptr(net, kept->cbits), sf_net_weight(net, l->w_off), dy, dx,
                                               dw, db));
        return sf_layer_accumulate(net, acc, l->in, dx);
    }
    const float *x;
    SF_TRY(sf_layer_input_value(net, l, 0, &x));
    float *dx = sf_layer_dx_target(net, i, l->in, l->dx_tmp, &acc);
    if (l->once_over_t) SF_TRY(sf_layer_sum_over_t(net, sf_net_grad(net, l->out), net->tensors[l->out].per_sample));
    SF_TRY((sf_net_tensor_is_binary(net, l->in) ? be->binary_linear_backward : be->linear_backward)(
        be, rows(net, l), in, l->d.out_features, x, sf_net_weight(net, l->w_off), dy, dx, dw, db));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

static void linear_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    const size_t ws =
        l->sparse == SF_SPARSE_OFF
            ? 0
            : net->be->spike_linear_workspace(net->be, sf_net_rows(net), in_features(net, l), l->d.out_features);
    sf_layer_plan_workspaces(net, pl, l, index, ws, ws);
}

/* ---- event-driven */

/* Not on tokens: the compact form's rows are whole samples there, not tokens. */
static bool linear_event_driven(const sf_net *net, const sf_net_layer *l)
{
    return sf_net_tensor_is_spikes(net, l->in) && !sf_net_is_tokens(net, l->in);
}

/* The density its input just got where that is known (host memory, or the last step's counts on a device). */
static void linear_sparse_decide(sf_net *net, sf_net_layer *l)
{
    if (net->be->host_memory || net->host_tcounts_valid) l->density = sf_net_ones_density(net, l->in);
    l->fwd_sparse = sf_net_sparse_below(l->sparse, l->density, l->xfwd);
    l->bwd_flags = sf_net_sparse_below(l->sparse, l->density, l->xbwd);
}

static void linear_sparse_measured(sf_net *net, sf_net_layer *l, bool with_backward)
{
    if (l->sparse == SF_SPARSE_OFF) return;
    l->density = sf_net_ones_density(net, l->in);
    if (with_backward && net->tensors[l->out].gmask) l->grad_density = sf_net_grad_density(net, l->out);
}

static sf_status linear_sparse_tune(sf_net *net, sf_net_layer *l)
{
    return sf_net_tune_linear(net, in_features(net, l), (int32_t)net->tensors[l->out].per_sample,
                              net->tensors[l->in].requires_grad, &l->xfwd, &l->xbwd);
}

const sf_layer_ops sf_kind_linear = {
    .name = "linear",
    .inputs = 1,
    .flags = SF_KIND_BINARY_FAST | SF_KIND_EVENT_INPUT | SF_KIND_GRAD_MASK | SF_KIND_TOKENS | SF_KIND_CHANNEL_BIAS |
             SF_KIND_ONCE_OVER_T,
    .shape = linear_shape,
    .sizes = linear_sizes,
    .init = linear_init,
    .weight_shape = linear_weight_shape,
    .needs_input = linear_needs_input,
    .rerun = linear_rerun,
    .plan = linear_plan,
    .forward = linear_forward,
    .backward = linear_backward,
    .event_driven = linear_event_driven,
    .sparse_decide = linear_sparse_decide,
    .sparse_measured = linear_sparse_measured,
    .sparse_tune = linear_sparse_tune,
};
