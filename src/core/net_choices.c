/* net_choices.c — the convolution choices a net's backend made by timing, as text to keep and give back
 * (spikefuse.h: sf_net_conv_choices, sf_net_set_conv_choice; the CUDA backend's conv_choices, conv_set_choice). */
#include "core/error.h"
#include "core/net_internal.h"

sf_status sf_net_conv_choices(const sf_net *net, char *out, size_t cap, size_t *len)
{
    if (!net || !len || (cap && !out)) return sf_fail(SF_ERR_INVALID, "conv choices: net, len or out is NULL");
    sf_backend *be = net->be;
    *len = be->conv_choices ? be->conv_choices(be, out, cap) : 0;
    if (cap && *len == 0) out[0] = 0;
    return SF_OK;
}

sf_status sf_net_set_conv_choice(sf_net *net, const char *line)
{
    if (!net || !line) return sf_fail(SF_ERR_INVALID, "set conv choice: net or line is NULL");
    sf_backend *be = net->be;
    if (!be->conv_set_choice)
        return sf_fail(SF_ERR_UNSUPPORTED, "set conv choice: the %s backend times no convolution choices", be->name);
    return be->conv_set_choice(be, line);
}
