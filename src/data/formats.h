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
    int32_t channels, height, width, classes; /* 0 where the parameters give them (synthetic); for event
                                               * streams, channels are the polarities and height × width the
                                               * sensor */
    int32_t events;          /* 1: an event dataset (its input shape follows the binning) */
    int32_t augment_auto;    /* 1: `augment = auto` augments this dataset's training samples */
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
/* ---------------------------------------------------------------- event readers
 * Each checks every length and value before use; events are checked against the sensor and for time order by
 * sf_events_add_sample. Errors are SF_ERR_FORMAT naming the sample, packet, line or event; the loaders add the
 * file. */

/* SHD / SSC: {name}_{train,test}.h5 or .h5.gz in dir (shd.c). */
sf_status sf_shd_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                      sf_dataset **out);
/* A whole HDF5 file image (the bytes of a .h5 file) into a new event dataset of format f. */
sf_status sf_shd_parse(const sf_dataset_format *f, const uint8_t *buf, size_t len, sf_dataset **out);
/* One sample's spikes (times in seconds, units) into events at out[0..n). */
sf_status sf_shd_sample_events(const double *times, size_t n_times, const uint32_t *units, size_t n_units,
                               sf_event *out);

/* N-MNIST: Train/<digit>/ *.bin and Test/<digit>/ *.bin in dir (nmnist.c). */
sf_status sf_nmnist_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                         sf_dataset **out);
/* One .bin file's events into out (room for len / 5 events); *n is how many (overflow markers are not events). */
sf_status sf_nmnist_parse(const uint8_t *buf, size_t len, sf_event *out, int64_t *n);

/* DVS128 Gesture: trials_to_{train,test}.txt, the recordings and their labels in dir or dir/DvsGesture
 * (dvsgesture.c). */
sf_status sf_gesture_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                          sf_dataset **out);
/* The polarity events of an AEDAT 3.1 file into out[0..cap): times from the first event, whose absolute time in µs
 * is *origin, and never decreasing (an event earlier than the one before is an error naming packet and event). */
sf_status sf_aedat_parse(const uint8_t *buf, size_t len, sf_event *out, size_t cap, int64_t *n, int64_t *origin);
/* One labelled gesture: classes 1..N in the file become labels 0..N-1; times in the recording's µs. */
typedef struct sf_gesture_span {
    int32_t label, line;
    int64_t start, end; /* [start, end) */
} sf_gesture_span;
/* A labels CSV (a header line, then class,start_us,end_us rows) into spans[0..cap). */
sf_status sf_gesture_labels_parse(const char *text, size_t len, int32_t classes, sf_gesture_span *spans, size_t cap,
                                  size_t *n);
/* A trials list (one .aedat file name per line) as one malloc'd array of *n names (free it with one free()). */
sf_status sf_gesture_trials_parse(const char *text, size_t len, char ***names, size_t *n);

/* ---------------------------------------------------------------- the frame cache (frame_cache.c)
 * Split `split` of event format f binned as p says (count frames, no augmentation) from the cache file in
 * p->cache_dir keyed by the format, split, data directory and binning; when there is none (or it fails its
 * checks: header, sizes, CRC-32), the split is loaded with f->load, binned, and written there atomically. *out is
 * a frames dataset, or the events dataset when a count exceeds 65535 and the split cannot be cached. */
sf_status sf_frame_cache_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                              sf_dataset **out);

/* The format row of a kind (NULL for an unknown kind). */
const sf_dataset_format *sf_dataset_format_of(sf_dataset_kind kind);

/* No files: the labels of p->synthetic's split, the spike trains drawn per batch (synthetic.c). */
sf_status sf_synthetic_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                            sf_dataset **out);

#endif
