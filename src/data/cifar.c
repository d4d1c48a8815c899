/* cifar.c — the CIFAR binary formats: CIFAR-10's records of one label byte followed by a 3×32×32 channel-planar
 * image (five training batches, one test batch), and CIFAR-100's of a coarse and a fine label byte followed by the
 * same image (one training file, one test file). */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a record keeps what: its size, the label byte used and its range, the other label byte of CIFAR-100 (also
 * checked: a record whose other label is out of range is damaged) and its range, and the image. */
typedef struct cifar_layout {
    const char *name;
    size_t record, label_at, image_at;
    int classes;
    int other_at, other_classes; /* -1: none */
} cifar_layout;

static const cifar_layout cifar10 = {"CIFAR-10", SF_CIFAR_RECORD_BYTES, 0, 1, 10, -1, 0};

static cifar_layout cifar100(int coarse)
{
    return (cifar_layout){"CIFAR-100", SF_CIFAR100_RECORD_BYTES, coarse ? 0 : 1, 2, coarse ? 20 : 100,
                          coarse ? 1 : 0, coarse ? 100 : 20};
}

static sf_status parse(const cifar_layout *c, const uint8_t *buf, size_t len, sf_sample_view *out)
{
    memset(out, 0, sizeof *out);
    if (len == 0) return sf_fail(SF_ERR_FORMAT, "%s file is empty", c->name);
    if (len % c->record)
        return sf_fail(SF_ERR_FORMAT,
                       "%s file of %zu bytes is not a whole number of %zu-byte records (truncated, or not a %s "
                       "binary file)",
                       c->name, len, c->record, c->name);
    const size_t n = len / c->record;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = buf + i * c->record;
        for (int k = 0; k < (c->other_at < 0 ? 1 : 2); k++) {
            const size_t at = k ? (size_t)c->other_at : c->label_at;
            const int classes = k ? c->other_classes : c->classes;
            if (r[at] >= classes)
                return sf_fail(SF_ERR_FORMAT, "%s record %zu has %slabel %d (expected 0..%d)", c->name, i,
                               c->other_at < 0 ? "" : at == 0 ? "coarse " : "fine ", r[at], classes - 1);
        }
    }
    *out = (sf_sample_view){.count = (int64_t)n, .channels = 3, .height = 32, .width = 32, .classes = c->classes,
                            .images = buf + c->image_at, .labels = buf + c->label_at, .image_stride = c->record,
                            .label_stride = c->record};
    return SF_OK;
}

sf_status sf_cifar_parse(const uint8_t *buf, size_t len, sf_sample_view *out)
{
    return parse(&cifar10, buf, len, out);
}

sf_status sf_cifar100_parse(const uint8_t *buf, size_t len, int coarse, sf_sample_view *out)
{
    const cifar_layout c = cifar100(coarse);
    return parse(&c, buf, len, out);
}

/* One file appended to *ds. */
static sf_status load_file(const sf_dataset_format *f, const cifar_layout *c, const char *path, sf_dataset **ds)
{
    if (sf_path_exists(path) && !sf_file_exists(path)) return sf_not_a_file(path);
    if (!sf_file_exists(path))
        return sf_fail(SF_ERR_IO, "%s not found: looked for %s; %s", f->pretty, path, f->provider);
    char *buf = NULL;
    size_t len = 0;
    SF_TRY(sf_read_file_gz(path, SF_DATASET_MAX_FILE_BYTES, &buf, &len));
    sf_sample_view v;
    sf_status s = parse(c, (const uint8_t *)buf, len, &v);
    if (s == SF_OK) s = sf_dataset_append(ds, &v);
    free(buf);
    return s == SF_OK ? s : sf_fail_context(s, "%s: ", path);
}

/* The files `names` (NULL-terminated) of one split, in dir or in dir/unpacked (where the tarball unpacks). */
static sf_status load_files(const sf_dataset_format *f, const cifar_layout *c, const char *dir, const char *unpacked,
                            const char *const *names, sf_dataset **out)
{
    char inner[4096], path[4096];
    /* Accept the directory of the files or the one the tarball was unpacked in. */
    SF_TRY(sf_path_join(inner, sizeof inner, dir, unpacked));
    SF_TRY(sf_path_join(path, sizeof path, inner, names[0]));
    const char *base = sf_file_exists(path) ? inner : dir;
    sf_dataset *ds = NULL;
    for (int i = 0; names[i]; i++) {
        sf_status s = sf_path_join(path, sizeof path, base, names[i]);
        if (s == SF_OK) s = load_file(f, c, path, &ds);
        if (s != SF_OK) {
            sf_dataset_free(ds);
            return s;
        }
    }
    *out = ds;
    return SF_OK;
}

sf_status sf_cifar_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                        sf_dataset **out)
{
    static const char *const train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                        "data_batch_4.bin", "data_batch_5.bin", NULL};
    static const char *const test[] = {"test_batch.bin", NULL};
    return load_files(f, &cifar10, dir, "cifar-10-batches-bin", split == SF_SPLIT_TRAIN ? train : test, out);
}

sf_status sf_cifar100_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                           sf_dataset **out)
{
    static const char *const train[] = {"train.bin", NULL}, *const test[] = {"test.bin", NULL};
    const cifar_layout c = cifar100(p->coarse_labels);
    return load_files(f, &c, dir, "cifar-100-binary", split == SF_SPLIT_TRAIN ? train : test, out);
}
