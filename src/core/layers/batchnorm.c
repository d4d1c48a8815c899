/* batchnorm.c — batch norm over (T, B, H, W) per channel (Liang et al.: statistics over all time steps), PyTorch's
 * BatchNorm2d/1d: learned γ, β, running statistics with its momentum and unbiased variance. Directly followed by the
 * LIF that is its only reader, it is fused into that layer (fuse): it then only computes its statistics, and the
 * LIF runs it inside its kernels. As the only reader of a convolution or linear layer it cancels that layer's bias
 * in training, so the layer adds none there and the running mean takes it. Over several processes its statistics
 * are merged over the BN group. */
#include "core/layers/batchnorm.h"

#include "core/error.h"
#include "core/layer.h"

sf_bn_shape sf_net_bn_shape(const sf_net *net, int32_t t, int64_t rows)
{
    const sf_net_tensor *x = &net->tensors[t];
    const int64_t hw = (int64_t)x->h * x->w;
    if (x->nhwc) return (sf_bn_shape){.rows = rows * hw, .c = x->c, .hw = 1};
    return (sf_bn_shape){.rows = rows, .c = x->c, .hw = hw};
}

void sf_batchnorm_stats(sf_net *net, const sf_net_layer *bn, bool training, const float **mean, const float **var)
{
    *mean = training ? sf_net_slot_ptr(net, bn->mean) : net->buffers + bn->buf_off;
    *var = training ? sf_net_slot_ptr(net, bn->var) : net->buffers + bn->buf_off + bn->buf_numel;
}

static sf_status bn_shape_check(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    if (!(l->d.bn_eps > 0.0f)) return sf_fail(SF_ERR_INVALID, "layer %d (batchnorm): eps must be > 0", index);
    if (!(l->d.bn_momentum >= 0.0f && l->d.bn_momentum <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "layer %d (batchnorm): momentum must be in [0, 1]", index);
    return SF_OK;
}

/* γ, β and the two running statistics, one per channel */
static void bn_sizes(const sf_net_layer *l, const int32_t in[3], sf_kind_sizes *n)
{
    n->weight = n->bias = n->buffer = in[0];
}

/* γ = 1, β = 0, running mean 0, running var 1 */
static void bn_init(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, float *buffers)
{
    for (int64_t k = 0; k < l->w_numel; k++) params[l->w_off + k] = 1.0f;
    for (int64_t k = 0; k < l->buf_numel; k++) buffers[l->buf_off + l->buf_numel + k] = 1.0f;
}

/* Directly followed by a layer that can run it (SF_KIND_RUNS_BN) and is its only reader: that layer runs both
 * (Liang et al.'s fused kernels; docs/architecture.md, References). */
static void bn_fuse(sf_net *net, int32_t index)
{
    sf_net_layer *bn = &net->layers[index], *next = &net->layers[index + 1];
    const sf_net_tensor *x = &net->tensors[bn->in];
    if (bn->in > 0 && x->alias_of == bn->in && x->consumers == 1) {
        sf_net_layer *p = &net->layers[x->producer];
        p->bias_cancelled = sf_kind_has(p, SF_KIND_CHANNEL_BIAS) && p->b_off >= 0;
    }
    if (sf_kind_has(next, SF_KIND_RUNS_BN) && next->in == bn->out && net->tensors[bn->out].consumers == 1) {
        bn->absorbed = true;
        next->absorbs = index;
    }
}

static bool bn_needs_input(const sf_net *net, const sf_net_layer *l, int32_t k) { return k == 0; }

/* The batch statistics (saved), and over several processes every part's statistics and, fused, the sums the
 * backward exchanges (saved, so that they outlive the transfers that read them). */
static void bn_plan(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index)
{
    const size_t c = (size_t)net->tensors[l->in].c * sizeof(float);
    l->bn_gather = l->bn_sums = (sf_slot){0};
    sf_plan_saved(pl, &l->mean, c);
    sf_plan_saved(pl, &l->var, c);
    const sf_net_hooks *h = &net->hooks;
    if (h->bn_parts > 1) {
        sf_plan_saved(pl, &l->bn_gather, (size_t)h->bn_parts * 2 * c);
        if (sf_layer_backward_runs(net, index + 1)) sf_plan_saved(pl, &l->bn_sums, 2 * c);
    }
}

static sf_status bn_split_check(const sf_net *net, const sf_net_layer *l, int32_t index)
{
    if (net->hooks.bn_parts == 1 || l->absorbed) return SF_OK;
    return sf_fail(SF_ERR_UNSUPPORTED,
                   "layer %d (batch norm) is not directly followed by the LIF that is its only reader: statistics "
                   "over several processes (time_parallel or sync_bn) need the fused BN→LIF",
                   index);
}

/* Batch statistics over the BN group and the running statistics' update (training only); then the normalisation,
 * unless the next layer runs it. */
static sf_status bn_forward(sf_net *net, sf_net_layer *l, bool training)
{
    sf_backend *be = net->be;
    const float *x = sf_net_act(net, l->in);
    const sf_bn_shape sh = sf_net_bn_shape(net, l->in, sf_net_rows(net));
    if (training) {
        float *mean = sf_net_slot_ptr(net, l->mean), *var = sf_net_slot_ptr(net, l->var);
        SF_TRY(sf_net_bn_stats(net, sh, x, mean, var, l->bn_gather));
        /* the unbiased variance counts every value seen */
        SF_TRY(be->bn_update_running(be, sf_net_bn_shape(net, l->in, sf_net_bn_rows(net)), l->d.bn_momentum, mean, var,
                                     sf_net_cancelled_bias(net, l->in), net->buffers + l->buf_off, net->buffers + l->buf_off + l->buf_numel));
    }
    if (l->absorbed) return SF_OK;
    const float *mean, *var;
    sf_batchnorm_stats(net, l, training, &mean, &var);
    return be->bn_forward(be, sh, x, mean, var, l->d.bn_eps, sf_net_param(net, l->w_off), sf_net_param(net, l->b_off),
                          sf_net_act(net, l->out));
}

static sf_status bn_backward(sf_net *net, sf_net_layer *l)
{
    const float *x;
    bool acc = false;
    SF_TRY(sf_layer_input_value(net, l, 0, &x));
    float *dx = sf_layer_dx_target(net, sf_net_layer_index(net, l), l->in, l->dx_tmp, &acc);
    SF_TRY(net->be->bn_backward(net->be, sf_net_bn_shape(net, l->in, sf_net_rows(net)), x,
                                sf_net_slot_ptr(net, l->mean), sf_net_slot_ptr(net, l->var), l->d.bn_eps,
                                sf_net_param(net, l->w_off), sf_net_grad(net, l->out), dx,
                                sf_net_param_grad(net, l->w_off), sf_net_param_grad(net, l->b_off)));
    return sf_layer_accumulate(net, acc, l->in, dx);
}

const sf_layer_ops sf_kind_batchnorm = {
    .name = "batchnorm",
    .inputs = 1,
    .flags = SF_KIND_NHWC | SF_KIND_READS_RERUN | SF_KIND_ALWAYS_DX | SF_KIND_TOKENS,
    .buffer_names = {"running_mean", "running_var"},
    .shape = bn_shape_check,
    .sizes = bn_sizes,
    .init = bn_init,
    .fuse = bn_fuse,
    .needs_input = bn_needs_input,
    .plan = bn_plan,
    .split_check = bn_split_check,
    .forward = bn_forward,
    .backward = bn_backward,
};
