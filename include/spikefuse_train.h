/* spikefuse_train.h — libspikefuse's training layer, for the `spikefuse` command and other programs that train from
 * config files: configs (docs/config.md), datasets and the batch loader, training runs, checkpoints, evaluation, NIR
 * import and export, jobs over several processes, and file, clock and random-number helpers. spikefuse.h's
 * conventions hold. */
#ifndef SPIKEFUSE_TRAIN_H
#define SPIKEFUSE_TRAIN_H

#include "spikefuse.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- files
 * A whole file into *out (malloc'd, caller frees, a NUL after its *len bytes); more than max_bytes (SIZE_MAX: no
 * limit) is SF_ERR_FORMAT, and the buffer grows with the bytes read, never from a size the file claims. */
SF_API sf_status sf_read_file(const char *path, size_t max_bytes, char **out, size_t *len);
/* Whether `path` is an existing regular file (or a link to one). */
SF_API int sf_file_exists(const char *path);
/* Whether anything exists at `path` (a file, a directory, ...). */
SF_API int sf_path_exists(const char *path);
/* Whether `path` is an existing directory (or a link to one). */
SF_API int sf_dir_exists(const char *path);
/* Whether two paths name the same file, existing (the same inode: links too) or to be created (the same name in the
 * same directory: "y.ini" and "./y.ini"). */
SF_API int sf_same_path(const char *a, const char *b);

/* Atomic writing through a temporary "<path>.tmp.XXXXXX" beside `path`, fsynced, given a new file's mode and renamed
 * over `path` at the commit: readers and a crash see the old content or the new, never a mix. */
typedef struct sf_atomic_file {
    const char *path; /* borrowed: must outlive the commit */
    char tmp[4096];
    int fd;
    sf_status status; /* the first failure; later writes do nothing */
} sf_atomic_file;

SF_API sf_status sf_atomic_file_open(sf_atomic_file *f, const char *path);
SF_API sf_status sf_atomic_file_write(sf_atomic_file *f, const void *data, size_t len);
/* Moves the file into place, or, after any failure, removes the temporary; returns the first failure. */
SF_API sf_status sf_atomic_file_commit(sf_atomic_file *f);
/* `len` bytes written atomically to `path` (open, write, commit). */
SF_API sf_status sf_write_file_atomic(const char *path, const void *data, size_t len);

/* Joins dir and name into buf ("dir/name"); SF_ERR_IO (as ENAMETOOLONG) if it does not fit. */
SF_API sf_status sf_path_join(char *buf, size_t cap, const char *dir, const char *name);
/* Creates `dir` and its missing parents (an existing directory is fine). */
SF_API sf_status sf_dir_create(const char *dir);

/* ---------------------------------------------------------------- stopping
 * A process-wide request to stop (a SIGINT/SIGTERM handler makes it): the library's long loops (reading, parsing,
 * binning, training, evaluating) poll it and return, leaving what a clean interrupt leaves. */
/* Records the request; async-signal-safe, and safe from any thread. */
SF_API void sf_interrupt_request(void);
/* Whether a request was made (and not cleared). */
SF_API int sf_interrupt_requested(void);
/* Forgets a request (a caller that has handled it and goes on, or a test). */
SF_API void sf_interrupt_clear(void);

/* ---------------------------------------------------------------- clock and random numbers */

/* A monotonic wall clock in seconds, for throughput and ETA figures. */
SF_API double sf_now_seconds(void);
/* The library's counter-based random numbers (dropout masks, synthetic data, shuffles): pure functions of (seed,
 * stream, index), 64 random bits and a uniform float in [0, 1). */
SF_API uint64_t sf_random_bits(uint64_t seed, uint64_t stream, uint64_t index);
SF_API float sf_random_uniform(uint64_t seed, uint64_t stream, uint64_t index);

/* ---------------------------------------------------------------- datasets */
#define SF_DATASET_MAX_CHANNELS 4
#define SF_DATASET_MAX_CLASSES 65536

/* The datasets a config can name. */
typedef enum sf_dataset_kind {
    SF_DATASET_FASHION_MNIST = 0,
    SF_DATASET_MNIST,
    SF_DATASET_CIFAR10,
    SF_DATASET_SYNTHETIC,
    SF_DATASET_SHD,
    SF_DATASET_SSC,
    SF_DATASET_NMNIST,
    SF_DATASET_DVSGESTURE,
    SF_DATASET_CIFAR100,
    SF_DATASET_IMAGEFOLDER,
    SF_DATASET_CIFAR10DVS,
    SF_DATASET_NCALTECH101,
    SF_DATASET_NUM_KINDS
} sf_dataset_kind;
typedef enum sf_split { SF_SPLIT_TRAIN = 0, SF_SPLIT_TEST } sf_split;

/* "fashion-mnist", "mnist", "cifar10", "synthetic", "shd", "ssc", "nmnist", "dvsgesture", "cifar100",
 * "imagefolder", "cifar10dvs", "ncaltech101". A wrong name is SF_ERR_INVALID "expects fashion-mnist, ...". */
SF_API sf_status sf_dataset_kind_parse(const char *name, sf_dataset_kind *out);
SF_API const char *sf_dataset_kind_name(sf_dataset_kind kind);

/* Spike trains drawn from the seed, for any input shape without files. Sample i has label i % classes; its input q
 * spikes at each step with probability density·(1 + s·m), s = ±1 drawn per (class, q), m = min(1/2, (1 - density) /
 * density): mean density `density`, and the classes differ in which inputs fire more. */
typedef struct sf_synthetic_params {
    int32_t shape[3]; /* C, H, W of one step's input ([N] inputs: N, 1, 1) */
    int32_t classes;  /* 1..SF_DATASET_MAX_CLASSES */
    int64_t samples;  /* in the training split; the test split has samples / 4 (at least 1) */
    float density;    /* in (0, 1] */
} sf_synthetic_params;

/* How event streams become T frames, in the loader's prefetch thread. A sample's events land in frame cells
 * (polarity, y / downsample, x / downsample); sensors one pixel high (SHD, SSC) give [channels] inputs. */
typedef enum sf_frame_mode {
    SF_FRAME_COUNT = 0, /* a cell holds its event count */
    SF_FRAME_BINARY     /* 1 where a cell has any event */
} sf_frame_mode;

typedef struct sf_event_params {
    int64_t time_window_us; /* 0: the sample's span in T equal bins, event t in floor((t - first)·T / (last - first
                             * + 1)); > 0: bins of this many µs from the first event, cut or zero-padded to T */
    sf_frame_mode frame;
    int32_t downsample;     /* >= 1: cells of downsample×downsample pixels (sides rounded up) */
    int32_t merge_polarity; /* 1: one channel for both polarities */
    /* Augmentation of training samples (loader: training and augment), each draw a pure function of (seed, epoch,
     * sample, event), so a resumed run sees the same events: */
    int64_t time_jitter_us; /* each event's time moved by a uniform integer in [-j, j] µs */
    float drop_event;       /* each event dropped with this probability, in [0, 1) */
    int32_t shift;          /* the sample moved by uniform integers in [-shift, shift] along x (and y on sensors of
                             * more than one row); events moved off the sensor are dropped */
    int32_t flip;           /* x mirrored with probability 1/2 */
} sf_event_params;

/* What a dataset holds per sample. */
typedef enum sf_sample_type {
    SF_SAMPLES_IMAGES = 0, /* uint8 images, turned into T steps by an encoding */
    SF_SAMPLES_SYNTHETIC,  /* spike trains drawn when a batch is made; only the labels are stored */
    SF_SAMPLES_EVENTS,     /* event streams, binned into T frames when a batch is made */
    SF_SAMPLES_FRAMES,     /* event streams binned already (read from or written to the frame cache) */
    SF_SAMPLES_FILES       /* image files, decoded, cropped and encoded when a batch is made (image folders) */
} sf_sample_type;

typedef struct sf_image_files sf_image_files;

/* One event: time in µs from its sample's first event, position on the sensor, polarity. */
typedef struct sf_event {
    uint32_t t;
    uint16_t x;
    uint8_t y, p;
} sf_event;

/* A split of a dataset in memory (sf_config_load_split loads one). */
typedef struct sf_dataset {
    sf_sample_type type;
    int64_t count;                   /* samples */
    int32_t channels, height, width; /* per sample (and step) */
    int32_t classes;                 /* labels are in [0, classes) */
    uint8_t *images;                 /* images: [count, channels, height, width], intensity 0..255; else NULL */
    int32_t *labels;                 /* [count] */
    float mean[SF_DATASET_MAX_CHANNELS], std[SF_DATASET_MAX_CHANNELS]; /* images: standard per-channel statistics
                                                                         * of the dataset on the [0, 1] scale */
    float density;                   /* synthetic: sf_synthetic_params.density */
    uint64_t seed;                   /* synthetic: the draws' seed */
    sf_split split;                  /* synthetic: the two splits draw from different streams */
    sf_event *events;                /* events: sample i's are events[offsets[i] .. offsets[i + 1]), times
                                      * nondecreasing; channels = polarities, height × width = the sensor */
    int64_t *offsets;                /* events: [count + 1] */
    int64_t skipped;                 /* events: empty samples the reader left out */
    size_t events_cap, offsets_cap, labels_cap; /* events: allocated room while a reader fills the dataset */
    const uint16_t *frames;          /* frames: [count, frames_T, channels, height, width] event counts, the
                                      * channels × height × width being the network input (binned already) */
    int64_t frames_T;
    void *frames_block;              /* frames: the allocation `frames` points into */
    sf_image_files *files;           /* files: the list of image files (imagefolder.c), one allocation;
                                      * height = width = the network input's side */
    char warning[600];               /* what loading worked around, for the caller to show (the frame cache could
                                      * not be written: the split is used without it); "" when nothing */
} sf_dataset;

SF_API void sf_dataset_free(sf_dataset *ds);

/* ---------------------------------------------------------------- encodings and the batch loader
 * An image x in [0, 1] (intensity / 255) becomes T steps of input:
 *   direct   x at every step, optionally normalised: (x - mean[c]) / std[c]
 *   poisson  a spike with probability x, drawn from (seed, epoch, sample, t, pixel) alone: resumes repeat it
 *   latency  one spike at step round((T - 1)·(1 - x)) where x > 0, none where x == 0 */
typedef enum sf_encoding { SF_ENCODING_DIRECT = 0, SF_ENCODING_POISSON, SF_ENCODING_LATENCY } sf_encoding;

/* Where a loader keeps its batches: malloc's, or the given allocator's (a trainer feeding a GPU: sf_host_alloc). */
typedef struct sf_batch_memory {
    void *(*alloc)(size_t bytes, void *ctx); /* NULL: malloc and free */
    void (*release)(void *p, void *ctx);
    void *ctx;
} sf_batch_memory;

typedef struct sf_loader_params {
    int64_t batch;       /* B */
    int64_t timesteps;   /* T */
    sf_encoding encoding; /* images only (synthetic samples are spikes already) */
    uint64_t seed;       /* shuffling, augmentation and Poisson draws */
    int32_t training;    /* 1: order shuffled per (seed, epoch), `augment` applies, an incomplete last batch dropped;
                          * 0: dataset order, no augmentation, the last batch may be partial (see `valid`) */
    int32_t augment;     /* training: images a random crop (padding crop_pad; folders: resized crop) and a flip with
                          * p = 1/2, events the augmentation of `events` */
    int32_t crop_pad;    /* augmented images: the crop's shift in [-crop_pad, crop_pad] per axis (0: the flip alone) */
    float crop_scale_min; /* augmented image folders: the random resized crop's smallest area fraction, in (0, 1] */
    float erase_p;       /* augmented images: the probability of random erasing after the crop/flip */
    int32_t normalize;   /* direct encoding only: (x - mean) / std per channel */
    float mean[SF_DATASET_MAX_CHANNELS], std[SF_DATASET_MAX_CHANNELS]; /* std[0] == 0: the dataset's values */
    int32_t prefetch;    /* batches prepared on the loader's threads ahead of the one the caller holds (0: each
                          * batch is made when asked for, on the caller's thread and its OpenMP threads) */
    int32_t threads;     /* image folders: the threads decoding images (0: omp_get_max_threads()); other datasets
                          * prepare a batch on one thread and its OpenMP threads */
    sf_event_params events; /* event datasets: binning and augmentation */
    int32_t shards;      /* data-parallel processes (0, 1: all samples): of each global batch of batch × shards
                          * samples this loader takes part `shard`; an evaluation's last may give it few or none */
    int32_t shard;
    sf_batch_memory memory; /* the batches' floats */
} sf_loader_params;

typedef struct sf_batch {
    const float *x;          /* [T, B, C, H, W] */
    const int32_t *labels;   /* [B] */
    int64_t T, B;
    int32_t C, H, W;
    int32_t valid;           /* the first `valid` samples are real (B but in an evaluation's partial last batch or
                              * where bad images were skipped); the other slots repeat them */
    int64_t epoch, index;    /* which batch this is */
} sf_batch;

typedef struct sf_loader sf_loader;

/* The dataset is borrowed and must outlive the loader. */
SF_API sf_status sf_loader_create(const sf_dataset *ds, const sf_loader_params *p, sf_loader **out);
SF_API void sf_loader_free(sf_loader *l);
/* The next batch, valid until the next call on this loader. At the end of an epoch *out is NULL (status SF_OK)
 * and the loader moves on to batch 0 of the next epoch. */
SF_API sf_status sf_loader_next(sf_loader *l, const sf_batch **out);
/* Encodes `count` samples (dataset indices idx[0..count)) into x [T, B, C, H, W] at batch slots 0..count-1,
 * applying augmentation when p->training && p->augment: the loader's encoding of images, for custom pipelines. */
SF_API void sf_encode_batch(const sf_dataset *ds, const sf_loader_params *p, int64_t epoch, const int64_t *idx,
                            int64_t count, float *x);

/* ---------------------------------------------------------------- configs
 * INI files ([train], [neuron], a section per layer in order, [readout]; docs/config.md). Errors (an unknown, repeated,
 * missing or out-of-range key, a wrong type) are SF_ERR_INVALID with the message "file:line: what is wrong". */
#define SF_CONFIG_PATH_MAX 1024

/* The [train] settings that are not held by one of the library's parameter structs. */
typedef struct sf_config_train {
    sf_dataset_kind dataset;           /* required */
    char data_dir[SF_CONFIG_PATH_MAX]; /* "": the dataset's default directory */
    char data_cache[SF_CONFIG_PATH_MAX]; /* event datasets: where binned splits are cached; "": no cache */
    char init[SF_CONFIG_PATH_MAX];     /* a checkpoint whose parameters start the training ("": none) */
    int64_t epochs;                    /* default 10 */
    int64_t batch;                     /* default 64 */
    int64_t timesteps;                 /* default 4 */
    sf_encoding encoding;              /* default direct */
    int32_t crop_pad;                  /* augmented images: the random crop's zero padding per side (0: flip only) */
    float erase_p;                     /* augmented images: the probability of random erasing; default 0 (off) */
    int32_t augment;                   /* training augmentation: 1 on, 0 off, -1 auto (default: on for cifar10 and
                                        * the event datasets) */
    int32_t normalize;                 /* direct encoding: per-channel (x - mean) / std; default on */
    float mean[SF_DATASET_MAX_CHANNELS], std[SF_DATASET_MAX_CHANNELS]; /* one value per channel; NaN
                                                                         * ("default"): the dataset's values */
    int32_t classes;                   /* synthetic: the class count; imagefolder: the class folders expected */
    sf_synthetic_params synthetic;     /* dataset = synthetic: input_shape, samples, input_density */
    int32_t image_size;                /* imagefolder: the network input's side (default 224) */
    float crop_scale_min;              /* imagefolder, augmented: the random resized crop's smallest area */
    int32_t skip_bad_images;           /* imagefolder: images that do not decode are skipped and counted */
    char val_labels[SF_CONFIG_PATH_MAX]; /* imagefolder: a flat val/'s labels file ("": class folders) */
    int32_t data_threads;              /* imagefolder: threads decoding images (0: as many as OpenMP's) */
    int32_t coarse_labels;             /* cifar100: the 20 superclasses */
    int32_t background_class;          /* ncaltech101: BACKGROUND_Google as a class */
    sf_event_params events;            /* event datasets: time_window_us, frame, downsample, polarity, aug_* */
    int32_t threads;                   /* OpenMP threads; 0: the default */
    int64_t log_every;                 /* steps between metric lines; default 100, 0: per epoch only */
    int32_t time_parallel;             /* processes that split T (a job, below); default 1 */
    int64_t global_batch;              /* samples per step over every data rank; 0: batch × data ranks */
    int32_t sync_bn;                   /* BN statistics over the whole global batch; default off */
} sf_config_train;

/* One layer section. `desc` is fully resolved: LIF layers carry the [neuron] defaults with their own keys
 * applied; `input` / `input2` are tensor ids as sf_net_add expects them. */
typedef struct sf_config_layer {
    sf_layer_desc desc;
    int32_t line;                 /* line of the section header (0 for none) */
    uint32_t lif_own;             /* LIF: which neuron keys this section gave itself (bit = key's table index) */
    sf_lif_params lif_own_values; /* LIF: their values */
} sf_config_layer;

typedef struct sf_config {
    char source[SF_CONFIG_PATH_MAX]; /* the file name (or the name given to the string parser) used in messages */
    sf_config_train train;
    sf_net_params net;           /* [train] device, memory, seed; [readout] type, tau, loss; input shape from dataset */
    int32_t classes;             /* the dataset's class count (resolved, like the input shape) */
    sf_optim_params optim;       /* optimizer, lr, momentum, nesterov, weight_decay (Adam betas/eps: defaults) */
    sf_schedule_params schedule; /* schedule, step_size, gamma */
    sf_lif_params neuron;        /* the [neuron] defaults, resolved */
    uint32_t neuron_own;         /* which neuron keys [neuron] gave (alpha follows the surrogate unless given) */
    sf_config_layer *layers;
    int32_t num_layers;
} sf_config;

/* Parses a config file / a config held in a string (`name` is used in messages). */
SF_API sf_status sf_config_load(const char *path, sf_config **out);
SF_API sf_status sf_config_parse_string(const char *text, const char *name, sf_config **out);
SF_API void sf_config_free(sf_config *cfg);

/* An override: key "train.lr", "neuron.tau", "layerN.key" or "readout.type", checked as in a file; a [neuron] key
 * reaches every LIF layer that does not set it itself. Errors name "override train.lr=...". */
SF_API sf_status sf_config_set(sf_config *cfg, const char *key, const char *value);
/* The same from one "section.key=value" argument. */
SF_API sf_status sf_config_set_arg(sf_config *cfg, const char *assignment);

/* The resolved config as INI text that parses back to an equal config (every [train], [neuron] and [readout] key
 * written out, LIF layers with their own keys only). *text is malloc'd; the caller frees it. */
SF_API sf_status sf_config_write(const sf_config *cfg, char **text);

/* Loads one split of the config's dataset from train.data_dir (or its default directory). A missing file is SF_ERR_IO
 * naming the path and where to get it; a malformed one SF_ERR_FORMAT. */
SF_API sf_status sf_config_load_split(const sf_config *cfg, sf_split split, sf_dataset **out);
/* Loader parameters for the training (training = 1) or evaluation split of this config. Its batches live in host
 * memory for cfg's device (sf_host_alloc), so cfg must outlive the loader. */
SF_API void sf_config_loader_params(const sf_config *cfg, int32_t training, sf_loader_params *out);

/* Creates cfg's network with its optimizer; shape errors (the output must have `classes` features) name file:line.
 * The caller compiles it, applies train.threads (sf_set_num_threads) and frees it. */
SF_API sf_status sf_config_build_net(const sf_config *cfg, sf_net **out);
/* 1 where the config's input is one image repeated over the T steps (direct encoding of an image dataset): the
 * trainer then sets sf_net_set_static_input. */
SF_API int32_t sf_config_input_static(const sf_config *cfg);

/* ---------------------------------------------------------------- jobs over several processes
 * One network trained by one process per device over MPI (mpirun, srun) and NCCL, a grid of time_parallel × data ranks
 * (docs/architecture.md, Several processes). Without MPI or NCCL the calls serve one process and refuse the rest. */
typedef struct sf_dist sf_dist;

typedef struct sf_dist_params {
    int32_t time_parallel; /* processes per time group (the segments of T); 1: no time pipeline; 0: all of them */
    int32_t sync_bn;       /* 1: BN batch statistics over every data rank's part of the global batch */
    int32_t bucket_mib;    /* gradient all-reduce bucket; 0: 25 MiB (PyTorch DDP's default) */
    int32_t shard_optimizer; /* 1: the optimizer state sharded over each time group; default 1 */
    int32_t early_receive;   /* GPU: 1 posts a neighbour's receive when the host reaches it (waiting on SMs), 0 when
                              * the compute stream needs the data; default 0 */
} sf_dist_params;

SF_API void sf_dist_default_params(sf_dist_params *p);
/* Joins the job (MPI initialised only under mpirun or srun; else a world of one). SF_ERR_INVALID when time_parallel
 * does not divide the world; SF_ERR_UNSUPPORTED for several processes without MPI built in. */
SF_API sf_status sf_dist_init(const sf_dist_params *p, sf_dist **out);
/* Leaves the job (MPI_Finalize after every process has arrived); NULL is a no-op. */
SF_API void sf_dist_free(sf_dist *d);
SF_API int32_t sf_dist_rank(const sf_dist *d); /* in the world */
SF_API int32_t sf_dist_size(const sf_dist *d); /* processes in the world */
/* "MPI <library version>; NCCL x.y.z" (or what is not built in) into buf (snprintf semantics). */
SF_API void sf_dist_describe(char *buf, size_t cap);
/* Writes `message` to stderr and ends every process of the job (MPI_Abort), for one the others would wait for; with
 * one process it returns and the caller exits itself. */
SF_API void sf_dist_abort(sf_dist *d, int code, const char *message);

/* ---------------------------------------------------------------- training runs
 * The loop behind `spikefuse train`, with exact resume; progress goes to a callback, never to print. A run directory:
 *   train.lock        locked (flock) by the process writing the directory, which it names; a second is refused
 *   last.safetensors  the state after the latest finished epoch (or at an interruption); a new run writes its
 *                     initial state here first, so a directory without it holds no run
 *   best.safetensors  the state after the epoch with the best test accuracy so far (a copy of that epoch's last,
 *                     whose best_step records it; resume repairs a copy an interruption cut off)
 *   config.ini        the resolved config (with every --set applied); --resume refuses one edited to another run
 *   choices           what the network decided when the run started (sparse crossovers; a GPU's convolution
 *                     algorithms, which its memory plan follows), reused on resume
 *   metrics.jsonl     {"type":"step",...} every log_every steps, {"type":"epoch",...} after each epoch */
#define SF_RUN_LAST "last.safetensors"
#define SF_RUN_BEST "best.safetensors"
#define SF_RUN_CONFIG "config.ini"
#define SF_RUN_METRICS "metrics.jsonl"
#define SF_RUN_LOCK "train.lock"
#define SF_RUN_CHOICES "choices"

typedef enum sf_train_event_kind {
    SF_TRAIN_EV_START = 0, /* the run is set up: epoch, epochs, batches, dataset sizes known */
    SF_TRAIN_EV_STEP,      /* a training step finished */
    SF_TRAIN_EV_TEST,      /* the test pass of an epoch starts */
    SF_TRAIN_EV_EPOCH      /* an epoch finished: test results, checkpoint written */
} sf_train_event_kind;

typedef struct sf_train_event {
    sf_train_event_kind kind;
    int64_t epoch;          /* 1-based number of the current epoch */
    int64_t epochs;         /* epochs of the whole run */
    int64_t step;           /* optimizer steps completed in the whole run */
    int64_t batch, batches; /* batches done in this epoch / per epoch */
    int64_t batch_size;
    int64_t train_samples, test_samples;
    int64_t skipped_samples; /* empty samples the readers of event datasets left out (both splits) */
    int64_t bad_images;      /* image folders: images that did not decode, skipped so far (both splits) */
    double data_wait_seconds; /* of epoch_seconds, the time this process waited for batches (since the epoch or
                               * resume started) */
    double epoch_seconds;   /* training time in this epoch so far (test pass excluded) */
    double samples_per_s;   /* training throughput in this epoch */
    double loss, accuracy;  /* running means over this epoch's training batches */
    int64_t skipped;        /* fp16: this epoch's steps skipped because a gradient overflowed (loss scaling) */
    float lr;
    /* SF_TRAIN_EV_EPOCH only */
    double test_accuracy;
    double test_seconds;
    int32_t is_best;
    const float *firing_rates; /* [num_rates], measured on the test set */
    int32_t num_rates;
    size_t peak_bytes;         /* sf_net_peak_bytes */
    size_t peak_rss_bytes;     /* the process's maximum resident set */
    /* SF_TRAIN_EV_START: what setup worked around (an unwritable frame cache, ...), to show as warnings */
    const char *const *notes;
    int32_t num_notes;
} sf_train_event;
#define SF_TRAIN_MAX_NOTES 4

/* Returns nonzero to stop the run after the current step (last.safetensors then records where it stopped). */
typedef int (*sf_train_callback)(const sf_train_event *ev, void *user);

typedef struct sf_train_options {
    const char *run_dir;    /* created; must be free (sf_run_dir_is_free) unless it is resume_dir */
    const char *resume_dir; /* NULL, or a run directory whose last.safetensors this run continues */
    sf_train_callback callback; /* called on every process; its answer to stop counts from any of them */
    void *user;
    /* NULL: alone. Else every process of the job calls with the same config; rank 0 writes the run directory, which
     * all read to resume (a shared file system across hosts); events give the job's figures. */
    sf_dist *dist;
} sf_train_options;

typedef struct sf_train_summary {
    int64_t epochs_done;    /* epochs completed, counting those of a resumed run */
    int64_t steps;
    double test_accuracy;   /* of the last finished epoch (-1 if none) */
    double best_test_accuracy;
    double seconds;         /* wall time of this invocation */
    int32_t interrupted;    /* the callback, or a request to stop (sf_interrupt_request) heard in any phase,
                             * stopped the run: its directory holds what a clean stop leaves */
    int32_t resumable;      /* run_dir holds a checkpoint of this run that --resume continues */
    int32_t failed_together; /* every process failed at the same point (setup, NaN), so none waits; otherwise some
                              * may wait (sf_dist_abort them) */
} sf_train_summary;

/* Trains `cfg`, overrides applied (on resume the checkpoint's config with sf_config_check_same_run's changes). A NaN
 * or Inf stops it with SF_ERR_NUMERIC naming the step and the last good checkpoint. */
SF_API sf_status sf_train_run(const sf_config *cfg, const sf_train_options *opt, sf_train_summary *out);
/* Whether `dir` is free for a new run: missing, or an empty directory but for what a run stopped before its first
 * checkpoint leaves (the lock file and temporaries). */
SF_API int sf_run_dir_is_free(const char *dir);

/* The config stored in a checkpoint's metadata. */
SF_API sf_status sf_checkpoint_config(const char *checkpoint_path, sf_config **out);
/* SF_OK when `wanted` equals `saved` apart from train.epochs, train.data_dir, train.data_cache, train.log_every,
 * train.threads and the device; otherwise SF_ERR_INVALID naming the first setting that differs. */
SF_API sf_status sf_config_check_same_run(const sf_config *saved, const sf_config *wanted);

/* Adds a float to a cJSON object as the shortest decimal that reads back as the same float (0.005, not
 * 0.004999999888), as metrics.jsonl writes them. */
struct cJSON;
SF_API struct cJSON *sf_json_add_float(struct cJSON *obj, const char *key, float v);

/* ---------------------------------------------------------------- checkpoints and evaluation
 * Safetensors files (safetensors.torch.load_file reads them): parameters by sf_net_tensor_info's names, buffers,
 * optimizer state; metadata with the config, the run's position and a CRC-32 per tensor that every load checks. */
typedef struct sf_safetensors sf_safetensors;
SF_API void sf_safetensors_free(sf_safetensors *st);

typedef struct sf_checkpoint_info {
    const char *config;       /* resolved config text */
    int64_t epoch;            /* epochs completed */
    int64_t step;             /* optimizer steps completed */
    const char *loader_state; /* may be NULL */
    double best_metric;       /* best test accuracy so far (-1: none yet) */
    int64_t best_step;        /* step of the best checkpoint (-1: none yet, or not recorded) */
} sf_checkpoint_info;

/* Writes the net (parameters, buffers, optimizer state, sf_net_state) and `info` to `path`, atomically. */
SF_API sf_status sf_checkpoint_save(const sf_net *net, const sf_checkpoint_info *info, const char *path);
/* Opens a checkpoint and checks its format and version; the strings of *info point into *st. */
SF_API sf_status sf_checkpoint_open(const char *path, sf_safetensors **st, sf_checkpoint_info *info);
/* Copies st's tensors into `net` (names, sizes and finiteness checked); with_training_state restores the optimizer
 * state (optimizer set first) and sf_net_state too. */
SF_API sf_status sf_checkpoint_restore(const sf_safetensors *st, sf_net *net, int with_training_state);
/* Gives compiled `net`'s auto layers st's crossovers (and with_densities, the densities) so they choose as the run
 * did; a checkpoint without them or of another device kind or precision leaves the net's, mismatched layers fail. */
SF_API sf_status sf_checkpoint_restore_sparse(const sf_safetensors *st, sf_net *net, int with_densities);

/* One pass over an evaluation loader: test accuracy and the firing rate of every LIF layer. */
typedef struct sf_eval_result {
    int64_t samples, correct;
    double accuracy;      /* correct / samples */
    float *firing_rates;  /* [num_rates]: mean spikes per neuron and step of each LIF layer, weighted by samples */
    int32_t num_rates;
    double seconds;
} sf_eval_result;

/* Runs the rest of the evaluation loader's epoch (shapes as compiled) through sf_net_eval_step, counting `valid`
 * samples; `classes`: readout outputs. `stoppable` (one process only) ends between batches on sf_interrupt_request.
 * Free *out with sf_eval_result_free. */
SF_API sf_status sf_evaluate(sf_net *net, sf_loader *loader, int32_t classes, int stoppable, sf_eval_result *out);
SF_API void sf_eval_result_free(sf_eval_result *r);
/* Index of the largest of n values (the first on ties). */
SF_API int32_t sf_argmax(const float *v, int32_t n);

/* ---------------------------------------------------------------- NIR
 * A config's network with its parameters to a NIR graph (the `nir` package's HDF5 files) and back; docs/nir.md. */

/* The time step NIR's continuous-time neurons are discretised with when a file gives none. */
#define SF_NIR_DEFAULT_DT 1e-4
/* The format version written into NIR files: the `nir` package release whose layout they follow. */
#define SF_NIR_VERSION "1.0.8"

typedef struct sf_nir_graph sf_nir_graph;
SF_API void sf_nir_graph_free(sf_nir_graph *g);
/* The graph's nodes and edges (of its top level). */
SF_API int32_t sf_nir_graph_nodes(const sf_nir_graph *g);
SF_API int32_t sf_nir_graph_edges(const sf_nir_graph *g);
/* Writes the graph to `path` (atomically), numeric arrays gzip-compressed as nir.write does; `version` is written
 * as the file's format version. */
SF_API sf_status sf_nir_write(const sf_nir_graph *g, const char *version, const char *path);
/* Reads a NIR file. Malformed content is SF_ERR_FORMAT naming the HDF5 path of what is wrong. */
SF_API sf_status sf_nir_read(const char *path, sf_nir_graph **out);

/* The graph of cfg's network with `net`'s parameters (net built from cfg), BN folded into the layer before it,
 * dropout and [add] leaving no node, dt (> 0) in its metadata. Max-pooling, a soft reset or a BN with nothing before
 * it fail naming the layer. */
SF_API sf_status sf_config_to_nir(const sf_config *cfg, const sf_net *net, double dt, sf_nir_graph **out);

typedef struct sf_named_tensor {
    char name[64]; /* as sf_net_tensor_info names it: "3.weight" */
    int64_t numel;
    float *data;
} sf_named_tensor;

typedef struct sf_tensor_list {
    sf_named_tensor *items;
    int32_t count;
} sf_tensor_list;

SF_API void sf_tensor_list_free(sf_tensor_list *l);
/* Writes every tensor of the list into the net's parameters (SF_ROLE_PARAM) by name; every parameter of the net
 * must be in the list with its size. The net must be compiled. */
SF_API sf_status sf_tensor_list_apply(const sf_tensor_list *l, sf_net *net);

typedef struct sf_nir_import_options {
    const char *source;  /* the file's name, for messages and the config's opening comment */
    double dt;           /* <= 0: the graph's metadata "dt", else SF_NIR_DEFAULT_DT */
    int32_t dataset;     /* an sf_dataset_kind, or -1: the first whose input has the graph's input size */
    const char *init;    /* written as [train] init (the checkpoint holding the parameters), or NULL */
} sf_nir_import_options;

/* A config (malloc'd INI text that parses and builds) computing the graph, and its parameters. Takes feed-forward
 * Input, Affine, Linear, Conv2d, AvgPool2d, Flatten, LIF, IF, Scale (ones), an LI before Output, nodes of several
 * inputs (as [add]); anything else is SF_ERR_UNSUPPORTED naming the node. */
SF_API sf_status sf_config_from_nir(const sf_nir_graph *g, const sf_nir_import_options *o, char **config_text,
                                    sf_tensor_list *params);

#ifdef __cplusplus
}
#endif

#endif
