/* cifar.c — the CIFAR-10 binary format: records of one label byte followed by a 3×32×32 channel-planar image, five
 * training batches and one test batch. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sf_status sf_cifar_parse(const uint8_t *buf, size_t len, sf_sample_view *out)
{
    memset(out, 0, sizeof *out);
    if (len == 0) return sf_fail(SF_ERR_FORMAT, "CIFAR-10 file is empty");
    if (len % SF_CIFAR_RECORD_BYTES)
        return sf_fail(SF_ERR_FORMAT,
                       "CIFAR-10 file of %zu bytes is not a whole number of %d-byte records (truncated, or not a "
                       "CIFAR-10 binary file)",
                       len, SF_CIFAR_RECORD_BYTES);
    size_t n = len / SF_CIFAR_RECORD_BYTES;
    for (size_t i = 0; i < n; i++)
        if (buf[i * SF_CIFAR_RECORD_BYTES] >= 10)
            return sf_fail(SF_ERR_FORMAT, "CIFAR-10 record %zu has label %d (expected 0..9)", i,
                           buf[i * SF_CIFAR_RECORD_BYTES]);
    *out = (sf_sample_view){.count = (int64_t)n, .channels = 3, .height = 32, .width = 32, .classes = 10,
                            .images = buf + 1, .labels = buf, .image_stride = SF_CIFAR_RECORD_BYTES,
                            .label_stride = SF_CIFAR_RECORD_BYTES};
    return SF_OK;
}

/* One batch file appended to *ds. */
static sf_status load_batch(const sf_dataset_format *f, const char *path, sf_dataset **ds)
{
    if (sf_path_exists(path) && !sf_file_exists(path)) return sf_not_a_file(path);
    if (!sf_file_exists(path))
        return sf_fail(SF_ERR_IO, "%s not found: looked for %s; %s", f->pretty, path, f->provider);
    char *buf = NULL;
    size_t len = 0;
    SF_TRY(sf_read_file_gz(path, SF_DATASET_MAX_FILE_BYTES, &buf, &len));
    sf_sample_view v;
    sf_status s = sf_cifar_parse((const uint8_t *)buf, len, &v);
    if (s == SF_OK) s = sf_dataset_append(ds, &v);
    free(buf);
    return s == SF_OK ? s : sf_fail_context(s, "%s: ", path);
}

sf_status sf_cifar_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                        sf_dataset **out)
{
    char unpacked[4096], path[4096];
    /* Accept the directory of the .bin files or the one the tarball was unpacked in. */
    SF_TRY(sf_path_join(unpacked, sizeof unpacked, dir, "cifar-10-batches-bin"));
    SF_TRY(sf_path_join(path, sizeof path, unpacked, "test_batch.bin"));
    const char *base = sf_file_exists(path) ? unpacked : dir;
    int first = split == SF_SPLIT_TRAIN ? 1 : 0, last = split == SF_SPLIT_TRAIN ? 5 : 0;
    sf_dataset *ds = NULL;
    for (int i = first; i <= last; i++) {
        char name[32];
        snprintf(name, sizeof name, i == 0 ? "test_batch.bin" : "data_batch_%d.bin", i);
        sf_status s = sf_path_join(path, sizeof path, base, name);
        if (s == SF_OK) s = load_batch(f, path, &ds);
        if (s != SF_OK) {
            sf_dataset_free(ds);
            return s;
        }
    }
    *out = ds;
    return SF_OK;
}
