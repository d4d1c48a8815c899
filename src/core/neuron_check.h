/* neuron_check.h — what every backend checks before a neuron op of a model that needs more than x (internal to the
 * library): a PLIF's w in the call's sf_lif_state. */
#ifndef SF_CORE_NEURON_CHECK_H
#define SF_CORE_NEURON_CHECK_H

#include "spikefuse.h"

/* A PLIF's w must be given: one (w_channels = 1) unless p->per_channel, whose channels of w_hw neurons divide the N
 * of a step and, fused after a BN (bn_c > 0), are its channels. Other models: SF_OK. `op` names the op. */
sf_status sf_plif_state_check(const char *op, const sf_lif_params *p, int64_t N, const sf_lif_state *st, int32_t bn_c,
                              int64_t bn_hw);

#endif
