/* run.h — what a run directory holds, read for pictures: its config, the metrics logged so far (a run in progress
 * is still appending them), the checkpoint to draw a sample from, and one test sample run through that checkpoint
 * with every LIF layer's spikes and membrane potentials. What is missing becomes a note, not a failure. */
#ifndef SF_PLOT_RUN_H
#define SF_PLOT_RUN_H

#include "spikefuse.h"
#include "spikefuse_train.h"

#include <stdint.h>

/* ---------------------------------------------------------------- notes: what could not be drawn, and why */
#define SF_NOTES_MAX 24
typedef struct sf_notes {
    int n;
    char text[SF_NOTES_MAX][480];
} sf_notes;
void sf_note(sf_notes *notes, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------- metrics.jsonl
 * Numbers a line lacks are NaN; lines of other types are ignored. */
typedef struct sf_step_point {
    double epoch, step, loss, accuracy, lr; /* loss and accuracy: means over the steps since the previous line */
} sf_step_point;

typedef struct sf_epoch_point {
    double epoch, step, train_loss, train_accuracy, test_accuracy, lr, samples_per_s, train_seconds, peak_bytes;
    int best;
    double *rates; /* firing rate of each LIF layer on the test set, n_rates of them */
    int32_t n_rates;
} sf_epoch_point;

typedef struct sf_metrics_log {
    sf_step_point *steps;
    int64_t n_steps;
    sf_epoch_point *epochs;
    int64_t n_epochs;
    int32_t n_rates; /* the most rates an epoch line has */
    int stopped;     /* a "stopped" line: training ended on a NaN/Inf */
    double stopped_step;
} sf_metrics_log;

/* Reads metrics.jsonl. A last line without its newline (still being written, or cut by a crash) and lines that
 * are not JSON objects are skipped with a note naming the line. SF_ERR_IO if the file cannot be read. */
sf_status sf_metrics_log_read(const char *path, sf_metrics_log *log, sf_notes *notes);
/* The same from the file's `len` bytes in memory (`path` names it in the notes). */
sf_status sf_metrics_log_parse(const char *text, size_t len, const char *path, sf_metrics_log *log, sf_notes *notes);
void sf_metrics_log_free(sf_metrics_log *log);

/* ---------------------------------------------------------------- the run directory */
typedef struct sf_run {
    char dir[4096];
    sf_config *cfg;    /* config.ini, else the checkpoint's; NULL when neither can be read */
    char *config_text; /* the resolved config as INI text, or NULL */
    int have_metrics;
    sf_metrics_log log;
    char checkpoint[4096]; /* best.safetensors, else last.safetensors; "" when there is none */
} sf_run;

/* SF_ERR_IO when `dir` is not a directory, SF_ERR_INVALID when it holds none of config.ini, metrics.jsonl and a
 * checkpoint; anything else missing or unreadable is noted. */
sf_status sf_run_open(const char *dir, sf_run *run, sf_notes *notes);
void sf_run_close(sf_run *run);
/* The config's layer index of the k-th LIF layer (counted from 0), or -1 when unknown. */
int32_t sf_run_lif_layer(const sf_run *run, int32_t k);

/* ---------------------------------------------------------------- one test sample through the checkpoint */
typedef struct sf_trace_layer {
    int32_t layer;   /* index of the [lif] section in the config (numbered from 0) */
    int32_t c, h, w; /* its output shape per step */
    int64_t n;       /* neurons: c·h·w */
    float threshold; /* v_threshold */
    float *spikes;   /* [T, n] */
    float *membrane; /* [T, n]: the potential h before the reset */
} sf_trace_layer;

typedef struct sf_trace {
    int64_t sample, T;
    int32_t label, predicted;
    sf_encoding encoding;
    int32_t c, h, w; /* input shape per step */
    float *input;    /* [T, c·h·w]: what the network received at each step */
    int32_t n_lif;
    sf_trace_layer *lif;
    int32_t classes;
    float *output;     /* [T, classes]: the last layer's output at each step */
    int32_t out_layer; /* index of the last layer */
    sf_layer_kind out_kind;
    sf_readout readout;
    int64_t ckpt_epoch; /* epochs the checkpoint had completed */
    char ckpt_name[64]; /* its file name */
} sf_trace;

/* Runs test sample `sample` through the run's checkpoint on the CPU (batch 1, evaluation mode) and reads every
 * tensor back with sf_net_set_keep_activations. SF_ERR_INVALID (naming the range) when `sample` is outside the
 * test set; when there is no checkpoint or no test set, *have is 0 and a note says why. */
sf_status sf_trace_run(const sf_run *run, int64_t sample, sf_trace *tr, int *have, sf_notes *notes);
void sf_trace_free(sf_trace *tr);

#endif
