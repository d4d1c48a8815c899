/* sparse_tune.c — the crossover densities of event-driven layers (sparse = auto). On a GPU, at compile, the dense and
 * the event-driven op are timed at two spike densities per layer shape (a recurrent layer: its own op, forward and
 * dV), and the crossover is where the event-driven line meets the dense time, at most SF_SPARSE_MAX_CROSSOVER; cached
 * per backend, precision and shape for the process, kept in the run's `choices`. The CPU, a fixed sparse_crossover and
 * deterministic = on measure nothing, so every process chooses alike (one seed, one run to the bit on the CPU). */
#include "core/error.h"
#include "core/layer.h"
#include "core/lif_math.h"
#include "core/rng.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SF_SPARSE_MAX_CROSSOVER 0.5f
/* The crossover chosen without a clock (the CPU; deterministic = on): the higher density the measurement times the
 * event-driven path at, so W4's natural activity (about 5%) runs event-driven and full activity dense. */
#define SF_SPARSE_FIXED_CROSSOVER 0.125f

/* Both paths' times grow with the rows alike, so more rows only make tuning slower; a GPU needs a few thousand to
 * be busy. */
#define TUNE_MAX_ROWS 4096
static int64_t tune_rows(int64_t rows) { return rows < TUNE_MAX_ROWS ? rows : TUNE_MAX_ROWS; }
#define TUNE_CACHE 256
/* A recurrent layer is timed over at most this many steps: over fewer, launch and list setup weigh enough to misjudge
 * the crossover (W4rec's first layer went event-driven at a cost: docs/notebook/perf.md). */
#define TUNE_STEPS 64

typedef struct tune_key {
    char backend[16];
    int32_t device, precision, recurrent, dx;
    int64_t rows;
    int32_t in, out;
} tune_key;

typedef struct tune_entry {
    tune_key key;
    float xfwd, xbwd;
} tune_entry;

static tune_entry cache[TUNE_CACHE];
static int cache_n;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The buffers of one measurement, on the backend: w, x, y, dy, dx in the backend's act type (dw is float), and
 * where that type is 16-bit a float buffer the uploads are converted from. */
typedef struct bench {
    sf_backend *be;
    int64_t rows;
    int32_t in, out;
    float *w, *x, *y, *dy, *dx, *dw, *stage; /* dx NULL where the layer's input takes no gradient */
    sf_spikes c;
    void *ws;
} bench;

typedef enum op { OP_DENSE_FWD, OP_DENSE_BWD, OP_SPARSE_FWD, OP_SPARSE_BWD } op;

static sf_status run_op(void *ctx, int o)
{
    bench *b = ctx;
    sf_backend *be = b->be;
    switch ((op)o) {
    case OP_DENSE_FWD: return be->binary_linear_forward(be, b->rows, b->in, b->out, b->x, b->w, NULL, b->y);
    case OP_DENSE_BWD: /* from the bits, as the net's dense backward takes them */
        if (be->binary_linear_backward_bits)
            return be->binary_linear_backward_bits(be, b->rows, b->in, b->out, b->c.bits, b->w, b->dy, b->dx, b->dw,
                                                   NULL);
        SF_TRY(be->spikes_expand(be, b->rows, b->in, b->c.bits, b->x));
        return be->binary_linear_backward(be, b->rows, b->in, b->out, b->x, b->w, b->dy, b->dx, b->dw, NULL);
    case OP_SPARSE_FWD: return be->spike_linear_forward(be, b->rows, b->in, b->out, &b->c, b->w, NULL, b->y, b->ws);
    case OP_SPARSE_BWD:
        return be->spike_linear_backward(be, b->rows, b->in, b->out, b->c.bits, b->w, b->dy, NULL, b->dx, b->dw, NULL,
                                         b->ws);
    }
    return SF_OK;
}

/* The best of three runs of run(ctx, o) after a warm-up, in seconds. */
static sf_status time_op(sf_backend *be, sf_status (*run)(void *, int), void *ctx, int o, double *best)
{
    SF_TRY(run(ctx, o));
    SF_TRY(be->sync(be));
    *best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now_s();
        SF_TRY(run(ctx, o));
        SF_TRY(be->sync(be));
        double t = now_s() - t0;
        if (t < *best) *best = t;
    }
    return SF_OK;
}

/* n floats from the host into dst of the backend's act type. */
static sf_status upload(bench *b, float *dst, size_t n, const float *host)
{
    sf_backend *be = b->be;
    if (be->act == SF_SCALAR_F32) return be->copy_from_host(be, dst, host, n * sizeof(float));
    SF_TRY(be->copy_from_host(be, b->stage, host, n * sizeof(float)));
    return be->convert(be, (int64_t)n, SF_SCALAR_F32, b->stage, be->act, dst);
}

/* Spikes at density d (a fixed hash, so every process measures the same data), made compact on the backend. */
static sf_status set_density(bench *b, float d, float *host)
{
    const int64_t n = b->rows * b->in;
    for (int64_t i = 0; i < n; i++) host[i] = sf_uniform(0x5eed, 7, (uint64_t)i) < d ? 1.0f : 0.0f;
    SF_TRY(upload(b, b->x, (size_t)n, host));
    return b->be->spikes_compact(b->be, b->rows, b->in, b->x, &b->c, NULL, NULL);
}

/* Where the line through (d1, t1), (d2, t2) meets the dense time, clamped to [0, the maximum]. */
static float crossover(double dense, float d1, double t1, float d2, double t2)
{
    double slope = (t2 - t1) / (double)(d2 - d1);
    double x = slope > 0.0 ? d1 + (dense - t1) / slope : (t1 < dense ? 1.0 : 0.0);
    if (x < 0.0) x = 0.0;
    return x > SF_SPARSE_MAX_CROSSOVER ? SF_SPARSE_MAX_CROSSOVER : (float)x;
}

/* n values uniform in [-0.5, 0.5) from stream `stream` of a fixed hash, uploaded to dst. */
static sf_status upload_uniform(bench *b, float *dst, size_t n, uint64_t stream, float *host)
{
    for (size_t i = 0; i < n; i++) host[i] = sf_uniform(0x5eed, stream, i) - 0.5f;
    return upload(b, dst, n, host);
}

static sf_status alloc_all(bench *b, void **mem, size_t *sizes, int n)
{
    for (int i = 0; i < n; i++) SF_TRY(b->be->alloc(b->be, sizes[i] ? sizes[i] : 4, &mem[i]));
    return SF_OK;
}

static sf_status measure(sf_backend *be, int64_t rows, int32_t in, int32_t out, bool dx, float *xfwd, float *xbwd)
{
    bench b = {.be = be, .rows = tune_rows(rows), .in = in, .out = out};
    const size_t f = sizeof(float), a = sf_scalar_size(be->act), r = (size_t)b.rows;
    size_t host_n = r * (size_t)(in > out ? in : out);
    if (host_n < (size_t)in * (size_t)out) host_n = (size_t)in * (size_t)out;
    size_t sizes[] = {(size_t)out * (size_t)in * a, r * (size_t)in * a, r * (size_t)out * a, r * (size_t)out * a,
                      r * (size_t)in * a, (size_t)out * (size_t)in * f,
                      r * (size_t)sf_spike_words(in) * sizeof(uint32_t), r * (size_t)in,
                      r * (size_t)sf_spike_segs(in) * sizeof(int32_t), be->spike_linear_workspace(be, b.rows, in, out),
                      be->act == SF_SCALAR_F32 ? 0 : host_n * f};
    enum { NBUF = sizeof sizes / sizeof sizes[0] };
    void *mem[NBUF] = {0};
    float *host = malloc(host_n * f);
    sf_status s = host ? alloc_all(&b, mem, sizes, NBUF) : sf_fail(SF_ERR_NOMEM, "sparse tuning: out of memory");
    if (s == SF_OK) {
        b.w = mem[0], b.x = mem[1], b.y = mem[2], b.dy = mem[3], b.dx = dx ? mem[4] : NULL, b.dw = mem[5];
        b.c = (sf_spikes){mem[6], mem[7], mem[8]};
        b.ws = mem[9];
        b.stage = mem[10];
        s = upload_uniform(&b, b.dy, r * (size_t)out, 8, host);
    }
    if (s == SF_OK) s = upload_uniform(&b, b.w, (size_t)out * (size_t)in, 9, host);
    const float d1 = 1.0f / 32, d2 = SF_SPARSE_FIXED_CROSSOVER;
    double dense_f = 0, dense_b = 0, f1 = 0, f2 = 0, b1 = 0, b2 = 0;
    if (s == SF_OK) s = set_density(&b, d1, host);
    if (s == SF_OK) s = time_op(be, run_op, &b, OP_DENSE_FWD, &dense_f);
    if (s == SF_OK) s = time_op(be, run_op, &b, OP_DENSE_BWD, &dense_b);
    if (s == SF_OK) s = time_op(be, run_op, &b, OP_SPARSE_FWD, &f1);
    if (s == SF_OK) s = time_op(be, run_op, &b, OP_SPARSE_BWD, &b1);
    if (s == SF_OK) s = set_density(&b, d2, host);
    if (s == SF_OK) s = time_op(be, run_op, &b, OP_SPARSE_FWD, &f2);
    if (s == SF_OK) s = time_op(be, run_op, &b, OP_SPARSE_BWD, &b2);
    /* the dense backward above expanded the spikes of density d1; its time does not depend on them */
    for (int i = 0; i < NBUF; i++)
        if (mem[i]) be->release(be, mem[i]);
    free(host);
    if (s != SF_OK) return sf_fail_context(s, "measuring the sparse crossover of a %lldx%dx%d linear op: ",
                                           (long long)rows, in, out);
    *xfwd = crossover(dense_f, d1, f1, d2, f2);
    *xbwd = crossover(dense_b, d1, b1, d2, b2);
    return SF_OK;
}

/* The buffers of a recurrent layer's measurement, on the backend (x, v, ds, dx in its act type). */
typedef struct rbench {
    sf_backend *be;
    const sf_lif_params *p;
    int64_t T, B;
    int32_t n;
    float *x, *v, *h, *ds, *dx, *dv, *count, *stage;
    sf_spikes c;
    void *ws;
} rbench;

enum { R_DENSE_FWD, R_SPARSE_FWD, R_DENSE_DV, R_SPARSE_DV };

static sf_status run_rlif(void *ctx, int o)
{
    rbench *r = ctx;
    sf_backend *be = r->be;
    if (o == R_DENSE_FWD || o == R_SPARSE_FWD) {
        sf_lif_out out = {.h = r->h, .spike_count = r->count, .c = r->c, .row = r->n};
        return be->rlif_forward(be, r->p, r->T, r->B, r->n, r->x, r->v, o == R_SPARSE_FWD, &out, r->ws);
    }
    return be->rlif_backward(be, r->p, r->T, r->B, r->n, r->x, r->h, NULL, r->v, r->ds, 1,
                             o == R_SPARSE_DV ? SF_RLIF_SPARSE_DV : 0, r->dx, r->dv, NULL, NULL, r->ws);
}

/* The input that makes a fraction d of the neurons fire at each step (V is zero, so the layer's spikes are its
 * input's), and the density the event-driven forward then measures. */
static sf_status set_drive(rbench *r, float d, float *host, float *density)
{
    const sf_lif_coeffs k = sf_lif_coeffs_of(r->p);
    const float drive = 2.0f * (fabsf(r->p->v_threshold) + fabsf(r->p->v_reset) + 1.0f) / k.c;
    const int64_t N = r->T * r->B * r->n;
    for (int64_t i = 0; i < N; i++) host[i] = sf_uniform(0x5eed, 11, (uint64_t)i) < d ? drive : 0.0f;
    bench up = {.be = r->be, .stage = r->stage};
    SF_TRY(upload(&up, r->x, (size_t)N, host));
    SF_TRY(r->be->zero(r->be, r->count, sizeof(float)));
    SF_TRY(run_rlif(r, R_SPARSE_FWD));
    float spikes = 0;
    SF_TRY(r->be->copy_to_host(r->be, &spikes, r->count, sizeof spikes));
    *density = spikes / (float)N;
    return SF_OK;
}

/* A recurrent layer's crossovers, timed on its own op over at most TUNE_STEPS steps at two densities: event-driven
 * against dense forward, and dV from bits against the dense product (the backward's recurrence is alike in both). */
static sf_status measure_rlif(sf_backend *be, const sf_lif_params *p, int64_t T, int64_t B, int32_t n, float *xfwd,
                              float *xbwd)
{
    rbench r = {.be = be, .p = p, .T = T < TUNE_STEPS ? T : TUNE_STEPS, .B = B, .n = n};
    const size_t f = sizeof(float), a = sf_scalar_size(be->act), rows = (size_t)(r.T * B), N = rows * (size_t)n;
    const size_t host_n = N > (size_t)n * (size_t)n ? N : (size_t)n * (size_t)n;
    size_t sizes[] = {N * a, (size_t)n * (size_t)n * a, N * f, N * a, N * a, (size_t)n * (size_t)n * f, f,
                      rows * (size_t)sf_spike_words(n) * sizeof(uint32_t), N,
                      rows * (size_t)sf_spike_segs(n) * sizeof(int32_t), be->rlif_workspace(be, r.T, B, n),
                      be->act == SF_SCALAR_F32 ? 0 : host_n * f};
    enum { NBUF = sizeof sizes / sizeof sizes[0] };
    void *mem[NBUF] = {0};
    float *host = malloc(host_n * f);
    bench alloc = {.be = be};
    sf_status s = host ? alloc_all(&alloc, mem, sizes, NBUF) : sf_fail(SF_ERR_NOMEM, "sparse tuning: out of memory");
    if (s == SF_OK) {
        r.x = mem[0], r.v = mem[1], r.h = mem[2], r.ds = mem[3], r.dx = mem[4], r.dv = mem[5], r.count = mem[6];
        r.c = (sf_spikes){mem[7], mem[8], mem[9]};
        r.ws = mem[10];
        r.stage = mem[11];
        s = be->zero(be, r.v, (size_t)n * (size_t)n * a);
    }
    bench up = {.be = be, .stage = r.stage};
    if (s == SF_OK) s = upload_uniform(&up, r.ds, N, 12, host);
    float d1 = 0, d2 = 0;
    double dense_f = 0, dense_b = 0, f1 = 0, f2 = 0, b1 = 0, b2 = 0;
    if (s == SF_OK) s = set_drive(&r, 1.0f / 32, host, &d1);
    if (s == SF_OK) s = time_op(be, run_rlif, &r, R_DENSE_FWD, &dense_f);
    if (s == SF_OK) s = time_op(be, run_rlif, &r, R_SPARSE_FWD, &f1);
    if (s == SF_OK) s = time_op(be, run_rlif, &r, R_DENSE_DV, &dense_b);
    if (s == SF_OK) s = time_op(be, run_rlif, &r, R_SPARSE_DV, &b1);
    if (s == SF_OK) s = set_drive(&r, SF_SPARSE_FIXED_CROSSOVER, host, &d2);
    if (s == SF_OK) s = time_op(be, run_rlif, &r, R_SPARSE_FWD, &f2);
    if (s == SF_OK) s = time_op(be, run_rlif, &r, R_SPARSE_DV, &b2);
    for (int i = 0; i < NBUF; i++)
        if (mem[i]) be->release(be, mem[i]);
    free(host);
    if (s != SF_OK)
        return sf_fail_context(s, "measuring the sparse crossover of a recurrent layer of %d neurons over %lld samples: ",
                               n, (long long)B);
    if (!(d2 > d1)) { /* the neuron's parameters kept the drive from setting the density: no measurement */
        *xfwd = *xbwd = SF_SPARSE_FIXED_CROSSOVER;
        return SF_OK;
    }
    *xfwd = crossover(dense_f, d1, f1, d2, f2);
    *xbwd = crossover(dense_b, d1, b1, d2, b2);
    return SF_OK;
}

/* The cached crossovers of a shape, measured on first need: a linear op of rows × in → out, its backward with dx or
 * without (an input layer's), or (p not NULL) a recurrent layer of `in` neurons over `rows` samples. */
static sf_status crossovers(const sf_net *net, const sf_lif_params *p, int64_t rows, int32_t in, int32_t out, bool dx,
                            float *xfwd, float *xbwd)
{
    tune_key k;
    memset(&k, 0, sizeof k);
    strncpy(k.backend, net->be->name, sizeof k.backend - 1);
    k.device = net->p.device.index;
    k.precision = (int32_t)net->p.precision;
    k.recurrent = p != NULL;
    k.dx = dx;
    k.rows = p ? rows : tune_rows(rows);
    k.in = in;
    k.out = out;
    pthread_mutex_lock(&cache_lock);
    sf_status s = SF_OK;
    int i = 0;
    while (i < cache_n && memcmp(&cache[i].key, &k, sizeof k) != 0) i++;
    if (i == cache_n) {
        tune_entry e = {.key = k};
        s = p ? measure_rlif(net->be, p, net->T, rows, in, &e.xfwd, &e.xbwd)
              : measure(net->be, rows, in, out, dx, &e.xfwd, &e.xbwd);
        if (s == SF_OK) {
            i = cache_n < TUNE_CACHE ? cache_n++ : TUNE_CACHE - 1; /* a full cache forgets its last entry */
            cache[i] = e;
        }
    }
    if (s == SF_OK) {
        *xfwd = cache[i].xfwd;
        *xbwd = cache[i].xbwd;
    }
    pthread_mutex_unlock(&cache_lock);
    return s;
}

sf_status sf_net_tune_linear(sf_net *net, int32_t in, int32_t out, bool dx, float *xfwd, float *xbwd)
{
    return crossovers(net, NULL, net->T * net->B, in, out, dx, xfwd, xbwd);
}

/* its own op, forward and dV, over at most TUNE_STEPS steps */
sf_status sf_net_tune_rlif(sf_net *net, const sf_lif_params *p, int32_t n, float *xfwd, float *xbwd)
{
    return crossovers(net, p, net->B, n, (int32_t)(net->T < TUNE_STEPS ? net->T : TUNE_STEPS), true, xfwd, xbwd);
}

sf_status sf_net_sparse_tune(sf_net *net)
{
    for (int32_t i = 0; i < net->n_layers; i++) {
        sf_net_layer *l = &net->layers[i];
        l->xfwd = l->xbwd = l->sparse == SF_SPARSE_ON ? 1.0f : 0.0f;
        if (l->sparse != SF_SPARSE_AUTO) continue;
        if (net->p.sparse_crossover > 0.0f || net->p.cuda.deterministic || net->p.device.kind == SF_DEVICE_CPU) {
            l->xfwd = l->xbwd = net->p.sparse_crossover > 0.0f ? net->p.sparse_crossover : SF_SPARSE_FIXED_CROSSOVER;
            continue;
        }
        SF_TRY(l->ops->sparse_tune(net, l));
    }
    return SF_OK;
}
