/* plan.c — what sf_net_compile (net_params.c) decides: tensor bookkeeping, fusion, layouts, what the backward keeps,
 * and the memory plan, knowing the layers only through their kinds' tables (core/layer.h). On plan_pack.h's timeline
 * every workspace buffer is a request (bytes, first, last tick); overlapping lifetimes get disjoint bytes, the others
 * may share. Saved buffers stack up. */
#include "core/error.h"
#include "core/layer.h"

#include <stdlib.h>
#include <string.h>

/* The layer whose backward writes the gradients of layer c's inputs: for an absorbed layer, the one that runs it. */
static int32_t writer_of(const sf_net *net, int32_t c)
{
    return net->layers[c].absorbed ? c + 1 : c;
}

/* Does layer c's backward need the value of its input k? An absorbed layer's is read by the layer that runs it. */
static bool needs_input_value(const sf_net *net, int32_t c, int32_t k)
{
    const sf_net_layer *l = &net->layers[c];
    if (!sf_layer_backward_runs(net, c) && !(l->absorbed && sf_layer_backward_runs(net, c + 1))) return false;
    return l->ops->needs_input && l->ops->needs_input(net, l, k);
}

/* Is root tensor t's value read by some backward (of a layer that is not an alias)? */
static bool value_needed(const sf_net *net, int32_t t)
{
    for (int32_t c = 0; c < net->n_layers; c++) {
        const sf_net_layer *l = &net->layers[c];
        for (int32_t k = 0; k < l->ops->inputs; k++)
            if (sf_net_root(net, sf_layer_input(l, k)) == t && !sf_kind_has(l, SF_KIND_ALIAS) &&
                needs_input_value(net, c, k))
                return true;
    }
    return false;
}

static void build_tensors(sf_net *net)
{
    int32_t L = net->n_layers;
    for (int32_t t = 0; t <= L; t++) {
        sf_net_tensor *x = &net->tensors[t];
        memset(x, 0, sizeof *x);
        int32_t chw[3];
        sf_net_shape_of(net, t, chw);
        x->c = chw[0];
        x->h = chw[1];
        x->w = chw[2];
        x->per_sample = (int64_t)chw[0] * chw[1] * chw[2];
        x->alias_of = t;
        x->producer = t - 1;
        x->first_grad_writer = -1;
    }
    net->tensors[0].requires_grad = net->input_grad; /* sf_net_set_input_grad: the input's gradient is wanted */
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        sf_net_tensor *o = &net->tensors[l->out];
        bool inputs_binary = true;
        o->requires_grad = l->w_off >= 0;
        for (int32_t k = 0; k < l->ops->inputs; k++) {
            const sf_net_tensor *x = &net->tensors[sf_layer_input(l, k)];
            inputs_binary &= x->binary;
            o->requires_grad |= x->requires_grad;
            net->tensors[x->alias_of].consumers++;
        }
        o->binary = sf_kind_has(l, SF_KIND_SPIKES) || (sf_layer_passes_spikes(l) && inputs_binary);
        if (sf_kind_has(l, SF_KIND_ALIAS)) o->alias_of = net->tensors[l->in].alias_of;
    }
}

/* Numbers the neuron layers and lets each kind fuse a layer into the next (a BN into the LIF after it). */
static void fuse_layers(sf_net *net)
{
    int32_t neurons = 0;
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        l->absorbed = l->bias_cancelled = false;
        l->absorbs = -1;
        l->lif_index = sf_kind_has(l, SF_KIND_FIRES) ? neurons++ : -1;
    }
    net->n_lif = neurons;
    for (int32_t i = 0; i + 1 < net->n_layers; i++)
        if (net->layers[i].ops->fuse) net->layers[i].ops->fuse(net, i);
}

/* Layers that read an NHWC tensor as well as an NCHW one: convolutions (through the backend), and those that treat
 * every element alike or by channel alone (BN, the neurons, add). */
static bool reads_nhwc(const sf_net_layer *l) { return sf_kind_has(l, SF_KIND_NHWC | SF_KIND_NHWC_EACH); }

/* A tensor of one pixel per channel lies alike in both layouts. */
static bool nhwc_or_pixel(const sf_net_tensor *x) { return x->nhwc || x->h * x->w == 1; }

/* Which tensors are NHWC: on a conv_nhwc backend, the outputs of layers that read NHWC while all their readers do too;
 * what a flatten, dropout, linear or recurrent layer reads, the input and the output stay NCHW; tokens are NHWC
 * everywhere. An SF_KIND_NHWC layer has one layout on all sides, so an NCHW side of more than one pixel makes the
 * others NCHW too (repeated until nothing changes); a convolution may differ on its two sides (it copies the NCHW
 * one: conv.cu). */
static void decide_layouts(sf_net *net)
{
    const int32_t L = net->n_layers;
    for (int32_t t = 0; t <= L; t++) {
        sf_net_tensor *x = &net->tensors[t];
        x->nhwc = net->be->conv_nhwc && t > 0 && t < L && x->alias_of == t && x->h * x->w > 1 && !x->compact &&
                  reads_nhwc(&net->layers[x->producer]);
        if (sf_net_is_tokens(net, t)) x->nhwc = true; /* tokens are channels-last on every backend */
    }
    for (int32_t i = 0; i < L; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (reads_nhwc(l)) continue;
        for (int32_t k = 0; k < l->ops->inputs; k++) {
            const int32_t t = sf_net_root(net, sf_layer_input(l, k));
            if (!sf_net_is_tokens(net, t)) net->tensors[t].nhwc = false;
        }
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t i = 0; i < L; i++) {
            const sf_net_layer *l = &net->layers[i];
            if (!sf_kind_has(l, SF_KIND_NHWC)) continue;
            bool *side[3] = {&net->tensors[l->in].nhwc, &net->tensors[l->out].nhwc,
                             l->ops->inputs == 2 ? &net->tensors[l->in2].nhwc : NULL};
            const bool all = nhwc_or_pixel(&net->tensors[l->in]) && nhwc_or_pixel(&net->tensors[l->out]) &&
                             (!side[2] || nhwc_or_pixel(&net->tensors[l->in2]));
            for (int k = 0; k < 3 && !all; k++)
                if (side[k] && *side[k]) *side[k] = false, changed = true;
        }
    }
}

/* A static input (sf_net_set_static_input) whose only reader past aliases (a flatten) can run once over T
 * (SF_KIND_ONCE_OVER_T) and takes no other form of it: that reader runs on the B samples (a step of its output under
 * 2^31 elements: the channels of a token sum), and the input's steps past 0 are never filled. */
static void decide_once(sf_net *net)
{
    int32_t readers = 0, reader = -1;
    net->input_once = false;
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        l->once_over_t = false;
        for (int32_t k = 0; k < l->ops->inputs && !sf_kind_has(l, SF_KIND_ALIAS); k++)
            if (sf_net_root(net, sf_layer_input(l, k)) == 0) readers++, reader = i;
    }
    if (!net->static_input || net->T < 2 || net->input_grad || net->tensors[0].compact || readers != 1) return;
    sf_net_layer *l = &net->layers[reader];
    l->once_over_t = l->ops->inputs == 1 && sf_kind_has(l, SF_KIND_ONCE_OVER_T) && !l->tokens &&
                     net->B * net->tensors[l->out].per_sample <= INT32_MAX;
    net->input_once = l->once_over_t;
}

/* Lean mode: can the backward rerun the producer of root tensor t instead of keeping t? Where it has a rerun and runs
 * dense, its input stays, and t is read only by backwards whose rebuild has its own tick (SF_KIND_READS_RERUN). */
static bool rerunnable(const sf_net *net, int32_t t)
{
    const sf_net_tensor *x = &net->tensors[t];
    if (x->binary || x->producer < 0) return false;
    const sf_net_layer *p = &net->layers[x->producer];
    const int32_t src = sf_net_root(net, p->in);
    const sf_keep_kind k = net->tensors[src].keep;
    if (!p->ops->rerun || p->sparse != SF_SPARSE_OFF ||
        !(src == 0 || k == SF_KEEP_FLOAT || k == SF_KEEP_BYTES || k == SF_KEEP_BITS))
        return false;
    for (int32_t c = 0; c < net->n_layers; c++) {
        const sf_net_layer *l = &net->layers[c];
        for (int32_t i = 0; i < l->ops->inputs; i++)
            if (sf_net_root(net, sf_layer_input(l, i)) == t && !sf_kind_has(l, SF_KIND_ALIAS) &&
                needs_input_value(net, c, i) && !(i == 0 && sf_kind_has(l, SF_KIND_READS_RERUN)))
                return false;
    }
    return true;
}

/* Decides, per root tensor, how the backward gets its value (see sf_keep_kind). */
static void decide_keeps(sf_net *net)
{
    for (int32_t t = 0; t <= net->n_layers; t++) {
        sf_net_tensor *x = &net->tensors[t];
        x->keep = SF_KEEP_NONE;
        if (x->alias_of != t || !value_needed(net, t)) continue;
        x->keep = x->binary ? SF_KEEP_BYTES : SF_KEEP_FLOAT;
        if (net->p.memory == SF_MEMORY_RECOMPUTE && x->producer >= 0) {
            const sf_net_layer *p = &net->layers[x->producer];
            const int32_t src = p->ops->recompute_source ? p->ops->recompute_source(net, p) : -1;
            if (src >= 0 && net->tensors[sf_net_root(net, src)].keep == SF_KEEP_FLOAT) x->keep = SF_KEEP_RECOMPUTE;
        }
        if (net->p.memory == SF_MEMORY_LEAN && t > 0) /* tensors in order: a producer's input is decided */
            x->keep = x->binary ? SF_KEEP_BITS : rerunnable(net, t) ? SF_KEEP_RERUN : SF_KEEP_FLOAT;
        if (x->compact) x->keep = SF_KEEP_BITS; /* its bits exist anyway: 1 bit per neuron and step */
    }
    /* Kept for reading after the forward (plots, debugging): as float in the saved arena, which the backward can
     * always use directly. */
    if (net->keep_all)
        for (int32_t t = 0; t <= net->n_layers; t++)
            if (net->tensors[t].alias_of == t) net->tensors[t].keep = SF_KEEP_FLOAT;
}

/* Forward lifetimes of activations and what the forward saves; then each layer's own requests. */
static void plan_forward(sf_net *net, sf_planner *pl)
{
    int32_t L = net->n_layers, last = sf_net_root(net, L);
    for (int32_t t = 0; t <= L; t++) {
        sf_net_tensor *x = &net->tensors[t];
        if (x->alias_of != t) continue;
        if (t > 0 && net->layers[t - 1].absorbed) continue; /* never materialised */
        size_t bytes = sf_net_tensor_bytes(net, t, sf_net_act_size(net));
        int32_t first = t == 0 ? 0 : sf_plan_t_fwd(pl, t - 1), lastuse = first;
        for (int32_t c = 0; c < L; c++) {
            const sf_net_layer *l = &net->layers[c];
            for (int32_t k = 0; k < l->ops->inputs; k++)
                if (sf_net_root(net, sf_layer_input(l, k)) == t && sf_plan_t_fwd(pl, c) > lastuse)
                    lastuse = sf_plan_t_fwd(pl, c);
        }
        if (t == last || t == 0) lastuse = sf_plan_t_end(pl); /* the output stays readable; the input, for x = NULL */
        if (x->keep == SF_KEEP_FLOAT) sf_plan_saved(pl, &x->act, bytes);
        else sf_plan_work(pl, &x->act, bytes, first, lastuse);
        if (x->keep == SF_KEEP_BYTES) sf_plan_saved(pl, &x->bytes, sf_net_tensor_bytes(net, t, 1));
        const size_t r = (size_t)sf_net_rows(net);
        const size_t bits = r * (size_t)sf_spike_words(x->per_sample) * sizeof(uint32_t);
        if (x->compact) {
            /* the backward of a linear layer reading them takes their bits (kept also when keep_all keeps floats) */
            if (x->keep != SF_KEEP_NONE) sf_plan_saved(pl, &x->cbits, bits);
            else sf_plan_work(pl, &x->cbits, bits, first, lastuse);
            if (x->lists) {
                sf_plan_work(pl, &x->cidx, r * (size_t)x->per_sample, first, lastuse);
                sf_plan_work(pl, &x->ccnt, r * (size_t)sf_spike_segs(x->per_sample) * sizeof(int32_t), first, lastuse);
            }
        } else if (x->keep == SF_KEEP_BITS) { /* lean mode: the forward packs them after writing them */
            sf_plan_saved(pl, &x->cbits, bits);
        }
    }
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        if (l->ops->plan) l->ops->plan(net, pl, l, i);
    }
}

/* What layer l's backward needs at tick `pre` (its rebuild's) to rerun the layer that made its input (lean mode):
 * that layer's input as values where it is kept as bits or bytes, and its forward's workspace. */
static void plan_rerun(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t pre)
{
    const sf_net_layer *p = sf_net_rerun_of(net, l);
    const int32_t src = sf_net_root(net, p->in);
    const sf_keep_kind k = net->tensors[src].keep;
    if (src != 0 && (k == SF_KEEP_BITS || k == SF_KEEP_BYTES))
        sf_plan_work(pl, &l->rerun_in, sf_net_tensor_bytes(net, src, sf_net_act_size(net)), pre, pre);
    if (p->ops->rerun_workspace) sf_plan_work(pl, &l->rerun_scratch, p->ops->rerun_workspace(net, p), pre, pre);
}

/* Layer i's rebuild of input k's value and its dx scratch, at tick t of writer w's backward. */
static void plan_input(sf_net *net, sf_planner *pl, int32_t i, int32_t k, int32_t w, int32_t t)
{
    sf_net_layer *l = &net->layers[i];
    const int32_t in = sf_net_root(net, sf_layer_input(l, k));
    const sf_net_tensor *x = &net->tensors[in];
    const sf_keep_kind keep = x->keep;
    const size_t bytes = sf_net_tensor_bytes(net, in, sf_net_act_size(net));
    /* the input's values need no rebuilding: they stay for the whole step */
    const bool rebuild =
        in != 0 &&
        (keep == SF_KEEP_BYTES || keep == SF_KEEP_RECOMPUTE || keep == SF_KEEP_BITS || keep == SF_KEEP_RERUN) &&
        needs_input_value(net, i, k);
    /* A layer that reads its input before it writes dx (backend.h) and writes its input's gradient first has the
     * input rebuilt right there: one activation-sized buffer less at the backward's peak. */
    if (k == 0)
        l->rebuild_in_grad =
            rebuild && sf_kind_has(l, SF_KIND_DX_AFTER_X) && x->requires_grad && x->first_grad_writer == w;
    if (rebuild && !(k == 0 && l->rebuild_in_grad))
        sf_plan_work(pl, k == 0 ? &l->in_float : &l->in2_float, bytes, keep == SF_KEEP_RERUN ? sf_plan_t_pre(pl, w) : t,
                     t);
    if (rebuild && keep == SF_KEEP_RERUN) plan_rerun(net, pl, l, sf_plan_t_pre(pl, w));
    /* A gradient for an input that another layer writes first (or that is the first input too), or one nobody needs
     * where the layer's op writes it anyway. */
    const bool dx_to_tmp = x->requires_grad ? x->first_grad_writer != w || (k > 0 && in == sf_net_root(net, l->in))
                                            : sf_kind_has(l, SF_KIND_ALWAYS_DX);
    if (dx_to_tmp) sf_plan_work(pl, k == 0 ? &l->dx_tmp : &l->dx_tmp2, bytes, t, t);
}

/* Backward lifetimes: gradients from their first writer to their producer, and per-layer scratch. */
static void plan_backward(sf_net *net, sf_planner *pl)
{
    int32_t L = net->n_layers;
    for (int32_t t = 0; t <= L; t++) net->tensors[t].first_grad_writer = -1;
    /* The first writer of a root tensor's gradient is the writing layer that comes last in the forward. */
    for (int32_t c = 0; c < L; c++) {
        const sf_net_layer *l = &net->layers[c];
        if (sf_kind_has(l, SF_KIND_ALIAS)) continue;
        int32_t w = writer_of(net, c);
        if (!sf_layer_backward_runs(net, w)) continue;
        for (int32_t k = 0; k < l->ops->inputs; k++) {
            sf_net_tensor *x = &net->tensors[sf_net_root(net, sf_layer_input(l, k))];
            if (x->requires_grad && x->first_grad_writer < w) x->first_grad_writer = w;
        }
    }
    int32_t last = sf_net_root(net, L);
    for (int32_t t = 0; t <= L; t++) {
        sf_net_tensor *x = &net->tensors[t];
        if (x->alias_of != t || !x->requires_grad || (t > 0 && net->layers[t - 1].absorbed)) continue;
        int32_t first =
            t == last ? sf_plan_t_loss(pl) : (x->first_grad_writer >= 0 ? sf_plan_t_bwd(pl, x->first_grad_writer) : -1);
        if (first < 0) continue; /* nothing reads this tensor */
        /* the input's gradient (sf_net_set_input_grad) is read after the backward */
        sf_plan_work(pl, &x->grad, sf_net_tensor_bytes(net, t, sf_net_act_size(net)), first,
                     t == 0 ? sf_plan_t_end(pl) : sf_plan_t_bwd(pl, x->producer));
    }
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        int32_t w = writer_of(net, i);
        if (sf_kind_has(l, SF_KIND_ALIAS) || !sf_layer_backward_runs(net, w)) continue;
        const int32_t t = sf_plan_t_bwd(pl, w);
        for (int32_t k = 0; k < l->ops->inputs; k++) plan_input(net, pl, i, k, w, t);
        /* The nonzero pattern of an event-driven layer's output gradient: from its neuron layer's backward to its
         * own. */
        const sf_net_tensor *o = &net->tensors[l->out];
        if (o->gmask) {
            const size_t r = (size_t)sf_net_rows(net);
            int32_t reader = i + 1;
            while (net->layers[reader].in != l->out) reader++;
            sf_plan_work(pl, &net->tensors[l->out].gbits, r * (size_t)sf_spike_words(o->per_sample) * sizeof(uint32_t),
                         sf_plan_t_bwd(pl, reader), t);
            sf_plan_work(pl, &net->tensors[l->out].gcnt, r * (size_t)sf_spike_segs(o->per_sample) * sizeof(int32_t),
                         sf_plan_t_bwd(pl, reader), t);
        }
    }
}

/* The readout, loss and bookkeeping buffers: small, alive for the whole step; and the float input of a 16-bit
 * upload, alive while it becomes tensor 0. */
typedef struct head_slots {
    sf_slot readout, dreadout, out_all, dout_all, logits, stats, counts, labels, tcounts, input_f32;
} head_slots;

/* Over all T_all steps: the loss sees every time segment's output. */
static void plan_head(sf_net *net, sf_planner *pl, head_slots *h)
{
    int32_t K = sf_net_classes(net);
    size_t tbk = (size_t)(net->T_all * net->B * K) * sf_net_act_size(net);
    memset(h, 0, sizeof *h);
    if (net->p.readout == SF_READOUT_LEAKY) {
        sf_plan_work(pl, &h->readout, tbk, 0, sf_plan_t_end(pl));
        sf_plan_work(pl, &h->dreadout, tbk, 0, sf_plan_t_end(pl));
    }
    if (net->hooks.nseg > 1) {
        sf_plan_work(pl, &h->out_all, tbk, 0, sf_plan_t_end(pl));
        sf_plan_work(pl, &h->dout_all, tbk, 0, sf_plan_t_end(pl));
    }
    if (net->be->act != SF_SCALAR_F32) sf_plan_work(pl, &h->input_f32, sf_net_tensor_bytes(net, 0, sizeof(float)), 0, 0);
    sf_plan_work(pl, &h->logits, (size_t)(net->B * K) * sizeof(float), 0, sf_plan_t_end(pl));
    sf_plan_work(pl, &h->stats, SF_STATS * sizeof(float), 0, sf_plan_t_end(pl));
    sf_plan_work(pl, &h->counts, (size_t)(net->n_lif ? net->n_lif : 1) * sizeof(float), 0, sf_plan_t_end(pl));
    sf_plan_work(pl, &h->labels, (size_t)net->B * sizeof(int32_t), 0, sf_plan_t_end(pl));
    sf_plan_work(pl, &h->tcounts, (size_t)(2 * (net->n_layers + 1)) * sizeof(float), 0, sf_plan_t_end(pl));
}

static sf_status allocate(sf_net *net, void **mem, size_t bytes, const char *what)
{
    if (*mem) net->be->release(net->be, *mem);
    *mem = NULL;
    if (!bytes) return SF_OK;
    sf_status s = net->be->alloc(net->be, bytes, mem);
    if (s != SF_OK)
        return sf_fail_context(s, "allocating %s (%.1f MiB) for T=%lld, B=%lld (try a smaller batch%s): ", what,
                               bytes / 1048576.0, (long long)net->T, (long long)net->B,
                               net->p.memory == SF_MEMORY_LEAN ? "" : " or memory=lean");
    return SF_OK;
}

sf_status sf_net_plan_memory(sf_net *net)
{
    int32_t L = net->n_layers;
    sf_net_tensor *tensors = realloc(net->tensors, (size_t)(L + 1) * sizeof *tensors);
    if (!tensors) return sf_fail(SF_ERR_NOMEM, "out of memory");
    net->tensors = tensors;
    build_tensors(net);
    fuse_layers(net);
    sf_net_sparse_mark(net);
    decide_layouts(net);
    decide_once(net);
    decide_keeps(net);
    for (int32_t i = 0; i < L; i++) { /* the slots every kind may have; each kind's plan sets its own */
        sf_net_layer *l = &net->layers[i];
        l->sws_f = l->sws_b = l->in_float = l->in2_float = l->rerun_in = l->rerun_scratch = (sf_slot){0};
        l->dx_tmp = l->dx_tmp2 = (sf_slot){0};
        l->rebuild_in_grad = false;
    }
    sf_planner pl = {.L = L};
    head_slots head;
    plan_forward(net, &pl);
    plan_backward(net, &pl);
    plan_head(net, &pl, &head);
    if (pl.failed) {
        free(pl.req);
        return sf_fail(SF_ERR_NOMEM, "out of memory planning");
    }
    size_t work = sf_plan_pack(net, &pl);
    free(pl.req);

    net->plan.saved = pl.saved;
    net->plan.workspace = work;
    SF_TRY(allocate(net, &net->saved_mem, pl.saved, "saved activations"));
    SF_TRY(allocate(net, &net->work_mem, work, "workspace"));
    net->readout = head.readout.where ? sf_net_slot_ptr(net, head.readout) : NULL;
    net->dreadout = head.dreadout.where ? sf_net_slot_ptr(net, head.dreadout) : NULL;
    net->out_all = head.out_all.where ? sf_net_slot_ptr(net, head.out_all) : NULL;
    net->dout_all = head.dout_all.where ? sf_net_slot_ptr(net, head.dout_all) : NULL;
    net->logits = sf_net_slot_ptr(net, head.logits);
    net->stats = sf_net_slot_ptr(net, head.stats);
    net->spike_counts = sf_net_slot_ptr(net, head.counts);
    net->labels = sf_net_slot_ptr(net, head.labels);
    net->tcounts = sf_net_slot_ptr(net, head.tcounts);
    net->input_f32 = sf_net_slot_ptr(net, head.input_f32);
    float *hc = realloc(net->host_counts, (size_t)(net->n_lif ? net->n_lif : 1) * sizeof(float));
    if (!hc) return sf_fail(SF_ERR_NOMEM, "out of memory");
    net->host_counts = hc;
    SF_TRY(sf_net_sparse_forget(net)); /* nothing may still land in the old host_tcounts */
    float *ht = realloc(net->host_tcounts, (size_t)(2 * (L + 1) + net->n_lif) * sizeof(float));
    if (!ht) return sf_fail(SF_ERR_NOMEM, "out of memory");
    net->host_tcounts = ht;
    return SF_OK;
}
