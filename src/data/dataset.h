/* dataset.h — image classification datasets held in memory (MNIST, Fashion-MNIST, CIFAR-10), their file readers
 * (IDX gzipped or plain, CIFAR-10 binary; each a memory-buffer parser that trusts nothing in the bytes and returns
 * a view of the samples it found), the spike encodings, and the batch loader that shuffles, augments, encodes and
 * prefetches on a background thread.
 *
 * Everything the trainer needs from src/data is declared here. */
#ifndef SF_DATA_DATASET_H
#define SF_DATA_DATASET_H

#include "spikefuse.h"

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- datasets */
#define SF_DATASET_MAX_CHANNELS 4

/* One kind per row of the format table (data/formats.c). */
typedef enum sf_dataset_kind {
    SF_DATASET_FASHION_MNIST = 0,
    SF_DATASET_MNIST,
    SF_DATASET_CIFAR10,
    SF_DATASET_NUM_KINDS
} sf_dataset_kind;
typedef enum sf_split { SF_SPLIT_TRAIN = 0, SF_SPLIT_TEST } sf_split;

/* "fashion-mnist", "mnist", "cifar10". A wrong name is SF_ERR_INVALID "expects fashion-mnist, mnist or cifar10". */
sf_status sf_dataset_kind_parse(const char *name, sf_dataset_kind *out);
const char *sf_dataset_kind_name(sf_dataset_kind kind);
/* The accepted names as "fashion-mnist, mnist or cifar10" into buf (truncated to cap). */
void sf_dataset_kind_list(char *buf, size_t cap);
/* Where the dataset is looked for when no directory is given: /usr/share/datasets/fashion-mnist (Debian package
 * dataset-fashion-mnist), data/mnist, data/cifar-10-batches-bin. */
const char *sf_dataset_default_dir(sf_dataset_kind kind);
/* Per-sample shape and class count of a kind (1×28×28 or 3×32×32, 10 classes). */
void sf_dataset_kind_shape(sf_dataset_kind kind, int32_t *channels, int32_t *height, int32_t *width,
                           int32_t *classes);
/* The standard per-channel mean and std of a kind on the [0, 1] scale (unused channels: 0 and 1). */
void sf_dataset_kind_stats(sf_dataset_kind kind, float mean[SF_DATASET_MAX_CHANNELS],
                           float std[SF_DATASET_MAX_CHANNELS]);

typedef struct sf_dataset {
    int64_t count;                   /* samples */
    int32_t channels, height, width; /* per sample */
    int32_t classes;                 /* labels are in [0, classes) */
    uint8_t *images;                 /* [count, channels, height, width], intensity 0..255 */
    uint8_t *labels;                 /* [count] */
    float mean[SF_DATASET_MAX_CHANNELS], std[SF_DATASET_MAX_CHANNELS]; /* standard per-channel statistics of the
                                                                         * dataset on the [0, 1] scale */
} sf_dataset;

/* Labelled samples as a reader found them, viewed in place in the file's bytes: sample i's image is the
 * channels×height×width bytes at images + i·image_stride, its label the byte at labels + i·label_stride. */
typedef struct sf_sample_view {
    int64_t count;
    int32_t channels, height, width, classes;
    const uint8_t *images, *labels;
    size_t image_stride, label_stride;
} sf_sample_view;

/* Allocates an empty dataset of `count` zeroed samples (sizes are checked); mean 0 and std 1 per channel. */
sf_status sf_dataset_create(int64_t count, int32_t channels, int32_t height, int32_t width, int32_t classes,
                            sf_dataset **out);
/* Copies a reader's samples into *ds: a new dataset of the view's shape when *ds is NULL, else appended to it (its
 * shape and classes must be the view's). On failure *ds is left as it was. */
sf_status sf_dataset_append(sf_dataset **ds, const sf_sample_view *v);
void sf_dataset_free(sf_dataset *ds);

/* Loads one split of a dataset from `dir` (NULL or "": sf_dataset_default_dir). A missing file is SF_ERR_IO with a
 * message naming the path looked at and the package or download that provides it; a malformed one SF_ERR_FORMAT. */
sf_status sf_dataset_load(sf_dataset_kind kind, const char *dir, sf_split split, sf_dataset **out);

/* ---------------------------------------------------------------- readers (memory-buffer entry points)
 * The buffers are the whole (decompressed) file; every header field is checked against `len`. Errors are
 * SF_ERR_FORMAT with a message naming the field; the views point into the buffers and allocate nothing. */

/* An IDX file of unsigned bytes (type 0x08) with 1 to 4 dimensions, viewed in place. */
typedef struct sf_idx_view {
    int32_t ndim;
    int64_t dims[4];
    const uint8_t *data; /* points into the parsed buffer */
    int64_t numel;
} sf_idx_view;
sf_status sf_idx_parse(const uint8_t *buf, size_t len, sf_idx_view *out);

/* The samples of an images IDX file [N, H, W] (or [N, C, H, W]) and a labels IDX file [N]: the counts must agree
 * and every label must be < classes. */
sf_status sf_idx_samples(const uint8_t *images, size_t images_len, const uint8_t *labels, size_t labels_len,
                         int32_t classes, sf_sample_view *out);

/* CIFAR-10 binary records: 1 label byte then 3×32×32 image bytes, channel-planar. `len` must be a whole number
 * of records and every label < 10. */
#define SF_CIFAR_RECORD_BYTES (1 + 3 * 32 * 32)
sf_status sf_cifar_parse(const uint8_t *buf, size_t len, sf_sample_view *out);

/* ---------------------------------------------------------------- encodings
 * An image x in [0, 1] (intensity / 255) becomes T steps of input:
 *   direct   every step carries the (optionally normalised) analog value: (x - mean[c]) / std[c]
 *   poisson  step t spikes (1.0) with probability x; the draw is a pure function of
 *            (seed, epoch, sample index in the dataset, t, pixel), so a resumed run sees identical spikes
 *   latency  time to first spike: one spike at step round((T - 1)·(1 - x)) when x > 0 (brightest first, x = 1
 *            at step 0), no spike at all when x == 0 */
typedef enum sf_encoding { SF_ENCODING_DIRECT = 0, SF_ENCODING_POISSON, SF_ENCODING_LATENCY } sf_encoding;
sf_status sf_encoding_parse(const char *name, sf_encoding *out);
const char *sf_encoding_name(sf_encoding e);

/* ---------------------------------------------------------------- loader */
typedef struct sf_loader_params {
    int64_t batch;       /* B */
    int64_t timesteps;   /* T */
    sf_encoding encoding;
    uint64_t seed;       /* shuffling, augmentation and Poisson draws */
    int32_t training;    /* 1: shuffled order per (seed, epoch), augmentation when `augment`, the last incomplete
                          * batch dropped. 0 (evaluation): dataset order, no augmentation, the last batch may be
                          * partial (its `valid` count says how many samples are real) */
    int32_t augment;     /* training only: random crop with zero padding 4 and horizontal flip with p = 1/2 */
    int32_t normalize;   /* direct encoding only: (x - mean) / std per channel */
    float mean[SF_DATASET_MAX_CHANNELS], std[SF_DATASET_MAX_CHANNELS]; /* std[0] == 0: the dataset's values */
    int32_t prefetch;    /* 1: a background thread encodes the next batch while the current one is used */
    int32_t shards;      /* data-parallel processes (0 or 1: this loader sees every sample): a global batch is
                          * batch × shards samples of the epoch's order, and this loader takes part `shard` of each
                          * (samples shard·batch .. (shard+1)·batch − 1 of it); an evaluation epoch's last global
                          * batch may leave a shard fewer real samples than others, even none (valid = 0) */
    int32_t shard;
} sf_loader_params;

/* batch 64, T 1, direct, seed 0, training, no augmentation, normalised with the dataset's values, prefetch on. */
void sf_loader_default_params(sf_loader_params *p);

typedef struct sf_batch {
    const float *x;          /* [T, B, C, H, W] */
    const int32_t *labels;   /* [B] */
    int64_t T, B;
    int32_t C, H, W;
    int32_t valid;           /* real samples: B except in an evaluation epoch's partial last batch, whose
                              * remaining slots repeat the batch's real samples (count only the first `valid`) */
    int64_t epoch, index;    /* which batch this is */
} sf_batch;

/* Where the loader stands: the next batch it returns is batch `index` of epoch `epoch` (index may equal
 * batches-per-epoch: the epoch is finished and the next call reports its end). Save it with a checkpoint and
 * restore it to see exactly the same batches again. */
typedef struct sf_loader_state {
    int64_t epoch;
    int64_t index;
} sf_loader_state;

typedef struct sf_loader sf_loader;

/* The dataset is borrowed and must outlive the loader. */
sf_status sf_loader_create(const sf_dataset *ds, const sf_loader_params *p, sf_loader **out);
void sf_loader_free(sf_loader *l);
int64_t sf_loader_batches_per_epoch(const sf_loader *l);
/* The next batch, valid until the next call on this loader. At the end of an epoch *out is NULL (status SF_OK)
 * and the loader moves on to batch 0 of the next epoch. */
sf_status sf_loader_next(sf_loader *l, const sf_batch **out);
void sf_loader_get_state(const sf_loader *l, sf_loader_state *out);
/* Repositions the loader (dropping any prefetched batch); index in [0, batches-per-epoch]. */
sf_status sf_loader_set_state(sf_loader *l, const sf_loader_state *st);

/* The sample order of `epoch` for a training loader: a permutation of [0, n) drawn by Fisher–Yates from the
 * counter-based RNG keyed by (seed, epoch). */
void sf_shuffle_order(uint64_t seed, int64_t epoch, int64_t n, int64_t *order);

/* Encodes `count` samples (dataset indices idx[0..count)) into x [T, B, C, H, W] at batch slots 0..count-1,
 * applying augmentation when p->training && p->augment. Exposed for tests and custom pipelines. */
void sf_encode_batch(const sf_dataset *ds, const sf_loader_params *p, int64_t epoch, const int64_t *idx,
                     int64_t count, float *x);

#endif
