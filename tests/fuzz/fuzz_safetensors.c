/* fuzz_safetensors.c — libFuzzer target for the safetensors parser: parse, then read every tensor it accepted
 * (as float32 and float64) and look up metadata. */
#include "io/safetensors.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_safetensors *st = NULL;
    if (sf_safetensors_parse(data, size, &st) != SF_OK) return 0;
    for (int32_t i = 0; i < st->count; i++) {
        const sf_st_entry *e = &st->entries[i];
        /* Names are unique, so find must return this very entry. */
        if (sf_safetensors_find(st, e->name) != e) __builtin_trap();
        if (e->numel > (1 << 20)) continue; /* the data section bounds it already; keep the fuzzer fast */
        float *f = malloc((size_t)e->numel * sizeof *f + 1);
        double *d = malloc((size_t)e->numel * sizeof *d + 1);
        if (f && d) {
            if (sf_safetensors_get_f32(st, e->name, f, e->numel) != SF_OK) __builtin_trap();
            if (sf_safetensors_get_f64(st, e->name, d, e->numel) != SF_OK) __builtin_trap();
        }
        free(f);
        free(d);
    }
    (void)sf_safetensors_meta(st, "config");
    sf_safetensors_free(st);
    return 0;
}
