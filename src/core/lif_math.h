/* lif_math.h — the neuron equations (LIF, PLIF, IF, ALIF) and surrogate derivatives, one definition shared by the
 * CPU and CUDA kernels (see include/spikefuse.h for the models). Inline, so each backend compiles it into its own
 * loops. The equations themselves are in lif_math_typed.h, written over an element type: this header gives them in
 * float, the kernels' type; lif_math_f64.h gives them in double (names with _f64), for the CPU's float64 calls. */
#ifndef SF_CORE_LIF_MATH_H
#define SF_CORE_LIF_MATH_H

#include "spikefuse.h"

#include <math.h>

/* A backend may supply its own expf by defining SF_EXPF before including this header (the CPU kernels use a
 * branch-free polynomial one so the sigmoid surrogate vectorises). */
#ifndef SF_EXPF
#define SF_EXPF expf
#endif
/* ... and, for the gradients only (no spike depends on them), a fused multiply-add a·b + c and a division a / b by
 * b >= 1 with looser rounding (the CUDA kernels: one FFMA, one approximate reciprocal). The defaults are the plain
 * expressions, so a backend that supplies neither computes exactly what it did before. */
#ifndef SF_FMAF
#define SF_FMAF(a, b, c) ((a) * (b) + (c))
#endif
#ifndef SF_GRAD_DIV
#define SF_GRAD_DIV(a, b) ((a) / (b))
#endif

#ifdef __CUDACC__
#define SF_HD __host__ __device__ __forceinline__
#else
#define SF_HD static inline
#endif

/* Floats of state per neuron carried across calls (sf_lif_state): v, and the ALIF's b. */
SF_HD int sf_neuron_state_count(const sf_lif_params *p) { return p->model == SF_NEURON_ALIF ? 2 : 1; }

/* Does the backward read the neuron's input x also when h was kept (the full memory mode)? The PLIF's dw needs y_t,
 * and the ALIF's θ_t is not kept: a backend may recompute it from x (the CUDA kernels do). */
SF_HD int sf_neuron_backward_reads_x(const sf_lif_params *p)
{
    return p->model == SF_NEURON_PLIF || p->model == SF_NEURON_ALIF;
}

/* The float instantiation: the names without suffix, float literals, the backend's expf, FMA and division. */
#define SF_LM_T float
#define SF_LM(name) name
#define SF_LM_K(c) c##f
#define SF_LM_EXP expf
#define SF_LM_SURROGATE_EXP SF_EXPF
#define SF_LM_ABS fabsf
#define SF_LM_FMA SF_FMAF
#define SF_LM_DIV SF_GRAD_DIV
#include "core/lif_math_typed.h"

#endif
