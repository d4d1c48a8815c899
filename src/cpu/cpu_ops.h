/* cpu_ops.h — the prototypes of the CPU's ops: sf_cpu_op_<op> for every op that core/backend_ops.h lists as one
 * every backend implements, with exactly the signature of the table's field <op> (backend.c puts them into the
 * table). The CPU has none of the optional ops. */
#ifndef SF_CPU_OPS_H
#define SF_CPU_OPS_H

#include "core/backend.h"

#define SF_OP(ret, op, params) ret sf_cpu_op_##op params;
#define SF_OPT(ret, op, params)
#include "core/backend_ops.h"

#endif
