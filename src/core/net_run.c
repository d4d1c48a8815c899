/* net_run.c — running a compiled network forward: layers, readout and loss, and the queries that read results
 * back. Every op goes through the backend table; nothing here touches tensor data. */
#include "core/error.h"
#include "core/layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Layer i's forward by its kind, then what the plan keeps of its output: binary outputs of layers that do not
 * write them themselves (a max-pool of spikes) as bytes or made compact, and in lean mode the bits alone. */
static sf_status layer_forward(sf_net *net, int32_t i, bool training)
{
    sf_backend *be = net->be;
    sf_net_layer *l = &net->layers[i];
    const sf_net_tensor *out_t = &net->tensors[l->out];
    if (sf_kind_has(l, SF_KIND_ALIAS)) return SF_OK;
    SF_TRY(l->ops->forward(net, l, training));
    float *y = sf_net_act(net, l->out);
    if (training && !sf_kind_has(l, SF_KIND_WRITES_BYTES) && out_t->keep == SF_KEEP_BYTES)
        SF_TRY(be->act_to_u8(be, sf_net_rows(net) * out_t->per_sample, y, sf_net_slot_ptr(net, out_t->bytes)));
    if (!sf_kind_has(l, SF_KIND_FIRES) && out_t->compact) {
        sf_spikes c = sf_net_compact_of(net, l->out);
        SF_TRY(
            be->spikes_compact(be, sf_net_rows(net), out_t->per_sample, y, &c, sf_net_ones_count(net, l->out), NULL));
    }
    if (training && out_t->keep == SF_KEEP_BITS && !out_t->compact) {
        /* lean mode: the bits alone are kept (its neuron layer counted its spikes) */
        sf_spikes c = {.bits = sf_net_slot_ptr(net, out_t->cbits)};
        SF_TRY(be->spikes_compact(be, sf_net_rows(net), out_t->per_sample, y, &c, NULL, NULL));
    }
    return SF_OK;
}

static sf_status timed(sf_net *net, double *acc, sf_status (*fn)(sf_net *, int32_t, bool), int32_t i, bool training)
{
    if (!net->profiling) return fn(net, i, training);
    SF_TRY(net->be->sync(net->be));
    double t0 = now_ms();
    SF_TRY(fn(net, i, training));
    SF_TRY(net->be->sync(net->be));
    *acc += now_ms() - t0;
    return SF_OK;
}

static sf_status require_compiled(const sf_net *net)
{
    return net->compiled ? SF_OK : sf_fail(SF_ERR_STATE, "the network is not compiled (call sf_net_compile)");
}

sf_status sf_net_upload_input(sf_net *net, const float *x)
{
    SF_TRY(require_compiled(net));
    if (!x) /* the plan keeps the input's buffer to itself, so the last upload is still there */
        return net->have_input ? SF_OK
                               : sf_fail(SF_ERR_STATE, "forward: input is NULL, and no earlier step put one on the "
                                                       "device since the network was compiled");
    sf_backend *be = net->be;
    const int64_t ps = net->tensors[0].per_sample, all = sf_net_rows(net) * ps;
    x +=
        net->hooks.seg * all; /* x holds all T steps; a time segment takes its own (time-major: one contiguous block) */
    const int64_t n = net->static_input ? net->B * ps : all; /* a static input: step 0 only */
    if (be->act == SF_SCALAR_F32) {
        SF_TRY(be->copy_from_host(be, sf_net_act(net, 0), x, (size_t)n * sizeof(float)));
    } else {
        SF_TRY(be->copy_from_host(be, net->input_f32, x, (size_t)n * sizeof(float)));
        SF_TRY(be->convert(be, n, SF_SCALAR_F32, net->input_f32, be->act, sf_net_act(net, 0)));
    }
    if (net->static_input && !net->input_once) SF_TRY(sf_layer_repeat_over_t(net, sf_net_act(net, 0), ps));
    net->have_input = true;
    return SF_OK;
}

sf_status sf_net_run_forward(sf_net *net, bool training)
{
    sf_backend *be = net->be;
    SF_TRY(be->zero(be, net->spike_counts, (size_t)(net->n_lif ? net->n_lif : 1) * sizeof(float)));
    SF_TRY(be->zero(be, net->tcounts, (size_t)(2 * (net->n_layers + 1)) * sizeof(float)));
    net->have_forward = net->have_loss = net->have_backward = false;
    if (net->tensors[0].compact) { /* the input's spikes; a value other than 0 or 1 flags SF_STAT_INPUT_BAD */
        sf_spikes c = sf_net_compact_of(net, 0);
        SF_TRY(be->zero(be, net->stats + SF_STAT_INPUT_BAD, sizeof(float)));
        SF_TRY(be->spikes_compact(be, sf_net_rows(net), net->tensors[0].per_sample, sf_net_act(net, 0), &c,
                                  sf_net_ones_count(net, 0), net->stats + SF_STAT_INPUT_BAD));
    }
    for (int32_t i = 0; i < net->n_layers; i++)
        SF_TRY(timed(net, &net->layers[i].timing.forward_ms, layer_forward, i, training));
    net->have_forward = true;
    net->last_training = training;
    if (be->host_memory) SF_TRY(sf_net_sparse_after_step(net));
    return SF_OK;
}

sf_status sf_net_forward(sf_net *net, const float *x, int32_t training)
{
    SF_TRY(sf_net_upload_input(net, x));
    return sf_net_run_forward(net, training != 0);
}

/* The readout r_t from the last layer's output o_t over all T: o itself (mean readout) or a leaky integrator. */
static const float *readout(sf_net *net, float *a_out, float *c_out)
{
    float a = net->p.readout == SF_READOUT_LEAKY ? 1.0f - 1.0f / net->p.readout_tau : 0.0f;
    *a_out = a;
    *c_out = 1.0f - a;
    return net->p.readout == SF_READOUT_LEAKY ? net->readout : sf_net_gather_output(net);
}

sf_status sf_net_put_labels(sf_net *net, const int32_t *labels)
{
    sf_backend *be = net->be;
    int32_t K = sf_net_classes(net);
    for (int64_t b = 0; labels && b < net->B; b++)
        if (labels[b] < 0 || labels[b] >= K)
            return sf_fail(SF_ERR_INVALID, "label %d of sample %lld is outside [0, %d)", labels[b], (long long)b, K);
    /* Without labels (prediction only) the op still needs some: class 0 stands in and the loss is ignored. */
    if (labels) return be->copy_from_host(be, net->labels, labels, (size_t)net->B * sizeof(int32_t));
    return be->zero(be, net->labels, (size_t)net->B * sizeof(int32_t));
}

sf_status sf_net_loss_ops(sf_net *net, bool labelled)
{
    sf_backend *be = net->be;
    int32_t K = sf_net_classes(net);
    float a, c;
    SF_TRY(sf_net_gather_output_ops(net));
    const float *r = readout(net, &a, &c);
    if (net->p.readout == SF_READOUT_LEAKY)
        SF_TRY(be->leaky_forward(be, net->T_all, net->B * K, a, c, sf_net_gather_output(net), net->readout));
    float *dr = NULL;
    if (labelled && net->last_training)
        dr = net->p.readout == SF_READOUT_LEAKY
                 ? net->dreadout
                 : (sf_net_pipelined(net) ? net->dout_all : sf_net_grad(net, net->n_layers));
    if (net->p.loss == SF_LOSS_MSE_RATE) {
        if (!be->mse_rate) return sf_fail(SF_ERR_UNSUPPORTED, "the %s backend has no MSE-on-rate loss", be->name);
        SF_TRY(be->mse_rate(be, net->T_all, net->B, K, r, net->labels, dr, net->logits, net->stats));
    } else {
        SF_TRY(be->softmax_xent(be, net->T_all, net->B, K, net->p.loss == SF_LOSS_CE_PER_STEP, net->p.label_smoothing,
                                r, net->labels, dr, net->logits, net->stats));
    }
    /* fp16: the backward runs on the loss times the scale, so that small gradients stay above fp16's underflow */
    if (dr && sf_net_scales_loss(net))
        SF_TRY(be->scale(be, net->T_all * net->B * K, be->act, net->stats + SF_STAT_SCALE, dr));
    net->have_loss = labelled && net->last_training;
    return SF_OK;
}

sf_status sf_net_run_loss(sf_net *net, const int32_t *labels, sf_step_result *out)
{
    SF_TRY(sf_net_put_labels(net, labels));
    SF_TRY(sf_net_loss_ops(net, labels != NULL));
    if (out) {
        float st[2] = {0, 0};
        if (labels) SF_TRY(net->be->copy_to_host(net->be, st, net->stats, sizeof st));
        out->loss = st[0];
        out->correct = (int32_t)st[1];
    }
    return SF_OK;
}

sf_status sf_net_loss(sf_net *net, const int32_t *labels, sf_step_result *out)
{
    SF_TRY(require_compiled(net));
    if (!net->have_forward) return sf_fail(SF_ERR_STATE, "loss: run a forward first");
    if (!labels) return sf_fail(SF_ERR_INVALID, "loss: labels are NULL");
    return sf_net_run_loss(net, labels, out);
}

sf_status sf_net_logits(const sf_net *net, float *out)
{
    if (!net->have_forward) return sf_fail(SF_ERR_STATE, "logits: run a forward and the loss first");
    return net->be->copy_to_host(net->be, out, net->logits, (size_t)(net->B * sf_net_classes(net)) * sizeof(float));
}

/* Values of tensor x read back to the host as [rows, c·h·w], put in NCHW order where the device keeps x NHWC. */
static sf_status host_nchw(const sf_net_tensor *x, int64_t n_rows, float *v)
{
    if (!x->nhwc) return SF_OK;
    const int64_t hw = (int64_t)x->h * x->w, c = x->c;
    float *row = malloc(sizeof *row * (size_t)(hw * c));
    if (!row) return sf_fail(SF_ERR_NOMEM, "out of host memory reordering a tensor read back");
    for (int64_t r = 0; r < n_rows; r++) {
        float *p = v + r * hw * c;
        memcpy(row, p, sizeof *row * (size_t)(hw * c));
        for (int64_t q = 0; q < hw; q++)
            for (int64_t ch = 0; ch < c; ch++) p[ch * hw + q] = row[q * c + ch];
    }
    free(row);
    return SF_OK;
}

/* The bias that a training forward left out of a layer's output (bias_cancelled), added back to the values read. */
static sf_status add_cancelled_bias(const sf_net *net, int32_t id, float *v)
{
    const float *bias = sf_net_cancelled_bias(net, id);
    if (!bias || !net->last_training) return SF_OK;
    const sf_net_tensor *x = &net->tensors[id];
    const int64_t C = x->c, hw = (int64_t)x->h * x->w, rows = sf_net_rows(net);
    float *b = malloc(sizeof *b * (size_t)C);
    if (!b) return sf_fail(SF_ERR_NOMEM, "out of host memory adding a bias to a tensor read back");
    sf_status s = net->be->copy_to_host(net->be, b, bias, sizeof *b * (size_t)C);
    for (int64_t r = 0; s == SF_OK && r < rows; r++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t q = 0; q < hw; q++) v[(r * C + c) * hw + q] += b[c];
    free(b);
    return s;
}

sf_status sf_net_read_activation(const sf_net *net, int32_t id, float *out)
{
    if (!net->have_forward) return sf_fail(SF_ERR_STATE, "read_activation: run a forward first");
    if (id < 0 || id > net->n_layers) return sf_fail(SF_ERR_INVALID, "tensor id %d out of range", id);
    const sf_net_tensor *x = &net->tensors[net->tensors[id].alias_of];
    bool held = x->act.where == SF_ARENA_SAVED || id == net->n_layers ||
                net->tensors[id].alias_of == net->tensors[net->n_layers].alias_of;
    if (!held || x->act.where == SF_ARENA_NONE)
        return sf_fail(SF_ERR_STATE, "tensor %d is not held after the forward (only kept tensors and the output are)", id);
    sf_backend *be = net->be;
    int64_t n = sf_net_rows(net) * x->per_sample;
    const void *src = sf_net_slot_ptr(net, x->act);
    if (be->act == SF_SCALAR_F32) {
        SF_TRY(be->copy_to_host(be, out, src, (size_t)n * sizeof(float)));
        SF_TRY(host_nchw(x, sf_net_rows(net), out));
        return add_cancelled_bias(net, net->tensors[id].alias_of, out);
    }
    void *wide = NULL; /* a rare query: its own allocation rather than planned workspace */
    SF_TRY(be->alloc(be, (size_t)n * sizeof(float), &wide));
    sf_status s = be->convert(be, n, be->act, src, SF_SCALAR_F32, wide);
    if (s == SF_OK) s = be->copy_to_host(be, out, wide, (size_t)n * sizeof(float));
    be->release(be, wide);
    if (s == SF_OK) s = host_nchw(x, sf_net_rows(net), out);
    return s == SF_OK ? add_cancelled_bias(net, net->tensors[id].alias_of, out) : s;
}

sf_status sf_net_set_keep_activations(sf_net *net, int32_t on)
{
    net->keep_all = on != 0;
    net->compiled = false; /* the plan changes */
    return SF_OK;
}

sf_status sf_net_read_membrane(const sf_net *net, int32_t id, float *out)
{
    if (!net->have_forward) return sf_fail(SF_ERR_STATE, "read_membrane: run a forward first");
    if (id < 1 || id > net->n_layers) return sf_fail(SF_ERR_INVALID, "tensor id %d out of range", id);
    const sf_net_layer *l = &net->layers[id - 1];
    if (!l->ops->membrane)
        return sf_fail(SF_ERR_INVALID, "tensor %d is not the output of a LIF layer: it has no membrane potential", id);
    const sf_slot h = *l->ops->membrane(l);
    /* A training forward writes h where the plan keeps it; an evaluation forward only with keep_all. */
    if (h.where == SF_ARENA_NONE || !(net->last_training || net->keep_all))
        return sf_fail(SF_ERR_STATE,
                       "the membrane potential of tensor %d is not held after this forward (call "
                       "sf_net_set_keep_activations before sf_net_compile)",
                       id);
    SF_TRY(net->be->copy_to_host(net->be, out, sf_net_slot_ptr(net, h),
                                 (size_t)(sf_net_rows(net) * net->tensors[id].per_sample) * sizeof(float)));
    return host_nchw(&net->tensors[id], sf_net_rows(net), out);
}

int32_t sf_net_firing_rates(const sf_net *net, float *rates, int32_t cap)
{
    if (!net->compiled) return 0;
    if (!net->have_forward || net->n_lif == 0) return net->n_lif;
    if (net->be->copy_to_host(net->be, net->host_counts, net->spike_counts, (size_t)net->n_lif * sizeof(float)) != SF_OK)
        return -1;
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (l->lif_index < 0 || l->lif_index >= cap) continue;
        double n = (double)sf_net_rows(net) * (double)net->tensors[l->out].per_sample;
        rates[l->lif_index] = (float)(net->host_counts[l->lif_index] / n);
    }
    return net->n_lif;
}

sf_status sf_net_set_profiling(sf_net *net, int32_t on)
{
    net->profiling = on != 0;
    for (int32_t i = 0; i < net->n_layers; i++) net->layers[i].timing = (sf_layer_timing){0};
    return SF_OK;
}

sf_status sf_net_layer_timings(const sf_net *net, sf_layer_timing *out, int32_t cap)
{
    for (int32_t i = 0; i < net->n_layers && i < cap; i++) out[i] = net->layers[i].timing;
    return SF_OK;
}
