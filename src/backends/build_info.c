/* build_info.c — a one-line description of what this build really has, asked of each backend. */
#include "spikefuse.h"

#include "cpu/cpu_backend.h"
#ifdef SF_HAVE_CUDA
#include "backends/backends.h"
#include "cuda/cuda_backend.h"
#endif

#include <stdio.h>
#include <string.h>

const char *sf_build_info(void)
{
    static _Thread_local char info[768];
    char cpu[384], cuda[256] = "CUDA: not built";
    sf_cpu_describe(cpu, sizeof cpu);
#ifdef SF_HAVE_CUDA
    sf_cuda_describe(cuda, sizeof cuda);
    const size_t n = strlen(cuda);
    snprintf(cuda + n, sizeof cuda - n, ", kernels for %s", sf_cuda_archs());
#endif
    snprintf(info, sizeof info, "spikefuse %s; %s; %s", sf_version(), cpu, cuda);
    return info;
}
