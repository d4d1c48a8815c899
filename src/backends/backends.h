/* backends.h — choosing the compute backend for a device: the layer above src/cpu and src/cuda that the public
 * entry points needing a backend (sf_net_create, the low-level LIF calls, the build info) go through, so that
 * src/core knows none of them. */
#ifndef SF_BACKENDS_H
#define SF_BACKENDS_H

#include "core/backend.h"

/* Creates the backend for a device with the given GEMM/conv precision and CUDA options (NULL: defaults);
 * SF_ERR_UNSUPPORTED when it is not built in, not present, or does not offer that precision (the CPU offers fp32
 * only). */
sf_status sf_backend_create(sf_device dev, sf_precision precision, const sf_cuda_options *cuda, sf_backend **out);

/* Whether the low-level calls have kernels for activations stored in `dtype` on `device`: SF_ERR_INVALID for an
 * unknown type, SF_ERR_UNSUPPORTED (naming `op`) where none are built. */
sf_status sf_backend_dtype_check(sf_scalar dtype, sf_device device, const char *op);

/* Whether kernels built for an architecture list ("80-real,86-real,89-real,90": NN machine code and PTX, NN-real code,
 * NN-virtual PTX) run on compute capability cc (major·10 + minor): sm_XY code on X.Z with Z >= Y, compute_XY PTX on
 * any capability >= X.Y (compiled at load), NNa on X.Y alone. Unreadable lists ("all", "all-major") run anywhere. */
int sf_cuda_archs_run_on(const char *archs, int cc);

#ifdef SF_HAVE_CUDA
/* sf_cuda_arch_check (spikefuse.h) for the current device. */
sf_status sf_cuda_arch_check_current(void);
/* The architectures the kernels are compiled for ("80-real,86-real,89-real,90"). */
const char *sf_cuda_archs(void);
#endif

#endif
