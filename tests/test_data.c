/* test_data.c — dataset readers (IDX plain and gzipped, CIFAR-10) on files written here, every corrupt-file case,
 * the encodings' properties, shuffling, the loader (order, partial evaluation batches, prefetch, exact resume),
 * and the real Fashion-MNIST when it is installed. */
#include "data/dataset.h"
#include "data/draws.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];

/* ---------------------------------------------------------------- writing test files */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX buffer of unsigned bytes with the given dims; the data is filled by pattern (value = (i·7 + salt) & 255,
 * or i % mod for labels when mod > 0). Returns its length; the caller frees *out. */
static size_t make_idx(int ndim, const uint32_t *dims, int mod, int salt, uint8_t **out)
{
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= dims[i];
    size_t len = 4 + 4 * (size_t)ndim + numel;
    uint8_t *b = calloc(len, 1);
    b[2] = 0x08;
    b[3] = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++) put_be32(b + 4 + 4 * i, dims[i]);
    for (size_t i = 0; i < numel; i++)
        b[4 + 4 * ndim + i] = (uint8_t)(mod > 0 ? (int)(i % (size_t)mod) : (int)((i * 7 + (size_t)salt) & 255));
    *out = b;
    return len;
}

static void write_file(const char *path, const uint8_t *buf, size_t len, int gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        CHECK(f != NULL, "cannot create %s", path);
        if (!f) return;
        CHECK(gzwrite(f, buf, (unsigned)len) == (int)len, "gzwrite %s", path);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL, "cannot create %s", path);
        if (!f) return;
        CHECK(fwrite(buf, 1, len, f) == len, "fwrite %s", path);
        fclose(f);
    }
}

static void path_in(char *out, size_t cap, const char *sub, const char *name)
{
    snprintf(out, cap, "%s/%s%s%s", tmpdir, sub, *sub ? "/" : "", name);
}

/* An MNIST-shaped split (N images of 28×28 and N labels) in tmpdir/sub, gzipped or not. */
static void write_mnist_split(const char *sub, const char *prefix, uint32_t n, int gz)
{
    char dir[512], path[600];
    path_in(dir, sizeof dir, sub, "");
    if (access(dir, F_OK) != 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
    uint32_t idims[3] = {n, 28, 28}, ldims[1] = {n};
    uint8_t *im, *lb;
    size_t ilen = make_idx(3, idims, 0, 3, &im), llen = make_idx(1, ldims, 10, 0, &lb);
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
    write_file(path, im, ilen, gz);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
    write_file(path, lb, llen, gz);
    free(im);
    free(lb);
}

/* ---------------------------------------------------------------- readers */

static void expect_fail(sf_status got, sf_status want, const char *needle, const char *what)
{
    CHECK(got == want, "%s: status %s, expected %s (%s)", what, sf_status_str(got), sf_status_str(want),
          sf_last_error());
    CHECK(strstr(sf_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what, sf_last_error(), needle);
}

static void test_idx_files(void)
{
    for (int gz = 0; gz <= 1; gz++) {
        const char *sub = gz ? "mnist-gz" : "mnist-plain";
        write_mnist_split(sub, "train", 23, gz);
        write_mnist_split(sub, "t10k", 9, gz);
        char dir[512];
        path_in(dir, sizeof dir, sub, "");
        sf_dataset *tr = NULL, *te = NULL;
        CHECK_OK(sf_dataset_load(SF_DATASET_MNIST, dir, SF_SPLIT_TRAIN, NULL, &tr));
        CHECK_OK(sf_dataset_load(SF_DATASET_MNIST, dir, SF_SPLIT_TEST, NULL, &te));
        if (!tr || !te) return;
        CHECK(tr->count == 23 && te->count == 9, "counts %lld %lld", (long long)tr->count, (long long)te->count);
        CHECK(tr->channels == 1 && tr->height == 28 && tr->width == 28 && tr->classes == 10, "shape");
        int bad = 0;
        for (int64_t i = 0; i < tr->count * 784; i++) bad += tr->images[i] != (uint8_t)((i * 7 + 3) & 255);
        for (int64_t i = 0; i < tr->count; i++) bad += tr->labels[i] != i % 10;
        CHECK(bad == 0, "%s: %d bytes differ from what was written", sub, bad);
        CHECK(fabsf(tr->mean[0] - 0.1307f) < 1e-6f && fabsf(tr->std[0] - 0.3081f) < 1e-6f, "MNIST statistics");
        sf_dataset_free(tr);
        sf_dataset_free(te);
    }
}

static void test_idx_corrupt(void)
{
    uint32_t idims[3] = {4, 5, 6}, ldims[1] = {4};
    uint8_t *im, *lb;
    size_t ilen = make_idx(3, idims, 0, 0, &im), llen = make_idx(1, ldims, 10, 0, &lb);
    sf_dataset *ds = NULL;
    sf_sample_view samples;
    CHECK_OK(sf_idx_samples(im, ilen, lb, llen, 10, &samples));
    CHECK_OK(sf_dataset_append(&ds, &samples));
    CHECK(ds && ds->count == 4 && ds->height == 5 && ds->width == 6, "small IDX pair");
    /* Appending: the same samples again double it; samples of another shape are refused and change nothing. */
    CHECK_OK(sf_dataset_append(&ds, &samples));
    int same = ds && ds->count == 8;
    for (int64_t i = 0; same && i < 4 * 30; i++) same = ds->images[i] == ds->images[4 * 30 + i];
    for (int64_t i = 0; same && i < 4; i++) same = ds->labels[i] == ds->labels[4 + i];
    CHECK(same, "appended samples repeat the first ones");
    sf_sample_view other = samples;
    other.width = 5;
    expect_fail(sf_dataset_append(&ds, &other), SF_ERR_INVALID, "to a dataset of 1×5×6", "append of another shape");
    CHECK(ds && ds->count == 8, "a refused append leaves the dataset as it was");
    sf_dataset_free(ds);

    uint8_t *c = malloc(ilen + 8);
    sf_idx_view v;
#define MUTATE(stmt, len, needle, what)                                                                             \
    do {                                                                                                            \
        memcpy(c, im, ilen);                                                                                        \
        stmt;                                                                                                       \
        expect_fail(sf_idx_parse(c, len, &v), SF_ERR_FORMAT, needle, what);                                         \
    } while (0)
    MUTATE((void)0, 3, "too short", "3-byte file");
    MUTATE(c[0] = 0x1f, ilen, "magic", "bad magic");
    MUTATE(c[2] = 0x0d, ilen, "type 0x0d", "float element type");
    MUTATE(c[3] = 0, ilen, "0 dimensions", "no dimensions");
    MUTATE(c[3] = 9, ilen, "9 dimensions", "too many dimensions");
    MUTATE((void)0, 10, "header", "truncated header");
    MUTATE((void)0, ilen - 1, "truncated", "truncated data");
    MUTATE(c[ilen] = 0, ilen + 1, "disagrees", "extra bytes");
    MUTATE(put_be32(c + 8, 0), ilen, "is 0", "zero dimension");
    MUTATE(put_be32(c + 4, 0xffffffffu); put_be32(c + 8, 0xffffffffu); put_be32(c + 12, 0xffffffffu), ilen,
           "truncated", "absurd dimensions (product overflows 64 bits)");
#undef MUTATE
    free(c);

    uint32_t l5[1] = {5}, l3d[3] = {4, 1, 1};
    uint8_t *lb5, *lb3;
    size_t l5len = make_idx(1, l5, 10, 0, &lb5), l3len = make_idx(3, l3d, 10, 0, &lb3);
    expect_fail(sf_idx_samples(im, ilen, lb5, l5len, 10, &samples), SF_ERR_FORMAT, "4 images, 5 labels",
                "count mismatch");
    expect_fail(sf_idx_samples(im, ilen, lb3, l3len, 10, &samples), SF_ERR_FORMAT, "labels", "labels with 3 dims");
    expect_fail(sf_idx_samples(lb, llen, lb, llen, 10, &samples), SF_ERR_FORMAT, "images", "1-D images");
    lb[4 + 4 + 2] = 10;
    expect_fail(sf_idx_samples(im, ilen, lb, llen, 10, &samples), SF_ERR_FORMAT, "label 10 of sample 2",
                "label out of range");
    CHECK(samples.count == 0 && samples.images == NULL, "no samples on failure");
    free(lb5);
    free(lb3);
    free(im);
    free(lb);
}

static void test_missing_and_broken_files(void)
{
    char dir[512], path[600];
    sf_dataset *ds = NULL;
    path_in(dir, sizeof dir, "nowhere", "");
    expect_fail(sf_dataset_load(SF_DATASET_FASHION_MNIST, dir, SF_SPLIT_TRAIN, NULL, &ds), SF_ERR_IO,
                "apt-get install dataset-fashion-mnist", "missing Fashion-MNIST names the package");
    CHECK(strstr(sf_last_error(), dir) != NULL, "missing dataset names the path: %s", sf_last_error());
    expect_fail(sf_dataset_load(SF_DATASET_MNIST, dir, SF_SPLIT_TEST, NULL, &ds), SF_ERR_IO,
                "t10k-images-idx3-ubyte.gz", "missing MNIST names the file");
    expect_fail(sf_dataset_load(SF_DATASET_CIFAR10, dir, SF_SPLIT_TRAIN, NULL, &ds), SF_ERR_IO,
                "cifar-10-binary.tar.gz", "missing CIFAR-10 names the download");

    /* A gzip file cut short, and a labels file that belongs to another dataset size. */
    write_mnist_split("broken-gz", "train", 12, 1);
    path_in(dir, sizeof dir, "broken-gz", "");
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    FILE *f = fopen(path, "rb");
    uint8_t buf[1 << 14];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    write_file(path, buf, n / 2, 0);
    expect_fail(sf_dataset_load(SF_DATASET_MNIST, dir, SF_SPLIT_TRAIN, NULL, &ds), SF_ERR_FORMAT, "train-images",
                "truncated gzip");
    write_mnist_split("mismatch", "train", 12, 0);
    write_mnist_split("mismatch-labels", "train", 13, 0);
    char from[600], to[600], cmd[1400];
    path_in(from, sizeof from, "mismatch-labels", "train-labels-idx1-ubyte");
    path_in(to, sizeof to, "mismatch", "train-labels-idx1-ubyte");
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    CHECK(system(cmd) == 0, "%s", cmd);
    path_in(dir, sizeof dir, "mismatch", "");
    expect_fail(sf_dataset_load(SF_DATASET_MNIST, dir, SF_SPLIT_TRAIN, NULL, &ds), SF_ERR_FORMAT,
                "12 images, 13 labels", "images and labels disagree");
    /* Images of the wrong size for the dataset kind. */
    uint32_t idims[3] = {3, 5, 5}, ldims[1] = {3};
    uint8_t *im, *lb;
    size_t ilen = make_idx(3, idims, 0, 0, &im), llen = make_idx(1, ldims, 10, 0, &lb);
    path_in(dir, sizeof dir, "mismatch", "train-images-idx3-ubyte");
    write_file(dir, im, ilen, 0);
    path_in(dir, sizeof dir, "mismatch", "train-labels-idx1-ubyte");
    write_file(dir, lb, llen, 0);
    path_in(dir, sizeof dir, "mismatch", "");
    expect_fail(sf_dataset_load(SF_DATASET_MNIST, dir, SF_SPLIT_TRAIN, NULL, &ds), SF_ERR_FORMAT, "expected 1×28×28",
                "wrong image size for MNIST");
    free(im);
    free(lb);
    CHECK(ds == NULL, "no dataset on failure");
}

/* CIFAR-10 batches of n records each with label (i + file) % 10 and image bytes (i·13 + j + file) & 255. */
static uint8_t *make_cifar(int n, int file, size_t *len)
{
    *len = (size_t)n * SF_CIFAR_RECORD_BYTES;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < n; i++) {
        uint8_t *r = b + (size_t)i * SF_CIFAR_RECORD_BYTES;
        r[0] = (uint8_t)((i + file) % 10);
        for (int j = 0; j < 3072; j++) r[1 + j] = (uint8_t)((i * 13 + j + file) & 255);
    }
    return b;
}

static void test_cifar(void)
{
    char dir[512], sub[512], path[700];
    path_in(dir, sizeof dir, "cifar", "");
    path_in(sub, sizeof sub, "cifar", "cifar-10-batches-bin");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", sub);
    CHECK(system(cmd) == 0, "%s", cmd);
    for (int file = 0; file <= 5; file++) {
        size_t len;
        uint8_t *b = make_cifar(3 + file, file, &len);
        if (file == 0)
            snprintf(path, sizeof path, "%s/test_batch.bin", sub);
        else
            snprintf(path, sizeof path, "%s/data_batch_%d.bin", sub, file);
        write_file(path, b, len, file == 2); /* one of them gzipped: the reader takes both */
        free(b);
    }
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(sf_dataset_load(SF_DATASET_CIFAR10, dir, SF_SPLIT_TRAIN, NULL, &tr)); /* the parent of the .bin folder */
    CHECK_OK(sf_dataset_load(SF_DATASET_CIFAR10, sub, SF_SPLIT_TEST, NULL, &te));  /* the .bin folder itself */
    if (!tr || !te) return;
    CHECK(tr->count == 4 + 5 + 6 + 7 + 8 && te->count == 3, "CIFAR counts %lld %lld", (long long)tr->count,
          (long long)te->count);
    CHECK(tr->channels == 3 && tr->height == 32 && tr->classes == 10, "CIFAR shape");
    /* Sample 4 + 2 is record 2 of data_batch_2. */
    const uint8_t *img = tr->images + (size_t)6 * 3072;
    int bad = tr->labels[6] != (2 + 2) % 10;
    for (int j = 0; j < 3072; j++) bad += img[j] != (uint8_t)((2 * 13 + j + 2) & 255);
    CHECK(bad == 0, "CIFAR record content (%d bytes differ)", bad);
    CHECK(fabsf(tr->mean[2] - 0.4465f) < 1e-6f && fabsf(tr->std[1] - 0.2435f) < 1e-6f, "CIFAR statistics");
    sf_dataset_free(tr);
    sf_dataset_free(te);

    size_t len;
    uint8_t *b = make_cifar(2, 0, &len);
    sf_sample_view samples;
    expect_fail(sf_cifar_parse(b, len - 1, &samples), SF_ERR_FORMAT, "whole number", "truncated CIFAR");
    expect_fail(sf_cifar_parse(b, 0, &samples), SF_ERR_FORMAT, "empty", "empty CIFAR");
    b[SF_CIFAR_RECORD_BYTES] = 200;
    expect_fail(sf_cifar_parse(b, len, &samples), SF_ERR_FORMAT, "record 1 has label 200",
                "CIFAR label out of range");
    CHECK(samples.count == 0 && samples.images == NULL, "no samples on failure");
    snprintf(path, sizeof path, "%s/test_batch.bin", sub);
    write_file(path, b, len, 0); /* with a bad label */
    expect_fail(sf_dataset_load(SF_DATASET_CIFAR10, dir, SF_SPLIT_TEST, NULL, &te), SF_ERR_FORMAT, "test_batch.bin",
                "corrupt CIFAR file named");
    snprintf(path, sizeof path, "%s/data_batch_4.bin", sub);
    CHECK(unlink(path) == 0, "unlink %s", path);
    expect_fail(sf_dataset_load(SF_DATASET_CIFAR10, dir, SF_SPLIT_TRAIN, NULL, &tr), SF_ERR_IO, "data_batch_4.bin",
                "missing CIFAR batch named");
    free(b);
}

/* CIFAR-100 records: coarse label (r + salt) % 20, fine label (3r + salt) % 100, pixel bytes (r·7 + j) & 255. */
static uint8_t *make_cifar100(int n, int salt, size_t *len)
{
    *len = (size_t)n * SF_CIFAR100_RECORD_BYTES;
    uint8_t *b = malloc(*len);
    for (int r = 0; r < n; r++) {
        uint8_t *rec = b + (size_t)r * SF_CIFAR100_RECORD_BYTES;
        rec[0] = (uint8_t)((r + salt) % 20);
        rec[1] = (uint8_t)((3 * r + salt) % 100);
        for (int j = 0; j < 3072; j++) rec[2 + j] = (uint8_t)((r * 7 + j) & 255);
    }
    return b;
}

static void test_cifar100(void)
{
    char dir[512], sub[512], path[700], cmd[600];
    path_in(dir, sizeof dir, "cifar100", "");
    path_in(sub, sizeof sub, "cifar100", "cifar-100-binary");
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", sub);
    CHECK(system(cmd) == 0, "%s", cmd);
    for (int file = 0; file < 2; file++) {
        size_t len;
        uint8_t *b = make_cifar100(file ? 7 : 40, file, &len);
        snprintf(path, sizeof path, "%s/%s", sub, file ? "test.bin" : "train.bin");
        write_file(path, b, len, file); /* the test file gzipped */
        free(b);
    }
    sf_data_params p;
    sf_data_default_params(&p);
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(sf_dataset_load(SF_DATASET_CIFAR100, dir, SF_SPLIT_TRAIN, &p, &tr));
    CHECK_OK(sf_dataset_load(SF_DATASET_CIFAR100, sub, SF_SPLIT_TEST, &p, &te));
    if (!tr || !te) return;
    CHECK(tr->count == 40 && te->count == 7 && tr->classes == 100 && tr->channels == 3 && tr->height == 32,
          "CIFAR-100 counts and shape");
    int bad = 0;
    for (int r = 0; r < 40; r++) {
        bad += tr->labels[r] != (3 * r) % 100;
        for (int j = 0; j < 3072; j++) bad += tr->images[(size_t)r * 3072 + j] != (uint8_t)((r * 7 + j) & 255);
    }
    CHECK(bad == 0 && te->labels[2] == 7, "fine labels and images read back (%d differ)", bad);
    CHECK(fabsf(tr->mean[0] - 0.5071f) < 1e-6f && fabsf(tr->std[2] - 0.2762f) < 1e-6f, "CIFAR-100 statistics");
    sf_dataset_free(tr);
    sf_dataset_free(te);
    p.coarse_labels = 1;
    CHECK_OK(sf_dataset_load(SF_DATASET_CIFAR100, dir, SF_SPLIT_TRAIN, &p, &tr));
    CHECK(tr && tr->classes == 20 && tr->labels[25] == 5, "the coarse labels: 20 classes");
    int32_t shape[3], classes = 0;
    sf_data_input_shape(SF_DATASET_CIFAR100, &p, shape, &classes);
    CHECK(classes == 20 && shape[0] == 3 && shape[2] == 32, "the input shape and classes follow the labels chosen");
    sf_dataset_free(tr);

    size_t len;
    uint8_t *b = make_cifar100(3, 0, &len);
    sf_sample_view v;
    expect_fail(sf_cifar100_parse(b, len - 5, 0, &v), SF_ERR_FORMAT, "whole number of 3074-byte records",
                "truncated CIFAR-100");
    expect_fail(sf_cifar_parse(b, len, &v), SF_ERR_FORMAT, "not a CIFAR-10 binary file",
                "a CIFAR-100 file read as CIFAR-10");
    b[SF_CIFAR100_RECORD_BYTES + 1] = 100;
    expect_fail(sf_cifar100_parse(b, len, 0, &v), SF_ERR_FORMAT, "record 1 has fine label 100 (expected 0..99)",
                "a fine label out of range");
    expect_fail(sf_cifar100_parse(b, len, 1, &v), SF_ERR_FORMAT, "record 1 has fine label 100",
                "the other label is checked too");
    b[SF_CIFAR100_RECORD_BYTES + 1] = 0;
    b[2 * SF_CIFAR100_RECORD_BYTES] = 20;
    expect_fail(sf_cifar100_parse(b, len, 1, &v), SF_ERR_FORMAT, "record 2 has coarse label 20 (expected 0..19)",
                "a coarse label out of range");
    snprintf(path, sizeof path, "%s/train.bin", sub);
    write_file(path, b, len, 0);
    expect_fail(sf_dataset_load(SF_DATASET_CIFAR100, dir, SF_SPLIT_TRAIN, &p, &tr), SF_ERR_FORMAT, "train.bin",
                "a corrupt file is named");
    CHECK(unlink(path) == 0, "unlink %s", path);
    expect_fail(sf_dataset_load(SF_DATASET_CIFAR100, dir, SF_SPLIT_TRAIN, &p, &tr), SF_ERR_IO,
                "cifar-100-binary.tar.gz", "a missing file names where CIFAR-100 is published");
    free(b);
}

/* ---------------------------------------------------------------- encodings */

/* A dataset of n samples of c×h×w with pixel bytes (s·31 + j·17) & 255 and label s % classes. */
static sf_dataset *synthetic(int64_t n, int c, int h, int w)
{
    sf_dataset *ds = NULL;
    CHECK_OK(sf_dataset_create(n, c, h, w, 10, &ds));
    size_t chw = (size_t)c * h * w;
    for (int64_t s = 0; s < n; s++) {
        ds->labels[s] = (int32_t)(s % 10);
        for (size_t j = 0; j < chw; j++) ds->images[s * chw + j] = (uint8_t)((s * 31 + (int64_t)j * 17) & 255);
    }
    for (int i = 0; i < c; i++) {
        ds->mean[i] = 0.25f + 0.1f * (float)i;
        ds->std[i] = 0.5f - 0.05f * (float)i;
    }
    return ds;
}

static void test_encodings(void)
{
    sf_dataset *ds = synthetic(5, 2, 3, 4);
    const size_t chw = 24;
    int64_t idx[2] = {3, 1};
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 2;
    p.timesteps = 3;

    /* direct: the image at every step, raw or normalised with the dataset's or the given statistics. */
    float x[3 * 2 * 24];
    for (int norm = 0; norm <= 2; norm++) {
        p.normalize = norm > 0;
        p.mean[0] = norm == 2 ? 0.5f : 0.0f;
        p.mean[1] = norm == 2 ? 0.1f : 0.0f;
        p.std[0] = norm == 2 ? 2.0f : 0.0f;
        p.std[1] = norm == 2 ? 4.0f : 0.0f;
        sf_encode_batch(ds, &p, 0, idx, 2, x);
        double worst = 0;
        for (int t = 0; t < 3; t++)
            for (int b = 0; b < 2; b++)
                for (size_t j = 0; j < chw; j++) {
                    int c = (int)(j / 12);
                    double v = ds->images[idx[b] * chw + j] / 255.0;
                    if (norm == 1) v = (v - ds->mean[c]) / ds->std[c];
                    if (norm == 2) v = (v - p.mean[c]) / p.std[c];
                    worst = fmax(worst, fabs(x[(t * 2 + b) * chw + j] - v));
                }
        CHECK(worst < 1e-6, "direct encoding (normalize mode %d) differs from the image by %g", norm, worst);
    }

    /* poisson: binary, rate ≈ intensity, a pure function of (seed, epoch, sample, t, pixel). */
    sf_dataset *one = NULL;
    CHECK_OK(sf_dataset_create(1, 1, 1, 16, 10, &one));
    for (int j = 0; j < 16; j++) one->images[j] = (uint8_t)(j * 17); /* 0, 17, ..., 255 */
    sf_loader_params q;
    sf_loader_default_params(&q);
    q.encoding = SF_ENCODING_POISSON;
    q.batch = 1;
    q.timesteps = 20000;
    q.seed = 7;
    float *spk = malloc(20000 * 16 * sizeof *spk), *spk2 = malloc(20000 * 16 * sizeof *spk2);
    int64_t zero = 0;
    sf_encode_batch(one, &q, 3, &zero, 1, spk);
    int nonbinary = 0;
    for (int j = 0; j < 16; j++) {
        double r = 0, pr = j * 17 / 255.0;
        for (int t = 0; t < 20000; t++) {
            r += spk[t * 16 + j];
            nonbinary += spk[t * 16 + j] != 0.0f && spk[t * 16 + j] != 1.0f;
        }
        r /= 20000;
        double sigma = sqrt(pr * (1 - pr) / 20000) + 1e-12;
        CHECK(fabs(r - pr) <= 4.5 * sigma, "poisson rate of intensity %.3f is %.4f (%.1f sigma)", pr, r,
              fabs(r - pr) / sigma);
    }
    CHECK(nonbinary == 0, "poisson spikes are 0 or 1 (%d are not)", nonbinary);
    int off_formula = 0;
    const uint64_t key = sf_draw_key(7, SF_DRAW_POISSON, 3);
    for (int t = 0; t < 20000; t++)
        for (int j = 0; j < 16; j++)
            off_formula += spk[t * 16 + j] != (sf_uniform(key, 0, (uint64_t)t * 16 + (uint64_t)j) < j * 17 / 255.0f);
    CHECK(off_formula == 0, "poisson spikes are uniform(key(seed, epoch), sample, t·CHW + pixel) < x (%d differ)",
          off_formula);
    sf_encode_batch(one, &q, 3, &zero, 1, spk2);
    CHECK(memcmp(spk, spk2, 20000 * 16 * sizeof *spk) == 0, "poisson draws repeat for the same epoch");
    sf_encode_batch(one, &q, 4, &zero, 1, spk2);
    CHECK(memcmp(spk, spk2, 20000 * 16 * sizeof *spk) != 0, "poisson draws change with the epoch");
    free(spk);
    free(spk2);

    /* latency: one spike at round((T-1)(1-x)) for x > 0, none for x == 0. */
    q.encoding = SF_ENCODING_LATENCY;
    q.timesteps = 8;
    float lat[8 * 16];
    sf_encode_batch(one, &q, 0, &zero, 1, lat);
    int wrong = 0;
    for (int j = 0; j < 16; j++) {
        int count = 0, at = -1;
        for (int t = 0; t < 8; t++)
            if (lat[t * 16 + j] != 0.0f) {
                count++;
                at = t;
                wrong += lat[t * 16 + j] != 1.0f;
            }
        double xv = j * 17 / 255.0;
        int want = j == 0 ? -1 : (int)lround(7 * (1 - xv));
        wrong += j == 0 ? count != 0 : (count != 1 || at != want);
    }
    CHECK(wrong == 0, "latency encoding: %d pixels spike wrongly", wrong);
    CHECK(lat[0 * 16 + 15] == 1.0f, "the brightest pixel (x = 1) spikes at step 0");
    sf_dataset_free(one);
    sf_dataset_free(ds);
}

/* With augmentation each output image is the source shifted by (dy, dx) in [-pad, pad]² (zeros outside) and maybe
 * mirrored; find that transform. */
static int matches_some_view(const sf_dataset *ds, const uint8_t *src, const float *out, int pad, int *flipped)
{
    const int C = ds->channels, H = ds->height, W = ds->width;
    for (int flip = 0; flip <= 1; flip++)
        for (int dy = -pad; dy <= pad; dy++)
            for (int dx = -pad; dx <= pad; dx++) {
                int ok = 1;
                for (int c = 0; c < C && ok; c++)
                    for (int y = 0; y < H && ok; y++)
                        for (int x = 0; x < W && ok; x++) {
                            int sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
                            float v = sy < 0 || sy >= H || sx < 0 || sx >= W ? 0.0f
                                                                               : src[(c * H + sy) * W + sx] / 255.0f;
                            ok = fabsf(out[(c * H + y) * W + x] - v) < 1e-7f;
                        }
                if (ok) {
                    *flipped = flip;
                    return 1;
                }
            }
    return 0;
}

static void test_augmentation(void)
{
    sf_dataset *ds = synthetic(40, 3, 12, 10);
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 40;
    p.normalize = 0;
    p.augment = 1;
    p.seed = 11;
    int64_t idx[40];
    for (int i = 0; i < 40; i++) idx[i] = i;
    float *x = malloc(40 * 360 * sizeof *x), *y = malloc(40 * 360 * sizeof *y);
    sf_encode_batch(ds, &p, 0, idx, 40, x);
    int matched = 0, flips = 0, identical = 0;
    for (int b = 0; b < 40; b++) {
        int f = 0;
        matched += matches_some_view(ds, ds->images + b * 360, x + b * 360, 4, &f);
        flips += f;
        int same = 1;
        for (int j = 0; j < 360 && same; j++) same = x[b * 360 + j] == ds->images[b * 360 + j] / 255.0f;
        identical += same;
    }
    CHECK(matched == 40, "every augmented image is a crop/flip of its source (%d of 40)", matched);
    CHECK(flips > 5 && flips < 35, "about half the images are mirrored (%d of 40)", flips);
    CHECK(identical < 10, "most augmented images differ from the source (%d identical)", identical);
    sf_encode_batch(ds, &p, 1, idx, 40, y);
    CHECK(memcmp(x, y, 40 * 360 * sizeof *x) != 0, "augmentation changes with the epoch");
    p.training = 0;
    sf_encode_batch(ds, &p, 0, idx, 40, y);
    int raw = 0;
    for (int j = 0; j < 40 * 360; j++) raw += y[j] == ds->images[j] / 255.0f;
    CHECK(raw == 40 * 360, "evaluation never augments");
    p.training = 1;
    p.crop_pad = 0; /* the flip alone */
    sf_encode_batch(ds, &p, 0, idx, 40, y);
    int flips_only = 0;
    flips = 0;
    for (int b = 0; b < 40; b++) {
        int f = 0;
        flips_only += matches_some_view(ds, ds->images + b * 360, y + b * 360, 0, &f);
        flips += f;
    }
    CHECK(flips_only == 40 && flips > 5 && flips < 35, "crop_pad 0: every image is its source or its mirror (%d of 40, "
          "%d mirrored)", flips_only, flips);
    free(x);
    free(y);
    sf_dataset_free(ds);
}

/* The crop/flip of sample `s` as drawn before random erasing existed (index 0 of the sample's augmentation stream),
 * computed here to pin it: erasing must leave it as it was. */
static void crop_flip_reference(const sf_dataset *ds, const sf_loader_params *p, int64_t epoch, int64_t s, float *out)
{
    const int C = ds->channels, H = ds->height, W = ds->width, pad = p->crop_pad;
    const uint64_t r = sf_hash3(sf_draw_key(p->seed, SF_DRAW_AUGMENT, epoch), (uint64_t)s, 0);
    const uint64_t span = 2 * (uint64_t)pad + 1;
    const int dy = (int)(r % span) - pad, dx = (int)((r >> 16) % span) - pad, flip = (int)((r >> 40) & 1);
    const uint8_t *src = ds->images + (size_t)s * C * H * W;
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
                out[(c * H + y) * W + x] =
                    sy < 0 || sy >= H || sx < 0 || sx >= W ? 0.0f : src[(c * H + sy) * W + sx] / 255.0f;
            }
}

typedef struct box {
    int y, x, h, w;
} box;

/* The bounding box of the zeros of one image's channel 0 (h = 0: none); returns whether the zeros are exactly that
 * box in every channel and every other pixel equals `ref`. */
static int erased_box(const float *img, const float *ref, int C, int H, int W, box *b)
{
    int y0 = H, y1 = -1, x0 = W, x1 = -1;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            if (img[y * W + x] == 0.0f) {
                y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1;
                x0 = x < x0 ? x : x0, x1 = x > x1 ? x : x1;
            }
    *b = y1 < 0 ? (box){0, 0, 0, 0} : (box){y0, x0, y1 - y0 + 1, x1 - x0 + 1};
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                const int q = (c * H + y) * W + x, in = y >= b->y && y < b->y + b->h && x >= b->x && x < b->x + b->w;
                if (in ? img[q] != 0.0f : img[q] != ref[q]) return 0;
            }
    return 1;
}

/* Random erasing: erase_p 0 leaves the crop/flip bitwise as it was; erase_p 1 zeroes one rectangle per training
 * sample, the same for the same epoch and another in the next; evaluation is never erased. */
static void test_random_erasing(void)
{
    enum { N = 40, C = 3, H = 16, W = 16, CHW = C * H * W };
    sf_dataset *ds = synthetic(N, C, H, W);
    for (size_t j = 0; j < (size_t)N * CHW; j++) ds->images[j] |= 1; /* no pixel is 0 before erasing */
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = N;
    p.normalize = 0;
    p.augment = 1;
    p.seed = 5;
    int64_t idx[N];
    for (int i = 0; i < N; i++) idx[i] = i;
    float *x = malloc(N * CHW * sizeof *x), *y = malloc(N * CHW * sizeof *y), ref[CHW];
    CHECK(p.erase_p == 0.0f, "erasing is off by default");
    sf_encode_batch(ds, &p, 2, idx, N, x);
    int unchanged = 0;
    for (int b = 0; b < N; b++) {
        crop_flip_reference(ds, &p, 2, b, ref);
        unchanged += memcmp(x + b * CHW, ref, sizeof ref) == 0;
    }
    CHECK(unchanged == N, "erase_p 0: every image is bitwise the crop/flip of before (%d of %d)", unchanged, N);

    p.crop_pad = 0; /* the flip alone, so that the only zeros are erased ones */
    p.erase_p = 1;
    sf_encode_batch(ds, &p, 2, idx, N, x);
    box at[N];
    int one_box = 0, sized = 0, moved = 0, twins = 0;
    double fraction = 0;
    for (int b = 0; b < N; b++) {
        crop_flip_reference(ds, &p, 2, b, ref);
        one_box += erased_box(x + b * CHW, ref, C, H, W, &at[b]) && at[b].h > 0;
        /* h and w are sqrt(s·H·W·r) and sqrt(s·H·W / r) rounded: some s in [0.02, 0.33] must round to them. */
        const double h = at[b].h, w = at[b].w;
        sized += (h - 0.5) * (w - 0.5) <= 0.33 * H * W && (h + 0.5) * (w + 0.5) >= 0.02 * H * W;
        fraction += h * w / (H * W) / N;
        moved += at[b].y > 0 || at[b].x > 0;
        twins += b > 0 && memcmp(&at[b], &at[b - 1], sizeof(box)) == 0;
    }
    CHECK(one_box == N, "erase_p 1: every image is its flip with one zeroed rectangle in all channels (%d of %d)",
          one_box, N);
    CHECK(sized == N, "every rectangle's area fraction is in [0.02, 0.33] up to rounding (%d of %d)", sized, N);
    CHECK(fraction > 0.1 && fraction < 0.25, "the mean area fraction %.3f is about (0.02 + 0.33) / 2", fraction);
    CHECK(moved > N / 2, "the rectangles lie anywhere, not in the corner (%d of %d moved)", moved, N);
    CHECK(twins <= 2, "each sample draws its own rectangle (%d like the previous sample's)", twins);
    p.normalize = 1;
    sf_encode_batch(ds, &p, 2, idx, N, y);
    int normalised = 0;
    for (int j = 0; j < N * CHW; j++) {
        const int c = j / (H * W) % C;
        normalised += y[j] == (x[j] - ds->mean[c]) / ds->std[c];
    }
    CHECK(normalised == N * CHW, "erasing comes before normalisation (%d of %d pixels)", normalised, N * CHW);
    p.normalize = 0;
    sf_encode_batch(ds, &p, 2, idx, N, y);
    CHECK(memcmp(x, y, N * CHW * sizeof *x) == 0, "the same seed and epoch erase the same rectangles");
    sf_encode_batch(ds, &p, 3, idx, N, y);
    int same = 0;
    for (int b = 0; b < N; b++) {
        box e;
        crop_flip_reference(ds, &p, 3, b, ref);
        same += erased_box(y + b * CHW, ref, C, H, W, &e) && memcmp(&e, &at[b], sizeof e) == 0;
    }
    CHECK(same <= 2, "another epoch erases other rectangles (%d of %d the same)", same, N);

    p.training = 0;
    sf_encode_batch(ds, &p, 2, idx, N, y);
    int raw = 0;
    for (int j = 0; j < N * CHW; j++) raw += y[j] == ds->images[j] / 255.0f;
    CHECK(raw == N * CHW, "evaluation is never erased");
    p.training = 1;
    p.augment = 0;
    sf_encode_batch(ds, &p, 2, idx, N, y);
    raw = 0;
    for (int j = 0; j < N * CHW; j++) raw += y[j] == ds->images[j] / 255.0f;
    CHECK(raw == N * CHW, "training without augment is never erased");
    sf_loader *l = NULL;
    p.erase_p = 1.5f;
    CHECK(sf_loader_create(ds, &p, &l) == SF_ERR_INVALID && !l && strstr(sf_last_error(), "erase_p 1.5"),
          "the loader refuses erase_p 1.5: %s", sf_last_error());
    free(x);
    free(y);
    sf_dataset_free(ds);
}

/* ---------------------------------------------------------------- shuffling and the loader */

static void test_shuffle(void)
{
    enum { N = 1000 };
    int64_t a[N], b[N], c[N];
    sf_shuffle_order(5, 0, N, a);
    sf_shuffle_order(5, 0, N, b);
    sf_shuffle_order(5, 1, N, c);
    char seen[N] = {0};
    int dup = 0, fixed = 0;
    for (int i = 0; i < N; i++) {
        dup += a[i] < 0 || a[i] >= N || seen[a[i]]++;
        fixed += a[i] == i;
    }
    CHECK(dup == 0, "the order is a permutation");
    CHECK(fixed < 10, "a shuffle leaves few samples in place (%d)", fixed);
    CHECK(memcmp(a, b, sizeof a) == 0, "the order is deterministic from (seed, epoch)");
    CHECK(memcmp(a, c, sizeof a) != 0, "the order differs across epochs");
    sf_shuffle_order(6, 0, N, c);
    CHECK(memcmp(a, c, sizeof a) != 0, "the order differs across seeds");
}

static int batch_equal(const sf_batch *a, const sf_batch *b)
{
    size_t n = (size_t)(a->T * a->B * a->C * a->H * a->W);
    return a->epoch == b->epoch && a->index == b->index && a->valid == b->valid &&
           memcmp(a->x, b->x, n * sizeof(float)) == 0 && memcmp(a->labels, b->labels, (size_t)a->B * 4) == 0;
}

/* An allocator that counts what it hands out and takes back (a trainer's is page-locked memory for a GPU). */
static int live_batches, batch_allocs;
static void *counted_alloc(size_t bytes, void *ctx)
{
    (void)ctx;
    live_batches++, batch_allocs++;
    return malloc(bytes);
}
static void counted_release(void *p, void *ctx)
{
    (void)ctx;
    live_batches -= p != NULL;
    free(p);
}

static void test_loader_training(void)
{
    sf_dataset *ds = synthetic(53, 1, 4, 5);
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 8;
    p.timesteps = 2;
    p.encoding = SF_ENCODING_POISSON;
    p.seed = 99;
    sf_loader *sync = NULL, *pre = NULL;
    p.prefetch = 0;
    CHECK_OK(sf_loader_create(ds, &p, &sync));
    p.prefetch = 1;
    p.memory = (sf_batch_memory){counted_alloc, counted_release, NULL}; /* the batches in the caller's memory */
    CHECK_OK(sf_loader_create(ds, &p, &pre));
    p.memory = (sf_batch_memory){0};
    CHECK(batch_allocs == 2 && live_batches == 2, "the loader took its two batches from the allocator given (%d, %d)",
          batch_allocs, live_batches);
    if (!sync || !pre) return;
    CHECK(sf_loader_batches_per_epoch(pre) == 6, "training drops the incomplete last batch (6 of 8)");
    int64_t order[53];
    int same = 1, labels_ok = 1, ends = 0, distinct = 1;
    for (int epoch = 0; epoch < 3; epoch++) {
        sf_shuffle_order(99, epoch, 53, order);
        char seen[53] = {0};
        for (int i = 0;; i++) {
            const sf_batch *a, *b;
            CHECK_OK(sf_loader_next(sync, &a));
            CHECK_OK(sf_loader_next(pre, &b));
            if (!a || !b) {
                ends += !a && !b && i == 6;
                break;
            }
            same &= batch_equal(a, b);
            for (int k = 0; k < 8; k++) {
                int64_t s = order[i * 8 + k];
                labels_ok &= a->labels[k] == ds->labels[s] && a->valid == 8 && a->epoch == epoch && a->index == i;
                distinct &= !seen[s]++;
            }
        }
    }
    CHECK(ends == 3, "each epoch ends after 6 batches with a NULL batch (%d of 3)", ends);
    CHECK(same, "the prefetching loader delivers exactly the synchronous loader's batches");
    CHECK(labels_ok, "labels follow the epoch's shuffled order");
    CHECK(distinct, "no sample appears twice in an epoch");

    /* Resume: save the state mid-epoch, take the next batches, restore into fresh loaders, compare. */
    sf_loader_state st, st2;
    const sf_batch *b;
    CHECK_OK(sf_loader_next(pre, &b));
    CHECK_OK(sf_loader_next(pre, &b));
    sf_loader_get_state(pre, &st);
    CHECK(st.epoch == 3 && st.index == 2, "state after two batches of epoch 3: %lld/%lld", (long long)st.epoch,
          (long long)st.index);
    enum { K = 9 };
    sf_batch want[K];
    float *xs[K];
    int32_t *ls[K];
    size_t xn = 2 * 8 * 20;
    for (int k = 0; k < K; k++) {
        CHECK_OK(sf_loader_next(pre, &b));
        if (!b) { /* the epoch end; keep a marker */
            want[k].x = NULL;
            xs[k] = NULL;
            ls[k] = NULL;
            continue;
        }
        want[k] = *b;
        xs[k] = malloc(xn * 4);
        ls[k] = malloc(8 * 4);
        memcpy(xs[k], b->x, xn * 4);
        memcpy(ls[k], b->labels, 8 * 4);
        want[k].x = xs[k];
        want[k].labels = ls[k];
    }
    for (int mode = 0; mode < 2; mode++) {
        sf_loader *r = NULL;
        p.prefetch = mode;
        CHECK_OK(sf_loader_create(ds, &p, &r));
        if (!r) break;
        CHECK_OK(sf_loader_next(r, &b)); /* it has moved on before the restore, and prefetched */
        CHECK_OK(sf_loader_set_state(r, &st));
        sf_loader_get_state(r, &st2);
        CHECK(st2.epoch == st.epoch && st2.index == st.index, "state reads back");
        int ok = 1;
        for (int k = 0; k < K; k++) {
            CHECK_OK(sf_loader_next(r, &b));
            ok &= (b == NULL) == (want[k].x == NULL) && (!b || batch_equal(b, &want[k]));
        }
        CHECK(ok, "a restored loader (prefetch %d) repeats the same batches across the epoch end", mode);
        sf_loader_free(r);
    }
    for (int k = 0; k < K; k++) {
        free(xs[k]);
        free(ls[k]);
    }
    sf_loader_state bad = {0, 7};
    CHECK(sf_loader_set_state(pre, &bad) == SF_ERR_INVALID, "a state past the epoch end is refused");
    sf_loader_free(sync);
    sf_loader_free(pre);
    CHECK(live_batches == 0, "%d batches not given back to the allocator", live_batches);

    p.batch = 54;
    sf_loader *none = NULL;
    expect_fail(sf_loader_create(ds, &p, &none), SF_ERR_INVALID, "fewer than one batch", "batch larger than data");
    sf_dataset_free(ds);
}

static void test_loader_eval(void)
{
    sf_dataset *ds = synthetic(21, 1, 2, 2);
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 8;
    p.timesteps = 3;
    p.training = 0;
    p.augment = 1; /* ignored in evaluation */
    p.normalize = 0;
    sf_loader *l = NULL;
    CHECK_OK(sf_loader_create(ds, &p, &l));
    if (!l) return;
    CHECK(sf_loader_batches_per_epoch(l) == 3, "evaluation keeps the partial batch");
    int valid[3] = {0}, ok = 1, n = 0;
    const sf_batch *b;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(sf_loader_next(l, &b));
        if (!b) break;
        n++;
        valid[i] = b->valid;
        for (int k = 0; k < 8; k++) {
            int64_t s = i * 8 + (k < b->valid ? k : k % b->valid); /* padding repeats the real samples */
            ok &= b->labels[k] == ds->labels[s];
            for (int t = 0; t < 3; t++)
                for (int j = 0; j < 4; j++) ok &= b->x[(t * 8 + k) * 4 + j] == ds->images[s * 4 + j] / 255.0f;
        }
    }
    CHECK(n == 3 && valid[0] == 8 && valid[1] == 8 && valid[2] == 5, "valid counts %d %d %d", valid[0], valid[1],
          valid[2]);
    CHECK(ok, "evaluation batches are the samples in dataset order, unaugmented");
    CHECK_OK(sf_loader_next(l, &b));
    CHECK(b == NULL, "then the epoch ends");
    CHECK_OK(sf_loader_next(l, &b));
    CHECK(b && b->epoch == 1 && b->index == 0 && b->labels[0] == ds->labels[0], "and the next starts over");
    sf_loader_free(l);
    sf_dataset_free(ds);
}

/* Data-parallel shards: two loaders taking halves of each global batch see, together, what one loader with the whole
 * batch sees (training: the same shuffled order; evaluation: the partial last batch split, one shard possibly
 * empty), and a shard outside the batch is refused. */
static void test_loader_shards(void)
{
    sf_dataset *ds = synthetic(21, 1, 2, 2);
    for (int training = 0; training < 2; training++) {
        sf_loader_params p;
        sf_loader_default_params(&p);
        p.batch = 8;
        p.timesteps = 2;
        p.training = training;
        p.normalize = 0;
        p.prefetch = training; /* both paths */
        sf_loader *whole = NULL, *part[2] = {NULL, NULL};
        CHECK_OK(sf_loader_create(ds, &p, &whole));
        p.batch = 4;
        p.shards = 2;
        for (int k = 0; k < 2; k++) {
            p.shard = k;
            CHECK_OK(sf_loader_create(ds, &p, &part[k]));
        }
        if (!whole || !part[0] || !part[1]) return;
        CHECK(sf_loader_batches_per_epoch(part[0]) == sf_loader_batches_per_epoch(whole),
              "training %d: %lld shard batches per epoch, %lld whole", training,
              (long long)sf_loader_batches_per_epoch(part[0]), (long long)sf_loader_batches_per_epoch(whole));
        int ok = 1, batches = 0, valid_sum = 0, whole_valid = 0;
        for (;;) {
            const sf_batch *w, *a, *b;
            CHECK_OK(sf_loader_next(whole, &w));
            CHECK_OK(sf_loader_next(part[0], &a));
            CHECK_OK(sf_loader_next(part[1], &b));
            if (!w || !a || !b) {
                ok &= !w && !a && !b;
                break;
            }
            batches++;
            whole_valid += w->valid;
            valid_sum += a->valid + b->valid;
            const sf_batch *half[2] = {a, b};
            for (int k = 0; k < 2; k++)
                for (int i = 0; i < half[k]->valid; i++) {
                    ok &= half[k]->labels[i] == w->labels[k * 4 + i];
                    for (int t = 0; t < 2; t++)
                        ok &= memcmp(half[k]->x + (t * 4 + i) * 4, w->x + (t * 8 + k * 4 + i) * 4, 4 * sizeof(float)) == 0;
                }
        }
        CHECK(ok && batches == (training ? 2 : 3) && valid_sum == whole_valid,
              "training %d: shards differ from the whole batch (%d batches, %d vs %d valid samples)", training, batches,
              valid_sum, whole_valid);
        for (int k = 0; k < 2; k++) sf_loader_free(part[k]);
        sf_loader_free(whole);
    }
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 2;
    p.shards = 2;
    p.shard = 2;
    sf_loader *bad = NULL;
    expect_fail(sf_loader_create(ds, &p, &bad), SF_ERR_INVALID, "shard", "shard 2 of 2");
    sf_dataset_free(ds);
}

static void test_real_fashion_mnist(void)
{
    const char *dir = sf_dataset_default_dir(SF_DATASET_FASHION_MNIST);
    char path[512];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    if (access(path, R_OK) != 0) {
        printf("skipping the real Fashion-MNIST: %s is absent (apt-get install dataset-fashion-mnist)\n", path);
        return;
    }
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(sf_dataset_load(SF_DATASET_FASHION_MNIST, NULL, SF_SPLIT_TRAIN, NULL, &tr));
    CHECK_OK(sf_dataset_load(SF_DATASET_FASHION_MNIST, NULL, SF_SPLIT_TEST, NULL, &te));
    if (!tr || !te) return;
    CHECK(tr->count == 60000 && te->count == 10000, "Fashion-MNIST has 60000 + 10000 samples");
    int64_t per_class[10] = {0};
    for (int64_t i = 0; i < tr->count; i++) per_class[tr->labels[i]]++;
    int balanced = 1;
    for (int c = 0; c < 10; c++) balanced &= per_class[c] == 6000;
    CHECK(balanced, "6000 training samples per class");
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < tr->count * 784; i++) {
        double v = tr->images[i] / 255.0;
        sum += v;
        sq += v * v;
    }
    double mean = sum / (60000.0 * 784), std = sqrt(sq / (60000.0 * 784) - mean * mean);
    CHECK(fabs(mean - tr->mean[0]) < 1e-3 && fabs(std - tr->std[0]) < 1e-3,
          "the standard statistics match the data (mean %.4f std %.4f)", mean, std);
    sf_dataset_free(tr);
    sf_dataset_free(te);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sf_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_idx_files();
    test_idx_corrupt();
    test_missing_and_broken_files();
    test_cifar();
    test_cifar100();
    test_encodings();
    test_augmentation();
    test_random_erasing();
    test_shuffle();
    test_loader_training();
    test_loader_eval();
    test_loader_shards();
    test_real_fashion_mnist();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_data");
}
