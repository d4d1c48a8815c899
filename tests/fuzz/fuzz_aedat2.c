/* fuzz_aedat2.c — libFuzzer target for CIFAR10-DVS's AEDAT 2.0 reader: the buffer parsed into events, added as a
 * sample of a CIFAR10-DVS dataset (the sensor and time checks), then binned. */
#include "data/formats.h"
#include "fuzz_events.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const sf_dataset_format *f = sf_dataset_format_of(SF_DATASET_CIFAR10DVS);
    sf_event *ev = malloc((size / 8 + 1) * sizeof *ev);
    sf_dataset *ds = NULL;
    int64_t n = 0;
    if (ev && sf_aedat2_parse(data, size, ev, &n) == SF_OK && n <= (int64_t)(size / 8) &&
        sf_events_create(f->channels, f->height, f->width, f->classes, &ds) == SF_OK &&
        sf_events_add_sample(ds, ev, n, (int32_t)(size % 10)) == SF_OK)
        fuzz_bin_all(ds, data, size);
    sf_dataset_free(ds);
    free(ev);
    return 0;
}
