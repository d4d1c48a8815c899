/* cli.h — what the subcommands of the `spikefuse` tool share: exit codes, error reporting and option parsing.
 * Only tools/ may exit the process; subcommands return an exit code to main(). */
#ifndef SF_TOOLS_CLI_H
#define SF_TOOLS_CLI_H

#include "spikefuse.h"
#include "spikefuse_train.h"

#include <stdint.h>

/* Exit codes: one rule for every subcommand, documented in `spikefuse --help` (main.c) and README.md. What the
 * library reports maps through sf_cli_exit_code. */
enum {
    SF_EXIT_OK = 0,
    SF_EXIT_FAILURE = 1,     /* the run failed on this machine: a file, data set, checkpoint, run directory, device
                              * or memory problem (the message says which) */
    SF_EXIT_USAGE = 2,       /* the command line is wrong: unknown subcommand or flag, bad value */
    SF_EXIT_CONFIG = 3,      /* the config is wrong: the file (unreadable or invalid), a --set, the network it
                              * describes, a checkpoint's saved config, or a resume that would change the run */
    SF_EXIT_NUMERIC = 4,     /* a NaN/Inf loss or gradient stopped training */
    SF_EXIT_INTERRUPTED = 130 /* stopped by Ctrl-C (SIGINT) or SIGTERM */
};
/* The last line of every subcommand's --help. */
#define SF_CLI_EXIT_CODES                                                                                              \
    "exit codes (one rule for every command, see spikefuse --help): 0 done, 1 failed, 2 bad command line,\n"         \
    "3 bad config, 4 NaN/Inf stopped training, 130 interrupted.\n"

typedef int (*sf_cli_command)(int argc, char **argv);
int sf_cmd_train(int argc, char **argv);
int sf_cmd_eval(int argc, char **argv);
int sf_cmd_bench(int argc, char **argv);
int sf_cmd_info(int argc, char **argv);
int sf_cmd_plot(int argc, char **argv);
int sf_cmd_export(int argc, char **argv);
int sf_cmd_import(int argc, char **argv);

/* Prints "spikefuse <cmd>: error: <message>" to stderr and returns `code`. */
int sf_cli_error(const char *cmd, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The exit code of a library status: SF_ERR_NUMERIC 4, SF_ERR_INVALID 3 (every value a subcommand hands the
 * library comes from a config: a value it refuses, or a network shape, is the config's), any other failure 1. */
int sf_cli_exit_code(sf_status s);
/* Reports a failed library call with its message and returns sf_cli_exit_code(s). */
int sf_cli_status(const char *cmd, sf_status s);

/* Option scanning: argv[*i] is matched against `name` as "--name VALUE" or "--name=VALUE". Returns 1 and sets
 * *value (advancing *i past a separate value) on a match, 0 if argv[*i] is another option, -1 if the value is
 * missing (an error has been printed). */
int sf_cli_value(const char *cmd, int argc, char **argv, int *i, const char *name, const char **value);
/* Whether argv[*i] is "-h" or "--help". */
int sf_cli_is_help(const char *arg);
/* Parses a whole decimal integer in [lo, hi]; on failure prints what is accepted and returns 0. */
int sf_cli_int(const char *cmd, const char *flag, const char *text, int64_t lo, int64_t hi, int64_t *out);
/* Prints the "unknown option" error naming the accepted ones and returns SF_EXIT_USAGE. */
int sf_cli_unknown(const char *cmd, const char *arg, const char *accepted);

/* Installs SIGINT/SIGTERM handlers after which sf_cli_stop_requested() turns true (a second signal ends the
 * process at once). */
void sf_cli_catch_signals(void);
int sf_cli_stop_requested(void);

/* Parses a positive finite number (a time step); on failure prints what is accepted and returns 0. */
int sf_cli_positive(const char *cmd, const char *flag, const char *text, double *out);
/* The checkpoint file a CHECKPOINT argument names: the file itself, or a run directory's best.safetensors. */
int sf_cli_checkpoint_path(const char *cmd, const char *arg, char *path, size_t cap);

/* Formats a byte count as "12.3 MiB" into buf. */
const char *sf_cli_bytes(double bytes, char *buf, int cap);

/* ---------------------------------------------------------------- configs (cli_config.c) */
#define SF_CLI_MAX_SETS 256

/* Applies "section.key=value" overrides; prints the error and returns SF_EXIT_CONFIG on the first bad one. */
int sf_cli_apply_sets(const char *cmd, sf_config *cfg, char *const *sets, int nsets);
/* Loads a config file and applies the overrides; returns an exit code. */
int sf_cli_load_config(const char *cmd, const char *path, char *const *sets, int nsets, sf_config **out);
/* Sets the device from "cpu", "cuda", "cuda:N" or "auto" (a GPU when one is usable, else the CPU). */
int sf_cli_apply_device(const char *cmd, sf_config *cfg, const char *text);
/* Builds the config's network and compiles it for its timesteps and batch; returns an exit code (sf_cli_status's). */
int sf_cli_build_net(const char *cmd, const sf_config *cfg, sf_net **out);

#endif
