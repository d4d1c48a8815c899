/* dist_internal.h — what the files of src/distributed share: the job's state, the MPI layer (mpi.c, or mpi_none.c in
 * a build without MPI) and the transports that carry the engine's exchanges (host memory through MPI, device memory
 * through NCCL: nccl.c, or nccl_none.c). Internal to src/distributed. */
#ifndef SF_DIST_DIST_INTERNAL_H
#define SF_DIST_DIST_INTERNAL_H

#include "core/net_hooks.h"
#include "distributed/dist.h"

#include <stdbool.h>
#include <stddef.h>

/* The process groups of the grid (dist.h): the whole world, a time group (the segments of one data shard), a data
 * group (the data ranks of one segment), the BN group (the time group, or the world with sync_bn). */
typedef enum sf_group { SF_GROUP_WORLD = 0, SF_GROUP_TIME, SF_GROUP_DATA, SF_GROUP_BN, SF_GROUP_COUNT } sf_group;

/* How the engine's exchanges travel for one attached network: the hooks of net_hooks.h without the gradient
 * buckets (dist.c cuts those), plus starting and finishing one bucket's all-reduce. ctx is the transport's own. */
typedef struct sf_transport {
    const char *name;
    sf_status (*send)(void *ctx, int32_t peer, const float *buf, int64_t n);
    sf_status (*recv)(void *ctx, int32_t peer, float *buf, int64_t n);
    sf_status (*time_allgather)(void *ctx, void *buf, size_t bytes);
    sf_status (*bn_allgather)(void *ctx, float *buf, int64_t n);
    sf_status (*bn_allreduce)(void *ctx, float *buf, int64_t n);
    /* all-reduce grads[0, n) over the world, scaled by 1/data ranks, started now and complete by grad_wait */
    sf_status (*grad_start)(void *ctx, float *grads, int64_t n);
    sf_status (*grad_wait)(void *ctx);
    /* in place over the time group: buf holds n floats in nseg parts (sf_net_part), this segment's filled */
    sf_status (*params_allgather)(void *ctx, float *buf, int64_t n);
    /* profiling (sf_dist_profile): timer_start forgets what was timed and starts the clock of the spans' start
     * times; begin and end time what happens between them as `what` (sf_dist_timer); read hands every span timed
     * since the last read to sf_dist_add_span (waiting for it to finish) */
    sf_status (*timer_start)(void *ctx);
    sf_status (*timer_begin)(void *ctx);
    sf_status (*timer_end)(void *ctx, int what);
    sf_status (*timer_read)(void *ctx);
    /* seconds[r] = the time of all-reduce r of `bytes` over the world (after warm-ups), r < reps */
    sf_status (*allreduce_times)(void *ctx, size_t bytes, int32_t reps, double *seconds);
    void (*destroy)(void *ctx);
} sf_transport;

struct sf_dist {
    sf_dist_params p;
    int32_t rank, size, local_rank;
    int32_t seg, nseg, data_rank, data_size;
    bool mpi;     /* MPI is initialised (by us) */
    void *groups; /* mpi.c's communicators */
    /* the attached network */
    sf_net *net;
    const sf_transport *tr;
    void *tr_ctx;
    int64_t bucket_elems;  /* floats per gradient bucket */
    int64_t launched_from; /* gradients [launched_from, n) have their all-reduce started this step */
    bool profiling;
    double prof_ms[SF_DIST_TIMER_COUNT];
    int64_t prof_calls[SF_DIST_TIMER_COUNT];
    sf_dist_span *spans; /* [0, n_spans) read since profiling began, of cap_spans */
    int64_t n_spans, cap_spans;
};

/* ---- spans.c, for the transports */
/* Adds one timed exchange to the profile (its sums and its spans). */
sf_status sf_dist_add_span(sf_dist *d, int what, double at_ms, double ms);

/* ---- mpi.c / mpi_none.c */
/* Whether a launcher (mpirun, srun) started this process as one of several. */
bool sf_mpi_launched(void);
/* The processes the launcher started (1 without one), known before MPI_Init from the launcher's environment. */
int32_t sf_mpi_world_size(void);
/* MPI_Init and the groups of d's grid (d->nseg set); fills rank, size, local_rank. */
sf_status sf_mpi_start(sf_dist *d);
void sf_mpi_stop(sf_dist *d);
sf_status sf_mpi_allgather_u64(sf_dist *d, uint64_t v, uint64_t *all);
sf_status sf_mpi_sum_f64(sf_dist *d, sf_group g, double *v, int32_t n);
sf_status sf_mpi_bcast(sf_dist *d, void *buf, size_t bytes);  /* from world rank 0 */
sf_status sf_mpi_barrier(sf_dist *d);
void sf_mpi_abort(sf_dist *d, int code);
void sf_mpi_describe(char *buf, size_t cap);
/* The host-memory transport (CPU backend). */
sf_status sf_mpi_transport(sf_dist *d, const sf_transport **tr, void **ctx);

/* ---- nccl.c / nccl_none.c */
/* The device-memory transport on the network's CUDA backend: NCCL communicators bootstrapped through MPI, a stream
 * per neighbour segment and one for the gradients. */
sf_status sf_nccl_transport(sf_dist *d, sf_net *net, const sf_transport **tr, void **ctx);
void sf_nccl_describe(char *buf, size_t cap);

#endif
