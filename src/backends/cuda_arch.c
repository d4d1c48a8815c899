/* cuda_arch.c — whether this build has kernels a CUDA device can run: the architectures it was compiled for (CMake's
 * CMAKE_CUDA_ARCHITECTURES, handed over as SF_CUDA_ARCHS) against the device's compute capability, so that a device
 * without them is refused before any work, with the command that builds for it, instead of failing at its first
 * kernel launch. */
#include "backends/backends.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>
#ifdef SF_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdio.h>
#endif

int sf_cuda_archs_run_on(const char *archs, int cc)
{
    int read_all = 1, runs = 0;
    for (const char *p = archs; *p;) {
        char *end;
        const long nn = strtol(p, &end, 10);
        if (end == p || nn <= 0) read_all = 0;
        const int only = *end == 'a';
        if (*end == 'a' || *end == 'f') end++;
        const int real = strncmp(end, "-real", 5) == 0, virtual = strncmp(end, "-virtual", 8) == 0;
        if (only ? cc == nn : (!virtual && nn / 10 == cc / 10 && cc >= nn) || (!real && cc >= nn)) runs = 1;
        const char *comma = strchr(end, ',');
        p = comma ? comma + 1 : end + strlen(end);
    }
    return runs || !read_all || !*archs;
}

#ifdef SF_HAVE_CUDA
#ifndef SF_CUDA_ARCHS
#define SF_CUDA_ARCHS ""
#endif

/* Per device: 0 not asked yet, 1 runnable, 2 not. */
#define MAX_DEVICES 64
static atomic_int known[MAX_DEVICES];

sf_status sf_cuda_arch_check(int32_t device)
{
    if (device >= 0 && device < MAX_DEVICES && atomic_load(&known[device]) == 1) return SF_OK;
    int major = 0, minor = 0;
    /* a device the runtime cannot query is the backend's to report when it opens it */
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        cudaGetLastError();
        return SF_OK;
    }
    const int cc = 10 * major + minor, ok = sf_cuda_archs_run_on(SF_CUDA_ARCHS, cc);
    if (device >= 0 && device < MAX_DEVICES) atomic_store(&known[device], ok ? 1 : 2);
    if (ok) return SF_OK;
    char name[256] = "?";
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) snprintf(name, sizeof name, "%s", prop.name);
    return sf_fail(SF_ERR_UNSUPPORTED,
                   "CUDA device %d (%s, compute capability %d.%d) cannot run this build of spikefuse: its kernels are "
                   "compiled for %s (CMAKE_CUDA_ARCHITECTURES). Build for this GPU: cmake -S . -B build "
                   "-DCMAKE_CUDA_ARCHITECTURES=%d && cmake --build build (or =native on the machine that has it), "
                   "or use --device cpu",
                   (int)device, name, major, minor, SF_CUDA_ARCHS, cc);
}

sf_status sf_cuda_arch_check_current(void)
{
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        cudaGetLastError();
        return SF_OK;
    }
    return sf_cuda_arch_check(device);
}

const char *sf_cuda_archs(void) { return SF_CUDA_ARCHS; }
#else
sf_status sf_cuda_arch_check(int32_t device)
{
    (void)device;
    return sf_fail(SF_ERR_UNSUPPORTED, "this build of spikefuse has no CUDA backend");
}
#endif
