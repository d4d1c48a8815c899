/* layer.h — a layer kind as the engine sees it: the table of what the engine asks of a layer (sf_layer_ops) and the
 * services the engine gives the kind files. Each kind fills one sf_layer_ops in its file under core/layers/
 * (layer_registry.c maps sf_layer_kind to it); the drivers ask the table, never the kind: properties are flags, all a
 * kind computes is a hook, a NULL hook means nothing to do. A kind's data is its member of sf_net_layer's union
 * (net_internal.h). docs/architecture.md, "Adding a layer kind", lists the files a new kind touches. */
#ifndef SF_CORE_LAYER_H
#define SF_CORE_LAYER_H

#include "core/net_internal.h"
#include "core/plan_pack.h"

/* What the drivers know of a kind without calling it (sf_layer_ops.flags). */
enum {
    SF_KIND_SPIKES = 1u << 0,        /* its output is 0/1 spikes, whatever its input */
    SF_KIND_PASSES_SPIKES = 1u << 1, /* its output is spikes where its inputs are (a max-pool, a flatten) */
    SF_KIND_ALIAS = 1u << 2,         /* its output is its input's storage under another shape: no forward, no
                                      * backward, and a reader of it reads the input */
    SF_KIND_FIRES = 1u << 3,         /* a neuron layer: it counts its spikes (firing rates) and writes its output's
                                      * compact form itself */
    SF_KIND_WRITES_BYTES = 1u << 4,  /* its training forward writes the byte copy of its spikes the plan keeps */
    SF_KIND_NHWC = 1u << 5,          /* reads and writes NHWC tensors too, one layout on all its sides */
    SF_KIND_NHWC_EACH = 1u << 6,     /* reads and writes either layout, each side its own (a convolution, tokens) */
    SF_KIND_READS_RERUN = 1u << 7,   /* its backward may read its input rebuilt by rerunning the layer that made it
                                      * (lean mode), in a tick of the timeline of its own just before */
    SF_KIND_DX_AFTER_X = 1u << 8,    /* its backward reads its input before it writes dx, so that input may be
                                      * rebuilt in its own gradient's buffer */
    SF_KIND_ALWAYS_DX = 1u << 9,     /* its backward writes dx also where its input takes no gradient */
    SF_KIND_EVENT_INPUT = 1u << 10,  /* event-driven, it reads its input's compact spikes, not their values */
    SF_KIND_EVENT_OUTPUT = 1u << 11, /* its kernels make its output's compact form, lists where event-driven */
    SF_KIND_GRAD_MASK = 1u << 12,    /* event-driven, its backward sums over its output gradient's nonzero pattern
                                      * where the neuron layer reading its output writes that pattern */
    SF_KIND_STEP_VARIES = 1u << 13,  /* its ops' arguments change from step to step: a recorded step graph
                                      * (net_step.c) cannot replay it */
    SF_KIND_RUNS_BN = 1u << 14,      /* it may run the batch norm before it inside its own kernels (fuse) */
    SF_KIND_BINARY_FAST = 1u << 15,  /* its dense ops take a faster path for an input known to hold only 0 and 1
                                      * (sf_net_tensor_is_binary): the net's input of spikes is checked for it */
    /* Tokens (sf_net_layer.tokens): a kind reads a tensor of tokens only with one of these. */
    SF_KIND_TOKENS = 1u << 16,       /* acts on every token alike: its output is tokens where its input is */
    SF_KIND_READS_TOKENS = 1u << 17, /* reads tokens into something else (a flatten, the mean over tokens) */
    SF_KIND_MAKES_TOKENS = 1u << 18, /* its output is tokens, from an input that is not */
    SF_KIND_CHANNEL_BIAS = 1u << 19, /* adds a bias per output channel, which a batch norm reading it alone cancels in
                                      * training (bias_cancelled) */
    SF_KIND_ONCE_OVER_T = 1u << 20,  /* as the static input's only reader it may run once (once_over_t) */
};

/* The most buffers (named float tensors outside the parameters, like BN's running statistics) a kind has. */
#define SF_KIND_BUFFERS 2

/* A layer's parameter and buffer sizes in floats (0: none). */
typedef struct sf_kind_sizes {
    int64_t weight, bias;
    int64_t buffer; /* each of the kind's buffers (sf_layer_ops.buffer_names) */
} sf_kind_sizes;

struct sf_layer_ops {
    const char *name;                              /* sf_layer_kind_name, and layers' error messages */
    int32_t inputs;                                /* 1, or 2: the second is sf_layer_desc.input2 */
    uint32_t flags;                                /* SF_KIND_* */
    const char *weight_name;                       /* the weight's checkpoint name; NULL: "weight" */
    const char *buffer_names[SF_KIND_BUFFERS + 1]; /* its buffers' names, NULL after the last */

    /* ---- building (net_build.c, net_params.c) */
    /* The description's defaults beyond sf_layer_default_desc's common ones. */
    void (*defaults)(sf_layer_desc *d);
    /* Checks the description against the input shape in[3] (c, h, w) and writes the output shape out[3], and the
     * kind's geometry; index names the layer in messages. */
    sf_status (*shape)(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3]);
    void (*sizes)(const sf_net_layer *l, const int32_t in[3], sf_kind_sizes *n);
    /* PyTorch's initialisation of the layer's parameters and buffers, into host copies of the whole allocations. */
    void (*init)(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, float *buffers);
    /* The weight's shape (ndim, shape) as PyTorch has it; NULL: one dimension. */
    void (*weight_shape)(const sf_net_layer *l, sf_tensor_info *info);
    /* The name sf_net_summary shows; NULL: the kind's name. */
    const char *(*label)(const sf_net_layer *l);
    /* Is the output spikes where the inputs are, for a kind where the layer's description decides (add's connect)?
     * NULL: SF_KIND_PASSES_SPIKES alone says. */
    bool (*passes_spikes)(const sf_net_layer *l);

    /* ---- the memory plan (plan.c), in the order sf_net_plan_memory asks */
    /* Looks at layer index and its neighbours: may make this one absorbed into the next (SF_KIND_RUNS_BN), or
     * cancel the bias of the one before (SF_KIND_CHANNEL_BIAS). */
    void (*fuse)(sf_net *net, int32_t index);
    /* Does the backward read the value of input k (0, 1)? Asked only where the layer's backward runs. */
    bool (*needs_input)(const sf_net *net, const sf_net_layer *l, int32_t k);
    /* recompute mode: the tensor from whose value this layer's forward can run again to rebuild its output, or -1;
     * recompute writes that output into y (the backward's value of the output, kept as SF_KEEP_RECOMPUTE). */
    int32_t (*recompute_source)(const sf_net *net, const sf_net_layer *l);
    sf_status (*recompute)(sf_net *net, const sf_net_layer *l, float *y);
    /* lean mode: the forward from x into y, as it runs and again where the backward rebuilds the output
     * (SF_KEEP_RERUN); scratch: rerun_workspace bytes (NULL hook: none). Only a layer running dense is rerun. */
    sf_status (*rerun)(sf_net *net, const sf_net_layer *l, const float *x, float *y, void *scratch);
    size_t (*rerun_workspace)(sf_net *net, const sf_net_layer *l);
    /* The layer's own requests: saved per-layer slots and its workspaces (sf_layer_plan_workspaces), the shapes of
     * its ops for T·B rows, and what the time pipeline exchanges. */
    void (*plan)(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index);
    /* Leaner workspace choices of the layer's op (backend.h conv_lean), for pass, taken with take; layers for which
     * same_workspace holds share one choice. */
    bool (*lean_workspace)(sf_net *net, const sf_net_layer *l, sf_conv_pass pass, bool take, sf_conv_lean *q);
    bool (*same_workspace)(const sf_net_layer *a, const sf_net_layer *b);
    /* What a step over several processes (net_hooks.h) needs of the layer, checked at compile. */
    sf_status (*split_check)(const sf_net *net, const sf_net_layer *l, int32_t index);

    /* ---- running (net_run.c, net_backward.c) */
    /* The forward into the output's act slot (the driver then keeps its bytes or bits as planned); NULL: none. */
    sf_status (*forward)(sf_net *net, sf_net_layer *l, bool training);
    /* The backward, called where it runs (the output takes a gradient, the layer is not absorbed). */
    sf_status (*backward)(sf_net *net, sf_net_layer *l);
    /* The membrane potential a training forward writes, for sf_net_read_membrane; NULL: the kind has none. */
    const sf_slot *(*membrane)(const sf_net_layer *l);

    /* ---- event-driven execution (sparse.c, sparse_tune.c) */
    /* Can the layer run event-driven (then sparse = auto / on applies to it)? NULL: never. */
    bool (*event_driven)(const sf_net *net, const sf_net_layer *l);
    /* Does its backward write its input gradient's nonzero pattern (the mask an SF_KIND_GRAD_MASK layer reads)? */
    bool (*masks_input_grad)(const sf_net_layer *l);
    /* This step's paths (fwd_sparse, bwd_flags) from the densities known now, for a layer whose sparse is not off. */
    void (*sparse_decide)(sf_net *net, sf_net_layer *l);
    /* The densities of the last step (its gradients' too where it ran its backward), for the next step's choices. */
    void (*sparse_measured)(sf_net *net, sf_net_layer *l, bool with_backward);
    /* The crossovers (xfwd, xbwd) of a layer with sparse = auto, measured on the backend. */
    sf_status (*sparse_tune)(sf_net *net, sf_net_layer *l);
};

/* The kind's table, NULL for a kind the library does not have (layer_registry.c). */
const sf_layer_ops *sf_layer_ops_of(sf_layer_kind kind);

static inline bool sf_kind_has(const sf_net_layer *l, uint32_t flag) { return (l->ops->flags & flag) != 0; }

/* Is layer l's output spikes where its inputs are (its kind's flag, or its hook)? */
static inline bool sf_layer_passes_spikes(const sf_net_layer *l)
{
    return sf_kind_has(l, SF_KIND_PASSES_SPIKES) || (l->ops->passes_spikes && l->ops->passes_spikes(l));
}

/* Input k (0, 1) of layer l: the tensor id, -1 past the kind's inputs. */
static inline int32_t sf_layer_input(const sf_net_layer *l, int32_t k)
{
    return k == 0 ? l->in : k < l->ops->inputs ? l->in2 : -1;
}
static inline int32_t sf_net_layer_index(const sf_net *net, const sf_net_layer *l)
{
    return (int32_t)(l - net->layers);
}
/* Does layer i's backward run? Only when something upstream of its output has parameters. */
static inline bool sf_layer_backward_runs(const sf_net *net, int32_t i)
{
    return net->tensors[net->layers[i].out].requires_grad;
}

/* ---- tokens (core/transformer.h) */

/* The token shape of tensor id, (D, N, 1) per sample: T·B sets of N tokens of D channels. */
static inline sf_token_shape sf_net_token_shape(const sf_net *net, int32_t id)
{
    const sf_net_tensor *x = &net->tensors[id];
    return (sf_token_shape){.tb = sf_net_rows(net), .n = x->h * x->w, .d = x->c};
}
/* p advanced by n elements of the act type: a column block of a token tensor (the k of q|k|v). */
static inline float *sf_net_act_at(const sf_net *net, const void *p, int64_t n)
{
    return p ? (float *)((char *)p + (size_t)n * sf_net_act_size(net)) : NULL;
}

/* ---- services for the kind files (layer.c) */

/* A once_over_t layer's output y (per_sample elements a sample) of step 0 copied to every other step; and its
 * output gradient dy summed over the steps into step 0, which its weight gradient reads (B·per_sample < 2^31). */
sf_status sf_layer_repeat_over_t(sf_net *net, void *y, int64_t per_sample);
sf_status sf_layer_sum_over_t(sf_net *net, void *dy, int64_t per_sample);

/* Backward: the value of input k of layer l, from where the plan kept it (as it is, expanded from bytes or bits,
 * recomputed or rerun by its producer) into the buffers the plan gave l for it. */
sf_status sf_layer_input_value(sf_net *net, const sf_net_layer *l, int32_t k, const float **out);
/* Where layer `writer`'s backward writes the gradient of input tensor id: the gradient buffer if it is the first
 * writer, else tmp (*accumulate set: sf_layer_accumulate adds it); NULL when the input takes none and tmp is none. */
float *sf_layer_dx_target(sf_net *net, int32_t writer, int32_t id, sf_slot tmp, bool *accumulate);
sf_status sf_layer_accumulate(sf_net *net, bool accumulate, int32_t id, const float *tmp);
/* Plan: the forward's workspace sws_f (fwd bytes) at layer index's forward, the backward's sws_b (bwd bytes) at its
 * backward where that runs. */
void sf_layer_plan_workspaces(sf_net *net, sf_planner *pl, sf_net_layer *l, int32_t index, size_t fwd, size_t bwd);
/* Init: PyTorch's default for a weight and bias, U(-1/√fan_in, 1/√fan_in) with fan_in = w_numel / fan_out, the
 * weight times init_gain. */
void sf_layer_init_uniform(const sf_net *net, const sf_net_layer *l, int32_t index, float *params, int64_t fan_out);
/* The bias an SF_KIND_CHANNEL_BIAS layer adds: none where it is cancelled and the pass trains (a rerun in the
 * backward does). */
static inline const float *sf_layer_bias(sf_net *net, const sf_net_layer *l, bool training)
{
    return l->bias_cancelled && training ? NULL : sf_net_param(net, l->b_off);
}
/* Where its backward writes the bias gradient: NULL where the bias is cancelled, its gradient then set to 0. */
sf_status sf_layer_bias_grad(sf_net *net, const sf_net_layer *l, float **db);

#endif
