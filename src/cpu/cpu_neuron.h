/* cpu_neuron.h — the conventions of the CPU neuron ops (time-fused LIF, the recurrent LIF, batch norm and fused
 * BN→LIF; sf_cpu_op_<op> of cpu_ops.h).
 *
 * Threading: OpenMP over blocks of contiguous neurons (or channels), the whole time loop inside one block; every
 * reduction uses a fixed chunking and double accumulation, so results are bitwise identical for any thread count.
 *
 * BN: gamma/beta may be NULL (1 and 0: no affine); dgamma/dbeta may be NULL (not wanted). x̂ uses the float
 * invstd = 1/sqrtf(var + eps) and the statistics are reduced in double.
 *
 * Eval mode of BN→LIF: the signatures carry no `training` flag. In evaluation the engine passes the running
 * statistics as mean/var to bn_lif_forward and never calls the backward, so bn_lif_backward always treats
 * mean/var as the batch statistics of x (dx includes the paths through mean and var, as PyTorch's training mode). */
#ifndef SF_CPU_NEURON_H
#define SF_CPU_NEURON_H

#include "cpu/cpu_ops.h"

#endif
