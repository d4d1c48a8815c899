/* net_hooks.h — where a training step spans several processes: the engine calls out to hooks that src/distributed
 * registers (the engine knows no MPI or NCCL); internal to the library. They carry the time pipeline's v and ∂L/∂v
 * between segments, the gathered outputs, BN statistics and sums over a BN group, gradients as they become final and
 * the sharded optimizer's all-gather (docs/architecture.md, Several processes). Every hook returns sf_status (failure
 * stops the step); buffers are backend memory and a hook only enqueues work on the backend's stream. */
#ifndef SF_CORE_NET_HOOKS_H
#define SF_CORE_NET_HOOKS_H

#include "core/backend.h"

typedef struct sf_net_hooks {
    void *ctx;
    int32_t seg, nseg;         /* this process's time segment and the segments of the time group (1: all of T) */
    int32_t bn_part, bn_parts; /* this process's place in the BN group and its size (1: local statistics) */
    /* point to point within the time group, to / from segment `peer` */
    sf_status (*send)(void *ctx, int32_t peer, const float *buf, int64_t n);
    sf_status (*recv)(void *ctx, int32_t peer, float *buf, int64_t n);
    /* in place: buf holds one block per process of the group, in group order, this one's filled; the time group's
     * blocks are `bytes` bytes (the last layer's output, in the backend's activation type), the BN group's n floats */
    sf_status (*time_allgather)(void *ctx, void *buf, size_t bytes);
    sf_status (*bn_allgather)(void *ctx, float *buf, int64_t n);
    /* in place: buf becomes the sum over the BN group */
    sf_status (*bn_allreduce)(void *ctx, float *buf, int64_t n);
    /* grads[first, n) are final for this step's backward; called with `first` decreasing */
    sf_status (*grads_ready)(void *ctx, float *grads, int64_t first, int64_t n);
    /* every gradient is produced: once the backend's stream reaches this point the reduced gradients are in place
     * (before the finite check and the update) */
    sf_status (*grads_done)(void *ctx, float *grads, int64_t n);
    /* in place, after a sharded update: buf holds n floats in opt_parts parts (sf_net_part), this process's filled;
     * afterwards every part is */
    sf_status (*params_allgather)(void *ctx, float *buf, int64_t n);
    int32_t opt_part, opt_parts; /* this process's part of the optimizer state (0 parts counts as 1: all of it) */
    /* 1: every hook only enqueues work on the backend's stream, the same from step to step, so the step can be
     * recorded once as a backend graph and replayed */
    int32_t graph_safe;
} sf_net_hooks;

/* Registers the hooks (copied; NULL removes them). Call before sf_net_compile: with nseg > 1 the compiled T must be
 * a multiple of nseg, and batch norms must be fused into the LIF after them when bn_parts > 1. Optimizer state
 * that already exists moves to the hooks' part (SF_ERR_STATE where a trained state would lose what it holds). */
sf_status sf_net_set_hooks(sf_net *net, const sf_net_hooks *h);
/* The backend a network runs on (its stream, for code that orders its own work after the network's). */
sf_backend *sf_net_backend(sf_net *net);
/* The steps of T this process runs (T / nseg after sf_net_compile). */
int64_t sf_net_local_steps(const sf_net *net);

/* Part k of `parts` of n elements: [*lo, *lo + *count), in order, sizes equal up to one. */
static inline void sf_net_part(int64_t n, int32_t k, int32_t parts, int64_t *lo, int64_t *count)
{
    *lo = n * k / parts;
    *count = n * (k + 1) / parts - *lo;
}

/* The optimizer state's buffers (backend memory: momentum, or Adam's m and v) and the part of the parameter buffer
 * they cover, [*lo, *lo + *n); returns how many buffers there are (0: SGD without momentum, or no optimizer). */
int32_t sf_net_optimizer_state(sf_net *net, float *bufs[2], int64_t *lo, int64_t *n);
/* Moves the optimizer state to part `part` of `parts` (sf_net_part): elements held before and after keep their
 * values, newly held ones are zero until the caller fills them (src/distributed gathers a whole state this way). */
sf_status sf_net_optimizer_repartition(sf_net *net, int32_t part, int32_t parts);

#endif
