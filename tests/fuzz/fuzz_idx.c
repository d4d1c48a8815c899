/* fuzz_idx.c — libFuzzer target for the IDX reader: one buffer parsed alone, then split into an images and a
 * labels file (the first two bytes choose where) and turned into a dataset. */
#include "data/dataset.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_idx_view v;
    if (sf_idx_parse(data, size, &v) == SF_OK) {
        /* Touch every element the view claims, so a view past the buffer shows up under ASan. */
        volatile uint8_t sum = 0;
        for (int64_t i = 0; i < v.numel; i++) sum += v.data[i];
        (void)sum;
    }
    if (size < 2) return 0;
    size_t split = ((size_t)data[0] | (size_t)data[1] << 8) % (size - 1);
    const uint8_t *rest = data + 2;
    sf_sample_view samples;
    sf_dataset *ds = NULL;
    if (sf_idx_samples(rest, split, rest + split, size - 2 - split, 10, &samples) == SF_OK &&
        sf_dataset_append(&ds, &samples) == SF_OK) {
        volatile uint32_t sum = 0;
        for (int64_t i = 0; i < ds->count; i++) sum += ds->labels[i] + ds->images[i];
        (void)sum;
    }
    sf_dataset_free(ds);
    return 0;
}
