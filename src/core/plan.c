/* plan.c — what sf_net_compile (net_params.c) decides: tensor bookkeeping, BN→LIF fusion, what the backward keeps,
 * and the memory plan.
 *
 * The plan runs on the timeline of plan_pack.h: the upload, the layers' forwards, the loss, then the backwards in
 * reverse, each with a tick before it for the lean mode's reruns. Every workspace buffer is a request (bytes, first,
 * last tick); requests whose lifetimes overlap get disjoint bytes, the others may share. Saved buffers stack up. */
#include "core/error.h"
#include "core/lif_math.h"
#include "core/net_internal.h"
#include "core/plan_pack.h"

#include <stdlib.h>
#include <string.h>

/* The layer whose backward writes the gradient of consumer c's input: a BN fused into a LIF writes through it. */
static int32_t writer_of(const sf_net *net, int32_t c)
{
    return net->layers[c].absorbed ? c + 1 : c;
}

/* Does layer c's backward run? Only when something upstream of its output has parameters. */
static bool backward_runs(const sf_net *net, int32_t c)
{
    return net->tensors[net->layers[c].out].requires_grad;
}

/* Does layer c's backward need the value of its (first) input? */
static bool needs_input_value(const sf_net *net, int32_t c)
{
    const sf_net_layer *l = &net->layers[c];
    if (!backward_runs(net, c) && !(l->absorbed && backward_runs(net, c + 1))) return false;
    switch (l->d.kind) {
    case SF_LAYER_LINEAR:
    case SF_LAYER_CONV2D:
    case SF_LAYER_BATCHNORM: return true; /* absorbed BN: the fused LIF reads the BN input */
    case SF_LAYER_LIF:
    case SF_LAYER_RLIF:
        return !l->fused_bn && (!sf_net_keeps_h(net, l) || sf_neuron_backward_reads_x(&l->d.lif));
    default: return false;
    }
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
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        sf_net_tensor *o = &net->tensors[l->out];
        const sf_net_tensor *a = &net->tensors[l->in];
        switch (l->d.kind) {
        case SF_LAYER_LIF:
        case SF_LAYER_RLIF: o->binary = true; break;
        case SF_LAYER_FLATTEN:
            o->alias_of = a->alias_of;
            o->binary = a->binary;
            break;
        case SF_LAYER_MAXPOOL2D: o->binary = a->binary; break;
        default: break;
        }
        o->requires_grad = l->w_off >= 0 || a->requires_grad ||
                           (l->d.kind == SF_LAYER_ADD && net->tensors[l->in2].requires_grad);
        net->tensors[sf_net_root(net, l->in)].consumers++;
        if (l->d.kind == SF_LAYER_ADD) net->tensors[sf_net_root(net, l->in2)].consumers++;
    }
}

/* BN directly followed by a LIF that is its only reader: the LIF runs both (Liang et al.'s fused kernels;
 * docs/architecture.md, References). */
static void fuse_bn_lif(sf_net *net)
{
    int32_t lif = 0;
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        l->fused_bn = l->absorbed = false;
        l->bn = -1;
        if (l->d.kind == SF_LAYER_LIF || l->d.kind == SF_LAYER_RLIF) l->lif_index = lif++;
    }
    net->n_lif = lif;
    for (int32_t i = 0; i + 1 < net->n_layers; i++) {
        sf_net_layer *bn = &net->layers[i], *nx = &net->layers[i + 1];
        if (bn->d.kind == SF_LAYER_BATCHNORM && nx->d.kind == SF_LAYER_LIF && nx->in == bn->out &&
            net->tensors[bn->out].consumers == 1) {
            bn->absorbed = true;
            nx->fused_bn = true;
            nx->bn = i;
        }
    }
}

/* Layers that read an NHWC tensor as well as an NCHW one: convolutions (through the backend), and those that treat
 * every element alike or by channel alone (BN, the neurons, add). */
static bool reads_nhwc(const sf_net_layer *l)
{
    return l->d.kind == SF_LAYER_CONV2D || l->d.kind == SF_LAYER_BATCHNORM || l->d.kind == SF_LAYER_LIF ||
           l->d.kind == SF_LAYER_ADD;
}

/* Which tensors are NHWC: on a backend whose convolutions prefer it (conv_nhwc), the outputs of convolutions and of
 * the BN, neuron and add layers after them, as long as every layer that reads them reads NHWC; a tensor that a
 * pooling, flatten, dropout, linear or recurrent layer reads, the input and the output stay NCHW. A BN, neuron or add
 * layer has one layout on all its sides, so an NCHW side makes the others NCHW too (repeated until nothing changes).
 * A convolution may differ on its two sides: it copies the NCHW one (conv.cu). */
static void decide_layouts(sf_net *net)
{
    const int32_t L = net->n_layers;
    for (int32_t t = 0; t <= L; t++) {
        sf_net_tensor *x = &net->tensors[t];
        x->nhwc = net->be->conv_nhwc && t > 0 && t < L && x->alias_of == t && x->h * x->w > 1 && !x->compact &&
                  reads_nhwc(&net->layers[x->producer]);
    }
    for (int32_t i = 0; i < L; i++) {
        const sf_net_layer *l = &net->layers[i];
        if (reads_nhwc(l)) continue;
        net->tensors[sf_net_root(net, l->in)].nhwc = false;
        if (l->d.kind == SF_LAYER_ADD) net->tensors[sf_net_root(net, l->in2)].nhwc = false;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t i = 0; i < L; i++) {
            const sf_net_layer *l = &net->layers[i];
            if (!reads_nhwc(l) || l->d.kind == SF_LAYER_CONV2D) continue;
            bool *side[3] = {&net->tensors[l->in].nhwc, &net->tensors[l->out].nhwc,
                             l->d.kind == SF_LAYER_ADD ? &net->tensors[l->in2].nhwc : NULL};
            const bool all = *side[0] && *side[1] && (!side[2] || *side[2]);
            for (int k = 0; k < 3 && !all; k++)
                if (side[k] && *side[k]) *side[k] = false, changed = true;
        }
    }
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        if (l->d.kind != SF_LAYER_CONV2D) continue;
        l->conv.x_nhwc = net->tensors[l->in].nhwc;
        l->conv.y_nhwc = net->tensors[l->out].nhwc;
        l->conv.x_binary = sf_net_tensor_is_binary(net, l->in);
    }
}

/* Lean mode: can the backward rerun the producer of root tensor t instead of keeping t? Where it is a conv, dense
 * linear or avg-pool layer whose input stays (the net's input, kept, or bits), and t's values are read only by
 * BN and LIF backwards (whose rebuild has a tick of its own before them: plan_backward). */
static bool rerunnable(const sf_net *net, int32_t t)
{
    const sf_net_tensor *x = &net->tensors[t];
    if (x->binary || x->producer < 0) return false;
    const sf_net_layer *p = &net->layers[x->producer];
    const bool synapse = p->d.kind == SF_LAYER_CONV2D || p->d.kind == SF_LAYER_AVGPOOL2D ||
                         (p->d.kind == SF_LAYER_LINEAR && p->sparse == SF_SPARSE_OFF);
    const int32_t src = sf_net_root(net, p->in);
    const sf_keep_kind k = net->tensors[src].keep;
    if (!synapse || !(src == 0 || k == SF_KEEP_FLOAT || k == SF_KEEP_BYTES || k == SF_KEEP_BITS)) return false;
    for (int32_t c = 0; c < net->n_layers; c++) {
        const sf_net_layer *l = &net->layers[c];
        if (sf_net_root(net, l->in) == t && l->d.kind != SF_LAYER_FLATTEN && needs_input_value(net, c) &&
            l->d.kind != SF_LAYER_BATCHNORM && l->d.kind != SF_LAYER_LIF)
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
        if (x->alias_of != t) continue;
        bool needed = false;
        for (int32_t c = 0; c < net->n_layers && !needed; c++)
            needed = sf_net_root(net, net->layers[c].in) == t && net->layers[c].d.kind != SF_LAYER_FLATTEN &&
                     needs_input_value(net, c);
        if (!needed) continue;
        x->keep = x->binary ? SF_KEEP_BYTES : SF_KEEP_FLOAT;
        if (net->p.memory == SF_MEMORY_RECOMPUTE && x->producer >= 0) {
            const sf_net_layer *p = &net->layers[x->producer];
            if (p->d.kind == SF_LAYER_LIF) {
                int32_t src = p->fused_bn ? net->layers[p->bn].in : p->in;
                if (net->tensors[sf_net_root(net, src)].keep == SF_KEEP_FLOAT) x->keep = SF_KEEP_RECOMPUTE;
            }
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

/* What layer i exchanges with other processes (net_hooks.h): a LIF's state at the ends of its time segment, a BN's
 * statistics and sums over its group. Saved, so they outlive the transfers that read them. */
static void plan_exchange(sf_net *net, sf_planner *pl, int32_t i)
{
    sf_net_layer *l = &net->layers[i];
    const sf_net_hooks *h = &net->hooks;
    if (l->d.kind == SF_LAYER_LIF && h->nseg > 1) {
        /* the neuron's state: v, and the ALIF's b */
        size_t n = (size_t)(net->B * net->tensors[l->out].per_sample * sf_neuron_state_count(&l->d.lif)) *
                   sizeof(float);
        bool first = h->seg == 0, last = h->seg == h->nseg - 1, back = backward_runs(net, i);
        if (!first) sf_plan_saved(pl, &l->v_in, n);
        if (!last) sf_plan_saved(pl, &l->v_out, n);
        if (!last && back) sf_plan_saved(pl, &l->dv_in, n);
        if (!first && back) sf_plan_saved(pl, &l->dv_out, n);
    }
    if (l->d.kind == SF_LAYER_BATCHNORM && h->bn_parts > 1) {
        size_t c = (size_t)net->tensors[l->in].c * sizeof(float);
        sf_plan_saved(pl, &l->bn_gather, (size_t)h->bn_parts * 2 * c);
        if (backward_runs(net, i + 1)) sf_plan_saved(pl, &l->bn_sums, 2 * c);
    }
}

/* Forward lifetimes of activations and what the forward saves. */
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
            if (sf_net_root(net, l->in) == t || (l->d.kind == SF_LAYER_ADD && sf_net_root(net, l->in2) == t))
                if (sf_plan_t_fwd(pl, c) > lastuse) lastuse = sf_plan_t_fwd(pl, c);
        }
        if (t == last || t == 0) lastuse = sf_plan_t_end(pl); /* the output stays readable; the input, for x = NULL */
        if (x->keep == SF_KEEP_FLOAT) sf_plan_saved(pl, &x->act, bytes);
        else sf_plan_work(pl, &x->act, bytes, first, lastuse);
        if (x->keep == SF_KEEP_BYTES) sf_plan_saved(pl, &x->bytes, sf_net_tensor_bytes(net, t, 1));
        if (x->compact) {
            const size_t r = (size_t)(net->T * net->B);
            const size_t bits = r * (size_t)sf_spike_words(x->per_sample) * sizeof(uint32_t);
            /* the backward of a linear layer reading them takes their bits (kept also when keep_all keeps floats) */
            if (x->keep != SF_KEEP_NONE) sf_plan_saved(pl, &x->cbits, bits);
            else sf_plan_work(pl, &x->cbits, bits, first, lastuse);
            if (x->lists) {
                sf_plan_work(pl, &x->cidx, r * (size_t)x->per_sample, first, lastuse);
                sf_plan_work(pl, &x->ccnt, r * (size_t)sf_spike_segs(x->per_sample) * sizeof(int32_t), first, lastuse);
            }
        } else if (x->keep == SF_KEEP_BITS) { /* lean mode: the forward packs them after writing them */
            sf_plan_saved(pl, &x->cbits,
                          (size_t)(net->T * net->B) * (size_t)sf_spike_words(x->per_sample) * sizeof(uint32_t));
        }
    }
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        const sf_net_tensor *o = &net->tensors[l->out];
        size_t per_t = (size_t)(net->T * net->B);
        if (l->d.kind == SF_LAYER_BATCHNORM) {
            sf_plan_saved(pl, &l->mean, (size_t)net->tensors[l->in].c * sizeof(float));
            sf_plan_saved(pl, &l->var, (size_t)net->tensors[l->in].c * sizeof(float));
        }
        bool h_for_backward = sf_net_keeps_h(net, l) && backward_runs(net, i);
        if ((l->d.kind == SF_LAYER_LIF || l->d.kind == SF_LAYER_RLIF) && (h_for_backward || net->keep_all))
            sf_plan_saved(pl, &l->h, sf_net_tensor_bytes(net, l->out, sizeof(float)));
        /* the backward recomputes h (the ALIF's always, for its thresholds) from checkpoints: 1/32 of h */
        if (l->d.kind == SF_LAYER_LIF && backward_runs(net, i) && net->be->neuron_ckpt && sf_net_backward_reruns(net, l))
            sf_plan_saved(pl, &l->v_ckpt,
                          (size_t)sf_lif_ckpt_floats(&l->d.lif, net->T, net->B * o->per_sample) * sizeof(float));
        size_t sws = 0;
        if (l->d.kind == SF_LAYER_LINEAR && l->sparse != SF_SPARSE_OFF)
            sws = net->be->spike_linear_workspace(net->be, (int64_t)per_t, (int32_t)net->tensors[l->in].per_sample,
                                                  l->d.out_features);
        if (l->d.kind == SF_LAYER_RLIF) sws = net->be->rlif_workspace(net->be, net->T, net->B, o->per_sample);
        sf_plan_work(pl, &l->sws_f, sws, sf_plan_t_fwd(pl, i), sf_plan_t_fwd(pl, i));
        if (backward_runs(net, i)) sf_plan_work(pl, &l->sws_b, sws, sf_plan_t_bwd(pl, i), sf_plan_t_bwd(pl, i));
        if (l->d.kind == SF_LAYER_MAXPOOL2D) sf_plan_saved(pl, &l->argmax, per_t * (size_t)o->per_sample);
        if (l->d.kind == SF_LAYER_CONV2D) {
            l->conv.n = (int64_t)per_t;
            sf_plan_work(pl, &l->fwd_scratch, net->be->conv_workspace(net->be, &l->conv, SF_CONV_PASS_FORWARD),
                         sf_plan_t_fwd(pl, i), sf_plan_t_fwd(pl, i));
            if (backward_runs(net, i))
                sf_plan_work(pl, &l->bwd_scratch, net->be->conv_workspace(net->be, &l->conv, SF_CONV_PASS_BACKWARD),
                             sf_plan_t_bwd(pl, i), sf_plan_t_bwd(pl, i));
        }
        if (l->d.kind == SF_LAYER_LIF && l->fused_bn && backward_runs(net, i)) { /* its sums between the passes */
            const sf_bn_shape sh = sf_net_bn_shape(net, net->layers[l->bn].in, net->T * net->B);
            const size_t sums = net->be->bn_lif_scratch(net->be, &l->d.lif, net->T, sh);
            sf_plan_work(pl, &l->bwd_scratch, sums, sf_plan_t_bwd(pl, i), sf_plan_t_bwd(pl, i));
        }
        if (l->d.kind == SF_LAYER_AVGPOOL2D || l->d.kind == SF_LAYER_MAXPOOL2D)
            l->pool.n = (int64_t)per_t * net->tensors[l->in].c;
        plan_exchange(net, pl, i);
    }
}

/* What layer l's backward needs at tick `pre` (its rebuild's) to rerun the layer that made its input (lean mode):
 * that layer's input as values where it is kept as bits or bytes, and a conv's forward workspace. */
static void plan_rerun(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t pre)
{
    const sf_net_layer *p = sf_net_rerun_of(net, l);
    const int32_t src = sf_net_root(net, p->in);
    const sf_keep_kind k = net->tensors[src].keep;
    if (src != 0 && (k == SF_KEEP_BITS || k == SF_KEEP_BYTES))
        sf_plan_work(pl, &l->rerun_in, sf_net_tensor_bytes(net, src, sf_net_act_size(net)), pre, pre);
    if (p->d.kind == SF_LAYER_CONV2D)
        sf_plan_work(pl, &l->rerun_scratch, net->be->conv_workspace(net->be, &p->conv, SF_CONV_PASS_FORWARD), pre, pre);
}

/* Backward lifetimes: gradients from their first writer to their producer, and per-layer scratch. */
static void plan_backward(sf_net *net, sf_planner *pl)
{
    int32_t L = net->n_layers;
    for (int32_t t = 0; t <= L; t++) net->tensors[t].first_grad_writer = -1;
    /* The first writer of a root tensor's gradient is the writing layer that comes last in the forward. */
    for (int32_t c = 0; c < L; c++) {
        const sf_net_layer *l = &net->layers[c];
        if (l->d.kind == SF_LAYER_FLATTEN) continue;
        int32_t w = writer_of(net, c);
        if (!backward_runs(net, w)) continue;
        int32_t ins[2] = {sf_net_root(net, l->in), l->d.kind == SF_LAYER_ADD ? sf_net_root(net, l->in2) : -1};
        for (int k = 0; k < 2; k++) {
            if (ins[k] < 0 || !net->tensors[ins[k]].requires_grad) continue;
            sf_net_tensor *x = &net->tensors[ins[k]];
            if (x->first_grad_writer < w) x->first_grad_writer = w;
        }
    }
    int32_t last = sf_net_root(net, L);
    for (int32_t t = 1; t <= L; t++) {
        sf_net_tensor *x = &net->tensors[t];
        if (x->alias_of != t || !x->requires_grad || net->layers[t - 1].absorbed) continue;
        int32_t first =
            t == last ? sf_plan_t_loss(pl) : (x->first_grad_writer >= 0 ? sf_plan_t_bwd(pl, x->first_grad_writer) : -1);
        if (first < 0) continue; /* nothing reads this tensor */
        sf_plan_work(pl, &x->grad, sf_net_tensor_bytes(net, t, sf_net_act_size(net)), first,
                     sf_plan_t_bwd(pl, x->producer));
    }
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        int32_t w = writer_of(net, i);
        if (l->d.kind == SF_LAYER_FLATTEN || !backward_runs(net, w)) continue;
        int32_t t = sf_plan_t_bwd(pl, w);
        int32_t in = sf_net_root(net, l->in);
        sf_keep_kind k = net->tensors[in].keep;
        /* the input's values need no rebuilding: they stay for the whole step */
        bool rebuild = in != 0 &&
                       (k == SF_KEEP_BYTES || k == SF_KEEP_RECOMPUTE || k == SF_KEEP_BITS || k == SF_KEEP_RERUN) &&
                       needs_input_value(net, i);
        /* A conv reads its input before it writes dx (backend.h), so when it writes its input's gradient first the
         * input can be rebuilt right there: one activation-sized buffer less at the backward's peak. */
        l->rebuild_in_grad = rebuild && l->d.kind == SF_LAYER_CONV2D && net->tensors[in].requires_grad &&
                             net->tensors[in].first_grad_writer == w;
        if (rebuild && !l->rebuild_in_grad)
            sf_plan_work(pl, &l->in_float, sf_net_tensor_bytes(net, in, sf_net_act_size(net)),
                         k == SF_KEEP_RERUN ? sf_plan_t_pre(pl, w) : t, t);
        if (rebuild && k == SF_KEEP_RERUN) plan_rerun(net, pl, l, sf_plan_t_pre(pl, w));
        /* A gradient for an input that another layer writes first, or one nobody needs (a BN's dx argument). */
        bool dx_to_tmp = net->tensors[in].requires_grad ? net->tensors[in].first_grad_writer != w
                                                        : (l->d.kind == SF_LAYER_BATCHNORM ||
                                                           l->d.kind == SF_LAYER_RLIF);
        if (dx_to_tmp) sf_plan_work(pl, &l->dx_tmp, sf_net_tensor_bytes(net, in, sf_net_act_size(net)), t, t);
        /* The nonzero pattern of a sparse linear layer's output gradient: from its LIF's backward to its own. */
        const sf_net_tensor *o = &net->tensors[l->out];
        if (o->gmask) {
            const size_t r = (size_t)(net->T * net->B);
            int32_t lif = i + 1;
            while (net->layers[lif].in != l->out) lif++;
            sf_plan_work(pl, &net->tensors[l->out].gbits, r * (size_t)sf_spike_words(o->per_sample) * sizeof(uint32_t),
                         sf_plan_t_bwd(pl, lif), t);
            sf_plan_work(pl, &net->tensors[l->out].gcnt, r * (size_t)sf_spike_segs(o->per_sample) * sizeof(int32_t),
                         sf_plan_t_bwd(pl, lif), t);
        }
        if (l->d.kind == SF_LAYER_ADD) {
            int32_t in2 = sf_net_root(net, l->in2);
            if (net->tensors[in2].requires_grad && (net->tensors[in2].first_grad_writer != w || in2 == in))
                sf_plan_work(pl, &l->dx_tmp2, sf_net_tensor_bytes(net, in2, sf_net_act_size(net)), t, t);
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
    if (net->be->act != SF_ACT_F32) sf_plan_work(pl, &h->input_f32, sf_net_tensor_bytes(net, 0, sizeof(float)), 0, 0);
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
    fuse_bn_lif(net);
    sf_net_sparse_mark(net);
    decide_layouts(net);
    decide_keeps(net);
    for (int32_t i = 0; i < L; i++) {
        sf_net_layer *l = &net->layers[i];
        l->mean = l->var = l->h = l->v_ckpt = l->argmax = l->fwd_scratch = l->bwd_scratch = l->in_float = l->dx_tmp = l->dx_tmp2 =
            l->sws_f = l->sws_b = l->rerun_in = l->rerun_scratch = (sf_slot){0};
        l->v_in = l->v_out = l->dv_in = l->dv_out = l->bn_gather = l->bn_sums = (sf_slot){0};
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
    float *ht = realloc(net->host_tcounts, (size_t)(2 * (L + 1) + net->n_lif) * sizeof(float));
    if (!ht) return sf_fail(SF_ERR_NOMEM, "out of memory");
    net->host_tcounts = ht;
    net->host_tcounts_valid = false;
    return SF_OK;
}
