/* fuzz_cifar.c — libFuzzer target for the CIFAR-10 binary reader: the buffer parsed into a view, made into a new
 * dataset, then appended to it again. */
#include "data/dataset.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_sample_view v;
    sf_dataset *ds = NULL;
    if (sf_cifar_parse(data, size, &v) == SF_OK && sf_dataset_append(&ds, &v) == SF_OK) {
        int64_t n = ds->count;
        if (sf_dataset_append(&ds, &v) != SF_OK || ds->count != 2 * n) __builtin_trap();
        volatile uint32_t sum = 0;
        for (int64_t i = 0; i < ds->count; i++) sum += ds->labels[i] + ds->images[i * 3072 + 3071];
        (void)sum;
    }
    sf_dataset_free(ds);
    return 0;
}
