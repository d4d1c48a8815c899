/* trainer.c — the training loop: epochs of training steps, a test pass, checkpoints and metrics after each epoch,
 * and an exact continuation from a checkpoint (model, optimizer, RNG, data position and the epoch's running sums);
 * the run directory is locked while a run writes it, and every state an interruption can leave it in continues. */
#include "spikefuse_train.h"

#include "core/error.h"
#include "io/files.h"
#include "io/interrupt.h"
#include "train/checkpoint.h"
#include "train/choices.h"
#include "train/job.h"
#include "train/metrics.h"
#include "train/run_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* Running sums of the current epoch and of the current logging interval: part of the resumable state, so an
 * interrupted epoch reports the same figures as an uninterrupted one. */
typedef struct epoch_sums {
    double loss_sum;
    int64_t correct, seen, batches;
    int64_t skipped; /* fp16 steps whose gradients overflowed: no update, the loss scale halved */
    double train_seconds;
    double log_loss_sum;
    int64_t log_correct, log_seen, log_steps;
} epoch_sums;

typedef struct run {
    const sf_config *cfg;
    const sf_train_options *opt;
    sf_dataset *train_ds, *test_ds;
    sf_loader *train_ld, *test_ld;
    sf_net *net;
    sf_metrics *metrics;
    char *config_text;
    char last_path[4096], best_path[4096];
    int lock_fd;  /* the run directory's lock (-1: not held) */
    int in_place; /* continuing the run in its own directory */
    int32_t classes;
    int64_t step, epochs_done;
    double best, last_test;
    int64_t best_step; /* the step best.safetensors holds (-1: none yet) */
    int64_t ckpt_epoch, ckpt_step; /* of the last checkpoint written or resumed (-1: none) */
    char ckpt_path[4096];
    epoch_sums sums;
    sf_train_event ev;
    sf_job job;
    int stop_wish; /* a callback here asked to stop; the other processes hear of it with the next step's sums */
    double wait_mark; /* the training loader's wait when the epoch started (or the run resumed) */
    char notes[SF_TRAIN_MAX_NOTES][640]; /* what setup worked around, for the start event */
    const char *note_ptrs[SF_TRAIN_MAX_NOTES];
    int32_t num_notes;
} run;

static void add_note(run *r, const char *text)
{
    if (!text[0] || r->num_notes == SF_TRAIN_MAX_NOTES) return;
    snprintf(r->notes[r->num_notes], sizeof r->notes[0], "%s", text);
    r->note_ptrs[r->num_notes] = r->notes[r->num_notes];
    r->num_notes++;
}

static size_t peak_rss_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (size_t)ru.ru_maxrss * 1024u : 0;
}

/* ---------------------------------------------------------------- loader state (checkpoint metadata)
 * {"epoch":E,"index":I, then every field of epoch_sums}: one table serves writing and reading. */

static const struct {
    const char *key;
    size_t offset;
    int is_int; /* int64_t, else double */
} sum_fields[] = {
    {"loss_sum", offsetof(epoch_sums, loss_sum), 0},       {"correct", offsetof(epoch_sums, correct), 1},
    {"seen", offsetof(epoch_sums, seen), 1},               {"batches", offsetof(epoch_sums, batches), 1},
    {"skipped", offsetof(epoch_sums, skipped), 1},
    {"train_seconds", offsetof(epoch_sums, train_seconds), 0},
    {"log_loss_sum", offsetof(epoch_sums, log_loss_sum), 0}, {"log_correct", offsetof(epoch_sums, log_correct), 1},
    {"log_seen", offsetof(epoch_sums, log_seen), 1},       {"log_steps", offsetof(epoch_sums, log_steps), 1},
};
#define NUM_SUM_FIELDS (sizeof sum_fields / sizeof sum_fields[0])

static char *loader_state_json(const run *r)
{
    sf_loader_state ls;
    sf_loader_get_state(r->train_ld, &ls);
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "epoch", (double)ls.epoch);
    cJSON_AddNumberToObject(o, "index", (double)ls.index);
    cJSON_AddNumberToObject(o, "global_batch", (double)r->job.global_batch);
    for (size_t i = 0; i < NUM_SUM_FIELDS; i++) {
        const char *field = (const char *)&r->sums + sum_fields[i].offset;
        double v;
        if (sum_fields[i].is_int) {
            int64_t n;
            memcpy(&n, field, sizeof n);
            v = (double)n;
        } else {
            memcpy(&v, field, sizeof v);
        }
        /* 17 digits read back to the same double; cJSON's 15 lose a running sum's last bits, changing a resumed
         * epoch's mean loss */
        char exact[32];
        snprintf(exact, sizeof exact, "%.17g", v);
        if (isfinite(v))
            cJSON_AddRawToObject(o, sum_fields[i].key, exact);
        else
            cJSON_AddNumberToObject(o, sum_fields[i].key, v); /* JSON has no NaN: written as null, refused on resume */
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static sf_status restore_loader_state(run *r, const char *text)
{
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(o, "epoch");
    const cJSON *index = cJSON_GetObjectItemCaseSensitive(o, "index");
    const cJSON *global = cJSON_GetObjectItemCaseSensitive(o, "global_batch");
    int ok = cJSON_IsNumber(epoch) && cJSON_IsNumber(index);
    /* the batch index counts global batches: the same position needs the same global batch (absent: one process) */
    if (ok && cJSON_IsNumber(global) && (int64_t)global->valuedouble != r->job.global_batch) {
        int64_t was = (int64_t)global->valuedouble;
        cJSON_Delete(o);
        return sf_fail(SF_ERR_INVALID,
                       "the run trained with a global batch of %" PRId64 " samples, this job has %" PRId64 " (%d "
                       "data-parallel ranks × %" PRId64 "): start as many ranks as before, or set train.global_batch",
                       was, r->job.global_batch, r->job.data_ranks, r->job.batch);
    }
    sf_loader_state ls = {.epoch = ok ? (int64_t)epoch->valuedouble : 0, .index = ok ? (int64_t)index->valuedouble : 0};
    epoch_sums sums;
    for (size_t i = 0; ok && i < NUM_SUM_FIELDS; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, sum_fields[i].key);
        ok = cJSON_IsNumber(v);
        if (!ok) break;
        char *field = (char *)&sums + sum_fields[i].offset;
        if (sum_fields[i].is_int) {
            int64_t n = (int64_t)v->valuedouble;
            memcpy(field, &n, sizeof n);
        } else {
            memcpy(field, &v->valuedouble, sizeof v->valuedouble);
        }
    }
    cJSON_Delete(o);
    if (!ok) return sf_fail(SF_ERR_FORMAT, "the checkpoint's loader_state is missing or malformed");
    if (sf_loader_set_state(r->train_ld, &ls) != SF_OK)
        return sf_fail_context(SF_ERR_FORMAT, "the checkpoint's loader_state does not fit this data set: ");
    r->sums = sums;
    return SF_OK;
}

/* ---------------------------------------------------------------- checkpoints */

/* Writes last.safetensors, and when this is the best state so far, best.safetensors as a copy of it made after it.
 * last records the step best holds, so an interruption between the two (or a failed copy) leaves a last whose
 * best_step is its own step: restore_best() then makes the copy again. */
static sf_status save_checkpoint(run *r, int is_best)
{
    if (!r->job.root) return SF_OK;
    char *ls = loader_state_json(r);
    if (!ls) return sf_fail(SF_ERR_NOMEM, "out of memory");
    if (is_best) r->best_step = r->step;
    sf_checkpoint_info info = {.config = r->config_text, .epoch = r->epochs_done, .step = r->step,
                               .loader_state = ls, .best_metric = r->best, .best_step = r->best_step};
    sf_status s = sf_checkpoint_save(r->net, &info, r->last_path);
    free(ls);
    if (s == SF_OK) {
        r->ckpt_epoch = r->epochs_done;
        r->ckpt_step = r->step;
        snprintf(r->ckpt_path, sizeof r->ckpt_path, "%s", r->last_path);
    }
    if (s == SF_OK && is_best) s = sf_copy_file_atomic(r->last_path, r->best_path);
    return s;
}

/* save_checkpoint at a point every process reaches, `before` the outcome of what came first on this process: the
 * optimizer state is whole while rank 0 writes it (a collective where it is sharded, so it runs whatever `before`
 * says). */
static sf_status save_together(run *r, int is_best, sf_status before)
{
    sf_status s = sf_job_optimizer_whole(&r->job, r->net);
    if (before != SF_OK) s = before;
    if (s == SF_OK) s = save_checkpoint(r, is_best);
    sf_status back = sf_job_optimizer_parts(&r->job, r->net);
    return s != SF_OK ? s : back;
}

/* The step of the checkpoint at `path`, or -1 when it is missing or unreadable. */
static int64_t checkpoint_step(const char *path)
{
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    int64_t step = sf_checkpoint_open(path, &st, &info) == SF_OK ? info.step : -1;
    sf_safetensors_free(st);
    return step;
}

/* Makes best.safetensors the checkpoint of step best_step from `dir`'s best, or its last where that is the best
 * state (stopped before the copy). A best removed or damaged by hand has no source and stays so. */
static sf_status restore_best(run *r, const char *dir)
{
    if (r->best_step < 0) return SF_OK;
    char best[4096], last[4096];
    SF_TRY(sf_path_join(best, sizeof best, dir, SF_RUN_BEST));
    SF_TRY(sf_path_join(last, sizeof last, dir, SF_RUN_LAST));
    if (checkpoint_step(best) == r->best_step) return r->in_place ? SF_OK : sf_copy_file_atomic(best, r->best_path);
    if (r->best_step == r->step) return sf_copy_file_atomic(last, r->best_path);
    return SF_OK;
}

static sf_status resume(run *r)
{
    char path[4096], choices[4096], note[640] = "";
    SF_TRY(sf_path_join(path, sizeof path, r->opt->resume_dir, SF_RUN_LAST));
    SF_TRY(sf_path_join(choices, sizeof choices, r->opt->resume_dir, SF_RUN_CHOICES));
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    SF_TRY(sf_checkpoint_open(path, &st, &info));
    /* the config the run recorded is what it continues with: an edit of its config.ini would be lost */
    sf_status s = sf_run_config_file_check(r->opt->resume_dir, info.config, note, sizeof note);
    add_note(r, note);
    if (s == SF_OK) s = sf_checkpoint_restore(st, r->net, 1);
    if (s == SF_OK) s = sf_checkpoint_restore_sparse(st, r->net, 1);
    /* the choices the run started with, over whatever this compile measured */
    if (s == SF_OK) s = sf_choices_apply(choices, r->net, note, sizeof note);
    add_note(r, note);
    if (s == SF_OK) s = restore_loader_state(r, info.loader_state);
    if (s == SF_OK) {
        r->epochs_done = info.epoch;
        r->step = info.step;
        r->best = info.best_metric;
        r->best_step = info.best_step;
        r->ckpt_epoch = info.epoch;
        r->ckpt_step = info.step;
        snprintf(r->ckpt_path, sizeof r->ckpt_path, "%s", path);
    }
    sf_safetensors_free(st);
    return s == SF_OK ? s : sf_fail_context(s, "resuming from %s: ", path);
}

/* A fresh run starts from the parameters (and BN statistics) of the checkpoint train.init names, e.g. one that
 * `spikefuse import` wrote from a NIR graph. */
static sf_status init_from(run *r, const char *path)
{
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    sf_status s = sf_checkpoint_open(path, &st, &info);
    if (s == SF_OK) s = sf_checkpoint_restore(st, r->net, 0);
    sf_safetensors_free(st);
    return s == SF_OK ? s : sf_fail_context(s, "train.init: ");
}

/* ---------------------------------------------------------------- metrics */

/* fp16: the epoch's skipped steps so far and the loss scale now. */
static void add_loss_scaling(const run *r, cJSON *o, int64_t skipped)
{
    if (r->cfg->net.precision != SF_PRECISION_FP16) return;
    sf_net_state st;
    cJSON_AddNumberToObject(o, "skipped_steps", (double)skipped);
    if (sf_net_get_state(r->net, &st) == SF_OK) sf_json_add_float(o, "loss_scale", st.loss_scale);
}

static sf_status log_step_line(run *r, float lr)
{
    epoch_sums *e = &r->sums;
    cJSON *o = cJSON_CreateObject();
    if (!o) return sf_fail(SF_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(o, "type", "step");
    cJSON_AddNumberToObject(o, "epoch", (double)(r->epochs_done + 1));
    cJSON_AddNumberToObject(o, "step", (double)r->step);
    cJSON_AddNumberToObject(o, "loss", e->log_loss_sum / (double)e->log_steps);
    cJSON_AddNumberToObject(o, "accuracy", (double)e->log_correct / (double)e->log_seen);
    sf_json_add_float(o, "lr", lr);
    cJSON_AddNumberToObject(o, "samples_per_s", e->train_seconds > 0 ? (double)e->seen / e->train_seconds : 0);
    add_loss_scaling(r, o, e->skipped);
    sf_status s = r->metrics ? sf_metrics_write(r->metrics, o) : SF_OK; /* rank 0 writes */
    cJSON_Delete(o);
    e->log_loss_sum = 0;
    e->log_correct = e->log_seen = e->log_steps = 0;
    return s;
}

static sf_status log_epoch_line(run *r, const sf_eval_result *test)
{
    const sf_train_event *ev = &r->ev;
    cJSON *o = cJSON_CreateObject();
    if (!o) return sf_fail(SF_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(o, "type", "epoch");
    cJSON_AddNumberToObject(o, "epoch", (double)ev->epoch);
    cJSON_AddNumberToObject(o, "step", (double)r->step);
    cJSON_AddNumberToObject(o, "train_loss", ev->loss);
    cJSON_AddNumberToObject(o, "train_accuracy", ev->accuracy);
    cJSON_AddNumberToObject(o, "test_accuracy", test->accuracy);
    cJSON *rates = cJSON_AddArrayToObject(o, "firing_rates");
    for (int32_t i = 0; rates && i < test->num_rates; i++)
        cJSON_AddItemToArray(rates, sf_json_float(test->firing_rates[i]));
    sf_json_add_float(o, "lr", ev->lr);
    cJSON_AddNumberToObject(o, "samples_per_s", ev->samples_per_s);
    cJSON_AddNumberToObject(o, "train_seconds", ev->epoch_seconds);
    cJSON_AddNumberToObject(o, "data_wait_seconds", ev->data_wait_seconds);
    cJSON_AddNumberToObject(o, "test_seconds", test->seconds);
    if (ev->bad_images) cJSON_AddNumberToObject(o, "bad_images", (double)ev->bad_images);
    cJSON_AddNumberToObject(o, "peak_bytes", (double)ev->peak_bytes);
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)ev->peak_rss_bytes);
    cJSON_AddBoolToObject(o, "best", ev->is_best);
    add_loss_scaling(r, o, ev->skipped);
    sf_status s = r->metrics ? sf_metrics_write(r->metrics, o) : SF_OK; /* rank 0 writes */
    cJSON_Delete(o);
    return s;
}

/* ---------------------------------------------------------------- setup */

static sf_status open_data(run *r)
{
    const sf_config *cfg = r->cfg;
    SF_TRY(sf_config_load_split(cfg, SF_SPLIT_TRAIN, &r->train_ds));
    SF_TRY(sf_config_load_split(cfg, SF_SPLIT_TEST, &r->test_ds));
    add_note(r, r->train_ds->warning);
    add_note(r, r->test_ds->warning);
    r->classes = r->train_ds->classes;
    if (r->train_ds->count < r->job.global_batch)
        return sf_fail(SF_ERR_INVALID, "%s: the training set has %" PRId64 " samples, fewer than one batch of %" PRId64
                       " (lower train.batch)", cfg->source, r->train_ds->count, r->job.global_batch);
    sf_loader_params lp;
    sf_config_loader_params(cfg, 1, &lp);
    sf_job_shard(&r->job, &lp);
    SF_TRY(sf_loader_create(r->train_ds, &lp, &r->train_ld));
    sf_config_loader_params(cfg, 0, &lp);
    sf_job_shard(&r->job, &lp);
    return sf_loader_create(r->test_ds, &lp, &r->test_ld);
}

/* What a run stopped before its first checkpoint may leave (lock, choices, temporaries): a directory holding
 * nothing else has no run in it. */
static int run_leftover(const char *name)
{
    static const char *const files[] = {SF_RUN_LAST, SF_RUN_BEST, SF_RUN_CONFIG, SF_RUN_METRICS, SF_RUN_CHOICES};
    if (strcmp(name, SF_RUN_LOCK) == 0 || strcmp(name, SF_RUN_CHOICES) == 0) return 1;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (sf_is_temp_of(name, files[i])) return 1;
    return 0;
}

int sf_run_dir_is_free(const char *dir)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) return errno == ENOENT;
    return S_ISDIR(sb.st_mode) && sf_dir_check_empty(dir, run_leftover) == SF_OK;
}

/* Creates and locks the run directory; a new run (not one continued in place) needs it free of any run. */
static sf_status lock_dir(run *r)
{
    const sf_train_options *o = r->opt;
    SF_TRY(sf_dir_create(o->run_dir));
    char path[4096];
    SF_TRY(sf_path_join(path, sizeof path, o->run_dir, SF_RUN_LOCK));
    sf_status s = sf_lock_acquire(path, &r->lock_fd);
    if (s == SF_ERR_STATE)
        return sf_fail_context(s, "the run directory %s is in use by another spikefuse train: ", o->run_dir);
    SF_TRY(s);
    if (r->in_place) return SF_OK;
    s = sf_dir_check_empty(o->run_dir, run_leftover);
    if (s != SF_ERR_STATE) return s;
    SF_TRY(sf_path_join(path, sizeof path, o->run_dir, SF_RUN_LAST));
    if (!sf_file_exists(path))
        return sf_fail_context(s, "refusing to write a new run over a directory that is not empty (choose another "
                                  "--out): ");
    return sf_fail(s,
                   "%s holds a run: refusing to write a new run over it (choose another --out, or continue that run "
                   "with --resume %s)",
                   o->run_dir, o->run_dir);
}

/* Writes the run directory in an order without dead ends (docs/architecture.md, Run directories): a new run's first
 * checkpoint first; a continued run's best before its last, which records best's step. */
static sf_status prepare_dir(run *r)
{
    const sf_train_options *o = r->opt;
    if (!r->job.root) return SF_OK; /* rank 0 writes the run directory */
    SF_TRY(sf_path_join(r->last_path, sizeof r->last_path, o->run_dir, SF_RUN_LAST));
    SF_TRY(sf_path_join(r->best_path, sizeof r->best_path, o->run_dir, SF_RUN_BEST));
    /* Saves killed midway leave temporaries. */
    SF_TRY(sf_remove_stale_temps(o->run_dir));
    if (o->resume_dir) SF_TRY(restore_best(r, o->resume_dir));
    char path[4096];
    /* the choices the run started with, recorded once (a continued run's are those it was given back) */
    SF_TRY(sf_path_join(path, sizeof path, o->run_dir, SF_RUN_CHOICES));
    if (!r->in_place || !sf_path_exists(path)) SF_TRY(sf_choices_write(r->net, path));
    if (!r->in_place) SF_TRY(save_checkpoint(r, 0));
    SF_TRY(sf_path_join(path, sizeof path, o->run_dir, SF_RUN_CONFIG));
    /* a config.ini that says the same (its comments or layout changed) stays as it is */
    if (!r->in_place || sf_run_config_file_same(o->run_dir, r->config_text) != SF_OK)
        SF_TRY(sf_write_file_atomic(path, r->config_text, strlen(r->config_text)));
    SF_TRY(sf_path_join(path, sizeof path, o->run_dir, SF_RUN_METRICS));
    /* Lines logged after the checkpoint would be logged again. */
    if (r->in_place) SF_TRY(sf_metrics_truncate(path, r->step));
    return sf_metrics_open(path, &r->metrics);
}

/* Each part that may fail on one process alone ends with every process agreeing, so that none waits in a
 * collective for one that gave up. */
static sf_status setup(run *r)
{
    const sf_config *cfg = r->cfg;
    const sf_job *j = &r->job;
    SF_TRY(sf_config_write(cfg, &r->config_text));
    /* the plan fills the job before it judges the config; the same-run check comes first, so that a process with
     * another config cannot fail alone */
    sf_status plan = sf_job_plan(r->opt->dist, cfg, &r->job);
    SF_TRY(sf_job_check_same(j, r->config_text));
    SF_TRY(plan);
    if (cfg->train.threads > 0) sf_set_num_threads(cfg->train.threads);
    SF_TRY(sf_job_agree(j, open_data(r), "loading the data"));
    char choices[4096] = "";
    if (r->opt->resume_dir) SF_TRY(sf_path_join(choices, sizeof choices, r->opt->resume_dir, SF_RUN_CHOICES));
    SF_TRY(sf_job_agree(j, sf_job_build_net(j, cfg, choices[0] ? choices : NULL, &r->net), "building the network"));
    SF_TRY(sf_job_agree(j, sf_interrupt_check(), "building the network"));
    r->in_place = r->opt->resume_dir && sf_same_dir(r->opt->resume_dir, r->opt->run_dir);
    SF_TRY(sf_job_agree(j, r->job.root ? lock_dir(r) : SF_OK, "locking the run directory"));
    /* the resume and the run directory's first checkpoint see the whole optimizer state */
    SF_TRY(sf_job_optimizer_whole(j, r->net));
    if (r->opt->resume_dir) SF_TRY(sf_job_agree(j, resume(r), "resuming"));
    else if (cfg->train.init[0]) SF_TRY(sf_job_agree(j, init_from(r, cfg->train.init), "loading the initial state"));
    SF_TRY(sf_job_agree(j, prepare_dir(r), "preparing the run directory"));
    return sf_job_optimizer_parts(j, r->net);
}

/* ---------------------------------------------------------------- the loop */

static void fill_progress(run *r, sf_train_event_kind kind, float lr)
{
    sf_train_event *ev = &r->ev;
    const epoch_sums *e = &r->sums;
    ev->kind = kind;
    ev->epoch = r->epochs_done + 1;
    ev->epochs = r->cfg->train.epochs;
    ev->step = r->step;
    ev->batch = e->batches;
    ev->batches = sf_loader_batches_per_epoch(r->train_ld);
    ev->batch_size = r->job.global_batch;
    ev->train_samples = r->train_ds->count;
    ev->test_samples = r->test_ds->count;
    ev->skipped_samples = r->train_ds->skipped + r->test_ds->skipped;
    ev->bad_images = sf_dataset_bad_images(r->train_ds) + sf_dataset_bad_images(r->test_ds);
    ev->data_wait_seconds = sf_loader_wait_seconds(r->train_ld) - r->wait_mark;
    ev->epoch_seconds = e->train_seconds;
    ev->samples_per_s = e->train_seconds > 0 ? (double)e->seen / e->train_seconds : 0;
    ev->loss = e->batches ? e->loss_sum / (double)e->batches : 0;
    ev->accuracy = e->seen ? (double)e->correct / (double)e->seen : 0;
    ev->skipped = e->skipped;
    ev->lr = lr;
    ev->notes = r->note_ptrs;
    ev->num_notes = r->num_notes;
}

/* The callback's answer, or a request to stop made meanwhile (io/interrupt.h): whether to stop. */
static int notify(run *r)
{
    const int stop = r->opt->callback ? r->opt->callback(&r->ev, r->opt->user) : 0;
    return stop || sf_interrupt_requested();
}

static sf_status numeric_stop(run *r, float lr)
{
    char why[512];
    snprintf(why, sizeof why, "%s", sf_last_error());
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "type", "stopped");
        cJSON_AddStringToObject(o, "reason", "non-finite loss or gradient");
        cJSON_AddNumberToObject(o, "epoch", (double)(r->epochs_done + 1));
        cJSON_AddNumberToObject(o, "step", (double)(r->step + 1));
        sf_json_add_float(o, "lr", lr);
        add_loss_scaling(r, o, r->sums.skipped);
        if (r->metrics) sf_metrics_write(r->metrics, o); /* best effort: the error below is what matters */
        cJSON_Delete(o);
    }
    char kept[4200];
    if (r->ckpt_epoch >= 0)
        snprintf(kept, sizeof kept, "the last good checkpoint is %s (epoch %" PRId64 ", step %" PRId64 ")",
                 r->ckpt_path, r->ckpt_epoch, r->ckpt_step);
    else
        snprintf(kept, sizeof kept, "no checkpoint had been written yet");
    return sf_fail(SF_ERR_NUMERIC,
                   "training stopped: the loss or a gradient became NaN/Inf at epoch %" PRId64 ", step %" PRId64
                   " (lr %g; %s); %s. A lower train.lr usually helps.",
                   r->epochs_done + 1, r->step + 1, (double)lr, why, kept);
}

/* Trains until the loader reports the end of the epoch. Returns SF_OK with *stopped set when a callback asked to
 * stop: at once for a process alone, else after the next step's sums have told every process. */
static sf_status train_epoch(run *r, float lr, int *stopped)
{
    epoch_sums *e = &r->sums;
    int64_t log_every = r->cfg->train.log_every;
    for (;;) {
        double t0 = sf_now_seconds();
        const sf_batch *b = NULL;
        SF_TRY(sf_loader_next(r->train_ld, &b));
        if (!b) return SF_OK;
        sf_step_result res;
        sf_status s = sf_net_train_step(r->net, b->x, b->labels, &res);
        /* A NaN fails only its own rank's step (the others' fp16 overflow is skipped): alone, stop now; in a job
         * the step sums carry it to every process, so all stop together (failed_together). */
        if (s == SF_ERR_NUMERIC && r->job.size == 1) return numeric_stop(r, lr);
        if (s != SF_ERR_NUMERIC) SF_TRY(s);
        double loss = s == SF_ERR_NUMERIC ? NAN : res.loss, correct = res.correct;
        int agreed = r->stop_wish;
        SF_TRY(sf_job_step_sums(&r->job, &loss, &correct, &agreed));
        if (!isfinite(loss)) {
            if (s == SF_OK) sf_fail(SF_ERR_NUMERIC, "the loss of another process is NaN or Inf");
            return numeric_stop(r, lr);
        }
        e->train_seconds += sf_now_seconds() - t0;
        r->step++;
        e->batches++;
        e->skipped += res.skipped; /* the same on every process: the gradients it checked are the reduced ones */
        e->loss_sum += loss;
        e->correct += (int64_t)correct;
        e->seen += r->job.global_batch;
        e->log_loss_sum += loss;
        e->log_correct += (int64_t)correct;
        e->log_seen += r->job.global_batch;
        e->log_steps++;
        if (log_every > 0 && r->step % log_every == 0) SF_TRY(log_step_line(r, lr));
        fill_progress(r, SF_TRAIN_EV_STEP, lr);
        if (notify(r)) r->stop_wish = 1;
        if (agreed || (r->job.size == 1 && r->stop_wish)) {
            *stopped = 1;
            return SF_OK;
        }
    }
}

static sf_status finish_epoch(run *r, float lr)
{
    fill_progress(r, SF_TRAIN_EV_TEST, lr);
    notify(r);
    /* Every test pass sees the same draws (Poisson encoding): accuracies compare across epochs, a resumed run
     * picks the same best, and `spikefuse eval` of a checkpoint reproduces its accuracy. */
    const sf_loader_state first = {.epoch = 0, .index = 0};
    SF_TRY(sf_loader_set_state(r->test_ld, &first));
    /* every data rank's BN running statistics saw its own part of the data: the model keeps their mean */
    if (r->job.dist) SF_TRY(sf_dist_average_buffers(r->job.dist, r->net));
    sf_eval_result test;
    SF_TRY(sf_evaluate(r->net, r->test_ld, r->classes, r->job.size == 1, &test));
    sf_status m = sf_job_merge_eval(&r->job, &test);
    if (m != SF_OK) {
        sf_eval_result_free(&test);
        return m;
    }
    fill_progress(r, SF_TRAIN_EV_EPOCH, lr);
    r->epochs_done++;
    r->last_test = test.accuracy;
    int is_best = test.accuracy > r->best;
    if (is_best) r->best = test.accuracy;
    r->ev.test_accuracy = test.accuracy;
    r->ev.test_seconds = test.seconds;
    r->ev.is_best = is_best;
    r->ev.firing_rates = test.firing_rates;
    r->ev.num_rates = test.num_rates;
    r->ev.peak_bytes = sf_net_peak_bytes(r->net);
    r->ev.peak_rss_bytes = peak_rss_bytes();
    memset(&r->sums, 0, sizeof r->sums);
    r->wait_mark = sf_loader_wait_seconds(r->train_ld);
    /* The line goes first: if the save is killed, resuming cuts the line (its step is past the checkpoint). */
    sf_status s = save_together(r, is_best, log_epoch_line(r, &test));
    s = sf_job_agree(&r->job, s, "writing the epoch's metrics and checkpoint");
    if (s == SF_OK) notify(r);
    r->ev.firing_rates = NULL;
    sf_eval_result_free(&test);
    return s;
}

/* The training loader back at the end of the epoch it just finished (it had moved on to the next): a run stopped in
 * its test pass keeps the state after the epoch's training, and resumed, evaluates that epoch. */
static sf_status back_to_epoch_end(run *r)
{
    sf_loader_state st;
    sf_loader_get_state(r->train_ld, &st);
    st = (sf_loader_state){.epoch = st.epoch - 1, .index = sf_loader_batches_per_epoch(r->train_ld)};
    return sf_loader_set_state(r->train_ld, &st);
}

static sf_status train_loop(run *r, sf_train_summary *out)
{
    const sf_config *cfg = r->cfg;
    fill_progress(r, SF_TRAIN_EV_START, sf_schedule_lr(&cfg->schedule, cfg->optim.lr, r->epochs_done,
                                                         cfg->train.epochs));
    if (notify(r)) out->interrupted = 1;
    while (!out->interrupted && r->epochs_done < cfg->train.epochs) {
        float lr = sf_schedule_lr(&cfg->schedule, cfg->optim.lr, r->epochs_done, cfg->train.epochs);
        SF_TRY(sf_net_set_lr(r->net, lr));
        int stopped = 0;
        SF_TRY(train_epoch(r, lr, &stopped));
        if (stopped) {
            out->interrupted = 1;
            return save_together(r, 0, SF_OK);
        }
        /* a request to stop heard by the test pass (of a process alone: a job's processes end the pass together) */
        sf_status s = finish_epoch(r, lr);
        if (s != SF_OK && r->job.size == 1 && sf_interrupt_requested()) {
            out->interrupted = 1;
            return save_together(r, 0, back_to_epoch_end(r));
        }
        SF_TRY(s);
    }
    return SF_OK;
}

sf_status sf_train_run(const sf_config *cfg, const sf_train_options *opt, sf_train_summary *out)
{
    memset(out, 0, sizeof *out);
    if (!opt->run_dir) return sf_fail(SF_ERR_INVALID, "no run directory given");
    double t0 = sf_now_seconds();
    run r = {.cfg = cfg, .opt = opt, .lock_fd = -1, .best = -1.0, .last_test = -1.0, .best_step = -1,
             .ckpt_epoch = -1, .ckpt_step = -1};
    sf_status s = setup(&r);
    out->failed_together = s != SF_OK; /* setup agrees before it fails */
    if (s == SF_OK) s = train_loop(&r, out);
    if (s == SF_ERR_NUMERIC) out->failed_together = 1; /* the gradients were summed: every process saw the NaN */
    /* a request to stop that a loop of the setup heard (loading, binning, caching the data): the run stops as a
     * clean interrupt does, having written nothing it would have to take back */
    if (s != SF_OK && sf_interrupt_requested()) {
        out->interrupted = 1;
        s = SF_OK;
    }
    out->resumable = r.ckpt_epoch >= 0 || (opt->resume_dir && sf_same_dir(opt->resume_dir, opt->run_dir));
    out->epochs_done = r.epochs_done;
    out->steps = r.step;
    out->test_accuracy = r.last_test;
    out->best_test_accuracy = r.best;
    out->seconds = sf_now_seconds() - t0;
    sf_metrics_close(r.metrics);
    sf_net_free(r.net);
    sf_loader_free(r.train_ld);
    sf_loader_free(r.test_ld);
    sf_dataset_free(r.train_ds);
    sf_dataset_free(r.test_ds);
    free(r.config_text);
    sf_lock_release(r.lock_fd);
    return s;
}
