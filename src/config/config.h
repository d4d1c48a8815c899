/* config.h — training configurations: INI files ([train], [neuron], one section per layer numbered from 0 in file
 * order, [readout]; docs/config.md describes every key), their overrides, the resolved config's writer, and the
 * sf_net they describe. Errors are SF_ERR_INVALID with the message "file:line: what is wrong". */
#ifndef SF_CONFIG_CONFIG_H
#define SF_CONFIG_CONFIG_H

#include "data/dataset.h"
#include "spikefuse_train.h"

#include <stdint.h>

/* The config itself (sf_config) and what programs do with it are public: include/spikefuse_train.h. */

/* The data parameters of this config (sf_dataset_load's). */
void sf_config_data_params(const sf_config *cfg, sf_data_params *out);

#endif
