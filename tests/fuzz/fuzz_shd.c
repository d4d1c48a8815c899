/* fuzz_shd.c — libFuzzer target for what the SHD/SSC reader does with the arrays libhdf5 hands over: the input is
 * one sample's arrays (a count byte, a units-count byte, times as doubles, units as 32-bit integers) through
 * sf_shd_sample_events and the sample checks, then binned. The HDF5 container itself is libhdf5's to parse and
 * is not fed fuzzed bytes: libhdf5 1.10.8 loops inside H5HG_read on a corrupted global heap within seconds of
 * fuzzing (seen when this target did so), which is libhdf5's to fix, not a check spikefuse can add. */
#include "data/formats.h"
#include "fuzz_events.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const sf_dataset_format *f = sf_dataset_format_of(SF_DATASET_SHD);
    sf_dataset *ds = NULL;
    if (size < 1) return 0;
    const size_t n = data[0], n_units = size > 1 ? data[1] : 0;
    if (size < 2 + n * 12) return 0;
    double *times = malloc((n + 1) * sizeof *times);
    uint32_t *units = malloc((n + 1) * sizeof *units);
    sf_event *ev = malloc((n + 1) * sizeof *ev);
    if (times && units && ev) {
        memcpy(times, data + 2, n * sizeof *times);
        memcpy(units, data + 2 + n * sizeof *times, n * sizeof *units);
        if (sf_shd_sample_events(times, n, units, n_units % (n + 1) == n ? n : n_units, ev) == SF_OK &&
            sf_events_create(f->channels, f->height, f->width, f->classes, &ds) == SF_OK &&
            sf_events_add_sample(ds, ev, (int64_t)n, (int32_t)(size % 20)) == SF_OK)
            fuzz_bin_all(ds, data, size);
    }
    sf_dataset_free(ds);
    free(times);
    free(units);
    free(ev);
    return 0;
}
