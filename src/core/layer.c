/* layer.c — what the engine gives every layer kind (layer.h): the values its backward reads, rebuilt from where the
 * plan kept them, where it writes its input gradients, its planned workspaces and PyTorch's default initialisation. */
#include "core/layer.h"

#include "core/error.h"
#include "core/rng.h"

#include <math.h>

/* RNG streams: parameter initialisation draws from stream INIT_STREAM + layer; dropout uses counters from 0. */
#define INIT_STREAM (1ull << 40)

/* The value of tensor `id` in buf (unless it stays where the forward left it): kept as is, expanded from bytes or bits,
 * recomputed by rerunning its producer (Liang et al.: store the Conv/FC output only), or in lean mode rerun from the
 * producer's own input, rebuilt into `rerun_in` where needed. */
static sf_status value_into(sf_net *net, int32_t id, float *buf, float *rerun_in, void *rerun_scratch,
                            const float **out)
{
    const sf_net_tensor *x = &net->tensors[sf_net_root(net, id)];
    switch (x->keep) {
    case SF_KEEP_FLOAT: *out = sf_net_slot_ptr(net, x->act); return SF_OK;
    case SF_KEEP_BYTES:
        SF_TRY(net->be->u8_to_act(net->be, sf_net_rows(net) * x->per_sample, sf_net_slot_ptr(net, x->bytes), buf));
        *out = buf;
        return SF_OK;
    case SF_KEEP_BITS:
        if (sf_net_root(net, id) == 0) { /* the input's values stay on the device for the whole step (x = NULL) */
            *out = sf_net_slot_ptr(net, x->act);
            return SF_OK;
        }
        SF_TRY(net->be->spikes_expand(net->be, sf_net_rows(net), x->per_sample, sf_net_slot_ptr(net, x->cbits), buf));
        *out = buf;
        return SF_OK;
    case SF_KEEP_RECOMPUTE: {
        const sf_net_layer *p = &net->layers[x->producer];
        SF_TRY(p->ops->recompute(net, p, buf));
        *out = buf;
        return SF_OK;
    }
    case SF_KEEP_RERUN: { /* the producer's input is never rerun itself (plan.c, rerunnable) */
        const sf_net_layer *p = &net->layers[x->producer];
        const float *in;
        SF_TRY(value_into(net, p->in, rerun_in, NULL, NULL, &in));
        SF_TRY(p->ops->rerun(net, p, in, buf, rerun_scratch));
        *out = buf;
        return SF_OK;
    }
    case SF_KEEP_NONE: break;
    }
    return sf_fail(SF_ERR_STATE, "internal: tensor %d was not kept for the backward", id);
}

sf_status sf_layer_input_value(sf_net *net, const sf_net_layer *l, int32_t k, const float **out)
{
    const int32_t id = sf_layer_input(l, k);
    if (k > 0) return value_into(net, id, sf_net_slot_ptr(net, l->in2_float), NULL, NULL, out);
    float *buf = l->rebuild_in_grad ? sf_net_grad(net, id) : sf_net_slot_ptr(net, l->in_float);
    return value_into(net, id, buf, sf_net_slot_ptr(net, l->rerun_in), sf_net_slot_ptr(net, l->rerun_scratch), out);
}

float *sf_layer_dx_target(sf_net *net, int32_t writer, int32_t id, sf_slot tmp, bool *accumulate)
{
    const sf_net_tensor *x = &net->tensors[sf_net_root(net, id)];
    *accumulate = false;
    if (!x->requires_grad) return sf_net_slot_ptr(net, tmp); /* NULL unless the op insists on a dx */
    if (x->first_grad_writer == writer) return sf_net_grad(net, id);
    *accumulate = true;
    return sf_net_slot_ptr(net, tmp);
}

sf_status sf_layer_repeat_over_t(sf_net *net, void *y, int64_t per_sample)
{
    const int64_t step = net->B * per_sample;
    const size_t bytes = (size_t)step * sf_net_act_size(net);
    for (int64_t t = 1; t < net->T; t++) SF_TRY(net->be->copy(net->be, sf_net_act_at(net, y, t * step), y, bytes));
    return SF_OK;
}

/* One token sum: the T steps as the tokens of one set of B·per_sample channels, summed in float or wider and
 * rounded once (T − 1 additions in a 16-bit type would round at each), in place: each channel is read before its
 * sum is written. */
sf_status sf_layer_sum_over_t(sf_net *net, void *dy, int64_t per_sample)
{
    const int64_t step = net->B * per_sample;
    const sf_token_shape steps = {.tb = 1, .n = (int32_t)net->T, .d = (int32_t)step};
    return net->be->token_sum(net->be, &steps, 1.0f, dy, step, NULL, 0, dy);
}

sf_status sf_layer_accumulate(sf_net *net, bool accumulate, int32_t id, const float *tmp)
{
    if (!accumulate) return SF_OK;
    return net->be->axpy(net->be, sf_net_rows(net) * net->tensors[sf_net_root(net, id)].per_sample, 1.0f, tmp,
                         sf_net_grad(net, id));
}

void sf_layer_plan_workspaces(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index, size_t fwd, size_t bwd)
{
    sf_plan_work(pl, &l->sws_f, fwd, sf_plan_t_fwd(pl, index), sf_plan_t_fwd(pl, index));
    if (sf_layer_backward_runs(net, index))
        sf_plan_work(pl, &l->sws_b, bwd, sf_plan_t_bwd(pl, index), sf_plan_t_bwd(pl, index));
}

void sf_layer_init_uniform(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, int64_t fan_out)
{
    double bound = 1.0 / sqrt((double)(l->w_numel / fan_out));
    uint64_t stream = INIT_STREAM + (uint64_t)index;
    for (int64_t k = 0; k < l->w_numel; k++)
        params[l->w_off + k] =
            (float)((2.0 * sf_uniform(net->p.seed, stream, (uint64_t)k) - 1.0) * bound) * l->d.init_gain;
    for (int64_t k = 0; k < l->b_numel; k++)
        params[l->b_off + k] =
            (float)((2.0 * sf_uniform(net->p.seed, stream, (uint64_t)(l->w_numel + k)) - 1.0) * bound);
}

sf_status sf_layer_bias_grad(sf_net *net, const sf_net_layer *l, float **db)
{
    *db = sf_net_param_grad(net, l->b_off);
    if (!l->bias_cancelled || !*db) return SF_OK;
    SF_TRY(net->be->zero(net->be, *db, (size_t)l->b_numel * sizeof(float)));
    *db = NULL;
    return SF_OK;
}
