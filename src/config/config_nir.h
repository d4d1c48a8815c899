/* config_nir.h — a config's network with its parameters as a NIR graph (io/nir.h) and back, as docs/nir.md maps
 * them. */
#ifndef SF_CONFIG_CONFIG_NIR_H
#define SF_CONFIG_CONFIG_NIR_H

#include "config/config.h"
#include "io/nir.h"
#include "spikefuse_train.h"

#include <stdint.h>

/* ---------------------------------------------------------------- the neuron mapping (nir_lif.c) */

/* A NIR LIF or IF node's parameters, uniform over its neurons. */
typedef struct sf_nir_neuron {
    int is_if;         /* 1: IF (no leak; tau and v_leak unused) */
    double tau, r, v_leak, v_threshold, v_reset;
} sf_nir_neuron;

/* spikefuse's discrete LIF as NIR's continuous one, discretised with time step dt (> 0). A soft reset has no NIR
 * form: SF_ERR_UNSUPPORTED. */
sf_status sf_lif_to_nir(const sf_lif_params *p, double dt, sf_nir_neuron *out);
/* The other direction is public: sf_lif_params_from_nir (include/spikefuse.h). */

/* Export (nir_export.c: sf_config_to_nir) and import (nir_import.c: sf_config_from_nir, the tensor lists) are
 * public: include/spikefuse_train.h. */

#endif
