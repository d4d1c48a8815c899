/* mpi_none.c — the MPI layer of a build without MPI (libopenmpi-dev was missing): a world of one process; a job
 * that a launcher started with several processes is refused with what to install. */
#include "distributed/dist_internal.h"

#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>

bool sf_mpi_launched(void)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    if (!n) n = getenv("SLURM_NTASKS");
    return n && atoi(n) > 1;
}

int32_t sf_mpi_world_size(void)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    return n && atoi(n) > 0 ? atoi(n) : 1;
}

sf_status sf_mpi_start(sf_dist *d)
{
    (void)d;
    return sf_fail(SF_ERR_UNSUPPORTED, "this process was started as one of several, but this build of spikefuse has no "
                                       "MPI: install libopenmpi-dev and openmpi-bin and rebuild");
}

void sf_mpi_stop(sf_dist *d) { (void)d; }

static sf_status alone(void) { return sf_fail(SF_ERR_UNSUPPORTED, "no MPI in this build: a world of one process"); }

sf_status sf_mpi_allgather_u64(sf_dist *d, uint64_t v, uint64_t *all)
{
    (void)d, (void)v, (void)all;
    return alone();
}

sf_status sf_mpi_sum_f64(sf_dist *d, sf_group g, double *v, int32_t n)
{
    (void)d, (void)g, (void)v, (void)n;
    return alone();
}

sf_status sf_mpi_bcast(sf_dist *d, void *buf, size_t bytes)
{
    (void)d, (void)buf, (void)bytes;
    return alone();
}

sf_status sf_mpi_barrier(sf_dist *d)
{
    (void)d;
    return SF_OK;
}

void sf_mpi_abort(sf_dist *d, int code) { (void)d, (void)code; }

void sf_mpi_describe(char *buf, size_t cap) { snprintf(buf, cap, "MPI: not built in (install libopenmpi-dev)"); }

sf_status sf_mpi_transport(sf_dist *d, const sf_transport **tr, void **ctx)
{
    (void)d, (void)tr, (void)ctx;
    return alone();
}
