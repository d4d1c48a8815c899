/* backend.c — the CPU backend: host memory (64-byte aligned, so vector loads never straddle cache lines) and
 * the op table filled with the CPU's ops (cpu_ops.h). */
#include "cpu/cpu_backend.h"
#include "cpu/cpu_ops.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

sf_status sf_cpu_op_alloc(sf_backend *be, size_t bytes, void **out)
{
    *out = NULL;
    /* Round up to whole cache lines; zero bytes still gives a distinct, freeable pointer. */
    size_t rounded = bytes ? (bytes + 63) & ~(size_t)63 : 64;
    if (rounded < bytes || posix_memalign(out, 64, rounded) != 0) {
        *out = NULL;
        return sf_fail(SF_ERR_NOMEM, "CPU backend: cannot allocate %zu bytes of host memory", bytes);
    }
    return SF_OK;
}

void sf_cpu_op_release(sf_backend *be, void *p) { free(p); }

sf_status sf_cpu_op_copy(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    if (bytes) memmove(dst, src, bytes);
    return SF_OK;
}

/* Host and backend memory are the same on the CPU. */
sf_status sf_cpu_op_copy_from_host(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    return sf_cpu_op_copy(be, dst, src, bytes);
}

sf_status sf_cpu_op_copy_to_host(sf_backend *be, void *dst, const void *src, size_t bytes)
{
    return sf_cpu_op_copy(be, dst, src, bytes);
}

sf_status sf_cpu_op_zero(sf_backend *be, void *dst, size_t bytes)
{
    if (bytes) memset(dst, 0, bytes);
    return SF_OK;
}

sf_status sf_cpu_op_sync(sf_backend *be) { return SF_OK; } /* every CPU op has finished when it returns */

void sf_cpu_op_destroy(sf_backend *be) { free(be); }

sf_status sf_cpu_backend_create(sf_backend **out)
{
    *out = NULL;
    sf_backend *be = calloc(1, sizeof *be);
    if (!be) return sf_fail(SF_ERR_NOMEM, "CPU backend: cannot allocate the backend object");
    be->name = "cpu";
    be->host_memory = true;
#define SF_OP(ret, op, params) be->op = sf_cpu_op_##op;
#define SF_OPT(ret, op, params)
#include "core/backend_ops.h"
    *out = be;
    return SF_OK;
}
