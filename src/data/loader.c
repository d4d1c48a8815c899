/* loader.c — [T, B, C, H, W] batches (each epoch's order; images encoded, files decoded, events binned, synthetic
 * spikes drawn) made by worker threads ahead of the step, as jobs: one per batch for a dataset in memory, one per
 * sample for image folders (docs/architecture.md, Data). A batch is a pure function of (params, epoch, index), so
 * prefetching, synchronous loading and sf_loader_set_state give identical batches. */
#include "data/formats.h"

#include "core/error.h"
#include "data/draws.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PREFETCH 64
#define MAX_THREADS 4096

enum slot_state { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY, SLOT_IN_USE };

typedef struct slot {
    sf_batch batch;
    float *x;
    int32_t *labels;
    int64_t *idx;          /* [B] the dataset indices of its samples */
    uint8_t *bad;          /* [B] image folders: samples skipped as bad */
    enum slot_state state;
    uint64_t generation;   /* the repositioning it was started under */
    uint64_t seq;          /* the order batches were started in */
    int64_t claimed, done; /* jobs handed out, jobs finished */
    sf_status status;      /* the failure of the lowest failed job (SF_OK: none) */
    int64_t failed_job;
    char error[1024];
} slot;

typedef struct worker {
    struct sf_loader *l;
    sf_image_decoder *decoder; /* image folders */
    pthread_t thread;
} worker;

struct sf_loader {
    const sf_dataset *ds;
    sf_loader_params p;
    int64_t per_epoch, jobs; /* jobs per batch */
    slot *slots;
    int num_slots;
    worker *workers;
    int num_workers, started;
    int in_use;              /* the slot the caller holds, or -1 */
    sf_loader_state next;    /* the batch the caller gets next */
    sf_loader_state fill;    /* the batch the workers start next */
    int64_t *order;          /* sample order of order_epoch */
    int64_t order_epoch;
    uint64_t generation;     /* bumped by set_state: batches started for an older one are dropped */
    uint64_t seq;
    int stop;
    double wait_seconds;     /* the caller's thread alone reads and writes it */
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

void sf_loader_default_params(sf_loader_params *p)
{
    memset(p, 0, sizeof *p);
    p->batch = 64;
    p->timesteps = 1;
    p->encoding = SF_ENCODING_DIRECT;
    p->training = 1;
    p->crop_pad = 4; /* the usual CIFAR-10 recipe */
    p->crop_scale_min = 0.08f; /* torchvision's RandomResizedCrop */
    p->normalize = 1;
    p->prefetch = 2;
    p->events.downsample = 1;
}

void sf_shuffle_order(uint64_t seed, int64_t epoch, int64_t n, int64_t *order)
{
    const uint64_t key = sf_draw_key(seed, SF_DRAW_SHUFFLE, epoch);
    for (int64_t i = 0; i < n; i++) order[i] = i;
    /* Fisher–Yates; the modulo bias is below n / 2^64. */
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(sf_hash3(key, (uint64_t)i, 0) % (uint64_t)(i + 1));
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t shards_of(const sf_loader_params *p) { return p->shards > 1 ? p->shards : 1; }

static size_t sample_floats(const sf_batch *b) { return (size_t)b->C * (size_t)b->H * (size_t)b->W; }

/* Sets slot s up for batch `pos`: its samples and labels, no job done (the caller holds the lock, or is alone). */
static void start_batch(sf_loader *l, slot *s, sf_loader_state pos)
{
    const int64_t n = l->ds->count, B = l->p.batch;
    if (l->p.training && l->order_epoch != pos.epoch) {
        sf_shuffle_order(l->p.seed, pos.epoch, n, l->order);
        l->order_epoch = pos.epoch;
    }
    const int64_t first = (pos.index * shards_of(&l->p) + l->p.shard) * B;
    const int64_t valid = n - first < B ? (n - first > 0 ? n - first : 0) : B;
    for (int64_t b = 0; b < B; b++) {
        /* Slots past the end of an evaluation epoch repeat its real samples (the epoch's first when this shard
         * has none), so every input stays in range. */
        int64_t k = valid ? first + (b < valid ? b : b % valid) : b % n;
        s->idx[b] = l->p.training ? l->order[k] : k;
        s->labels[b] = l->ds->labels[s->idx[b]];
    }
    if (s->bad) memset(s->bad, 0, (size_t)B);
    s->batch.valid = (int32_t)valid;
    s->batch.epoch = pos.epoch;
    s->batch.index = pos.index;
    s->claimed = s->done = 0;
    s->status = SF_OK;
    s->failed_job = l->jobs;
    s->generation = l->generation;
    s->seq = l->seq++;
    s->state = SLOT_FILLING;
}

/* Job `job` of slot s; an image folder's bad image is marked and skipped when the dataset says so. */
static sf_status run_job(sf_loader *l, slot *s, int64_t job, sf_image_decoder *d)
{
    const sf_dataset *ds = l->ds;
    const int64_t epoch = s->batch.epoch, B = l->p.batch;
    switch (ds->type) {
    case SF_SAMPLES_IMAGES: sf_encode_batch(ds, &l->p, epoch, s->idx, B, s->x); return SF_OK;
    case SF_SAMPLES_SYNTHETIC: sf_synthetic_batch(ds, &l->p, s->idx, B, s->x); return SF_OK;
    case SF_SAMPLES_EVENTS: sf_events_bin_batch(ds, &l->p, epoch, s->idx, B, s->x); return SF_OK;
    case SF_SAMPLES_FRAMES: sf_frames_batch(ds, &l->p, s->idx, B, s->x); return SF_OK;
    case SF_SAMPLES_FILES: break;
    }
    const size_t chw = sample_floats(&s->batch);
    sf_status st = sf_image_sample(ds, &l->p, d, epoch, s->idx[job], s->x + (size_t)job * chw, (size_t)B * chw);
    if (st != SF_OK && sf_image_skips_bad(ds)) {
        sf_image_mark_bad(ds, s->idx[job]);
        s->bad[job] = 1; /* this job's own byte */
        return SF_OK;
    }
    return st;
}

/* Records job `job`'s failure (this thread's message) if it is the lowest so far. */
static void record_failure(slot *s, int64_t job, sf_status st)
{
    if (st == SF_OK || job > s->failed_job) return;
    s->status = st;
    s->failed_job = job;
    snprintf(s->error, sizeof s->error, "%s", sf_last_error());
}

/* Sample b's T steps, label and index copied to slot position `to`. */
static void move_sample(slot *s, int64_t T, int64_t from, int64_t to)
{
    const size_t chw = sample_floats(&s->batch), step = (size_t)s->batch.B * chw;
    for (int64_t t = 0; t < T; t++)
        memcpy(s->x + (size_t)t * step + (size_t)to * chw, s->x + (size_t)t * step + (size_t)from * chw,
               chw * sizeof *s->x);
    s->labels[to] = s->labels[from];
    s->idx[to] = s->idx[from];
}

/* After the last job: skipped images leave the batch, the good ones moving forward in order and the slots after
 * them repeating them (as an evaluation epoch's partial last batch does), `valid` counting them. */
static void finish_batch(sf_loader *l, slot *s)
{
    if (!s->bad || s->status != SF_OK) return;
    const int64_t B = l->p.batch, real = s->batch.valid;
    int64_t good = 0;
    for (int64_t b = 0; b < real; b++)
        if (!s->bad[b]) {
            if (good != b) move_sample(s, l->p.timesteps, b, good);
            good++;
        }
    if (good == real) return;
    if (good == 0 && l->p.training) {
        s->status = sf_fail(SF_ERR_FORMAT, "batch %lld of epoch %lld: all of its %lld images are bad (skipped)",
                            (long long)s->batch.index, (long long)s->batch.epoch, (long long)real);
        snprintf(s->error, sizeof s->error, "%s", sf_last_error());
        return;
    }
    for (int64_t b = good; good > 0 && b < B; b++) move_sample(s, l->p.timesteps, b % good, b);
    s->batch.valid = (int32_t)good;
}

static sf_loader_state advance(const sf_loader *l, sf_loader_state pos)
{
    if (++pos.index >= l->per_epoch) {
        pos.epoch++;
        pos.index = 0;
    }
    return pos;
}

/* A job to run (the lock held): the next of the oldest batch being filled, else the first of a new batch. */
static slot *claim(sf_loader *l, int64_t *job)
{
    slot *best = NULL, *free_slot = NULL;
    for (int i = 0; i < l->num_slots; i++) {
        slot *s = &l->slots[i];
        if (s->state == SLOT_FREE && !free_slot) free_slot = s;
        if (s->state == SLOT_FILLING && s->generation == l->generation && s->claimed < l->jobs &&
            (!best || s->seq < best->seq))
            best = s;
    }
    if (!best && free_slot) {
        best = free_slot;
        start_batch(l, best, l->fill);
        l->fill = advance(l, l->fill);
    }
    if (best) *job = best->claimed++;
    return best;
}

static void *work(void *arg)
{
    worker *w = arg;
    sf_loader *l = w->l;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        int64_t job = 0;
        slot *s = claim(l, &job);
        if (!s) {
            pthread_cond_wait(&l->cv, &l->mu);
            continue;
        }
        pthread_mutex_unlock(&l->mu);
        const sf_status st = run_job(l, s, job, w->decoder);
        pthread_mutex_lock(&l->mu);
        record_failure(s, job, st);
        s->done++;
        if (s->generation != l->generation) {
            if (s->done == s->claimed) s->state = SLOT_FREE; /* repositioned: dropped */
        } else if (s->done == l->jobs) {
            finish_batch(l, s);
            s->state = SLOT_READY;
        } else {
            continue;
        }
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* A batch made on the caller's thread: its jobs spread over the OpenMP threads when there are several. */
static void make_now(sf_loader *l, slot *s)
{
    start_batch(l, s, l->next);
    if (l->jobs == 1) {
        record_failure(s, 0, run_job(l, s, 0, NULL));
    } else {
#pragma omp parallel for schedule(dynamic, 1) num_threads(l->num_workers)
        for (int64_t job = 0; job < l->jobs; job++) {
            const sf_status st = run_job(l, s, job, l->workers[omp_get_thread_num()].decoder);
#pragma omp critical(sf_loader_failure)
            record_failure(s, job, st);
        }
    }
    s->done = l->jobs;
    finish_batch(l, s);
    s->state = SLOT_READY;
}

static sf_status check_params(const sf_dataset *ds, const sf_loader_params *p)
{
    if (p->batch < 1 || p->batch > (1 << 20))
        return sf_fail(SF_ERR_INVALID, "loader: batch %lld is not in 1..2^20", (long long)p->batch);
    if (p->timesteps < 1 || p->timesteps > (1 << 20))
        return sf_fail(SF_ERR_INVALID, "loader: timesteps %lld is not in 1..2^20", (long long)p->timesteps);
    if ((unsigned)p->encoding > SF_ENCODING_LATENCY)
        return sf_fail(SF_ERR_INVALID, "loader: unknown encoding %d", (int)p->encoding);
    if (!(p->erase_p >= 0.0f && p->erase_p <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "loader: erase_p %g is not in [0, 1]", p->erase_p);
    if (!(p->crop_scale_min > 0.0f && p->crop_scale_min <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "loader: crop_scale_min %g is not in (0, 1]", p->crop_scale_min);
    if (p->prefetch < 0 || p->prefetch > MAX_PREFETCH || p->threads < 0 || p->threads > MAX_THREADS)
        return sf_fail(SF_ERR_INVALID, "loader: prefetch %d must be in 0..%d, threads %d in 0..%d", p->prefetch,
                       MAX_PREFETCH, p->threads, MAX_THREADS);
    if (p->shards < 0 || p->shard < 0 || p->shard >= shards_of(p))
        return sf_fail(SF_ERR_INVALID, "loader: shard %d of %d is not a part of the batch", p->shard, p->shards);
    const float *stdv = p->std[0] != 0.0f ? p->std : ds->std;
    const int images = ds->type == SF_SAMPLES_IMAGES || ds->type == SF_SAMPLES_FILES;
    for (int c = 0; images && c < ds->channels; c++)
        if (p->normalize && !(stdv[c] > 0.0f))
            return sf_fail(SF_ERR_INVALID, "loader: normalisation std of channel %d is %g (must be > 0)", c, stdv[c]);
    const sf_event_params *ep = &p->events;
    if (ds->type == SF_SAMPLES_EVENTS &&
        (ep->downsample < 1 || ep->time_window_us < 0 || ep->time_jitter_us < 0 || ep->shift < 0 ||
         !(ep->drop_event >= 0.0f && ep->drop_event < 1.0f) || (unsigned)ep->frame > SF_FRAME_BINARY))
        return sf_fail(SF_ERR_INVALID,
                       "loader: event parameters out of range (downsample %d >= 1, time_window_us %lld >= 0, "
                       "time_jitter_us %lld >= 0, shift %d >= 0, drop_event %g in [0, 1))",
                       ep->downsample, (long long)ep->time_window_us, (long long)ep->time_jitter_us, ep->shift,
                       ep->drop_event);
    if (ds->type == SF_SAMPLES_FRAMES && ds->frames_T != p->timesteps)
        return sf_fail(SF_ERR_INVALID, "loader: the dataset was binned into %lld steps, the loader wants %lld",
                       (long long)ds->frames_T, (long long)p->timesteps);
    return SF_OK;
}

/* The slots' buffers and the workers' decoders. */
static sf_status allocate(sf_loader *l, const int32_t shape[3])
{
    const sf_loader_params *p = &l->p;
    const size_t chw = (size_t)shape[0] * shape[1] * shape[2];
    if ((size_t)p->timesteps > SIZE_MAX / sizeof(float) / (size_t)p->batch / chw)
        return sf_fail(SF_ERR_INVALID, "loader: a batch of %lld×%lld samples is too large", (long long)p->timesteps,
                       (long long)p->batch);
    const size_t numel = (size_t)p->timesteps * (size_t)p->batch * chw, B = (size_t)p->batch;
    const int files = l->ds->type == SF_SAMPLES_FILES;
    l->order = malloc((size_t)l->ds->count * sizeof *l->order);
    l->slots = calloc((size_t)l->num_slots, sizeof *l->slots);
    l->workers = calloc((size_t)l->num_workers, sizeof *l->workers);
    if (!l->order || !l->slots || !l->workers) return sf_fail(SF_ERR_NOMEM, "out of memory for the loader");
    for (int i = 0; i < l->num_slots; i++) {
        slot *s = &l->slots[i];
        s->x = p->memory.alloc ? p->memory.alloc(numel * sizeof *s->x, p->memory.ctx) : malloc(numel * sizeof *s->x);
        s->labels = malloc(B * sizeof *s->labels);
        s->idx = malloc(B * sizeof *s->idx);
        s->bad = files ? malloc(B) : NULL;
        s->batch = (sf_batch){s->x, s->labels, p->timesteps, p->batch, shape[0], shape[1], shape[2], 0, 0, 0};
        if (!s->x || !s->labels || !s->idx || (files && !s->bad))
            return sf_fail(SF_ERR_NOMEM, "out of memory for loader buffers (%d × %zu floats)", l->num_slots, numel);
    }
    for (int i = 0; i < l->num_workers; i++) {
        l->workers[i].l = l;
        if (files) SF_TRY(sf_image_decoder_create(&l->workers[i].decoder));
    }
    return SF_OK;
}

sf_status sf_loader_create(const sf_dataset *ds, const sf_loader_params *p, sf_loader **out)
{
    *out = NULL;
    if (!ds || !p) return sf_fail(SF_ERR_INVALID, "loader: dataset or parameters are NULL");
    SF_TRY(check_params(ds, p));
    int32_t shape[3] = {ds->channels, ds->height, ds->width};
    if (ds->type == SF_SAMPLES_EVENTS) {
        int32_t frame[3];
        sf_event_frame_shape(ds->channels, ds->height, ds->width, &p->events, frame);
        sf_event_input_shape(frame, shape);
    }
    const int64_t global = p->batch * shards_of(p);
    const int64_t per_epoch = p->training ? ds->count / global : (ds->count + global - 1) / global;
    if (per_epoch < 1)
        return sf_fail(SF_ERR_INVALID, "loader: the dataset has %lld samples, fewer than one batch of %lld",
                       (long long)ds->count, (long long)global);
    sf_loader *l = calloc(1, sizeof *l);
    if (!l) return sf_fail(SF_ERR_NOMEM, "out of memory");
    const int files = ds->type == SF_SAMPLES_FILES;
    l->ds = ds;
    l->p = *p;
    l->per_epoch = per_epoch;
    l->jobs = files ? p->batch : 1;
    l->num_slots = p->prefetch + 1;
    l->num_workers = files ? (p->threads > 0 ? p->threads : omp_get_max_threads()) : 1;
    l->in_use = -1;
    l->order_epoch = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    sf_status s = allocate(l, shape);
    for (int i = 0; s == SF_OK && p->prefetch > 0 && i < l->num_workers; i++) {
        if (pthread_create(&l->workers[i].thread, NULL, work, &l->workers[i]) != 0)
            s = sf_fail(SF_ERR_STATE, "loader: cannot start worker thread %d of %d", i + 1, l->num_workers);
        else
            l->started++;
    }
    if (s != SF_OK) {
        sf_loader_free(l);
        return s;
    }
    *out = l;
    return SF_OK;
}

void sf_loader_free(sf_loader *l)
{
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->started; i++) pthread_join(l->workers[i].thread, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    for (int i = 0; l->slots && i < l->num_slots; i++) {
        slot *s = &l->slots[i];
        if (l->p.memory.alloc) l->p.memory.release(s->x, l->p.memory.ctx);
        else free(s->x);
        free(s->labels);
        free(s->idx);
        free(s->bad);
    }
    for (int i = 0; l->workers && i < l->num_workers; i++) sf_image_decoder_free(l->workers[i].decoder);
    free(l->slots);
    free(l->workers);
    free(l->order);
    free(l);
}

int64_t sf_loader_batches_per_epoch(const sf_loader *l) { return l->per_epoch; }

/* The slot holding batch l->next once it is ready (the lock held). */
static slot *wait_ready(sf_loader *l)
{
    if (!l->started) {
        make_now(l, &l->slots[0]);
        return &l->slots[0];
    }
    for (;;) {
        for (int i = 0; i < l->num_slots; i++) {
            slot *s = &l->slots[i];
            if (s->state == SLOT_READY && s->batch.epoch == l->next.epoch && s->batch.index == l->next.index)
                return s;
        }
        pthread_cond_wait(&l->cv, &l->mu);
    }
}

sf_status sf_loader_next(sf_loader *l, const sf_batch **out)
{
    *out = NULL;
    const double t0 = now_seconds();
    pthread_mutex_lock(&l->mu);
    if (l->in_use >= 0) {
        l->slots[l->in_use].state = SLOT_FREE;
        l->in_use = -1;
        pthread_cond_broadcast(&l->cv);
    }
    if (l->next.index >= l->per_epoch) {
        l->next.epoch++;
        l->next.index = 0;
        pthread_mutex_unlock(&l->mu);
        return SF_OK;
    }
    slot *s = wait_ready(l);
    l->wait_seconds += now_seconds() - t0;
    if (s->status != SF_OK) { /* left ready: asking again gives the same error */
        const sf_status st = sf_fail(s->status, "%s", s->error);
        if (!l->started) s->state = SLOT_FREE;
        pthread_mutex_unlock(&l->mu);
        return st;
    }
    s->state = SLOT_IN_USE;
    l->in_use = (int)(s - l->slots);
    l->next.index++; /* reaching per_epoch: the next call reports the epoch's end */
    *out = &s->batch;
    pthread_mutex_unlock(&l->mu);
    return SF_OK;
}

void sf_loader_get_state(const sf_loader *l, sf_loader_state *out) { *out = l->next; }

sf_status sf_loader_set_state(sf_loader *l, const sf_loader_state *st)
{
    if (st->epoch < 0 || st->index < 0 || st->index > l->per_epoch)
        return sf_fail(SF_ERR_INVALID, "loader state epoch %lld batch %lld is out of range (%lld batches per epoch)",
                       (long long)st->epoch, (long long)st->index, (long long)l->per_epoch);
    pthread_mutex_lock(&l->mu);
    l->generation++;
    for (int i = 0; i < l->num_slots; i++) {
        slot *s = &l->slots[i];
        if (s->state == SLOT_READY || (s->state == SLOT_FILLING && s->done == s->claimed)) s->state = SLOT_FREE;
    }
    l->next = *st;
    l->fill = st->index == l->per_epoch ? (sf_loader_state){st->epoch + 1, 0} : *st;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return SF_OK;
}

double sf_loader_wait_seconds(const sf_loader *l) { return l->wait_seconds; }
