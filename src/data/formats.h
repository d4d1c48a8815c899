/* formats.h — what the table of dataset formats (formats.c) holds for each sf_dataset_kind, and the loaders its
 * rows name, one per reader file. Internal to src/data. A new format is a reader file with its loader, a kind in
 * dataset.h and one row in formats.c. */
#ifndef SF_DATA_FORMATS_H
#define SF_DATA_FORMATS_H

#include "data/dataset.h"

/* Larger files than this are refused: the biggest real one (CIFAR-10 train batch) is 30 MB. */
#define SF_DATASET_MAX_FILE_BYTES ((size_t)1 << 31)

typedef struct sf_dataset_format sf_dataset_format;

/* Reads split `split` of format f from the files in `dir` into *out (NULL on entry): finds the files (a missing
 * one is SF_ERR_IO naming the path and f->provider), reads them, parses them with the format's reader and fills the
 * dataset with sf_dataset_append. p holds the config's data parameters (never NULL). */
typedef sf_status (*sf_dataset_loader)(const sf_dataset_format *f, const char *dir, sf_split split,
                                       const sf_data_params *p, sf_dataset **out);

struct sf_dataset_format {
    const char *name;        /* in configs: "fashion-mnist" */
    const char *pretty;      /* in messages: "Fashion-MNIST" */
    const char *default_dir; /* where the files are looked for when no directory is given */
    int32_t channels, height, width, classes; /* 0 where the parameters give them (synthetic) */
    float mean[SF_DATASET_MAX_CHANNELS], std[SF_DATASET_MAX_CHANNELS]; /* standard statistics on the [0, 1] scale */
    const char *provider;    /* what provides the files, for the message when they are missing */
    sf_dataset_loader load;
};

/* A dataset of `type` (sf_dataset_create makes images): labels zeroed, images allocated for SF_SAMPLES_IMAGES
 * only (at most SF_DATASET_MAX_CHANNELS channels), every size checked. */
sf_status sf_dataset_create_of_type(sf_sample_type type, int64_t count, int32_t channels, int32_t height,
                                    int32_t width, int32_t classes, sf_dataset **out);

/* IDX pairs named train-/t10k-{images-idx3,labels-idx1}-ubyte[.gz] (MNIST, Fashion-MNIST): idx.c. */
sf_status sf_idx_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                      sf_dataset **out);
/* CIFAR-10 binary batches data_batch_1..5.bin / test_batch.bin, in dir or dir/cifar-10-batches-bin: cifar.c. */
sf_status sf_cifar_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                        sf_dataset **out);
/* No files: the labels of p->synthetic's split, the spike trains drawn per batch (synthetic.c). */
sf_status sf_synthetic_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                            sf_dataset **out);

#endif
