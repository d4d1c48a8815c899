/* plan_pack.c — the memory plan's requests and their packing: saved buffers stack up in the order they are asked
 * for; workspace requests whose lifetimes overlap get disjoint bytes, the others may share. Where a layer's op has
 * leaner workspace choices (a convolution's, backend.h conv_lean), the packing weighs them first. */
#include "core/layer.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 256

static size_t align_up(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

void sf_plan_work(sf_planner *pl, sf_slot *dst, size_t bytes, int32_t first, int32_t last)
{
    if (bytes == 0) return;
    if (pl->n == pl->cap) {
        int32_t cap = pl->cap ? 2 * pl->cap : 64;
        sf_plan_request *r = realloc(pl->req, (size_t)cap * sizeof *r);
        if (!r) {
            pl->failed = true;
            return;
        }
        pl->req = r;
        pl->cap = cap;
    }
    pl->req[pl->n++] = (sf_plan_request){align_up(bytes), first, last, dst};
}

void sf_plan_saved(sf_planner *pl, sf_slot *dst, size_t bytes)
{
    if (bytes == 0) return;
    *dst = (sf_slot){SF_ARENA_SAVED, pl->saved, bytes};
    pl->saved += align_up(bytes);
}

static int by_size_desc(const void *a, const void *b)
{
    const sf_plan_request *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->first - y->first;
}

/* Greedy packing: largest first, each at the lowest offset clear of every placed buffer it overlaps in time. */
static size_t pack_workspace(sf_plan_request *req, int32_t n)
{
    qsort(req, (size_t)n, sizeof *req, by_size_desc);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        sf_plan_request *r = &req[i];
        size_t off = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int32_t j = 0; j < i; j++) {
                const sf_plan_request *q = &req[j];
                bool overlap_time = r->first <= q->last && q->first <= r->last;
                bool overlap_bytes = off < q->dst->offset + q->bytes && q->dst->offset < off + r->bytes;
                if (overlap_time && overlap_bytes) {
                    off = q->dst->offset + q->bytes;
                    moved = true;
                }
            }
        }
        *r->dst = (sf_slot){SF_ARENA_WORK, off, r->bytes};
        if (off + r->bytes > total) total = off + r->bytes;
    }
    return total;
}

static sf_plan_request *find_request(sf_plan_request *req, int32_t n, const sf_slot *dst)
{
    for (int32_t j = 0; j < n; j++)
        if (req[j].dst == dst) return &req[j];
    return NULL;
}

/* The request of layer l's op workspace in `pass` (NULL: it has none). */
static sf_plan_request *pass_request(sf_plan_request *req, int32_t n, sf_net_layer *l, sf_conv_pass pass)
{
    return find_request(req, n, pass == SF_CONV_PASS_FORWARD ? &l->sws_f : &l->sws_b);
}

/* Does layer l take the workspace choices of layer ref (the same kind, and a shape the backend chooses alike)? */
static bool shares_choice(const sf_net_layer *l, const sf_net_layer *ref)
{
    return l->ops == ref->ops && ref->ops->same_workspace(l, ref);
}

/* Sets the requests of `pass` of every layer that shares ref's choices to *bytes (NULL: leaves them), the lean
 * backward's reruns of such a forward among them; returns how many there are. */
static int32_t set_choice(sf_net *net, sf_plan_request *req, int32_t n, const sf_net_layer *ref, sf_conv_pass pass,
                          const size_t *bytes)
{
    int32_t found = 0;
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        const sf_net_layer *p = pass == SF_CONV_PASS_FORWARD ? sf_net_rerun_of(net, l) : NULL;
        sf_plan_request *mine[2] = {shares_choice(l, ref) ? pass_request(req, n, l, pass) : NULL,
                                    p && shares_choice(p, ref) ? find_request(req, n, &l->rerun_scratch) : NULL};
        for (int k = 0; k < 2; k++) {
            if (mine[k] && bytes) mine[k]->bytes = align_up(*bytes);
            found += mine[k] != NULL;
        }
    }
    return found;
}

/* The packed workspace with the requests of `pass` sharing ref's choices (NULL: none) at `bytes`, on a copy of the
 * requests. */
static size_t packed_with(sf_net *net, const sf_planner *pl, sf_plan_request *copy, const sf_net_layer *ref,
                          sf_conv_pass pass, size_t bytes)
{
    memcpy(copy, pl->req, (size_t)pl->n * sizeof *copy);
    if (ref) set_choice(net, copy, pl->n, ref, pass, &bytes);
    return pack_workspace(copy, pl->n); /* it writes the slots too: the final packing writes them again */
}

static bool has_choice(sf_net *net, const sf_net_layer *l, sf_conv_pass pass, bool take, sf_conv_lean *q)
{
    return l->ops->lean_workspace && l->ops->lean_workspace(net, l, pass, take, q);
}

/* Takes the leaner workspace choices ops offer, one at a time, the one lowering the packed total most, while their
 * added time stays within cuda.conv_lean of those ops' time; a choice applies to all layers sharing it. */
static void lean_workspaces(sf_net *net, sf_planner *pl)
{
    static const sf_conv_pass passes[2] = {SF_CONV_PASS_FORWARD, SF_CONV_PASS_BACKWARD};
    if (!(net->p.cuda.conv_lean > 0.0f) || !pl->n) return;
    bool offered = false;
    double budget = 0.0;
    for (int32_t i = 0; i < net->n_layers; i++)
        for (int k = 0; k < 2 && net->layers[i].ops->lean_workspace; k++) {
            sf_conv_lean q = {0};
            offered |= has_choice(net, &net->layers[i], passes[k], false, &q);
            budget += q.ms;
        }
    sf_plan_request *copy = offered ? malloc((size_t)pl->n * sizeof *copy) : NULL;
    if (!copy) return; /* nothing to choose, or out of memory: the plan keeps the fastest choices */
    budget *= net->p.cuda.conv_lean;
    size_t total = packed_with(net, pl, copy, NULL, SF_CONV_PASS_BOTH, 0);
    for (;;) {
        sf_net_layer *best = NULL;
        sf_conv_pass best_pass = SF_CONV_PASS_FORWARD;
        size_t best_total = total;
        double best_cost = 0.0;
        for (int32_t i = 0; i < net->n_layers; i++)
            for (int k = 0; k < 2 && net->layers[i].ops->lean_workspace; k++) {
                sf_net_layer *l = &net->layers[i];
                sf_conv_lean q;
                if (!pass_request(pl->req, pl->n, l, passes[k]) || !has_choice(net, l, passes[k], false, &q)) continue;
                /* the layers sharing that choice whose pass runs */
                const int32_t uses = set_choice(net, pl->req, pl->n, l, passes[k], NULL);
                const double cost = (q.extra_ms > 0.0f ? q.extra_ms : 0.0) * uses;
                if (cost > budget) continue;
                const size_t t = packed_with(net, pl, copy, l, passes[k], q.ws);
                if (t < best_total || (best && t == best_total && cost < best_cost)) {
                    best = l, best_pass = passes[k], best_total = t, best_cost = cost;
                }
            }
        sf_conv_lean q;
        if (!best || best_total >= total || !has_choice(net, best, best_pass, true, &q)) break;
        set_choice(net, pl->req, pl->n, best, best_pass, &q.ws);
        budget -= best_cost;
        total = best_total;
    }
    free(copy);
}

size_t sf_plan_pack(sf_net *net, sf_planner *pl)
{
    lean_workspaces(net, pl);
    return pack_workspace(pl->req, pl->n);
}
