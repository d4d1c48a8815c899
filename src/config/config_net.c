/* config_net.c — what a config makes: the network (through the public API only) and the loaders' parameters. */
#include "config/config.h"

#include "config/config_keys.h"
#include "core/error.h"

#include <math.h>

void sf_config_data_params(const sf_config *cfg, sf_data_params *p)
{
    const sf_config_train *t = &cfg->train;
    sf_data_default_params(p);
    p->synthetic = t->synthetic;
    p->synthetic.classes = t->classes;
    p->events = t->events;
    p->images = (sf_image_params){.size = t->image_size, .classes = t->classes, .skip_bad = t->skip_bad_images,
                                  .val_labels = t->val_labels};
    p->coarse_labels = t->coarse_labels;
    p->background_class = t->background_class;
    p->seed = cfg->net.seed;
    p->cache_dir = t->data_cache;
    p->timesteps = t->timesteps;
    if (t->augment == 0) { /* no augmentation: the training split can be cached too */
        p->events.time_jitter_us = p->events.shift = p->events.flip = 0;
        p->events.drop_event = 0.0f;
    }
}

sf_status sf_config_load_split(const sf_config *cfg, sf_split split, sf_dataset **out)
{
    sf_data_params p;
    sf_config_data_params(cfg, &p);
    return sf_dataset_load(cfg->train.dataset, cfg->train.data_dir[0] ? cfg->train.data_dir : NULL, split, &p, out);
}

static void *batch_alloc(size_t bytes, void *device) { return sf_host_alloc(*(const sf_device *)device, bytes); }
static void batch_release(void *p, void *device) { sf_host_free(*(const sf_device *)device, p); }

void sf_config_loader_params(const sf_config *cfg, int32_t training, sf_loader_params *p)
{
    const sf_config_train *t = &cfg->train;
    sf_loader_default_params(p);
    p->batch = t->batch;
    p->timesteps = t->timesteps;
    p->encoding = t->encoding;
    p->seed = cfg->net.seed;
    p->training = training != 0;
    p->augment = training && (t->augment < 0 ? sf_dataset_kind_augments(t->dataset) : t->augment != 0);
    p->crop_pad = t->crop_pad;
    p->crop_scale_min = t->crop_scale_min;
    p->erase_p = t->erase_p;
    p->normalize = t->normalize;
    float mean[SF_DATASET_MAX_CHANNELS], std[SF_DATASET_MAX_CHANNELS];
    sf_dataset_kind_stats(t->dataset, mean, std);
    for (int c = 0; c < SF_DATASET_MAX_CHANNELS; c++) {
        p->mean[c] = isnan(t->mean[0]) || isnan(t->mean[c]) ? mean[c] : t->mean[c];
        p->std[c] = isnan(t->std[0]) || isnan(t->std[c]) ? std[c] : t->std[c];
    }
    p->threads = t->data_threads;
    p->events = t->events;
    /* page-locked where the net runs on a GPU: each step's upload then runs at the bus's speed */
    p->memory = (sf_batch_memory){batch_alloc, batch_release, (void *)&cfg->net.device};
}

sf_status sf_config_build_net(const sf_config *cfg, sf_net **out)
{
    *out = NULL;
    sf_net *net = NULL;
    sf_status s = sf_net_create(&cfg->net, &net);
    if (s != SF_OK) return sf_fail_context(s, "%s: creating the network: ", cfg->source);
    for (int32_t i = 0; i < cfg->num_layers && s == SF_OK; i++) {
        const sf_config_layer *L = &cfg->layers[i];
        s = sf_net_add(net, &L->desc, NULL);
        if (s != SF_OK)
            s = sf_fail_context(s, "%s:%d: [%s] (layer %d): ", cfg->source, L->line,
                                sf_config_section_name(L->desc.kind), i);
    }
    if (s == SF_OK) {
        int32_t chw[3], classes = cfg->classes;
        s = sf_net_tensor_shape(net, cfg->num_layers, chw);
        const sf_config_layer *last = &cfg->layers[cfg->num_layers - 1];
        if (s == SF_OK && (int64_t)chw[0] * chw[1] * chw[2] != classes)
            s = sf_fail(SF_ERR_INVALID,
                        "%s:%d: the network ends with %d×%d×%d outputs per step, but %s has %d classes (end with "
                        "[flatten] and [linear] out = %d)",
                        cfg->source, last->line, chw[0], chw[1], chw[2], sf_dataset_kind_name(cfg->train.dataset),
                        classes, classes);
    }
    if (s == SF_OK) {
        s = sf_net_set_optimizer(net, &cfg->optim);
        if (s != SF_OK) s = sf_fail_context(s, "%s: optimizer: ", cfg->source);
    }
    if (s != SF_OK) {
        sf_net_free(net);
        return s;
    }
    *out = net;
    return SF_OK;
}
