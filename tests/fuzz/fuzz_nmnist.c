/* fuzz_nmnist.c — libFuzzer target for the N-MNIST .bin reader: the buffer parsed into events, added as a sample
 * of an N-MNIST dataset (the sensor and time checks), then binned. */
#include "data/formats.h"
#include "fuzz_events.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const sf_dataset_format *f = sf_dataset_format_of(SF_DATASET_NMNIST);
    sf_event *ev = malloc((size / 5 + 1) * sizeof *ev);
    sf_dataset *ds = NULL;
    int64_t n = 0;
    if (ev && sf_nmnist_parse(data, size, ev, &n) == SF_OK && n <= (int64_t)(size / 5) &&
        sf_events_create(f->channels, f->height, f->width, f->classes, &ds) == SF_OK &&
        sf_events_add_sample(ds, ev, n, (int32_t)(size % 10)) == SF_OK)
        fuzz_bin_all(ds, data, size);
    sf_dataset_free(ds);
    free(ev);
    return 0;
}
