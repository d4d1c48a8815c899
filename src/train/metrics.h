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

/* A float as the shortest decimal that reads back as the same float (0.005, not 0.004999999888), so lines stay
 * readable and a float compared across runs compares exactly (sf_json_add_float, include/spikefuse_train.h, adds
 * one to an object). */
struct cJSON *sf_json_float(float v);

/* Rewrites `path` (atomically) keeping only lines whose "step" is <= max_step: what a resumed run would otherwise
 * log twice is dropped. Lines that are not JSON objects with a numeric "step" are dropped too (a line cut short
 * by a crash). A missing file is not an error. */
sf_status sf_metrics_truncate(const char *path, int64_t max_step);

#endif
