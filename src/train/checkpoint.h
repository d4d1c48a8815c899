/* checkpoint.h — training checkpoints as safetensors files that safetensors.torch.load_file reads.
 *
 * Tensors: the net's parameters under the names sf_net_tensor_info gives ("0.weight", ...), its buffers (BN running
 * statistics) and, when an optimizer is set, its state ("0.weight.adam_m", ...). __metadata__ (string values):
 *   format            "spikefuse-checkpoint"     format_version   SF_CHECKPOINT_VERSION
 *   spikefuse_version the library that wrote it  config           the resolved config (INI text)
 *   epoch             epochs completed            step             optimizer steps completed
 *   optimizer_steps, rng_seed, rng_counter,       the net's sf_net_state (decimal)
 *   loss_scale, loss_scale_steps
 *   loader_state      the data loader's position (opaque text)
 *   best_metric       best test accuracy so far (for best.safetensors on resume)
 *   best_step         the step of the checkpoint that best.safetensors holds (-1: none yet)
 *   crc32             the CRC-32 of every tensor (io/safetensors.h), verified by every load
 * Files are written atomically (temporary file, fsync, rename, fsync of the directory). Loading refuses a damaged
 * tensor (CRC-32) and a non-finite value, naming the tensor. */
#ifndef SF_TRAIN_CHECKPOINT_H
#define SF_TRAIN_CHECKPOINT_H

#include "io/safetensors.h"
#include "spikefuse.h"

#include <stdint.h>

#define SF_CHECKPOINT_VERSION 1

typedef struct sf_checkpoint_info {
    const char *config;       /* resolved config text */
    int64_t epoch;            /* epochs completed */
    int64_t step;             /* optimizer steps completed */
    const char *loader_state; /* may be NULL */
    double best_metric;       /* best test accuracy so far (-1: none yet) */
    int64_t best_step;        /* step of the best checkpoint (-1: none yet, or not recorded) */
} sf_checkpoint_info;

/* Writes the net (parameters, buffers, optimizer state, sf_net_state) and `info` to `path`. */
sf_status sf_checkpoint_save(const sf_net *net, const sf_checkpoint_info *info, const char *path);

/* Opens a checkpoint and checks its format and version; the strings of *info point into *st. */
sf_status sf_checkpoint_open(const char *path, sf_safetensors **st, sf_checkpoint_info *info);

/* Copies the tensors of `st` into `net`, whose layers must match (names and sizes are checked, and every value must
 * be finite). With
 * with_training_state, the optimizer state and sf_net_state are restored too (the optimizer must be set). */
sf_status sf_checkpoint_restore(const sf_safetensors *st, sf_net *net, int with_training_state);

#endif
