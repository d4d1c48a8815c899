/* config.c — parsing configs with libinih and applying command-line overrides, every error located as file:line.
 * Debian's libinih reports neither line numbers nor keyless sections, so our reader feeds it: it counts physical
 * lines and after each section header adds a marker line, which the handler takes as the section's start. */
#include "config/config.h"

#include "config/config_keys.h"
#include "core/error.h"
#include "io/files.h"

#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The marker's name cannot come from a file line (those cannot hold \001 before '=' and still be a key we know). */
#define SECTION_MARKER "\001section"
#define SF_CONFIG_MAX_LAYERS 4096
#define SF_CONFIG_MAX_BYTES (16u << 20)
#define FROM_BIT 31 /* the `from` key's bit in a section's given-mask */
#define RLIF_LAYER_BITS 32 /* [rlif] holds neuron keys (bits from 0) and layer keys (bits from here) */

enum section { SEC_NONE = 0, SEC_TRAIN, SEC_NEURON, SEC_READOUT, SEC_LAYER, SEC_COUNT };

/* The sections that are not layers: each at most once. */
static const struct {
    const char *name;
    enum section sec;
} named_sections[] = {{"train", SEC_TRAIN}, {"neuron", SEC_NEURON}, {"readout", SEC_READOUT}};

typedef struct parse_ctx {
    sf_config *cfg;
    const char *text;
    size_t len, pos;
    int line;                   /* physical lines handed to inih so far */
    int marker_due, marker_line, marker_sent;
    int *line_map;              /* inih's line numbers (1-based) → physical lines */
    size_t map_len, map_cap;

    enum section sec;
    int section_line;
    uint64_t given;             /* keys given in the current section */
    int key_line[64];           /* the line of each of them */
    int seen[SEC_COUNT];        /* header line of each named section (0: not given) */
    uint64_t train_given;

    int error_line;             /* first error found by the reader or the handler (0: none) */
    sf_status error_status;
    char error[900];
} parse_ctx;

/* Records the first error with its line; returns 0 for inih. */
static int ctx_fail(parse_ctx *c, int line, sf_status status, const char *fmt, ...) SF_PRINTF(4, 5);
static int ctx_fail(parse_ctx *c, int line, sf_status status, const char *fmt, ...)
{
    if (c->error_line) return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    c->error_line = line;
    c->error_status = status;
    return 0;
}

static void map_push(parse_ctx *c, int line)
{
    if (c->map_len == c->map_cap) {
        size_t cap = c->map_cap ? 2 * c->map_cap : 256;
        int *m = realloc(c->line_map, cap * sizeof *m);
        if (!m) return; /* the map only refines messages of syntax errors */
        c->line_map = m;
        c->map_cap = cap;
    }
    c->line_map[c->map_len++] = line;
}

static char *reader(char *str, int num, void *stream)
{
    parse_ctx *c = stream;
    if (c->marker_due) {
        c->marker_due = 0;
        c->marker_sent = 1;
        snprintf(str, (size_t)num, "%s=%d\n", SECTION_MARKER, c->marker_line);
        map_push(c, c->marker_line);
        return str;
    }
    c->marker_sent = 0;
    if (c->pos >= c->len) return NULL;
    const char *p = c->text + c->pos, *nl = memchr(p, '\n', c->len - c->pos);
    size_t n = nl ? (size_t)(nl - p) + 1 : c->len - c->pos;
    c->pos += n;
    c->line++;
    map_push(c, c->line);
    if (n + 1 > (size_t)num) {
        /* inih's line buffer: a longer comment is dropped whole (inih would read its tail as a line of its own),
         * a longer line of any other kind is an error. */
        const char *q = p + strspn(p, " \t");
        if (*q != ';' && *q != '#')
            ctx_fail(c, c->line, SF_ERR_INVALID, "line is longer than %d characters (comment lines may be longer)",
                     num - 2);
        snprintf(str, (size_t)num, "\n");
        return str;
    }
    memcpy(str, p, n);
    str[n] = 0;
    const char *s = str;
    if (c->line == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
        s += 3; /* a UTF-8 byte-order mark, which inih skips too */
    if (*s == '[' && strchr(s, ']')) {
        c->marker_due = 1;
        c->marker_line = c->line;
    } else {
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '[' && s != str)
            ctx_fail(c, c->line, SF_ERR_INVALID, "a section header must start at the beginning of its line");
    }
    return str;
}

/* ---------------------------------------------------------------- applying one key */

/* The bit of key `name` in a given-mask of its table's section (0 if the table lacks it). */
static uint64_t key_bit(const sf_key_spec *table, int n, const char *name)
{
    int i = sf_key_index(table, n, name, 0);
    return i >= 0 ? 1ull << i : 0;
}

/* Key `name` of a table, its index in *index (-1 when there is none). */
static const sf_key_spec *find_key(const sf_key_spec *table, int n, const char *name, uint32_t kind_bit, int *index)
{
    *index = sf_key_index(table, n, name, kind_bit);
    return *index >= 0 ? &table[*index] : NULL;
}

/* "unknown key 'x' in [conv] (accepted: filters, size, ...)", with an optional hint after the section. */
static sf_status unknown_key(const char *name, const char *section, const sf_key_spec *table, int n,
                             uint32_t kind_bit, int with_from, const char *hint)
{
    char list[512] = "";
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof list; i++) {
        if (kind_bit && !(table[i].kinds & kind_bit)) continue;
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", table[i].name);
    }
    if (with_from && len < sizeof list) snprintf(list + len, sizeof list - len, "%sfrom", len ? ", " : "");
    return sf_fail(SF_ERR_INVALID, "unknown key '%s' in [%s]%s (accepted: %s)", name, section, hint ? hint : "",
                   list[0] ? list : "from");
}

static sf_status apply_train(sf_config *cfg, const char *name, const char *value, int *bit)
{
    /* Keys that [train] once held and [readout] holds now, under these names. */
    static const char *const moved[][2] = {{"readout", "type"}, {"readout_tau", "tau"}, {"loss", "loss"}};
    const sf_key_spec *k = find_key(sf_train_keys, sf_num_train_keys, name, 0, bit);
    if (k) return sf_key_parse(k, value, cfg);
    char hint[64] = "";
    for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++)
        if (strcmp(name, moved[i][0]) == 0) snprintf(hint, sizeof hint, ": moved to [readout] as %s", moved[i][1]);
    return unknown_key(name, "train", sf_train_keys, sf_num_train_keys, 0, 0, hint);
}

static sf_status apply_readout(sf_config *cfg, const char *name, const char *value, int *bit)
{
    const sf_key_spec *k = find_key(sf_readout_keys, sf_num_readout_keys, name, 0, bit);
    if (!k) return unknown_key(name, "readout", sf_readout_keys, sf_num_readout_keys, 0, 0, NULL);
    return sf_key_parse(k, value, cfg);
}

static sf_status apply_lif(sf_lif_params *dst, uint32_t *own, const char *section, const char *name,
                           const char *value, int *bit)
{
    const sf_key_spec *k = find_key(sf_lif_keys, sf_num_lif_keys, name, 0, bit);
    if (!k && strcmp(name, "recurrent") == 0)
        return sf_fail(SF_ERR_INVALID, "unknown key 'recurrent' in [%s]: a recurrent spiking layer is an [rlif] "
                       "section (after a [linear] that gives its input current)", section);
    if (!k) return unknown_key(name, section, sf_lif_keys, sf_num_lif_keys, 0, strcmp(section, "neuron") != 0, NULL);
    SF_TRY(sf_key_parse(k, value, dst));
    *own |= 1u << *bit;
    return SF_OK;
}

/* `from`: a relative (< 0) or absolute layer number, or `input`; gives a tensor id (layer i makes tensor i+1). */
static sf_status parse_from(int32_t layer, const char *value, int32_t *tensor)
{
    if (strcmp(value, "input") == 0) {
        *tensor = 0;
        return SF_OK;
    }
    char *end;
    long v = strtol(value, &end, 10);
    if (end == value || *end)
        return sf_fail(SF_ERR_INVALID, "from expects a layer number (-1 is the previous one) or input");
    long src = v < 0 ? layer + v : v;
    if (v < 0 && src < -1)
        return sf_fail(SF_ERR_INVALID, "from = %ld reaches before the network input (this is layer %d)", v, layer);
    if (v >= 0 && src >= layer)
        return sf_fail(SF_ERR_INVALID, "from = %ld is not an earlier layer (this is layer %d)", v, layer);
    *tensor = (int32_t)(src + 1);
    return SF_OK;
}

/* Sections whose keys are a neuron's (all of them, or beside layer keys: [rlif]): [lif], [rlif], and [sdsa], whose
 * channel mask is a neuron of its own. */
static bool neuron_kind(sf_layer_kind kind)
{
    return kind == SF_LAYER_LIF || kind == SF_LAYER_RLIF || kind == SF_LAYER_SDSA;
}

static sf_status apply_layer(sf_config *cfg, int32_t li, const char *name, const char *value, int *bit)
{
    sf_config_layer *L = &cfg->layers[li];
    const sf_layer_kind kind = L->desc.kind;
    const char *section = sf_config_section_name(kind);
    if (strcmp(name, "from") == 0) {
        int32_t t = 0;
        *bit = FROM_BIT;
        SF_TRY(parse_from(li, value, &t));
        if (kind == SF_LAYER_ADD)
            L->desc.input2 = t;
        else
            L->desc.input = t == li ? -1 : t; /* the previous layer's output is the default */
        return SF_OK;
    }
    if (kind == SF_LAYER_LIF || kind == SF_LAYER_SDSA)
        return apply_lif(&L->lif_own_values, &L->lif_own, section, name, value, bit);
    if (kind == SF_LAYER_RLIF && sf_key_index(sf_layer_keys, sf_num_layer_keys, name, 1u << kind) < 0)
        return apply_lif(&L->lif_own_values, &L->lif_own, section, name, value, bit);
    const sf_key_spec *k = find_key(sf_layer_keys, sf_num_layer_keys, name, 1u << kind, bit);
    if (k && kind == SF_LAYER_RLIF) *bit += RLIF_LAYER_BITS; /* past the neuron keys' bits of the given-mask */
    if (!k) return unknown_key(name, section, sf_layer_keys, sf_num_layer_keys, 1u << kind, 1, NULL);
    return sf_key_parse(k, value, &L->desc);
}

/* ---------------------------------------------------------------- resolving and checking */

/* The first neuron key in `own` (bits of sf_lif_keys) that model m does not take, or -1. */
static int foreign_neuron_key(sf_neuron_model m, uint32_t own)
{
    for (int i = 0; i < sf_num_lif_keys; i++)
        if ((own & (1u << i)) && !sf_key_applies(&sf_lif_keys[i], m)) return i;
    return -1;
}

/* A section's neuron keys against its model: each must apply to it. On failure *bad is the offending key's index. */
static sf_status check_neuron_keys(sf_neuron_model m, uint32_t own, int *bad)
{
    *bad = foreign_neuron_key(m, own);
    if (*bad < 0) return SF_OK;
    char keys[256] = "";
    for (int i = 0, n = 0; i < sf_num_lif_keys; i++)
        if (sf_key_applies(&sf_lif_keys[i], m))
            n += snprintf(keys + n, sizeof keys - (size_t)n, "%s%s", n ? ", " : "", sf_lif_keys[i].name);
    return sf_fail(SF_ERR_INVALID, "%s does not apply to neuron = %s (its keys: %s)", sf_lif_keys[*bad].name,
                   sf_neuron_model_name(m), keys);
}

/* The model of a [lif] section: its own neuron key, else [neuron]'s. */
static sf_neuron_model layer_model(const sf_config *cfg, const sf_config_layer *L)
{
    const uint32_t bit = (uint32_t)key_bit(sf_lif_keys, sf_num_lif_keys, "neuron");
    return (L->lif_own & bit) ? L->lif_own_values.model : cfg->neuron.model;
}

/* Alpha follows the surrogate unless it was given where the surrogate was chosen or later. */
static void resolve_lif(sf_config *cfg)
{
    const uint64_t surrogate = key_bit(sf_lif_keys, sf_num_lif_keys, "surrogate"),
                   alpha = key_bit(sf_lif_keys, sf_num_lif_keys, "alpha");
    if (!(cfg->neuron_own & alpha)) cfg->neuron.alpha = sf_surrogate_default_alpha(cfg->neuron.surrogate);
    for (int32_t i = 0; i < cfg->num_layers; i++) {
        sf_config_layer *L = &cfg->layers[i];
        if (!neuron_kind(L->desc.kind)) continue;
        sf_lif_params p = cfg->neuron;
        if (L->desc.kind == SF_LAYER_SDSA) p.v_threshold = L->desc.lif.v_threshold; /* its own default, 0.5 */
        for (int b = 0; b < sf_num_lif_keys; b++)
            if (L->lif_own & (1u << b)) sf_key_copy(&sf_lif_keys[b], &p, &L->lif_own_values);
        if ((L->lif_own & surrogate) && !(L->lif_own & alpha)) p.alpha = sf_surrogate_default_alpha(p.surrogate);
        /* [neuron]'s values reach a layer only for the keys its model takes (a plif default's per_channel is no
         * concern of an alif layer); its own foreign keys are errors (check_neuron_keys) */
        sf_lif_params defaults;
        sf_lif_default_params(&defaults);
        for (int b = 0; b < sf_num_lif_keys; b++)
            if (!sf_key_applies(&sf_lif_keys[b], p.model)) sf_key_copy(&sf_lif_keys[b], &p, &defaults);
        L->desc.lif = p;
    }
}

/* A per-channel list must have one value per channel of the dataset (or be "default"). */
static sf_status check_channels(const float *v, const char *name, int32_t channels)
{
    if (isnan(v[0])) return SF_OK;
    int n = 0;
    while (n < SF_DATASET_MAX_CHANNELS && !isnan(v[n])) n++;
    if (n != channels)
        return sf_fail(SF_ERR_INVALID, "[train] %s has %d value%s; the dataset has %d channel%s", name, n,
                       n == 1 ? "" : "s", channels, channels == 1 ? "" : "s");
    return SF_OK;
}

/* Prefixes the current message with "where:line: " (or "where: " when line is 0). */
static sf_status located(sf_status s, const char *where, int line, const char *what)
{
    if (line > 0) return sf_fail_context(s, "%s:%d: %s", where, line, what);
    return sf_fail_context(s, "%s: %s", where, what);
}

/* Does the input, as configured, hold 0/1 spikes (so layers reading it may run event-driven)? Images under Poisson
 * or latency encoding, the synthetic source, and event frames of kind binary. */
static int input_is_spikes(const sf_config *cfg)
{
    if (cfg->train.dataset == SF_DATASET_SYNTHETIC) return 1;
    if (sf_dataset_kind_is_events(cfg->train.dataset)) return cfg->train.events.frame == SF_FRAME_BINARY;
    return cfg->train.encoding != SF_ENCODING_DIRECT;
}

int32_t sf_config_input_static(const sf_config *cfg)
{
    const sf_dataset_kind d = cfg->train.dataset;
    return d != SF_DATASET_SYNTHETIC && !sf_dataset_kind_is_events(d) && cfg->train.encoding == SF_ENCODING_DIRECT;
}

/* Everything that depends on more than one key; `where` locates messages (the file, or "override x=y"). */
static sf_status finish(sf_config *cfg, const char *where, int train_line, int neuron_line, int readout_line)
{
    resolve_lif(cfg);
    sf_data_params dp;
    int32_t shape[3];
    sf_config_data_params(cfg, &dp);
    sf_data_input_shape(cfg->train.dataset, &dp, shape, &cfg->classes);
    cfg->net.in_channels = shape[0];
    cfg->net.in_height = shape[1];
    cfg->net.in_width = shape[2];
    cfg->net.input_spikes = input_is_spikes(cfg);
    sf_status s = check_channels(cfg->train.mean, "mean", shape[0]);
    if (s == SF_OK) s = check_channels(cfg->train.std, "std", shape[0]);
    if (s != SF_OK) return located(s, where, train_line, "");
    s = sf_net_loss_check(&cfg->net);
    if (s != SF_OK) return located(s, where, readout_line, "[readout] ");
    int bad;
    s = check_neuron_keys(cfg->neuron.model, cfg->neuron_own, &bad);
    if (s == SF_OK) s = sf_lif_params_check(&cfg->neuron);
    if (s != SF_OK) return located(s, where, neuron_line, "[neuron] ");
    for (int32_t i = 0; i < cfg->num_layers; i++) {
        const sf_config_layer *L = &cfg->layers[i];
        if (!neuron_kind(L->desc.kind)) continue;
        s = check_neuron_keys(L->desc.lif.model, L->lif_own, &bad);
        if (s == SF_OK) s = sf_lif_params_check(&L->desc.lif);
        if (s != SF_OK) {
            char what[64];
            snprintf(what, sizeof what, "[%s] (layer %d) ", sf_config_section_name(L->desc.kind), i);
            return located(s, where, where == cfg->source ? L->line : 0, what);
        }
    }
    return SF_OK;
}

static void init_defaults(sf_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    sf_config_train *t = &cfg->train;
    t->dataset = SF_DATASET_FASHION_MNIST;
    t->epochs = 10;
    t->batch = 64;
    t->timesteps = 4;
    t->encoding = SF_ENCODING_DIRECT;
    t->augment = -1;
    t->normalize = 1;
    for (int i = 0; i < SF_DATASET_MAX_CHANNELS; i++) t->mean[i] = t->std[i] = NAN;
    t->log_every = 100;
    sf_data_params dp;
    sf_data_default_params(&dp);
    t->synthetic = dp.synthetic;
    t->classes = dp.synthetic.classes;
    t->events = dp.events;
    t->image_size = dp.images.size;
    sf_loader_params lp;
    sf_loader_default_params(&lp);
    t->crop_pad = lp.crop_pad;
    t->crop_scale_min = lp.crop_scale_min;
    t->time_parallel = 1;
    sf_net_default_params(&cfg->net);
    sf_optim_default_params(&cfg->optim);
    sf_schedule_default_params(&cfg->schedule);
    sf_lif_default_params(&cfg->neuron);
}

/* ---------------------------------------------------------------- the inih handler */

/* A neuron section's keys against its model, each error at the offending key's line. */
static void close_neuron_section(parse_ctx *c, const char *section, int32_t li, sf_neuron_model m, uint32_t own)
{
    int bad;
    if (check_neuron_keys(m, own, &bad) == SF_OK) return;
    char layer[32] = "";
    if (li >= 0) snprintf(layer, sizeof layer, " (layer %d)", li);
    ctx_fail(c, c->key_line[bad], SF_ERR_INVALID, "[%s]%s %s", section, layer, sf_last_error());
}

static void close_section(parse_ctx *c)
{
    if (c->sec == SEC_NEURON) close_neuron_section(c, "neuron", -1, c->cfg->neuron.model, c->cfg->neuron_own);
    if (c->sec != SEC_LAYER) return;
    const int32_t li = c->cfg->num_layers - 1;
    const sf_config_layer *L = &c->cfg->layers[li];
    const sf_layer_kind kind = L->desc.kind;
    const char *section = sf_config_section_name(kind);
    if (kind == SF_LAYER_LIF || kind == SF_LAYER_SDSA)
        close_neuron_section(c, section, li, layer_model(c->cfg, L), L->lif_own);
    if (kind == SF_LAYER_ADD && !(c->given & (1ull << FROM_BIT)))
        ctx_fail(c, c->section_line, SF_ERR_INVALID, "[add] (layer %d) lacks the required key from", li);
    for (int i = 0; i < sf_num_layer_keys; i++)
        if ((sf_layer_keys[i].required & (1u << kind)) && !(c->given & (1ull << i)))
            ctx_fail(c, c->section_line, SF_ERR_INVALID, "[%s] (layer %d) lacks the required key %s", section, li,
                     sf_layer_keys[i].name);
}

static int open_section(parse_ctx *c, const char *section, int line)
{
    close_section(c);
    c->given = 0;
    c->section_line = line;
    sf_config *cfg = c->cfg;
    c->sec = SEC_NONE;
    enum section sec = SEC_NONE;
    for (size_t i = 0; i < sizeof named_sections / sizeof named_sections[0]; i++)
        if (strcmp(section, named_sections[i].name) == 0) sec = named_sections[i].sec;
    int kind = sec == SEC_NONE ? sf_config_section_kind(section) : -1;
    for (int m = SF_NEURON_PLIF; sec == SEC_NONE && kind < 0 && m <= SF_NEURON_ALIF; m++)
        if (strcmp(section, sf_neuron_model_name((sf_neuron_model)m)) == 0)
            return ctx_fail(c, line, SF_ERR_INVALID,
                            "unknown section [%s]: a neuron model is a key, neuron = %s, in [lif] (that layer) or "
                            "[neuron] (every layer)",
                            section, section);
    if (sec == SEC_NONE && kind < 0)
        return ctx_fail(c, line, SF_ERR_INVALID,
                        "unknown section [%s] (expected train, neuron, conv, bn, lif, rlif, avgpool, maxpool, "
                        "flatten, linear, dropout, add, tokens, layernorm, ssa, sdsa, token_mean or readout)",
                        section);
    if (sec != SEC_NONE && c->seen[sec])
        return ctx_fail(c, line, SF_ERR_INVALID, "[%s] given twice (first at line %d)", section, c->seen[sec]);
    if (c->seen[SEC_READOUT])
        return ctx_fail(c, line, SF_ERR_INVALID, "[%s] after [readout] (line %d): [readout] must be the last section",
                        section, c->seen[SEC_READOUT]);
    if (sec != SEC_NONE) {
        c->seen[sec] = line;
        c->sec = sec;
        return 1;
    }
    if (cfg->num_layers == SF_CONFIG_MAX_LAYERS)
        return ctx_fail(c, line, SF_ERR_INVALID, "more than %d layers", SF_CONFIG_MAX_LAYERS);
    sf_config_layer *layers = realloc(cfg->layers, (size_t)(cfg->num_layers + 1) * sizeof *layers);
    if (!layers) return ctx_fail(c, line, SF_ERR_NOMEM, "out of memory");
    cfg->layers = layers;
    sf_config_layer *L = &layers[cfg->num_layers++];
    memset(L, 0, sizeof *L);
    sf_layer_default_desc((sf_layer_kind)kind, &L->desc);
    L->desc.input = -1;
    L->line = line;
    c->sec = SEC_LAYER;
    return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *c = user;
    if (c->error_line) return 1; /* only the first error is reported */
    if (strcmp(name, SECTION_MARKER) == 0) {
        if (!c->marker_sent) return ctx_fail(c, c->line, SF_ERR_INVALID, "indented line continues nothing");
        return open_section(c, section, c->marker_line);
    }
    const int line = c->line;
    sf_config *cfg = c->cfg;
    int bit = -1;
    sf_status s;
    const char *sec_name = section;
    switch (c->sec) {
    case SEC_NONE:
        return ctx_fail(c, line, SF_ERR_INVALID, "key '%s' outside any known section", name);
    case SEC_TRAIN: s = apply_train(cfg, name, value, &bit); break;
    case SEC_NEURON: s = apply_lif(&cfg->neuron, &cfg->neuron_own, "neuron", name, value, &bit); break;
    case SEC_READOUT: s = apply_readout(cfg, name, value, &bit); break;
    case SEC_LAYER:
    default: s = apply_layer(cfg, cfg->num_layers - 1, name, value, &bit); break;
    }
    if (s != SF_OK) {
        /* Unknown keys carry their own wording; value errors get "[sec] key = value: ". */
        if (bit < 0) return ctx_fail(c, line, s, "%s", sf_last_error());
        return ctx_fail(c, line, s, "[%s] %s = %s: %s", sec_name, name, value, sf_last_error());
    }
    if (c->given & (1ull << bit)) return ctx_fail(c, line, SF_ERR_INVALID, "[%s] %s given twice", sec_name, name);
    c->given |= 1ull << bit;
    c->key_line[bit] = line;
    if (c->sec == SEC_TRAIN) c->train_given |= 1ull << bit;
    return 1;
}

static sf_status missing_dataset(const char *name, int line)
{
    char kinds[256];
    sf_dataset_kind_list(kinds, sizeof kinds);
    return sf_fail(SF_ERR_INVALID, "%s:%d: [train] lacks the required key dataset (%s)", name, line, kinds);
}

sf_status sf_config_parse_string(const char *text, const char *name, sf_config **out)
{
    *out = NULL;
    if (!text || !name) return sf_fail(SF_ERR_INVALID, "config text or name is NULL");
    sf_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return sf_fail(SF_ERR_NOMEM, "out of memory");
    init_defaults(cfg);
    snprintf(cfg->source, sizeof cfg->source, "%s", name);
    parse_ctx c = {.cfg = cfg, .text = text, .len = strlen(text)};
    int rc = ini_parse_stream(reader, &c, handler, &c);
    close_section(&c);
    /* inih's own errors (a line that is neither a section, a key = value, nor a comment) come with its line
     * number, which counts the marker lines too. */
    int inih_line = rc > 0 && (size_t)rc <= c.map_len ? c.line_map[rc - 1] : rc > 0 ? rc : 0;
    free(c.line_map);
    sf_status s = SF_OK;
    if (rc < 0)
        s = sf_fail(SF_ERR_NOMEM, "%s: out of memory parsing the config", name);
    else if (inih_line && (!c.error_line || inih_line < c.error_line))
        s = sf_fail(SF_ERR_INVALID, "%s:%d: expected [section], key = value, or a comment", name, inih_line);
    else if (c.error_line)
        s = sf_fail(c.error_status, "%s:%d: %s", name, c.error_line, c.error);
    else if (!(c.train_given & key_bit(sf_train_keys, sf_num_train_keys, "dataset")))
        s = missing_dataset(name, c.seen[SEC_TRAIN] ? c.seen[SEC_TRAIN] : 1);
    else if (cfg->num_layers == 0)
        s = sf_fail(SF_ERR_INVALID, "%s:%d: the config defines no layers", name, c.line ? c.line : 1);
    else
        s = finish(cfg, cfg->source, c.seen[SEC_TRAIN], c.seen[SEC_NEURON], c.seen[SEC_READOUT]);
    if (s != SF_OK) {
        sf_config_free(cfg);
        return s;
    }
    *out = cfg;
    return SF_OK;
}

sf_status sf_config_load(const char *path, sf_config **out)
{
    *out = NULL;
    char *text = NULL;
    size_t n = 0;
    sf_status s = sf_read_file(path, SF_CONFIG_MAX_BYTES, &text, &n);
    if (s != SF_OK) return sf_fail_context(s, "config: ");
    if (memchr(text, 0, n))
        s = sf_fail(SF_ERR_INVALID, "%s: contains a NUL byte: not a text config", path);
    else
        s = sf_config_parse_string(text, path, out);
    free(text);
    return s;
}

void sf_config_free(sf_config *cfg)
{
    if (!cfg) return;
    free(cfg->layers);
    free(cfg);
}

/* ---------------------------------------------------------------- overrides */

sf_status sf_config_set(sf_config *cfg, const char *key, const char *value)
{
    if (!cfg || !key || !value) return sf_fail(SF_ERR_INVALID, "override: NULL argument");
    char where[256];
    snprintf(where, sizeof where, "override %s=%s", key, value);
    const char *dot = strchr(key, '.');
    if (!dot)
        return sf_fail(SF_ERR_INVALID, "%s: expected section.key (train.lr, neuron.tau, layer3.filters, readout.tau)",
                       where);
    const size_t slen = (size_t)(dot - key);
    const char *name = dot + 1;
    /* Work on copies so a rejected override leaves the config as it was. */
    const sf_config saved = *cfg;
    int32_t li = -1;
    sf_config_layer saved_layer;
    int bit;
    sf_status s;
    if (slen == 5 && strncmp(key, "train", 5) == 0) {
        s = apply_train(cfg, name, value, &bit);
    } else if (slen == 6 && strncmp(key, "neuron", 6) == 0) {
        s = apply_lif(&cfg->neuron, &cfg->neuron_own, "neuron", name, value, &bit);
    } else if (slen == 7 && strncmp(key, "readout", 7) == 0) {
        s = apply_readout(cfg, name, value, &bit);
    } else if (slen > 5 && strncmp(key, "layer", 5) == 0) {
        char *end;
        long v = strtol(key + 5, &end, 10);
        if (end != dot || v < 0 || v >= cfg->num_layers)
            return sf_fail(SF_ERR_INVALID, "%s: no layer %.*s (layers are numbered 0 to %d)", where, (int)(slen - 5),
                           key + 5, cfg->num_layers - 1);
        li = (int32_t)v;
        saved_layer = cfg->layers[li];
        s = apply_layer(cfg, li, name, value, &bit);
    } else {
        return sf_fail(SF_ERR_INVALID, "%s: unknown section '%.*s' (train, neuron, layerN or readout)", where,
                       (int)slen, key);
    }
    if (s == SF_OK) s = finish(cfg, where, 0, 0, 0);
    if (s != SF_OK) {
        const char *msg = sf_last_error();
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", msg);
        *cfg = saved;
        if (li >= 0) cfg->layers[li] = saved_layer;
        resolve_lif(cfg);
        /* finish() already located its message; key errors are located here. */
        return strncmp(copy, "override ", 9) == 0 ? sf_fail(s, "%s", copy) : sf_fail(s, "%s: %s", where, copy);
    }
    return SF_OK;
}

sf_status sf_config_set_arg(sf_config *cfg, const char *assignment)
{
    const char *eq = assignment ? strchr(assignment, '=') : NULL;
    if (!eq || eq == assignment)
        return sf_fail(SF_ERR_INVALID, "override '%s': expected section.key=value", assignment ? assignment : "");
    char key[256];
    if ((size_t)(eq - assignment) >= sizeof key) return sf_fail(SF_ERR_INVALID, "override key is too long");
    memcpy(key, assignment, (size_t)(eq - assignment));
    key[eq - assignment] = 0;
    return sf_config_set(cfg, key, eq + 1);
}
