/* nir_export.c — a config's network and its parameters as a NIR graph (docs/nir.md). Layers are walked in order;
 * a tensor is known by the nodes whose outputs sum to it (an [add]: its inputs' union; dropout, flatten of a vector:
 * nothing), its NIR shape ([C] or [C, H, W]) and the conv or linear node that last wrote it (to fold BN into). */
#include "config/config_nir.h"

#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SOURCES 64

typedef struct tensor_view {
    int32_t nodes[MAX_SOURCES]; /* graph node indices whose outputs sum to this tensor */
    int32_t num_nodes;
    int32_t ndim;               /* 1 or 3 */
    int64_t shape[3];
    int32_t affine_node;        /* the conv/linear node whose output this is, directly or through an average pool or
                                 * dropout that alone read it (-1: none) */
    int32_t readers;            /* layers reading this tensor */
    int binary;                 /* every value is 0 or 1 (spikes) */
} tensor_view;

typedef struct exporter {
    const sf_config *cfg;
    const sf_net *net;
    double dt;
    sf_nir_graph *g;
    tensor_view *t; /* num_layers + 1 */
} exporter;

static int64_t numel_of(const tensor_view *v) { return v->ndim == 1 ? v->shape[0] : v->shape[0] * v->shape[1] * v->shape[2]; }

/* "layer 3 (conv2d): " before the current message. */
static sf_status at_layer(sf_status s, const exporter *e, int32_t i)
{
    return sf_fail_context(s, "%s:%d: layer %d (%s): ", e->cfg->source, e->cfg->layers[i].line, i,
                           sf_layer_kind_name(e->cfg->layers[i].desc.kind));
}

/* Parameter `name` ("3.weight") of the net into a malloc'd array of numel floats. */
static sf_status read_tensor(const sf_net *net, sf_tensor_role role, const char *name, int64_t numel, float **out)
{
    *out = NULL;
    for (int32_t i = 0; i < sf_net_tensor_count(net, role); i++) {
        sf_tensor_info ti;
        SF_TRY(sf_net_tensor_info(net, role, i, &ti));
        if (strcmp(ti.name, name) != 0) continue;
        if (ti.numel != numel) return sf_fail(SF_ERR_INVALID, "tensor %s has %lld elements, expected %lld", name,
                                              (long long)ti.numel, (long long)numel);
        if (!(*out = malloc((size_t)(numel ? numel : 1) * sizeof **out))) return sf_fail(SF_ERR_NOMEM, "out of memory");
        sf_status s = sf_net_tensor_read(net, role, i, *out);
        if (s != SF_OK) {
            free(*out);
            *out = NULL;
        }
        return s;
    }
    return sf_fail(SF_ERR_INVALID, "the network has no tensor %s", name);
}

static sf_status set_ints(sf_nir_fields *f, const char *name, int32_t n, const int64_t *v)
{
    double d[3];
    for (int32_t i = 0; i < n; i++) d[i] = (double)v[i];
    int64_t shape[1] = {n};
    return sf_nir_set(f, name, SF_NIR_I64, n ? 1 : 0, shape, d);
}

static sf_status set_int(sf_nir_fields *f, const char *name, int64_t v)
{
    double d = (double)v;
    return sf_nir_set(f, name, SF_NIR_I64, 0, NULL, &d);
}

static sf_status set_pair(sf_nir_fields *f, const char *name, int64_t v)
{
    const int64_t p[2] = {v, v};
    return set_ints(f, name, 2, p);
}

/* A float64 array of the tensor's NIR shape, every element `value` (a neuron parameter). */
static sf_status set_uniform(sf_nir_fields *f, const char *name, const tensor_view *v, double value)
{
    int64_t n = numel_of(v);
    double *d = malloc((size_t)n * sizeof *d);
    if (!d) return sf_fail(SF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) d[i] = value;
    sf_status s = sf_nir_set(f, name, SF_NIR_F64, v->ndim, v->shape, d);
    free(d);
    return s;
}

/* A new node fed by every node of `in`; *index receives its index. */
static sf_status add_node(exporter *e, const char *name, const char *type, const tensor_view *in, int32_t *index)
{
    SF_TRY(sf_nir_add_node(e->g, name, type, NULL));
    *index = e->g->num_nodes - 1;
    for (int32_t k = 0; in && k < in->num_nodes; k++) SF_TRY(sf_nir_add_edge(e->g, e->g->nodes[in->nodes[k]].name, name));
    return SF_OK;
}

static void view_of_node(tensor_view *v, int32_t node, int32_t ndim, const int64_t *shape)
{
    v->nodes[0] = node;
    v->num_nodes = 1;
    v->ndim = ndim;
    for (int32_t d = 0; d < ndim; d++) v->shape[d] = shape[d];
    v->affine_node = -1;
    v->binary = 0;
}

/* A [C,1,1] image read by a linear layer becomes a [C] vector through a Flatten node. */
static sf_status flatten_node(exporter *e, const char *name, const tensor_view *in, tensor_view *out)
{
    int32_t idx;
    SF_TRY(add_node(e, name, "Flatten", in, &idx));
    sf_nir_fields *f = &e->g->nodes[idx].fields;
    SF_TRY(set_ints(f, "input_type", 3, in->shape));
    SF_TRY(set_int(f, "start_dim", 0));
    SF_TRY(set_int(f, "end_dim", -1));
    const int64_t n = numel_of(in);
    const int binary = in->binary;
    view_of_node(out, idx, 1, &n);
    out->binary = binary;
    return SF_OK;
}

static sf_status export_linear(exporter *e, int32_t i, const tensor_view *in, tensor_view *out)
{
    const sf_layer_desc *d = &e->cfg->layers[i].desc;
    char name[64], wname[64], bname[64];
    tensor_view flat;
    if (in->ndim != 1) {
        snprintf(name, sizeof name, "flatten%d", i);
        SF_TRY(flatten_node(e, name, in, &flat));
        in = &flat;
    }
    const int64_t fan_in = numel_of(in), shape[2] = {d->out_features, fan_in};
    snprintf(name, sizeof name, "linear%d", i);
    snprintf(wname, sizeof wname, "%d.weight", i);
    snprintf(bname, sizeof bname, "%d.bias", i);
    int32_t idx;
    SF_TRY(add_node(e, name, d->bias ? "Affine" : "Linear", in, &idx));
    float *w = NULL, *b = NULL;
    sf_status s = read_tensor(e->net, SF_ROLE_PARAM, wname, shape[0] * shape[1], &w);
    if (s == SF_OK) s = sf_nir_set_f32(&e->g->nodes[idx].fields, "weight", 2, shape, w);
    if (s == SF_OK && d->bias) s = read_tensor(e->net, SF_ROLE_PARAM, bname, shape[0], &b);
    if (s == SF_OK && d->bias) s = sf_nir_set_f32(&e->g->nodes[idx].fields, "bias", 1, shape, b);
    free(w);
    free(b);
    view_of_node(out, idx, 1, shape);
    out->affine_node = idx;
    return s;
}

static sf_status export_conv(exporter *e, int32_t i, const tensor_view *in, tensor_view *out)
{
    const sf_layer_desc *d = &e->cfg->layers[i].desc;
    int32_t chw[3];
    SF_TRY(sf_net_tensor_shape(e->net, i + 1, chw));
    char name[64], wname[64], bname[64];
    snprintf(name, sizeof name, "conv%d", i);
    snprintf(wname, sizeof wname, "%d.weight", i);
    snprintf(bname, sizeof bname, "%d.bias", i);
    int32_t idx;
    SF_TRY(add_node(e, name, "Conv2d", in, &idx));
    sf_nir_fields *f = &e->g->nodes[idx].fields;
    const int64_t wshape[4] = {d->out_channels, in->shape[0], d->kernel, d->kernel};
    const int64_t out_shape[3] = {chw[0], chw[1], chw[2]};
    float *w = NULL, *b = NULL;
    sf_status s = read_tensor(e->net, SF_ROLE_PARAM, wname, wshape[0] * wshape[1] * wshape[2] * wshape[3], &w);
    if (s == SF_OK) s = sf_nir_set_f32(f, "weight", 4, wshape, w);
    /* NIR's Conv2d always has a bias; zeros stand for none (and import reads zeros as none) */
    if (s == SF_OK) s = d->bias ? read_tensor(e->net, SF_ROLE_PARAM, bname, wshape[0], &b)
                                : ((b = calloc((size_t)wshape[0], sizeof *b)) ? SF_OK : SF_ERR_NOMEM);
    if (s == SF_OK) s = sf_nir_set_f32(f, "bias", 1, wshape, b);
    if (s == SF_OK) s = set_pair(f, "stride", d->stride);
    if (s == SF_OK) s = set_pair(f, "padding", d->padding);
    if (s == SF_OK) s = set_pair(f, "dilation", 1);
    if (s == SF_OK) s = set_int(f, "groups", 1);
    if (s == SF_OK) s = set_ints(f, "input_shape", 2, in->shape + 1);
    free(w);
    free(b);
    view_of_node(out, idx, 3, out_shape);
    out->affine_node = idx;
    return s == SF_ERR_NOMEM ? sf_fail(s, "out of memory") : s;
}

/* A pooling node: AvgPool2d, or SumPool2d for a max pool of spikes. */
static sf_status pool_node(exporter *e, int32_t i, const char *name, const char *type, const tensor_view *in,
                           tensor_view *out)
{
    const sf_layer_desc *d = &e->cfg->layers[i].desc;
    int32_t chw[3];
    SF_TRY(sf_net_tensor_shape(e->net, i + 1, chw));
    int32_t idx;
    SF_TRY(add_node(e, name, type, in, &idx));
    sf_nir_fields *f = &e->g->nodes[idx].fields;
    const int32_t k = d->kernel ? d->kernel : (int32_t)in->shape[1]; /* 0: global, the whole (square) plane */
    SF_TRY(set_pair(f, "kernel_size", k));
    SF_TRY(set_pair(f, "stride", d->stride ? d->stride : k));
    SF_TRY(set_pair(f, "padding", d->padding));
    const int64_t shape[3] = {chw[0], chw[1], chw[2]};
    view_of_node(out, idx, 3, shape);
    return SF_OK;
}

static sf_status export_avgpool(exporter *e, int32_t i, const tensor_view *in, tensor_view *out)
{
    char name[64];
    snprintf(name, sizeof name, "avgpool%d", i);
    SF_TRY(pool_node(e, i, name, "AvgPool2d", in, out));
    /* BN after the pool folds into the conv before it (a per-channel affine map commutes with averaging, though not
     * with a border of zeros, which it would leave unscaled and unshifted) */
    out->affine_node = in->readers == 1 && e->cfg->layers[i].desc.padding == 0 ? in->affine_node : -1;
    return SF_OK;
}

/* NIR has no max pooling, but over spikes the maximum of a window is 1 exactly when its sum exceeds 0.5: a
 * SumPool2d node followed by a Threshold node at 0.5 computes it exactly. Over other values it is refused. */
static sf_status export_maxpool(exporter *e, int32_t i, const tensor_view *in, tensor_view *out)
{
    if (!in->binary)
        return sf_fail(SF_ERR_UNSUPPORTED, "NIR has no max pooling; a max pool of spikes (after a LIF layer) is "
                                           "written as sum pooling and a threshold, but this one pools other values: "
                                           "move it after the LIF layer, or use [avgpool]");
    char name[64];
    tensor_view sum;
    snprintf(name, sizeof name, "maxpool%d_sum", i);
    SF_TRY(pool_node(e, i, name, "SumPool2d", in, &sum));
    snprintf(name, sizeof name, "maxpool%d", i);
    int32_t idx;
    SF_TRY(add_node(e, name, "Threshold", &sum, &idx));
    SF_TRY(set_uniform(&e->g->nodes[idx].fields, "threshold", &sum, 0.5));
    view_of_node(out, idx, 3, sum.shape);
    out->binary = 1;
    return SF_OK;
}

/* Folds the eval-mode batch norm of layer i into the conv/linear node that wrote its input:
 * w'[c] = w[c]·γ_c/√(var_c + eps), b'[c] = (b[c] - mean_c)·γ_c/√(var_c + eps) + β_c. */
static sf_status fold_batchnorm(exporter *e, int32_t i, const tensor_view *in)
{
    if (in->affine_node < 0 || in->readers != 1)
        return sf_fail(SF_ERR_UNSUPPORTED, "NIR has no batch norm, and this one does not directly follow a conv or "
                                           "linear layer that it alone reads, so it cannot be folded into one");
    const int64_t C = in->shape[0];
    char name[64];
    float *p[4] = {0};
    static const char *const which[4] = {"weight", "bias", "running_mean", "running_var"};
    sf_status s = SF_OK;
    for (int k = 0; k < 4 && s == SF_OK; k++) {
        snprintf(name, sizeof name, "%d.%s", i, which[k]);
        s = read_tensor(e->net, k < 2 ? SF_ROLE_PARAM : SF_ROLE_BUFFER, name, C, &p[k]);
    }
    sf_nir_node *node = &e->g->nodes[in->affine_node];
    sf_nir_field *w = (sf_nir_field *)sf_nir_field_of(&node->fields, "weight");
    const sf_nir_field *bias = sf_nir_field_of(&node->fields, "bias");
    double *b = s == SF_OK ? calloc((size_t)C, sizeof *b) : NULL;
    if (s == SF_OK && !b) s = sf_fail(SF_ERR_NOMEM, "out of memory");
    if (s == SF_OK) {
        const double eps = e->cfg->layers[i].desc.bn_eps;
        const int64_t per_channel = w->numel / C;
        for (int64_t c = 0; c < C; c++) {
            double scale = (double)p[0][c] / sqrt((double)p[3][c] + eps);
            for (int64_t k = 0; k < per_channel; k++)
                w->values[c * per_channel + k] = (double)(float)(w->values[c * per_channel + k] * scale);
            double b0 = bias ? bias->values[c] : 0.0;
            b[c] = (double)(float)((b0 - (double)p[2][c]) * scale + (double)p[1][c]);
        }
        const int64_t shape[1] = {C};
        s = sf_nir_set(&node->fields, "bias", SF_NIR_F32, 1, shape, b);
    }
    if (s == SF_OK && strcmp(node->type, "Linear") == 0) { /* it has a bias now */
        char *t = realloc(node->type, sizeof "Affine");
        if (t) node->type = strcpy(t, "Affine");
        else s = sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    free(b);
    for (int k = 0; k < 4; k++) free(p[k]);
    return s;
}

static sf_status export_lif(exporter *e, int32_t i, const tensor_view *in, tensor_view *out)
{
    sf_nir_neuron n;
    SF_TRY(sf_lif_to_nir(&e->cfg->layers[i].desc.lif, e->dt, &n));
    char name[64];
    snprintf(name, sizeof name, "lif%d", i);
    int32_t idx;
    SF_TRY(add_node(e, name, n.is_if ? "IF" : "LIF", in, &idx));
    sf_nir_fields *f = &e->g->nodes[idx].fields;
    if (!n.is_if) SF_TRY(set_uniform(f, "tau", in, n.tau));
    SF_TRY(set_uniform(f, "r", in, n.r));
    if (!n.is_if) SF_TRY(set_uniform(f, "v_leak", in, n.v_leak));
    SF_TRY(set_uniform(f, "v_threshold", in, n.v_threshold));
    SF_TRY(set_uniform(f, "v_reset", in, n.v_reset));
    view_of_node(out, idx, in->ndim, in->shape);
    out->binary = 1;
    return SF_OK;
}

/* Tensor `in2` added to `in`: the union of their nodes (NIR sums a node's inputs). */
static sf_status export_add(const tensor_view *in, const tensor_view *in2, tensor_view *out)
{
    *out = *in;
    out->affine_node = -1;
    out->binary = 0;
    for (int32_t k = 0; k < in2->num_nodes; k++) {
        for (int32_t j = 0; j < out->num_nodes; j++)
            if (out->nodes[j] == in2->nodes[k])
                return sf_fail(SF_ERR_UNSUPPORTED, "a tensor is added to itself: NIR edges cannot repeat");
        if (out->num_nodes == MAX_SOURCES) return sf_fail(SF_ERR_UNSUPPORTED, "more than %d summed tensors", MAX_SOURCES);
        out->nodes[out->num_nodes++] = in2->nodes[k];
    }
    return SF_OK;
}

static sf_status export_layer(exporter *e, int32_t i)
{
    const sf_layer_desc *d = &e->cfg->layers[i].desc;
    const int32_t in_id = d->input < 0 ? i : d->input;
    const tensor_view *in = &e->t[in_id];
    tensor_view *out = &e->t[i + 1];
    switch (d->kind) {
    case SF_LAYER_LINEAR: return export_linear(e, i, in, out);
    case SF_LAYER_CONV2D: return export_conv(e, i, in, out);
    case SF_LAYER_AVGPOOL2D: return export_avgpool(e, i, in, out);
    case SF_LAYER_LIF: return export_lif(e, i, in, out);
    case SF_LAYER_ADD:
        if (d->connect != SF_CONNECT_ADD) /* NIR has sums of edges, no products of spikes */
            return sf_fail(SF_ERR_UNSUPPORTED, "connect = %s has no NIR node", sf_connect_name((sf_connect)d->connect));
        return export_add(in, &e->t[d->input2], out);
    case SF_LAYER_BATCHNORM:
        SF_TRY(fold_batchnorm(e, i, in));
        *out = *in;
        out->binary = 0;
        return SF_OK;
    case SF_LAYER_DROPOUT: /* an identity at eval */
        *out = *in;
        if (in->readers != 1) out->affine_node = -1;
        return SF_OK;
    case SF_LAYER_FLATTEN: {
        if (in->ndim == 1) {
            *out = *in;
            return SF_OK;
        }
        char name[64];
        snprintf(name, sizeof name, "flatten%d", i);
        return flatten_node(e, name, in, out);
    }
    case SF_LAYER_MAXPOOL2D: return export_maxpool(e, i, in, out);
    case SF_LAYER_RLIF: /* NIR would need a recurrent Affine edge from the LIF node back to itself */
        return sf_fail(SF_ERR_UNSUPPORTED, "a recurrent [rlif] layer has no NIR mapping in spikefuse");
    case SF_LAYER_TOKENS:
    case SF_LAYER_LAYERNORM:
    case SF_LAYER_SSA:
    case SF_LAYER_SDSA:
    case SF_LAYER_TOKEN_MEAN: /* NIR's primitives have no attention, token mixing or LayerNorm */
        return sf_fail(SF_ERR_UNSUPPORTED, "a %s layer (spiking transformers) has no NIR form",
                       sf_layer_kind_name(d->kind));
    }
    return sf_fail(SF_ERR_UNSUPPORTED, "no NIR form");
}

/* Output, after the leaky readout's LI node when there is one. */
static sf_status export_output(exporter *e)
{
    const tensor_view *last = &e->t[e->cfg->num_layers];
    tensor_view readout;
    if (e->cfg->net.readout == SF_READOUT_LEAKY) {
        int32_t idx;
        SF_TRY(add_node(e, "readout", "LI", last, &idx));
        sf_nir_fields *f = &e->g->nodes[idx].fields;
        SF_TRY(set_uniform(f, "tau", last, (double)e->cfg->net.readout_tau * e->dt));
        SF_TRY(set_uniform(f, "r", last, 1.0));
        SF_TRY(set_uniform(f, "v_leak", last, 0.0));
        view_of_node(&readout, idx, last->ndim, last->shape);
        last = &readout;
    }
    int32_t idx;
    SF_TRY(add_node(e, "output", "Output", last, &idx));
    return set_ints(&e->g->nodes[idx].fields, "shape", last->ndim, last->shape);
}

static sf_status export_graph(exporter *e)
{
    const sf_config *cfg = e->cfg;
    for (int32_t i = 0; i < cfg->num_layers; i++) {
        const sf_layer_desc *d = &cfg->layers[i].desc;
        e->t[d->input < 0 ? i : d->input].readers++;
        if (d->kind == SF_LAYER_ADD) e->t[d->input2].readers++;
    }
    int32_t idx;
    SF_TRY(add_node(e, "input", "Input", NULL, &idx));
    const int64_t in_shape[3] = {cfg->net.in_channels, cfg->net.in_height, cfg->net.in_width};
    SF_TRY(set_ints(&e->g->nodes[idx].fields, "shape", 3, in_shape));
    view_of_node(&e->t[0], idx, 3, in_shape);
    e->t[0].binary = cfg->train.encoding != SF_ENCODING_DIRECT; /* Poisson and latency inputs are spikes */
    for (int32_t i = 0; i < cfg->num_layers; i++) {
        int32_t readers = e->t[i + 1].readers;
        sf_status s = export_layer(e, i);
        e->t[i + 1].readers = readers;
        if (s != SF_OK) return at_layer(s, e, i);
    }
    SF_TRY(export_output(e));
    char source[64];
    snprintf(source, sizeof source, "spikefuse %s", sf_version());
    SF_TRY(sf_nir_set(&e->g->metadata, "dt", SF_NIR_F64, 0, NULL, &e->dt));
    /* what the input is (spikes or not) is the dataset encoding's, which NIR has no word for */
    SF_TRY(sf_nir_set_text(&e->g->metadata, "input_encoding", sf_encoding_name(cfg->train.encoding)));
    return sf_nir_set_text(&e->g->metadata, "source", source);
}

sf_status sf_config_to_nir(const sf_config *cfg, const sf_net *net, double dt, sf_nir_graph **out)
{
    *out = NULL;
    if (!(dt > 0.0) || !isfinite(dt)) return sf_fail(SF_ERR_INVALID, "dt = %g: must be > 0", dt);
    if (sf_net_num_layers(net) != cfg->num_layers)
        return sf_fail(SF_ERR_INVALID, "the network has %d layers, the config %d", sf_net_num_layers(net),
                       cfg->num_layers);
    exporter e = {.cfg = cfg, .net = net, .dt = dt};
    e.t = calloc((size_t)cfg->num_layers + 1, sizeof *e.t);
    sf_status s = e.t ? sf_nir_graph_create(&e.g) : sf_fail(SF_ERR_NOMEM, "out of memory");
    if (s == SF_OK) s = export_graph(&e);
    free(e.t);
    if (s != SF_OK) {
        sf_nir_graph_free(e.g);
        return s;
    }
    *out = e.g;
    return SF_OK;
}
