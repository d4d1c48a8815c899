/* checkpoint.h — training checkpoints as safetensors files: the net's parameters under sf_net_tensor_info's names,
 * its buffers and, with an optimizer set, its state ("0.weight.adam_m", ...). __metadata__ (string values):
 *   format            "spikefuse-checkpoint"     format_version   SF_CHECKPOINT_VERSION
 *   spikefuse_version the library that wrote it  config           the resolved config (INI text)
 *   epoch             epochs completed            step             optimizer steps completed
 *   optimizer_steps, rng_seed, rng_counter,       the net's sf_net_state (decimal)
 *   loss_scale, loss_scale_steps
 *   loader_state      the data loader's position (opaque text)
 *   best_metric       best test accuracy so far (for best.safetensors on resume)
 *   best_step         the step of the checkpoint that best.safetensors holds (-1: none yet)
 *   sparse_state      device kind and precision, then each auto layer's crossovers and last densities
 *                     (sf_net_set_layer_sparsity); optional (without it a resume measures again)
 *   crc32             the CRC-32 of every tensor (io/safetensors.h)
 * Written atomically; loading refuses a damaged tensor (CRC-32) or a non-finite value, naming the tensor. */
#ifndef SF_TRAIN_CHECKPOINT_H
#define SF_TRAIN_CHECKPOINT_H

#include "io/safetensors.h"
#include "spikefuse_train.h"

#include <stdint.h>

#define SF_CHECKPOINT_VERSION 1

/* The checkpoint calls (sf_checkpoint_info, save, open, restore) are public: include/spikefuse_train.h. */

#endif
