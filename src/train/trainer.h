/* trainer.h — the training loop behind `spikefuse train`: batches from src/data, steps through the engine,
 * test evaluation, checkpoints and metrics in a run directory, exact resume. It never prints: progress goes to a
 * callback that the caller renders.
 *
 * The run directory holds
 *   train.lock        locked (flock) by the process writing the directory, which it names; a second is refused
 *   last.safetensors  the state after the latest finished epoch (or at an interruption); a new run writes its
 *                     initial state here first, so a directory without it holds no run
 *   best.safetensors  the state after the epoch with the best test accuracy so far (a copy of that epoch's last,
 *                     whose best_step records it; resume repairs a copy an interruption cut off)
 *   config.ini        the resolved config (with every --set applied)
 *   metrics.jsonl     {"type":"step",...} every log_every steps, {"type":"epoch",...} after each epoch */
#ifndef SF_TRAIN_TRAINER_H
#define SF_TRAIN_TRAINER_H

#include "config/config.h"
#include "distributed/dist.h"
#include "spikefuse.h"

#include <stddef.h>
#include <stdint.h>

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
} sf_train_event;

/* Returns nonzero to stop the run after the current step (last.safetensors then records where it stopped). */
typedef int (*sf_train_callback)(const sf_train_event *ev, void *user);

typedef struct sf_train_options {
    const char *run_dir;    /* created; must be free (sf_run_dir_is_free) unless it is resume_dir */
    const char *resume_dir; /* NULL, or a run directory whose last.safetensors this run continues */
    sf_train_callback callback; /* called on every process; its answer to stop counts from any of them */
    void *user;
    /* NULL: this process trains alone. Else one process of a job (src/distributed): every process calls sf_train_run
     * with the same config; rank 0 alone writes the run directory (metrics, checkpoints), which every process reads
     * to resume (a file system they share, for several hosts); the events report the whole job's figures. */
    sf_dist *dist;
} sf_train_options;

typedef struct sf_train_summary {
    int64_t epochs_done;    /* epochs completed, counting those of a resumed run */
    int64_t steps;
    double test_accuracy;   /* of the last finished epoch (-1 if none) */
    double best_test_accuracy;
    double seconds;         /* wall time of this invocation */
    int32_t interrupted;    /* the callback asked to stop */
    int32_t failed_together; /* a job's failure that every process met at the same point (setup, NaN): none waits
                              * for another; other failures may leave processes waiting (sf_dist_abort them) */
} sf_train_summary;

/* Trains `cfg` (already resolved: the caller has applied overrides; on resume it is the checkpoint's config with
 * the allowed changes, see sf_resume_config). A NaN/Inf stops training with SF_ERR_NUMERIC and a message that
 * names the step and the last good checkpoint. */
sf_status sf_train_run(const sf_config *cfg, const sf_train_options *opt, sf_train_summary *out);

/* Whether `dir` is free for a new run: missing, or an empty directory but for what a run stopped before its first
 * checkpoint leaves (the lock file and temporaries). */
int sf_run_dir_is_free(const char *dir);

/* Name of the file in a run directory that --resume continues from. */
#define SF_RUN_LAST "last.safetensors"
#define SF_RUN_BEST "best.safetensors"
#define SF_RUN_CONFIG "config.ini"
#define SF_RUN_METRICS "metrics.jsonl"
#define SF_RUN_LOCK "train.lock"

#endif
