/* config_nir.h — networks as NIR graphs (io/nir.h) and back: a config's network with its parameters becomes a NIR
 * graph (export), and a NIR graph becomes a config text with the parameters of its layers (import). The mapping,
 * discrete LIF included, is written down in docs/nir.md. */
#ifndef SF_CONFIG_CONFIG_NIR_H
#define SF_CONFIG_CONFIG_NIR_H

#include "config/config.h"
#include "io/nir.h"
#include "spikefuse.h"

#include <stdint.h>

/* The simulation time step NIR's continuous-time neurons are discretised with when a file does not say: the value
 * snnTorch's and SpikingJelly's NIR exchange use. */
#define SF_NIR_DEFAULT_DT 1e-4
/* The format version written into NIR files: the `nir` package release whose layout they follow. */
#define SF_NIR_VERSION "1.0.8"

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

/* ---------------------------------------------------------------- export (nir_export.c) */

/* The graph of cfg's network, whose parameters are those of `net` (built from cfg; BN running statistics are
 * read from it too): Input, Affine/Linear, Conv2d, AvgPool2d, Flatten, LIF/IF, the leaky readout as an LI node,
 * Output, with every node's shapes. Batch norm is folded into the conv or linear layer before it (eval mode),
 * dropout (an identity at eval) and residual [add] layers leave no node (NIR sums a node's inputs). What NIR cannot
 * express is refused with an error naming the layer: max-pooling, a soft reset, a batch norm with nothing to fold
 * into. dt (> 0) is written into the graph's metadata. */
sf_status sf_config_to_nir(const sf_config *cfg, const sf_net *net, double dt, sf_nir_graph **out);

/* ---------------------------------------------------------------- import (nir_import.c) */

typedef struct sf_named_tensor {
    char name[64]; /* as sf_net_tensor_info names it: "3.weight" */
    int64_t numel;
    float *data;
} sf_named_tensor;

typedef struct sf_tensor_list {
    sf_named_tensor *items;
    int32_t count;
} sf_tensor_list;

void sf_tensor_list_free(sf_tensor_list *l);
/* Writes every tensor of the list into the net's parameters (SF_ROLE_PARAM) by name; every parameter of the net
 * must be in the list with its size. The net must be compiled. */
sf_status sf_tensor_list_apply(const sf_tensor_list *l, sf_net *net);

typedef struct sf_nir_import_options {
    const char *source;  /* the file's name, for messages and the config's opening comment */
    double dt;           /* <= 0: the graph's metadata "dt", else SF_NIR_DEFAULT_DT */
    int32_t dataset;     /* an sf_dataset_kind, or -1: the first whose input has the graph's input size */
    const char *init;    /* written as [train] init (the checkpoint holding the parameters), or NULL */
} sf_nir_import_options;

/* A config (INI text, malloc'd) whose network computes what the graph computes, and its parameters. The graph must
 * be a feed-forward graph of Input, Affine, Linear, Conv2d, AvgPool2d, Flatten, LIF, IF, Scale (ones) and an LI
 * node just before Output (the leaky readout); a node with several inputs becomes [add] layers. Anything else is
 * refused with SF_ERR_UNSUPPORTED naming the node. The text parses and builds (checked here). */
sf_status sf_config_from_nir(const sf_nir_graph *g, const sf_nir_import_options *o, char **config_text,
                             sf_tensor_list *params);

#endif
