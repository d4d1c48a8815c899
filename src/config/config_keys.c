/* config_keys.c — the key tables of configs and the parsing and formatting of each value type. */
#include "config/config_keys.h"

#include "core/error.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const encoding_names[] = {"direct", "poisson", "latency", NULL};
static const char *const optimizer_names[] = {"sgd", "adam", "adamw", NULL};
static const char *const schedule_names[] = {"constant", "step", "cosine", NULL};
static const char *const memory_names[] = {"full", "recompute", "lean", NULL};
static const char *const precision_names[] = {"fp32", "tf32", "bf16", "fp16", NULL}; /* sf_precision order */
static const char *const conv_algo_names[] = {"auto", "cudnn", "gemm", "nhwc", "nchw", "split", NULL}; /* sf_conv_algo order */
static const char *const readout_names[] = {"mean", "leaky", NULL};
static const char *const loss_names[] = {"ce_mean", "ce_per_step", "mse_rate", NULL}; /* sf_loss order */
static const char *const reset_names[] = {"hard", "soft", NULL};
static const char *const frame_names[] = {"count", "binary", NULL};     /* sf_frame_mode order */
static const char *const polarity_names[] = {"keep", "merge", NULL};    /* merge_polarity 0, 1 */
static const char *const surrogate_names[] = {"sigmoid", "atan", "fast_sigmoid", "rect", NULL};
static const char *const sparse_names[] = {"off", "auto", "on", NULL}; /* sf_sparse_mode order */
static const char *const model_names[] = {"lif", "plif", "if", "alif", NULL}; /* sf_neuron_model order */
static const char *const cifar100_label_names[] = {"fine", "coarse", NULL};    /* coarse_labels 0, 1 */
static const char *const connect_names[] = {"add", "and", "iand", NULL};        /* sf_connect order */

#define BIG 1e30
#define SF_CONFIG_STRING_MAX 180
#define TRAIN(member) offsetof(sf_config, member)
const sf_key_spec sf_train_keys[] = {
    {.name = "dataset", .type = SF_V_DATASET, .offset = TRAIN(train.dataset)},
    {.name = "data_dir", .type = SF_V_STRING, .offset = TRAIN(train.data_dir)},
    {.name = "data_cache", .type = SF_V_STRING, .offset = TRAIN(train.data_cache)},
    {.name = "init", .type = SF_V_STRING, .offset = TRAIN(train.init)},
    {.name = "epochs", .type = SF_V_INT64, .offset = TRAIN(train.epochs), .min = 1, .max = 1e6},
    {.name = "batch", .type = SF_V_INT64, .offset = TRAIN(train.batch), .min = 1, .max = 65536},
    {.name = "timesteps", .type = SF_V_INT64, .offset = TRAIN(train.timesteps), .min = 1, .max = 100000},
    {.name = "encoding", .type = SF_V_ENUM, .offset = TRAIN(train.encoding), .choices = encoding_names},
    {.name = "augment", .type = SF_V_AUTO_BOOL, .offset = TRAIN(train.augment)},
    {.name = "crop_pad", .type = SF_V_INT32, .offset = TRAIN(train.crop_pad), .min = 0, .max = 64},
    {.name = "erase_p", .type = SF_V_FLOAT, .offset = TRAIN(train.erase_p), .min = 0, .max = 1},
    {.name = "normalize", .type = SF_V_BOOL, .offset = TRAIN(train.normalize)},
    {.name = "mean", .type = SF_V_CHANNELS, .offset = TRAIN(train.mean), .min = -BIG, .max = BIG},
    {.name = "std", .type = SF_V_CHANNELS, .offset = TRAIN(train.std), .min = 0, .max = BIG, .open_min = 1},
    {.name = "input_shape", .type = SF_V_SHAPE, .offset = TRAIN(train.synthetic.shape), .min = 1, .max = 16384},
    {.name = "classes", .type = SF_V_INT32, .offset = TRAIN(train.classes), .min = 1, .max = SF_DATASET_MAX_CLASSES},
    {.name = "samples", .type = SF_V_INT64, .offset = TRAIN(train.synthetic.samples), .min = 1, .max = 1e9},
    {.name = "input_density", .type = SF_V_FLOAT, .offset = TRAIN(train.synthetic.density), .min = 0, .max = 1,
     .open_min = 1},
    {.name = "image_size", .type = SF_V_INT32, .offset = TRAIN(train.image_size), .min = 8, .max = 4096},
    {.name = "crop_scale_min", .type = SF_V_FLOAT, .offset = TRAIN(train.crop_scale_min), .min = 0, .max = 1,
     .open_min = 1},
    {.name = "skip_bad_images", .type = SF_V_BOOL, .offset = TRAIN(train.skip_bad_images)},
    {.name = "val_labels", .type = SF_V_STRING, .offset = TRAIN(train.val_labels)},
    {.name = "data_threads", .type = SF_V_INT32, .offset = TRAIN(train.data_threads), .min = 0, .max = 4096},
    {.name = "cifar100_labels", .type = SF_V_ENUM, .offset = TRAIN(train.coarse_labels),
     .choices = cifar100_label_names},
    {.name = "ncaltech101_background", .type = SF_V_BOOL, .offset = TRAIN(train.background_class)},
    {.name = "time_window_us", .type = SF_V_INT64, .offset = TRAIN(train.events.time_window_us), .min = 0,
     .max = 1e12},
    {.name = "frame", .type = SF_V_ENUM, .offset = TRAIN(train.events.frame), .choices = frame_names},
    {.name = "downsample", .type = SF_V_INT32, .offset = TRAIN(train.events.downsample), .min = 1, .max = 1024},
    {.name = "polarity", .type = SF_V_ENUM, .offset = TRAIN(train.events.merge_polarity), .choices = polarity_names},
    {.name = "aug_time_jitter_us", .type = SF_V_INT64, .offset = TRAIN(train.events.time_jitter_us), .min = 0,
     .max = 1e9},
    {.name = "aug_drop_event", .type = SF_V_FLOAT, .offset = TRAIN(train.events.drop_event), .min = 0,
     .max = 0.999999},
    {.name = "aug_shift", .type = SF_V_INT32, .offset = TRAIN(train.events.shift), .min = 0, .max = 4096},
    {.name = "aug_flip", .type = SF_V_BOOL, .offset = TRAIN(train.events.flip)},
    {.name = "optimizer", .type = SF_V_ENUM, .offset = TRAIN(optim.kind), .choices = optimizer_names},
    {.name = "lr", .type = SF_V_FLOAT, .offset = TRAIN(optim.lr), .min = 0, .max = 1e3, .open_min = 1},
    {.name = "momentum", .type = SF_V_FLOAT, .offset = TRAIN(optim.momentum), .min = 0, .max = 0.999999},
    {.name = "nesterov", .type = SF_V_BOOL, .offset = TRAIN(optim.nesterov)},
    {.name = "weight_decay", .type = SF_V_FLOAT, .offset = TRAIN(optim.weight_decay), .min = 0, .max = 1e3},
    {.name = "beta1", .type = SF_V_FLOAT, .offset = TRAIN(optim.beta1), .min = 0, .max = 0.999999},
    /* the largest float32 below 1 */
    {.name = "beta2", .type = SF_V_FLOAT, .offset = TRAIN(optim.beta2), .min = 0, .max = 0.99999994},
    {.name = "eps", .type = SF_V_FLOAT, .offset = TRAIN(optim.eps), .min = 0, .max = 1, .open_min = 1},
    {.name = "schedule", .type = SF_V_ENUM, .offset = TRAIN(schedule.kind), .choices = schedule_names},
    {.name = "step_size", .type = SF_V_INT64, .offset = TRAIN(schedule.step_size), .min = 1, .max = 1e6},
    {.name = "gamma", .type = SF_V_FLOAT, .offset = TRAIN(schedule.gamma), .min = 0, .max = 10, .open_min = 1},
    {.name = "min_lr", .type = SF_V_FLOAT, .offset = TRAIN(schedule.min_lr), .min = 0, .max = 1e3},
    {.name = "seed", .type = SF_V_U64, .offset = TRAIN(net.seed)},
    {.name = "memory", .type = SF_V_ENUM, .offset = TRAIN(net.memory), .choices = memory_names},
    {.name = "device", .type = SF_V_DEVICE, .offset = TRAIN(net.device)},
    {.name = "precision", .type = SF_V_ENUM, .offset = TRAIN(net.precision), .choices = precision_names},
    {.name = "cuda_graph", .type = SF_V_BOOL, .offset = TRAIN(net.cuda.graph)},
    {.name = "conv_workspace_mib", .type = SF_V_INT32, .offset = TRAIN(net.cuda.conv_workspace_mib), .min = 0,
     .max = 65536},
    {.name = "conv_algo", .type = SF_V_ENUM, .offset = TRAIN(net.cuda.conv_algo), .choices = conv_algo_names},
    {.name = "deterministic", .type = SF_V_BOOL, .offset = TRAIN(net.cuda.deterministic)},
    {.name = "conv_lean", .type = SF_V_FLOAT, .offset = TRAIN(net.cuda.conv_lean), .min = 0, .max = 1},
    {.name = "sparse", .type = SF_V_ENUM, .offset = TRAIN(net.sparse), .choices = sparse_names},
    {.name = "sparse_crossover", .type = SF_V_FLOAT, .offset = TRAIN(net.sparse_crossover), .min = 0, .max = 1},
    {.name = "threads", .type = SF_V_INT32, .offset = TRAIN(train.threads), .min = 0, .max = 4096},
    {.name = "log_every", .type = SF_V_INT64, .offset = TRAIN(train.log_every), .min = 0, .max = 1e12},
    {.name = "time_parallel", .type = SF_V_INT32, .offset = TRAIN(train.time_parallel), .min = 1, .max = 4096},
    {.name = "global_batch", .type = SF_V_INT64, .offset = TRAIN(train.global_batch), .min = 0, .max = 1 << 24},
    {.name = "sync_bn", .type = SF_V_BOOL, .offset = TRAIN(train.sync_bn)},
};
const int sf_num_train_keys = (int)(sizeof sf_train_keys / sizeof sf_train_keys[0]);

/* [readout]: how the last layer's per-step outputs become logits, and the loss on them. */
const sf_key_spec sf_readout_keys[] = {
    {.name = "type", .type = SF_V_ENUM, .offset = TRAIN(net.readout), .choices = readout_names},
    {.name = "tau", .type = SF_V_FLOAT, .offset = TRAIN(net.readout_tau), .min = 1, .max = 1e6},
    {.name = "loss", .type = SF_V_ENUM, .offset = TRAIN(net.loss), .choices = loss_names},
    {.name = "label_smoothing", .type = SF_V_FLOAT, .offset = TRAIN(net.label_smoothing), .min = 0, .max = 1},
};
const int sf_num_readout_keys = (int)(sizeof sf_readout_keys / sizeof sf_readout_keys[0]);

/* Fine-grained LIF checks (tau with decay_input, ...) are sf_lif_params_check's; these are the coarse ranges. Keys
 * that belong to some models only say which (`models`); the others apply to every model. */
#define LIF(member) offsetof(sf_lif_params, member)
#define M(model) (1u << SF_NEURON_##model)
const sf_key_spec sf_lif_keys[] = {
    {.name = "tau", .type = SF_V_FLOAT, .offset = LIF(tau), .min = 1, .max = 1e9,
     .models = M(LIF) | M(PLIF) | M(ALIF)},
    {.name = "decay", .type = SF_V_FLOAT, .offset = LIF(decay), .min = 0, .max = 1, .models = M(LIF) | M(ALIF)},
    {.name = "decay_input", .type = SF_V_BOOL, .offset = LIF(decay_input), .models = M(LIF) | M(PLIF) | M(ALIF)},
    {.name = "v_threshold", .type = SF_V_FLOAT, .offset = LIF(v_threshold), .min = -BIG, .max = BIG},
    {.name = "v_reset", .type = SF_V_FLOAT, .offset = LIF(v_reset), .min = -BIG, .max = BIG},
    {.name = "reset", .type = SF_V_ENUM, .offset = LIF(soft_reset), .choices = reset_names},
    {.name = "detach_reset", .type = SF_V_BOOL, .offset = LIF(detach_reset)},
    {.name = "surrogate", .type = SF_V_ENUM, .offset = LIF(surrogate), .choices = surrogate_names},
    {.name = "alpha", .type = SF_V_FLOAT, .offset = LIF(alpha), .min = 0, .max = 1e9, .open_min = 1},
    {.name = "grad_threshold", .type = SF_V_OPT_FLOAT, .offset = LIF(grad_threshold), .min = -BIG, .max = BIG,
     .flag_offset = LIF(use_grad_threshold)},
    {.name = "grad_cut", .type = SF_V_BOOL, .offset = LIF(grad_cut)},
    {.name = "neuron", .type = SF_V_ENUM, .offset = LIF(model), .choices = model_names},
    {.name = "per_channel", .type = SF_V_BOOL, .offset = LIF(per_channel), .models = M(PLIF)},
    {.name = "rho", .type = SF_V_FLOAT, .offset = LIF(rho), .min = 0, .max = 1, .models = M(ALIF)},
    {.name = "tau_adapt", .type = SF_V_FLOAT, .offset = LIF(tau_adapt), .min = 0, .max = 1e9, .models = M(ALIF)},
    {.name = "beta", .type = SF_V_FLOAT, .offset = LIF(beta), .min = 0, .max = BIG, .models = M(ALIF)},
};
const int sf_num_lif_keys = (int)(sizeof sf_lif_keys / sizeof sf_lif_keys[0]);

#define K(kind) (1u << (kind))
#define DESC(member) offsetof(sf_layer_desc, member)
#define POOLS (K(SF_LAYER_AVGPOOL2D) | K(SF_LAYER_MAXPOOL2D))
const sf_key_spec sf_layer_keys[] = {
    {.name = "filters", .type = SF_V_INT32, .offset = DESC(out_channels), .min = 1, .max = 65536,
     .kinds = K(SF_LAYER_CONV2D), .required = K(SF_LAYER_CONV2D)},
    {.name = "size", .type = SF_V_INT32, .offset = DESC(kernel), .min = 1, .max = 64,
     .kinds = K(SF_LAYER_CONV2D) | K(SF_LAYER_MAXPOOL2D), .required = K(SF_LAYER_CONV2D) | K(SF_LAYER_MAXPOOL2D)},
    /* global: the whole plane, as AdaptiveAvgPool2d(1) */
    {.name = "size", .type = SF_V_INT32, .offset = DESC(kernel), .min = 1, .max = 64,
     .kinds = K(SF_LAYER_AVGPOOL2D), .required = K(SF_LAYER_AVGPOOL2D), .zero_word = "global"},
    {.name = "stride", .type = SF_V_INT32, .offset = DESC(stride), .min = 1, .max = 64, .kinds = K(SF_LAYER_CONV2D)},
    /* pools: 0 means the pool's size */
    {.name = "stride", .type = SF_V_INT32, .offset = DESC(stride), .min = 0, .max = 64, .kinds = POOLS},
    {.name = "pad", .type = SF_V_INT32, .offset = DESC(padding), .min = 0, .max = 64,
     .kinds = K(SF_LAYER_CONV2D) | POOLS},
    {.name = "bias", .type = SF_V_BOOL, .offset = DESC(bias), .kinds = K(SF_LAYER_CONV2D) | K(SF_LAYER_LINEAR)},
    {.name = "out", .type = SF_V_INT32, .offset = DESC(out_features), .min = 1, .max = 1 << 24,
     .kinds = K(SF_LAYER_LINEAR), .required = K(SF_LAYER_LINEAR)},
    {.name = "eps", .type = SF_V_FLOAT, .offset = DESC(bn_eps), .min = 0, .max = 1, .open_min = 1,
     .kinds = K(SF_LAYER_BATCHNORM) | K(SF_LAYER_LAYERNORM)},
    {.name = "momentum", .type = SF_V_FLOAT, .offset = DESC(bn_momentum), .min = 0, .max = 1,
     .kinds = K(SF_LAYER_BATCHNORM)},
    {.name = "p", .type = SF_V_FLOAT, .offset = DESC(dropout_p), .min = 0, .max = 0.999999,
     .kinds = K(SF_LAYER_DROPOUT)},
    {.name = "sparse", .type = SF_V_ENUM_OR_DEFAULT, .offset = DESC(sparse), .choices = sparse_names,
     .kinds = K(SF_LAYER_LINEAR) | K(SF_LAYER_RLIF)},
    {.name = "init_gain", .type = SF_V_FLOAT, .offset = DESC(init_gain), .min = 0, .max = 1e6, .open_min = 1,
     .kinds = K(SF_LAYER_LINEAR) | K(SF_LAYER_CONV2D) | K(SF_LAYER_RLIF)},
    {.name = "heads", .type = SF_V_INT32, .offset = DESC(heads), .min = 1, .max = 65536, .kinds = K(SF_LAYER_SSA)},
    {.name = "scale", .type = SF_V_FLOAT, .offset = DESC(attn_scale), .min = -BIG, .max = BIG,
     .kinds = K(SF_LAYER_SSA)},
    {.name = "connect", .type = SF_V_ENUM, .offset = DESC(connect), .choices = connect_names,
     .kinds = K(SF_LAYER_ADD)},
};
const int sf_num_layer_keys = (int)(sizeof sf_layer_keys / sizeof sf_layer_keys[0]);

static const char *const section_names[] = {
    [SF_LAYER_LINEAR] = "linear", [SF_LAYER_CONV2D] = "conv",  [SF_LAYER_AVGPOOL2D] = "avgpool",
    [SF_LAYER_MAXPOOL2D] = "maxpool", [SF_LAYER_FLATTEN] = "flatten", [SF_LAYER_DROPOUT] = "dropout",
    [SF_LAYER_BATCHNORM] = "bn",  [SF_LAYER_LIF] = "lif",      [SF_LAYER_ADD] = "add",
    [SF_LAYER_RLIF] = "rlif", [SF_LAYER_TOKENS] = "tokens", [SF_LAYER_LAYERNORM] = "layernorm",
    [SF_LAYER_SSA] = "ssa", [SF_LAYER_SDSA] = "sdsa", [SF_LAYER_TOKEN_MEAN] = "token_mean",
};
#define NUM_SECTIONS ((int)(sizeof section_names / sizeof section_names[0]))

const char *sf_config_section_name(sf_layer_kind kind)
{
    return (unsigned)kind < NUM_SECTIONS ? section_names[kind] : NULL;
}

int sf_config_section_kind(const char *section)
{
    for (int i = 0; i < NUM_SECTIONS; i++)
        if (strcmp(section, section_names[i]) == 0) return i;
    return -1;
}

int sf_key_index(const sf_key_spec *table, int n, const char *name, uint32_t kind_bit)
{
    for (int i = 0; i < n; i++)
        if ((kind_bit == 0 || (table[i].kinds & kind_bit)) && strcmp(table[i].name, name) == 0) return i;
    return -1;
}

/* The bytes a field of type t occupies. */
static size_t value_size(sf_value_type t)
{
    switch (t) {
    case SF_V_INT32:
    case SF_V_BOOL:
    case SF_V_AUTO_BOOL:
    case SF_V_ENUM_OR_DEFAULT: return sizeof(int32_t);
    case SF_V_INT64: return sizeof(int64_t);
    case SF_V_U64: return sizeof(uint64_t);
    case SF_V_FLOAT:
    case SF_V_OPT_FLOAT: return sizeof(float);
    case SF_V_ENUM: return sizeof(int);
    case SF_V_STRING: return SF_CONFIG_PATH_MAX;
    case SF_V_DEVICE: return sizeof(sf_device);
    case SF_V_DATASET: return sizeof(sf_dataset_kind);
    case SF_V_CHANNELS: return SF_DATASET_MAX_CHANNELS * sizeof(float);
    case SF_V_SHAPE: return 3 * sizeof(int32_t);
    }
    return 0;
}

void sf_key_copy(const sf_key_spec *k, void *dst, const void *src)
{
    memcpy((char *)dst + k->offset, (const char *)src + k->offset, value_size(k->type));
    if (k->type == SF_V_OPT_FLOAT)
        memcpy((char *)dst + k->flag_offset, (const char *)src + k->flag_offset, sizeof(int32_t));
}

/* ---------------------------------------------------------------- values */

static sf_status range_error(const sf_key_spec *k)
{
    if (k->max >= BIG && k->min <= -BIG) return sf_fail(SF_ERR_INVALID, "must be a finite number");
    /* %.15g: every bound in the tables exactly as written (16777216, not 1.67772e+07) */
    if (k->max >= BIG)
        return sf_fail(SF_ERR_INVALID, "must be %s %.15g", k->open_min ? ">" : ">=", k->min);
    return sf_fail(SF_ERR_INVALID, "must be in %s%.15g, %.15g]", k->open_min ? "(" : "[", k->min, k->max);
}

static int in_range(const sf_key_spec *k, double v)
{
    return (k->open_min ? v > k->min : v >= k->min) && v <= k->max;
}

static sf_status parse_integer(const sf_key_spec *k, const char *text, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || errno == ERANGE) return sf_fail(SF_ERR_INVALID, "expects an integer");
    if (!in_range(k, (double)v)) return range_error(k);
    *out = v;
    return SF_OK;
}

/* The shortest decimal that reads back as exactly v (0.01, not 0.00999999978). */
static int format_float(float v, char *out, size_t cap)
{
    char buf[32];
    for (int digits = 6; digits < 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtof(buf, NULL) == v) return snprintf(out, cap, "%s", buf);
    }
    return snprintf(out, cap, "%.9g", v);
}

/* A number checked as written and as the float it is stored in: 1e-50 is 0 there, which a range excluding 0 must
 * refuse (else lr = 1e-50 trains at 0 and is written back as "lr = 0", which no longer reads). */
static sf_status parse_float(const sf_key_spec *k, const char *text, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v) || fabs(v) > 3.0e38) return sf_fail(SF_ERR_INVALID, "expects a number");
    if (!in_range(k, v)) return range_error(k);
    const float stored = (float)v;
    if (!in_range(k, (double)stored)) {
        char why[64];
        format_float(stored, why, sizeof why);
        const sf_status s = range_error(k);
        char msg[256];
        snprintf(msg, sizeof msg, "%s", sf_last_error());
        return sf_fail(s, "%s (%s is stored as the 32-bit float %s)", msg, text, why);
    }
    *out = stored;
    return SF_OK;
}

static int parse_bool(const char *text, int32_t *out)
{
    static const char *const yes[] = {"on", "true", "yes", "1"}, *const no[] = {"off", "false", "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(text, yes[i]) == 0) return *out = 1, 1;
        if (strcmp(text, no[i]) == 0) return *out = 0, 1;
    }
    return 0;
}

static sf_status choices_error(const char *const *choices)
{
    char list[256] = "";
    for (int i = 0; choices[i]; i++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", i ? (choices[i + 1] ? ", " : " or ") : "", choices[i]);
    }
    return sf_fail(SF_ERR_INVALID, "expects %s", list);
}

/* The failure s whose message says what the value expects, extended by ", or WORD". */
static sf_status or_word(sf_status s, const char *word)
{
    char msg[300];
    snprintf(msg, sizeof msg, "%s", sf_last_error());
    return sf_fail(s, "%s, or %s", msg, word);
}

sf_status sf_key_parse(const sf_key_spec *k, const char *text, void *base)
{
    char *field = (char *)base + k->offset;
    switch (k->type) {
    case SF_V_INT32: {
        long long v = 0;
        if (!k->zero_word || strcmp(text, k->zero_word) != 0) {
            sf_status s = parse_integer(k, text, &v);
            if (s != SF_OK) return k->zero_word ? or_word(s, k->zero_word) : s;
        }
        int32_t w = (int32_t)v;
        memcpy(field, &w, sizeof w);
        return SF_OK;
    }
    case SF_V_INT64: {
        long long v;
        SF_TRY(parse_integer(k, text, &v));
        int64_t w = v;
        memcpy(field, &w, sizeof w);
        return SF_OK;
    }
    case SF_V_U64: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (end == text || *end || errno == ERANGE || text[0] == '-' || text[0] == '+')
            return sf_fail(SF_ERR_INVALID, "expects an integer in [0, 2^64)");
        uint64_t w = v;
        memcpy(field, &w, sizeof w);
        return SF_OK;
    }
    case SF_V_FLOAT: return parse_float(k, text, (float *)field);
    case SF_V_BOOL: {
        int32_t v;
        if (!parse_bool(text, &v)) return sf_fail(SF_ERR_INVALID, "expects on or off");
        memcpy(field, &v, sizeof v);
        return SF_OK;
    }
    case SF_V_AUTO_BOOL: {
        int32_t v = -1;
        if (strcmp(text, "auto") != 0 && !parse_bool(text, &v))
            return sf_fail(SF_ERR_INVALID, "expects on, off or auto");
        memcpy(field, &v, sizeof v);
        return SF_OK;
    }
    case SF_V_ENUM:
        for (int i = 0; k->choices[i]; i++)
            if (strcmp(text, k->choices[i]) == 0) {
                int v = i;
                memcpy(field, &v, sizeof v);
                return SF_OK;
            }
        return choices_error(k->choices);
    case SF_V_ENUM_OR_DEFAULT: {
        int32_t v = -1;
        for (int i = 0; k->choices[i] && v < 0; i++)
            if (strcmp(text, k->choices[i]) == 0) v = i;
        if (v < 0 && strcmp(text, "default") != 0) return or_word(choices_error(k->choices), "default");
        memcpy(field, &v, sizeof v);
        return SF_OK;
    }
    case SF_V_STRING:
        /* What the writer emits must read back the same: no control characters or edge blanks. */
        for (const char *q = text; *q; q++)
            if ((unsigned char)*q < 0x20) return sf_fail(SF_ERR_INVALID, "contains a control character");
        if (text[0] == ' ' || (text[0] && text[strlen(text) - 1] == ' '))
            return sf_fail(SF_ERR_INVALID, "starts or ends with a blank");
        /* libinih reads lines of at most 198 characters (INI_MAX_LINE), and the written config must read back. */
        if (strlen(text) > SF_CONFIG_STRING_MAX)
            return sf_fail(SF_ERR_INVALID, "is longer than %d characters (a config line holds at most 198; use a "
                           "shorter path or a symbolic link)", SF_CONFIG_STRING_MAX);
        memcpy(field, text, strlen(text) + 1);
        return SF_OK;
    case SF_V_DEVICE: return sf_device_parse(text, (sf_device *)field);
    case SF_V_DATASET: return sf_dataset_kind_parse(text, (sf_dataset_kind *)field);
    case SF_V_CHANNELS: {
        /* NaN marks "no value": all NaN is "default", and a list is followed by NaN. */
        float v[SF_DATASET_MAX_CHANNELS];
        for (int i = 0; i < SF_DATASET_MAX_CHANNELS; i++) v[i] = NAN;
        if (strcmp(text, "default") != 0) {
            char buf[256];
            if (strlen(text) >= sizeof buf) return sf_fail(SF_ERR_INVALID, "is too long");
            strcpy(buf, text);
            int n = 0;
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                while (*tok == ' ' || *tok == '\t') tok++;
                for (char *e = tok + strlen(tok); e > tok && (e[-1] == ' ' || e[-1] == '\t');) *--e = 0;
                if (n == SF_DATASET_MAX_CHANNELS)
                    return sf_fail(SF_ERR_INVALID, "has more than %d values", SF_DATASET_MAX_CHANNELS);
                sf_status s = parse_float(k, tok, &v[n]);
                if (s != SF_OK) return sf_fail_context(s, "value %d ", n + 1);
                n++;
            }
            if (n == 0) return sf_fail(SF_ERR_INVALID, "expects comma-separated numbers or default");
        }
        memcpy(field, v, sizeof v);
        return SF_OK;
    }
    case SF_V_SHAPE: {
        /* "N" or "C, H, W"; two values would leave unclear which side is missing. */
        int32_t v[3] = {1, 1, 1};
        const char *q = text;
        int n = 0;
        for (;;) {
            char *end;
            errno = 0;
            long long d = strtoll(q, &end, 10);
            if (end == q || errno == ERANGE || !in_range(k, (double)d)) break;
            v[n++] = (int32_t)d;
            for (q = end; *q == ' ' || *q == '\t'; q++) {}
            if (*q != ',' || n == 3) break;
            q++;
        }
        if (*q || (n != 1 && n != 3))
            return sf_fail(SF_ERR_INVALID, "expects N or C, H, W (integers in [%g, %g])", k->min, k->max);
        memcpy(field, v, sizeof v);
        return SF_OK;
    }
    case SF_V_OPT_FLOAT: {
        int32_t on = strcmp(text, "off") != 0;
        float v = 0;
        if (on) {
            sf_status s = parse_float(k, text, &v);
            if (s != SF_OK) return sf_fail(SF_ERR_INVALID, "expects a number or off");
        }
        memcpy(field, &v, sizeof v);
        memcpy((char *)base + k->flag_offset, &on, sizeof on);
        return SF_OK;
    }
    }
    return sf_fail(SF_ERR_INVALID, "has an unknown type");
}

int sf_key_format(const sf_key_spec *k, const void *base, char *out, size_t cap)
{
    const char *field = (const char *)base + k->offset;
    switch (k->type) {
    case SF_V_INT32: {
        int32_t v;
        memcpy(&v, field, sizeof v);
        if (v == 0 && k->zero_word) return snprintf(out, cap, "%s", k->zero_word);
        return snprintf(out, cap, "%d", v);
    }
    case SF_V_INT64: {
        int64_t v;
        memcpy(&v, field, sizeof v);
        return snprintf(out, cap, "%lld", (long long)v);
    }
    case SF_V_U64: {
        uint64_t v;
        memcpy(&v, field, sizeof v);
        return snprintf(out, cap, "%llu", (unsigned long long)v);
    }
    case SF_V_FLOAT: {
        float v;
        memcpy(&v, field, sizeof v);
        return format_float(v, out, cap);
    }
    case SF_V_BOOL:
    case SF_V_AUTO_BOOL: {
        int32_t v;
        memcpy(&v, field, sizeof v);
        return snprintf(out, cap, "%s", v < 0 ? "auto" : v ? "on" : "off");
    }
    case SF_V_ENUM: {
        int v;
        memcpy(&v, field, sizeof v);
        int n = 0;
        while (k->choices[n]) n++;
        return snprintf(out, cap, "%s", v >= 0 && v < n ? k->choices[v] : "?");
    }
    case SF_V_ENUM_OR_DEFAULT: {
        int32_t v;
        memcpy(&v, field, sizeof v);
        int n = 0;
        while (k->choices[n]) n++;
        return snprintf(out, cap, "%s", v >= 0 && v < n ? k->choices[v] : "default");
    }
    case SF_V_STRING: return snprintf(out, cap, "%s", field);
    case SF_V_DEVICE: {
        sf_device d;
        memcpy(&d, field, sizeof d);
        return d.kind == SF_DEVICE_CPU ? snprintf(out, cap, "cpu") : snprintf(out, cap, "cuda:%d", d.index);
    }
    case SF_V_DATASET: {
        sf_dataset_kind d;
        memcpy(&d, field, sizeof d);
        return snprintf(out, cap, "%s", sf_dataset_kind_name(d));
    }
    case SF_V_CHANNELS: {
        float v[SF_DATASET_MAX_CHANNELS];
        memcpy(v, field, sizeof v);
        if (isnan(v[0])) return snprintf(out, cap, "default");
        int n = 0;
        for (int i = 0; i < SF_DATASET_MAX_CHANNELS && !isnan(v[i]) && (size_t)n < cap; i++) {
            if (i) n += snprintf(out + n, cap - (size_t)n, ", ");
            if ((size_t)n < cap) n += format_float(v[i], out + n, cap - (size_t)n);
        }
        return n;
    }
    case SF_V_SHAPE: {
        int32_t v[3];
        memcpy(v, field, sizeof v);
        if (v[1] == 1 && v[2] == 1) return snprintf(out, cap, "%d", v[0]);
        return snprintf(out, cap, "%d, %d, %d", v[0], v[1], v[2]);
    }
    case SF_V_OPT_FLOAT: {
        int32_t on;
        float v;
        memcpy(&on, (const char *)base + k->flag_offset, sizeof on);
        memcpy(&v, field, sizeof v);
        return on ? format_float(v, out, cap) : snprintf(out, cap, "off");
    }
    }
    return snprintf(out, cap, "?");
}
