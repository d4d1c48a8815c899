/* lif_math_f64.h — lif_math.h's equations in double (sf_lif_coeffs_f64, sf_lif_step_f64, ...: each name with _f64),
 * for the CPU's float64 calls (a reference for float64 users and gradcheck): the same source as the float kernels',
 * with libm's exp and plain products and divisions. */
#ifndef SF_CORE_LIF_MATH_F64_H
#define SF_CORE_LIF_MATH_F64_H

#include "core/lif_math.h"

#define SF_LM_T double
#define SF_LM(name) name##_f64
#define SF_LM_K(c) c
#define SF_LM_EXP exp
#define SF_LM_SURROGATE_EXP exp
#define SF_LM_ABS fabs
#define SF_LM_FMA(a, b, c) ((a) * (b) + (c))
#define SF_LM_DIV(a, b) ((a) / (b))
#include "core/lif_math_typed.h"

#endif
