/* net_internal.h — the network engine's private structures: layers, tensors, the memory plan. A network is a list of
 * layers in topological order; tensor 0 is the input and layer i writes tensor i + 1. sf_net_compile decides once per
 * (T, B) where every tensor lives: parameters, gradients, optimizer state and buffers in one allocation each; "saved"
 * (what the backward needs, as float, bytes, bits or not at all per memory mode); "workspace", packed by lifetime
 * (docs/architecture.md, Memory plan). */
#ifndef SF_CORE_NET_INTERNAL_H
#define SF_CORE_NET_INTERNAL_H

#include "core/backend.h"
#include "core/net_hooks.h"

#include <stdbool.h>

/* Recordings a net keeps of one body of work, one per combination of event-driven paths (net_step.c). */
#define SF_NET_GRAPHS 4

/* The bodies of work a net records as backend graphs: the training step's (forward, loss, backward, finite checks),
 * and the forward and backward that a caller holding the tensors runs one by one (net_device.c). */
typedef enum sf_net_body {
    SF_BODY_TRAIN_STEP = 0,
    SF_BODY_FORWARD_TRAINING,
    SF_BODY_FORWARD_EVAL,
    SF_BODY_BACKWARD,
    SF_NET_BODIES
} sf_net_body;

/* The recordings of one body, one per combination of event-driven paths that recent runs took: a layer whose density
 * sits at its crossover may switch paths from step to step. */
typedef struct sf_net_recordings {
    void *graphs[SF_NET_GRAPHS];
    uint64_t paths[SF_NET_GRAPHS]; /* sf_net_sparse_signature of each recording */
    int32_t n, oldest;             /* recordings held; the one a new recording replaces once all are held */
    void *current;                 /* the recording of this run's paths, or NULL */
    int32_t plain_runs;            /* runs without a graph since the compile */
    bool failed;                   /* recording failed once for this compile: stay on the plain path */
    /* what a run of the body leaves in the net's flags (have_forward, have_loss, have_backward, last_training), for
     * a replay to leave too */
    bool left_forward, left_loss, left_backward, left_training;
} sf_net_recordings;

/* How the backward obtains a tensor that a consumer's backward needs (e.g. a linear layer's input). */
typedef enum sf_keep_kind {
    SF_KEEP_NONE = 0,  /* no backward reads it */
    SF_KEEP_FLOAT,     /* its forward buffer (in the backend's act type) lives in the saved arena */
    SF_KEEP_BYTES,     /* binary spikes, copied to uint8 in the saved arena, expanded to the act type when needed */
    SF_KEEP_RECOMPUTE, /* produced by a neuron layer whose input is kept: rerun that layer's forward (its kind's
                        * recompute) */
    SF_KEEP_BITS,      /* spikes: their bits (the compact form's, where a layer reads them event-driven) stay in the
                        * saved arena (the same bits in every act type), expanded to the act type when needed */
    SF_KEEP_RERUN      /* lean mode: the output of a conv, linear or avg-pool layer whose input is kept: rerun that
                        * layer's forward (its kind's rerun) */
} sf_keep_kind;

typedef enum sf_arena { SF_ARENA_NONE = 0, SF_ARENA_SAVED, SF_ARENA_WORK } sf_arena;

/* A place in one of the planned allocations. */
typedef struct sf_slot {
    sf_arena where;
    size_t offset; /* bytes */
    size_t bytes;
} sf_slot;

typedef struct sf_net_tensor {
    int32_t c, h, w;
    int64_t per_sample; /* c·h·w */
    int32_t alias_of;   /* flatten outputs share their input's storage: the root tensor id, else itself */
    int32_t producer;   /* layer index, -1 for the input */
    int32_t consumers;  /* number of layer inputs reading it */
    bool binary;        /* values are 0/1 spikes */
    bool nhwc;          /* stored [T·B, h, w, c] (plan.c, decide_layouts), else [T·B, c, h, w] */
    bool requires_grad; /* some parameter lies upstream */
    sf_keep_kind keep;
    sf_slot act;               /* forward values [T, B, per_sample] in the act type */
    sf_slot bytes;             /* SF_KEEP_BYTES: uint8 copy */
    sf_slot grad;              /* backward gradient, act type */
    int32_t first_grad_writer; /* the layer whose backward writes grad first (the others accumulate) */
    /* event-driven execution (sparse.c) */
    bool compact;              /* the forward also makes the compact form (core/spikes.h) of these spikes */
    bool need_float;           /* compact: a reader needs the float values (else expanded only for a dense path) */
    bool lists;                /* compact: a reader may run event-driven, so the lists and counts are planned */
    sf_slot cbits, cidx, ccnt; /* compact form: bits (saved arena when keep is SF_KEEP_BITS), lists, counts */
    bool gmask;                /* the gradient's nonzero pattern is written by the θ_grad LIF that alone reads it */
    sf_slot gbits, gcnt;
} sf_net_tensor;

typedef struct sf_layer_ops sf_layer_ops; /* what a layer kind gives the engine (core/layer.h) */

typedef struct sf_net_layer {
    sf_layer_desc d;
    const sf_layer_ops *ops;     /* its kind's table, from the registry (layer_registry.c) */
    int32_t in, in2, out;        /* in2: the second input of a kind that reads two */
    int32_t out_c, out_h, out_w; /* output shape per sample and step */
    bool tokens;                 /* its output is tokens: (D, N, 1), N rows of D channels per sample, always stored
                                  * channels-last (nhwc), the layout of core/transformer.h */
    bool absorbed;               /* its work runs inside the next layer's kernels (a BN fused into the LIF after it) */
    bool once_over_t;            /* reads the static input once: runs on the B samples, its output repeated over T */
    int32_t absorbs;             /* the absorbed layer whose work this one runs, -1 if none */
    bool bias_cancelled;         /* its only reader is a batch norm, whose batch statistics cancel its bias: its
                                  * training forward adds none, the BN's running mean takes it instead */
    int32_t lif_index;           /* a neuron layer's ordinal among the neuron layers (firing rates), else -1 */
    /* parameters (float offsets into params/grads/optimizer), -1 if absent */
    int64_t w_off, w_numel, b_off, b_numel;
    int64_t buf_off, buf_numel; /* the kind's buffers (BN's running statistics): buf_numel floats each, in order */
    /* planned storage any kind may have */
    sf_slot sws_f, sws_b;     /* the workspace of the layer's op in the forward and in the backward */
    sf_slot in_float;         /* backward: where the input is rebuilt (act type) when kept as bytes, bits, recompute */
    sf_slot in2_float;        /* the same for the second input */
    sf_slot rerun_in;         /* backward, input kept as SF_KEEP_RERUN: the rerun layer's own input, rebuilt */
    sf_slot rerun_scratch;    /* the rerun layer's forward workspace where it reruns */
    bool rebuild_in_grad;     /* the input is rebuilt into its gradient's buffer instead (SF_KIND_DX_AFTER_X) */
    sf_slot dx_tmp;           /* backward: gradient for an input whose grad buffer another layer already wrote */
    sf_slot dx_tmp2;          /* the same for the second input */
    sf_layer_timing timing;
    /* event-driven execution (sparse.c), where the kind has it (sf_layer_ops.event_driven) */
    sf_sparse_mode sparse;      /* resolved; OFF where the layer cannot run event-driven */
    float xfwd, xbwd;           /* AUTO: crossover densities of the forward and the backward */
    float density, grad_density; /* of the last forward / backward; -1 before one was measured */
    bool fwd_sparse;            /* the path of the last forward */
    int32_t bwd_flags;          /* the path of the last backward, as the kind tells it (0: dense) */
    /* The kind's own data: the member of its kind (its file in core/layers/ says more). */
    union {
        sf_conv_shape conv; /* conv2d */
        struct {            /* avgpool2d, maxpool2d */
            sf_pool_shape pool;
            sf_slot argmax; /* maxpool: where the maximum of each window lies (saved) */
        };
        struct {               /* batchnorm */
            sf_slot mean, var; /* batch statistics (saved) */
            sf_slot bn_gather; /* over several processes: every part's mean and var, [bn_parts][2][C] */
            sf_slot bn_sums;   /* fused into a LIF over several processes: Σdy·x̂ then Σdy, [2][C] */
        };
        struct {            /* lif, rlif */
            sf_slot h;      /* membrane potential, where the backward or keep_all needs it (saved) */
            sf_slot v_ckpt; /* the state every 32 steps for a backend's recompute (saved) */
            /* time pipeline (net_hooks.h), each [B·neurons] where this segment has such a neighbour: the state
             * received from / sent to the neighbouring segments (saved: the backward's recompute reads v_in again) */
            sf_slot v_in, v_out, dv_in, dv_out;
        };
        uint64_t dropout_counter; /* dropout: RNG counter of the last training forward */
        struct {                  /* layernorm */
            sf_slot ln_mean, ln_rstd; /* each token's statistics (saved), [rows] float */
        };
        struct {                  /* sdsa */
            sf_slot kv, mask_h, mask; /* Σ_N k·v (act), its neuron's h (float), the mask (act): [T·B, D] (saved) */
            sf_slot dmask, dkv;       /* their gradients in the backward (act) */
        };
    };
} sf_net_layer;

struct sf_net {
    sf_net_params p;
    sf_backend *be;
    sf_net_layer *layers;
    int32_t n_layers, cap_layers;
    sf_net_tensor *tensors; /* n_layers + 1 after compile */

    /* parameters */
    int64_t n_params, n_buffers;
    float *params, *grads, *opt_a, *opt_b, *buffers; /* backend memory */
    void *params_act; /* the parameters in a 16-bit act type, which linear and conv layers read (NULL under fp32):
                       * rewritten from params after every change of them */
    /* the optimizer state covers parameters [opt_lo, opt_lo + opt_n): part opt_part of opt_parts (net_hooks.h) */
    int64_t opt_lo, opt_n;
    int32_t opt_part, opt_parts;
    bool params_ready;
    sf_optim_params opt;
    bool opt_set;
    int64_t opt_steps;
    uint64_t rng_counter;

    /* compiled shape and plan: T is this process's steps (T_all / hooks.nseg) */
    int64_t T, B, T_all;
    sf_net_hooks hooks; /* nseg = bn_parts = 1 and no functions when the step is this process's alone */
    bool compiled;
    sf_memory_plan plan;
    void *saved_mem, *work_mem;
    /* head: readout, loss and bookkeeping, allocated with the workspace but never reused; the [T_all, B, K] ones in
     * the act type */
    float *readout;      /* [T_all, B, K] leaky readout (NULL for the mean readout: the output itself) */
    float *dreadout;     /* [T_all, B, K] */
    float *out_all;      /* time pipeline: [T_all, B, K] the last layer's output of every segment */
    float *dout_all;     /* time pipeline: [T_all, B, K] its gradient */
    float *logits;       /* [B, K] */
    float *stats;        /* [SF_STATS], indexed by sf_stat */
    float *spike_counts; /* one per neuron (LIF, RLIF) layer */
    float *tcounts;      /* [2, L+1]: ones in each compact tensor not made by a neuron layer, nonzero gradients */
    float *host_tcounts; /* the last step's tcounts and spike counts on the host ([2, L+1] then [n_lif]) */
    bool host_tcounts_valid;
    bool tcounts_in_flight; /* the last step's counts are on their way to host_tcounts (sf_net_sparse_collect) */
    bool tcounts_backward;  /* that step ran its backward: its gradient densities count too */
    int32_t *labels;     /* [B] */
    float *input_f32;    /* [T, B, C, H, W]: the upload's float input before it becomes the act type (16-bit only) */
    int32_t n_lif;
    bool have_forward, have_loss, have_backward, last_training;
    bool have_input; /* an input is on the device since compile: a step with x = NULL reuses it */
    float *host_counts;
    size_t peak_bytes;
    bool profiling;
    bool keep_all; /* sf_net_set_keep_activations: every tensor and LIF membrane potential stays readable */
    bool input_grad; /* sf_net_set_input_grad: the backward also writes the gradient of tensor 0 */
    bool static_input; /* sf_net_set_static_input: the input's T steps are equal; a step uploads step 0 only */
    bool input_once;   /* static, and its only reader runs once over T (once_over_t): its steps past 0 stay unset */
    char *summary;
    sf_net_recordings recorded[SF_NET_BODIES]; /* by sf_net_body (net_step.c) */
    /* fp16's dynamic loss scale (GradScaler's rule; net_step.c) */
    float loss_scale;
    int64_t loss_scale_steps; /* good steps since the scale last changed */
};

/* Address of a sf_slot in its arena (NULL for none). Inline: every file of the engine asks. */
static inline void *sf_net_slot_ptr(const sf_net *net, sf_slot s)
{
    switch (s.where) {
    case SF_ARENA_SAVED: return (char *)net->saved_mem + s.offset;
    case SF_ARENA_WORK: return (char *)net->work_mem + s.offset;
    case SF_ARENA_NONE: break;
    }
    return NULL;
}
/* The tensor whose storage tensor t shares (flatten aliases), t itself if none. */
static inline int32_t sf_net_root(const sf_net *net, int32_t t) { return net->tensors[t].alias_of; }
/* Storage of a tensor's forward values (follows flatten aliases), in the backend's act type. */
static inline float *sf_net_act(sf_net *net, int32_t id)
{
    return sf_net_slot_ptr(net, net->tensors[sf_net_root(net, id)].act);
}
/* Storage of a tensor's gradient (follows aliases), in the act type; NULL where none is planned. */
static inline float *sf_net_grad(sf_net *net, int32_t id)
{
    return sf_net_slot_ptr(net, net->tensors[sf_net_root(net, id)].grad);
}
/* Rows of every [T, B, ...] tensor of this process: T·B. */
static inline int64_t sf_net_rows(const sf_net *net) { return net->T * net->B; }
/* Is tensor id a tensor of tokens (sf_net_layer.tokens)? */
static inline bool sf_net_is_tokens(const sf_net *net, int32_t id) { return id > 0 && net->layers[id - 1].tokens; }
/* Bytes of tensor t over all rows at `elem` bytes per element. */
static inline size_t sf_net_tensor_bytes(const sf_net *net, int32_t t, size_t elem)
{
    return (size_t)(sf_net_rows(net) * net->tensors[t].per_sample) * elem;
}
/* The shape (c, h, w) of tensor id as the layers so far define it. */
static inline void sf_net_shape_of(const sf_net *net, int32_t id, int32_t chw[3])
{
    if (id == 0) {
        chw[0] = net->p.in_channels, chw[1] = net->p.in_height, chw[2] = net->p.in_width;
        return;
    }
    const sf_net_layer *l = &net->layers[id - 1];
    chw[0] = l->out_c, chw[1] = l->out_h, chw[2] = l->out_w;
}

/* The device-side step statistics: what the softmax writes, the finite flags and fp16's loss scale. */
typedef enum sf_stat {
    SF_STAT_LOSS = 0,
    SF_STAT_CORRECT,
    SF_STAT_LOSS_BAD,   /* 1 when the loss is NaN/Inf */
    SF_STAT_GRAD_BAD,   /* 1 when a parameter gradient is */
    SF_STAT_INPUT_BAD,  /* 1 when the input of a net with input_spikes holds a value other than 0 and 1 */
    SF_STAT_SCALE,      /* the loss scale the loss gradient is multiplied by (fp16) */
    SF_STAT_UNSCALE,    /* its reciprocal, applied to the parameter gradients before the update */
    SF_STATS
} sf_stat;

/* Bytes of one activation element (the backend's act type). */
static inline size_t sf_net_act_size(const sf_net *net) { return sf_scalar_size(net->be->act); }
/* The weights at parameter offset `off` as linear, conv and event-driven layers read them: in the act type
 * (params_act where there is one), NULL for off < 0. Inline: the layers' forward, backward and sparse.c ask. */
static inline float *sf_net_weight(sf_net *net, int64_t off)
{
    if (off < 0) return NULL;
    if (!net->params_act) return net->params + off;
    return (float *)((char *)net->params_act + (size_t)off * sf_net_act_size(net));
}
/* The fp32 parameters and their gradients at offset off (biases, BN and neuron parameters), NULL for off < 0. */
static inline float *sf_net_param(sf_net *net, int64_t off) { return off >= 0 ? net->params + off : NULL; }
static inline float *sf_net_param_grad(sf_net *net, int64_t off) { return off >= 0 ? net->grads + off : NULL; }
/* The bias that tensor t's producer left out of its training forward (bias_cancelled), or NULL. */
static inline const float *sf_net_cancelled_bias(const sf_net *net, int32_t t)
{
    const int32_t p = net->tensors[t].producer;
    return p >= 0 && net->layers[p].bias_cancelled ? net->params + net->layers[p].b_off : NULL;
}
/* Whether the net scales its loss: fp16 activations do. */
static inline bool sf_net_scales_loss(const sf_net *net) { return net->be->act == SF_SCALAR_F16; }

/* net_step.c: the loss scale a net starts from, writing the scale to the backend (once compiled), and rewriting
 * params_act[off, off + n) from the fp32 parameters (nothing when act is fp32) after they change. */
float sf_net_initial_loss_scale(const sf_net *net);
sf_status sf_net_put_loss_scale(sf_net *net);
sf_status sf_net_refresh_params_act(sf_net *net, int64_t off, int64_t n);
/* Classes of the loss: the per-sample size of the last tensor. */
static inline int32_t sf_net_classes(const sf_net *net)
{
    const sf_net_layer *l = &net->layers[net->n_layers - 1];
    return l->out_c * l->out_h * l->out_w;
}

/* net_run.c: readout and loss; `out` (optional) gets the loss read back to the host. */
sf_status sf_net_run_loss(sf_net *net, const int32_t *labels, sf_step_result *out);
/* The parts of a step that read host memory (input, labels) and those that run on the backend only (what a
 * graph can record): sf_net_forward = upload_input + run_forward, sf_net_run_loss = put_labels + loss_ops. */
sf_status sf_net_upload_input(sf_net *net, const float *x);
sf_status sf_net_run_forward(sf_net *net, bool training);
sf_status sf_net_put_labels(sf_net *net, const int32_t *labels);
sf_status sf_net_loss_ops(sf_net *net, bool labelled);

/* net_step.c: forgets every recording (a compile moves the memory their ops point into). */
void sf_net_drop_graph(sf_net *net);
/* net_step.c: on a device backend, the event-driven layers' paths for the next step from the last step's densities. */
sf_status sf_net_choose_paths(sf_net *net);
/* net_step.c: runs a body (after sf_net_choose_paths) by replaying its recording for these paths where recording is
 * allowed, recording one where none is held; plainly otherwise. */
sf_status sf_net_run_body(sf_net *net, sf_net_body body);
/* Was the last training step a replay of its recording (the benchmarks report it)? */
static inline bool sf_net_step_replayed(const sf_net *net) { return net->recorded[SF_BODY_TRAIN_STEP].current != NULL; }
/* net_backward.c: the layers' backward in reverse order from the gradient of the last layer's output (already in its
 * buffer), handing gradients over as they become final. */
sf_status sf_net_backward_layers(sf_net *net);

/* net_pipeline.c: a step over several processes (net_hooks.h). Each is a no-op for a process alone. */
sf_status sf_net_pipeline_check(const sf_net *net, int64_t T); /* at compile, T of the whole sequence */
bool sf_net_pipelined(const sf_net *net);                      /* time segments: nseg > 1 */
/* State of slot s from the previous time segment / to the next one (the forward), and back (the backward), where
 * the plan gave the slot (this segment has that neighbour); NULL: nothing to send or receive. */
sf_status sf_net_recv_from_prev(sf_net *net, sf_slot s);
sf_status sf_net_send_to_next(sf_net *net, sf_slot s);
sf_status sf_net_recv_from_next(sf_net *net, sf_slot s);
sf_status sf_net_send_to_prev(sf_net *net, sf_slot s);
/* The last layer's output over all T (pipelined: gathered by sf_net_gather_output_ops into out_all), and this
 * segment's slice of its gradient out of dout_all. */
const float *sf_net_gather_output(sf_net *net);
sf_status sf_net_gather_output_ops(sf_net *net);
sf_status sf_net_scatter_output_grad(sf_net *net, float *grad);
/* BN batch statistics of x over the BN group (gather: the slot of every part's statistics, planned where there
 * are several parts), and the rows they count. */
sf_status sf_net_bn_stats(sf_net *net, sf_bn_shape sh, const float *x, float *mean, float *var, sf_slot gather);
int64_t sf_net_bn_rows(const sf_net *net);
/* After layer i's backward: hands the gradients that became final to grads_ready (*final_from: the lowest final
 * offset so far, n_params at the start of the backward); after the last layer, grads_done. */
sf_status sf_net_grads_ready(sf_net *net, int32_t i, int64_t *final_from);
sf_status sf_net_grads_done(sf_net *net);

/* plan.c */
sf_status sf_net_plan_memory(sf_net *net);

/* sparse.c: event-driven execution. Which tensors are compact and which layers may run sparse (at plan time). */
void sf_net_sparse_mark(sf_net *net);
/* Is tensor `id` 0/1 spikes, as far as the layers added so far tell? */
bool sf_net_tensor_is_spikes(const sf_net *net, int32_t id);
/* Whether tensor id holds only 0 and 1 for certain (spikes, or the input with input_spikes once it is checked): its
 * linear layers may call the backend's binary_linear ops. */
bool sf_net_tensor_is_binary(const sf_net *net, int32_t id);
/* Crossovers of the AUTO layers: measured on the device once per shape (cached in the process), or the net's
 * fixed sparse_crossover. Called by sf_net_compile once the memory is planned. */
sf_status sf_net_sparse_tune(sf_net *net);
/* sparse_tune.c: the measured crossovers of a linear op over T·B rows of `in` spikes to `out` (dx: with its input's
 * gradient), and of a recurrent layer of n neurons. */
sf_status sf_net_tune_linear(sf_net *net, int32_t in, int32_t out, bool dx, float *xfwd, float *xbwd);
sf_status sf_net_tune_rlif(sf_net *net, const sf_lif_params *p, int32_t n, float *xfwd, float *xbwd);
/* The compact form of tensor id as this step writes it: the bits, and the lists and counts where a reader runs
 * event-driven this step (on a host backend, where readers choose after the tensor is made: wherever planned). */
sf_spikes sf_net_compact_of(sf_net *net, int32_t id);
/* Whether the producer of compact tensor id writes its float values this step: a reader needs them always, or on a
 * device backend one runs dense this step (it would expand the bits otherwise). */
bool sf_net_compact_values(sf_net *net, int32_t id);
/* Where the number of ones of compact tensor id accumulates during a forward; of nonzero gradient entries of id. */
float *sf_net_ones_count(sf_net *net, int32_t id);
float *sf_net_grad_count(sf_net *net, int32_t id);
/* The density of ones of compact tensor id, of nonzero gradient entries of id: counted now on a host backend, else
 * by the last step (-1: none measured yet). */
float sf_net_ones_density(sf_net *net, int32_t id);
float sf_net_grad_density(sf_net *net, int32_t id);
/* Whether mode m runs event-driven at a density against a crossover: on always, auto below it once measured. */
bool sf_net_sparse_below(sf_sparse_mode m, float density, float crossover);
/* Chooses layer l's paths for this step from the densities known now (its kind says how). */
sf_status sf_net_sparse_decide(sf_net *net, sf_net_layer *l);
/* After a step: the densities of that step, for the next step's choices and the queries. On a device backend its
 * counts only start on their way to the host (the host need not wait for the step); sf_net_sparse_collect takes
 * them in, as the next step's choices and the queries do. */
sf_status sf_net_sparse_after_step(sf_net *net);
sf_status sf_net_sparse_collect(sf_net *net);
/* Waits for counts on their way and drops them, and the last ones taken in (a new plan measures afresh). */
sf_status sf_net_sparse_forget(sf_net *net);
/* The paths of all layers as one value: a recorded step graph is valid only while it stays the same. */
uint64_t sf_net_sparse_signature(const sf_net *net);

#endif
