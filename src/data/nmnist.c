/* nmnist.c — N-MNIST (Orchard et al. 2015): one .bin file per sample under Train/<digit>/ and Test/<digit>/ of
 * the unzipped Train.zip and Test.zip. Each event is 5 bytes: x (8 bits), y (8 bits), then polarity (1 bit) and
 * a timestamp in µs (23 bits), big-endian; an event with y = 240 is not an event but marks a timestamp overflow,
 * after which 2^13 µs are added to the timestamps (as the dataset's published reader does). Sensor 34×34. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMNIST_EVENT_BYTES 5
#define NMNIST_OVERFLOW_Y 240
#define NMNIST_OVERFLOW_US (1u << 13)
/* The largest file accepted: real samples are a few tens of kilobytes. */
#define NMNIST_MAX_FILE_BYTES ((size_t)64 << 20)

sf_status sf_nmnist_parse(const uint8_t *buf, size_t len, sf_event *out, int64_t *n)
{
    *n = 0;
    if (len % NMNIST_EVENT_BYTES)
        return sf_fail(SF_ERR_FORMAT, "%zu bytes is not a whole number of 5-byte events (truncated file?)", len);
    uint32_t offset = 0;
    int64_t k = 0;
    for (size_t i = 0; i < len; i += NMNIST_EVENT_BYTES) {
        const uint8_t *b = buf + i;
        const uint32_t t = (uint32_t)(b[2] & 0x7f) << 16 | (uint32_t)b[3] << 8 | b[4];
        if (b[1] == NMNIST_OVERFLOW_Y) {
            if (offset > UINT32_MAX - (1u << 23) - NMNIST_OVERFLOW_US)
                return sf_fail(SF_ERR_FORMAT, "event %zu: too many timestamp overflows", i / NMNIST_EVENT_BYTES);
            offset += NMNIST_OVERFLOW_US;
            continue;
        }
        out[k++] = (sf_event){.t = t + offset, .x = b[0], .y = b[1], .p = (uint8_t)(b[2] >> 7)};
    }
    *n = k;
    return SF_OK;
}

/* The samples of one digit's folder appended to ds, in file-name order. */
static sf_status load_digit(const char *folder, int digit, sf_dataset *ds, sf_event **scratch, size_t *cap)
{
    char **names = NULL;
    size_t count = 0;
    SF_TRY(sf_dir_list(folder, ".bin", &names, &count));
    sf_status s = SF_OK;
    for (size_t i = 0; i < count && s == SF_OK; i++) {
        char path[4096];
        char *buf = NULL;
        size_t len = 0;
        int64_t n = 0;
        s = sf_path_join(path, sizeof path, folder, names[i]);
        if (s == SF_OK) s = sf_read_file(path, NMNIST_MAX_FILE_BYTES, &buf, &len);
        if (s == SF_OK && len / NMNIST_EVENT_BYTES > *cap) {
            sf_event *grown = realloc(*scratch, len / NMNIST_EVENT_BYTES * sizeof **scratch);
            if (!grown) s = sf_fail(SF_ERR_NOMEM, "out of memory for %zu events", len / NMNIST_EVENT_BYTES);
            else *scratch = grown, *cap = len / NMNIST_EVENT_BYTES;
        }
        if (s == SF_OK) s = sf_nmnist_parse((const uint8_t *)buf, len, *scratch, &n);
        if (s == SF_OK) s = sf_events_add_sample(ds, *scratch, n, digit);
        if (s != SF_OK) s = sf_fail_context(s, "%s: ", path);
        free(buf);
    }
    free(names);
    return s;
}

sf_status sf_nmnist_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                         sf_dataset **out)
{
    const char *part = split == SF_SPLIT_TRAIN ? "Train" : "Test";
    char base[4096], folder[4096];
    SF_TRY(sf_path_join(base, sizeof base, dir, part));
    sf_dataset *ds = NULL;
    SF_TRY(sf_events_create(f->channels, f->height, f->width, f->classes, &ds));
    sf_event *scratch = NULL;
    size_t cap = 0;
    sf_status s = SF_OK;
    for (int digit = 0; digit < 10 && s == SF_OK; digit++) {
        char name[4];
        snprintf(name, sizeof name, "%d", digit);
        s = sf_path_join(folder, sizeof folder, base, name);
        if (s == SF_OK && !sf_dir_exists(folder))
            s = sf_fail(SF_ERR_IO, "%s not found: looked for the folder %s; %s", f->pretty, folder, f->provider);
        if (s == SF_OK) s = load_digit(folder, digit, ds, &scratch, &cap);
    }
    free(scratch);
    if (s != SF_OK) {
        sf_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SF_OK;
}
