/* fuzz_config.c — libFuzzer target for the config parser. The input is a config, optionally followed by a NUL
 * byte and override arguments (one "section.key=value" per line). A config that parses must survive the
 * overrides and write out text that parses back and writes the same text again: a crash otherwise. Then the
 * network it describes is built (shape inference only). */
#include "config/config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    size_t cfg_len = strlen(text);
    sf_config *cfg = NULL;
    if (sf_config_parse_string(text, "fuzz.ini", &cfg) == SF_OK) {
        char *overrides = cfg_len < size ? text + cfg_len + 1 : NULL;
        for (char *save = NULL, *arg = overrides ? strtok_r(overrides, "\n", &save) : NULL; arg;
             arg = strtok_r(NULL, "\n", &save))
            (void)sf_config_set_arg(cfg, arg);
        char *written = NULL, *again = NULL;
        sf_config *back = NULL;
        if (sf_config_write(cfg, &written) != SF_OK) __builtin_trap();
        if (sf_config_parse_string(written, "written.ini", &back) != SF_OK) __builtin_trap();
        if (sf_config_write(back, &again) != SF_OK || strcmp(written, again) != 0) __builtin_trap();
        sf_loader_params lp;
        sf_config_loader_params(back, 1, &lp);
        /* The engine's shape checks see whatever layer list the fuzzer made up (nothing is allocated before
         * sf_net_compile). */
        sf_net *net = NULL;
        back->net.device.kind = SF_DEVICE_CPU;
        if (sf_config_build_net(back, &net) == SF_OK) (void)sf_net_summary(net);
        sf_net_free(net);
        free(written);
        free(again);
        sf_config_free(back);
    }
    sf_config_free(cfg);
    free(text);
    return 0;
}
