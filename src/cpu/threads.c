/* threads.c — the CPU backend's thread count and its description for the build info. */
#include "cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>

void sf_cpu_set_threads(int32_t n)
{
    if (n > 0) omp_set_num_threads(n);
}

int32_t sf_cpu_threads(void) { return omp_get_max_threads(); }

void sf_cpu_describe(char *buf, size_t cap)
{
    snprintf(buf, cap, "OpenMP %d thread(s); BLAS: %s", omp_get_max_threads(), openblas_get_config());
}
