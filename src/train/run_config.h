/* run_config.h — the config of an existing run (for --resume and eval) and the check that a continuation is still
 * the same run: only settings that cannot change the computed numbers may differ. */
#ifndef SF_TRAIN_RUN_CONFIG_H
#define SF_TRAIN_RUN_CONFIG_H

#include "config/config.h"

/* Parses the config stored in a checkpoint's __metadata__. */
sf_status sf_checkpoint_config(const char *checkpoint_path, sf_config **out);

/* SF_OK when `wanted` equals `saved` apart from train.epochs, train.data_dir, train.data_cache, train.log_every,
 * train.threads, train.data_threads and the device; otherwise SF_ERR_INVALID naming the first setting that
 * differs. */
sf_status sf_config_check_same_run(const sf_config *saved, const sf_config *wanted);

#endif
