/* fuzz_nmnist.c — libFuzzer target for the N-MNIST .bin reader: the buffer parsed into events, added as a sample
 * of an N-MNIST dataset (the sensor and time checks), then binned. */
#include "fuzz_events.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_event_file(SF_DATASET_NMNIST, sf_nmnist_parse, SF_NMNIST_EVENT_BYTES, data, size);
    return 0;
}
