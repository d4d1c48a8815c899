/* flatten.c — [C, H, W] seen as [C·H·W, 1, 1]: the output is its input's storage under another shape, so the layer
 * runs nothing (SF_KIND_ALIAS); the spikes it passes stay spikes. */
#include "core/layer.h"

static sf_status flatten_shape(sf_net *net, sf_net_layer *l, int32_t index, const int32_t in[3], int32_t out[3])
{
    out[0] = in[0] * in[1] * in[2];
    out[1] = out[2] = 1;
    return SF_OK;
}

const sf_layer_ops sf_kind_flatten = {
    .name = "flatten",
    .inputs = 1,
    .flags = SF_KIND_ALIAS | SF_KIND_PASSES_SPIKES | SF_KIND_READS_TOKENS,
    .shape = flatten_shape,
};
