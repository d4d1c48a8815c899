/* fuzz_cifar.c — libFuzzer target for the CIFAR-10 and CIFAR-100 binary readers: the buffer parsed into a view
 * (CIFAR-10, then CIFAR-100 with fine and coarse labels), made into a new dataset, then appended to it again. */
#include "data/dataset.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int kind = 0; kind < 3; kind++) {
        sf_sample_view v;
        sf_dataset *ds = NULL;
        const sf_status s = kind == 0 ? sf_cifar_parse(data, size, &v) : sf_cifar100_parse(data, size, kind == 2, &v);
        if (s == SF_OK && sf_dataset_append(&ds, &v) == SF_OK) {
            int64_t n = ds->count;
            if (sf_dataset_append(&ds, &v) != SF_OK || ds->count != 2 * n) __builtin_trap();
            volatile uint32_t sum = 0;
            for (int64_t i = 0; i < ds->count; i++) {
                if (ds->labels[i] < 0 || ds->labels[i] >= ds->classes) __builtin_trap();
                sum += (uint32_t)ds->labels[i] + ds->images[i * 3072 + 3071];
            }
            (void)sum;
        }
        sf_dataset_free(ds);
    }
    return 0;
}
