/* metrics.h — metrics.jsonl: one JSON object per line (per epoch and per logged step), flushed as written, so a
 * crashed run keeps every line it finished; on resume the file is cut back to what the checkpoint covers. */
#ifndef SF_TRAIN_METRICS_H
#define SF_TRAIN_METRICS_H

#include "spikefuse_train.h"

#include <stdint.h>

typedef struct sf_metrics sf_metrics;
struct cJSON;

/* Opens `path` for appending (creating it). */
sf_status sf_metrics_open(const char *path, sf_metrics **out);
void sf_metrics_close(sf_metrics *m);
/* Appends `obj` as one line and flushes it. The object stays the caller's. */
sf_status sf_metrics_write(sf_metrics *m, const struct cJSON *obj);

/* A float as the shortest decimal that reads back as the same float (0.005, not 0.004999999888): readable, and
 * exact when runs are compared. */
struct cJSON *sf_json_float(float v);

/* Rewrites `path` atomically keeping the JSON lines whose "step" is <= max_step (what a resume would log again goes,
 * as do lines a crash cut short). A missing file is not an error. */
sf_status sf_metrics_truncate(const char *path, int64_t max_step);

#endif
