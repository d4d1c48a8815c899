/* layer_registry.c — the layer kinds of the public sf_layer_kind and the files that implement them (core/layers/):
 * the one place outside those files that names a kind. A new kind is one line here. */
#include "core/layer.h"

#define SF_LAYER_KINDS(X)                                                                                              \
    X(SF_LAYER_LINEAR, linear)                                                                                         \
    X(SF_LAYER_CONV2D, conv2d)                                                                                         \
    X(SF_LAYER_AVGPOOL2D, avgpool2d)                                                                                   \
    X(SF_LAYER_MAXPOOL2D, maxpool2d)                                                                                   \
    X(SF_LAYER_FLATTEN, flatten)                                                                                       \
    X(SF_LAYER_DROPOUT, dropout)                                                                                       \
    X(SF_LAYER_BATCHNORM, batchnorm)                                                                                   \
    X(SF_LAYER_LIF, lif)                                                                                               \
    X(SF_LAYER_ADD, add)                                                                                               \
    X(SF_LAYER_RLIF, rlif)                                                                                             \
    X(SF_LAYER_TOKENS, tokens)                                                                                         \
    X(SF_LAYER_LAYERNORM, layernorm)                                                                                   \
    X(SF_LAYER_SSA, ssa)                                                                                               \
    X(SF_LAYER_SDSA, sdsa)                                                                                             \
    X(SF_LAYER_TOKEN_MEAN, token_mean)

/* each kind's table, sf_kind_<name>, defined in core/layers/<file>.c */
#define SF_DECLARE_KIND(kind, name) extern const sf_layer_ops sf_kind_##name;
SF_LAYER_KINDS(SF_DECLARE_KIND)

#define SF_KIND_ENTRY(kind, name) [kind] = &sf_kind_##name,
static const sf_layer_ops *const registry[] = {SF_LAYER_KINDS(SF_KIND_ENTRY)};

const sf_layer_ops *sf_layer_ops_of(sf_layer_kind kind)
{
    return (unsigned)kind < sizeof registry / sizeof registry[0] ? registry[kind] : NULL;
}

const char *sf_layer_kind_name(sf_layer_kind kind)
{
    const sf_layer_ops *ops = sf_layer_ops_of(kind);
    return ops ? ops->name : "?";
}
