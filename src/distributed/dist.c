/* dist.c — the job: joining it, the grid of time segments × data ranks, attaching a network (its hooks, with the
 * gradient buckets cut here and carried by the transport), and the host-side checks and sums the trainer needs. */
#include "distributed/dist_internal.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SF_DIST_DEFAULT_BUCKET_MIB 25

void sf_dist_default_params(sf_dist_params *p)
{
    memset(p, 0, sizeof *p);
    p->time_parallel = 1;
    p->bucket_mib = SF_DIST_DEFAULT_BUCKET_MIB;
    p->shard_optimizer = 1;
}

sf_status sf_dist_init(const sf_dist_params *p, sf_dist **out)
{
    *out = NULL;
    if (p->time_parallel < 0 || p->bucket_mib < 0)
        return sf_fail(SF_ERR_INVALID, "time_parallel = %d, bucket_mib = %d: need >= 0 and >= 0", p->time_parallel,
                       p->bucket_mib);
    sf_dist *d = calloc(1, sizeof *d);
    if (!d) return sf_fail(SF_ERR_NOMEM, "out of memory");
    d->p = *p;
    if (!d->p.bucket_mib) d->p.bucket_mib = SF_DIST_DEFAULT_BUCKET_MIB;
    d->size = 1;
    d->nseg = p->time_parallel ? p->time_parallel : sf_mpi_world_size();
    sf_status s = SF_OK;
    if (sf_mpi_launched()) s = sf_mpi_start(d);
    if (s == SF_OK && d->size % d->nseg != 0)
        s = sf_fail(SF_ERR_INVALID,
                    "time_parallel = %d does not divide the %d processes started (start time_parallel × data "
                    "ranks processes, e.g. mpirun -np %d)",
                    d->nseg, d->size, d->nseg);
    if (s != SF_OK) {
        sf_dist_free(d);
        return s;
    }
    d->seg = d->rank % d->nseg;
    d->data_rank = d->rank / d->nseg;
    d->data_size = d->size / d->nseg;
    *out = d;
    return SF_OK;
}

static void detach(sf_dist *d)
{
    if (d->tr) d->tr->destroy(d->tr_ctx);
    d->tr = NULL;
    d->tr_ctx = NULL;
    d->net = NULL;
    d->profiling = false;
    d->n_spans = 0;
}

void sf_dist_free(sf_dist *d)
{
    if (!d) return;
    detach(d);
    if (d->mpi) sf_mpi_stop(d);
    free(d->spans);
    free(d);
}

int32_t sf_dist_rank(const sf_dist *d) { return d->rank; }
int32_t sf_dist_size(const sf_dist *d) { return d->size; }
int32_t sf_dist_local_rank(const sf_dist *d) { return d->local_rank; }
int32_t sf_dist_data_rank(const sf_dist *d) { return d->data_rank; }
int32_t sf_dist_data_size(const sf_dist *d) { return d->data_size; }
int32_t sf_dist_segment(const sf_dist *d) { return d->seg; }
int32_t sf_dist_time_parallel(const sf_dist *d) { return d->nseg; }

void sf_dist_describe(char *buf, size_t cap)
{
    char mpi[160], nccl[80];
    sf_mpi_describe(mpi, sizeof mpi);
    sf_nccl_describe(nccl, sizeof nccl);
    snprintf(buf, cap, "%s; %s", mpi, nccl);
}

sf_device sf_dist_device(const sf_dist *d, sf_device dev)
{
    if (dev.kind != SF_DEVICE_CUDA || d->size == 1) return dev;
    int32_t n = sf_cuda_device_count();
    dev.index = n > 0 ? d->local_rank % n : 0;
    return dev;
}

/* ---------------------------------------------------------------------------------------------- hooks
 * Each exchange goes to the transport; while profiling, timed as one of sf_dist_timer. */

static sf_status timer_begin(sf_dist *d) { return d->profiling ? d->tr->timer_begin(d->tr_ctx) : SF_OK; }

static sf_status timer_end(sf_dist *d, int what, sf_status s)
{
    return s == SF_OK && d->profiling ? d->tr->timer_end(d->tr_ctx, what) : s;
}

/* v goes to the segment after in the forward, ∂L/∂v to the segment before in the backward. */
static int state_timer(const sf_dist *d, int32_t peer, bool sending)
{
    return (sending ? peer > d->seg : peer < d->seg) ? SF_DIST_TIMER_STATE : SF_DIST_TIMER_GRAD_STATE;
}

static sf_status hook_send(void *ctx, int32_t peer, const float *buf, int64_t n)
{
    sf_dist *d = ctx;
    SF_TRY(timer_begin(d));
    return timer_end(d, state_timer(d, peer, true), d->tr->send(d->tr_ctx, peer, buf, n));
}

static sf_status hook_recv(void *ctx, int32_t peer, float *buf, int64_t n)
{
    sf_dist *d = ctx;
    SF_TRY(timer_begin(d));
    return timer_end(d, state_timer(d, peer, false), d->tr->recv(d->tr_ctx, peer, buf, n));
}

/* A collective of n floats in place (the output and BN exchanges, the parameters' all-gather), timed as `what`. */
static sf_status timed(sf_dist *d, int what, sf_status (*fn)(void *, float *, int64_t), float *buf, int64_t n)
{
    SF_TRY(timer_begin(d));
    return timer_end(d, what, fn(d->tr_ctx, buf, n));
}

static sf_status hook_time_allgather(void *ctx, void *buf, size_t bytes)
{
    sf_dist *d = ctx;
    SF_TRY(timer_begin(d));
    return timer_end(d, SF_DIST_TIMER_OUTPUT, d->tr->time_allgather(d->tr_ctx, buf, bytes));
}

static sf_status hook_bn_allgather(void *ctx, float *buf, int64_t n)
{
    sf_dist *d = ctx;
    return timed(d, SF_DIST_TIMER_BN, d->tr->bn_allgather, buf, n);
}

static sf_status hook_bn_allreduce(void *ctx, float *buf, int64_t n)
{
    sf_dist *d = ctx;
    return timed(d, SF_DIST_TIMER_BN, d->tr->bn_allreduce, buf, n);
}

static sf_status hook_params_allgather(void *ctx, float *buf, int64_t n)
{
    sf_dist *d = ctx;
    return timed(d, SF_DIST_TIMER_PARAMS, d->tr->params_allgather, buf, n);
}

/* Gradients [first, n) are final: start the all-reduce of what is final and not yet started once it fills a
 * bucket (the first call of a step sees launched_from > n: a new step begins). */
static sf_status hook_grads_ready(void *ctx, float *grads, int64_t first, int64_t n)
{
    sf_dist *d = ctx;
    if (d->launched_from > n) d->launched_from = n;
    if (d->launched_from - first < d->bucket_elems) return SF_OK;
    SF_TRY(d->tr->grad_start(d->tr_ctx, grads + first, d->launched_from - first));
    d->launched_from = first;
    return SF_OK;
}

static sf_status hook_grads_done(void *ctx, float *grads, int64_t n)
{
    sf_dist *d = ctx;
    if (d->launched_from > n) d->launched_from = n;
    if (d->launched_from > 0) SF_TRY(d->tr->grad_start(d->tr_ctx, grads, d->launched_from));
    d->launched_from = n + 1; /* the next step starts afresh */
    SF_TRY(timer_begin(d));
    return timer_end(d, SF_DIST_TIMER_GRADS, d->tr->grad_wait(d->tr_ctx));
}

/* This process's part of the optimizer state: its segment's, where the state is sharded over a time group. */
static bool sharded(const sf_dist *d) { return d->p.shard_optimizer && d->nseg > 1; }

sf_status sf_dist_attach(sf_dist *d, sf_net *net)
{
    detach(d);
    if (d->size == 1) return sf_net_set_hooks(net, NULL);
    sf_backend *be = sf_net_backend(net);
    const bool gpu = strcmp(be->name, "cpu") != 0;
    SF_TRY(gpu ? sf_nccl_transport(d, net, &d->tr, &d->tr_ctx) : sf_mpi_transport(d, &d->tr, &d->tr_ctx));
    d->net = net;
    d->bucket_elems = (int64_t)d->p.bucket_mib * (1 << 20) / (int64_t)sizeof(float);
    d->launched_from = INT64_MAX;
    sf_net_hooks h = {
        .ctx = d,
        .seg = d->seg,
        .nseg = d->nseg,
        .bn_part = d->p.sync_bn ? d->rank : d->seg,
        .bn_parts = d->p.sync_bn ? d->size : d->nseg,
        .send = hook_send,
        .recv = hook_recv,
        .time_allgather = hook_time_allgather,
        .bn_allgather = hook_bn_allgather,
        .bn_allreduce = hook_bn_allreduce,
        .grads_ready = hook_grads_ready,
        .grads_done = hook_grads_done,
        .params_allgather = hook_params_allgather,
        .opt_part = sharded(d) ? d->seg : 0,
        .opt_parts = sharded(d) ? d->nseg : 1,
    };
    return sf_net_set_hooks(net, &h);
}

static sf_status attached(const sf_dist *d, const sf_net *net, const char *what)
{
    if (d->net != net) return sf_fail(SF_ERR_STATE, "%s: the network is not the one attached to this job", what);
    return SF_OK;
}

sf_status sf_dist_optimizer_gather(sf_dist *d, sf_net *net)
{
    if (d->size == 1 || !sharded(d)) return SF_OK;
    SF_TRY(attached(d, net, "gathering the optimizer state"));
    float *bufs[2];
    int64_t lo, n;
    if (sf_net_optimizer_state(net, bufs, &lo, &n) == 0) return SF_OK;
    /* the whole state holds this part where it was and zeros elsewhere; the group fills in the rest */
    SF_TRY(sf_net_optimizer_repartition(net, 0, 1));
    const int32_t count = sf_net_optimizer_state(net, bufs, &lo, &n);
    for (int32_t k = 0; k < count; k++) SF_TRY(d->tr->params_allgather(d->tr_ctx, bufs[k], n));
    return SF_OK;
}

sf_status sf_dist_optimizer_shard(sf_dist *d, sf_net *net)
{
    if (d->size == 1 || !sharded(d)) return SF_OK;
    SF_TRY(attached(d, net, "sharding the optimizer state"));
    return sf_net_optimizer_repartition(net, d->seg, d->nseg);
}

/* ---------------------------------------------------------------------------------------------- profiling */

sf_status sf_dist_profile(sf_dist *d, int on)
{
    if (on && !d->tr) return sf_fail(SF_ERR_STATE, "profiling: attach a network first (a world of %d)", d->size);
    if (d->tr) SF_TRY(d->tr->timer_start(d->tr_ctx));
    memset(d->prof_ms, 0, sizeof d->prof_ms);
    memset(d->prof_calls, 0, sizeof d->prof_calls);
    d->n_spans = 0;
    d->profiling = on != 0;
    return SF_OK;
}

sf_status sf_dist_profile_read(sf_dist *d, double ms[SF_DIST_TIMER_COUNT], int64_t calls[SF_DIST_TIMER_COUNT])
{
    if (d->tr) SF_TRY(d->tr->timer_read(d->tr_ctx));
    memcpy(ms, d->prof_ms, sizeof d->prof_ms);
    memcpy(calls, d->prof_calls, sizeof d->prof_calls);
    return SF_OK;
}

int64_t sf_dist_profile_spans(const sf_dist *d, const sf_dist_span **spans)
{
    *spans = d->spans;
    return d->n_spans;
}

const char *sf_dist_timer_name(sf_dist_timer t)
{
    static const char *const names[SF_DIST_TIMER_COUNT] = {"state", "grad_state", "output", "bn",
                                                           "grads", "params", "allreduce"};
    return (unsigned)t < SF_DIST_TIMER_COUNT ? names[t] : "?";
}

/* ---------------------------------------------------------------------------------------------- host side */

sf_status sf_dist_check_same(sf_dist *d, const char *what, uint64_t hash)
{
    if (d->size == 1) return SF_OK;
    uint64_t *all = calloc((size_t)d->size, sizeof *all);
    if (!all) return sf_fail(SF_ERR_NOMEM, "out of memory");
    sf_status s = sf_mpi_allgather_u64(d, hash, all);
    for (int32_t r = 1; s == SF_OK && r < d->size; r++)
        if (all[r] != all[0])
            s = sf_fail(SF_ERR_INVALID,
                        "rank %d's %s differs from rank 0's (hash %016llx vs %016llx): every process of a job must "
                        "run the same binary with the same config and --set options",
                        r, what, (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return s;
}

sf_status sf_dist_sum_data(sf_dist *d, double *v, int32_t n)
{
    return d->data_size == 1 ? SF_OK : sf_mpi_sum_f64(d, SF_GROUP_DATA, v, n);
}

sf_status sf_dist_sum_all(sf_dist *d, double *v, int32_t n)
{
    return d->size == 1 ? SF_OK : sf_mpi_sum_f64(d, SF_GROUP_WORLD, v, n);
}

sf_status sf_dist_average_buffers(sf_dist *d, sf_net *net)
{
    if (d->data_size == 1) return SF_OK;
    int32_t count = sf_net_tensor_count(net, SF_ROLE_BUFFER);
    for (int32_t i = 0; i < count; i++) {
        sf_tensor_info info;
        SF_TRY(sf_net_tensor_info(net, SF_ROLE_BUFFER, i, &info));
        float *f = malloc((size_t)info.numel * sizeof *f);
        double *v = malloc((size_t)info.numel * sizeof *v);
        sf_status s = f && v ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
        if (s == SF_OK) s = sf_net_tensor_read(net, SF_ROLE_BUFFER, i, f);
        for (int64_t k = 0; s == SF_OK && k < info.numel; k++) v[k] = f[k];
        if (s == SF_OK) s = sf_mpi_sum_f64(d, SF_GROUP_DATA, v, (int32_t)info.numel);
        for (int64_t k = 0; s == SF_OK && k < info.numel; k++) f[k] = (float)(v[k] / d->data_size);
        if (s == SF_OK) s = sf_net_tensor_write(net, SF_ROLE_BUFFER, i, f);
        free(f);
        free(v);
        SF_TRY(s);
    }
    return SF_OK;
}

sf_status sf_dist_barrier(sf_dist *d) { return d->size == 1 ? SF_OK : sf_mpi_barrier(d); }

void sf_dist_abort(sf_dist *d, int code, const char *message)
{
    if (!d || d->size == 1) return;
    fprintf(stderr, "spikefuse: rank %d of %d: %s; stopping every process of the job\n", d->rank, d->size, message);
    fflush(stderr);
    sf_mpi_abort(d, code);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

sf_status sf_dist_allreduce_busbw(sf_dist *d, size_t bytes, int32_t reps, double *gbps)
{
    *gbps = 0;
    if (!d->tr) return sf_fail(SF_ERR_STATE, "all-reduce bandwidth: attach a network first (a world of %d)", d->size);
    if (reps < 1 || reps > 1000) return sf_fail(SF_ERR_INVALID, "all-reduce bandwidth: reps %d not in 1..1000", reps);
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) return sf_fail(SF_ERR_NOMEM, "out of memory");
    sf_status s = d->tr->allreduce_times(d->tr_ctx, bytes, reps, t);
    if (s == SF_OK) {
        qsort(t, (size_t)reps, sizeof *t, by_value);
        const double P = d->size; /* NCCL's bus bandwidth: what each link carries in a ring */
        *gbps = (double)bytes * 2.0 * (P - 1) / P / t[reps / 2] / 1e9;
    }
    free(t);
    return s;
}
