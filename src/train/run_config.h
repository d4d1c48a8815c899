/* run_config.h — a run directory's config.ini against the config the run recorded (its checkpoint's), before
 * --resume continues it. */
#ifndef SF_TRAIN_RUN_CONFIG_H
#define SF_TRAIN_RUN_CONFIG_H

#include "spikefuse_train.h"

#include <stddef.h>

/* DIR/config.ini against the run's recorded config (run_text), before --resume: SF_OK when missing or the same
 * (comments, layout aside); SF_OK with a note saying how to change them when only resumable settings differ (else
 * note[0] = 0); SF_ERR_INVALID when edited into another run, saying where the run's config is and how to go on. */
sf_status sf_run_config_file_check(const char *dir, const char *run_text, char *note, size_t cap);
/* SF_OK when DIR/config.ini holds the config `text` holds, comments and layout aside; SF_ERR_STATE otherwise. */
sf_status sf_run_config_file_same(const char *dir, const char *text);

#endif
