/* sparse.c — event-driven execution in the engine (Finkbeiner & Neftci): which tensors get a compact form, where their
 * ones are counted, and the sparse or dense choice per layer and step from the spike density (each kind says how:
 * core/layers/linear.c, rlif.c). A host backend's linear layer reads the count its input just got; a GPU's counts
 * are copied back after each step without the host waiting for them and taken in before the next step chooses, so
 * there the choice follows the previous step (AUTO's first step runs dense), as a recurrent layer's recurrence does
 * everywhere (its spikes are unknown before it runs). */
#include "core/error.h"
#include "core/layer.h"

#include <string.h>

bool sf_net_tensor_is_spikes(const sf_net *net, int32_t id)
{
    if (id == 0) return net->p.input_spikes != 0;
    const sf_net_layer *l = &net->layers[id - 1];
    if (sf_kind_has(l, SF_KIND_SPIKES)) return true;
    if (!sf_layer_passes_spikes(l)) return false;
    for (int32_t k = 0; k < l->ops->inputs; k++)
        if (!sf_net_tensor_is_spikes(net, sf_layer_input(l, k))) return false;
    return true;
}

bool sf_net_tensor_is_binary(const sf_net *net, int32_t id)
{
    /* the input once its values are checked: its compaction flags anything but 0 and 1 (net_step.c) */
    return sf_net_tensor_is_spikes(net, id) && (sf_net_root(net, id) != 0 || net->tensors[0].compact);
}

/* Does layer l read its input's compact spikes (its forward may run event-driven)? */
static bool reads_events(const sf_net_layer *l)
{
    return sf_kind_has(l, SF_KIND_EVENT_INPUT) && l->sparse != SF_SPARSE_OFF;
}

/* Does a layer whose dense ops take a faster route for spikes known to be 0/1 (a linear layer, a convolution) read
 * the input? */
static bool input_feeds_product(const sf_net *net)
{
    for (int32_t i = 0; i < net->n_layers; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (sf_net_root(net, l->in) == 0 && sf_kind_has(l, SF_KIND_BINARY_FAST)) return true;
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
        /* A deterministic GPU may neither time nor follow the previous step (a checkpoint's evaluation has none):
         * auto runs event-driven wherever it can. The CPU uses a crossover fixed without a clock (sparse_tune.c). */
        if (mode == SF_SPARSE_AUTO && net->p.device.kind == SF_DEVICE_CUDA && net->p.cuda.deterministic)
            mode = SF_SPARSE_ON;
        l->sparse = SF_SPARSE_OFF;
        l->density = l->grad_density = -1.0f;
        l->fwd_sparse = false;
        l->bwd_flags = 0;
        if (!l->ops->event_driven || !l->ops->event_driven(net, l)) continue;
        l->sparse = mode;
        if (sf_kind_has(l, SF_KIND_EVENT_INPUT) && mode != SF_SPARSE_OFF) {
            sf_net_tensor *x = &net->tensors[sf_net_root(net, l->in)];
            x->compact = x->lists = true;
        }
        if (sf_kind_has(l, SF_KIND_EVENT_OUTPUT)) {
            /* its kernels make the bits anyway: kept, they spare the backward a pass to bytes and back */
            net->tensors[l->out].compact = true;
            net->tensors[l->out].lists = mode != SF_SPARSE_OFF;
        }
    }
    /* Float values are written for readers other than event-driven ones, and for the output. */
    for (int32_t t = 0; t <= L; t++) {
        sf_net_tensor *x = &net->tensors[t];
        if (!x->compact) continue;
        x->need_float = t == sf_net_root(net, L) || net->keep_all; /* keep_all: every tensor readable */
        for (int32_t c = 0; c < L; c++) {
            const sf_net_layer *l = &net->layers[c];
            bool reads = false;
            for (int32_t k = 0; k < l->ops->inputs; k++) reads |= sf_net_root(net, sf_layer_input(l, k)) == t;
            if (reads && !sf_kind_has(l, SF_KIND_ALIAS) && !reads_events(l)) x->need_float = true;
        }
    }
    /* An event-driven layer whose output only a neuron layer that writes its input gradient's nonzero pattern (θ_grad)
     * reads gets that mask. */
    for (int32_t i = 0; i + 1 < L; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (!sf_kind_has(l, SF_KIND_GRAD_MASK) || l->sparse == SF_SPARSE_OFF || net->tensors[l->out].consumers != 1)
            continue;
        for (int32_t c = i + 1; c < L; c++) {
            const sf_net_layer *r = &net->layers[c];
            if (r->in == l->out && r->ops->masks_input_grad && r->ops->masks_input_grad(r))
                net->tensors[l->out].gmask = true;
        }
    }
}

/* Does a reader of compact tensor t run its forward event-driven (want = true) or dense (false) this step? On a
 * device backend the choices come from the last step, so asking here gives what the reader will choose. */
static bool reader_runs(sf_net *net, int32_t t, bool want)
{
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        if (!reads_events(l) || sf_net_root(net, l->in) != t) continue;
        if (sf_net_sparse_decide(net, l) == SF_OK && l->fwd_sparse == want) return true;
    }
    return false;
}

/* Lists are written where a reader may use them: every step on a host backend (readers choose after); on a device
 * where a reader's forward, or a recurrent layer's own recurrence, runs event-driven this step. */
static bool lists_now(sf_net *net, int32_t t)
{
    const sf_net_tensor *x = &net->tensors[t];
    if (!x->lists) return false;
    if (net->be->host_memory) return true;
    const sf_net_layer *p = x->producer >= 0 ? &net->layers[x->producer] : NULL;
    return (p && sf_kind_has(p, SF_KIND_EVENT_OUTPUT) && p->fwd_sparse) || reader_runs(net, t, true);
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
    if (p >= 0 && net->layers[p].lif_index >= 0) return 2 * (net->n_layers + 1) + net->layers[p].lif_index;
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

float sf_net_ones_density(sf_net *net, int32_t id) { return density_now(net, ones_index(net, id), id); }
float sf_net_grad_density(sf_net *net, int32_t id) { return density_now(net, grad_index(net, id), id); }

bool sf_net_sparse_below(sf_sparse_mode m, float density, float crossover)
{
    return m == SF_SPARSE_ON || (m == SF_SPARSE_AUTO && density >= 0.0f && density < crossover);
}

sf_status sf_net_sparse_decide(sf_net *net, sf_net_layer *l)
{
    SF_TRY(sf_net_sparse_collect(net));
    if (l->sparse == SF_SPARSE_OFF) {
        l->fwd_sparse = false;
        l->bwd_flags = 0;
        return SF_OK;
    }
    l->ops->sparse_decide(net, l);
    return SF_OK;
}

/* The densities of the step the counts came from, for the next step's choices and for the queries. */
static void take_densities(sf_net *net, bool with_backward)
{
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        if (l->ops->sparse_measured) l->ops->sparse_measured(net, l, with_backward);
    }
}

sf_status sf_net_sparse_after_step(sf_net *net)
{
    bool any = false;
    for (int32_t i = 0; i < net->n_layers; i++) any |= net->layers[i].sparse != SF_SPARSE_OFF;
    if (!any) return SF_OK;
    sf_backend *be = net->be;
    if (be->host_memory) {
        take_densities(net, net->have_backward);
        return SF_OK;
    }
    SF_TRY(sf_net_sparse_collect(net)); /* host_tcounts takes one step's counts at a time */
    sf_status (*copy)(sf_backend *, void *, const void *, size_t) =
        be->copy_to_host_async ? be->copy_to_host_async : be->copy_to_host;
    const int32_t L = net->n_layers;
    SF_TRY(copy(be, net->host_tcounts, net->tcounts, sizeof(float) * (size_t)(2 * (L + 1))));
    if (net->n_lif)
        SF_TRY(copy(be, net->host_tcounts + 2 * (L + 1), net->spike_counts, sizeof(float) * (size_t)net->n_lif));
    net->tcounts_in_flight = true;
    net->tcounts_backward = net->have_backward;
    return be->copy_to_host_async ? SF_OK : sf_net_sparse_collect(net);
}

sf_status sf_net_sparse_forget(sf_net *net)
{
    net->tcounts_in_flight = net->host_tcounts_valid = false;
    return net->be->wait_host_copies ? net->be->wait_host_copies(net->be) : SF_OK;
}

sf_status sf_net_sparse_collect(sf_net *net)
{
    if (!net->tcounts_in_flight) return SF_OK;
    net->tcounts_in_flight = false;
    if (net->be->wait_host_copies) SF_TRY(net->be->wait_host_copies(net->be));
    net->host_tcounts_valid = true;
    take_densities(net, net->tcounts_backward);
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

int32_t sf_net_layer_sparsity(const sf_net *net, sf_layer_sparsity *out, int32_t cap)
{
    /* the last step's densities may still be on their way: taking them in changes no value the caller set (a
     * failed wait leaves the densities before them, and its error for the next call that returns a status) */
    (void)sf_net_sparse_collect((sf_net *)net);
    for (int32_t i = 0; i < net->n_layers && i < cap; i++) {
        const sf_net_layer *l = &net->layers[i];
        bool eligible = net->compiled && l->ops->event_driven && l->ops->event_driven(net, l);
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
