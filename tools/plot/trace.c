/* trace.c — one test sample through a run's checkpoint, every tensor read back: the input the network received,
 * each LIF layer's spikes and membrane potential, and the output at every time step. */
#include "plot/run.h"

#include "spikefuse_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The checkpoint's config, set up to run one sample on the CPU; the data directory is the run's latest. */
static sf_status plot_config(const sf_run *run, const sf_checkpoint_info *info, sf_config **cfg)
{
    char name[4200];
    snprintf(name, sizeof name, "%s (its config)", run->checkpoint);
    SF_TRY(sf_config_parse_string(info->config, name, cfg));
    (*cfg)->net.device = (sf_device){.kind = SF_DEVICE_CPU};
    (*cfg)->net.precision = SF_PRECISION_FP32; /* the CPU computes in fp32 only */
    if (run->cfg) memcpy((*cfg)->train.data_dir, run->cfg->train.data_dir, sizeof(*cfg)->train.data_dir);
    return SF_OK;
}

static sf_status read_lif_layers(const sf_net *net, const sf_config *cfg, sf_trace *tr)
{
    for (int32_t i = 0; i < cfg->num_layers; i++) tr->n_lif += cfg->layers[i].desc.kind == SF_LAYER_LIF;
    tr->lif = calloc((size_t)(tr->n_lif ? tr->n_lif : 1), sizeof *tr->lif);
    if (!tr->lif) return sf_fail(SF_ERR_NOMEM, "out of memory");
    for (int32_t i = 0, k = 0; i < cfg->num_layers; i++) {
        if (cfg->layers[i].desc.kind != SF_LAYER_LIF) continue;
        sf_trace_layer *l = &tr->lif[k++];
        int32_t chw[3];
        SF_TRY(sf_net_tensor_shape(net, i + 1, chw));
        *l = (sf_trace_layer){.layer = i,
                              .c = chw[0],
                              .h = chw[1],
                              .w = chw[2],
                              .n = (int64_t)chw[0] * chw[1] * chw[2],
                              .threshold = cfg->layers[i].desc.lif.v_threshold};
        l->spikes = malloc((size_t)(tr->T * l->n) * sizeof(float));
        l->membrane = malloc((size_t)(tr->T * l->n) * sizeof(float));
        if (!l->spikes || !l->membrane) return sf_fail(SF_ERR_NOMEM, "out of memory");
        SF_TRY(sf_net_read_activation(net, i + 1, l->spikes));
        SF_TRY(sf_net_read_membrane(net, i + 1, l->membrane));
    }
    return SF_OK;
}

/* Builds the net for batch 1 with every tensor kept, restores the checkpoint, runs the sample and reads back. */
static sf_status run_sample(const sf_config *cfg, const sf_safetensors *st, const sf_dataset *ds, sf_trace *tr)
{
    sf_net *net = NULL;
    float *x = NULL, *logits = NULL;
    sf_status s = sf_config_build_net(cfg, &net);
    if (s == SF_OK) s = sf_net_set_keep_activations(net, 1);
    if (s == SF_OK) s = sf_net_compile(net, tr->T, 1);
    if (s == SF_OK) s = sf_checkpoint_restore(st, net, 0);
    const int64_t chw = (int64_t)ds->channels * ds->height * ds->width;
    tr->classes = ds->classes;
    if (s == SF_OK) {
        x = malloc((size_t)(tr->T * chw) * sizeof *x);
        logits = malloc((size_t)tr->classes * sizeof *logits);
        tr->input = malloc((size_t)(tr->T * chw) * sizeof(float));
        tr->output = malloc((size_t)(tr->T * tr->classes) * sizeof(float));
        if (!x || !logits || !tr->input || !tr->output) s = sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    if (s == SF_OK) {
        sf_loader_params lp;
        sf_config_loader_params(cfg, 0, &lp);
        lp.batch = 1;
        /* epoch 0: Poisson draws as the first test pass made them */
        sf_encode_batch(ds, &lp, 0, &tr->sample, 1, x);
        int32_t label = tr->label;
        sf_step_result r;
        s = sf_net_eval_step(net, x, &label, &r);
    }
    if (s == SF_OK) s = sf_net_logits(net, logits);
    if (s == SF_OK) s = sf_net_read_activation(net, 0, tr->input);
    if (s == SF_OK) s = sf_net_read_activation(net, cfg->num_layers, tr->output);
    if (s == SF_OK) s = read_lif_layers(net, cfg, tr);
    if (s == SF_OK) tr->predicted = sf_argmax(logits, tr->classes);
    free(x);
    free(logits);
    sf_net_free(net);
    return s;
}

sf_status sf_trace_run(const sf_run *run, int64_t sample, sf_trace *tr, int *have, sf_notes *notes)
{
    memset(tr, 0, sizeof *tr);
    *have = 0;
    if (!run->checkpoint[0]) return SF_OK;
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    sf_config *cfg = NULL;
    sf_dataset *ds = NULL;
    sf_status s = sf_checkpoint_open(run->checkpoint, &st, &info);
    if (s == SF_OK) s = plot_config(run, &info, &cfg);
    if (s == SF_OK) s = sf_config_load_split(cfg, SF_SPLIT_TEST, &ds);
    if (s == SF_OK && (sample < 0 || sample >= ds->count)) {
        s = sf_fail(SF_ERR_INVALID, "test sample %lld does not exist: the %s test set has %lld samples (0 to %lld)",
                    (long long)sample, sf_dataset_kind_name(cfg->train.dataset), (long long)ds->count,
                    (long long)ds->count - 1);
        sf_dataset_free(ds);
        sf_config_free(cfg);
        sf_safetensors_free(st);
        return s;
    }
    if (s == SF_OK) {
        const char *slash = strrchr(run->checkpoint, '/');
        snprintf(tr->ckpt_name, sizeof tr->ckpt_name, "%.63s", slash ? slash + 1 : run->checkpoint);
        tr->sample = sample;
        tr->label = ds->labels[sample];
        tr->T = cfg->train.timesteps;
        tr->encoding = cfg->train.encoding;
        tr->c = ds->channels, tr->h = ds->height, tr->w = ds->width;
        tr->ckpt_epoch = info.epoch;
        tr->out_layer = cfg->num_layers - 1;
        tr->out_kind = cfg->layers[cfg->num_layers - 1].desc.kind;
        tr->readout = cfg->net.readout;
        s = run_sample(cfg, st, ds, tr);
    }
    if (s == SF_OK) *have = 1;
    else sf_note(notes, "no sample figures: %s", sf_last_error());
    if (s != SF_OK) sf_trace_free(tr);
    sf_dataset_free(ds);
    sf_config_free(cfg);
    sf_safetensors_free(st);
    return SF_OK;
}

void sf_trace_free(sf_trace *tr)
{
    for (int32_t i = 0; tr->lif && i < tr->n_lif; i++) {
        free(tr->lif[i].spikes);
        free(tr->lif[i].membrane);
    }
    free(tr->lif);
    free(tr->input);
    free(tr->output);
    memset(tr, 0, sizeof *tr);
}
