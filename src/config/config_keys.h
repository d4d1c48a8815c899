/* config_keys.h — the keys a config may hold: one table per section kind, shared by the parser, the overrides and
 * the writer, so that what is written always parses back. Internal to src/config/. */
#ifndef SF_CONFIG_CONFIG_KEYS_H
#define SF_CONFIG_CONFIG_KEYS_H

#include "config/config.h"

#include <stddef.h>
#include <stdint.h>

typedef enum sf_value_type {
    SF_V_INT32,
    SF_V_INT64,
    SF_V_U64,
    SF_V_FLOAT,
    SF_V_BOOL,
    SF_V_AUTO_BOOL, /* on, off or auto (-1) */
    SF_V_ENUM,      /* stored as an int; the value is the index in `choices` */
    SF_V_STRING,    /* char[SF_CONFIG_PATH_MAX] */
    SF_V_DEVICE,    /* sf_device */
    SF_V_DATASET,   /* sf_dataset_kind, by the names of src/data's format table */
    SF_V_CHANNELS,  /* float[SF_DATASET_MAX_CHANNELS]: comma-separated per-channel values, then NaN; or "default"
                     * (all NaN) */
    SF_V_OPT_FLOAT, /* a float at `offset` enabled by the int32 flag at `flag_offset`, or "off" */
    SF_V_SHAPE,     /* int32[3] C, H, W: "C, H, W", or "N" for N, 1, 1; each in [min, max] */
    SF_V_ENUM_OR_DEFAULT /* an int32: an index in `choices`, or "default" (-1: what a wider setting says) */
} sf_value_type;

typedef struct sf_key_spec {
    const char *name;
    sf_value_type type;
    size_t offset;               /* within the section's target struct */
    double min, max;             /* numbers: the accepted range */
    int open_min;                /* 1: the range excludes min */
    const char *const *choices;  /* SF_V_ENUM: NULL-terminated */
    size_t flag_offset;          /* SF_V_OPT_FLOAT */
    uint32_t kinds;              /* layer keys: the layer kinds (1 << sf_layer_kind) that take it */
    uint32_t required;           /* layer keys: the kinds that must give it */
    uint32_t models;             /* neuron keys: the neuron models (1 << sf_neuron_model) that take it; 0: all */
    const char *zero_word;       /* SF_V_INT32: a word that stands for 0 outside [min, max] ("global"), or NULL */
} sf_key_spec;

/* [train] and [readout]: offsets into sf_config. [neuron] and [lif]: offsets into sf_lif_params. Layers: into
 * sf_layer_desc. */
extern const sf_key_spec sf_train_keys[];
extern const sf_key_spec sf_readout_keys[];
extern const sf_key_spec sf_lif_keys[];
extern const sf_key_spec sf_layer_keys[];
extern const int sf_num_train_keys, sf_num_readout_keys, sf_num_lif_keys, sf_num_layer_keys;

/* The index of key `name` in a table of n keys (its bit in a section's given-mask), or -1. kind_bit, when not 0,
 * restricts layer keys to those that kind takes. Keys are always found by name, so the tables may be reordered. */
int sf_key_index(const sf_key_spec *table, int n, const char *name, uint32_t kind_bit);
/* Does neuron key k apply to model m? */
static inline int sf_key_applies(const sf_key_spec *k, sf_neuron_model m)
{
    return !k->models || (k->models & (1u << m));
}
/* Copies the field k describes (and its flag, for SF_V_OPT_FLOAT) from the struct at src to the one at dst. */
void sf_key_copy(const sf_key_spec *k, void *dst, const void *src);

/* Section names of layer kinds ("conv", "bn", ...), indexed by sf_layer_kind; NULL if unknown. */
const char *sf_config_section_name(sf_layer_kind kind);
int sf_config_section_kind(const char *section); /* -1 when not a layer section */

/* Parses `text` into the field of `base` that `k` describes. On failure returns SF_ERR_INVALID with a message
 * (without location) saying what is accepted. */
sf_status sf_key_parse(const sf_key_spec *k, const char *text, void *base);
/* Formats the field as sf_key_parse reads it back; returns what snprintf returns. */
int sf_key_format(const sf_key_spec *k, const void *base, char *out, size_t cap);

#endif
