/* net_step.c — one training or evaluation step: the backend-only body of a training step (forward, loss, backward,
 * finite checks), its replay as one recorded backend graph (a CUDA graph) where every op of the body repeats with
 * the same arguments from step to step, the optimizer update and the 16-bit weight copy it refreshes, fp16's dynamic
 * loss scale, and the one-call train and eval steps. */
#include "core/error.h"
#include "core/layer.h"

/* GradScaler's defaults: start at 2^16, halve on an overflow, double after 2000 steps without one. Below 2^-24
 * (fp16's smallest step) scaling cannot help any more: the step fails as a NaN would. */
#define SF_LOSS_SCALE_INIT 65536.0f
#define SF_LOSS_SCALE_GROWTH_STEPS 2000
#define SF_LOSS_SCALE_MIN 0x1p-24f

float sf_net_initial_loss_scale(const sf_net *net) { return sf_net_scales_loss(net) ? SF_LOSS_SCALE_INIT : 1.0f; }

sf_status sf_net_refresh_params_act(sf_net *net, int64_t off, int64_t n)
{
    if (!net->params_act || n == 0) return SF_OK;
    sf_backend *be = net->be;
    return be->convert(be, n, SF_SCALAR_F32, net->params + off, be->act,
                       (char *)net->params_act + (size_t)off * sf_net_act_size(net));
}

sf_status sf_net_put_loss_scale(sf_net *net)
{
    if (!net->compiled || !sf_net_scales_loss(net)) return SF_OK;
    const float v[2] = {net->loss_scale, 1.0f / net->loss_scale}; /* powers of two: the reciprocal is exact */
    return net->be->copy_from_host(net->be, net->stats + SF_STAT_SCALE, v, sizeof v);
}

/* Forward, loss, backward and the finite checks of the loss and of every gradient: the input and the labels are
 * already on the backend; nothing here reads host memory or returns values to the host. */
static sf_status body_ops(sf_net *net)
{
    sf_backend *be = net->be;
    SF_TRY(sf_net_run_forward(net, true));
    SF_TRY(sf_net_loss_ops(net, true));
    SF_TRY(sf_net_backward(net));
    SF_TRY(be->zero(be, net->stats + SF_STAT_LOSS_BAD, 2 * sizeof(float)));
    SF_TRY(be->check_finite(be, 1, net->stats + SF_STAT_LOSS, net->stats + SF_STAT_LOSS_BAD));
    if (net->n_params) SF_TRY(be->check_finite(be, net->n_params, net->grads, net->stats + SF_STAT_GRAD_BAD));
    return SF_OK;
}

/* Forward in training or evaluation mode, the backward alone, or the training step's body: what a body runs. */
static sf_status run_plainly(sf_net *net, sf_net_body body)
{
    switch (body) {
    case SF_BODY_TRAIN_STEP: return body_ops(net);
    case SF_BODY_FORWARD_TRAINING: return sf_net_run_forward(net, true);
    case SF_BODY_FORWARD_EVAL: return sf_net_run_forward(net, false);
    case SF_BODY_BACKWARD: return sf_net_backward_layers(net);
    case SF_NET_BODIES: break;
    }
    return sf_fail(SF_ERR_INVALID, "unknown body of work %d", (int)body);
}

/* A recording is valid while the kernels' by-value arguments stay fixed: not with dropout (its counter moves), nor
 * profiling (syncs per layer) or hooks not graph_safe, and only after one plain run since the compile, so that every
 * lazy choice and allocation of the backend happens outside the recording. */
static bool graph_allowed(const sf_net *net, const sf_net_recordings *r)
{
    if (!net->be->graph_begin || r->failed || net->profiling || r->plain_runs < 1) return false;
    const sf_net_hooks *h = &net->hooks;
    if ((h->send || h->grads_ready) && !h->graph_safe) return false; /* hooks that do more than enqueue work */
    for (int32_t i = 0; i < net->n_layers; i++)
        if (sf_kind_has(&net->layers[i], SF_KIND_STEP_VARIES)) return false;
    return true;
}

static void free_recordings(sf_net *net, sf_net_recordings *r)
{
    for (int32_t i = 0; i < r->n; i++) net->be->graph_free(net->be, r->graphs[i]);
    r->n = r->oldest = 0;
    r->current = NULL;
}

void sf_net_drop_graph(sf_net *net)
{
    for (int b = 0; b < SF_NET_BODIES; b++) {
        sf_net_recordings *r = &net->recorded[b];
        free_recordings(net, r);
        r->plain_runs = 0;
        r->failed = false;
    }
}

/* Records the body for this run's paths, in a free slot or in place of the oldest recording. A failure leaves no
 * graph and marks the body so that it stays on the plain path: a graph is an optimisation and never fails a run. */
static void record(sf_net *net, sf_net_body body)
{
    sf_backend *be = net->be;
    sf_net_recordings *r = &net->recorded[body];
    if (be->graph_begin(be) != SF_OK) {
        r->failed = true;
        return;
    }
    sf_status s = run_plainly(net, body);
    void *g = NULL;
    sf_status e = be->graph_end(be, &g);
    if (s != SF_OK || e != SF_OK) {
        if (g) be->graph_free(be, g);
        r->failed = true;
        return;
    }
    int32_t k = r->n;
    if (k == SF_NET_GRAPHS) {
        k = r->oldest;
        r->oldest = (k + 1) % SF_NET_GRAPHS;
        be->graph_free(be, r->graphs[k]);
    } else {
        r->n++;
    }
    r->graphs[k] = r->current = g;
    r->paths[k] = sf_net_sparse_signature(net);
    r->left_forward = net->have_forward, r->left_loss = net->have_loss;
    r->left_backward = net->have_backward, r->left_training = net->last_training;
}

/* On a device backend the event-driven layers choose their paths from the last step before the step runs. */
sf_status sf_net_choose_paths(sf_net *net)
{
    if (net->be->host_memory) return SF_OK;
    for (int32_t i = 0; i < net->n_layers; i++) SF_TRY(sf_net_sparse_decide(net, &net->layers[i]));
    return SF_OK;
}

sf_status sf_net_run_body(sf_net *net, sf_net_body body)
{
    sf_net_recordings *r = &net->recorded[body];
    r->current = NULL;
    if (graph_allowed(net, r)) {
        const uint64_t paths = sf_net_sparse_signature(net);
        for (int32_t i = 0; i < r->n; i++)
            if (r->paths[i] == paths) r->current = r->graphs[i];
        if (!r->current) record(net, body);
        if (r->current) {
            sf_status s = net->be->graph_launch(net->be, r->current);
            if (s == SF_OK) {
                net->have_forward = r->left_forward, net->have_loss = r->left_loss;
                net->have_backward = r->left_backward, net->last_training = r->left_training;
                return SF_OK;
            }
            if (s != SF_ERR_STATE) return s;
            /* backend memory moved since the recordings: record again next run, run this one plainly */
            free_recordings(net, r);
        }
    }
    SF_TRY(run_plainly(net, body));
    r->plain_runs++;
    return SF_OK;
}

static sf_status step_body(sf_net *net)
{
    SF_TRY(sf_net_choose_paths(net));
    return sf_net_run_body(net, SF_BODY_TRAIN_STEP);
}

sf_status sf_net_update(sf_net *net)
{
    if (!net->opt_set) return sf_fail(SF_ERR_STATE, "update: no optimizer set (sf_net_set_optimizer)");
    if (!net->have_backward) return sf_fail(SF_ERR_STATE, "update: run the backward first");
    if (net->n_params == 0) return SF_OK;
    sf_backend *be = net->be;
    const sf_optim_params *o = &net->opt;
    if (sf_net_scales_loss(net))
        SF_TRY(be->scale(be, net->n_params, SF_SCALAR_F32, net->stats + SF_STAT_UNSCALE, net->grads));
    int64_t step = ++net->opt_steps;
    /* with sharded state (net_hooks.h) the parameters this process holds the state of, then every part gathered */
    const bool sharded = net->opt_a && net->opt_parts > 1;
    const int64_t lo = sharded ? net->opt_lo : 0, n = sharded ? net->opt_n : net->n_params;
    float *p = net->params + lo;
    const float *g = net->grads + lo;
    if (o->kind == SF_OPT_SGD)
        SF_TRY(be->sgd_step(be, n, o->lr, o->momentum, o->nesterov, o->weight_decay, step, p, g, net->opt_a));
    else
        SF_TRY(be->adam_step(be, n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->kind == SF_OPT_ADAMW,
                             step, p, g, net->opt_a, net->opt_b));
    if (sharded) SF_TRY(net->hooks.params_allgather(net->hooks.ctx, net->params, net->n_params));
    net->have_backward = false;
    return sf_net_refresh_params_act(net, 0, net->n_params);
}

/* fp16: the gradients overflowed at this scale, so the update is skipped and the scale halves. */
static sf_status back_off(sf_net *net)
{
    net->have_backward = false;
    if (net->loss_scale * 0.5f < SF_LOSS_SCALE_MIN)
        return sf_fail(SF_ERR_NUMERIC, "fp16: a gradient is NaN or Inf even with the loss scaled by %g; parameters "
                                       "were not updated", (double)net->loss_scale);
    net->loss_scale *= 0.5f;
    net->loss_scale_steps = 0;
    return sf_net_put_loss_scale(net);
}

static sf_status count_good_step(sf_net *net)
{
    if (!sf_net_scales_loss(net) || ++net->loss_scale_steps < SF_LOSS_SCALE_GROWTH_STEPS) return SF_OK;
    net->loss_scale *= 2.0f;
    net->loss_scale_steps = 0;
    return sf_net_put_loss_scale(net);
}

/* flag: SF_STAT_INPUT_BAD of the step, set where the input of a net with input_spikes held a value other than 0
 * and 1. */
static sf_status check_input_spikes(const sf_net *net, float flag)
{
    if (net->tensors[0].compact && flag != 0.0f)
        return sf_fail(SF_ERR_INVALID, "the input holds values other than 0 and 1, but the network takes spikes "
                                       "(input_spikes; use an encoding that makes spikes, or turn it off)");
    return SF_OK;
}

sf_status sf_net_train_step(sf_net *net, const float *x, const int32_t *labels, sf_step_result *out)
{
    if (!labels) return sf_fail(SF_ERR_INVALID, "train step: labels are NULL");
    if (!net->opt_set) return sf_fail(SF_ERR_STATE, "train step: no optimizer set (sf_net_set_optimizer)");
    SF_TRY(sf_net_upload_input(net, x));
    SF_TRY(sf_net_put_labels(net, labels));
    SF_TRY(step_body(net));
    /* One read-back per step: the loss, the correct count, the finite checks and whether the input held only
     * spikes where it should. */
    sf_backend *be = net->be;
    float st[SF_STAT_INPUT_BAD + 1];
    SF_TRY(be->copy_to_host(be, st, net->stats, sizeof st));
    sf_step_result r = {.loss = st[SF_STAT_LOSS], .correct = (int32_t)st[SF_STAT_CORRECT]};
    if (out) *out = r;
    SF_TRY(check_input_spikes(net, st[SF_STAT_INPUT_BAD]));
    if (st[SF_STAT_LOSS_BAD] != 0.0f)
        return sf_fail(SF_ERR_NUMERIC, "the loss (%g) is NaN or Inf; parameters were not updated",
                       (double)st[SF_STAT_LOSS]);
    /* the forward ran whether or not the update does: its densities choose the next step's paths */
    if (!be->host_memory) SF_TRY(sf_net_sparse_after_step(net));
    if (st[SF_STAT_GRAD_BAD] != 0.0f) {
        if (!sf_net_scales_loss(net))
            return sf_fail(SF_ERR_NUMERIC, "a gradient is NaN or Inf (the loss is %g); parameters were not updated",
                           (double)st[SF_STAT_LOSS]);
        SF_TRY(back_off(net));
        r.skipped = 1;
        if (out) *out = r;
        return SF_OK;
    }
    SF_TRY(sf_net_update(net));
    return count_good_step(net);
}

sf_status sf_net_eval_step(sf_net *net, const float *x, const int32_t *labels, sf_step_result *out)
{
    if (!net->compiled) return sf_fail(SF_ERR_STATE, "the network is not compiled (call sf_net_compile)");
    SF_TRY(sf_net_choose_paths(net));
    SF_TRY(sf_net_forward(net, x, 0));
    sf_step_result r = {0};
    SF_TRY(sf_net_run_loss(net, labels, &r));
    if (out) *out = r;
    if (net->tensors[0].compact) {
        float flag;
        SF_TRY(net->be->copy_to_host(net->be, &flag, net->stats + SF_STAT_INPUT_BAD, sizeof flag));
        SF_TRY(check_input_spikes(net, flag));
    }
    if (!net->be->host_memory) SF_TRY(sf_net_sparse_after_step(net));
    return SF_OK;
}
