/* backend.h — the op table a compute backend (CPU, CUDA) implements; the network engine calls only these.
 *
 * Every pointer argument is memory of that backend (host for the CPU, device for CUDA), contiguous, and its shape is
 * written beside it. "rows" folds time and batch: T·B. Ops are asynchronous on a GPU; results become visible to the
 * host only through copy_to_host. Ops that produce parameter gradients overwrite them (the engine never accumulates
 * across ops).
 *
 * Element types. Activations — every [T, B, ...] tensor: layer inputs and outputs, spikes, their gradients, the
 * readout (x, y, s, o, r and their d- names) — and the weights that linear and conv layers read (w) and the
 * recurrent layer's v are stored in the backend's `act` type: float on the CPU, bf16 or fp16 on a GPU under those
 * precisions. They keep the `float *` type in the signatures below (the engine never dereferences them); a backend
 * whose act type is 16-bit reads them as such. Everything else is float always: biases, BN parameters and
 * statistics, parameter gradients (dw, db, dgamma, dbeta, dv), optimizer state, h, the neuron state carried across
 * calls (sf_lif_state), spike counts, logits and loss statistics. The compact spike form (core/spikes.h: bits, lists,
 * counts) is the same in every act type. Kernels compute in float. */
#ifndef SF_CORE_BACKEND_H
#define SF_CORE_BACKEND_H

#include "core/spikes.h"
#include "spikefuse.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sf_conv_shape {
    int64_t n;              /* images: T·B */
    int32_t cin, h, w;      /* input */
    int32_t cout, k, stride, pad;
    int32_t oh, ow;         /* output, (h + 2·pad - k) / stride + 1 */
    bool x_nhwc, y_nhwc;    /* x (and dx), y (and dy) are NHWC; only a backend with conv_nhwc takes them */
    bool x_binary;          /* x holds only 0 and 1 (spikes): products with it may run on exact parts of the rest */
} sf_conv_shape;

/* Whether two convolutions have the same shape (a backend's choices are per shape). */
static inline bool sf_conv_shape_equal(const sf_conv_shape *a, const sf_conv_shape *b)
{
    return a->n == b->n && a->cin == b->cin && a->h == b->h && a->w == b->w && a->cout == b->cout && a->k == b->k &&
           a->stride == b->stride && a->pad == b->pad && a->oh == b->oh && a->ow == b->ow && a->x_nhwc == b->x_nhwc &&
           a->y_nhwc == b->y_nhwc && a->x_binary == b->x_binary;
}

/* The passes of a convolution a workspace serves (conv_workspace). */
typedef enum sf_conv_pass { SF_CONV_PASS_FORWARD = 1, SF_CONV_PASS_BACKWARD = 2, SF_CONV_PASS_BOTH = 3 } sf_conv_pass;

/* A pass's choice of least workspace (conv_lean): its bytes, and the time per call of the current choice and what
 * the leaner one adds to it. */
typedef struct sf_conv_lean {
    size_t ws;
    float ms, extra_ms;
} sf_conv_lean;

typedef struct sf_pool_shape {
    int64_t n;         /* T·B·C planes */
    int32_t h, w, k, stride, oh, ow;
    int32_t pad;       /* implicit border on each side, at most k/2 (PyTorch's rule): -inf for max, 0 for avg, which
                        * divides by k·k (count_include_pad); oh = (h + 2·pad - k) / stride + 1 */
} sf_pool_shape;

/* BN over (T, B, H, W) per channel: x is [rows, C, hw]. */
typedef struct sf_bn_shape {
    int64_t rows;  /* T·B */
    int32_t c;
    int64_t hw;
} sf_bn_shape;

/* Where a neuron layer writes its forward outputs; each may be NULL. */
typedef struct sf_lif_out {
    float *s;        /* [T, N] spikes in the act type (the next layer's input) */
    uint8_t *s_u8;   /* [T, N] spikes as bytes (kept for a weight gradient) */
    float *h;        /* [T, N] membrane potential before reset (SF_MEMORY_FULL keeps it) */
    float *spike_count; /* one float: += number of spikes (firing rates) */
    sf_spikes c;     /* compact spikes (bits; idx and cnt where given) of rows of `row` neurons, N = rows·row:
                      * written by the LIF kernel itself (event-driven consumers, 1-bit keep); bits NULL: none */
    int64_t row;
} sf_lif_out;

/* Storage types of activations (see above). */
typedef enum sf_act_type { SF_ACT_F32 = 0, SF_ACT_BF16, SF_ACT_F16 } sf_act_type;

static inline size_t sf_act_type_size(sf_act_type t) { return t == SF_ACT_F32 ? 4 : 2; }

/* rlif_backward's bwd_sparse flags */
enum { SF_RLIF_SPARSE_DV = 1, SF_RLIF_SPARSE_DY = 2 };

/* A BN→LIF backward whose batch statistics span several processes (the time pipeline's segments, synchronised BN):
 * dx needs Σdy and Σdy·x̂ over the whole batch, so the backward runs twice with a sum over the processes between.
 *   phase 1: the reverse-time pass of this part; writes its own Σdy into dbeta and Σdy·x̂ into dgamma (and
 *            st->dv_out); dx is scratch that phase 2 must get back unchanged (a backend may keep dy there)
 *   phase 2: dx from the sums over all parts (sum_dy, sum_dyx: [C]) and the rows (T·B) of all parts; dgamma,
 *            dbeta and st->dv_out are not written (may be NULL) */
typedef struct sf_bn_split {
    int32_t phase;
    const float *sum_dy, *sum_dyx;
    int64_t rows;
} sf_bn_split;

typedef struct sf_backend sf_backend;
struct sf_backend {
    const char *name;
    void *ctx;    /* backend-private state (streams, library handles) */
    sf_act_type act; /* how activations and the weights GEMMs read are stored; the CPU's is always SF_ACT_F32 */
    bool neuron_ckpt; /* the neuron backward starts its recompute at the forward's checkpoints (sf_lif_state.v_ckpt) */
    bool conv_nhwc;   /* its convolutions run faster on NHWC tensors: the engine keeps the tensors between them so */

    /* memory */
    sf_status (*alloc)(sf_backend *be, size_t bytes, void **out);
    void (*release)(sf_backend *be, void *p);
    /* Bytes the backend holds beyond what alloc gave out: library workspaces and its own scratch (NULL: none). */
    size_t (*held_bytes)(sf_backend *be);
    sf_status (*copy_from_host)(sf_backend *be, void *dst, const void *src, size_t bytes);
    sf_status (*copy_to_host)(sf_backend *be, void *dst, const void *src, size_t bytes);
    sf_status (*copy)(sf_backend *be, void *dst, const void *src, size_t bytes);
    sf_status (*zero)(sf_backend *be, void *dst, size_t bytes);
    sf_status (*sync)(sf_backend *be);
    void (*destroy)(sf_backend *be);

    /* LIF over [T, N]. The backward takes h (full mode) or, when h is NULL, recomputes it from x (and st->v_in).
     * st (NULL: none) carries the neuron state across calls, see sf_lif_state in spikefuse.h. */
    sf_status (*lif_forward)(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                             const sf_lif_out *out, const sf_lif_state *st);
    sf_status (*lif_backward)(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t N, const float *x,
                              const float *h, const float *ds, float *dx, const sf_lif_state *st);

    /* Batch norm. Statistics: mean and biased var per channel over (rows, hw). */
    sf_status (*bn_stats)(sf_backend *be, sf_bn_shape sh, const float *x, float *mean, float *var);
    /* y = (x - mean)·invstd·gamma + beta, invstd = 1/sqrt(var + eps) */
    sf_status (*bn_forward)(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                            float eps, const float *gamma, const float *beta, float *y);
    /* Training-mode BN backward (batch statistics): dx, dgamma, dbeta from x and dy. */
    sf_status (*bn_backward)(sf_backend *be, sf_bn_shape sh, const float *x, const float *mean, const float *var,
                             float eps, const float *gamma, const float *dy, float *dx, float *dgamma,
                             float *dbeta);
    /* running = (1 - m)·running + m·batch, with the unbiased variance for running_var (PyTorch's rule). */
    sf_status (*bn_update_running)(sf_backend *be, sf_bn_shape sh, float momentum, const float *mean,
                                   const float *var, float *running_mean, float *running_var);
    /* Fused BN → LIF (Liang et al., Alg. 1–3; docs/architecture.md, References); x is [T, B, C, hw] with rows = T·B.
     * The LIF recurrence runs over T for each of the B·C·hw neurons. The backward recomputes y = BN(x) and h (or uses h
     * when given), reduces dgamma and dbeta per channel and writes dx (dx must not overlap x). The backward always
     * treats mean/var as the batch statistics of x (dx includes the terms through mean and var). st as for the LIF
     * ops ([B·C·hw] per pointer). split (NULL: none) runs the backward in two phases for statistics that span
     * several processes, see sf_bn_split. scratch: bn_lif_scratch bytes the plan holds for the backward's per-neuron
     * sums, or NULL (the backend's own). */
    sf_status (*bn_lif_forward)(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                                const float *x, const float *mean, const float *var, float eps,
                                const float *gamma, const float *beta, const sf_lif_out *out,
                                const sf_lif_state *st);
    sf_status (*bn_lif_backward)(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh,
                                 const float *x, const float *h, const float *mean, const float *var, float eps,
                                 const float *gamma, const float *beta, const float *ds, float *dx,
                                 float *dgamma, float *dbeta, const sf_lif_state *st, const sf_bn_split *split,
                                 void *scratch);
    /* Bytes of the per-neuron sums bn_lif_backward keeps between its passes for [T·B, C, hw] (0: none). */
    size_t (*bn_lif_scratch)(sf_backend *be, const sf_lif_params *p, int64_t T, sf_bn_shape sh);
    /* Statistics of `parts` equal-sized parts of one batch (time segments or data shards on several processes)
     * merged into those of the whole: part_stats is [parts][2][C] (each part's mean, then its biased var, as
     * bn_stats writes them); mean = Σ mean_p / parts, var = Σ (var_p + (mean_p − mean)²) / parts, in double, parts in
     * order, so every process that merges the same parts gets the same bits. */
    sf_status (*bn_stats_merge)(sf_backend *be, int32_t parts, int32_t C, const float *part_stats, float *mean,
                                float *var);

    /* Linear: y[rows, out] = x[rows, in]·W[out, in]ᵀ + b[out] (b may be NULL). */
    sf_status (*linear_forward)(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                const float *w, const float *b, float *y);
    /* dx (may be NULL) = dy·W; dW = dyᵀ·x; db (may be NULL) = Σ_rows dy. */
    sf_status (*linear_backward)(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                 const float *w, const float *dy, float *dx, float *dw, float *db);
    /* linear_forward and _backward for an x that holds only 0 and 1 (spikes): the same results, which a backend may
     * compute faster with that knowledge (CUDA in fp32: tensor-core products with bf16 or TF32 parts of the other
     * operand, exact where they meet the 0/1 operand). _backward_bits takes x as its spike bits [rows][words]
     * (core/spikes.h) instead; optional: NULL where the backend has no faster way than expanding them. */
    sf_status (*binary_linear_forward)(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                       const float *w, const float *b, float *y);
    sf_status (*binary_linear_backward)(sf_backend *be, int64_t rows, int32_t in, int32_t out, const float *x,
                                        const float *w, const float *dy, float *dx, float *dw, float *db);
    sf_status (*binary_linear_backward_bits)(sf_backend *be, int64_t rows, int32_t in, int32_t out,
                                             const uint32_t *xbits, const float *w, const float *dy, float *dx,
                                             float *dw, float *db);

    /* Conv2d, NCHW with n = T·B images; W is [cout, cin, k, k]. Workspace bytes come from conv_workspace: what
     * conv_forward, conv_backward or either (SF_CONV_PASS_BOTH) needs. */
    size_t (*conv_workspace)(sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass);
    /* Whether `pass` (forward or backward) of the convolution of sh has a measured choice that needs less workspace
     * than the one it runs (*out: that choice), and with apply, takes it: conv_workspace answers for it from then
     * on, for every layer of that shape (NULL: nothing to choose). */
    bool (*conv_lean)(sf_backend *be, const sf_conv_shape *sh, sf_conv_pass pass, bool apply, sf_conv_lean *out);
    sf_status (*conv_forward)(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                              const float *b, float *y, void *ws);
    /* dx may be NULL (first layer); db may be NULL (no bias). dx may be x itself: each image of x is read before
     * that image of dx is written. */
    sf_status (*conv_backward)(sf_backend *be, const sf_conv_shape *sh, const float *x, const float *w,
                               const float *dy, float *dx, float *dw, float *db, void *ws);

    /* Pools over n planes of h×w. maxpool keeps the argmax position inside each window as a byte. */
    sf_status (*avgpool_forward)(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y);
    sf_status (*avgpool_backward)(sf_backend *be, const sf_pool_shape *sh, const float *dy, float *dx);
    sf_status (*maxpool_forward)(sf_backend *be, const sf_pool_shape *sh, const float *x, float *y,
                                 uint8_t *argmax);
    sf_status (*maxpool_backward)(sf_backend *be, const sf_pool_shape *sh, const uint8_t *argmax,
                                  const float *dy, float *dx);

    /* Dropout with one mask over all T steps: mask[i] = hash(seed, counter, i) >= p for i in [0, n) where
     * n = B·features; y[t, i] = x[t, i]·mask[i]/(1 - p). The same (seed, counter) give the same mask on
     * every backend (see sf_dropout_keep in rng.h). The backward applies the same scaling to dy. */
    sf_status (*dropout_forward)(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed, uint64_t counter,
                                 const float *x, float *y);
    sf_status (*dropout_backward)(sf_backend *be, int64_t T, int64_t n, float p, uint64_t seed,
                                  uint64_t counter, const float *dy, float *dx);

    /* Element-wise helpers. */
    sf_status (*add)(sf_backend *be, int64_t n, const float *a, const float *b, float *y);   /* y = a + b */
    sf_status (*axpy)(sf_backend *be, int64_t n, float alpha, const float *x, float *y);     /* y += alpha·x */
    sf_status (*u8_to_act)(sf_backend *be, int64_t n, const uint8_t *x, float *y);
    sf_status (*act_to_u8)(sf_backend *be, int64_t n, const float *x, uint8_t *y);           /* x is 0/1 */

    /* Readout over [T, B, K]: r_t = a·r_{t-1} + c·o_t (a = 0, c = 1 is the identity; the engine uses that
     * for the mean readout and skips the op). The backward runs in reverse time. */
    sf_status (*leaky_forward)(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *o, float *r);
    sf_status (*leaky_backward)(sf_backend *be, int64_t T, int64_t n, float a, float c, const float *dr,
                                float *doo);
    /* Softmax cross-entropy on logits built from r[T, B, K]:
     *   per_step = 0: z = mean_t r_t, loss = mean_b CE(z_b); per_step = 1: loss = mean_{t,b} CE(r_{t,b});
     *   CE against the label smoothed by eps: 1 − eps on it, eps/K on every class (eps = 0: the one-hot label).
     * Writes dr[T, B, K] (the gradient of the loss), logits_mean[B, K] = mean_t r_t, and stats[0] = loss,
     * stats[1] = number of samples whose argmax(logits_mean) equals the label. labels are B int32 on the backend.
     * dr may be NULL (evaluation). */
    sf_status (*softmax_xent)(sf_backend *be, int64_t T, int64_t B, int32_t K, int32_t per_step, float eps,
                              const float *r, const int32_t *labels, float *dr, float *logits_mean, float *stats);
    /* Mean squared error between the T-mean of r (the firing rate) and the one-hot label over the B·K values:
     * loss = Σ (mean_t r_t − onehot)² / (B·K), dr_t = 2·(mean_t r_t − onehot) / (B·K·T). The other arguments as
     * softmax_xent's. */
    sf_status (*mse_rate)(sf_backend *be, int64_t T, int64_t B, int32_t K, const float *r, const int32_t *labels,
                          float *dr, float *logits_mean, float *stats);

    /* One update over all n parameters at once (they live in one allocation).
     * SGD (PyTorch semantics): g += wd·p; buf = momentum·buf + g (buf = g at step 1); g = nesterov ? g + momentum·buf
     * : buf; p -= lr·g. Adam/AdamW (decoupled = 1: p -= lr·wd·p first, else g += wd·p), bias-corrected with
     * `step` counted from 1. */
    sf_status (*sgd_step)(sf_backend *be, int64_t n, float lr, float momentum, int32_t nesterov, float wd,
                          int64_t step, float *p, const float *g, float *buf);
    sf_status (*adam_step)(sf_backend *be, int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                           int32_t decoupled, int64_t step, float *p, const float *g, float *m, float *v);
    /* flag[0] = 1 if any of x[0..n) is NaN or Inf (flag is one float on the backend, set, never cleared). */
    sf_status (*check_finite)(sf_backend *be, int64_t n, const float *x, float *flag);

    /* Needed only where act is 16-bit (NULL on the CPU): y = x converted between two storage types (to nearest,
     * ties to even), for the input upload, the weights' 16-bit copy and reading activations back; and x *= factor[0]
     * over n elements of type t, the factor read from backend memory when the op runs (a recorded graph sees its
     * later values): fp16's loss scaling. */
    sf_status (*convert)(sf_backend *be, int64_t n, sf_act_type from, const void *x, sf_act_type to, void *y);
    sf_status (*scale)(sf_backend *be, int64_t n, sf_act_type t, const float *factor, void *x);

    /* ---- Event-driven execution (core/spikes.h's compact form; Finkbeiner & Neftci). Sums over active inputs run
     * in ascending input order, so every op is deterministic; results equal the dense ops' within float rounding. */
    int32_t host_memory; /* 1: backend memory is host memory (a spike count can be read as soon as it is written) */
    /* x [rows, n] of 0/1 values → compact form (bits; idx and cnt where out gives them); *count += number of ones;
     * flag[0] = 1 where an element is neither 0 nor 1 (flag may be NULL; never cleared). */
    sf_status (*spikes_compact)(sf_backend *be, int64_t rows, int64_t n, const float *x, const sf_spikes *out,
                                float *count, float *flag);
    /* bits [rows, words] → y [rows, n] of 0/1 values. */
    sf_status (*spikes_expand)(sf_backend *be, int64_t rows, int64_t n, const uint32_t *bits, float *y);
    /* Scratch bytes that spike_linear_forward and _backward need for this shape. */
    size_t (*spike_linear_workspace)(sf_backend *be, int64_t rows, int32_t in, int32_t out);
    /* y[r, :] = b + Σ_{i active in row r of x} W[:, i] (x: idx and cnt; b may be NULL). */
    sf_status (*spike_linear_forward)(sf_backend *be, int64_t rows, int32_t in, int32_t out, const sf_spikes *x,
                                      const float *w, const float *b, float *y, void *ws);
    /* The linear backward with a spike input x (its bits): dW[j, i] = Σ over rows where x_i is active of dy[r, j];
     * dx (may be NULL) = dy·W, summed over the nonzero entries of dy when dy_mask (their bits and cnt, from
     * lif_backward_masked) is given, else dense; db (may be NULL) as linear_backward. */
    sf_status (*spike_linear_backward)(sf_backend *be, int64_t rows, int32_t in, int32_t out, const uint32_t *x,
                                       const float *w, const float *dy, const sf_spikes *dy_mask, float *dx,
                                       float *dw, float *db, void *ws);
    /* lif_backward over T steps of B rows of n neurons (N = B·n) that also writes where dx is nonzero (mask bits and
     * cnt) and adds their number to *count: with grad_threshold, dL/dh is zero wherever the surrogate and the
     * membrane path are both zero, and the linear layer before uses that. */
    sf_status (*lif_backward_masked)(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                                     const float *x, const float *h, const float *ds, float *dx,
                                     const sf_spikes *mask, float *count, const sf_lif_state *st);
    /* Recurrent LIF (SF_LAYER_RLIF) over x [T, B, n] with V [n, n]: y_t = x_t + V·s_{t-1}, then the LIF step on y_t.
     * `sparse`: V·s_{t-1} sums the columns of V of the neurons that spiked (out->c must then hold idx and cnt: the
     * lists the next step reads), else a dense product per step. out: as lif_forward (s, h, c, spike_count). */
    size_t (*rlif_workspace)(sf_backend *be, int64_t T, int64_t B, int64_t n);
    sf_status (*rlif_forward)(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                              const float *x, const float *v, int32_t sparse, const sf_lif_out *out, void *ws);
    /* BPTT through the recurrence: ds is dL/ds from the layers above; writes dx = dL/dy (the input's gradient) and
     * dv = dL/dV. h: the forward's membrane potentials, or NULL to rerun the forward from x (with fwd_sparse as the
     * forward ran, so h is bitwise the same). bwd_sparse: SF_RLIF_SPARSE_DV takes dV from the spike bits,
     * SF_RLIF_SPARSE_DY sums Vᵀ·dy_{t+1} over the nonzero entries of dy_{t+1} only. mask (may be NULL): where dx is
     * nonzero, as lif_backward_masked writes it; *grad_count += their number (may be NULL). s_bits (may be NULL):
     * the forward's spike bits [T·B][words] where they were kept, else they are made again from h. */
    sf_status (*rlif_backward)(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int64_t n,
                               const float *x, const float *h, const uint32_t *s_bits, const float *v, const float *ds,
                               int32_t fwd_sparse, int32_t bwd_sparse, float *dx, float *dv, const sf_spikes *mask,
                               float *grad_count, void *ws);

    /* Optional (NULL where a backend has none, e.g. the CPU): record the ops issued between graph_begin and
     * graph_end instead of running them, then replay them all with one graph_launch. Recorded ops keep their
     * arguments, so they must be repeatable as they are. graph_end always ends the recording; on failure *graph is
     * NULL and the backend runs ops normally again. graph_launch answers SF_ERR_STATE when memory of the backend's
     * own that the graph uses has moved since (the caller records again). graph_free accepts NULL. */
    sf_status (*graph_begin)(sf_backend *be);
    sf_status (*graph_end)(sf_backend *be, void **graph);
    sf_status (*graph_launch)(sf_backend *be, void *graph);
    void (*graph_free)(sf_backend *be, void *graph);
};

/* Frees a backend (NULL is a no-op); backends are created by src/backends/backends.h. */
static inline void sf_backend_free(sf_backend *be)
{
    if (be) be->destroy(be);
}

/* Checks a network's parameters (shape, modes, options) before anything is created for them. */
sf_status sf_net_params_check(const sf_net_params *p);
/* The engine's half of sf_net_create: a network that runs on `be`, which it then owns (sf_net_free destroys it),
 * also when this call fails. src/backends/ creates the backend the parameters ask for and calls this. */
sf_status sf_net_create_on(const sf_net_params *p, sf_backend *be, sf_net **out);

#endif
