/* nccl_none.c — the GPU transport of a build without NCCL (or without CUDA): several processes on GPUs are refused
 * with what to install; one process needs no transport. */
#include "distributed/dist_internal.h"

#include "core/error.h"

#include <stdio.h>

sf_status sf_nccl_transport(sf_dist *d, sf_net *net, const sf_transport **tr, void **ctx)
{
    (void)d, (void)net, (void)tr, (void)ctx;
    return sf_fail(SF_ERR_UNSUPPORTED, "training on several GPUs needs NCCL, and this build has none: install NCCL "
                                       "(nccl.h and libnccl, part of the CUDA toolkit here) and rebuild with CUDA");
}

void sf_nccl_describe(char *buf, size_t cap) { snprintf(buf, cap, "NCCL: not built in"); }
