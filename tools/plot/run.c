/* run.c — opening a run directory for pictures: the config, the metrics so far and the checkpoint to use. */
#include "plot/run.h"

#include "spikefuse_train.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* config.ini as written, parsed; a note when it is missing or does not parse. */
static void read_config(sf_run *run, sf_notes *notes)
{
    char path[4200];
    if (sf_path_join(path, sizeof path, run->dir, SF_RUN_CONFIG) != SF_OK || !sf_file_exists(path)) {
        sf_note(notes, "no %s in the run directory", SF_RUN_CONFIG);
        return;
    }
    size_t len = 0;
    if (sf_read_file(path, 1u << 20, &run->config_text, &len) != SF_OK ||
        sf_config_parse_string(run->config_text, path, &run->cfg) != SF_OK)
        sf_note(notes, "%s", sf_last_error());
}

static void find_checkpoint(sf_run *run, sf_notes *notes)
{
    if (sf_path_join(run->checkpoint, sizeof run->checkpoint, run->dir, SF_RUN_BEST) == SF_OK &&
        sf_file_exists(run->checkpoint))
        return;
    if (sf_path_join(run->checkpoint, sizeof run->checkpoint, run->dir, SF_RUN_LAST) == SF_OK &&
        sf_file_exists(run->checkpoint)) {
        sf_note(notes, "no %s yet: the sample figures come from %s", SF_RUN_BEST, SF_RUN_LAST);
        return;
    }
    run->checkpoint[0] = 0;
    sf_note(notes, "no checkpoint yet (%s is written when the first epoch ends): no sample figures", SF_RUN_BEST);
}

sf_status sf_run_open(const char *dir, sf_run *run, sf_notes *notes)
{
    memset(run, 0, sizeof *run);
    struct stat sb;
    if (stat(dir, &sb) != 0) return sf_fail(SF_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return sf_fail(SF_ERR_IO, "%s is not a directory (give a run directory)", dir);
    char metrics[4200];
    if (strlen(dir) >= sizeof run->dir || sf_path_join(metrics, sizeof metrics, dir, SF_RUN_METRICS) != SF_OK)
        return sf_fail(SF_ERR_INVALID, "%s: the path is too long", dir);
    memcpy(run->dir, dir, strlen(dir) + 1);
    read_config(run, notes);
    find_checkpoint(run, notes);
    if (sf_file_exists(metrics)) {
        if (sf_metrics_log_read(metrics, &run->log, notes) == SF_OK) run->have_metrics = 1;
        else sf_note(notes, "%s", sf_last_error());
    } else {
        sf_note(notes, "no %s yet: no training curves", SF_RUN_METRICS);
    }
    if (!run->config_text && !run->have_metrics && !run->checkpoint[0]) {
        sf_run_close(run);
        return sf_fail(SF_ERR_IO, "%s holds no %s, %s or checkpoint: not a spikefuse run directory", dir,
                       SF_RUN_CONFIG, SF_RUN_METRICS);
    }
    if (!run->cfg && run->checkpoint[0] && sf_checkpoint_config(run->checkpoint, &run->cfg) == SF_OK) {
        free(run->config_text);
        run->config_text = NULL;
        if (sf_config_write(run->cfg, &run->config_text) != SF_OK) run->config_text = NULL;
        sf_note(notes, "the config shown is the one saved in %s", run->checkpoint);
    }
    return SF_OK;
}

void sf_run_close(sf_run *run)
{
    sf_config_free(run->cfg);
    free(run->config_text);
    sf_metrics_log_free(&run->log);
    memset(run, 0, sizeof *run);
}

int32_t sf_run_lif_layer(const sf_run *run, int32_t k)
{
    for (int32_t i = 0; run->cfg && i < run->cfg->num_layers; i++)
        if (run->cfg->layers[i].desc.kind == SF_LAYER_LIF && k-- == 0) return i;
    return -1;
}
