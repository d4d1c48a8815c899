/* fuzz_aedat2.c — libFuzzer target for CIFAR10-DVS's AEDAT 2.0 reader: the buffer parsed into events, added as a
 * sample of a CIFAR10-DVS dataset (the sensor and time checks), then binned. */
#include "fuzz_events.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_event_file(SF_DATASET_CIFAR10DVS, sf_aedat2_parse, SF_AEDAT2_EVENT_BYTES, data, size);
    return 0;
}
