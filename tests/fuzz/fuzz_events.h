/* fuzz_events.h — what the event-reader fuzz targets share: binning every sample of the dataset a fuzzed file
 * made, with binning and augmentation parameters taken from the input's first bytes, so out-of-range events or
 * offsets that slipped past the readers' checks show up under ASan/UBSan in the binning. */
#ifndef SF_FUZZ_EVENTS_H
#define SF_FUZZ_EVENTS_H

#include "data/formats.h"

#include <stdlib.h>

static inline void fuzz_bin_all(const sf_dataset *ds, const uint8_t *knobs, size_t n_knobs)
{
    if (!ds || ds->count == 0 || n_knobs < 4) return;
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 1;
    p.timesteps = 1 + knobs[0] % 7;
    p.training = knobs[1] & 1;
    p.augment = 1;
    p.events = (sf_event_params){.time_window_us = knobs[1] & 2 ? 1 + knobs[2] * 37 : 0,
                                 .frame = (knobs[1] >> 2) & 1,
                                 .downsample = 1 + knobs[3] % 5,
                                 .merge_polarity = (knobs[1] >> 3) & 1,
                                 .time_jitter_us = knobs[1] & 16 ? knobs[2] : 0,
                                 .drop_event = knobs[1] & 32 ? 0.5f : 0.0f,
                                 .shift = knobs[1] & 64 ? knobs[3] % 9 : 0,
                                 .flip = knobs[1] >> 7};
    int32_t frame[3];
    sf_event_frame_shape(ds->channels, ds->height, ds->width, &p.events, frame);
    float *x = malloc((size_t)p.timesteps * (size_t)frame[0] * frame[1] * frame[2] * sizeof *x);
    if (!x) return;
    for (int64_t i = 0; i < ds->count; i++) sf_events_bin_batch(ds, &p, 1, &i, 1, x);
    free(x);
}

/* A fuzzed file of an event format whose reader fills a buffer of len / bytes_per_event events: parsed, added as a
 * sample of a dataset of that format (the sensor and time checks), then binned. */
static inline void fuzz_event_file(sf_dataset_kind kind, sf_status (*parse)(const uint8_t *, size_t, sf_event *,
                                                                             int64_t *),
                                   size_t bytes_per_event, const uint8_t *data, size_t size)
{
    const sf_dataset_format *f = sf_dataset_format_of(kind);
    sf_event *ev = malloc((size / bytes_per_event + 1) * sizeof *ev);
    sf_dataset *ds = NULL;
    int64_t n = 0;
    if (ev && parse(data, size, ev, &n) == SF_OK && n <= (int64_t)(size / bytes_per_event) &&
        sf_events_create(f->channels, f->height, f->width, f->classes, &ds) == SF_OK &&
        sf_events_add_sample(ds, ev, n, (int32_t)(size % 10)) == SF_OK)
        fuzz_bin_all(ds, data, size);
    sf_dataset_free(ds);
    free(ev);
}

#endif
