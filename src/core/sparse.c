/* sparse.c — event-driven execution in the engine (Finkbeiner & Neftci): which tensors get a compact form, the
 * choice of the sparse or the dense path per layer and step from the measured spike density, and the calls of a
 * linear layer that reads spikes.
 *
 * Where a density comes from: on a backend whose memory is host memory (the CPU) a linear layer reads the count its
 * input just got; a GPU's counts arrive on the host only with the step's one read-back, so there the choice follows
 * the previous step's density (the first step of AUTO runs dense). A recurrent layer's recurrence follows its own
 * previous step everywhere, as it cannot know its spikes before it runs. */
#include "core/error.h"
#include "core/net_internal.h"

#include <string.h>

bool sf_net_tensor_is_spikes(const sf_net *net, int32_t id)
{
    if (id == 0) return net->p.input_spikes != 0;
    const sf_net_layer *l = &net->layers[id - 1];
    switch (l->d.kind) {
    case SF_LAYER_LIF:
    case SF_LAYER_RLIF: return true;
    case SF_LAYER_FLATTEN:
    case SF_LAYER_MAXPOOL2D: return sf_net_tensor_is_spikes(net, l->in);
    default: return false;
    }
}

bool sf_net_tensor_is_binary(const sf_net *net, int32_t id)
{
    /* the input once its values are checked: its compaction flags anything but 0 and 1 (net_step.c) */
    return sf_net_tensor_is_spikes(net, id) && (sf_net_root(net, id) != 0 || net->tensors[0].compact);
}

static bool is_sparse_linear(const sf_net_layer *l)
{
    return l->d.kind == SF_LAYER_LINEAR && l->sparse != SF_SPARSE_OFF;
}

/* Does a linear or convolution read the input? Their dense paths take a faster route for spikes known to be 0/1. */
static bool input_feeds_product(const sf_net *net)
{
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (sf_net_root(net, l->in) == 0 && (l->d.kind == SF_LAYER_LINEAR || l->d.kind == SF_LAYER_CONV2D)) return true;
    }
    return false;
}

void sf_net_sparse_mark(sf_net *net)
{
    const int32_t L = net->n_layers;
    for (int32_t t = 0; t <= L; t++)
        net->tensors[t].compact = net->tensors[t].need_float = net->tensors[t].lists = net->tensors[t].gmask = false;
    /* Input spikes are checked in every mode (their compaction flags a value other than 0 or 1), which makes them
     * binary for the dense products too. */
    net->tensors[0].compact = net->p.input_spikes && input_feeds_product(net);
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        sf_sparse_mode mode = l->d.sparse < 0 ? net->p.sparse : (sf_sparse_mode)l->d.sparse;
        /* A GPU asked to be deterministic may neither time nor follow the previous step (an evaluation of a
         * checkpoint has none): auto runs event-driven wherever it can. The CPU chooses from the density it just
         * counted, by a crossover fixed without a clock (sparse_tune.c). */
        if (mode == SF_SPARSE_AUTO && net->p.device.kind == SF_DEVICE_CUDA && net->p.cuda.deterministic)
            mode = SF_SPARSE_ON;
        l->sparse = SF_SPARSE_OFF;
        l->density = l->grad_density = -1.0f;
        l->fwd_sparse = false;
        l->bwd_flags = 0;
        if (l->d.kind == SF_LAYER_LINEAR && sf_net_tensor_is_spikes(net, l->in)) {
            l->sparse = mode;
            sf_net_tensor *x = &net->tensors[sf_net_root(net, l->in)];
            if (mode != SF_SPARSE_OFF) x->compact = x->lists = true;
        } else if (l->d.kind == SF_LAYER_RLIF) {
            /* its kernels make the bits anyway: kept, they spare the backward a pass to bytes and back */
            l->sparse = mode;
            net->tensors[l->out].compact = true;
            net->tensors[l->out].lists = mode != SF_SPARSE_OFF;
        }
    }
    /* Float values are written for readers other than event-driven linear layers, and for the output. */
    for (int32_t t = 0; t <= L; t++) {
        sf_net_tensor *x = &net->tensors[t];
        if (!x->compact) continue;
        x->need_float = t == sf_net_root(net, L) || net->keep_all; /* keep_all: every tensor readable */
        for (int32_t c = 0; c < L; c++) {
            const sf_net_layer *l = &net->layers[c];
            bool reads = sf_net_root(net, l->in) == t || (l->d.kind == SF_LAYER_ADD && sf_net_root(net, l->in2) == t);
            if (reads && l->d.kind != SF_LAYER_FLATTEN && !is_sparse_linear(l)) x->need_float = true;
        }
    }
    /* A sparse linear layer whose output only a θ_grad LIF or RLIF reads gets its mask of nonzero gradients. */
    for (int32_t i = 0; i + 1 < L; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (!is_sparse_linear(l) || net->tensors[l->out].consumers != 1) continue;
        for (int32_t c = i + 1; c < L; c++) {
            const sf_net_layer *r = &net->layers[c];
            bool neuron = (r->d.kind == SF_LAYER_LIF && !r->fused_bn) || r->d.kind == SF_LAYER_RLIF;
            if (r->in == l->out && neuron && r->d.lif.use_grad_threshold) net->tensors[l->out].gmask = true;
        }
    }
}

/* Does a reader of compact tensor t run its forward event-driven (want = true) or dense (false) this step? On a
 * device backend the choices come from the last step, so asking here gives what the reader will choose. */
static bool reader_runs(sf_net *net, int32_t t, bool want)
{
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        if (!is_sparse_linear(l) || sf_net_root(net, l->in) != t) continue;
        if (sf_net_sparse_decide(net, l) == SF_OK && l->fwd_sparse == want) return true;
    }
    return false;
}

/* Lists are written where a reader may use them: every step on a host backend, whose readers choose after they are
 * made; on a device, where a reader's forward runs event-driven this step or, for a recurrent layer's own output, its
 * recurrence does (the grid kernels make their lists from the bits, the per-sample fallback reads them). */
static bool lists_now(sf_net *net, int32_t t)
{
    const sf_net_tensor *x = &net->tensors[t];
    if (!x->lists) return false;
    if (net->be->host_memory) return true;
    const sf_net_layer *p = x->producer >= 0 ? &net->layers[x->producer] : NULL;
    return (p && p->d.kind == SF_LAYER_RLIF && p->fwd_sparse) || reader_runs(net, t, true);
}

sf_spikes sf_net_compact_of(sf_net *net, int32_t id)
{
    const int32_t t = sf_net_root(net, id);
    const sf_net_tensor *x = &net->tensors[t];
    const bool lists = lists_now(net, t);
    return (sf_spikes){sf_net_slot_ptr(net, x->cbits), lists ? sf_net_slot_ptr(net, x->cidx) : NULL,
                       lists ? sf_net_slot_ptr(net, x->ccnt) : NULL};
}

bool sf_net_compact_values(sf_net *net, int32_t id)
{
    const int32_t t = sf_net_root(net, id);
    return net->tensors[t].need_float || (!net->be->host_memory && reader_runs(net, t, false));
}

/* Counts live in two head arrays; an index k names one: tcounts[k] for k < 2(L+1), else spike_counts[k - 2(L+1)].
 * A compact tensor made by a neuron layer counts its ones in that layer's firing-rate count. */
static int32_t ones_index(const sf_net *net, int32_t id)
{
    int32_t t = sf_net_root(net, id), p = net->tensors[t].producer;
    if (p >= 0 && (net->layers[p].d.kind == SF_LAYER_LIF || net->layers[p].d.kind == SF_LAYER_RLIF))
        return 2 * (net->n_layers + 1) + net->layers[p].lif_index;
    return t;
}

static int32_t grad_index(const sf_net *net, int32_t id) { return net->n_layers + 1 + sf_net_root(net, id); }

static float *count_at(sf_net *net, int32_t k)
{
    int32_t nt = 2 * (net->n_layers + 1);
    return k < nt ? net->tcounts + k : net->spike_counts + (k - nt);
}

float *sf_net_ones_count(sf_net *net, int32_t id) { return count_at(net, ones_index(net, id)); }
float *sf_net_grad_count(sf_net *net, int32_t id) { return count_at(net, grad_index(net, id)); }

/* Count k as a fraction of tensor id's elements: read now from host memory, or from the last step's copy. */
static float density_now(sf_net *net, int32_t k, int32_t id)
{
    float c;
    if (net->be->host_memory) {
        if (net->be->copy_to_host(net->be, &c, count_at(net, k), sizeof c) != SF_OK) return -1.0f;
    } else {
        if (!net->host_tcounts_valid) return -1.0f;
        c = net->host_tcounts[k];
    }
    return (float)((double)c / ((double)sf_net_rows(net) * (double)net->tensors[sf_net_root(net, id)].per_sample));
}

static bool below(sf_sparse_mode m, float density, float crossover)
{
    return m == SF_SPARSE_ON || (m == SF_SPARSE_AUTO && density >= 0.0f && density < crossover);
}

sf_status sf_net_sparse_decide(sf_net *net, sf_net_layer *l)
{
    if (l->sparse == SF_SPARSE_OFF) {
        l->fwd_sparse = false;
        l->bwd_flags = 0;
        return SF_OK;
    }
    if (l->d.kind == SF_LAYER_LINEAR) {
        if (net->be->host_memory || net->host_tcounts_valid)
            l->density = density_now(net, ones_index(net, l->in), l->in);
        l->fwd_sparse = below(l->sparse, l->density, l->xfwd);
        l->bwd_flags = below(l->sparse, l->density, l->xbwd);
        return SF_OK;
    }
    /* RLIF: its previous step's spike and gradient densities (l->density, l->grad_density) */
    l->fwd_sparse = below(l->sparse, l->density, l->xfwd);
    l->bwd_flags = (below(l->sparse, l->density, l->xbwd) ? SF_RLIF_SPARSE_DV : 0) |
                   (l->d.lif.use_grad_threshold && below(l->sparse, l->grad_density, l->xfwd) ? SF_RLIF_SPARSE_DY : 0);
    return SF_OK;
}

/* Densities of the step that just ended, for the next step's choices and for the queries. */
static void update_densities(sf_net *net)
{
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        if (l->d.kind == SF_LAYER_RLIF) {
            l->density = density_now(net, ones_index(net, l->out), l->out);
            if (net->have_backward) l->grad_density = density_now(net, grad_index(net, l->in), l->in);
        } else if (l->d.kind == SF_LAYER_LINEAR && l->sparse != SF_SPARSE_OFF) {
            l->density = density_now(net, ones_index(net, l->in), l->in);
            if (net->have_backward && net->tensors[l->out].gmask)
                l->grad_density = density_now(net, grad_index(net, l->out), l->out);
        }
    }
}

sf_status sf_net_sparse_after_step(sf_net *net)
{
    bool any = false;
    for (int32_t i = 0; i < net->n_layers; i++) any |= net->layers[i].sparse != SF_SPARSE_OFF;
    if (!any) return SF_OK;
    if (!net->be->host_memory) {
        int32_t L = net->n_layers;
        SF_TRY(net->be->copy_to_host(net->be, net->host_tcounts, net->tcounts, sizeof(float) * (size_t)(2 * (L + 1))));
        if (net->n_lif)
            SF_TRY(net->be->copy_to_host(net->be, net->host_tcounts + 2 * (L + 1), net->spike_counts,
                                         sizeof(float) * (size_t)net->n_lif));
        net->host_tcounts_valid = true;
    }
    update_densities(net);
    return SF_OK;
}

uint64_t sf_net_sparse_signature(const sf_net *net)
{
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        h = (h ^ (uint64_t)(l->fwd_sparse | (l->bwd_flags << 1))) * 1099511628211ull;
    }
    return h;
}

sf_status sf_net_spike_linear_forward(sf_net *net, sf_net_layer *l, float *y)
{
    SF_TRY(sf_net_sparse_decide(net, l));
    sf_backend *be = net->be;
    const int32_t in = (int32_t)net->tensors[l->in].per_sample, t = sf_net_root(net, l->in);
    sf_spikes c = sf_net_compact_of(net, t);
    if (l->fwd_sparse)
        return be->spike_linear_forward(be, sf_net_rows(net), in, l->d.out_features, &c, sf_net_weight(net, l->w_off),
                                        sf_net_param(net, l->b_off), y, sf_net_slot_ptr(net, l->sws_f));
    float *x = sf_net_act(net, t);
    if (t != 0 && !sf_net_compact_values(net, t)) SF_TRY(be->spikes_expand(be, sf_net_rows(net), in, c.bits, x));
    return be->binary_linear_forward(be, sf_net_rows(net), in, l->d.out_features, x, sf_net_weight(net, l->w_off),
                                     sf_net_param(net, l->b_off), y);
}

sf_status sf_net_spike_linear_backward(sf_net *net, sf_net_layer *l, const float *dy, float *dx)
{
    sf_backend *be = net->be;
    const sf_net_tensor *o = &net->tensors[l->out];
    const uint32_t *bits = sf_net_slot_ptr(net, net->tensors[sf_net_root(net, l->in)].cbits); /* the input's, kept */
    sf_spikes mask = {sf_net_slot_ptr(net, o->gbits), NULL, sf_net_slot_ptr(net, o->gcnt)};
    return be->spike_linear_backward(be, sf_net_rows(net), (int32_t)net->tensors[l->in].per_sample, l->d.out_features,
                                     bits, sf_net_weight(net, l->w_off), dy, o->gmask ? &mask : NULL, dx,
                                     sf_net_param_grad(net, l->w_off), sf_net_param_grad(net, l->b_off),
                                     sf_net_slot_ptr(net, l->sws_b));
}

int32_t sf_net_layer_sparsity(const sf_net *net, sf_layer_sparsity *out, int32_t cap)
{
    for (int32_t i = 0; i < net->n_layers && i < cap; i++) {
        const sf_net_layer *l = &net->layers[i];
        bool eligible = net->compiled && (l->d.kind == SF_LAYER_RLIF ||
                                          (l->d.kind == SF_LAYER_LINEAR && sf_net_tensor_is_spikes(net, l->in)));
        out[i] = (sf_layer_sparsity){.eligible = eligible, .mode = eligible ? l->sparse : SF_SPARSE_OFF,
                                     .density = eligible ? l->density : -1.0f,
                                     .grad_density = eligible ? l->grad_density : -1.0f,
                                     .crossover_forward = eligible ? l->xfwd : 0.0f,
                                     .crossover_backward = eligible ? l->xbwd : 0.0f,
                                     .forward_sparse = eligible && l->fwd_sparse,
                                     .backward_sparse = eligible && l->bwd_flags != 0};
    }
    return net->n_layers;
}

static bool is_density(float d, bool unmeasured_ok) { return (unmeasured_ok && d == -1.0f) || (d >= 0.0f && d <= 1.0f); }

sf_status sf_net_set_layer_sparsity(sf_net *net, int32_t layer, const sf_layer_sparsity *s)
{
    if (!net || !s) return sf_fail(SF_ERR_INVALID, "set layer sparsity: net or state is NULL");
    if (!net->compiled) return sf_fail(SF_ERR_INVALID, "set layer sparsity: the net is not compiled");
    if (layer < 0 || layer >= net->n_layers)
        return sf_fail(SF_ERR_INVALID, "set layer sparsity: layer %d is not one of the net's %d", layer, net->n_layers);
    sf_net_layer *l = &net->layers[layer];
    if (l->sparse != SF_SPARSE_AUTO)
        return sf_fail(SF_ERR_INVALID,
                       "set layer sparsity: layer %d does not choose its path (sparse = auto on a linear layer that "
                       "reads spikes, or an rlif layer): its mode is %s",
                       layer, l->sparse == SF_SPARSE_ON ? "on" : "off");
    if (!is_density(s->crossover_forward, false) || !is_density(s->crossover_backward, false) ||
        !is_density(s->density, true) || !is_density(s->grad_density, true))
        return sf_fail(SF_ERR_INVALID,
                       "set layer sparsity: layer %d: crossovers %g, %g must be in [0, 1] and densities %g, %g in "
                       "[0, 1] or -1 (none yet)",
                       layer, (double)s->crossover_forward, (double)s->crossover_backward, (double)s->density,
                       (double)s->grad_density);
    l->xfwd = s->crossover_forward;
    l->xbwd = s->crossover_backward;
    l->density = s->density;
    l->grad_density = s->grad_density;
    return SF_OK;
}
