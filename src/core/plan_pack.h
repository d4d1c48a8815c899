/* plan_pack.h — the memory plan's requests (plan_pack.c): saved buffers stack up, workspace buffers are requests on
 * the plan's timeline that get bytes shared with every request whose lifetime they do not overlap.
 *
 * The timeline: 0 uploads the input, 1..L run the layers' forwards, L+1 the loss, then the backwards in reverse, two
 * ticks each: layer i's rebuild of what it reads (the lean mode's reruns) at L+2+2(L-1-i), its backward one later. */
#ifndef SF_CORE_PLAN_PACK_H
#define SF_CORE_PLAN_PACK_H

#include "core/net_internal.h"

typedef struct sf_plan_request {
    size_t bytes;
    int32_t first, last; /* ticks */
    sf_slot *dst;
} sf_plan_request;

typedef struct sf_planner {
    sf_plan_request *req;
    int32_t n, cap;
    size_t saved; /* bytes of the saved arena so far */
    int32_t L;    /* layers */
    bool failed;  /* out of memory for the requests */
} sf_planner;

static inline int32_t sf_plan_t_fwd(const sf_planner *pl, int32_t layer) { return 1 + layer; }
static inline int32_t sf_plan_t_loss(const sf_planner *pl) { return pl->L + 1; }
static inline int32_t sf_plan_t_pre(const sf_planner *pl, int32_t layer) { return pl->L + 2 + 2 * (pl->L - 1 - layer); }
static inline int32_t sf_plan_t_bwd(const sf_planner *pl, int32_t layer) { return sf_plan_t_pre(pl, layer) + 1; }
static inline int32_t sf_plan_t_end(const sf_planner *pl) { return 3 * pl->L + 2; }

/* A workspace buffer of `bytes` alive from tick first to last (nothing for 0 bytes); *dst is written by the packing. */
void sf_plan_work(sf_planner *pl, sf_slot *dst, size_t bytes, int32_t first, int32_t last);
/* A buffer in the saved arena, placed now (nothing for 0 bytes). */
void sf_plan_saved(sf_planner *pl, sf_slot *dst, size_t bytes);
/* Packs the workspace requests (after the layers' leaner workspace choices where their backend offers them) and
 * writes every request's slot; returns the workspace's bytes. */
size_t sf_plan_pack(sf_net *net, sf_planner *pl);

/* The layer whose forward layer l's backward reruns to rebuild its input (lean mode), or NULL. */
static inline const sf_net_layer *sf_net_rerun_of(const sf_net *net, const sf_net_layer *l)
{
    const sf_net_tensor *x = &net->tensors[sf_net_root(net, l->in)];
    return x->keep == SF_KEEP_RERUN ? &net->layers[x->producer] : NULL;
}

#endif
