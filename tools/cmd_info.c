/* cmd_info.c — `spikefuse info`: version and build features, so a bug report can say what was running. */
#include "cli.h"
#include "spikefuse_train.h"

#include <stdio.h>

static const char *info_help =
    "usage: spikefuse info\n\n"
    "Prints the version, what the build has (OpenMP, the BLAS library, CUDA with its cuBLAS and cuDNN versions),\n"
    "the number of OpenMP threads (set OMP_NUM_THREADS to change it), the CUDA devices that are usable now, and\n"
    "what several processes would use (MPI, NCCL).\n\n" SF_CLI_EXIT_CODES;

int sf_cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (sf_cli_is_help(argv[i])) {
            fputs(info_help, stdout);
            return SF_EXIT_OK;
        }
        return sf_cli_error("info", SF_EXIT_USAGE, "unexpected argument '%s' (info takes none besides --help)",
                            argv[i]);
    }
    printf("spikefuse %s\n", sf_version());
    printf("build:          %s\n", sf_build_info());
    printf("OpenMP threads: %d\n", (int)sf_get_num_threads());
    int32_t n = sf_cuda_device_count();
#ifdef SF_HAVE_CUDA
    printf("CUDA devices:   %d%s\n", (int)n, n ? "" : " (the CUDA backend is built in; no GPU is usable now)");
    printf("precision:      fp32 (cpu, cuda), tf32, bf16 and fp16 (cuda): [train] precision=\n");
#else
    printf("CUDA devices:   %d (this build has no CUDA backend)\n", (int)n);
    printf("precision:      fp32 (tf32, bf16 and fp16 need the CUDA backend)\n");
#endif
    char dist[256];
    sf_dist_describe(dist, sizeof dist);
    printf("processes:      %s\n", dist);
    return SF_EXIT_OK;
}
