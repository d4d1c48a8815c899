/* cli.h — what the subcommands of the `spikefuse` tool share: exit codes, error reporting and option parsing.
 * Only tools/ may exit the process; subcommands return an exit code to main(). */
#ifndef SF_TOOLS_CLI_H
#define SF_TOOLS_CLI_H

#include "spikefuse.h"

#include <stdint.h>

/* Exit codes, documented in `spikefuse --help` and README.md. */
enum {
    SF_EXIT_OK = 0,
    SF_EXIT_FAILURE = 1,     /* the run failed: a file, dataset or device problem (the message says which) */
    SF_EXIT_USAGE = 2,       /* the command line is wrong: unknown subcommand or flag, bad value */
    SF_EXIT_CONFIG = 3,      /* the config file (or a --set) is invalid: the message names file:line */
    SF_EXIT_NUMERIC = 4,     /* training stopped on a NaN/Inf loss or gradient */
    SF_EXIT_INTERRUPTED = 130 /* stopped by Ctrl-C (SIGINT) or SIGTERM */
};

typedef int (*sf_cli_command)(int argc, char **argv);
int sf_cmd_train(int argc, char **argv);
int sf_cmd_eval(int argc, char **argv);
int sf_cmd_bench(int argc, char **argv);
int sf_cmd_info(int argc, char **argv);
int sf_cmd_export(int argc, char **argv);
int sf_cmd_import(int argc, char **argv);

/* Prints "spikefuse <cmd>: error: <message>" to stderr and returns `code`. */
int sf_cli_error(const char *cmd, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Reports a failed library call with its message and maps the status to an exit code. */
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
#include "config/config.h"

#define SF_CLI_MAX_SETS 256

/* Applies "section.key=value" overrides; prints the error and returns SF_EXIT_CONFIG on the first bad one. */
int sf_cli_apply_sets(const char *cmd, sf_config *cfg, char *const *sets, int nsets);
/* Loads a config file and applies the overrides; returns an exit code. */
int sf_cli_load_config(const char *cmd, const char *path, char *const *sets, int nsets, sf_config **out);
/* Sets the device from "cpu", "cuda", "cuda:N" or "auto" (a GPU when one is usable, else the CPU). */
int sf_cli_apply_device(const char *cmd, sf_config *cfg, const char *text);
/* Builds the config's network and compiles it for its timesteps and batch; returns an exit code. */
int sf_cli_build_net(const char *cmd, const sf_config *cfg, sf_net **out);

#endif
