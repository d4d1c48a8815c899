/* metrics.c — the metrics.jsonl writer (cJSON) and its cut-back on resume. */
#include "train/metrics.h"

#include "core/error.h"
#include "io/files.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sf_metrics {
    FILE *f;
    char *path;
};

sf_status sf_metrics_open(const char *path, sf_metrics **out)
{
    *out = NULL;
    sf_metrics *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    m->f = fopen(path, "a");
    if (!m->f) {
        sf_status s = sf_fail(SF_ERR_IO, "cannot open %s for appending: %s", path, strerror(errno));
        free(m->path);
        free(m);
        return s;
    }
    *out = m;
    return SF_OK;
}

void sf_metrics_close(sf_metrics *m)
{
    if (!m) return;
    fclose(m->f);
    free(m->path);
    free(m);
}

sf_status sf_metrics_write(sf_metrics *m, const cJSON *obj)
{
    char *line = cJSON_PrintUnformatted(obj);
    if (!line) return sf_fail(SF_ERR_NOMEM, "out of memory formatting a metrics line");
    int ok = fputs(line, m->f) >= 0 && fputc('\n', m->f) != EOF && fflush(m->f) == 0;
    free(line);
    return ok ? SF_OK : sf_fail(SF_ERR_IO, "writing %s: %s", m->path, strerror(errno));
}

static double shortest(float v)
{
    if (!isfinite(v)) return v; /* cJSON writes null */
    char buf[32];
    for (int digits = 1; digits < 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
        if ((float)strtod(buf, NULL) == v) return strtod(buf, NULL);
    }
    return v;
}

cJSON *sf_json_float(float v) { return cJSON_CreateNumber(shortest(v)); }

cJSON *sf_json_add_float(cJSON *obj, const char *key, float v)
{
    return cJSON_AddNumberToObject(obj, key, shortest(v));
}

/* Whether one line is a complete object whose step is covered by the checkpoint. */
static int keep_line(const char *line, size_t len, int64_t max_step)
{
    cJSON *obj = cJSON_ParseWithLength(line, len);
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(obj, "step");
    int keep = cJSON_IsObject(obj) && cJSON_IsNumber(step) && step->valuedouble <= (double)max_step;
    cJSON_Delete(obj);
    return keep;
}

sf_status sf_metrics_truncate(const char *path, int64_t max_step)
{
    char *text = NULL;
    size_t len = 0;
    FILE *probe = fopen(path, "rb");
    if (!probe) return errno == ENOENT ? SF_OK : sf_fail(SF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    fclose(probe);
    SF_TRY(sf_read_file(path, SIZE_MAX, &text, &len));
    char *kept = malloc(len + 1);
    if (!kept) {
        free(text);
        return sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    size_t n = 0;
    for (char *line = text; line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        /* A last line without its newline was cut short by a crash: drop it. */
        if (!nl) break;
        size_t ll = (size_t)(nl - line);
        if (keep_line(line, ll, max_step)) {
            memcpy(kept + n, line, ll + 1);
            n += ll + 1;
        }
        line = nl + 1;
    }
    sf_status s = n == len ? SF_OK : sf_write_file_atomic(path, kept, n);
    free(kept);
    free(text);
    return s;
}
