/* backend.h — what the ops of a compute backend (CPU, CUDA; listed in core/backend_ops.h) share. Pointers are
 * backend memory (host or device), contiguous, shaped as written beside them; rows = T·B; ops are asynchronous on a GPU
 * (results reach the host by copy_to_host); ops writing parameter gradients overwrite them. Activations ([T, B, ...]:
 * x, y, s, o, r, their d- names), w and the recurrent v are of the backend's `act` type behind `float *`; all else
 * (biases, BN, parameter gradients, optimizer, h, sf_lif_state, counts, logits) float; compact spikes alike in all. */
#ifndef SF_CORE_BACKEND_H
#define SF_CORE_BACKEND_H

#include "core/spikes.h"
#include "core/transformer.h"
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
    int32_t c;         /* 0: NCHW, each plane contiguous; else NHWC: n/c images of h×w pixels of c channels, the
                        * output (and argmax) alike */
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

/* Bytes of one element stored in type t (activations: see above). */
static inline size_t sf_scalar_size(sf_scalar t) { return t == SF_SCALAR_F64 ? 8 : t == SF_SCALAR_F32 ? 4 : 2; }

/* rlif_backward's bwd_sparse flags */
enum { SF_RLIF_SPARSE_DV = 1, SF_RLIF_SPARSE_DY = 2 };

/* A BN→LIF backward whose batch statistics span processes (time segments, synchronised BN) runs in two phases, the sum
 * over processes between. Phase 1: this part's reverse pass, writing its Σdy into dbeta, Σdy·x̂ into dgamma (and
 * st->dv_out); dx is scratch phase 2 must get back unchanged. Phase 2: dx from the sums of all parts (sum_dy, sum_dyx
 * [C]) and all parts' rows (T·B); dgamma, dbeta, st->dv_out not written (may be NULL). */
typedef struct sf_bn_split {
    int32_t phase;
    const float *sum_dy, *sum_dyx;
    int64_t rows;
} sf_bn_split;

typedef struct sf_backend sf_backend;
struct sf_backend {
    /* Properties: what the engine reads of a backend besides its ops. */
    const char *name;
    void *ctx;        /* backend-private state (streams, library handles) */
    sf_scalar act;    /* how activations and the weights GEMMs read are stored; the CPU's is always SF_SCALAR_F32 */
    bool neuron_ckpt; /* the neuron backward starts its recompute at the forward's checkpoints (sf_lif_state.v_ckpt) */
    bool conv_nhwc;   /* its convolutions run faster on NHWC tensors: the engine keeps the tensors between them so */
    bool host_memory; /* backend memory is host memory (a spike count can be read as soon as it is written) */

    /* The ops, one field per entry of core/backend_ops.h (which documents each); optional ones may be NULL. */
#define SF_OP(ret, op, params) ret(*op) params;
#include "core/backend_ops.h"
};

/* The ids of the ops, in the list's order (SF_BACKEND_OP_linear_forward, ...), for code that walks every op. */
typedef enum sf_backend_op {
#define SF_OP(ret, op, params) SF_BACKEND_OP_##op,
#include "core/backend_ops.h"
    SF_BACKEND_OP_COUNT
} sf_backend_op;

/* The op's field name ("linear_forward"). */
static inline const char *sf_backend_op_name(sf_backend_op op)
{
    static const char *const names[] = {
#define SF_OP(ret, op, params) #op,
#include "core/backend_ops.h"
    };
    return (unsigned)op < SF_BACKEND_OP_COUNT ? names[op] : "?";
}

/* Whether the list marks the op optional (SF_OPT: a backend may leave it NULL). */
static inline bool sf_backend_op_optional(sf_backend_op op)
{
    static const bool optional[] = {
#define SF_OP(ret, op, params) false,
#define SF_OPT(ret, op, params) true,
#include "core/backend_ops.h"
    };
    return (unsigned)op < SF_BACKEND_OP_COUNT && optional[op];
}

/* Whether `be` implements the op (its field is not NULL). */
static inline bool sf_backend_supports(const sf_backend *be, sf_backend_op op)
{
    switch (op) {
#define SF_OP(ret, op, params)                                                                                         \
    case SF_BACKEND_OP_##op: return be->op != NULL;
#include "core/backend_ops.h"
    default: return false;
    }
}

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
