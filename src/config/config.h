/* config.h — training configurations: INI files (parsed with libinih) whose sections come in network order, in
 * the spirit of darknet's cfg, their command-line overrides, a writer of the resolved config, and building the
 * sf_net they describe through the public API.
 *
 *   [train]    dataset, data_dir, epochs, batch, timesteps, encoding, optimizer, lr, ... (see sf_config_train);
 *              dataset = synthetic takes input_shape, classes, samples, input_density; event datasets
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
#include "spikefuse.h"

#include <stdint.h>

#define SF_CONFIG_PATH_MAX 1024

/* The [train] settings that are not held by one of the library's parameter structs. */
typedef struct sf_config_train {
    sf_dataset_kind dataset;           /* required */
    char data_dir[SF_CONFIG_PATH_MAX]; /* "": sf_dataset_default_dir(dataset) */
    char data_cache[SF_CONFIG_PATH_MAX]; /* event datasets: where binned splits are cached; "": no cache */
    char init[SF_CONFIG_PATH_MAX];     /* a checkpoint whose parameters start the training ("": none) */
    int64_t epochs;                    /* default 10 */
    int64_t batch;                     /* default 64 */
    int64_t timesteps;                 /* default 4 */
    sf_encoding encoding;              /* default direct */
    int32_t crop_pad;                  /* augmented images: the random crop's zero padding per side (0: flip only) */
    float erase_p;                     /* augmented images: the probability of random erasing; default 0 (off) */
    int32_t augment;                   /* training augmentation: 1 on, 0 off, -1 auto (default: on for cifar10 and
                                        * the event datasets) */
    int32_t normalize;                 /* direct encoding: per-channel (x - mean) / std; default on */
    float mean[SF_DATASET_MAX_CHANNELS], std[SF_DATASET_MAX_CHANNELS]; /* one value per channel; NaN
                                                                         * ("default"): the dataset's values */
    sf_synthetic_params synthetic;     /* dataset = synthetic: input_shape, classes, samples, input_density */
    sf_event_params events;            /* event datasets: time_window_us, frame, downsample, polarity, aug_* */
    int32_t threads;                   /* OpenMP threads; 0: the default */
    int64_t log_every;                 /* steps between metric lines; default 100, 0: per epoch only */
    int32_t time_parallel;             /* processes that split T (src/distributed); default 1 */
    int64_t global_batch;              /* samples per step over every data rank; 0: batch × data ranks */
    int32_t sync_bn;                   /* BN statistics over the whole global batch; default off */
} sf_config_train;

/* One layer section. `desc` is fully resolved: LIF layers carry the [neuron] defaults with their own keys
 * applied; `input` / `input2` are tensor ids as sf_net_add expects them. */
typedef struct sf_config_layer {
    sf_layer_desc desc;
    int32_t line;                 /* line of the section header (0 for none) */
    uint32_t lif_own;             /* LIF: which neuron keys this section gave itself (bit = key's table index) */
    sf_lif_params lif_own_values; /* LIF: their values */
} sf_config_layer;

typedef struct sf_config {
    char source[SF_CONFIG_PATH_MAX]; /* the file name (or the name given to the string parser) used in messages */
    sf_config_train train;
    sf_net_params net;           /* [train] device, memory, seed; [readout] type, tau, loss; input shape from dataset */
    int32_t classes;             /* the dataset's class count (resolved, like the input shape) */
    sf_optim_params optim;       /* optimizer, lr, momentum, nesterov, weight_decay (Adam betas/eps: defaults) */
    sf_schedule_params schedule; /* schedule, step_size, gamma */
    sf_lif_params neuron;        /* the [neuron] defaults, resolved */
    uint32_t neuron_own;         /* which neuron keys [neuron] gave (alpha follows the surrogate unless given) */
    sf_config_layer *layers;
    int32_t num_layers;
} sf_config;

/* Parses a config file / a config held in a string (`name` is used in messages). */
sf_status sf_config_load(const char *path, sf_config **out);
sf_status sf_config_parse_string(const char *text, const char *name, sf_config **out);
void sf_config_free(sf_config *cfg);

/* An override as on the command line: key is "train.lr", "neuron.tau", "layerN.key" (N as numbered above) or
 * "readout.type"; the value gets the same checks as in a file. Later [neuron] changes reach every LIF layer that
 * did not set the key itself. Errors name "override train.lr=...". */
sf_status sf_config_set(sf_config *cfg, const char *key, const char *value);
/* The same from one "section.key=value" argument. */
sf_status sf_config_set_arg(sf_config *cfg, const char *assignment);

/* The resolved config as INI text that parses back to an equal config (every [train], [neuron] and [readout] key
 * written out, LIF layers with their own keys only). *text is malloc'd; the caller frees it. */
sf_status sf_config_write(const sf_config *cfg, char **text);

/* The data parameters of this config (sf_dataset_load's). */
void sf_config_data_params(const sf_config *cfg, sf_data_params *out);
/* Loads one split of the config's dataset from train.data_dir (or the dataset's default directory). */
sf_status sf_config_load_split(const sf_config *cfg, sf_split split, sf_dataset **out);
/* Loader parameters for the training (training = 1) or evaluation split of this config. Its batches live in host
 * memory for cfg's device (sf_host_alloc), so cfg must outlive the loader. */
void sf_config_loader_params(const sf_config *cfg, int32_t training, sf_loader_params *out);

/* Creates the network: sf_net_create with cfg->net, then sf_net_add for every layer, then sets the optimizer.
 * Shape errors name the layer's file:line. The network's output must have as many features as the dataset has
 * classes. The caller compiles it (sf_net_compile), applies train.threads (sf_set_num_threads) and frees it. */
sf_status sf_config_build_net(const sf_config *cfg, sf_net **out);

#endif
