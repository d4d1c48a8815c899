/* loader.c — batches for training and evaluation: the sample order of each epoch, encoding images, binning events
 * or drawing synthetic spikes into [T, B, C, H, W], and a background thread that prepares the next batch while
 * the caller trains on the current one.
 *
 * Every batch is a pure function of (params, epoch, index), so prefetching, synchronous loading and a loader
 * repositioned by sf_loader_set_state all deliver identical batches. */
#include "data/dataset.h"

#include "core/error.h"
#include "data/draws.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum slot_state { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY, SLOT_IN_USE };

/* Two slots: the caller holds one while the worker fills the other. */
#define NUM_SLOTS 2

typedef struct slot {
    sf_batch batch;
    float *x;
    int32_t *labels;
    enum slot_state state;
} slot;

struct sf_loader {
    const sf_dataset *ds;
    sf_loader_params p;
    int64_t per_epoch;
    slot slots[NUM_SLOTS];
    int in_use;           /* the slot the caller holds, or -1 */
    sf_loader_state next; /* the batch the caller gets next */

    /* Producer side (the worker thread, or the caller when prefetch is off). */
    sf_loader_state fill; /* the batch the producer prepares next */
    int64_t *order;       /* sample order of order_epoch */
    int64_t order_epoch;
    int64_t *idx;         /* [B] the dataset indices of the batch being prepared */

    uint64_t generation;  /* bumped by set_state: batches prepared for an older one are dropped */
    int stop, thread_started;
    pthread_t thread;
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
    p->normalize = 1;
    p->prefetch = 1;
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

static int64_t shards_of(const sf_loader_params *p) { return p->shards > 1 ? p->shards : 1; }

/* Prepares batch `pos` into slot s (producer side; touches only the producer's state and that slot). */
static void produce(sf_loader *l, sf_loader_state pos, slot *s)
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
        l->idx[b] = l->p.training ? l->order[k] : k;
        s->labels[b] = l->ds->labels[l->idx[b]];
    }
    switch (l->ds->type) {
    case SF_SAMPLES_IMAGES: sf_encode_batch(l->ds, &l->p, pos.epoch, l->idx, B, s->x); break;
    case SF_SAMPLES_SYNTHETIC: sf_synthetic_batch(l->ds, &l->p, l->idx, B, s->x); break;
    case SF_SAMPLES_EVENTS: sf_events_bin_batch(l->ds, &l->p, pos.epoch, l->idx, B, s->x); break;
    case SF_SAMPLES_FRAMES: sf_frames_batch(l->ds, &l->p, l->idx, B, s->x); break;
    }
    s->batch.valid = (int32_t)valid;
    s->batch.epoch = pos.epoch;
    s->batch.index = pos.index;
}

static sf_loader_state advance(const sf_loader *l, sf_loader_state pos)
{
    if (++pos.index >= l->per_epoch) {
        pos.epoch++;
        pos.index = 0;
    }
    return pos;
}

static void *worker(void *arg)
{
    sf_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        int s = -1;
        for (int i = 0; i < NUM_SLOTS && s < 0; i++)
            if (l->slots[i].state == SLOT_FREE) s = i;
        if (s < 0) {
            pthread_cond_wait(&l->cv, &l->mu);
            continue;
        }
        const sf_loader_state pos = l->fill;
        const uint64_t gen = l->generation;
        l->fill = advance(l, pos);
        l->slots[s].state = SLOT_FILLING;
        pthread_mutex_unlock(&l->mu);
        produce(l, pos, &l->slots[s]);
        pthread_mutex_lock(&l->mu);
        l->slots[s].state = gen == l->generation ? SLOT_READY : SLOT_FREE;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

sf_status sf_loader_create(const sf_dataset *ds, const sf_loader_params *p, sf_loader **out)
{
    *out = NULL;
    if (!ds || !p) return sf_fail(SF_ERR_INVALID, "loader: dataset or parameters are NULL");
    if (p->batch < 1 || p->batch > (1 << 20))
        return sf_fail(SF_ERR_INVALID, "loader: batch %lld is not in 1..2^20", (long long)p->batch);
    if (p->timesteps < 1 || p->timesteps > (1 << 20))
        return sf_fail(SF_ERR_INVALID, "loader: timesteps %lld is not in 1..2^20", (long long)p->timesteps);
    if ((unsigned)p->encoding > SF_ENCODING_LATENCY)
        return sf_fail(SF_ERR_INVALID, "loader: unknown encoding %d", (int)p->encoding);
    if (!(p->erase_p >= 0.0f && p->erase_p <= 1.0f))
        return sf_fail(SF_ERR_INVALID, "loader: erase_p %g is not in [0, 1]", p->erase_p);
    if (p->shards < 0 || p->shard < 0 || p->shard >= shards_of(p))
        return sf_fail(SF_ERR_INVALID, "loader: shard %d of %d is not a part of the batch", p->shard, p->shards);
    const float *stdv = p->std[0] != 0.0f ? p->std : ds->std;
    for (int c = 0; ds->type == SF_SAMPLES_IMAGES && c < ds->channels; c++)
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
    int32_t shape[3] = {ds->channels, ds->height, ds->width};
    if (ds->type == SF_SAMPLES_EVENTS) {
        int32_t frame[3];
        sf_event_frame_shape(ds->channels, ds->height, ds->width, ep, frame);
        sf_event_input_shape(frame, shape);
    }
    const int64_t global = p->batch * shards_of(p);
    const int64_t per_epoch = p->training ? ds->count / global : (ds->count + global - 1) / global;
    if (per_epoch < 1)
        return sf_fail(SF_ERR_INVALID, "loader: the dataset has %lld samples, fewer than one batch of %lld",
                       (long long)ds->count, (long long)global);
    const size_t chw = (size_t)shape[0] * shape[1] * shape[2];
    if ((size_t)p->timesteps > SIZE_MAX / sizeof(float) / (size_t)p->batch / chw)
        return sf_fail(SF_ERR_INVALID, "loader: a batch of %lld×%lld samples is too large", (long long)p->timesteps,
                       (long long)p->batch);
    const size_t numel = (size_t)p->timesteps * (size_t)p->batch * chw;

    sf_loader *l = calloc(1, sizeof *l);
    if (!l) return sf_fail(SF_ERR_NOMEM, "out of memory");
    l->ds = ds;
    l->p = *p;
    l->per_epoch = per_epoch;
    l->in_use = -1;
    l->order_epoch = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->order = malloc((size_t)ds->count * sizeof *l->order);
    l->idx = malloc((size_t)p->batch * sizeof *l->idx);
    int ok = l->order && l->idx;
    for (int i = 0; i < NUM_SLOTS && ok; i++) {
        slot *s = &l->slots[i];
        s->x = p->memory.alloc ? p->memory.alloc(numel * sizeof *s->x, p->memory.ctx) : malloc(numel * sizeof *s->x);
        s->labels = malloc((size_t)p->batch * sizeof *s->labels);
        ok = s->x && s->labels;
        s->batch = (sf_batch){s->x, s->labels, p->timesteps, p->batch, shape[0], shape[1], shape[2], 0, 0, 0};
    }
    if (!ok) {
        sf_loader_free(l);
        return sf_fail(SF_ERR_NOMEM, "out of memory for loader buffers (2 × %zu floats)", numel);
    }
    if (p->prefetch) {
        if (pthread_create(&l->thread, NULL, worker, l) != 0) {
            sf_loader_free(l);
            return sf_fail(SF_ERR_STATE, "loader: cannot start the prefetch thread");
        }
        l->thread_started = 1;
    }
    *out = l;
    return SF_OK;
}

void sf_loader_free(sf_loader *l)
{
    if (!l) return;
    if (l->thread_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    for (int i = 0; i < NUM_SLOTS; i++) {
        if (l->p.memory.alloc) l->p.memory.release(l->slots[i].x, l->p.memory.ctx);
        else free(l->slots[i].x);
        free(l->slots[i].labels);
    }
    free(l->order);
    free(l->idx);
    free(l);
}

int64_t sf_loader_batches_per_epoch(const sf_loader *l) { return l->per_epoch; }

sf_status sf_loader_next(sf_loader *l, const sf_batch **out)
{
    *out = NULL;
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
    int s = -1;
    if (l->thread_started) {
        /* The worker prepares batches in the order the caller takes them, so the one wanted is the next READY. */
        for (;;) {
            for (int i = 0; i < NUM_SLOTS && s < 0; i++)
                if (l->slots[i].state == SLOT_READY && l->slots[i].batch.epoch == l->next.epoch &&
                    l->slots[i].batch.index == l->next.index)
                    s = i;
            if (s >= 0) break;
            pthread_cond_wait(&l->cv, &l->mu);
        }
    } else {
        s = 0;
        produce(l, l->next, &l->slots[0]);
    }
    l->slots[s].state = SLOT_IN_USE;
    l->in_use = s;
    l->next.index++; /* reaching per_epoch: the next call reports the epoch's end */
    *out = &l->slots[s].batch;
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
    for (int i = 0; i < NUM_SLOTS; i++)
        if (l->slots[i].state == SLOT_READY) l->slots[i].state = SLOT_FREE;
    l->next = *st;
    l->fill = st->index == l->per_epoch ? (sf_loader_state){st->epoch + 1, 0} : *st;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return SF_OK;
}
