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
    int32_t channels, height, width, classes; /* 0 where the parameters give them (synthetic; the sides of image
                                               * folders); for event streams, channels are the polarities and
                                               * height × width the sensor */
    int32_t events;          /* 1: an event dataset (its input shape follows the binning) */
    int32_t (*classes_of)(const sf_data_params *p); /* where the parameters choose the class count (NULL: classes) */
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
/* CIFAR-100 binary train.bin / test.bin, in dir or dir/cifar-100-binary: cifar.c. */
sf_status sf_cifar100_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                           sf_dataset **out);
/* An image folder's split: dir/train or dir/val listed (imagefolder.c); the images are read per batch. */
sf_status sf_imagefolder_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                              sf_dataset **out);
/* The path of an image folder's sample into out. */
sf_status sf_image_path(const sf_dataset *ds, int64_t sample, char *out, size_t cap);

/* Resizing (image_resize.c): the box [x, x + w) × [y, y + h) of an interleaved 8-bit RGB W×H image to a planar
 * 3×out_h×out_w float image times `gain` (mirrored with flip), reading only pixels in clip = {x0, y0, x1, y1}. */
typedef struct sf_resize_job {
    const uint8_t *src;
    int32_t W, H;
    double x, y, w, h;
    int32_t clip[4];
    int32_t out_w, out_h, flip;
    float gain;
} sf_resize_job;
/* Buffers reused from one resize to the next. */
typedef struct sf_resize_scratch {
    int32_t *ints;
    float *weights, *row;
    size_t ints_cap, weights_cap, row_cap;
} sf_resize_scratch;
sf_status sf_resize_rgb(const sf_resize_job *j, sf_resize_scratch *s, float *dst);
void sf_resize_scratch_free(sf_resize_scratch *s);

/* Decoding (image_decode.c), on an sf_image_decoder: the file at `path` read and its header parsed (its size in
 * pixels), then its pixels decoded as interleaved 8-bit RGB, JPEGs at the smallest DCT scale of 1, 1/2, 1/4 and
 * 1/8 that is at least min_scale (valid until the next read). */
typedef struct sf_decoded_image {
    const uint8_t *rgb;
    int32_t width, height;
} sf_decoded_image;
sf_status sf_image_read(sf_image_decoder *d, const char *path, int32_t *width, int32_t *height);
/* The same from bytes in memory (copied), `name` standing for the file in messages. */
sf_status sf_image_read_bytes(sf_image_decoder *d, const char *name, const uint8_t *bytes, size_t len,
                              int32_t *width, int32_t *height);
sf_status sf_image_decode(sf_image_decoder *d, double min_scale, sf_decoded_image *out);
sf_resize_scratch *sf_image_decoder_scratch(sf_image_decoder *d);

/* ---------------------------------------------------------------- encoding (encode.c), shared with image folders
 * One sample whose intensities (after augmentation) are in step 0's slot x0 encoded into its T steps (x0 + t·step),
 * normalised with mean and std for the direct encoding; `sample` keys its Poisson draws. */
void sf_encode_steps(const sf_loader_params *p, const float *mean, const float *std, size_t hw, int C,
                     uint64_t poisson_key, int64_t sample, float *x0, size_t step);
/* The rectangle random erasing sets to 0 in an augmented H×W sample (h or w 0: none), drawn from aug_key. */
typedef struct sf_erase_rect {
    int y, x, h, w;
} sf_erase_rect;
sf_erase_rect sf_erase_rect_of(const sf_loader_params *p, int H, int W, uint64_t aug_key, int64_t sample);
/* Sets the rectangle to 0 in every channel of a C×H×W sample. */
void sf_erase_apply(sf_erase_rect e, int C, int H, int W, float *x);
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
#define SF_NMNIST_EVENT_BYTES 5
sf_status sf_nmnist_parse(const uint8_t *buf, size_t len, sf_event *out, int64_t *n);

/* CIFAR10-DVS: <class>/cifar10_<class>_<n>.aedat for the ten CIFAR-10 classes in dir (cifar10dvs.c). */
sf_status sf_cifar10dvs_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                             sf_dataset **out);
/* One AEDAT 2.0 file of a DVS128 ('#' header from #!AER-DAT2.0, then big-endian u32 address and u32 µs timestamp
 * per event) into out (room for len / 8 events): x = 127 − address bits 8-14, y = 127 − bits 1-7, polarity =
 * 1 − bit 0 (SpikingJelly's mapping); a timestamp that wraps past 2^32 continues. */
#define SF_AEDAT2_EVENT_BYTES 8
sf_status sf_aedat2_parse(const uint8_t *buf, size_t len, sf_event *out, int64_t *n);
/* N-Caltech101: Caltech101/<class>/image_NNNN.bin in N-MNIST's event format, in dir or dir/Caltech101
 * (ncaltech101.c). */
sf_status sf_ncaltech101_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                              sf_dataset **out);

/* Event datasets of one folder per class, one file per recording (event_folders.c): in natural order (numbers by
 * value), each class's first tenth (rounded) is the test split, as in TEBN (Duan et al. 2022), the rest training. */
typedef sf_status (*sf_event_file_parser)(const uint8_t *buf, size_t len, sf_event *out, int64_t *n);
typedef struct sf_event_folders {
    const char *unpacked;           /* the folder an archive unpacks to, looked for in dir first (NULL: none) */
    const char *suffix;             /* the recordings' file ending: ".aedat", ".bin" */
    size_t bytes_per_event;         /* the fewest bytes an event takes in a file (room for len / this) */
    sf_event_file_parser parse;
    const char *const *classes;     /* the class folders in label order, NULL-terminated; NULL: every folder in
                                     * byte order but `excluded` */
    const char *excluded;           /* a folder that is not a class (NULL: none) */
} sf_event_folders;
sf_status sf_event_folders_load(const sf_dataset_format *f, const sf_event_folders *e, const char *dir,
                                sf_split split, int32_t classes, sf_dataset **out);
#define SF_EVENT_TEST_FRACTION 0.1

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
 * Split `split` of event format f binned as p says (counts, no augmentation), from p->cache_dir's file for it, or
 * loaded, binned and written there when none passes its checks. *out: frames, or events where a count > 65535. */
sf_status sf_frame_cache_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                              sf_dataset **out);

/* The format row of a kind (NULL for an unknown kind). */
const sf_dataset_format *sf_dataset_format_of(sf_dataset_kind kind);
/* The class count of format f with parameters p. */
static inline int32_t sf_format_classes(const sf_dataset_format *f, const sf_data_params *p)
{
    return f->classes_of ? f->classes_of(p) : f->classes;
}

/* No files: the labels of p->synthetic's split, the spike trains drawn per batch (synthetic.c). */
sf_status sf_synthetic_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                            sf_dataset **out);

#endif
