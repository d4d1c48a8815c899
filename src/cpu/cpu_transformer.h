/* cpu_transformer.h — the CPU versions of the spiking transformers' ops (core/transformer.h says what each
 * computes): entries of the op table, whose prototypes sf_cpu_op_<entry> cpu_ops.h declares (layernorm.c,
 * attention.c, token_ops.c). Host memory, OpenMP threads and OpenBLAS; deterministic for any thread count (sums in a
 * fixed order). */
#ifndef SF_CPU_TRANSFORMER_H
#define SF_CPU_TRANSFORMER_H

#include "core/transformer.h"
#include "cpu/cpu_ops.h"

#endif
