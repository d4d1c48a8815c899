/* net_build.c — building a network: default descriptions, adding layers with shape inference, the summary. */
#include "core/error.h"
#include "core/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    d->kernel = 2;
    d->stride = 0;
    d->padding = 0;
    d->bias = 1;
    d->dropout_p = 0.5f;
    d->bn_eps = 1e-5f;
    d->bn_momentum = 0.1f;
    sf_lif_default_params(&d->lif);
    d->sparse = -1;
    d->init_gain = 1.0f;
    const sf_layer_ops *ops = sf_layer_ops_of(kind);
    if (ops && ops->defaults) ops->defaults(d);
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

/* Checks a layer against its input shape in[3] (its kind's rules, then the common ones) and fills its output shape
 * and its kind's geometry. */
static sf_status infer_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3])
{
    const sf_layer_desc *d = &l->d;
    const sf_layer_ops *ops = l->ops;
    if (!ops) return sf_fail(SF_ERR_INVALID, "layer %d: unknown kind %d", index, (int)d->kind);
    const char *name = ops->name;
    if (ops->inputs == 2 && (l->in2 < 0 || l->in2 > index))
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): input2 = %d is not an earlier tensor", index, name, d->input2);
    const bool in_tokens = sf_net_is_tokens(net, l->in);
    if (in_tokens && !(ops->flags & (SF_KIND_TOKENS | SF_KIND_READS_TOKENS)))
        return sf_fail(SF_ERR_INVALID, "layer %d (%s) cannot read tokens (tensor %d, made by a %s layer)", index, name,
                       l->in, net->layers[l->in - 1].ops->name);
    l->tokens = (ops->flags & SF_KIND_MAKES_TOKENS) || (in_tokens && (ops->flags & SF_KIND_TOKENS));
    int32_t out[3] = {in[0], in[1], in[2]};
    SF_TRY(ops->shape(net, l, index, in, out));
    if (!(d->init_gain > 0.0f) || isinf(d->init_gain))
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): init_gain = %g must be a finite number > 0", index, name,
                       (double)d->init_gain);
    if (d->sparse < -1 || d->sparse > SF_SPARSE_ON)
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): sparse = %d is not -1 (the net's), off, auto or on", index,
                       name, (int)d->sparse);
    if (d->sparse > SF_SPARSE_OFF && !ops->event_driven)
        return sf_fail(SF_ERR_INVALID, "layer %d (%s): sparse applies to linear and rlif layers only", index, name);
    if (d->sparse == SF_SPARSE_ON && !ops->event_driven(net, l))
        return sf_fail(SF_ERR_INVALID,
                       "layer %d (%s): sparse = on needs spikes as its input (the output of a "
                       "lif or rlif layer, possibly flattened or max-pooled, or an input of spikes), not the output "
                       "of tensor %d",
                       index, name, l->in);
    l->out_c = out[0];
    l->out_h = out[1];
    l->out_w = out[2];
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
    l->ops = sf_layer_ops_of(d->kind);
    l->in = d->input < 0 ? index : d->input;
    l->in2 = d->input2;
    l->out = index + 1;
    l->w_off = l->b_off = l->buf_off = -1;
    l->absorbs = -1;
    if (l->in > index) return sf_fail(SF_ERR_INVALID, "layer %d: input %d is not an earlier tensor", index, d->input);
    int32_t in[3];
    sf_net_shape_of(net, l->in, in);
    SF_TRY(infer_shape(net, l, index, in));

    /* Parameter sizes (PyTorch shapes); offsets are assigned in order. */
    sf_kind_sizes n = {0};
    if (l->ops->sizes) l->ops->sizes(l, in, &n);
    if (n.weight) {
        l->w_off = net->n_params;
        l->w_numel = n.weight;
        net->n_params += n.weight;
    }
    if (n.bias) {
        l->b_off = net->n_params;
        l->b_numel = n.bias;
        net->n_params += n.bias;
    }
    int32_t buffers = 0;
    while (buffers < SF_KIND_BUFFERS && l->ops->buffer_names[buffers]) buffers++;
    if (n.buffer && buffers) {
        l->buf_off = net->n_buffers;
        l->buf_numel = n.buffer;
        net->n_buffers += buffers * n.buffer;
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
        const char *kind = l->ops->label ? l->ops->label(l) : l->ops->name;
        len += (size_t)snprintf(s + len, cap - len, "%3d %-10s in=%-3d", i, kind, l->in);
        if (l->ops->inputs == 2) len += (size_t)snprintf(s + len, cap - len, " +%-3d", l->in2);
        len += (size_t)snprintf(s + len, cap - len, " -> %dx%dx%d  params %lld", o[0], o[1], o[2], (long long)np);
        if (l->absorbs >= 0)
            len +=
                (size_t)snprintf(s + len, cap - len, "  (fused with the %s before)", net->layers[l->absorbs].ops->name);
        if (net->compiled && l->once_over_t)
            len += (size_t)snprintf(s + len, cap - len, "  (once over T: static input)");
        /* NHWC: a compiled net's output kept in that layout on a GPU (docs/architecture.md, Layouts) */
        len += (size_t)snprintf(s + len, cap - len, "%s\n", net->compiled && net->tensors[l->out].nhwc ? "  NHWC" : "");
    }
    len += (size_t)snprintf(s + len, cap - len, "parameters: %lld\n", (long long)net->n_params);
    return s;
}
