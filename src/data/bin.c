/* bin.c — event streams into T frames per sample: equal time bins over the sample's span or fixed windows, count
 * or binary cells, downsampling and merged polarities, and the seeded event-level augmentation (time jitter,
 * dropped events, spatial or channel shift, flip), all in the loader's prefetch thread (its samples spread over
 * OpenMP threads); and frames binned already (the frame cache's) into batches. */
#include "data/dataset.h"

#include "data/draws.h"

#include <string.h>

void sf_event_frame_shape(int32_t polarities, int32_t height, int32_t width, const sf_event_params *p,
                          int32_t frame[3])
{
    const int32_t d = p->downsample > 1 ? p->downsample : 1;
    frame[0] = p->merge_polarity ? 1 : polarities;
    frame[1] = (height + d - 1) / d;
    frame[2] = (width + d - 1) / d;
}

void sf_event_input_shape(const int32_t frame[3], int32_t shape[3])
{
    const int one_row = frame[1] == 1;
    shape[0] = one_row ? frame[0] * frame[2] : frame[0];
    shape[1] = frame[1];
    shape[2] = one_row ? 1 : frame[2];
}

/* How one sample is augmented, drawn once per (epoch, sample); per-event draws come from event_key. */
typedef struct sample_aug {
    int on, flip;
    int per_event; /* events are dropped or jittered: per-event draws, and the span must be found */
    int64_t dx, dy;
    uint64_t event_key;
} sample_aug;

static sample_aug draw_sample_aug(const sf_dataset *ds, const sf_event_params *ep, uint64_t key, int64_t sample)
{
    sample_aug a = {.on = 1, .event_key = sf_hash3(key, (uint64_t)sample, 1),
                    .per_event = ep->drop_event > 0.0f || ep->time_jitter_us > 0};
    const uint64_t h = sf_hash3(key, (uint64_t)sample, 0);
    const uint64_t span = 2 * (uint64_t)(ep->shift > 0 ? ep->shift : 0) + 1;
    a.dx = (int64_t)((h & 0xfffff) % span) - ep->shift * (span > 1);
    a.dy = ds->height > 1 ? (int64_t)(((h >> 20) & 0xfffff) % span) - ep->shift * (span > 1) : 0;
    a.flip = ep->flip && ((h >> 40) & 1);
    return a;
}

/* Where event i of an augmented sample lands: its time and frame cell; 0 when augmentation dropped it or moved it
 * off the sensor. */
static int place(const sf_dataset *ds, const sf_event_params *ep, const sample_aug *a, const int32_t frame[3],
                 int64_t i, const sf_event *e, int64_t *t, size_t *cell)
{
    int64_t x = e->x, y = e->y, time = e->t;
    if (a->per_event) {
        const uint64_t h = sf_mix64(a->event_key ^ (uint64_t)i);
        if (ep->drop_event > 0.0f && (float)(h >> 40) * (1.0f / 16777216.0f) < ep->drop_event) return 0;
        if (ep->time_jitter_us > 0)
            time += (int64_t)((h & 0xffffffffffull) % (2 * (uint64_t)ep->time_jitter_us + 1)) - ep->time_jitter_us;
    }
    if (a->flip) x = ds->width - 1 - x;
    x += a->dx;
    y += a->dy;
    if (x < 0 || x >= ds->width || y < 0 || y >= ds->height) return 0;
    const int64_t d = ep->downsample > 1 ? ep->downsample : 1;
    *t = time;
    *cell = ((size_t)(ep->merge_polarity ? 0 : e->p) * (size_t)frame[1] + (size_t)(y / d)) * (size_t)frame[2] +
            (size_t)(x / d);
    return 1;
}

/* The smallest time offset from the first event that lands in bin k: bins are advanced by comparing with it,
 * without a division per event. (t - first)·T / span >= k exactly when t - first >= ceil(k·span / T). */
static int64_t bin_edge(const sf_event_params *ep, int64_t k, int64_t T, int64_t span)
{
    return ep->time_window_us > 0 ? k * ep->time_window_us : (k * span + T - 1) / T;
}

static void add_event(float *c, int binary) { *c = binary ? 1.0f : *c + 1.0f; }

/* An unaugmented sample: its events in time order from 0, every one kept. */
static void bin_in_order(const sf_loader_params *p, const int32_t frame[3], const sf_event *ev, int64_t n, float *x0,
                         size_t step)
{
    const sf_event_params *ep = &p->events;
    const int64_t T = p->timesteps, span = (int64_t)ev[n - 1].t + 1, d = ep->downsample > 1 ? ep->downsample : 1;
    const int binary = ep->frame == SF_FRAME_BINARY;
    int64_t bin = 0, edge = bin_edge(ep, 1, T, span);
    for (int64_t i = 0; i < n; i++) {
        const sf_event *e = &ev[i];
        while ((int64_t)e->t >= edge) {
            if (++bin == T) return; /* past the T windows: cut */
            edge = bin_edge(ep, bin + 1, T, span);
        }
        const size_t y = d == 1 ? e->y : (size_t)(e->y / d), x = d == 1 ? e->x : (size_t)(e->x / d);
        const size_t pol = ep->merge_polarity ? 0 : e->p;
        add_event(x0 + (size_t)bin * step + (pol * (size_t)frame[1] + y) * (size_t)frame[2] + x, binary);
    }
}

/* Bins one sample's n events into its T frames at x0, x0 + step, ... (zeroed first). */
static void bin_sample(const sf_dataset *ds, const sf_loader_params *p, const sample_aug *a, const int32_t frame[3],
                       const sf_event *ev, int64_t n, float *x0, size_t step)
{
    const sf_event_params *ep = &p->events;
    const int64_t T = p->timesteps;
    const size_t cells = (size_t)frame[0] * frame[1] * frame[2];
    for (int64_t t = 0; t < T; t++) memset(x0 + (size_t)t * step, 0, cells * sizeof *x0);
    if (n == 0) return;
    if (!a->on) {
        bin_in_order(p, frame, ev, n, x0, step);
        return;
    }
    /* Jittered or dropped events move the span and may leave time order: a first pass finds the span, and bins
     * are divided out per event. Shift and flip leave times alone. */
    int64_t first = 0, last = ev[n - 1].t, time;
    size_t cell;
    if (a->per_event) {
        first = INT64_MAX;
        last = INT64_MIN;
        for (int64_t i = 0; i < n; i++)
            if (place(ds, ep, a, frame, i, &ev[i], &time, &cell)) {
                first = time < first ? time : first;
                last = time > last ? time : last;
            }
        if (first > last) return; /* every event dropped */
    }
    const int64_t span = last - first + 1;
    for (int64_t i = 0; i < n; i++) {
        if (!place(ds, ep, a, frame, i, &ev[i], &time, &cell)) continue;
        const int64_t bin = ep->time_window_us > 0 ? (time - first) / ep->time_window_us : (time - first) * T / span;
        if (bin < T) add_event(x0 + (size_t)bin * step + cell, ep->frame == SF_FRAME_BINARY);
    }
}

void sf_events_bin_batch(const sf_dataset *ds, const sf_loader_params *p, int64_t epoch, const int64_t *idx,
                         int64_t count, float *x)
{
    int32_t frame[3];
    sf_event_frame_shape(ds->channels, ds->height, ds->width, &p->events, frame);
    const size_t step = (size_t)p->batch * (size_t)frame[0] * frame[1] * frame[2];
    const uint64_t key = sf_draw_key(p->seed, SF_DRAW_AUGMENT, epoch);
    const sample_aug none = {0};
    /* Samples are independent: the batch is binned by the OpenMP threads of the calling (prefetch) thread. */
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < count; b++) {
        const int64_t s = idx[b], first = ds->offsets[s];
        const sample_aug a = p->training && p->augment ? draw_sample_aug(ds, &p->events, key, s) : none;
        bin_sample(ds, p, &a, frame, ds->events + first, ds->offsets[s + 1] - first,
                   x + (size_t)b * frame[0] * frame[1] * frame[2], step);
    }
}

void sf_frames_batch(const sf_dataset *ds, const sf_loader_params *p, const int64_t *idx, int64_t count, float *x)
{
    const size_t cells = (size_t)ds->channels * ds->height * ds->width, step = (size_t)p->batch * cells;
    const int binary = p->events.frame == SF_FRAME_BINARY;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t b = 0; b < count; b++)
        for (int64_t t = 0; t < p->timesteps; t++) {
            const uint16_t *src = ds->frames + ((size_t)idx[b] * (size_t)ds->frames_T + (size_t)t) * cells;
            float *dst = x + (size_t)t * step + (size_t)b * cells;
            for (size_t q = 0; q < cells; q++) dst[q] = binary ? (float)(src[q] > 0) : (float)src[q];
        }
}
