/* net_build.c — building a network: default descriptions, adding layers with shape inference, the summary. */
#include "core/error.h"
#include "core/net_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"linear", "conv2d", "avgpool2d", "maxpool2d", "flatten",
                                         "dropout", "batchnorm", "lif", "add", "rlif"};

const char *sf_layer_kind_name(sf_layer_kind kind)
{
    return (unsigned)kind <= SF_LAYER_RLIF ? kind_names[kind] : "?";
}

static const char *const sparse_names[] = {"off", "auto", "on"};

const char *sf_sparse_mode_name(sf_sparse_mode m) { return (unsigned)m <= SF_SPARSE_ON ? sparse_names[m] : "?"; }

static const char *const memory_names[] = {"full", "recompute", "lean"};

const char *sf_memory_mode_name(sf_memory_mode m) { return (unsigned)m <= SF_MEMORY_LEAN ? memory_names[m] : "?"; }

void sf_layer_default_desc(sf_layer_kind kind, sf_layer_desc *d)
{
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->input = -1;
    d->input2 = -1;
    d->kernel = kind == SF_LAYER_CONV2D ? 3 : 2;
    d->stride = kind == SF_LAYER_CONV2D ? 1 : 0;
    d->padding = 0;
    d->bias = 1;
    d->dropout_p = 0.5f;
    d->bn_eps = 1e-5f;
    d->bn_momentum = 0.1f;
    sf_lif_default_params(&d->lif);
    d->sparse = -1;
    d->init_gain = 1.0f;
}

void sf_net_default_params(sf_net_params *p)
{
    memset(p, 0, sizeof *p);
    p->device.kind = SF_DEVICE_CPU;
    p->memory = SF_MEMORY_RECOMPUTE;
    p->in_channels = p->in_height = p->in_width = 1;
    p->readout = SF_READOUT_MEAN;
    p->readout_tau = 2.0f;
    p->loss = SF_LOSS_CE_MEAN;
    p->precision = SF_PRECISION_FP32;
    p->cuda.graph = 1;
    p->cuda.conv_workspace_mib = 512;
    p->cuda.conv_algo = SF_CONV_ALGO_AUTO;
    p->cuda.conv_lean = 0.05f;
    p->cuda.deterministic = 0;
    p->sparse = SF_SPARSE_AUTO;
}

sf_status sf_net_loss_check(const sf_net_params *p)
{
    if (!(p->label_smoothing >= 0.0f && p->label_smoothing <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "label_smoothing = %g: must be in [0, 1]", (double)p->label_smoothing);
    if (p->label_smoothing > 0.0f && p->loss == SF_LOSS_MSE_RATE)
        return sf_fail(SF_ERR_INVALID, "label_smoothing = %g applies to the cross-entropy losses, not to loss = mse_rate",
                       (double)p->label_smoothing);
    return SF_OK;
}

sf_status sf_net_params_check(const sf_net_params *p)
{
    if (!p) return sf_fail(SF_ERR_INVALID, "net parameters are NULL");
    if (p->in_channels <= 0 || p->in_height <= 0 || p->in_width <= 0)
        return sf_fail(SF_ERR_INVALID, "input shape %dx%dx%d: every dimension must be >= 1", p->in_channels,
                       p->in_height, p->in_width);
    if ((unsigned)p->memory > SF_MEMORY_LEAN) return sf_fail(SF_ERR_INVALID, "unknown memory mode %d", p->memory);
    if ((unsigned)p->readout > SF_READOUT_LEAKY) return sf_fail(SF_ERR_INVALID, "unknown readout %d", p->readout);
    if ((unsigned)p->loss > SF_LOSS_MSE_RATE) return sf_fail(SF_ERR_INVALID, "unknown loss %d", p->loss);
    SF_TRY(sf_net_loss_check(p));
    if (p->readout == SF_READOUT_LEAKY && !(p->readout_tau >= 1.0f))
        return sf_fail(SF_ERR_INVALID, "readout_tau = %g: must be >= 1", p->readout_tau);
    if (p->cuda.conv_workspace_mib < 0)
        return sf_fail(SF_ERR_INVALID, "conv_workspace_mib = %d: must be >= 0", (int)p->cuda.conv_workspace_mib);
    if (!(p->cuda.conv_lean >= 0.0f && p->cuda.conv_lean <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "conv_lean = %g: must be in [0, 1]", p->cuda.conv_lean);
    if ((unsigned)p->cuda.conv_algo > SF_CONV_ALGO_SPLIT)
        return sf_fail(SF_ERR_INVALID, "unknown conv algorithm %d", (int)p->cuda.conv_algo);
    if ((unsigned)p->precision > SF_PRECISION_FP16) return sf_fail(SF_ERR_INVALID, "unknown precision %d", p->precision);
    if ((unsigned)p->sparse > SF_SPARSE_ON) return sf_fail(SF_ERR_INVALID, "unknown sparse mode %d", (int)p->sparse);
    if (!(p->sparse_crossover >= 0.0f && p->sparse_crossover <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "sparse_crossover = %g: must be a density in (0, 1], or 0 to measure it",
                       (double)p->sparse_crossover);
    return SF_OK;
}

sf_status sf_net_create_on(const sf_net_params *p, sf_backend *be, sf_net **out)
{
    *out = NULL;
    sf_status s = sf_net_params_check(p);
    sf_net *net = s == SF_OK ? calloc(1, sizeof *net) : NULL;
    if (s == SF_OK && !net) s = sf_fail(SF_ERR_NOMEM, "out of memory");
    if (s != SF_OK) {
        sf_backend_free(be);
        return s;
    }
    net->p = *p;
    net->be = be;
    net->loss_scale = sf_net_initial_loss_scale(net);
    net->hooks.nseg = net->hooks.bn_parts = net->hooks.opt_parts = net->opt_parts = 1;
    *out = net;
    return SF_OK;
}

static void release(sf_net *net, void *p)
{
    if (p) net->be->release(net->be, p);
}

void sf_net_free(sf_net *net)
{
    if (!net) return;
    sf_net_drop_graph(net);
    release(net, net->params);
    release(net, net->params_act);
    release(net, net->grads);
    release(net, net->opt_a);
    release(net, net->opt_b);
    release(net, net->buffers);
    release(net, net->saved_mem);
    release(net, net->work_mem);
    sf_backend_free(net->be);
    free(net->layers);
    free(net->tensors);
    free(net->host_counts);
    free(net->host_tcounts);
    free(net->summary);
    free(net);
}

int32_t sf_net_num_layers(const sf_net *net) { return net->n_layers; }

sf_status sf_net_layer_desc(const sf_net *net, int32_t i, sf_layer_desc *out)
{
    if (i < 0 || i >= net->n_layers)
        return sf_fail(SF_ERR_INVALID, "layer %d out of range (the net has %d)", i, net->n_layers);
    *out = net->layers[i].d;
    out->input = net->layers[i].in; /* resolved: -1 (the previous layer) becomes its tensor id */
    out->input2 = net->layers[i].in2;
    return SF_OK;
}

void sf_net_get_params(const sf_net *net, sf_net_params *out) { *out = net->p; }

sf_status sf_net_tensor_shape(const sf_net *net, int32_t id, int32_t chw[3])
{
    if (id < 0 || id > net->n_layers) return sf_fail(SF_ERR_INVALID, "tensor id %d out of range", id);
    sf_net_shape_of(net, id, chw);
    return SF_OK;
}

/* Checks a layer against its input shape and fills its output shape, plus the conv or pool geometry. */
static sf_status infer_shape(sf_net *net, sf_net_layer *l, int32_t index)
{
    const sf_layer_desc *d = &l->d;
    int32_t in[3];
    sf_net_shape_of(net, l->in, in);
    int32_t c = in[0], h = in[1], w = in[2];
    const char *name = sf_layer_kind_name(d->kind);
    switch (d->kind) {
    case SF_LAYER_LINEAR:
        if (d->out_features <= 0) return sf_fail(SF_ERR_INVALID, "layer %d (linear): out_features must be >= 1", index);
        if (h != 1 || w != 1)
            return sf_fail(SF_ERR_INVALID, "layer %d (linear): input is %dx%dx%d; add a flatten layer first", index,
                           c, h, w);
        c = d->out_features;
        break;
    case SF_LAYER_CONV2D:
        if (d->out_channels <= 0 || d->kernel <= 0 || d->stride <= 0 || d->padding < 0)
            return sf_fail(SF_ERR_INVALID, "layer %d (conv2d): out_channels, kernel, stride must be >= 1, padding >= 0",
                           index);
        if (h + 2 * d->padding < d->kernel || w + 2 * d->padding < d->kernel)
            return sf_fail(SF_ERR_INVALID, "layer %d (conv2d): kernel %d larger than the padded input %dx%d", index,
                           d->kernel, h + 2 * d->padding, w + 2 * d->padding);
        l->conv = (sf_conv_shape){.cin = c, .h = h, .w = w, .cout = d->out_channels, .k = d->kernel,
                                  .stride = d->stride, .pad = d->padding};
        c = d->out_channels;
        h = (h + 2 * d->padding - d->kernel) / d->stride + 1;
        w = (w + 2 * d->padding - d->kernel) / d->stride + 1;
        l->conv.oh = h;
        l->conv.ow = w;
        break;
    case SF_LAYER_AVGPOOL2D:
    case SF_LAYER_MAXPOOL2D: {
        int32_t k = d->kernel, s = d->stride ? d->stride : d->kernel, p = d->padding;
        if (k > 0 && (p < 0 || 2 * p > k))
            return sf_fail(SF_ERR_INVALID, "layer %d (%s): padding %d must be in [0, kernel/2] (kernel %d)", index,
                           name, p, k);
        if (k <= 0 || s <= 0 || k > h + 2 * p || k > w + 2 * p)
            return sf_fail(SF_ERR_INVALID, "layer %d (%s): kernel %d, stride %d do not fit the %dx%d input", index,
                           name, k, s, h, w);
        if (k * k > 255) return sf_fail(SF_ERR_INVALID, "layer %d (%s): kernel %d too large (max 15)", index, name, k);
        l->pool = (sf_pool_shape){.h = h, .w = w, .k = k, .stride = s, .pad = p};
        h = (h + 2 * p - k) / s + 1;
        w = (w + 2 * p - k) / s + 1;
        l->pool.oh = h;
        l->pool.ow = w;
        break;
    }
    case SF_LAYER_FLATTEN:
        c = c * h * w;
        h = w = 1;
        break;
    case SF_LAYER_DROPOUT:
        if (!(d->dropout_p >= 0.0f && d->dropout_p < 1.0f))
            return sf_fail(SF_ERR_INVALID, "layer %d (dropout): p = %g must be in [0, 1)", index, d->dropout_p);
        break;
    case SF_LAYER_BATCHNORM:
        if (!(d->bn_eps > 0.0f)) return sf_fail(SF_ERR_INVALID, "layer %d (batchnorm): eps must be > 0", index);
        if (!(d->bn_momentum >= 0.0f && d->bn_momentum <= 1.0f))
            return sf_fail(SF_ERR_INVALID, "layer %d (batchnorm): momentum must be in [0, 1]", index);
        break;
    case SF_LAYER_LIF:
    case SF_LAYER_RLIF: {
        sf_status s = sf_lif_params_check(&d->lif);
        if (s != SF_OK) return sf_fail_context(s, "layer %d (%s): ", index, name);
        if (d->kind == SF_LAYER_RLIF && (h != 1 || w != 1))
            return sf_fail(SF_ERR_INVALID, "layer %d (rlif): input is %dx%dx%d; a recurrent layer needs a vector "
                           "(add a flatten layer, and a linear layer for its input current)", index, c, h, w);
        if (d->kind == SF_LAYER_RLIF && d->lif.model != SF_NEURON_LIF && d->lif.model != SF_NEURON_IF)
            return sf_fail(SF_ERR_INVALID, "layer %d (rlif): the recurrent layer runs the lif and if neurons, not the "
                                           "%s",
                           index, sf_neuron_model_name(d->lif.model));
        break;
    }
    case SF_LAYER_ADD: {
        if (l->in2 < 0 || l->in2 > index)
            return sf_fail(SF_ERR_INVALID, "layer %d (add): input2 = %d is not an earlier tensor", index, d->input2);
        int32_t o[3];
        sf_net_shape_of(net, l->in2, o);
        if (o[0] != c || o[1] != h || o[2] != w)
            return sf_fail(SF_ERR_INVALID, "layer %d (add): shapes %dx%dx%d and %dx%dx%d differ", index, c, h, w,
                           o[0], o[1], o[2]);
        break;
    }
    default: return sf_fail(SF_ERR_INVALID, "layer %d: unknown kind %d", index, (int)d->kind);
    }
    if (!(d->init_gain > 0.0f) || isinf(d->init_gain))
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): init_gain = %g must be a finite number > 0", index, name,
                       (double)d->init_gain);
    if (d->sparse < -1 || d->sparse > SF_SPARSE_ON)
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): sparse = %d is not -1 (the net's), off, auto or on", index,
                       name, (int)d->sparse);
    if (d->sparse > SF_SPARSE_OFF && d->kind != SF_LAYER_LINEAR && d->kind != SF_LAYER_RLIF)
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): sparse applies to linear and rlif layers only", index, name);
    if (d->sparse == SF_SPARSE_ON && d->kind == SF_LAYER_LINEAR && !sf_net_tensor_is_spikes(net, l->in))
        return sf_fail(SF_ERR_INVALID, "layer %d (linear): sparse = on needs spikes as its input (the output of a "
                       "lif or rlif layer, possibly flattened or max-pooled, or an input of spikes), not the output "
                       "of tensor %d", index, l->in);
    l->out_c = c;
    l->out_h = h;
    l->out_w = w;
    return SF_OK;
}

sf_status sf_net_add(sf_net *net, const sf_layer_desc *d, int32_t *out_id)
{
    if (!net || !d) return sf_fail(SF_ERR_INVALID, "sf_net_add: NULL argument");
    if (net->params) return sf_fail(SF_ERR_STATE, "sf_net_add: layers cannot be added once parameters exist");
    int32_t index = net->n_layers;
    if (index == net->cap_layers) {
        int32_t cap = net->cap_layers ? 2 * net->cap_layers : 16;
        sf_net_layer *nl = realloc(net->layers, (size_t)cap * sizeof *nl);
        if (!nl) return sf_fail(SF_ERR_NOMEM, "out of memory");
        net->layers = nl;
        net->cap_layers = cap;
    }
    sf_net_layer *l = &net->layers[index];
    memset(l, 0, sizeof *l);
    l->d = *d;
    l->in = d->input < 0 ? index : d->input;
    l->in2 = d->input2;
    l->out = index + 1;
    l->w_off = l->b_off = l->rm_off = l->rv_off = -1;
    l->bn = -1;
    if (l->in > index) return sf_fail(SF_ERR_INVALID, "layer %d: input %d is not an earlier tensor", index, d->input);
    SF_TRY(infer_shape(net, l, index));

    /* Parameter sizes (PyTorch shapes); offsets are assigned in order. */
    int32_t in[3];
    sf_net_shape_of(net, l->in, in);
    int64_t wn = 0, bn = 0, rn = 0;
    if (d->kind == SF_LAYER_LINEAR) {
        wn = (int64_t)d->out_features * in[0] * in[1] * in[2];
        bn = d->bias ? d->out_features : 0;
    } else if (d->kind == SF_LAYER_CONV2D) {
        wn = (int64_t)d->out_channels * in[0] * d->kernel * d->kernel;
        bn = d->bias ? d->out_channels : 0;
    } else if (d->kind == SF_LAYER_BATCHNORM) {
        wn = bn = rn = in[0];
    } else if (d->kind == SF_LAYER_LIF && d->lif.model == SF_NEURON_PLIF) {
        wn = d->lif.per_channel ? in[0] : 1; /* w, one per layer or per channel */
    } else if (d->kind == SF_LAYER_RLIF) {
        wn = (int64_t)in[0] * in[0]; /* V [n, n], no bias */
    }
    if (wn) {
        l->w_off = net->n_params;
        l->w_numel = wn;
        net->n_params += wn;
    }
    if (bn) {
        l->b_off = net->n_params;
        l->b_numel = bn;
        net->n_params += bn;
    }
    if (rn) {
        l->rm_off = net->n_buffers;
        l->rv_off = net->n_buffers + rn;
        net->n_buffers += 2 * rn;
    }
    net->n_layers++;
    net->compiled = false;
    if (out_id) *out_id = l->out;
    return SF_OK;
}

const char *sf_net_summary(sf_net *net)
{
    size_t cap = 256 + (size_t)net->n_layers * 160, len = 0;
    char *s = realloc(net->summary, cap);
    if (!s) return "";
    net->summary = s;
    len += (size_t)snprintf(s + len, cap - len, "input %dx%dx%d\n", net->p.in_channels, net->p.in_height,
                            net->p.in_width);
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        int32_t o[3];
        sf_net_shape_of(net, l->out, o);
        int64_t np = (l->w_off >= 0 ? l->w_numel : 0) + (l->b_off >= 0 ? l->b_numel : 0);
        const char *kind = l->d.kind == SF_LAYER_LIF ? sf_neuron_model_name(l->d.lif.model) : sf_layer_kind_name(l->d.kind);
        len += (size_t)snprintf(s + len, cap - len, "%3d %-10s in=%-3d", i, kind, l->in);
        if (l->d.kind == SF_LAYER_ADD) len += (size_t)snprintf(s + len, cap - len, " +%-3d", l->in2);
        /* NHWC: a compiled net's output kept in that layout on a GPU (docs/architecture.md, Layouts) */
        len += (size_t)snprintf(s + len, cap - len, " -> %dx%dx%d  params %lld%s%s\n", o[0], o[1], o[2],
                                (long long)np, l->fused_bn ? "  (fused with the batchnorm before)" : "",
                                net->compiled && net->tensors[l->out].nhwc ? "  NHWC" : "");
    }
    len += (size_t)snprintf(s + len, cap - len, "parameters: %lld\n", (long long)net->n_params);
    return s;
}
