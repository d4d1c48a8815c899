/* dataset.c — dataset kinds, in-memory datasets, and loading a split from its files on disk (with messages that
 * say where the files were looked for and what provides them). */
#include "data/dataset.h"

#include "core/error.h"
#include "io/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Larger files than this are refused: the biggest real one (CIFAR-10 train batch) is 30 MB. */
#define SF_DATASET_MAX_FILE_BYTES ((size_t)1 << 31)
#define SF_DATASET_MAX_SIDE 16384

static const struct {
    const char *name, *pretty, *default_dir;
    int32_t channels, side;
    float mean[3], std[3];
} kinds[] = {
    [SF_DATASET_FASHION_MNIST] = {"fashion-mnist", "Fashion-MNIST", "/usr/share/datasets/fashion-mnist", 1, 28,
                                  {0.2860f}, {0.3530f}},
    [SF_DATASET_MNIST] = {"mnist", "MNIST", "data/mnist", 1, 28, {0.1307f}, {0.3081f}},
    [SF_DATASET_CIFAR10] = {"cifar10", "CIFAR-10", "data/cifar-10-batches-bin", 3, 32,
                            {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}},
};
#define NUM_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

sf_status sf_dataset_kind_parse(const char *name, sf_dataset_kind *out)
{
    for (int i = 0; i < NUM_KINDS; i++)
        if (name && strcmp(name, kinds[i].name) == 0) {
            *out = (sf_dataset_kind)i;
            return SF_OK;
        }
    return sf_fail(SF_ERR_INVALID, "unknown dataset '%s' (expected fashion-mnist, mnist or cifar10)",
                   name ? name : "(null)");
}

const char *sf_dataset_kind_name(sf_dataset_kind kind)
{
    return (unsigned)kind < NUM_KINDS ? kinds[kind].name : "?";
}

const char *sf_dataset_default_dir(sf_dataset_kind kind)
{
    return (unsigned)kind < NUM_KINDS ? kinds[kind].default_dir : "";
}

void sf_dataset_kind_shape(sf_dataset_kind kind, int32_t *channels, int32_t *height, int32_t *width,
                           int32_t *classes)
{
    int k = (unsigned)kind < NUM_KINDS ? (int)kind : 0;
    *channels = kinds[k].channels;
    *height = *width = kinds[k].side;
    *classes = 10;
}

void sf_dataset_kind_stats(sf_dataset_kind kind, float mean[SF_DATASET_MAX_CHANNELS],
                           float std[SF_DATASET_MAX_CHANNELS])
{
    int k = (unsigned)kind < NUM_KINDS ? (int)kind : 0;
    for (int c = 0; c < SF_DATASET_MAX_CHANNELS; c++) {
        mean[c] = c < kinds[k].channels ? kinds[k].mean[c] : 0.0f;
        std[c] = c < kinds[k].channels ? kinds[k].std[c] : 1.0f;
    }
}

sf_status sf_dataset_create(int64_t count, int32_t channels, int32_t height, int32_t width, int32_t classes,
                            sf_dataset **out)
{
    *out = NULL;
    if (count < 0 || channels < 1 || channels > SF_DATASET_MAX_CHANNELS || height < 1 ||
        height > SF_DATASET_MAX_SIDE || width < 1 || width > SF_DATASET_MAX_SIDE || classes < 1 || classes > 256)
        return sf_fail(SF_ERR_INVALID,
                       "dataset of %lld samples of %d×%d×%d with %d classes: channels must be 1..%d, sides 1..%d, "
                       "classes 1..256",
                       (long long)count, channels, height, width, classes, SF_DATASET_MAX_CHANNELS,
                       SF_DATASET_MAX_SIDE);
    size_t sample = (size_t)channels * (size_t)height * (size_t)width;
    if ((uint64_t)count > SIZE_MAX / 2 / sample)
        return sf_fail(SF_ERR_INVALID, "dataset of %lld samples of %zu bytes is too large", (long long)count, sample);
    sf_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return sf_fail(SF_ERR_NOMEM, "out of memory");
    ds->count = count;
    ds->channels = channels;
    ds->height = height;
    ds->width = width;
    ds->classes = classes;
    ds->images = calloc(count ? (size_t)count * sample : 1, 1);
    ds->labels = calloc(count ? (size_t)count : 1, 1);
    if (!ds->images || !ds->labels) {
        sf_dataset_free(ds);
        return sf_fail(SF_ERR_NOMEM, "out of memory for %lld samples of %zu bytes", (long long)count, sample);
    }
    for (int c = 0; c < SF_DATASET_MAX_CHANNELS; c++) ds->std[c] = 1.0f;
    *out = ds;
    return SF_OK;
}

void sf_dataset_free(sf_dataset *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    free(ds);
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* What provides each dataset, for the message when it is missing. */
static const char *provider(sf_dataset_kind kind)
{
    switch (kind) {
    case SF_DATASET_FASHION_MNIST:
        return "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist), or set "
               "data_dir to a directory holding the files of https://github.com/zalandoresearch/fashion-mnist";
    case SF_DATASET_MNIST:
        return "download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and "
               "t10k-labels-idx1-ubyte.gz from https://ossci-datasets.s3.amazonaws.com/mnist/ (a mirror of "
               "http://yann.lecun.com/exdb/mnist/) into data_dir";
    case SF_DATASET_CIFAR10:
        return "download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and unpack it with tar xzf, then "
               "set data_dir to the cifar-10-batches-bin directory (or the one holding it)";
    }
    return "";
}

/* dir/name into out ("dir" alone when name is empty). */
static sf_status path_join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s%s%s", dir, *name ? "/" : "", name);
    if (n < 0 || (size_t)n >= cap) return sf_fail(SF_ERR_INVALID, "path %s/%s is too long", dir, name);
    return SF_OK;
}

/* The IDX file `stem` in dir: stem.gz or stem. */
static sf_status find_idx(sf_dataset_kind kind, const char *dir, const char *stem, char *path, size_t cap)
{
    char name[80];
    snprintf(name, sizeof name, "%s.gz", stem);
    SF_TRY(path_join(path, cap, dir, name));
    if (file_exists(path)) return SF_OK;
    SF_TRY(path_join(path, cap, dir, stem));
    if (file_exists(path)) return SF_OK;
    return sf_fail(SF_ERR_IO, "%s not found: looked for %s/%s.gz and %s/%s; %s", kinds[kind].pretty, dir, stem,
                   dir, stem, provider(kind));
}

static sf_status load_idx_split(sf_dataset_kind kind, const char *dir, sf_split split, sf_dataset **out)
{
    const char *prefix = split == SF_SPLIT_TRAIN ? "train" : "t10k";
    char stem[64], img_path[4096], lbl_path[4096];
    snprintf(stem, sizeof stem, "%s-images-idx3-ubyte", prefix);
    SF_TRY(find_idx(kind, dir, stem, img_path, sizeof img_path));
    snprintf(stem, sizeof stem, "%s-labels-idx1-ubyte", prefix);
    SF_TRY(find_idx(kind, dir, stem, lbl_path, sizeof lbl_path));
    char *img = NULL, *lbl = NULL;
    size_t img_len = 0, lbl_len = 0;
    sf_status s = sf_read_file_gz(img_path, SF_DATASET_MAX_FILE_BYTES, &img, &img_len);
    if (s == SF_OK) s = sf_read_file_gz(lbl_path, SF_DATASET_MAX_FILE_BYTES, &lbl, &lbl_len);
    if (s == SF_OK) {
        s = sf_idx_to_dataset((const uint8_t *)img, img_len, (const uint8_t *)lbl, lbl_len, 10, out);
        if (s != SF_OK) s = sf_fail_context(s, "%s with %s: ", img_path, lbl_path);
    }
    free(img);
    free(lbl);
    return s;
}

static sf_status load_cifar_split(const char *dir, sf_split split, sf_dataset **out)
{
    char base[4096], path[4096];
    /* Accept the directory of the .bin files or the one the tarball was unpacked in. */
    SF_TRY(path_join(base, sizeof base, dir, "cifar-10-batches-bin"));
    SF_TRY(path_join(path, sizeof path, base, "test_batch.bin"));
    if (!file_exists(path)) SF_TRY(path_join(base, sizeof base, dir, ""));
    int first = split == SF_SPLIT_TRAIN ? 1 : 0, last = split == SF_SPLIT_TRAIN ? 5 : 0;
    sf_dataset *ds = NULL;
    for (int i = first; i <= last; i++) {
        char name[32];
        snprintf(name, sizeof name, i == 0 ? "test_batch.bin" : "data_batch_%d.bin", i);
        sf_status s = path_join(path, sizeof path, base, name);
        if (s == SF_OK && !file_exists(path))
            s = sf_fail(SF_ERR_IO, "CIFAR-10 not found: looked for %s; %s", path, provider(SF_DATASET_CIFAR10));
        char *buf = NULL;
        size_t len = 0;
        if (s == SF_OK) s = sf_read_file_gz(path, SF_DATASET_MAX_FILE_BYTES, &buf, &len);
        if (s == SF_OK) {
            s = sf_cifar_parse((const uint8_t *)buf, len, &ds);
            if (s != SF_OK) s = sf_fail_context(s, "%s: ", path);
        }
        free(buf);
        if (s != SF_OK) {
            sf_dataset_free(ds);
            return s;
        }
    }
    *out = ds;
    return SF_OK;
}

sf_status sf_dataset_load(sf_dataset_kind kind, const char *dir, sf_split split, sf_dataset **out)
{
    *out = NULL;
    if ((unsigned)kind >= NUM_KINDS) return sf_fail(SF_ERR_INVALID, "unknown dataset kind %d", (int)kind);
    if (!dir || !*dir) dir = kinds[kind].default_dir;
    sf_status s =
        kind == SF_DATASET_CIFAR10 ? load_cifar_split(dir, split, out) : load_idx_split(kind, dir, split, out);
    if (s != SF_OK) return s;
    sf_dataset *ds = *out;
    if (ds->channels != kinds[kind].channels || ds->height != kinds[kind].side || ds->width != kinds[kind].side) {
        s = sf_fail(SF_ERR_FORMAT, "%s in %s holds %d×%d×%d images, expected %d×%d×%d", kinds[kind].pretty, dir,
                    ds->channels, ds->height, ds->width, kinds[kind].channels, kinds[kind].side, kinds[kind].side);
        sf_dataset_free(ds);
        *out = NULL;
        return s;
    }
    sf_dataset_kind_stats(kind, ds->mean, ds->std);
    return SF_OK;
}
