/* config.h — training configurations: INI files (parsed with libinih) whose sections come in network order, in
 * the spirit of darknet's cfg, their command-line overrides, a writer of the resolved config, and building the
 * sf_net they describe through the public API.
 *
 *   [train]    dataset, data_dir, epochs, batch, timesteps, encoding, optimizer, lr, ... (see sf_config_train);
 *              dataset = synthetic takes input_shape, classes, samples, input_density; imagefolder classes,
 *              image_size, crop_scale_min, skip_bad_images, val_labels, data_threads; event datasets
 *              time_window_us, frame, downsample, polarity and the aug_* keys
 *   [neuron]   defaults for every LIF layer: neuron (lif | plif | if | alif), tau, decay, decay_input, v_threshold,
 *              v_reset, reset, detach_reset, surrogate, alpha, grad_threshold, per_channel, rho, tau_adapt, beta
 *   then one section per layer, numbered from 0 in file order:
 *   [conv] filters size stride pad bias   [bn] eps momentum   [lif] any [neuron] key   [avgpool] / [maxpool] size
 *   stride   [flatten]   [linear] out bias   [dropout] p   [add] from
 *   Every layer also takes `from`: the layer whose output it reads instead of the previous one (for [add]: the
 *   output added to the previous layer's). A negative value counts back from this layer (-1 is the previous one),
 *   a non-negative one is an absolute layer number, and `input` is the network input.
 *   [readout]  optional, and the last section: type (mean | leaky), tau (the leaky readout's), loss (ce_mean |
 *              ce_per_step | mse_rate)
 * docs/config.md describes every key.
 *
 * Errors (unknown section or key, a value of the wrong type or out of range, a key given twice, a missing required
 * key) are SF_ERR_INVALID with the message "file:line: what is wrong". */
#ifndef SF_CONFIG_CONFIG_H
#define SF_CONFIG_CONFIG_H

#include "data/dataset.h"
#include "spikefuse_train.h"

#include <stdint.h>

/* The config itself (sf_config) and what programs do with it are public: include/spikefuse_train.h. */

/* The data parameters of this config (sf_dataset_load's). */
void sf_config_data_params(const sf_config *cfg, sf_data_params *out);

#endif
