/* fuzz_gesture.c — libFuzzer target for the DVS128 Gesture readers: the input's first two bytes split it into an
 * AEDAT 3.1 recording, a labels CSV and a trials list; the recording's events are cut into the labelled spans as
 * the loader does, added as samples (the sensor and time checks) and binned. */
#include "data/formats.h"
#include "fuzz_events.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    const size_t a = ((size_t)data[0] | (size_t)data[1] << 8) % (size - 3), b = (size - 2 - a) / 2;
    const uint8_t *aedat = data + 2, *csv = aedat + a, *trials = csv + b;
    const size_t trials_len = size - 2 - a - b;
    char **names = NULL;
    size_t n_names = 0;
    if (sf_gesture_trials_parse((const char *)trials, trials_len, &names, &n_names) == SF_OK) {
        volatile size_t sum = 0;
        for (size_t i = 0; i < n_names; i++) sum += (size_t)names[i][0];
        (void)sum;
    }
    free(names);
    sf_gesture_span spans[16];
    size_t n_spans = 0;
    if (sf_gesture_labels_parse((const char *)csv, b, 11, spans, 16, &n_spans) != SF_OK) n_spans = 0;
    const size_t cap = a / 8 + 1;
    sf_event *ev = malloc(cap * sizeof *ev);
    const sf_dataset_format *f = sf_dataset_format_of(SF_DATASET_DVSGESTURE);
    sf_dataset *ds = NULL;
    int64_t n = 0, origin = 0;
    if (ev && sf_aedat_parse(aedat, a, ev, cap, &n, &origin) == SF_OK && n <= (int64_t)cap &&
        sf_events_create(f->channels, f->height, f->width, f->classes, &ds) == SF_OK) {
        sf_status s = SF_OK;
        for (size_t i = 0; i < n_spans && s == SF_OK; i++) {
            int64_t lo = 0, hi = 0;
            while (lo < n && (int64_t)ev[lo].t + origin < spans[i].start) lo++;
            for (hi = lo; hi < n && (int64_t)ev[hi].t + origin < spans[i].end;) hi++;
            s = sf_events_add_sample(ds, ev + lo, hi - lo, spans[i].label);
        }
        if (n_spans == 0) s = sf_events_add_sample(ds, ev, n, 0);
        if (s == SF_OK) fuzz_bin_all(ds, data, size);
    }
    sf_dataset_free(ds);
    free(ev);
    return 0;
}
