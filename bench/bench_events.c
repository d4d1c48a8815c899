/* bench_events.c — loader throughput on event data of each format's size: samples/s of one loader (what its
 * prefetch thread, with its OpenMP threads, can deliver beside a training step) binning synthetic event streams
 * shaped like SHD, N-MNIST and DVS128 Gesture samples, with the binning the example configs use, with and without
 * augmentation.
 *
 * usage: bench_events [batches = 20]
 * The events are uniform over the sensor and the sample's duration (sorted in time); the counts per sample are
 * chosen to be of the order of the real datasets' (stated in the output), not measured from them. Compare the
 * printed samples/s with `spikefuse bench CONFIG` (the training step's samples/s on the GPU): the loader is not
 * the bottleneck while its rate is above the step's. */
#include "bench_clock.h"
#include "core/rng.h"
#include "data/dataset.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct shape {
    const char *name;
    int32_t polarities, height, width;
    int64_t events, duration_us, samples, T, batch;
    sf_event_params bin;
} shape;

/* An event dataset of `samples` samples of `events` uniform events each. */
static sf_dataset *make(const shape *s)
{
    sf_dataset *ds = NULL;
    sf_event *ev = malloc((size_t)s->events * sizeof *ev);
    if (!ev || sf_events_create(s->polarities, s->height, s->width, 2, &ds) != SF_OK) {
        fprintf(stderr, "bench_events: %s\n", sf_last_error());
        exit(1);
    }
    for (int64_t k = 0; k < s->samples; k++) {
        for (int64_t i = 0; i < s->events; i++) {
            const uint64_t h = sf_hash3(7, (uint64_t)k, (uint64_t)i);
            ev[i] = (sf_event){.t = (uint32_t)(i * s->duration_us / s->events),
                               .x = (uint16_t)(h % (uint64_t)s->width),
                               .y = (uint8_t)((h >> 20) % (uint64_t)s->height),
                               .p = (uint8_t)((h >> 40) % (uint64_t)s->polarities)};
        }
        if (sf_events_add_sample(ds, ev, s->events, (int32_t)(k & 1)) != SF_OK) {
            fprintf(stderr, "bench_events: %s\n", sf_last_error());
            exit(1);
        }
    }
    free(ev);
    return ds;
}

/* Samples/s of a synchronous training loader over `batches` batches (after one untimed batch). */
static double rate(const sf_dataset *ds, const shape *s, int augment, int64_t batches)
{
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = s->batch;
    p.timesteps = s->T;
    p.prefetch = 0;
    p.augment = augment;
    p.events = s->bin;
    if (augment) {
        p.events.time_jitter_us = 100;
        p.events.drop_event = 0.1f;
        p.events.shift = 2;
    }
    sf_loader *l = NULL;
    if (sf_loader_create(ds, &p, &l) != SF_OK) {
        fprintf(stderr, "bench_events: %s\n", sf_last_error());
        exit(1);
    }
    const sf_batch *b;
    int64_t done = 0;
    double t0 = 0.0;
    for (int64_t i = 0; i <= batches;) {
        if (sf_loader_next(l, &b) != SF_OK) exit(1);
        if (!b) continue; /* an epoch ended */
        if (i++ == 0) t0 = sf_bench_now_s();
        else done += s->batch;
    }
    const double seconds = sf_bench_now_s() - t0;
    sf_loader_free(l);
    return (double)done / seconds;
}

int main(int argc, char **argv)
{
    const int64_t batches = argc > 1 ? atoll(argv[1]) : 20;
    const shape shapes[] = {
        {"SHD-sized (700 units, 10k events over 1 s, T=100)", 1, 1, 700, 10000, 1000000, 256, 100, 64,
         {.downsample = 1}},
        {"N-MNIST-sized (2x34x34, 4k events over 300 ms, T=10)", 2, 34, 34, 4000, 300000, 256, 10, 64,
         {.downsample = 1}},
        {"DVS128-Gesture-sized (2x128x128, 300k events over 6 s, T=20, downsample 4)", 2, 128, 128, 300000,
         6000000, 48, 20, 16, {.downsample = 4}},
    };
    printf("bench_events: one synchronous loader, %d OpenMP threads, %lld timed batches each\n", omp_get_max_threads(),
           (long long)batches);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        sf_dataset *ds = make(&shapes[i]);
        const double plain = rate(ds, &shapes[i], 0, batches), aug = rate(ds, &shapes[i], 1, batches);
        printf("  %-80s batch %3lld: %9.0f samples/s, with augmentation %9.0f samples/s\n", shapes[i].name,
               (long long)shapes[i].batch, plain, aug);
        sf_dataset_free(ds);
    }
    return 0;
}
