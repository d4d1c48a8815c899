/* dist.h — training one network with several processes, one per device: MPI (mpirun or srun) for the processes and
 * host-memory collectives, NCCL for GPU memory. The world is a grid: rank r runs time segment r mod time_parallel of
 * data shard r / time_parallel. Gradients are averaged over data ranks in buckets overlapping the backward; the
 * optimizer state may be sharded over a time group (ZeRO-1; whole-state readers bracket with sf_dist_optimizer_gather
 * and _shard). Without MPI or NCCL these run one process and refuse what they cannot serve, saying what to install. */
#ifndef SF_DIST_DIST_H
#define SF_DIST_DIST_H

#include "spikefuse_train.h"

#include <stdint.h>

/* The job's handle, its parameters, joining and leaving it, rank, size, describe and abort are public
 * (include/spikefuse_train.h); the rest follow. */

int32_t sf_dist_local_rank(const sf_dist *d); /* among the processes on this host */
int32_t sf_dist_data_rank(const sf_dist *d);  /* which part of each global batch this process trains on */
int32_t sf_dist_data_size(const sf_dist *d);  /* data-parallel ranks: size / time_parallel */
int32_t sf_dist_segment(const sf_dist *d);    /* this process's time segment */
int32_t sf_dist_time_parallel(const sf_dist *d);

/* The device of this process: `dev` itself for the CPU and for a world of one; cuda:<local rank mod the host's
 * devices> for CUDA otherwise. */
sf_device sf_dist_device(const sf_dist *d, sf_device dev);

/* Makes `net` (created on this process's device, compiled after this call) take part in the job: registers its
 * hooks (core/net_hooks.h) and, on a GPU, creates the NCCL communicators and streams. One network at a time: a later
 * attach, or sf_dist_free, releases what this one set up (the network may be freed before). Every process attaches
 * its network at the same point (a collective on a GPU). A world of one registers nothing. */
sf_status sf_dist_attach(sf_dist *d, sf_net *net);

/* Checks that every process holds the same `hash` of `what` (a resolved config, a binary): SF_ERR_INVALID naming
 * the first rank that differs from rank 0. */
sf_status sf_dist_check_same(sf_dist *d, const char *what, uint64_t hash);
/* Sums n doubles in place (host memory) over the data ranks (the trainer's loss and accuracy sums: every time
 * segment has the same) or over every process. */
sf_status sf_dist_sum_data(sf_dist *d, double *v, int32_t n);
sf_status sf_dist_sum_all(sf_dist *d, double *v, int32_t n);
/* Averages the attached network's buffers (BN running statistics) over the data ranks. */
sf_status sf_dist_average_buffers(sf_dist *d, sf_net *net);
/* Waits until every process has arrived. */
sf_status sf_dist_barrier(sf_dist *d);

/* The whole optimizer state on every process of each time group (a collective, for what reads or writes all of
 * it: a checkpoint), and back to this process's part. No-ops where the state is not sharded. */
sf_status sf_dist_optimizer_gather(sf_dist *d, sf_net *net);
sf_status sf_dist_optimizer_shard(sf_dist *d, sf_net *net);

/* Where a step's time goes beside the computing: the attached network's exchanges, each timed from where the
 * compute stream reaches it to where it may go on (CUDA events on the compute stream; the host clock on the CPU,
 * whose exchanges block). */
typedef enum sf_dist_timer {
    SF_DIST_TIMER_STATE,      /* receiving (and on the CPU sending) v between time segments, in the forward */
    SF_DIST_TIMER_GRAD_STATE, /* the same for ∂L/∂v, in the backward */
    SF_DIST_TIMER_OUTPUT,     /* gathering the last layer's output over the time group */
    SF_DIST_TIMER_BN,         /* BN statistics and sums over the BN group */
    SF_DIST_TIMER_GRADS,      /* the end of the backward, until every gradient all-reduce (and send) is done */
    SF_DIST_TIMER_PARAMS,     /* all-gathering the parameters after a sharded update */
    SF_DIST_TIMER_ALLREDUCE,  /* GPU: the gradient all-reduces themselves, on their own stream beside the backward */
    SF_DIST_TIMER_COUNT
} sf_dist_timer;
/* on: from now every exchange is timed, from zero (and the clock of the spans below starts); off: no more. */
sf_status sf_dist_profile(sf_dist *d, int on);
/* Milliseconds and calls of each kind since sf_dist_profile (waits for the timed work to finish). */
sf_status sf_dist_profile_read(sf_dist *d, double ms[SF_DIST_TIMER_COUNT], int64_t calls[SF_DIST_TIMER_COUNT]);
/* One timed exchange: its kind, when it began (ms after sf_dist_profile turned profiling on: on the GPU, after the
 * compute stream passed that point) and how long it took. */
typedef struct sf_dist_span {
    sf_dist_timer what;
    double at_ms, ms;
} sf_dist_span;
/* The exchanges sf_dist_profile_read has read so far, in the order they were timed (the gradient all-reduces,
 * timed on their own stream, among them); valid until the next sf_dist_profile. A timeline of each process's step
 * (where a pipeline's bubbles fall) when every process turns profiling on together (after a barrier). */
int64_t sf_dist_profile_spans(const sf_dist *d, const sf_dist_span **spans);
const char *sf_dist_timer_name(sf_dist_timer t); /* "state", "grad_state", "output", ... */

/* Bus bandwidth of an all-reduce of `bytes` over the whole world on the attached network's device, NCCL's
 * definition (bytes·2(P−1)/P over the median time of `reps`), in GB/s; for the benchmarks. */
sf_status sf_dist_allreduce_busbw(sf_dist *d, size_t bytes, int32_t reps, double *gbps);

#endif
