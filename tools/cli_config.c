/* cli_config.c — loading configs with command-line overrides and choosing the device. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int sf_cli_apply_sets(const char *cmd, sf_config *cfg, char *const *sets, int nsets)
{
    for (int i = 0; i < nsets; i++) {
        sf_status s = sf_config_set_arg(cfg, sets[i]);
        if (s != SF_OK) return sf_cli_error(cmd, SF_EXIT_CONFIG, "%s", sf_last_error());
    }
    return SF_EXIT_OK;
}

int sf_cli_load_config(const char *cmd, const char *path, char *const *sets, int nsets, sf_config **out)
{
    *out = NULL;
    sf_status s = sf_config_load(path, out);
    if (s != SF_OK) return sf_cli_error(cmd, SF_EXIT_CONFIG, "%s", sf_last_error());
    int rc = sf_cli_apply_sets(cmd, *out, sets, nsets);
    if (rc != SF_EXIT_OK) {
        sf_config_free(*out);
        *out = NULL;
    }
    return rc;
}

int sf_cli_apply_device(const char *cmd, sf_config *cfg, const char *text)
{
    if (strcmp(text, "auto") == 0) {
        cfg->net.device = (sf_device){.kind = sf_cuda_device_count() > 0 ? SF_DEVICE_CUDA : SF_DEVICE_CPU};
        /* a GPU this build has no kernels for is not usable: the CPU, saying why */
        if (cfg->net.device.kind == SF_DEVICE_CUDA && sf_cuda_arch_check(0) != SF_OK) {
            fprintf(stderr, "spikefuse %s: warning: %s; --device auto takes the CPU\n", cmd, sf_last_error());
            cfg->net.device.kind = SF_DEVICE_CPU;
        }
        return SF_EXIT_OK;
    }
    sf_device d;
    if (sf_device_parse(text, &d) != SF_OK)
        return sf_cli_error(cmd, SF_EXIT_USAGE, "--device '%s': expected cpu, cuda, cuda:N or auto", text);
    cfg->net.device = d;
    return SF_EXIT_OK;
}

int sf_cli_build_net(const char *cmd, const sf_config *cfg, sf_net **out)
{
    *out = NULL;
    if (cfg->train.threads > 0) sf_set_num_threads(cfg->train.threads);
    sf_status s = sf_config_build_net(cfg, out);
    if (s != SF_OK) return sf_cli_status(cmd, s);
    s = sf_net_compile(*out, cfg->train.timesteps, cfg->train.batch);
    if (s != SF_OK) {
        sf_net_free(*out);
        *out = NULL;
        return sf_cli_status(cmd, s);
    }
    return SF_EXIT_OK;
}
