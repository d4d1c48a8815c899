/* choices.h — the run directory's record of what a run's network decided when it was first compiled (the crossover
 * densities of the layers that choose their path under sparse = auto; on a GPU, where both are timed, the
 * convolutions' algorithms and paths too), written once when the run starts and given back to the network when the
 * run is resumed, so that a continued run keeps the choices, and the memory plan, it started with whatever a new
 * measurement would say.
 *
 * The file, "choices" in the run directory: text, one decision per line:
 *   spikefuse-choices 1          the format and its version
 *   device cpu|cuda              where the decisions were measured, and in which precision
 *   precision fp32|tf32|bf16|fp16
 *   sparse LAYER XFWD XBWD       a layer choosing its path: the densities below which its forward and its
 *                                backward run event-driven (%.9g, read back exactly)
 *   conv ...                     a convolution shape's choices, as the backend wrote them (sf_net_conv_choices:
 *                                CUDA only), which its memory plan follows */
#ifndef SF_TRAIN_CHOICES_H
#define SF_TRAIN_CHOICES_H

#include "spikefuse.h"

#include <stddef.h>

/* Writes the choices of the compiled `net` to `path` (atomically). */
sf_status sf_choices_write(const sf_net *net, const char *path);

/* Gives the compiled `net` the choices recorded at `path`. A missing file (a run from before it was written)
 * changes nothing; one recorded on another device kind or precision (a run continued elsewhere) is not applied and
 * *note says so (note[0] stays 0 otherwise). A file whose layers do not match the network is SF_ERR_FORMAT. */
sf_status sf_choices_apply(const char *path, sf_net *net, char *note, size_t cap);

/* Gives the backend of `net`, before it is compiled, the convolution choices recorded at `path`, so that its plan
 * is the one the run started with (a missing file, or one recorded on another device kind or precision, changes
 * nothing; sf_choices_apply says so). A line the backend cannot take is an error naming it. */
sf_status sf_choices_apply_conv(const char *path, sf_net *net);

#endif
