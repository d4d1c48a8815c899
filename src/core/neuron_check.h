/* neuron_check.h — what every backend checks before a neuron op of a model that needs more than x (internal to the
 * library): a PLIF's w in the call's sf_lif_state. */
#ifndef SF_CORE_NEURON_CHECK_H
#define SF_CORE_NEURON_CHECK_H

#include "spikefuse.h"

/* A PLIF's w is given, one per layer (w_channels = 1) unless p->per_channel, whose channels of w_hw neurons then
 * divide the N neurons of a step and, for a call fused after a BN (bn_c > 0), are the BN's channels. Other models:
 * SF_OK. `op` names the op in the message. */
sf_status sf_plif_state_check(const char *op, const sf_lif_params *p, int64_t N, const sf_lif_state *st, int32_t bn_c,
                              int64_t bn_hw);

#endif
