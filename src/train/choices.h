/* choices.h — the run directory's record of what its network decided when first compiled (auto layers' crossovers;
 * on a GPU the convolutions' algorithms too), written when the run starts and given back on resume, so a continued
 * run keeps its choices and memory plan. The file, "choices": text, one decision per line:
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

/* Gives the compiled `net` the choices recorded at `path`; a missing file changes nothing, one of another device
 * kind or precision is not applied and *note says so (else note[0] = 0); mismatched layers are SF_ERR_FORMAT. */
sf_status sf_choices_apply(const char *path, sf_net *net, char *note, size_t cap);

/* Before compiling: gives `net`'s backend the conv choices at `path` (none from a missing file or another device
 * kind or precision), so its plan is the run's. A line the backend cannot take is an error naming it. */
sf_status sf_choices_apply_conv(const char *path, sf_net *net);

#endif
