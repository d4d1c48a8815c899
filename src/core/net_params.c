/* net_params.c — parameters, gradients, buffers and optimizer state: allocation, PyTorch-default
 * initialisation, compiling, the hooks of a step over several processes, the named-tensor view used by checkpoints
 * and tests, and the resumable state. */
#include "core/error.h"
#include "core/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sf_status alloc_floats(sf_net *net, int64_t n, float **out, const char *what)
{
    if (*out || n == 0) return SF_OK;
    void *p = NULL;
    sf_status s = net->be->alloc(net->be, (size_t)n * sizeof(float), &p);
    if (s != SF_OK) return sf_fail_context(s, "allocating %s: ", what);
    SF_TRY(net->be->zero(net->be, p, (size_t)n * sizeof(float)));
    *out = p;
    return SF_OK;
}

/* PyTorch's defaults per kind (sf_layer_ops.init): Linear/Conv weights and biases U(±1/√fan_in) (kaiming_uniform,
 * a=√5), BN weight 1, bias 0, running mean 0, var 1; a PLIF's w as SpikingJelly's, -ln(tau - 1). */
static sf_status init_params(sf_net *net)
{
    float *hp = calloc((size_t)(net->n_params ? net->n_params : 1), sizeof *hp);
    float *hb = calloc((size_t)(net->n_buffers ? net->n_buffers : 1), sizeof *hb);
    if (!hp || !hb) {
        free(hp);
        free(hb);
        return sf_fail(SF_ERR_NOMEM, "out of memory initialising parameters");
    }
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (l->ops->init) l->ops->init(net, l, i, hp, hb);
    }
    sf_status s = net->n_params ? net->be->copy_from_host(net->be, net->params, hp, (size_t)net->n_params * 4) : SF_OK;
    if (s == SF_OK && net->n_buffers)
        s = net->be->copy_from_host(net->be, net->buffers, hb, (size_t)net->n_buffers * 4);
    free(hp);
    free(hb);
    return s;
}

/* Allocates and initialises parameters on first need, fixing the layer list. Under a 16-bit act type it also makes
 * the copy in that type that GEMMs and convolutions read (remade after every change; fp32 stays the master). */
static sf_status ensure_params(sf_net *net)
{
    if (net->params_ready) return SF_OK;
    if (net->n_layers == 0) return sf_fail(SF_ERR_STATE, "the network has no layers");
    SF_TRY(alloc_floats(net, net->n_params, &net->params, "parameters"));
    SF_TRY(alloc_floats(net, net->n_params, &net->grads, "gradients"));
    SF_TRY(alloc_floats(net, net->n_buffers, &net->buffers, "buffers"));
    if (net->be->act != SF_SCALAR_F32 && net->n_params) {
        sf_status s = net->be->alloc(net->be, (size_t)net->n_params * sf_net_act_size(net), &net->params_act);
        if (s != SF_OK) return sf_fail_context(s, "allocating the parameters' 16-bit copy: ");
    }
    SF_TRY(init_params(net));
    SF_TRY(sf_net_refresh_params_act(net, 0, net->n_params));
    net->params_ready = true;
    return SF_OK;
}

/* The plan's parameter, gradient, buffer and optimizer bytes (this process's part of the optimizer state) and its
 * total. */
static void plan_totals(sf_net *net)
{
    size_t f = sizeof(float);
    net->plan.params = (size_t)net->n_params * (f + (net->params_act ? sf_net_act_size(net) : 0));
    net->plan.grads = (size_t)net->n_params * f;
    net->plan.buffers = (size_t)net->n_buffers * f;
    net->plan.optimizer = (size_t)net->opt_n * f * (net->opt_b ? 2 : net->opt_a ? 1 : 0);
    net->plan.total = net->plan.params + net->plan.grads + net->plan.buffers + net->plan.optimizer +
                      net->plan.saved + net->plan.workspace;
    if (net->plan.total > net->peak_bytes) net->peak_bytes = net->plan.total;
}

sf_status sf_net_compile(sf_net *net, int64_t T, int64_t B)
{
    if (T <= 0 || B <= 0)
        return sf_fail(SF_ERR_INVALID, "compile: T=%lld and B=%lld must be >= 1", (long long)T, (long long)B);
    SF_TRY(ensure_params(net));
    sf_net_drop_graph(net); /* the plan below moves the arenas its kernels point into */
    net->compiled = false;
    net->T_all = T;
    net->T = T / net->hooks.nseg;
    net->B = B;
    SF_TRY(sf_net_plan_memory(net)); /* fuses BN→LIF, which the check below looks at */
    SF_TRY(sf_net_pipeline_check(net, T));
    net->compiled = false;
    net->have_forward = net->have_loss = net->have_backward = net->have_input = false;
    SF_TRY(sf_net_sparse_tune(net));
    plan_totals(net);
    net->compiled = true;
    return sf_net_put_loss_scale(net);
}

sf_status sf_net_set_hooks(sf_net *net, const sf_net_hooks *h)
{
    if (h && (h->nseg < 1 || h->seg < 0 || h->seg >= h->nseg || h->bn_parts < 1 || h->bn_part < 0 ||
              h->bn_part >= h->bn_parts))
        return sf_fail(SF_ERR_INVALID, "hooks: segment %d of %d, BN part %d of %d is not a valid place", h->seg,
                       h->nseg, h->bn_part, h->bn_parts);
    if (h && (h->nseg > 1 || h->bn_parts > 1) && !(h->send && h->recv && h->time_allgather && h->bn_allgather &&
                                                    h->bn_allreduce))
        return sf_fail(SF_ERR_INVALID, "hooks: a pipeline or merged BN statistics need every exchange hook");
    const int32_t parts = h && h->opt_parts > 1 ? h->opt_parts : 1, part = parts > 1 ? h->opt_part : 0;
    if (parts > 1 && (part < 0 || part >= parts || !h->params_allgather))
        return sf_fail(SF_ERR_INVALID, "hooks: optimizer part %d of %d needs a valid part and params_allgather", part,
                       parts);
    if (net->opt_a && net->opt_steps > 0) {
        int64_t lo, n;
        sf_net_part(net->n_params, part, parts, &lo, &n);
        if (lo < net->opt_lo || lo + n > net->opt_lo + net->opt_n)
            return sf_fail(SF_ERR_STATE, "hooks: the optimizer state of this trained network is sharded over %d "
                                         "processes: gather it whole before attaching the network to another job",
                           net->opt_parts);
    }
    if (net->opt_a) SF_TRY(sf_net_optimizer_repartition(net, part, parts));
    net->opt_part = part;
    net->opt_parts = parts;
    sf_net_drop_graph(net);
    memset(&net->hooks, 0, sizeof net->hooks);
    if (h) net->hooks = *h;
    else net->hooks.nseg = net->hooks.bn_parts = 1;
    net->hooks.opt_part = part;
    net->hooks.opt_parts = parts;
    net->compiled = false; /* the plan depends on the segment */
    return SF_OK;
}

sf_backend *sf_net_backend(sf_net *net) { return net->be; }

int64_t sf_net_local_steps(const sf_net *net) { return net->T; }

sf_status sf_net_memory_plan(const sf_net *net, sf_memory_plan *out)
{
    if (!net->compiled) return sf_fail(SF_ERR_STATE, "memory plan: compile the network first");
    *out = net->plan;
    return SF_OK;
}

size_t sf_net_peak_bytes(const sf_net *net)
{
    return net->peak_bytes + (net->be->held_bytes ? net->be->held_bytes(net->be) : 0);
}

/* ------------------------------------------------------------------------------------------------ optimizer */

sf_status sf_net_set_optimizer(sf_net *net, const sf_optim_params *p)
{
    if ((unsigned)p->kind > SF_OPT_ADAMW) return sf_fail(SF_ERR_INVALID, "unknown optimizer %d", (int)p->kind);
    if (!(p->lr >= 0.0f) || !(p->momentum >= 0.0f && p->momentum < 1.0f) || !(p->weight_decay >= 0.0f) ||
        !(p->beta1 >= 0.0f && p->beta1 < 1.0f) || !(p->beta2 >= 0.0f && p->beta2 < 1.0f) || !(p->eps > 0.0f))
        return sf_fail(SF_ERR_INVALID, "optimizer: need lr >= 0, momentum in [0,1), weight_decay >= 0, betas in "
                                       "[0,1), eps > 0");
    if (p->nesterov && (p->kind != SF_OPT_SGD || p->momentum <= 0.0f))
        return sf_fail(SF_ERR_INVALID, "optimizer: nesterov needs SGD with momentum > 0");
    SF_TRY(ensure_params(net));
    bool adam = p->kind != SF_OPT_SGD;
    if (net->opt_a) net->be->release(net->be, net->opt_a);
    if (net->opt_b) net->be->release(net->be, net->opt_b);
    net->opt_a = net->opt_b = NULL;
    net->opt_n = 0;
    int64_t lo, n;
    sf_net_part(net->n_params, net->opt_part, net->opt_parts, &lo, &n);
    /* a part may be empty (fewer parameters than processes): one float keeps the buffer's pointer meaningful */
    if (adam || p->momentum > 0.0f) SF_TRY(alloc_floats(net, n ? n : 1, &net->opt_a, "optimizer state"));
    if (adam) SF_TRY(alloc_floats(net, n ? n : 1, &net->opt_b, "optimizer state"));
    net->opt_lo = lo;
    net->opt_n = net->opt_a ? n : 0;
    net->opt = *p;
    net->opt_set = true;
    net->opt_steps = 0;
    if (net->compiled) plan_totals(net);
    return SF_OK;
}

int32_t sf_net_optimizer_state(sf_net *net, float *bufs[2], int64_t *lo, int64_t *n)
{
    bufs[0] = net->opt_a;
    bufs[1] = net->opt_b;
    *lo = net->opt_lo;
    *n = net->opt_n;
    return net->opt_b ? 2 : net->opt_a ? 1 : 0;
}

sf_status sf_net_optimizer_repartition(sf_net *net, int32_t part, int32_t parts)
{
    if (parts < 1 || part < 0 || part >= parts)
        return sf_fail(SF_ERR_INVALID, "optimizer state: part %d of %d", part, parts);
    int64_t lo, n;
    sf_net_part(net->n_params, part, parts, &lo, &n);
    net->opt_part = part;
    net->opt_parts = parts;
    if (!net->opt_a || (lo == net->opt_lo && n == net->opt_n)) return SF_OK;
    /* what both parts hold is copied over; the rest of the new part starts at zero */
    const int64_t from = lo > net->opt_lo ? lo : net->opt_lo;
    const int64_t to = lo + n < net->opt_lo + net->opt_n ? lo + n : net->opt_lo + net->opt_n;
    float **state[2] = {&net->opt_a, &net->opt_b};
    for (int k = 0; k < 2 && *state[k]; k++) {
        float *fresh = NULL;
        SF_TRY(alloc_floats(net, n ? n : 1, &fresh, "optimizer state"));
        sf_status s = to > from ? net->be->copy(net->be, fresh + (from - lo), *state[k] + (from - net->opt_lo),
                                                (size_t)(to - from) * sizeof(float))
                                : SF_OK;
        if (s != SF_OK) {
            net->be->release(net->be, fresh);
            return s;
        }
        net->be->release(net->be, *state[k]);
        *state[k] = fresh;
    }
    net->opt_lo = lo;
    net->opt_n = n;
    if (net->compiled) plan_totals(net);
    return SF_OK;
}

sf_status sf_net_set_lr(sf_net *net, float lr)
{
    if (!net->opt_set) return sf_fail(SF_ERR_STATE, "set_lr: no optimizer set");
    if (!(lr >= 0.0f) || isinf(lr)) return sf_fail(SF_ERR_INVALID, "learning rate %g must be finite and >= 0", lr);
    net->opt.lr = lr;
    return SF_OK;
}

/* ------------------------------------------------------------------------------------------------ named tensors */

typedef struct tensor_ref {
    sf_tensor_info info;
    float *base; /* the role's allocation */
    int64_t off;
} tensor_ref;

/* The i-th parameter-shaped tensor (in layer order): its layer, whether it is the bias, its name and shape. */
static bool param_at(const sf_net *net, int32_t i, const sf_net_layer **layer, int32_t *index, bool *is_bias)
{
    for (int32_t k = 0; k < net->n_layers; k++) {
        const sf_net_layer *l = &net->layers[k];
        if (l->w_off >= 0 && i-- == 0) {
            *layer = l, *index = k, *is_bias = false;
            return true;
        }
        if (l->b_off >= 0 && i-- == 0) {
            *layer = l, *index = k, *is_bias = true;
            return true;
        }
    }
    return false;
}

static int32_t param_count(const sf_net *net)
{
    int32_t n = 0;
    for (int32_t k = 0; k < net->n_layers; k++) n += (net->layers[k].w_off >= 0) + (net->layers[k].b_off >= 0);
    return n;
}

/* The buffers of layer l (its kind's, where it has them). */
static int32_t buffers_of(const sf_net_layer *l)
{
    int32_t n = 0;
    while (l->buf_off >= 0 && n < SF_KIND_BUFFERS && l->ops->buffer_names[n]) n++;
    return n;
}

static int32_t buffer_count(const sf_net *net)
{
    int32_t n = 0;
    for (int32_t k = 0; k < net->n_layers; k++) n += buffers_of(&net->layers[k]);
    return n;
}

static void param_shape(const sf_net_layer *l, bool is_bias, sf_tensor_info *info)
{
    info->numel = is_bias ? l->b_numel : l->w_numel;
    if (is_bias || !l->ops->weight_shape) {
        info->ndim = 1;
        info->shape[0] = info->numel;
        return;
    }
    l->ops->weight_shape(l, info);
}

static sf_status resolve(const sf_net *net, sf_tensor_role role, int32_t i, tensor_ref *r)
{
    memset(r, 0, sizeof *r);
    if (!net->params_ready) return sf_fail(SF_ERR_STATE, "tensors exist once the network is compiled");
    if (role == SF_ROLE_BUFFER) {
        int32_t n = 0;
        for (int32_t k = 0; k < net->n_layers; k++) {
            const sf_net_layer *l = &net->layers[k];
            const int32_t here = buffers_of(l);
            if (i >= n && i < n + here) {
                snprintf(r->info.name, sizeof r->info.name, "%d.%s", k, l->ops->buffer_names[i - n]);
                r->info.ndim = 1;
                r->info.shape[0] = r->info.numel = l->buf_numel;
                r->base = net->buffers;
                r->off = l->buf_off + (i - n) * l->buf_numel;
                return SF_OK;
            }
            n += here;
        }
        return sf_fail(SF_ERR_INVALID, "buffer index %d out of range", i);
    }
    int32_t np = param_count(net);
    int32_t slot_i = i;
    const char *suffix = "";
    float *base = net->params;
    if (role == SF_ROLE_GRAD) {
        base = net->grads;
        suffix = ".grad";
    } else if (role == SF_ROLE_OPTIMIZER) {
        bool adam = net->opt_b != NULL;
        if (!net->opt_a || i < 0 || i >= np * (adam ? 2 : 1))
            return sf_fail(SF_ERR_INVALID, "optimizer tensor index %d out of range", i);
        base = i < np ? net->opt_a : net->opt_b;
        suffix = !adam ? ".momentum" : i < np ? ".adam_m" : ".adam_v";
        slot_i = i % np;
    } else if (role != SF_ROLE_PARAM) {
        return sf_fail(SF_ERR_INVALID, "unknown tensor role %d", (int)role);
    }
    const sf_net_layer *l;
    int32_t k;
    bool is_bias;
    if (slot_i < 0 || !param_at(net, slot_i, &l, &k, &is_bias))
        return sf_fail(SF_ERR_INVALID, "parameter index %d out of range", i);
    const char *pname = is_bias ? "bias" : l->ops->weight_name ? l->ops->weight_name : "weight";
    snprintf(r->info.name, sizeof r->info.name, "%d.%s%s", k, pname, suffix);
    param_shape(l, is_bias, &r->info);
    r->base = base;
    r->off = is_bias ? l->b_off : l->w_off;
    if (role == SF_ROLE_OPTIMIZER) {
        if (r->off < net->opt_lo || r->off + r->info.numel > net->opt_lo + net->opt_n)
            return sf_fail(SF_ERR_STATE, "optimizer tensor %s: this process holds part %d of %d of the sharded "
                                         "optimizer state, which does not cover it (gather the state whole first)",
                           r->info.name, net->opt_part, net->opt_parts);
        r->off -= net->opt_lo;
    }
    return SF_OK;
}

int32_t sf_net_tensor_count(const sf_net *net, sf_tensor_role role)
{
    switch (role) {
    case SF_ROLE_PARAM:
    case SF_ROLE_GRAD: return param_count(net);
    case SF_ROLE_BUFFER: return buffer_count(net);
    case SF_ROLE_OPTIMIZER: return net->opt_a ? param_count(net) * (net->opt_b ? 2 : 1) : 0;
    }
    return 0;
}

sf_status sf_net_tensor_info(const sf_net *net, sf_tensor_role role, int32_t i, sf_tensor_info *out)
{
    sf_net *mut = (sf_net *)net; /* tensors come into being on first access */
    SF_TRY(ensure_params(mut));
    tensor_ref r;
    SF_TRY(resolve(net, role, i, &r));
    *out = r.info;
    return SF_OK;
}

sf_status sf_net_tensor_read(const sf_net *net, sf_tensor_role role, int32_t i, float *host_dst)
{
    SF_TRY(ensure_params((sf_net *)net));
    tensor_ref r;
    SF_TRY(resolve(net, role, i, &r));
    return net->be->copy_to_host(net->be, host_dst, r.base + r.off, (size_t)r.info.numel * sizeof(float));
}

sf_status sf_net_tensor_write(sf_net *net, sf_tensor_role role, int32_t i, const float *host_src)
{
    SF_TRY(ensure_params(net));
    tensor_ref r;
    SF_TRY(resolve(net, role, i, &r));
    SF_TRY(net->be->copy_from_host(net->be, r.base + r.off, host_src, (size_t)r.info.numel * sizeof(float)));
    return role == SF_ROLE_PARAM ? sf_net_refresh_params_act(net, r.off, r.info.numel) : SF_OK;
}

sf_status sf_net_tensor_ptr(sf_net *net, sf_tensor_role role, int32_t i, float **out)
{
    *out = NULL;
    SF_TRY(ensure_params(net));
    tensor_ref r;
    SF_TRY(resolve(net, role, i, &r));
    *out = r.base + r.off;
    return SF_OK;
}

sf_status sf_net_get_state(const sf_net *net, sf_net_state *out)
{
    out->optimizer_steps = net->opt_steps;
    out->rng_seed = net->p.seed;
    out->rng_counter = net->rng_counter;
    out->loss_scale = net->loss_scale;
    out->loss_scale_steps = net->loss_scale_steps;
    return SF_OK;
}

sf_status sf_net_set_state(sf_net *net, const sf_net_state *st)
{
    if (st->optimizer_steps < 0) return sf_fail(SF_ERR_INVALID, "state: negative optimizer step count");
    if (!(st->loss_scale > 0.0f) || isinf(st->loss_scale) || st->loss_scale_steps < 0)
        return sf_fail(SF_ERR_INVALID, "state: loss scale %g must be finite and > 0, with a step count >= 0",
                       (double)st->loss_scale);
    net->opt_steps = st->optimizer_steps;
    net->p.seed = st->rng_seed;
    net->rng_counter = st->rng_counter;
    if (!sf_net_scales_loss(net)) return SF_OK; /* the loss scale is fp16's alone */
    net->loss_scale = st->loss_scale;
    net->loss_scale_steps = st->loss_scale_steps;
    return sf_net_put_loss_scale(net);
}
