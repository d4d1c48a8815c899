/* trained_net.c — a checkpoint's network built from its stored config and filled with its parameters
 * (sf_checkpoint_load_net), and how the run encoded its input (sf_checkpoint_input_encoding). */
#include "config/config.h"
#include "core/error.h"
#include "train/checkpoint.h"

#include <stdio.h>
#include <string.h>

_Static_assert(sizeof ((sf_input_encoding *)0)->mean / sizeof(float) == SF_DATASET_MAX_CHANNELS,
               "sf_input_encoding holds a value per channel the loader has");

sf_status sf_checkpoint_load_net(const char *path, sf_device device, sf_net **out)
{
    *out = NULL;
    if (!path) return sf_fail(SF_ERR_INVALID, "checkpoint path is NULL");
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    SF_TRY(sf_checkpoint_open(path, &st, &info));
    sf_config *cfg = NULL;
    sf_net *net = NULL;
    sf_status s = sf_config_parse_string(info.config, path, &cfg);
    if (s == SF_OK) {
        cfg->net.device = device;
        cfg->net.precision = SF_PRECISION_FP32; /* the trained parameters are fp32 whatever the run computed in */
        s = sf_config_build_net(cfg, &net);
    }
    if (s == SF_OK && (s = sf_checkpoint_restore(st, net, 0)) != SF_OK) s = sf_fail_context(s, "%s: ", path);
    if (s != SF_OK) {
        sf_net_free(net);
        net = NULL;
    }
    sf_config_free(cfg);
    sf_safetensors_free(st);
    *out = net;
    return s;
}

sf_status sf_checkpoint_input_encoding(const char *path, sf_input_encoding *out)
{
    if (!path || !out) return sf_fail(SF_ERR_INVALID, "sf_checkpoint_input_encoding: a NULL argument");
    memset(out, 0, sizeof *out);
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    SF_TRY(sf_checkpoint_open(path, &st, &info));
    sf_config *cfg = NULL;
    sf_status s = sf_config_parse_string(info.config, path, &cfg);
    if (s == SF_OK) {
        sf_loader_params lp;
        sf_config_loader_params(cfg, 0, &lp);
        snprintf(out->dataset, sizeof out->dataset, "%s", sf_dataset_kind_name(cfg->train.dataset));
        out->images = sf_dataset_kind_images(cfg->train.dataset);
        out->encoding = (int32_t)lp.encoding;
        out->normalize = lp.normalize;
        out->channels = cfg->net.in_channels;
        for (int c = 0; c < SF_DATASET_MAX_CHANNELS; c++) {
            out->mean[c] = lp.mean[c];
            out->std[c] = lp.std[c];
        }
        out->timesteps = lp.timesteps;
    }
    sf_config_free(cfg);
    sf_safetensors_free(st);
    return s;
}
