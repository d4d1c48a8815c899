/* dataset.h — src/data's interface to the trainer (the parts programs use too are in include/spikefuse_train.h):
 * datasets in memory, image folders streamed from their files, event streams and synthetic spike trains; their
 * readers (parsers that trust nothing in the bytes), encodings, event binning, and the batch loader that prepares
 * batches on worker threads ahead of the step. */
#ifndef SF_DATA_DATASET_H
#define SF_DATA_DATASET_H

#include "spikefuse_train.h"

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- datasets (sf_dataset_kind: one kind per row of the
 * format table, data/formats.c) */
/* The accepted names as "fashion-mnist, mnist or cifar10" into buf (truncated to cap). */
void sf_dataset_kind_list(char *buf, size_t cap);
/* Where the dataset is looked for when no directory is given: /usr/share/datasets/fashion-mnist (Debian package
 * dataset-fashion-mnist), data/mnist, data/cifar-10-batches-bin ("" for synthetic). */
const char *sf_dataset_default_dir(sf_dataset_kind kind);
/* Whether `augment = auto` augments a kind's training samples (the colour images and the event datasets). */
int sf_dataset_kind_augments(sf_dataset_kind kind);
/* Whether a kind's samples are images (pixel intensities the loader encodes), not event streams or spikes. */
int sf_dataset_kind_images(sf_dataset_kind kind);
/* Whether a kind's samples are event streams (binned into frames). */
int sf_dataset_kind_is_events(sf_dataset_kind kind);
/* The standard per-channel mean and std of a kind on the [0, 1] scale (unused channels, and kinds that are not
 * images: 0 and 1). */
void sf_dataset_kind_stats(sf_dataset_kind kind, float mean[SF_DATASET_MAX_CHANNELS],
                           float std[SF_DATASET_MAX_CHANNELS]);

/* Image folders (imagefolder.c): data_dir/train/<class>/<image> and data_dir/val (the same class folders, or flat
 * with a labels file); JPEG or PNG whatever the name says, decoded per batch (sf_image_sample), never held. */
typedef struct sf_image_params {
    int32_t size;           /* the side of the square network input: the training crop and the evaluation crop */
    int32_t classes;        /* the class folders data_dir/train must hold */
    int32_t skip_bad;       /* 1: an image that does not decode is left out of its batch and counted; 0: it fails
                             * the batch with an error naming the file */
    const char *val_labels; /* a flat val/: the file naming each image's class (NULL or "": val/ has class
                             * folders) */
} sf_image_params;

/* What a config says about its data beyond the kind and directory. */
typedef struct sf_data_params {
    sf_synthetic_params synthetic;
    sf_event_params events;
    sf_image_params images;
    int32_t coarse_labels;    /* CIFAR-100: its 20 superclasses instead of the 100 classes */
    int32_t background_class; /* N-Caltech101: BACKGROUND_Google as a 102nd class */
    uint64_t seed;          /* the synthetic draws */
    const char *cache_dir;  /* event datasets: where binned splits are cached (NULL or "": no cache); a split is
                             * cached when it is not augmented (the test split, or no aug_* amount is set) */
    int64_t timesteps;      /* T of the cached frames */
} sf_data_params;

/* Synthetic 1×28×28 with 10 classes, 1024 samples, density 0.1, seed 0; events in T equal bins, counts, full
 * resolution, polarities kept, no augmentation, no cache (timesteps 0: set it with a cache); image folders of 10
 * classes at 224×224, bad images failing; CIFAR-100's fine labels; N-Caltech101 without its background class. */
void sf_data_default_params(sf_data_params *p);
/* The shape of one step's network input [C, H, W] and the class count a kind delivers with these parameters. */
void sf_data_input_shape(sf_dataset_kind kind, const sf_data_params *p, int32_t shape[3], int32_t *classes);

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
/* Image folders: the images found bad so far (each counted once, whichever loader met it); 0 for other datasets. */
int64_t sf_dataset_bad_images(const sf_dataset *ds);

/* Loads one split from `dir` (NULL or "": sf_dataset_default_dir) with p (NULL: the defaults). A missing file is
 * SF_ERR_IO naming the path and where to get it; a malformed one SF_ERR_FORMAT. */
sf_status sf_dataset_load(sf_dataset_kind kind, const char *dir, sf_split split, const sf_data_params *p,
                          sf_dataset **out);

/* ---------------------------------------------------------------- event streams */

/* The frame [P, H, W] of a sensor of `polarities` × height × width after downsampling and merging. */
void sf_event_frame_shape(int32_t polarities, int32_t height, int32_t width, const sf_event_params *p,
                          int32_t frame[3]);
/* The network input of a frame: the frame itself, or [P·W, 1, 1] for frames one row high (SHD: 700 inputs). */
void sf_event_input_shape(const int32_t frame[3], int32_t shape[3]);

/* An empty event dataset of a sensor (channels = polarities). */
sf_status sf_events_create(int32_t polarities, int32_t height, int32_t width, int32_t classes, sf_dataset **out);
/* Appends one sample of n events: times (µs, any origin, stored from the first) nondecreasing and spanning < 2^32,
 * positions on the sensor. An empty sample counts in ds->skipped instead. Errors: SF_ERR_FORMAT naming the event. */
sf_status sf_events_add_sample(sf_dataset *ds, const sf_event *events, int64_t n, int32_t label);

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
/* CIFAR-100 binary records: the coarse label byte (< 20), the fine label byte (< 100), then the image as CIFAR-10's;
 * the view's labels are the fine ones, or the coarse ones when `coarse`. */
#define SF_CIFAR100_RECORD_BYTES (2 + 3 * 32 * 32)
sf_status sf_cifar100_parse(const uint8_t *buf, size_t len, int coarse, sf_sample_view *out);

/* ---------------------------------------------------------------- encodings (sf_encoding) */
sf_status sf_encoding_parse(const char *name, sf_encoding *out);
const char *sf_encoding_name(sf_encoding e);

/* ---------------------------------------------------------------- loader (sf_loader_params, sf_batch, sf_loader) */

/* batch 64, T 1, direct, seed 0, training, no augmentation (crop_pad 4, crop_scale_min 0.08 and no erasing when
 * turned on), normalised with the dataset's values, 2 batches prefetched. */
void sf_loader_default_params(sf_loader_params *p);

/* The next batch sf_loader_next returns is batch `index` of `epoch` (index == batches per epoch: the next call
 * reports the epoch's end). Restoring it gives the same batches again. */
typedef struct sf_loader_state {
    int64_t epoch;
    int64_t index;
} sf_loader_state;

int64_t sf_loader_batches_per_epoch(const sf_loader *l);
void sf_loader_get_state(const sf_loader *l, sf_loader_state *out);
/* Repositions the loader (dropping any prefetched batch); index in [0, batches-per-epoch]. */
sf_status sf_loader_set_state(sf_loader *l, const sf_loader_state *st);
/* Seconds sf_loader_next has waited for batches since the loader was made (synchronous: spent making them). Call
 * it from sf_loader_next's thread. */
double sf_loader_wait_seconds(const sf_loader *l);

/* The sample order of `epoch` for a training loader: a permutation of [0, n) drawn by Fisher–Yates from the
 * counter-based RNG keyed by (seed, epoch). */
void sf_shuffle_order(uint64_t seed, int64_t epoch, int64_t n, int64_t *order);

/* Draws the spike trains of `count` samples of a synthetic dataset into x [T, B, C, H, W] at batch slots
 * 0..count-1 (B = p->batch, T = p->timesteps). A sample is the same in every epoch. */
void sf_synthetic_batch(const sf_dataset *ds, const sf_loader_params *p, const int64_t *idx, int64_t count,
                        float *x);
/* Bins `count` samples (dataset indices idx[0..count)) of an event dataset into x [T, B, C, H, W] at batch slots
 * 0..count-1 as p->events says, augmenting when p->training && p->augment. */
void sf_events_bin_batch(const sf_dataset *ds, const sf_loader_params *p, int64_t epoch, const int64_t *idx,
                         int64_t count, float *x);
/* Copies `count` samples of a frames dataset into x [T, B, C, H, W] (binary frames: 1 where a count is > 0). */
void sf_frames_batch(const sf_dataset *ds, const sf_loader_params *p, const int64_t *idx, int64_t count, float *x);

/* ---------------------------------------------------------------- image folders, one sample at a time
 * The box [x, x + w) × [y, y + h) (pixels, real-valued) of a W×H image that is resized to size×size (mirrored with
 * `flip`): RandomResizedCrop and flip in augmented training, Resize(⌊size·256/224⌋) and CenterCrop otherwise, as
 * docs/config.md (image_size) specifies; draws are functions of (seed, epoch, sample). */
typedef struct sf_image_crop {
    double x, y, w, h;
    int32_t flip;
    int32_t inside; /* 1: the resize reads only pixels in the box (a crop, then a resize); 0: the pixels around it
                     * too (a resize of the whole image, then a crop) */
} sf_image_crop;
void sf_image_crop_of(const sf_loader_params *p, int32_t size, int64_t epoch, int64_t sample, int32_t W, int32_t H,
                      sf_image_crop *out);

/* A loader thread's decoding state: a TurboJPEG handle and buffers grown to the largest image met. */
typedef struct sf_image_decoder sf_image_decoder;
sf_status sf_image_decoder_create(sf_image_decoder **out);
void sf_image_decoder_free(sf_image_decoder *d);
/* Sample `sample` of an image folder into x, its step-0 slot of a [T, B, C, H, W] batch (step t at x + t·step):
 * read, decoded, cropped (sf_image_crop_of), resized, erased and encoded. An unreadable file is SF_ERR_IO naming it,
 * one that does not decode SF_ERR_FORMAT; x is then zero. */
sf_status sf_image_sample(const sf_dataset *ds, const sf_loader_params *p, sf_image_decoder *d, int64_t epoch,
                          int64_t sample, float *x, size_t step);
/* Records that sample `sample` of an image folder is bad (counted once by sf_dataset_bad_images). */
void sf_image_mark_bad(const sf_dataset *ds, int64_t sample);
/* Whether an image folder skips its bad images (sf_image_params.skip_bad). */
int sf_image_skips_bad(const sf_dataset *ds);

#endif
