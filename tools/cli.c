/* cli.c — error reporting, option scanning and signal handling shared by the subcommands. */
#include "cli.h"

#include "spikefuse_train.h"

#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int sf_cli_error(const char *cmd, int code, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "spikefuse%s%s: error: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

int sf_cli_exit_code(sf_status s)
{
    switch (s) {
    case SF_OK: return SF_EXIT_OK;
    case SF_ERR_NUMERIC: return SF_EXIT_NUMERIC;
    case SF_ERR_INVALID: return SF_EXIT_CONFIG;
    default: return SF_EXIT_FAILURE;
    }
}

int sf_cli_status(const char *cmd, sf_status s)
{
    const char *msg = sf_last_error();
    sf_cli_error(cmd, 0, "%s", *msg ? msg : sf_status_str(s));
    return sf_cli_exit_code(s);
}

int sf_cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int sf_cli_value(const char *cmd, int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return 1;
    }
    if (arg[n] != 0) return 0;
    if (*i + 1 >= argc) {
        sf_cli_error(cmd, 0, "%s needs a value", name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int sf_cli_int(const char *cmd, const char *flag, const char *text, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi) {
        sf_cli_error(cmd, 0, "%s '%s': expected an integer from %" PRId64 " to %" PRId64, flag, text, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

int sf_cli_unknown(const char *cmd, const char *arg, const char *accepted)
{
    return sf_cli_error(cmd, SF_EXIT_USAGE, "unknown option '%s' (accepted: %s; see spikefuse %s --help)", arg,
                        accepted, cmd);
}

/* The first signal asks every phase of the run to stop (io/interrupt.h): the loops of loading, binning, caching,
 * training and evaluating hear it and the run ends as a clean interrupt. */
static void on_signal(int sig)
{
    if (sf_interrupt_requested()) {
        /* Second signal: the user insists; leave with the conventional status at once. */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    sf_interrupt_request();
}

int sf_cli_stop_requested(void) { return sf_interrupt_requested(); }

void sf_cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

const char *sf_cli_bytes(double bytes, char *buf, int cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, (size_t)cap, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
    return buf;
}

int sf_cli_positive(const char *cmd, const char *flag, const char *text, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v) || !(v > 0)) {
        sf_cli_error(cmd, 0, "%s '%s': expected a positive number", flag, text);
        return 0;
    }
    *out = v;
    return 1;
}

int sf_cli_checkpoint_path(const char *cmd, const char *arg, char *path, size_t cap)
{
    struct stat sb;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (sf_path_join(path, cap, arg, SF_RUN_BEST) != SF_OK) return sf_cli_status(cmd, SF_ERR_IO);
        if (stat(path, &sb) != 0 && errno == ENOENT) {
            /* a run directory without best.safetensors: say what can be used instead, if anything */
            char last[4096];
            if (sf_path_join(last, sizeof last, arg, SF_RUN_LAST) == SF_OK && sf_file_exists(last))
                return sf_cli_error(cmd, SF_EXIT_FAILURE, "%s has no %s yet (no epoch of its run has ended): %s %s",
                                    arg, SF_RUN_BEST, strcmp(cmd, "eval") == 0 ? "evaluate" : cmd, last);
            return sf_cli_error(cmd, SF_EXIT_FAILURE, "%s holds no run (it has no %s)", arg, SF_RUN_BEST);
        }
    } else if ((size_t)snprintf(path, cap, "%s", arg) >= cap) {
        return sf_cli_error(cmd, SF_EXIT_USAGE, "the checkpoint path is too long");
    }
    return SF_EXIT_OK;
}
