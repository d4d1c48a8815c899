/* nir_import.c — a NIR graph as a config (INI text) and the parameters of its layers (docs/nir.md says what maps
 * to what). Nodes are visited in topological order; each becomes zero or more layer sections, and each node's
 * output is known as a tensor of the network being written (layer i writes tensor i + 1, the input is tensor 0). */
#include "config/config_nir.h"

#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct value {
    int32_t tensor; /* -1: not computed yet */
    int32_t ndim;   /* 1 (a vector) or 3 (an image) */
    int64_t shape[3];
    int binary;     /* spikes: every value is 0 or 1 */
} value;

typedef struct importer {
    const sf_nir_graph *g;
    const sf_nir_import_options *o;
    double dt;
    FILE *text;          /* the config being written (open_memstream) */
    int32_t layers;      /* layers written so far */
    value *v;            /* per node */
    char *absorbed;      /* per node: a Threshold node already written as part of a max pool */
    int32_t readout;     /* the LI node that is the leaky readout (-1: none) */
    double readout_tau;
    sf_tensor_list *params;
    int32_t dataset;
    int32_t synthetic_shape[3]; /* dataset = synthetic: the Input node's shape, for input_shape */
    int64_t classes;            /* the Output node's size (the synthetic source's class count) */
    int32_t encoding; /* from the graph's metadata "input_encoding" (spikefuse writes it), else direct */
} importer;

static int64_t numel_of(const value *v) { return v->ndim == 1 ? v->shape[0] : v->shape[0] * v->shape[1] * v->shape[2]; }

static sf_status refuse(const sf_nir_node *n, const char *what, const char *detail)
{
    return sf_fail(SF_ERR_UNSUPPORTED, "NIR node '%s' (%s): %s%s", n->name, n->type, what, detail ? detail : "");
}

/* refuse() with the message of the call that just failed, copied first: sf_fail writes the buffer it would read. */
static sf_status refuse_last_error(const sf_nir_node *n)
{
    char why[512];
    snprintf(why, sizeof why, "%s", sf_last_error());
    return refuse(n, why, NULL);
}

/* Field `name` of node n, when present, must give value v's shape ([C, H, W] or [N]), possibly after a leading batch
 * dimension of 1. */
static sf_status check_shape(const sf_nir_node *n, const char *name, const value *v)
{
    const sf_nir_field *f = sf_nir_field_of(&n->fields, name);
    if (!f) return SF_OK;
    if (f->dtype == SF_NIR_STRING || f->ndim > 1) return refuse(n, "expected a list of sizes in ", name);
    const int64_t skip = f->numel == v->ndim + 1 && f->values[0] == 1.0 ? 1 : 0;
    int same = f->numel - skip == v->ndim;
    for (int64_t i = 0; same && i < v->ndim; i++) same = f->values[skip + i] == (double)v->shape[i];
    if (same) return SF_OK;
    char want[96];
    snprintf(want, sizeof want, v->ndim == 1 ? " (the tensor here is [%lld])" : " (the tensor here is [%lld, %lld, %lld])",
             (long long)v->shape[0], (long long)v->shape[1], (long long)v->shape[2]);
    char what[160];
    snprintf(what, sizeof what, "%s does not give the shape of its tensor%s", name, want);
    return refuse(n, what, NULL);
}

/* ---------------------------------------------------------------- reading fields */

static sf_status need(const sf_nir_node *n, const char *name, const sf_nir_field **out)
{
    *out = sf_nir_field_of(&n->fields, name);
    if (!*out) return refuse(n, "lacks the field ", name);
    if ((*out)->dtype == SF_NIR_STRING) return refuse(n, "a string where numbers belong: ", name);
    return SF_OK;
}

/* One integer from a field that is a scalar or a pair of equal values (NIR's stride, padding, kernel_size). */
static sf_status square(const sf_nir_node *n, const char *name, int64_t lo, int64_t hi, int64_t *out)
{
    const sf_nir_field *f;
    SF_TRY(need(n, name, &f));
    if (f->numel < 1 || f->numel > 2 || f->ndim > 1) return refuse(n, "expected one or two numbers in ", name);
    if (f->numel == 2 && f->values[0] != f->values[1])
        return refuse(n, "spikefuse layers are square: the two values differ in ", name);
    double x = f->values[0];
    if (x != floor(x) || x < (double)lo || x > (double)hi) return refuse(n, "value out of range in ", name);
    *out = (int64_t)x;
    return SF_OK;
}

/* The single value of a neuron parameter array (every neuron must have the same one; `in`, when given, is the
 * layer's input, whose size the array must have). */
static sf_status uniform(const sf_nir_node *n, const char *name, const value *in, double dflt, int optional, double *out)
{
    const sf_nir_field *f = sf_nir_field_of(&n->fields, name);
    if (!f && optional) {
        *out = dflt;
        return SF_OK;
    }
    SF_TRY(need(n, name, &f));
    if (in && f->numel != 1 && f->numel != numel_of(in))
        return refuse(n, "a parameter's size differs from the number of neurons: ", name);
    for (int64_t i = 1; i < f->numel; i++)
        if (f->values[i] != f->values[0])
            return refuse(n, "spikefuse's neurons of a layer share their parameters; it differs between neurons: ",
                          name);
    *out = f->values[0];
    return SF_OK;
}

/* ---------------------------------------------------------------- writing layers */

/* Adds field `f` of `node` as parameter "<layer>.<name>" (copied as float32); a value not finite in float32 is
 * refused naming the element, as training and evaluation would refuse it. */
static sf_status add_param(importer *im, const sf_nir_node *node, const char *name, const sf_nir_field *f)
{
    const double *v = f->values;
    const int64_t n = f->numel;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite((float)v[i])) {
            char what[160];
            snprintf(what, sizeof what, "%s[%lld] is %g, not a finite 32-bit float: ", f->name, (long long)i, v[i]);
            return refuse(node, what, "spikefuse's parameters are finite float32 values");
        }
    sf_tensor_list *l = im->params;
    sf_named_tensor *items = realloc(l->items, (size_t)(l->count + 1) * sizeof *items);
    if (!items) return sf_fail(SF_ERR_NOMEM, "out of memory");
    l->items = items;
    sf_named_tensor *t = &items[l->count];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%d.%s", im->layers, name);
    t->numel = n;
    if (!(t->data = malloc((size_t)(n ? n : 1) * sizeof *t->data))) return sf_fail(SF_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) t->data[i] = (float)v[i];
    l->count++;
    return SF_OK;
}

/* Text from the file (node names, its path) as it may stand in a config comment: on one line, with nothing inih
 * or the reader would take for syntax. */
static void put_comment_text(FILE *f, const char *text)
{
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        fputc(*c < 0x20 || *c == 0x7f || strchr(";#[]=", *c) ? '_' : *c, f);
}

/* Opens the section of the next layer, reading tensor `from` (the previous layer's output needs no `from`). */
static void section(importer *im, const char *name, int32_t from, const char *node)
{
    fprintf(im->text, "\n[%s]%s", name, node ? " ; NIR node " : "");
    if (node) put_comment_text(im->text, node);
    fputc('\n', im->text);
    if (from != im->layers) fprintf(im->text, from == 0 ? "from = input\n" : "from = %d\n", from - 1);
}

/* Closes a layer: its output tensor is the next one. */
static int32_t layer_done(importer *im) { return ++im->layers; }

/* An identity layer (dropout with p = 0) copying tensor t, so that the next layer can read it as the previous one. */
static int32_t identity(importer *im, int32_t t)
{
    section(im, "dropout", t, NULL);
    fprintf(im->text, "p = 0 ; an identity: brings the tensor forward\n");
    return layer_done(im);
}

/* The sum of a node's inputs as one tensor: [add] layers in edge order. */
static sf_status node_input(importer *im, int32_t node, value *out)
{
    const sf_nir_graph *g = im->g;
    const sf_nir_node *n = &g->nodes[node];
    int32_t count = 0;
    for (int32_t k = 0; k < g->num_edges; k++) {
        if (g->edges[k].to != node) continue;
        const value *p = &im->v[g->edges[k].from];
        if (count++ == 0) {
            *out = *p;
            continue;
        }
        if (p->ndim != out->ndim || memcmp(p->shape, out->shape, (size_t)p->ndim * sizeof p->shape[0]) != 0)
            return refuse(n, "its inputs have different shapes", NULL);
        if (out->tensor != im->layers) identity(im, out->tensor);
        section(im, "add", im->layers, NULL);
        fprintf(im->text, p->tensor == 0 ? "from = input\n" : "from = %d\n", p->tensor - 1);
        out->tensor = layer_done(im);
        out->binary = 0;
    }
    if (count == 0) return refuse(n, "has no input", NULL);
    return SF_OK;
}

static sf_status import_affine(importer *im, const sf_nir_node *n, const value *in, value *out, int has_bias)
{
    const sf_nir_field *w, *b = NULL;
    SF_TRY(need(n, "weight", &w));
    if (w->ndim != 2) return refuse(n, "the weight must be a matrix", NULL);
    if (in->ndim != 1 || w->shape[1] != in->shape[0]) return refuse(n, "the weight does not fit the input's size", NULL);
    if (w->shape[0] < 1 || w->shape[0] > (1 << 24)) return refuse(n, "unsupported number of outputs", NULL);
    if (has_bias) {
        SF_TRY(need(n, "bias", &b));
        if (b->numel != w->shape[0]) return refuse(n, "the bias does not fit the weight", NULL);
    }
    section(im, "linear", in->tensor, n->name);
    fprintf(im->text, "out = %lld\nbias = %s\n", (long long)w->shape[0], has_bias ? "on" : "off");
    SF_TRY(add_param(im, n, "weight", w));
    if (b) SF_TRY(add_param(im, n, "bias", b));
    *out = (value){.tensor = layer_done(im), .ndim = 1, .shape = {w->shape[0]}};
    return SF_OK;
}

/* NIR's padding: a number, a pair, or "same" / "valid". */
static sf_status conv_padding(const sf_nir_node *n, int64_t k, int64_t stride, int64_t *pad)
{
    const sf_nir_field *f = sf_nir_field_of(&n->fields, "padding");
    if (f && f->dtype == SF_NIR_STRING) {
        if (strcmp(f->text, "valid") == 0) *pad = 0;
        else if (strcmp(f->text, "same") == 0 && stride == 1 && k % 2 == 1) *pad = (k - 1) / 2;
        else return refuse(n, "padding must be a number, 'valid', or 'same' with stride 1 and an odd kernel", NULL);
        return SF_OK;
    }
    return square(n, "padding", 0, 64, pad);
}

static sf_status import_conv(importer *im, const sf_nir_node *n, const value *in, value *out)
{
    const sf_nir_field *w, *b;
    int64_t stride, pad, dilation = 1, groups = 1;
    SF_TRY(need(n, "weight", &w));
    SF_TRY(need(n, "bias", &b));
    if (w->ndim != 4) return refuse(n, "the weight must be [out, in, height, width]", NULL);
    if (in->ndim != 3 || w->shape[1] != in->shape[0]) return refuse(n, "the weight does not fit the input's channels (groups are not supported)", NULL);
    if (w->shape[2] != w->shape[3]) return refuse(n, "spikefuse's convolutions have square kernels", NULL);
    if (w->shape[2] < 1 || w->shape[2] > 64 || w->shape[0] < 1 || w->shape[0] > 65536)
        return refuse(n, "unsupported kernel size or channel count", NULL);
    if (b->numel != w->shape[0]) return refuse(n, "the bias does not fit the weight", NULL);
    SF_TRY(square(n, "stride", 1, 64, &stride));
    SF_TRY(conv_padding(n, w->shape[2], stride, &pad));
    if (sf_nir_field_of(&n->fields, "dilation")) SF_TRY(square(n, "dilation", 1, 1 << 20, &dilation));
    if (sf_nir_field_of(&n->fields, "groups")) SF_TRY(square(n, "groups", 1, 1 << 20, &groups));
    if (dilation != 1 || groups != 1) return refuse(n, "spikefuse's convolutions have no dilation and no groups", NULL);
    const int64_t k = w->shape[2], oh = (in->shape[1] + 2 * pad - k) / stride + 1, ow = (in->shape[2] + 2 * pad - k) / stride + 1;
    if (in->shape[1] + 2 * pad < k || in->shape[2] + 2 * pad < k) return refuse(n, "the kernel is larger than the padded input", NULL);
    int bias = 0;
    for (int64_t i = 0; i < b->numel; i++) bias |= b->values[i] != 0.0;
    section(im, "conv", in->tensor, n->name);
    fprintf(im->text, "filters = %lld\nsize = %lld\nstride = %lld\npad = %lld\nbias = %s\n", (long long)w->shape[0],
            (long long)k, (long long)stride, (long long)pad, bias ? "on" : "off");
    SF_TRY(add_param(im, n, "weight", w));
    if (bias) SF_TRY(add_param(im, n, "bias", b));
    *out = (value){.tensor = layer_done(im), .ndim = 3, .shape = {w->shape[0], oh, ow}};
    return SF_OK;
}

static sf_status import_pool(importer *im, const sf_nir_node *n, const value *in, value *out, const char *section_name)
{
    int64_t k = 1, stride = 1, pad = 0;
    SF_TRY(square(n, "kernel_size", 1, 15, &k));
    SF_TRY(square(n, "stride", 1, 64, &stride));
    SF_TRY(square(n, "padding", 0, 64, &pad));
    if (2 * pad > k)
        return refuse(n, "spikefuse's pooling pads at most kernel_size/2 on each side (PyTorch's rule)", NULL);
    if (in->ndim != 3 || in->shape[1] + 2 * pad < k || in->shape[2] + 2 * pad < k)
        return refuse(n, "the window does not fit the input", NULL);
    section(im, section_name, in->tensor, n->name);
    fprintf(im->text, "size = %lld\nstride = %lld\n", (long long)k, (long long)stride);
    if (pad) fprintf(im->text, "pad = %lld\n", (long long)pad);
    *out = (value){.tensor = layer_done(im), .ndim = 3,
                   .shape = {in->shape[0], (in->shape[1] + 2 * pad - k) / stride + 1,
                             (in->shape[2] + 2 * pad - k) / stride + 1}};
    return SF_OK;
}

/* A SumPool2d of spikes whose only reader is a Threshold in [0, 1) computes a max pool (the window holds a spike
 * exactly when its sum exceeds the threshold): one [maxpool] layer for both nodes. Other sum pools are refused. */
static sf_status import_sumpool(importer *im, int32_t node, const value *in, value *out)
{
    const sf_nir_graph *g = im->g;
    const sf_nir_node *n = &g->nodes[node];
    int32_t thr = -1, readers = 0;
    for (int32_t k = 0; k < g->num_edges; k++)
        if (g->edges[k].from == node) {
            readers++;
            thr = g->edges[k].to;
        }
    int thr_inputs = 0;
    for (int32_t k = 0; thr >= 0 && k < g->num_edges; k++) thr_inputs += g->edges[k].to == thr;
    double theta = -1;
    if (readers == 1 && thr_inputs == 1 && strcmp(g->nodes[thr].type, "Threshold") == 0)
        SF_TRY(uniform(&g->nodes[thr], "threshold", NULL, 0, 0, &theta));
    if (!in->binary || !(theta >= 0.0 && theta < 1.0))
        return refuse(n, "spikefuse has average and max pooling, not sum pooling: only a sum pool of spikes read by "
                         "a Threshold node alone (threshold in [0, 1), a max pool) is imported", NULL);
    SF_TRY(import_pool(im, n, in, out, "maxpool"));
    out->binary = 1;
    im->absorbed[thr] = 1;
    return SF_OK;
}

static sf_status import_flatten(importer *im, const sf_nir_node *n, const value *in, value *out)
{
    if (in->ndim == 1) { /* nothing to flatten */
        *out = *in;
        return SF_OK;
    }
    const sf_nir_field *s = sf_nir_field_of(&n->fields, "start_dim"), *e = sf_nir_field_of(&n->fields, "end_dim");
    double start = s && s->numel == 1 ? s->values[0] : 0, end = e && e->numel == 1 ? e->values[0] : -1;
    if (start < 0) start += 3;
    if (end < 0) end += 3;
    if (start != 0 || end != 2)
        return refuse(n, "only flattening every dimension (start_dim 0, end_dim -1, without the batch) is supported",
                      NULL);
    SF_TRY(check_shape(n, "input_type", in));
    section(im, "flatten", in->tensor, n->name);
    *out = (value){.tensor = layer_done(im), .ndim = 1, .shape = {numel_of(in)}, .binary = in->binary};
    return SF_OK;
}

static const char *bool_text(int b) { return b ? "on" : "off"; }

static sf_status import_neuron(importer *im, const sf_nir_node *n, const value *in, value *out, int is_if)
{
    sf_nir_neuron nn = {.is_if = is_if};
    if (!is_if) {
        SF_TRY(uniform(n, "tau", in, 0, 0, &nn.tau));
        SF_TRY(uniform(n, "v_leak", in, 0, 0, &nn.v_leak));
    }
    SF_TRY(uniform(n, "r", in, 0, 0, &nn.r));
    SF_TRY(uniform(n, "v_threshold", in, 0, 0, &nn.v_threshold));
    SF_TRY(uniform(n, "v_reset", in, 0, 1, &nn.v_reset));
    sf_lif_params p;
    sf_lif_default_params(&p);
    sf_status s = sf_lif_params_from_nir(is_if, nn.tau, nn.r, nn.v_leak, nn.v_threshold, nn.v_reset, im->dt, &p);
    if (s != SF_OK) return refuse_last_error(n);
    section(im, "lif", in->tensor, n->name);
    if (p.decay > 0.0f) fprintf(im->text, "decay = %.9g\n", (double)p.decay);
    else fprintf(im->text, "tau = %.9g\n", (double)p.tau);
    fprintf(im->text, "decay_input = %s\nv_threshold = %.9g\nv_reset = %.9g\nreset = hard\n", bool_text(p.decay_input),
            (double)p.v_threshold, (double)p.v_reset);
    *out = *in;
    out->tensor = layer_done(im);
    out->binary = 1;
    return SF_OK;
}

/* An LI node is the leaky readout when Output alone reads it: r_t = a·r_{t-1} + (1 - a)·o_t needs r = 1, no leak
 * potential. */
static sf_status import_readout(importer *im, int32_t node, const value *in, value *out)
{
    const sf_nir_node *n = &im->g->nodes[node];
    int readers = 0, to_output = 1;
    for (int32_t k = 0; k < im->g->num_edges; k++)
        if (im->g->edges[k].from == node) {
            readers++;
            to_output &= strcmp(im->g->nodes[im->g->edges[k].to].type, "Output") == 0;
        }
    if (readers != 1 || !to_output)
        return refuse(n, "spikefuse has leaky integrators only as the readout, just before Output", NULL);
    double tau, r, v_leak;
    SF_TRY(uniform(n, "tau", in, 0, 0, &tau));
    SF_TRY(uniform(n, "r", in, 0, 0, &r));
    SF_TRY(uniform(n, "v_leak", in, 0, 0, &v_leak));
    if (!(fabs(r - 1.0) <= 1e-6) || v_leak != 0.0 || !(tau / im->dt >= 1.0) || !(tau / im->dt <= 1e6))
        return refuse(n, "the readout needs r = 1, v_leak = 0 and tau between dt and 10^6·dt", NULL);
    im->readout = node;
    im->readout_tau = tau / im->dt;
    *out = *in;
    return SF_OK;
}

static sf_status import_scale(const sf_nir_node *n, const value *in, value *out)
{
    const sf_nir_field *f;
    SF_TRY(need(n, "scale", &f));
    for (int64_t i = 0; i < f->numel; i++)
        if (f->values[i] != 1.0) return refuse(n, "only a scale of ones (a junction) is supported", NULL);
    *out = *in;
    return SF_OK;
}

/* Dispatches on the node's type. */
static sf_status import_node(importer *im, int32_t node)
{
    const sf_nir_node *n = &im->g->nodes[node];
    const char *t = n->type;
    value in, *out = &im->v[node];
    SF_TRY(node_input(im, node, &in));
    if (strcmp(t, "Affine") == 0) return import_affine(im, n, &in, out, 1);
    if (strcmp(t, "Linear") == 0) return import_affine(im, n, &in, out, 0);
    if (strcmp(t, "Conv2d") == 0) return import_conv(im, n, &in, out);
    if (strcmp(t, "AvgPool2d") == 0) return import_pool(im, n, &in, out, "avgpool");
    if (strcmp(t, "SumPool2d") == 0) return import_sumpool(im, node, &in, out);
    if (im->absorbed[node]) { /* the Threshold of a max pool */
        *out = in;
        return SF_OK;
    }
    if (strcmp(t, "Flatten") == 0) return import_flatten(im, n, &in, out);
    if (strcmp(t, "LIF") == 0) return import_neuron(im, n, &in, out, 0);
    if (strcmp(t, "IF") == 0) return import_neuron(im, n, &in, out, 1);
    if (strcmp(t, "LI") == 0) return import_readout(im, node, &in, out);
    if (strcmp(t, "Scale") == 0) return import_scale(n, &in, out);
    if (strcmp(t, "Output") == 0) {
        SF_TRY(check_shape(n, "shape", &in));
        *out = in;
        im->classes = numel_of(&in);
        return SF_OK;
    }
    static const struct {
        const char *type, *why;
    } known[] = {
        {"CubaLIF", "spikefuse has no current-based (synaptic) LIF neuron"},
        {"CubaLI", "spikefuse has no current-based leaky integrator"},
        {"I", "spikefuse has no non-leaky integrator layer"},
        {"Conv1d", "spikefuse has 2-d convolutions only"},
        {"Threshold", "spikefuse has no stateless threshold layer (only as the max pool of a SumPool2d of spikes)"},
        {"Delay", "spikefuse has no delays"},
        {"NIRGraph", "subgraphs (snnTorch's recurrent layers are written as one) are not supported: spikefuse's "
                     "recurrent [rlif] layer has no NIR mapping"},
        {"Input", "a second Input: spikefuse networks have one input"},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (strcmp(t, known[k].type) == 0) return refuse(n, known[k].why, NULL);
    return refuse(n, "unknown node type", NULL);
}

/* ---------------------------------------------------------------- the graph */

/* The network input: dataset k's [c, h, w], flattened first when the NIR Input is a vector. */
static sf_status take_input(importer *im, const sf_nir_node *n, int32_t k, int32_t c, int32_t h, int32_t w, int64_t numel)
{
    im->dataset = k;
    const sf_nir_field *f;
    SF_TRY(need(n, "shape", &f));
    value *v = &im->v[n - im->g->nodes];
    *v = (value){.tensor = 0, .ndim = 3, .shape = {c, h, w}, .binary = im->encoding != SF_ENCODING_DIRECT};
    if (f->numel == 1) {
        section(im, "flatten", 0, n->name);
        *v = (value){.tensor = layer_done(im), .ndim = 1, .shape = {numel}, .binary = v->binary};
    }
    return SF_OK;
}

/* The Input node: the dataset whose input has its size; a vector input gets a [flatten] first. */
static sf_status import_input(importer *im, int32_t node)
{
    const sf_nir_node *n = &im->g->nodes[node];
    const sf_nir_field *f;
    for (int32_t k = 0; k < im->g->num_edges; k++)
        if (im->g->edges[k].to == node) return refuse(n, "an Input node cannot have inputs", NULL);
    SF_TRY(need(n, "shape", &f));
    if (f->ndim != 1 || (f->numel != 1 && f->numel != 3)) return refuse(n, "the shape must be [N] or [C, H, W]", NULL);
    int64_t numel = 1;
    for (int64_t i = 0; i < f->numel; i++) {
        if (!(f->values[i] >= 1 && f->values[i] <= (1 << 24))) return refuse(n, "a dimension is out of range", NULL);
        numel *= (int64_t)f->values[i];
    }
    sf_data_params defaults;
    sf_data_default_params(&defaults);
    for (int32_t k = 0; k < SF_DATASET_NUM_KINDS; k++) {
        int32_t shape[3], classes;
        if (k == SF_DATASET_SYNTHETIC) continue; /* any shape: the fallback below */
        sf_data_input_shape((sf_dataset_kind)k, &defaults, shape, &classes);
        const int32_t c = shape[0], h = shape[1], w = shape[2];
        int fits = f->numel == 3 ? f->values[0] == c && f->values[1] == h && f->values[2] == w : numel == (int64_t)c * h * w;
        if (im->o->dataset >= 0 && k != im->o->dataset) continue;
        if (!fits) {
            if (im->o->dataset >= 0)
                return refuse(n, "its shape is not the chosen dataset's input shape: ", sf_dataset_kind_name((sf_dataset_kind)k));
            continue;
        }
        return take_input(im, n, k, c, h, w, numel);
    }
    /* no dataset of fixed shape fits (or synthetic was asked for): the synthetic source takes any shape */
    if (im->o->dataset < 0 || im->o->dataset == SF_DATASET_SYNTHETIC) {
        int32_t c = 1, h = 1, w = 1;
        if (f->numel == 3) c = (int32_t)f->values[0], h = (int32_t)f->values[1], w = (int32_t)f->values[2];
        else if (numel <= 16384) c = (int32_t)numel;
        else return refuse(n, "a vector input longer than 16384 has no dataset here", NULL);
        im->synthetic_shape[0] = c, im->synthetic_shape[1] = h, im->synthetic_shape[2] = w;
        return take_input(im, n, SF_DATASET_SYNTHETIC, c, h, w, numel);
    }
    return refuse(n, "no dataset of this build has inputs of this shape", NULL);
}

/* Node indices in topological order (Kahn's algorithm, lowest index first); a cycle is refused. */
static sf_status topological(const sf_nir_graph *g, int32_t *order)
{
    int32_t *indeg = calloc((size_t)g->num_nodes + 1, sizeof *indeg), done = 0;
    if (!indeg) return sf_fail(SF_ERR_NOMEM, "out of memory");
    for (int32_t k = 0; k < g->num_edges; k++) indeg[g->edges[k].to]++;
    char *placed = calloc((size_t)g->num_nodes + 1, 1);
    sf_status s = placed ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
    while (s == SF_OK && done < g->num_nodes) {
        int32_t next = -1;
        for (int32_t i = 0; i < g->num_nodes && next < 0; i++)
            if (!placed[i] && indeg[i] == 0) next = i;
        if (next < 0) {
            for (int32_t i = 0; i < g->num_nodes && next < 0; i++)
                if (!placed[i]) next = i;
            s = sf_fail(SF_ERR_UNSUPPORTED, "NIR node '%s' is on a cycle: recurrent connections are not supported "
                        "(spikefuse's recurrent [rlif] layer has no NIR mapping)", g->nodes[next].name);
            break;
        }
        placed[next] = 1;
        order[done++] = next;
        for (int32_t k = 0; k < g->num_edges; k++)
            if (g->edges[k].from == next) indeg[g->edges[k].to]--;
    }
    free(indeg);
    free(placed);
    return s;
}

/* The one node of a type, which must exist exactly once. */
static sf_status single(const sf_nir_graph *g, const char *type, int32_t *out)
{
    *out = -1;
    for (int32_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i].type, type) == 0) {
            if (*out >= 0) return sf_fail(SF_ERR_UNSUPPORTED, "the graph has more than one %s node", type);
            *out = i;
        }
    return *out >= 0 ? SF_OK : sf_fail(SF_ERR_FORMAT, "the graph has no %s node", type);
}

static sf_status import_graph(importer *im)
{
    const sf_nir_graph *g = im->g;
    int32_t input, output;
    SF_TRY(single(g, "Input", &input));
    SF_TRY(single(g, "Output", &output));
    int32_t *order = malloc((size_t)(g->num_nodes ? g->num_nodes : 1) * sizeof *order);
    if (!order) return sf_fail(SF_ERR_NOMEM, "out of memory");
    sf_status s = topological(g, order);
    if (s == SF_OK) s = import_input(im, input);
    for (int32_t k = 0; s == SF_OK && k < g->num_nodes; k++)
        if (order[k] != input) s = import_node(im, order[k]);
    free(order);
    SF_TRY(s);
    for (int32_t k = 0; k < g->num_edges; k++)
        if (g->edges[k].from == output) return refuse(&g->nodes[output], "Output feeds another node", NULL);
    if (im->v[output].tensor == 0 || im->layers == 0) return sf_fail(SF_ERR_UNSUPPORTED, "the graph has no layers");
    if (im->v[output].tensor != im->layers) identity(im, im->v[output].tensor);
    return SF_OK;
}

/* The [train] section first, layers after it: the layers are written to a second stream and appended. */
static sf_status assemble(importer *im, const char *layers, char **out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return sf_fail(SF_ERR_NOMEM, "out of memory");
    fputs("; spikefuse config imported from the NIR graph ", f);
    put_comment_text(f, im->o->source ? im->o->source : "");
    fprintf(f, " (dt = %g s)\n; training settings are defaults: edit them before training\n[train]\ndataset = %s\n",
            im->dt, sf_dataset_kind_name((sf_dataset_kind)im->dataset));
    if (im->dataset == SF_DATASET_SYNTHETIC) {
        const int32_t *sh = im->synthetic_shape;
        if (sh[1] == 1 && sh[2] == 1) fprintf(f, "input_shape = %d\n", sh[0]);
        else fprintf(f, "input_shape = %d, %d, %d\n", sh[0], sh[1], sh[2]);
        fprintf(f, "classes = %lld\n", (long long)im->classes);
    }
    if (im->encoding != SF_ENCODING_DIRECT)
        fprintf(f, "encoding = %s\n", sf_encoding_name((sf_encoding)im->encoding));
    if (im->o->init) fprintf(f, "init = %s\n", im->o->init);
    fputs(layers, f);
    if (im->readout >= 0) {
        fputs("\n[readout] ; NIR node ", f);
        put_comment_text(f, im->g->nodes[im->readout].name);
        fprintf(f, "\ntype = leaky\ntau = %.9g\n", im->readout_tau);
    }
    if (fclose(f) != 0 || !text) {
        free(text);
        return sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    *out = text;
    return SF_OK;
}

/* The written config must parse and build into a network whose parameters are the list's. */
static sf_status verify(const char *text, const char *name, const sf_tensor_list *params)
{
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    sf_status s = sf_config_parse_string(text, name, &cfg);
    if (s == SF_OK) s = sf_config_build_net(cfg, &net);
    for (int32_t i = 0; s == SF_OK && i < sf_net_tensor_count(net, SF_ROLE_PARAM); i++) {
        sf_tensor_info ti;
        s = sf_net_tensor_info(net, SF_ROLE_PARAM, i, &ti);
        int found = 0;
        for (int32_t k = 0; s == SF_OK && k < params->count; k++)
            found |= strcmp(params->items[k].name, ti.name) == 0 && params->items[k].numel == ti.numel;
        if (s == SF_OK && !found) s = sf_fail(SF_ERR_INVALID, "parameter %s of the imported network is missing", ti.name);
    }
    sf_net_free(net);
    sf_config_free(cfg);
    return s;
}

sf_status sf_config_from_nir(const sf_nir_graph *g, const sf_nir_import_options *o, char **config_text,
                             sf_tensor_list *params)
{
    *config_text = NULL;
    memset(params, 0, sizeof *params);
    const sf_nir_field *meta_dt = sf_nir_field_of(&g->metadata, "dt"),
                       *meta_enc = sf_nir_field_of(&g->metadata, "input_encoding");
    sf_encoding enc = SF_ENCODING_DIRECT;
    if (meta_enc && meta_enc->dtype == SF_NIR_STRING && sf_encoding_parse(meta_enc->text, &enc) != SF_OK)
        enc = SF_ENCODING_DIRECT;
    importer im = {.g = g, .o = o, .readout = -1, .params = params, .dataset = -1, .encoding = (int32_t)enc};
    im.dt = o->dt > 0 ? o->dt : meta_dt ? NAN : SF_NIR_DEFAULT_DT;
    /* the file's own dt, when it is the one used: one positive number, else the file is refused, not guessed at */
    if (o->dt <= 0 && meta_dt && meta_dt->dtype != SF_NIR_STRING && meta_dt->numel == 1) im.dt = meta_dt->values[0];
    if (!(im.dt > 0.0) || !isfinite(im.dt))
        return sf_fail(o->dt > 0 ? SF_ERR_INVALID : SF_ERR_FORMAT, "%s%sdt %s: the time step must be one number > 0%s",
                       o->source ? o->source : "", o->source ? ": " : "",
                       o->dt > 0 ? "given" : meta_dt && meta_dt->dtype == SF_NIR_STRING ? "in the metadata is a string"
                                                                                        : "in the metadata is not one "
                                                                                          "number > 0",
                       o->dt > 0 ? "" : " (give one with --dt)");
    for (const char *c = o->init ? o->init : ""; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == ';' || *c == '#')
            return sf_fail(SF_ERR_INVALID, "the checkpoint path '%s' cannot stand in a config (a control character, "
                           "';' or '#')", o->init);
    char *layers = NULL;
    size_t len = 0;
    im.v = calloc((size_t)g->num_nodes + 1, sizeof *im.v);
    im.absorbed = calloc((size_t)g->num_nodes + 1, 1);
    im.text = im.v && im.absorbed ? open_memstream(&layers, &len) : NULL;
    sf_status s = im.text ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; s == SF_OK && i < g->num_nodes; i++) im.v[i].tensor = -1;
    if (s == SF_OK) s = import_graph(&im);
    if (im.text && fclose(im.text) != 0 && s == SF_OK) s = sf_fail(SF_ERR_NOMEM, "out of memory");
    if (s == SF_OK) s = assemble(&im, layers ? layers : "", config_text);
    if (s == SF_OK) s = verify(*config_text, o->source ? o->source : "imported", params);
    free(layers);
    free(im.v);
    free(im.absorbed);
    if (s != SF_OK) {
        free(*config_text);
        *config_text = NULL;
        sf_tensor_list_free(params);
        return o->source ? sf_fail_context(s, "%s: ", o->source) : s;
    }
    return SF_OK;
}

void sf_tensor_list_free(sf_tensor_list *l)
{
    for (int32_t i = 0; i < l->count; i++) free(l->items[i].data);
    free(l->items);
    memset(l, 0, sizeof *l);
}

sf_status sf_tensor_list_apply(const sf_tensor_list *l, sf_net *net)
{
    for (int32_t i = 0; i < sf_net_tensor_count(net, SF_ROLE_PARAM); i++) {
        sf_tensor_info ti;
        SF_TRY(sf_net_tensor_info(net, SF_ROLE_PARAM, i, &ti));
        const sf_named_tensor *t = NULL;
        for (int32_t k = 0; k < l->count && !t; k++)
            if (strcmp(l->items[k].name, ti.name) == 0) t = &l->items[k];
        if (!t) return sf_fail(SF_ERR_INVALID, "parameter %s is not in the imported parameters", ti.name);
        if (t->numel != ti.numel)
            return sf_fail(SF_ERR_INVALID, "parameter %s has %lld elements, the network's %lld", ti.name,
                           (long long)t->numel, (long long)ti.numel);
        SF_TRY(sf_net_tensor_write(net, SF_ROLE_PARAM, i, t->data));
    }
    return SF_OK;
}
