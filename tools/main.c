/* main.c — the `spikefuse` command: dispatches to the subcommands and turns their result into the exit code. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    sf_cli_command run;
    const char *summary;
} commands[] = {
    {"train", sf_cmd_train, "train a network from a config file"},
    {"eval", sf_cmd_eval, "test accuracy and per-layer firing rates of a checkpoint"},
    {"bench", sf_cmd_bench, "time training steps of a config: samples/s, phases, per-layer time, memory"},
    {"plot", sf_cmd_plot, "figures of a run (curves, spike rasters, membrane traces) and its report page"},
    {"export", sf_cmd_export, "write a checkpoint's network as a NIR graph (for hardware and other simulators)"},
    {"import", sf_cmd_import, "a config and checkpoint from a NIR graph, to train or evaluate it"},
    {"info", sf_cmd_info, "version and build features (OpenMP, BLAS, CUDA devices)"},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: spikefuse <command> [options]\n\n"
               "Trains spiking neural networks with BPTT and surrogate gradients.\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-6s  %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`spikefuse <command> --help` describes each.\n\n"
               "exit codes (the same for every command):\n"
               "  0    success\n"
               "  1    the run failed on this machine: a file, data set, checkpoint, run directory, device or\n"
               "       memory problem, a data set without samples (the message says which)\n"
               "  2    bad command line (unknown command or option, bad value)\n"
               "  3    the config is wrong: the file cannot be read or is invalid, a --set, the network it\n"
               "       describes, the config saved in a checkpoint, a resume that would change the run, or a\n"
               "       run directory's config.ini edited into another run (the message names file:line where\n"
               "       there is one)\n"
               "  4    training stopped on a NaN/Inf loss or gradient (the last good checkpoint is kept)\n"
               "  130  interrupted by Ctrl-C or SIGTERM\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return SF_EXIT_USAGE;
    }
    if (sf_cli_is_help(argv[1]) || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return SF_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("spikefuse %s\n", sf_version());
        return SF_EXIT_OK;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* Line-buffer stdout so results interleave sensibly with progress on stderr when piped. */
            setvbuf(stdout, NULL, _IOLBF, 0);
            exit(commands[i].run(argc - 1, argv + 1));
        }
    sf_cli_error(NULL, 0,
                 "unknown command '%s' (commands: train, eval, bench, plot, export, import, info; see spikefuse --help)",
                 argv[1]);
    return SF_EXIT_USAGE;
}
