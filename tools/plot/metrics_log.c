/* metrics_log.c — reading metrics.jsonl (cJSON) as a run writes it: step and epoch lines, tolerant of a last line
 * that is still being written. */
#include "plot/run.h"

#include "spikefuse_train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* An epoch or step count: a whole number up to 2^53 (where doubles still count by one), else missing. */
static double count(const cJSON *o, const char *key)
{
    const double v = number(o, key);
    return v >= 0 && v <= 9007199254740992.0 && v == floor(v) ? v : NAN;
}

/* Grows *items (of `size` bytes each) to hold one more than *n; 0 when memory runs out. */
static int grow(void **items, int64_t n, size_t size)
{
    if (n & (n - 1)) return 1; /* capacity is the next power of two */
    void *p = realloc(*items, (size_t)(n ? 2 * n : 16) * size);
    if (!p) return 0;
    *items = p;
    return 1;
}

static sf_status add_step(sf_metrics_log *log, const cJSON *o)
{
    if (!grow((void **)&log->steps, log->n_steps, sizeof *log->steps)) return sf_fail(SF_ERR_NOMEM, "out of memory");
    log->steps[log->n_steps++] = (sf_step_point){.epoch = count(o, "epoch"),
                                                 .step = count(o, "step"),
                                                 .loss = number(o, "loss"),
                                                 .accuracy = number(o, "accuracy"),
                                                 .lr = number(o, "lr")};
    return SF_OK;
}

static sf_status add_epoch(sf_metrics_log *log, const cJSON *o)
{
    if (!grow((void **)&log->epochs, log->n_epochs, sizeof *log->epochs)) return sf_fail(SF_ERR_NOMEM, "out of memory");
    sf_epoch_point e = {.epoch = count(o, "epoch"),
                        .step = count(o, "step"),
                        .train_loss = number(o, "train_loss"),
                        .train_accuracy = number(o, "train_accuracy"),
                        .test_accuracy = number(o, "test_accuracy"),
                        .lr = number(o, "lr"),
                        .samples_per_s = number(o, "samples_per_s"),
                        .train_seconds = number(o, "train_seconds"),
                        .peak_bytes = number(o, "peak_bytes"),
                        .best = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "best"))};
    const cJSON *rates = cJSON_GetObjectItemCaseSensitive(o, "firing_rates");
    int n = cJSON_IsArray(rates) ? cJSON_GetArraySize(rates) : 0;
    if (n > 0) {
        e.rates = malloc((size_t)n * sizeof *e.rates);
        if (!e.rates) return sf_fail(SF_ERR_NOMEM, "out of memory");
        const cJSON *r;
        cJSON_ArrayForEach(r, rates) e.rates[e.n_rates++] = cJSON_IsNumber(r) ? r->valuedouble : NAN;
        if (e.n_rates > log->n_rates) log->n_rates = e.n_rates;
    }
    log->epochs[log->n_epochs++] = e;
    return SF_OK;
}

static sf_status add_line(sf_metrics_log *log, const cJSON *o)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    if (strcmp(t, "step") == 0) return add_step(log, o);
    if (strcmp(t, "epoch") == 0) return add_epoch(log, o);
    if (strcmp(t, "stopped") == 0) {
        log->stopped = 1;
        log->stopped_step = count(o, "step");
    }
    return SF_OK;
}

sf_status sf_metrics_log_read(const char *path, sf_metrics_log *log, sf_notes *notes)
{
    memset(log, 0, sizeof *log);
    char *text = NULL;
    size_t len = 0;
    SF_TRY(sf_read_file(path, SIZE_MAX, &text, &len));
    sf_status s = sf_metrics_log_parse(text, len, path, log, notes);
    free(text);
    return s;
}

sf_status sf_metrics_log_parse(const char *text, size_t len, const char *path, sf_metrics_log *log, sf_notes *notes)
{
    memset(log, 0, sizeof *log);
    sf_status s = SF_OK;
    int lineno = 0;
    for (const char *line = text; s == SF_OK && line < text + len;) {
        const char *nl = memchr(line, '\n', (size_t)(text + len - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(text + len - line);
        lineno++;
        cJSON *o = nl ? cJSON_ParseWithLength(line, ll) : NULL;
        if (!nl)
            sf_note(notes, "%s:%d: the last line has no end (still being written, or cut short): skipped", path,
                    lineno);
        else if (!cJSON_IsObject(o) && ll > 0) sf_note(notes, "%s:%d: not a JSON object: skipped", path, lineno);
        else if (o) s = add_line(log, o);
        cJSON_Delete(o);
        line += ll + 1;
    }
    if (s != SF_OK) sf_metrics_log_free(log);
    return s;
}

void sf_metrics_log_free(sf_metrics_log *log)
{
    for (int64_t i = 0; i < log->n_epochs; i++) free(log->epochs[i].rates);
    free(log->epochs);
    free(log->steps);
    memset(log, 0, sizeof *log);
}
