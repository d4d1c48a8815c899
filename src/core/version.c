/* version.c — the library version and a description of what this build contains. */
#include "spikefuse.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>

#define SF_STR2(x) #x
#define SF_STR(x) SF_STR2(x)

const char *sf_version(void)
{
    return SF_STR(SF_VERSION_MAJOR) "." SF_STR(SF_VERSION_MINOR) "." SF_STR(SF_VERSION_PATCH);
}

const char *sf_build_info(void)
{
    static _Thread_local char info[512];
    snprintf(info, sizeof info, "spikefuse %s; OpenMP %d thread(s); BLAS: %s; CUDA: %s (%d device(s))", sf_version(),
             omp_get_max_threads(), openblas_get_config(),
#ifdef SF_HAVE_CUDA
             "built in",
#else
             "not built",
#endif
             sf_cuda_device_count());
    return info;
}
