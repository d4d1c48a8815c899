/* config_write.c — the resolved config as INI text: what a run directory and a checkpoint keep, and what
 * sf_config_parse_string reads back to an equal config. */
#include "config/config.h"

#include "config/config_keys.h"
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct text_buf {
    char *s;
    size_t len, cap;
    int failed;
} text_buf;

static void put(text_buf *b, const char *fmt, ...) SF_PRINTF(2, 3);
static void put(text_buf *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = 2 * b->cap + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static void put_key(text_buf *b, const sf_key_spec *k, const void *base)
{
    char value[SF_CONFIG_PATH_MAX + 64];
    sf_key_format(k, base, value, sizeof value);
    put(b, "%s =%s%s\n", k->name, value[0] ? " " : "", value);
}

/* `from` of layer li reading tensor t, relative where it is an earlier layer (as residual blocks are written). */
static void put_from(text_buf *b, int32_t li, int32_t tensor)
{
    if (tensor == 0)
        put(b, "from = input\n");
    else
        put(b, "from = %d\n", tensor - 1 - li);
}

sf_status sf_config_write(const sf_config *cfg, char **text)
{
    *text = NULL;
    text_buf b = {malloc(4096), 0, 4096, 0};
    if (!b.s) return sf_fail(SF_ERR_NOMEM, "out of memory");
    b.s[0] = 0;
    put(&b, "; spikefuse config, resolved: every setting written out\n[train]\n");
    for (int i = 0; i < sf_num_train_keys; i++) put_key(&b, &sf_train_keys[i], cfg);
    put(&b, "\n[neuron]\n");
    for (int i = 0; i < sf_num_lif_keys; i++) /* [neuron] takes its own model's keys only */
        if (sf_key_applies(&sf_lif_keys[i], cfg->neuron.model)) put_key(&b, &sf_lif_keys[i], &cfg->neuron);
    for (int32_t li = 0; li < cfg->num_layers; li++) {
        const sf_config_layer *L = &cfg->layers[li];
        const sf_layer_kind kind = L->desc.kind;
        put(&b, "\n; layer %d\n[%s]\n", li, sf_config_section_name(kind));
        if (kind == SF_LAYER_ADD)
            put_from(&b, li, L->desc.input2);
        else if (L->desc.input >= 0)
            put_from(&b, li, L->desc.input);
        if (kind == SF_LAYER_LIF || kind == SF_LAYER_RLIF || kind == SF_LAYER_SDSA)
            for (int i = 0; i < sf_num_lif_keys; i++)
                if (L->lif_own & (1u << i)) put_key(&b, &sf_lif_keys[i], &L->lif_own_values);
        for (int i = 0; i < sf_num_layer_keys; i++)
            if (sf_layer_keys[i].kinds & (1u << kind)) put_key(&b, &sf_layer_keys[i], &L->desc);
    }
    put(&b, "\n[readout]\n");
    for (int i = 0; i < sf_num_readout_keys; i++) put_key(&b, &sf_readout_keys[i], cfg);
    if (b.failed) {
        free(b.s);
        return sf_fail(SF_ERR_NOMEM, "out of memory writing the config");
    }
    *text = b.s;
    return SF_OK;
}
