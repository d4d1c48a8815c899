/* mpi.c — the MPI layer of src/distributed: joining the job, the grid's communicators, the host-side collectives the
 * trainer uses, and the transport of the engine's exchanges through host memory (the CPU backend). Every call runs
 * on the thread that called MPI_Init (MPI_THREAD_FUNNELED); errors come back as sf_status (MPI_ERRORS_RETURN). */
#include "distributed/dist_internal.h"

#include "core/error.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct mpi_groups {
    MPI_Comm comm[SF_GROUP_COUNT];
} mpi_groups;

static MPI_Comm comm_of(const sf_dist *d, sf_group g) { return ((const mpi_groups *)d->groups)->comm[g]; }

static sf_status mpi_check(int rc, const char *what)
{
    if (rc == MPI_SUCCESS) return SF_OK;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return sf_fail(SF_ERR_IO, "MPI: %s failed: %s", what, msg);
}

bool sf_mpi_launched(void)
{
    /* Open MPI's mpirun, PMIx (Slurm's srun --mpi=pmix, newer launchers) and PMI-1/2 launchers */
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

int32_t sf_mpi_world_size(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 1;
}

sf_status sf_mpi_start(sf_dist *d)
{
    int provided = 0, inited = 0;
    MPI_Initialized(&inited);
    if (!inited) SF_TRY(mpi_check(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread"));
    d->mpi = !inited;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    d->rank = rank;
    d->size = size;
    mpi_groups *g = calloc(1, sizeof *g);
    if (!g) return sf_fail(SF_ERR_NOMEM, "out of memory");
    d->groups = g;
    MPI_Comm host;
    SF_TRY(mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host),
                     "MPI_Comm_split_type"));
    int local;
    MPI_Comm_rank(host, &local);
    MPI_Comm_free(&host);
    d->local_rank = local;
    /* the grid: rank = data rank · nseg + segment (dist.h) */
    SF_TRY(mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &g->comm[SF_GROUP_WORLD]), "MPI_Comm_dup"));
    SF_TRY(mpi_check(MPI_Comm_split(MPI_COMM_WORLD, rank / d->nseg, rank, &g->comm[SF_GROUP_TIME]), "MPI_Comm_split"));
    SF_TRY(mpi_check(MPI_Comm_split(MPI_COMM_WORLD, rank % d->nseg, rank, &g->comm[SF_GROUP_DATA]), "MPI_Comm_split"));
    SF_TRY(mpi_check(MPI_Comm_dup(d->p.sync_bn ? MPI_COMM_WORLD : g->comm[SF_GROUP_TIME], &g->comm[SF_GROUP_BN]),
                     "MPI_Comm_dup"));
    for (int i = 0; i < SF_GROUP_COUNT; i++) MPI_Comm_set_errhandler(g->comm[i], MPI_ERRORS_RETURN);
    return SF_OK;
}

void sf_mpi_stop(sf_dist *d)
{
    mpi_groups *g = d->groups;
    for (int i = 0; g && i < SF_GROUP_COUNT; i++)
        if (g->comm[i] != MPI_COMM_NULL && g->comm[i] != 0) MPI_Comm_free(&g->comm[i]);
    free(g);
    d->groups = NULL;
    if (d->mpi) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    }
    d->mpi = false;
}

sf_status sf_mpi_allgather_u64(sf_dist *d, uint64_t v, uint64_t *all)
{
    return mpi_check(MPI_Allgather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comm_of(d, SF_GROUP_WORLD)),
                     "MPI_Allgather");
}

sf_status sf_mpi_sum_f64(sf_dist *d, sf_group g, double *v, int32_t n)
{
    return mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, comm_of(d, g)), "MPI_Allreduce");
}

sf_status sf_mpi_bcast(sf_dist *d, void *buf, size_t bytes)
{
    return mpi_check(MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, comm_of(d, SF_GROUP_WORLD)), "MPI_Bcast");
}

sf_status sf_mpi_barrier(sf_dist *d) { return mpi_check(MPI_Barrier(comm_of(d, SF_GROUP_WORLD)), "MPI_Barrier"); }

void sf_mpi_abort(sf_dist *d, int code)
{
    (void)d;
    MPI_Abort(MPI_COMM_WORLD, code);
}

void sf_mpi_describe(char *buf, size_t cap)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(v, &len);
    v[strcspn(v, ",\n")] = 0; /* the first clause: "Open MPI v4.1.4" */
    snprintf(buf, cap, "MPI: %s", v);
}

/* ---------------------------------------------------------------------------------------------- host transport
 * The CPU backend's exchanges: blocking (as its ops are), gradient buckets as non-blocking all-reduces progressed by
 * the backward's later MPI calls and grad_wait. */

#define MAX_BUCKETS 256

typedef struct host_ctx {
    sf_dist *d;
    MPI_Request req[MAX_BUCKETS];
    float *ptr[MAX_BUCKETS];
    int64_t len[MAX_BUCKETS];
    int n;
    /* profiling: the host clock (every exchange here blocks the caller, as the CPU backend's ops do), in seconds */
    double t_start, t0;
} host_ctx;

static sf_status host_send(void *ctx, int32_t peer, const float *buf, int64_t n)
{
    host_ctx *c = ctx;
    return mpi_check(MPI_Send(buf, (int)n, MPI_FLOAT, peer, 0, comm_of(c->d, SF_GROUP_TIME)), "MPI_Send");
}

static sf_status host_recv(void *ctx, int32_t peer, float *buf, int64_t n)
{
    host_ctx *c = ctx;
    return mpi_check(MPI_Recv(buf, (int)n, MPI_FLOAT, peer, 0, comm_of(c->d, SF_GROUP_TIME), MPI_STATUS_IGNORE),
                     "MPI_Recv");
}

static sf_status host_allgather(host_ctx *c, sf_group g, void *buf, int64_t n, MPI_Datatype type)
{
    return mpi_check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)n, type, comm_of(c->d, g)),
                     "MPI_Allgather");
}

static sf_status host_time_allgather(void *ctx, void *buf, size_t bytes)
{
    return host_allgather(ctx, SF_GROUP_TIME, buf, (int64_t)bytes, MPI_BYTE);
}

static sf_status host_bn_allgather(void *ctx, float *buf, int64_t n)
{
    return host_allgather(ctx, SF_GROUP_BN, buf, n, MPI_FLOAT);
}

static sf_status host_bn_allreduce(void *ctx, float *buf, int64_t n)
{
    host_ctx *c = ctx;
    return mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, comm_of(c->d, SF_GROUP_BN)),
                     "MPI_Allreduce");
}

static sf_status host_grad_start(void *ctx, float *grads, int64_t n)
{
    host_ctx *c = ctx;
    if (c->n == MAX_BUCKETS) return sf_fail(SF_ERR_STATE, "more than %d gradient buckets in one step", MAX_BUCKETS);
    c->ptr[c->n] = grads;
    c->len[c->n] = n;
    SF_TRY(mpi_check(MPI_Iallreduce(MPI_IN_PLACE, grads, (int)n, MPI_FLOAT, MPI_SUM, comm_of(c->d, SF_GROUP_WORLD),
                                    &c->req[c->n]),
                     "MPI_Iallreduce"));
    c->n++;
    return SF_OK;
}

static sf_status host_grad_wait(void *ctx)
{
    host_ctx *c = ctx;
    sf_status s = mpi_check(MPI_Waitall(c->n, c->req, MPI_STATUSES_IGNORE), "MPI_Waitall");
    const float scale = 1.0f / (float)c->d->data_size; /* sums over segments, means over data ranks */
    for (int b = 0; s == SF_OK && c->d->data_size > 1 && b < c->n; b++)
        for (int64_t i = 0; i < c->len[b]; i++) c->ptr[b][i] *= scale;
    c->n = 0;
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static sf_status host_params_allgather(void *ctx, float *buf, int64_t n)
{
    host_ctx *c = ctx;
    const int parts = c->d->nseg;
    int *counts = malloc(sizeof(int) * (size_t)parts), *displs = malloc(sizeof(int) * (size_t)parts);
    sf_status s = counts && displs ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
    for (int k = 0; s == SF_OK && k < parts; k++) {
        int64_t lo, cnt;
        sf_net_part(n, k, parts, &lo, &cnt);
        counts[k] = (int)cnt;
        displs[k] = (int)lo;
    }
    if (s == SF_OK)
        s = mpi_check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT,
                                     comm_of(c->d, SF_GROUP_TIME)),
                      "MPI_Allgatherv");
    free(counts);
    free(displs);
    return s;
}

static sf_status host_timer_start(void *ctx)
{
    host_ctx *c = ctx;
    c->t_start = now_s();
    return SF_OK;
}

static sf_status host_timer_begin(void *ctx)
{
    host_ctx *c = ctx;
    c->t0 = now_s();
    return SF_OK;
}

static sf_status host_timer_end(void *ctx, int what)
{
    host_ctx *c = ctx;
    return sf_dist_add_span(c->d, what, (c->t0 - c->t_start) * 1e3, (now_s() - c->t0) * 1e3);
}

static sf_status host_timer_read(void *ctx)
{
    (void)ctx; /* the spans went to the profile as they ended */
    return SF_OK;
}

static sf_status host_allreduce_times(void *ctx, size_t bytes, int32_t reps, double *seconds)
{
    host_ctx *c = ctx;
    const int64_t n = (int64_t)(bytes / sizeof(float));
    float *buf = calloc((size_t)(n ? n : 1), sizeof *buf);
    sf_status s = buf ? SF_OK : sf_fail(SF_ERR_NOMEM, "all-reduce bandwidth: cannot allocate %zu bytes", bytes);
    MPI_Comm w = comm_of(c->d, SF_GROUP_WORLD);
    for (int32_t r = -2; s == SF_OK && r < reps; r++) { /* two warm-ups */
        s = mpi_check(MPI_Barrier(w), "MPI_Barrier");
        double t0 = now_s();
        if (s == SF_OK) s = mpi_check(MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, w), "MPI_Allreduce");
        if (r >= 0) seconds[r] = now_s() - t0;
    }
    free(buf);
    return s;
}

static void host_destroy(void *ctx) { free(ctx); }

static const sf_transport host_transport = {
    .name = "mpi",
    .send = host_send,
    .recv = host_recv,
    .time_allgather = host_time_allgather,
    .bn_allgather = host_bn_allgather,
    .bn_allreduce = host_bn_allreduce,
    .grad_start = host_grad_start,
    .grad_wait = host_grad_wait,
    .params_allgather = host_params_allgather,
    .timer_start = host_timer_start,
    .timer_begin = host_timer_begin,
    .timer_end = host_timer_end,
    .timer_read = host_timer_read,
    .allreduce_times = host_allreduce_times,
    .destroy = host_destroy,
};

sf_status sf_mpi_transport(sf_dist *d, const sf_transport **tr, void **ctx)
{
    host_ctx *c = calloc(1, sizeof *c);
    if (!c) return sf_fail(SF_ERR_NOMEM, "out of memory");
    c->d = d;
    *tr = &host_transport;
    *ctx = c;
    return SF_OK;
}
