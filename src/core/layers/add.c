/* add.c — two tensors of one shape combined element by element: a residual shortcut, input2 being the block's
 * input. Its connect (sf_connect) is the sum, or SEW-ResNet's AND or IAND of spikes (a·b, (1 − a)·b). The sum's
 * backward hands dy to both inputs and reads neither; the products' backward reads both (kept as the plan keeps
 * spikes: bytes, bits, or recomputed by their LIF). Element-wise, so any layout will do. */
#include "core/error.h"
#include "core/layer.h"

static const char *const connect_names[] = {"add", "and", "iand"};

const char *sf_connect_name(sf_connect c) { return (unsigned)c <= SF_CONNECT_IAND ? connect_names[c] : "?"; }

static bool is_sum(const sf_net_layer *l) { return l->d.connect == SF_CONNECT_ADD; }

static sf_status add_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    if ((unsigned)l->d.connect > SF_CONNECT_IAND)
        return sf_fail(SF_ERR_INVALID, "layer %d (add): connect = %d is not add, and or iand", index,
                       (int)l->d.connect);
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

static const char *add_label(const sf_net_layer *l) { return is_sum(l) ? "add" : sf_connect_name(l->d.connect); }

/* The products of spikes are spikes; a sum of spikes counts to 2. */
static bool add_passes_spikes(const sf_net_layer *l) { return !is_sum(l); }

/* The products' backward reads each input for the other one's gradient: a for db, b for da. */
static bool add_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k)
{
    return !is_sum(l) && net->tensors[sf_net_root(net, k == 0 ? l->in2 : l->in)].requires_grad;
}

static int64_t elements(const sf_net *net, const sf_net_layer *l)
{
    return sf_net_rows(net) * net->tensors[l->in].per_sample;
}

static sf_status add_forward(sf_net *net, sf_net_layer *l, bool training)
{
    const float *a = sf_net_act(net, l->in), *b = sf_net_act(net, l->in2);
    float *y = sf_net_act(net, l->out);
    if (is_sum(l)) return net->be->add(net->be, elements(net, l), a, b, y);
    return net->be->connect_forward(net->be, (sf_connect)l->d.connect, elements(net, l), a, b, y);
}

/* The sum: dy into each input's gradient, copied by its first writer, added otherwise (and for the second of one
 * tensor read twice). */
static sf_status sum_backward(sf_net *net, sf_net_layer *l)
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

/* AND, IAND: both gradients from one op, each straight into its input's gradient where this layer writes it first,
 * else into its scratch (dx_tmp, dx_tmp2: also the second of one tensor read twice) and added. */
static sf_status product_backward(sf_net *net, sf_net_layer *l)
{
    const int32_t i = sf_net_layer_index(net, l);
    const bool grad_a = net->tensors[sf_net_root(net, l->in)].requires_grad,
               grad_b = net->tensors[sf_net_root(net, l->in2)].requires_grad;
    const float *a = NULL, *b = NULL;
    if (grad_b) SF_TRY(sf_layer_input_value(net, l, 0, &a));
    if (grad_a) SF_TRY(sf_layer_input_value(net, l, 1, &b));
    bool acc_a = false, acc_b = false;
    float *da = NULL, *db = NULL;
    if (grad_a) da = sf_layer_dx_target(net, i, l->in, l->dx_tmp, &acc_a);
    if (grad_b) {
        if (sf_net_root(net, l->in) == sf_net_root(net, l->in2)) db = sf_net_slot_ptr(net, l->dx_tmp2), acc_b = true;
        else db = sf_layer_dx_target(net, i, l->in2, l->dx_tmp2, &acc_b);
    }
    SF_TRY(net->be->connect_backward(net->be, (sf_connect)l->d.connect, elements(net, l), a, b,
                                     sf_net_grad(net, l->out), da, db));
    SF_TRY(sf_layer_accumulate(net, acc_a, l->in, da));
    return sf_layer_accumulate(net, acc_b, l->in2, db);
}

static sf_status add_backward(sf_net *net, sf_net_layer *l)
{
    return is_sum(l) ? sum_backward(net, l) : product_backward(net, l);
}

const sf_layer_ops sf_kind_add = {
    .name = "add",
    .inputs = 2,
    .flags = SF_KIND_NHWC | SF_KIND_TOKENS,
    .shape = add_shape,
    .label = add_label,
    .passes_spikes = add_passes_spikes,
    .needs_input = add_needs_input,
    .forward = add_forward,
    .backward = add_backward,
};
