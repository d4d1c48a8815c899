/* nccl.c — the transport of the engine's exchanges through device memory (the CUDA backend): NCCL communicators for
 * the world (gradients, the sharded parameters), the time group (the gathered output), the BN group and each pair of
 * neighbouring segments, bootstrapped through MPI. Collectives the step waits for run on the backend's stream;
 * gradient buckets and each neighbour link have streams of their own (links at the highest priority, so a receive is
 * not queued behind a bucket), ordered against the backend's by events. Profiling: event pairs around each exchange. */
#include "distributed/dist_internal.h"

#include "core/error.h"
#include "cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_TRY(call)                                                                                              \
    do {                                                                                                            \
        ncclResult_t r_ = (call);                                                                                   \
        if (r_ != ncclSuccess) return sf_fail(SF_ERR_DEVICE, "%s:%d: NCCL %s: %s", __FILE__, __LINE__, #call,     \
                                              ncclGetErrorString(r_));                                              \
    } while (0)
#define CUDA_TRY(call)                                                                                              \
    do {                                                                                                            \
        cudaError_t e_ = (call);                                                                                    \
        if (e_ != cudaSuccess) return sf_fail(SF_ERR_DEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                                              cudaGetErrorString(e_));                                              \
    } while (0)

enum { LINK_PREV = 0, LINK_NEXT = 1 };

/* A timed span: two events and what it counts as (sf_dist_timer). */
typedef struct timed_span {
    cudaEvent_t begin, end;
    int what;
} timed_span;

typedef struct nccl_ctx {
    sf_dist *d;
    cudaStream_t compute; /* the backend's */
    cudaStream_t grad_stream, link_stream[2];
    cudaEvent_t ev_compute, ev_side[3];
    ncclComm_t world, time, bn, link[2]; /* bn may be time itself; link[k] NULL at the ends */
    int link_peer[2];                    /* the neighbour's rank in its pair communicator */
    ncclRedOp_t grad_op;
    int grad_op_created;
    /* profiling: spans [0, n_spans) recorded since the last read, of cap_spans created; their start times count
     * from `start` (on the backend's stream) */
    timed_span *spans;
    int n_spans, cap_spans;
    cudaEvent_t start;
} nccl_ctx;

static void destroy(void *p)
{
    nccl_ctx *c = p;
    if (!c) return;
    /* our own streams only: the network, and with it the backend's stream, may already be gone */
    if (c->grad_stream) cudaStreamSynchronize(c->grad_stream);
    for (int k = 0; k < 2; k++)
        if (c->link_stream[k]) cudaStreamSynchronize(c->link_stream[k]);
    if (c->grad_op_created) ncclRedOpDestroy(c->grad_op, c->world);
    for (int k = 0; k < 2; k++)
        if (c->link[k]) ncclCommDestroy(c->link[k]);
    if (c->bn && c->bn != c->time) ncclCommDestroy(c->bn);
    if (c->time) ncclCommDestroy(c->time);
    if (c->world) ncclCommDestroy(c->world);
    if (c->grad_stream) cudaStreamDestroy(c->grad_stream);
    for (int k = 0; k < 2; k++)
        if (c->link_stream[k]) cudaStreamDestroy(c->link_stream[k]);
    if (c->ev_compute) cudaEventDestroy(c->ev_compute);
    for (int k = 0; k < 3; k++)
        if (c->ev_side[k]) cudaEventDestroy(c->ev_side[k]);
    for (int k = 0; k < c->cap_spans; k++) {
        cudaEventDestroy(c->spans[k].begin);
        cudaEventDestroy(c->spans[k].end);
    }
    free(c->spans);
    if (c->start) cudaEventDestroy(c->start);
    free(c);
}

/* ---------------------------------------------------------------------------------------------- profiling */

/* Records the start of a span on `st` (a new span; its kind comes with span_end). */
static sf_status span_begin(nccl_ctx *c, cudaStream_t st)
{
    if (c->n_spans == c->cap_spans) {
        int cap = c->cap_spans ? 2 * c->cap_spans : 32;
        timed_span *more = realloc(c->spans, sizeof *more * (size_t)cap);
        if (!more) return sf_fail(SF_ERR_NOMEM, "out of memory");
        c->spans = more;
        for (; c->cap_spans < cap; c->cap_spans++) {
            timed_span *t = &c->spans[c->cap_spans];
            CUDA_TRY(cudaEventCreate(&t->begin));
            if (cudaEventCreate(&t->end) != cudaSuccess) {
                cudaEventDestroy(t->begin);
                return sf_fail(SF_ERR_DEVICE, "profiling: cannot create a CUDA event");
            }
        }
    }
    CUDA_TRY(cudaEventRecord(c->spans[c->n_spans].begin, st));
    return SF_OK;
}

static sf_status span_end(nccl_ctx *c, cudaStream_t st, int what)
{
    timed_span *t = &c->spans[c->n_spans++];
    t->what = what;
    CUDA_TRY(cudaEventRecord(t->end, st));
    return SF_OK;
}

static sf_status nccl_timer_begin(void *ctx)
{
    nccl_ctx *c = ctx;
    return span_begin(c, c->compute);
}

static sf_status nccl_timer_end(void *ctx, int what)
{
    nccl_ctx *c = ctx;
    return span_end(c, c->compute, what);
}

static sf_status nccl_timer_start(void *ctx)
{
    nccl_ctx *c = ctx;
    c->n_spans = 0;
    if (!c->start) CUDA_TRY(cudaEventCreate(&c->start));
    CUDA_TRY(cudaEventRecord(c->start, c->compute));
    return SF_OK;
}

static sf_status nccl_timer_read(void *ctx)
{
    nccl_ctx *c = ctx;
    for (int k = 0; k < c->n_spans; k++) {
        float at = 0, t = 0;
        CUDA_TRY(cudaEventSynchronize(c->spans[k].end));
        CUDA_TRY(cudaEventElapsedTime(&at, c->start, c->spans[k].begin));
        CUDA_TRY(cudaEventElapsedTime(&t, c->spans[k].begin, c->spans[k].end));
        SF_TRY(sf_dist_add_span(c->d, c->spans[k].what, at, t));
    }
    c->n_spans = 0;
    return SF_OK;
}

/* `side` waits for what the backend's stream has issued so far. */
static sf_status after_compute(nccl_ctx *c, cudaStream_t side)
{
    CUDA_TRY(cudaEventRecord(c->ev_compute, c->compute));
    CUDA_TRY(cudaStreamWaitEvent(side, c->ev_compute, 0));
    return SF_OK;
}

/* The backend's stream waits for what `side` (event slot k) has issued so far. */
static sf_status compute_after(nccl_ctx *c, cudaStream_t side, int k)
{
    CUDA_TRY(cudaEventRecord(c->ev_side[k], side));
    CUDA_TRY(cudaStreamWaitEvent(c->compute, c->ev_side[k], 0));
    return SF_OK;
}

static sf_status link_of(nccl_ctx *c, int32_t peer, int *k)
{
    *k = peer == c->d->seg + 1 ? LINK_NEXT : LINK_PREV;
    if ((peer != c->d->seg + 1 && peer != c->d->seg - 1) || !c->link[*k])
        return sf_fail(SF_ERR_STATE, "NCCL: segment %d has no link to segment %d", c->d->seg, peer);
    return SF_OK;
}

/* The sender's next layer waits until its send is through: the receiver is usually waiting already, and a send left
 * beside the next matrix product found no free SM until the product was done (docs/architecture.md, Time pipeline). */
static sf_status nccl_send(void *ctx, int32_t peer, const float *buf, int64_t n)
{
    nccl_ctx *c = ctx;
    int k;
    SF_TRY(link_of(c, peer, &k));
    SF_TRY(after_compute(c, c->link_stream[k]));
    NCCL_TRY(ncclSend(buf, (size_t)n, ncclFloat, c->link_peer[k], c->link[k], c->link_stream[k]));
    return compute_after(c, c->link_stream[k], k);
}

/* Posted when the backend's stream reaches it (unless early_receive): posted as the host enqueues it, a step ahead, it
 * would wait on the GPU holding SMs that the layers before it need. */
static sf_status nccl_recv(void *ctx, int32_t peer, float *buf, int64_t n)
{
    nccl_ctx *c = ctx;
    int k;
    SF_TRY(link_of(c, peer, &k));
    if (!c->d->p.early_receive) SF_TRY(after_compute(c, c->link_stream[k]));
    NCCL_TRY(ncclRecv(buf, (size_t)n, ncclFloat, c->link_peer[k], c->link[k], c->link_stream[k]));
    return compute_after(c, c->link_stream[k], k);
}

static sf_status nccl_time_allgather(void *ctx, void *buf, size_t bytes)
{
    nccl_ctx *c = ctx;
    NCCL_TRY(ncclAllGather((char *)buf + (size_t)c->d->seg * bytes, buf, bytes, ncclUint8, c->time, c->compute));
    return SF_OK;
}

static sf_status nccl_bn_allgather(void *ctx, float *buf, int64_t n)
{
    nccl_ctx *c = ctx;
    int me;
    NCCL_TRY(ncclCommUserRank(c->bn, &me));
    NCCL_TRY(ncclAllGather(buf + (int64_t)me * n, buf, (size_t)n, ncclFloat, c->bn, c->compute));
    return SF_OK;
}

static sf_status nccl_bn_allreduce(void *ctx, float *buf, int64_t n)
{
    nccl_ctx *c = ctx;
    NCCL_TRY(ncclAllReduce(buf, buf, (size_t)n, ncclFloat, ncclSum, c->bn, c->compute));
    return SF_OK;
}

/* A bucket's all-reduce on the gradients' own stream, after an event on the backend's, so the backward goes on. */
static sf_status nccl_grad_start(void *ctx, float *grads, int64_t n)
{
    nccl_ctx *c = ctx;
    SF_TRY(after_compute(c, c->grad_stream));
    if (c->d->profiling) SF_TRY(span_begin(c, c->grad_stream));
    NCCL_TRY(ncclAllReduce(grads, grads, (size_t)n, ncclFloat, c->grad_op, c->world, c->grad_stream));
    return c->d->profiling ? span_end(c, c->grad_stream, SF_DIST_TIMER_ALLREDUCE) : SF_OK;
}

/* After a sharded update: one broadcast per part from its owner (parts differ by one element, which NCCL's all-gather
 * refuses), over the uncapped world communicator; the other data ranks hold the same bits already. */
static sf_status nccl_params_allgather(void *ctx, float *buf, int64_t n)
{
    nccl_ctx *c = ctx;
    const int parts = c->d->nseg;
    ncclResult_t r = ncclGroupStart();
    for (int k = 0; r == ncclSuccess && k < parts; k++) { /* world rank k: segment k of data rank 0 */
        int64_t lo, cnt;
        sf_net_part(n, k, parts, &lo, &cnt);
        r = ncclBroadcast(buf + lo, buf + lo, (size_t)cnt, ncclFloat, k, c->world, c->compute);
    }
    ncclResult_t e = ncclGroupEnd();
    if (r == ncclSuccess) r = e;
    if (r != ncclSuccess)
        return sf_fail(SF_ERR_DEVICE, "NCCL: gathering the parameters over %d segments: %s", parts,
                       ncclGetErrorString(r));
    return SF_OK;
}

/* The end of the backward: every side stream joins back into the backend's. */
static sf_status nccl_grad_wait(void *ctx)
{
    nccl_ctx *c = ctx;
    SF_TRY(compute_after(c, c->grad_stream, 2));
    for (int k = 0; k < 2; k++)
        if (c->link[k]) SF_TRY(compute_after(c, c->link_stream[k], k));
    return SF_OK;
}

static sf_status nccl_allreduce_times(void *ctx, size_t bytes, int32_t reps, double *seconds)
{
    nccl_ctx *c = ctx;
    void *buf = NULL;
    cudaEvent_t a = NULL, b = NULL;
    sf_status s = SF_OK;
    if (cudaMalloc(&buf, bytes) != cudaSuccess || cudaEventCreate(&a) != cudaSuccess ||
        cudaEventCreate(&b) != cudaSuccess)
        s = sf_fail(SF_ERR_NOMEM, "all-reduce bandwidth: cannot allocate %zu bytes of device memory", bytes);
    if (s == SF_OK && cudaMemsetAsync(buf, 0, bytes, c->grad_stream) != cudaSuccess)
        s = sf_fail(SF_ERR_DEVICE, "all-reduce bandwidth: cudaMemsetAsync failed");
    for (int32_t r = -2; s == SF_OK && r < reps; r++) { /* two warm-ups */
        float ms = 0;
        cudaEventRecord(a, c->grad_stream);
        if (ncclAllReduce(buf, buf, bytes / sizeof(float), ncclFloat, ncclSum, c->world, c->grad_stream) != ncclSuccess)
            s = sf_fail(SF_ERR_DEVICE, "all-reduce bandwidth: ncclAllReduce failed");
        cudaEventRecord(b, c->grad_stream);
        if (s == SF_OK && (cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&ms, a, b) != cudaSuccess))
            s = sf_fail(SF_ERR_DEVICE, "all-reduce bandwidth: the all-reduce failed");
        if (r >= 0) seconds[r] = ms * 1e-3;
    }
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    cudaFree(buf);
    return s;
}

static const sf_transport nccl_transport = {
    .name = "nccl",
    .send = nccl_send,
    .recv = nccl_recv,
    .time_allgather = nccl_time_allgather,
    .bn_allgather = nccl_bn_allgather,
    .bn_allreduce = nccl_bn_allreduce,
    .grad_start = nccl_grad_start,
    .grad_wait = nccl_grad_wait,
    .params_allgather = nccl_params_allgather,
    .timer_start = nccl_timer_start,
    .timer_begin = nccl_timer_begin,
    .timer_end = nccl_timer_end,
    .timer_read = nccl_timer_read,
    .allreduce_times = nccl_allreduce_times,
    .destroy = destroy,
};

/* The communicators besides the gradients' carry little (neuron state, the gathered output, BN statistics): a
 * couple of channels each, so that their buffers do not eat the memory a time split saves. */
static ncclConfig_t side_config(void)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.minCTAs = 1;
    cfg.maxCTAs = 2;
    return cfg;
}

/* The pair communicators of neighbouring segments: pairs (0,1), (2,3), ... from one split and (1,2), (3,4), ... from
 * another, so that each process is in one pair with each neighbour. Colours are unique per time group. */
static sf_status split_links(nccl_ctx *c)
{
    const sf_dist *d = c->d;
    const int g = d->seg, last = d->nseg - 1, base = d->data_rank * d->nseg;
    for (int split = 0; split < 2; split++) {
        /* split 0 pairs g with g+1 for even g; split 1 for odd g */
        const int partner = (g % 2 == split) ? g + 1 : g - 1;
        const int alone = partner < 0 || partner > last;
        const int color = alone ? NCCL_SPLIT_NOCOLOR : base + (g < partner ? g : partner) / 2;
        ncclComm_t comm = NULL;
        ncclConfig_t cfg = side_config();
        NCCL_TRY(ncclCommSplit(c->time, color, g, &comm, &cfg));
        if (alone) continue;
        const int k = partner > g ? LINK_NEXT : LINK_PREV;
        c->link[k] = comm;
        c->link_peer[k] = partner > g ? 1 : 0; /* ranks in the pair follow the segment order */
    }
    return SF_OK;
}

static sf_status setup(nccl_ctx *c, sf_net *net)
{
    sf_dist *d = c->d;
    c->compute = (cudaStream_t)sf_cuda_backend_stream(sf_net_backend(net));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->grad_stream, cudaStreamNonBlocking));
    int least, greatest;
    CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int k = 0; k < 2; k++)
        CUDA_TRY(cudaStreamCreateWithPriority(&c->link_stream[k], cudaStreamNonBlocking, greatest));
    CUDA_TRY(cudaEventCreateWithFlags(&c->ev_compute, cudaEventDisableTiming));
    for (int k = 0; k < 3; k++) CUDA_TRY(cudaEventCreateWithFlags(&c->ev_side[k], cudaEventDisableTiming));
    ncclUniqueId id;
    if (d->rank == 0) NCCL_TRY(ncclGetUniqueId(&id));
    SF_TRY(sf_mpi_bcast(d, &id, sizeof id));
    NCCL_TRY(ncclCommInitRank(&c->world, d->size, id, d->rank));
    ncclConfig_t side = side_config();
    NCCL_TRY(ncclCommSplit(c->world, d->data_rank, d->seg, &c->time, &side));
    side = side_config();
    if (d->p.sync_bn && d->data_size > 1) NCCL_TRY(ncclCommSplit(c->world, 0, d->rank, &c->bn, &side));
    else c->bn = c->time;
    if (d->nseg > 1) SF_TRY(split_links(c));
    if (d->data_size > 1) {
        float scale = 1.0f / (float)d->data_size; /* sums over segments, means over data ranks */
        NCCL_TRY(ncclRedOpCreatePreMulSum(&c->grad_op, &scale, ncclFloat, ncclScalarHostImmediate, c->world));
        c->grad_op_created = 1;
    } else {
        c->grad_op = ncclSum;
    }
    return SF_OK;
}

sf_status sf_nccl_transport(sf_dist *d, sf_net *net, const sf_transport **tr, void **ctx)
{
    /* NVLink multicast can put a shared host's GPUs out of service: off unless the user turns it on */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    nccl_ctx *c = calloc(1, sizeof *c);
    if (!c) return sf_fail(SF_ERR_NOMEM, "out of memory");
    c->d = d;
    sf_status s = setup(c, net);
    if (s != SF_OK) {
        destroy(c);
        return sf_fail_context(s, "setting up NCCL for rank %d of %d: ", d->rank, d->size);
    }
    *tr = &nccl_transport;
    *ctx = c;
    return SF_OK;
}

void sf_nccl_describe(char *buf, size_t cap)
{
    int v = 0;
    ncclGetVersion(&v);
    snprintf(buf, cap, "NCCL %d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}
