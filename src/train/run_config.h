/* run_config.h — a run directory's config.ini against the config the run recorded (its checkpoint's), before
 * --resume continues it. */
#ifndef SF_TRAIN_RUN_CONFIG_H
#define SF_TRAIN_RUN_CONFIG_H

#include "spikefuse_train.h"

#include <stddef.h>

/* DIR/config.ini against the config the run recorded (run_text, its checkpoint's), before --resume continues the
 * run with the recorded one and rewrites the file: SF_OK when the file is missing or says the same (comments and
 * layout aside); SF_OK with a note (else note[0] = 0) when it differs only in settings a resumed run may change
 * (an edit, or a --resume --set stopped before its first checkpoint): the note says the file is not what the run
 * uses and how to change them; SF_ERR_INVALID when the file was edited into another run, saying where the run's
 * config lives and how to go on. */
sf_status sf_run_config_file_check(const char *dir, const char *run_text, char *note, size_t cap);
/* SF_OK when DIR/config.ini holds the config `text` holds, comments and layout aside; SF_ERR_STATE otherwise. */
sf_status sf_run_config_file_same(const char *dir, const char *text);

#endif
