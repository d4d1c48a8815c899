/* trainer.c — the training loop: epochs of training steps, a test pass, checkpoints and metrics after each epoch,
 * and an exact continuation from a checkpoint (model, optimizer, RNG, data position and the epoch's running sums). */
#include "train/trainer.h"

#include "core/error.h"
#include "io/files.h"
#include "train/checkpoint.h"
#include "train/clock.h"
#include "train/evaluate.h"
#include "train/metrics.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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
    int32_t classes;
    int64_t step, epochs_done;
    double best, last_test;
    int64_t ckpt_epoch, ckpt_step; /* of the last checkpoint written or resumed (-1: none) */
    char ckpt_path[4096];
    epoch_sums sums;
    sf_train_event ev;
} run;

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
        cJSON_AddNumberToObject(o, sum_fields[i].key, v);
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
    int ok = cJSON_IsNumber(epoch) && cJSON_IsNumber(index);
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
    SF_TRY(sf_loader_set_state(r->train_ld, &ls));
    r->sums = sums;
    return SF_OK;
}

/* ---------------------------------------------------------------- checkpoints */

static sf_status save_checkpoint(run *r, int also_best)
{
    char *ls = loader_state_json(r);
    if (!ls) return sf_fail(SF_ERR_NOMEM, "out of memory");
    sf_checkpoint_info info = {.config = r->config_text, .epoch = r->epochs_done, .step = r->step,
                               .loader_state = ls, .best_metric = r->best};
    sf_status s = sf_checkpoint_save(r->net, &info, r->last_path);
    if (s == SF_OK && also_best) s = sf_checkpoint_save(r->net, &info, r->best_path);
    free(ls);
    if (s == SF_OK) {
        r->ckpt_epoch = r->epochs_done;
        r->ckpt_step = r->step;
        snprintf(r->ckpt_path, sizeof r->ckpt_path, "%s", r->last_path);
    }
    return s;
}

static sf_status resume(run *r)
{
    char path[4096];
    SF_TRY(sf_path_join(path, sizeof path, r->opt->resume_dir, SF_RUN_LAST));
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    SF_TRY(sf_checkpoint_open(path, &st, &info));
    sf_status s = sf_checkpoint_restore(st, r->net, 1);
    if (s == SF_OK) s = restore_loader_state(r, info.loader_state);
    if (s == SF_OK) {
        r->epochs_done = info.epoch;
        r->step = info.step;
        r->best = info.best_metric;
        r->ckpt_epoch = info.epoch;
        r->ckpt_step = info.step;
        snprintf(r->ckpt_path, sizeof r->ckpt_path, "%s", path);
    }
    sf_safetensors_free(st);
    return s == SF_OK ? s : sf_fail_context(s, "resuming from %s: ", path);
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
    sf_status s = sf_metrics_write(r->metrics, o);
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
    cJSON_AddNumberToObject(o, "test_seconds", test->seconds);
    cJSON_AddNumberToObject(o, "peak_bytes", (double)ev->peak_bytes);
    cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)ev->peak_rss_bytes);
    cJSON_AddBoolToObject(o, "best", ev->is_best);
    add_loss_scaling(r, o, ev->skipped);
    sf_status s = sf_metrics_write(r->metrics, o);
    cJSON_Delete(o);
    return s;
}

/* ---------------------------------------------------------------- setup */

static sf_status open_data(run *r)
{
    const sf_config *cfg = r->cfg;
    const char *dir = cfg->train.data_dir[0] ? cfg->train.data_dir : NULL;
    SF_TRY(sf_dataset_load(cfg->train.dataset, dir, SF_SPLIT_TRAIN, &r->train_ds));
    SF_TRY(sf_dataset_load(cfg->train.dataset, dir, SF_SPLIT_TEST, &r->test_ds));
    r->classes = r->train_ds->classes;
    sf_loader_params lp;
    sf_config_loader_params(cfg, 1, &lp);
    SF_TRY(sf_loader_create(r->train_ds, &lp, &r->train_ld));
    if (sf_loader_batches_per_epoch(r->train_ld) == 0)
        return sf_fail(SF_ERR_INVALID, "the training set has %" PRId64 " samples, fewer than one batch of %" PRId64,
                       r->train_ds->count, cfg->train.batch);
    sf_config_loader_params(cfg, 0, &lp);
    return sf_loader_create(r->test_ds, &lp, &r->test_ld);
}

static sf_status prepare_dir(run *r)
{
    const sf_train_options *o = r->opt;
    int in_place = o->resume_dir && sf_same_dir(o->resume_dir, o->run_dir);
    sf_status s = sf_dir_prepare(o->run_dir, !in_place);
    if (s == SF_ERR_STATE)
        return sf_fail(s,
                       "%s is not empty: refusing to write a new run over it (choose another --out, or continue "
                       "that run with --resume %s)",
                       o->run_dir, o->run_dir);
    SF_TRY(s);
    SF_TRY(sf_path_join(r->last_path, sizeof r->last_path, o->run_dir, SF_RUN_LAST));
    SF_TRY(sf_path_join(r->best_path, sizeof r->best_path, o->run_dir, SF_RUN_BEST));
    char path[4096];
    SF_TRY(sf_path_join(path, sizeof path, o->run_dir, SF_RUN_CONFIG));
    SF_TRY(sf_write_file_atomic(path, r->config_text, strlen(r->config_text)));
    SF_TRY(sf_path_join(path, sizeof path, o->run_dir, SF_RUN_METRICS));
    if (in_place) {
        /* Saves killed midway leave temporaries; lines logged after the checkpoint would be logged again. */
        SF_TRY(sf_remove_stale_temps(o->run_dir));
        SF_TRY(sf_metrics_truncate(path, r->step));
    }
    return sf_metrics_open(path, &r->metrics);
}

static sf_status setup(run *r)
{
    const sf_config *cfg = r->cfg;
    SF_TRY(sf_config_write(cfg, &r->config_text));
    if (cfg->train.threads > 0) sf_set_num_threads(cfg->train.threads);
    SF_TRY(open_data(r));
    SF_TRY(sf_config_build_net(cfg, &r->net));
    SF_TRY(sf_net_compile(r->net, cfg->train.timesteps, cfg->train.batch));
    if (r->opt->resume_dir) SF_TRY(resume(r));
    return prepare_dir(r);
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
    ev->batch_size = r->cfg->train.batch;
    ev->train_samples = r->train_ds->count;
    ev->test_samples = r->test_ds->count;
    ev->epoch_seconds = e->train_seconds;
    ev->samples_per_s = e->train_seconds > 0 ? (double)e->seen / e->train_seconds : 0;
    ev->loss = e->batches ? e->loss_sum / (double)e->batches : 0;
    ev->accuracy = e->seen ? (double)e->correct / (double)e->seen : 0;
    ev->skipped = e->skipped;
    ev->lr = lr;
}

static int notify(run *r)
{
    return r->opt->callback ? r->opt->callback(&r->ev, r->opt->user) : 0;
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
        sf_metrics_write(r->metrics, o); /* best effort: the error below is what matters */
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

/* Trains until the loader reports the end of the epoch. Returns SF_OK with *stopped set when the callback asked
 * to stop. */
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
        if (s == SF_ERR_NUMERIC) return numeric_stop(r, lr);
        SF_TRY(s);
        e->train_seconds += sf_now_seconds() - t0;
        r->step++;
        e->batches++;
        e->skipped += res.skipped;
        e->loss_sum += res.loss;
        e->correct += res.correct;
        e->seen += b->B;
        e->log_loss_sum += res.loss;
        e->log_correct += res.correct;
        e->log_seen += b->B;
        e->log_steps++;
        if (log_every > 0 && r->step % log_every == 0) SF_TRY(log_step_line(r, lr));
        fill_progress(r, SF_TRAIN_EV_STEP, lr);
        if (notify(r)) {
            *stopped = 1;
            return SF_OK;
        }
    }
}

static sf_status finish_epoch(run *r, float lr)
{
    fill_progress(r, SF_TRAIN_EV_TEST, lr);
    notify(r);
    sf_eval_result test;
    SF_TRY(sf_evaluate(r->net, r->test_ld, r->classes, &test));
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
    /* The line goes first: if the save is killed, resuming cuts the line (its step is past the checkpoint). */
    sf_status s = log_epoch_line(r, &test);
    if (s == SF_OK) s = save_checkpoint(r, is_best);
    if (s == SF_OK) notify(r);
    r->ev.firing_rates = NULL;
    sf_eval_result_free(&test);
    return s;
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
            return save_checkpoint(r, 0);
        }
        SF_TRY(finish_epoch(r, lr));
    }
    return SF_OK;
}

sf_status sf_train_run(const sf_config *cfg, const sf_train_options *opt, sf_train_summary *out)
{
    memset(out, 0, sizeof *out);
    if (!opt->run_dir) return sf_fail(SF_ERR_INVALID, "no run directory given");
    double t0 = sf_now_seconds();
    run r = {.cfg = cfg, .opt = opt, .best = -1.0, .last_test = -1.0, .ckpt_epoch = -1, .ckpt_step = -1};
    sf_status s = setup(&r);
    if (s == SF_OK) s = train_loop(&r, out);
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
    return s;
}
