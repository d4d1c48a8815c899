/* cmd_train.c — `spikefuse train`: argument handling, the run directory's name, resume checks, and the summary. */
#include "cli.h"
#include "spikefuse_train.h"
#include "plot/plot.h"
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *train_help =
    "usage: spikefuse train CONFIG [--set section.key=value ...] [--out DIR] [--device D] [--report]\n"
    "       spikefuse train [CONFIG] --resume DIR [--set ...] [--out DIR] [--device D] [--report]\n\n"
    "Trains the network that CONFIG (an INI file, see examples/) describes. Progress goes to stderr: a live bar\n"
    "on a terminal, one line per epoch otherwise. The final test accuracy goes to stdout.\n\n"
    "options:\n"
    "  --set section.key=value  override a config value (repeatable), e.g. --set train.epochs=5,\n"
    "                           --set neuron.tau=4, --set layer2.out=512; checked like the file's own values\n"
    "  --out DIR                the run directory (default runs/<config name>-<date>-<time>); it must be new\n"
    "                           or empty: spikefuse never writes over an earlier run\n"
    "  --resume DIR             continue the run in DIR from DIR/last.safetensors, bitwise as if never stopped\n"
    "                           (on the CPU, and on a GPU with [train] deterministic = on). The run's saved\n"
    "                           config is used; CONFIG, if given, must describe the same run. Only train.epochs,\n"
    "                           train.data_dir, train.log_every, train.threads and the device may change (a run\n"
    "                           trained on a GPU goes on on the CPU with --device cpu, and back). Results go on\n"
    "                           in DIR unless --out names a new one. A DIR/config.ini edited into another run\n"
    "                           is refused (the edit would be lost); the run keeps the choices it started with\n"
    "                           (DIR/choices)\n"
    "  --device D               cpu, cuda, cuda:N, or auto (a GPU when one is usable, else the CPU);\n"
    "                           overrides [train] device\n"
    "  --report                 write DIR/report.html when training starts and again after every epoch: one\n"
    "                           page with the curves so far, test sample 0 through the best checkpoint and the\n"
    "                           config, reloading itself while training goes on (spikefuse plot draws the same)\n"
    "  -h, --help               this text\n\n"
    "Several processes (GPUs, hosts): start one process per device with mpirun or srun, e.g.\n"
    "  mpirun -np 4 spikefuse train cfg.ini --device cuda\n"
    "Each takes the GPU of its local rank; [train] time_parallel splits T between processes, the rest split each\n"
    "global batch ([train] global_batch, or batch × data ranks). Rank 0 prints and writes the run directory.\n\n"
    "The run directory receives last.safetensors (the initial state first, then after every epoch, or where\n"
    "Ctrl-C stopped the run), best.safetensors (the epoch with the best test accuracy), config.ini (the\n"
    "resolved config), choices (what the network decided when the run started: sparse crossovers, a GPU's\n"
    "convolution algorithms and so its memory plan) and metrics.jsonl (one JSON object per log_every steps and\n"
    "per epoch). One process at a\n"
    "time writes it: train.lock names the one that does, and a second is refused. A run stopped at any moment,\n"
    "kill -9 included, continues with --resume; one stopped before its first checkpoint leaves a directory that\n"
    "a new run may take. The first Ctrl-C or SIGTERM stops the run promptly in any phase (loading the data\n"
    "included) and leaves the directory as a clean stop does; a second one ends the process at once.\n\n"
    SF_CLI_EXIT_CODES;

typedef struct train_args {
    const char *config, *out, *resume, *device;
    char *sets[SF_CLI_MAX_SETS];
    int nsets;
    int report;
} train_args;

static int parse_args(int argc, char **argv, train_args *a, int *help)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (sf_cli_is_help(argv[i])) {
            *help = 1;
            return SF_EXIT_OK;
        }
        if ((m = sf_cli_value("train", argc, argv, &i, "--set", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            if (a->nsets == SF_CLI_MAX_SETS)
                return sf_cli_error("train", SF_EXIT_USAGE, "more than %d --set options", SF_CLI_MAX_SETS);
            a->sets[a->nsets++] = (char *)v;
        } else if ((m = sf_cli_value("train", argc, argv, &i, "--out", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->out = v;
        } else if ((m = sf_cli_value("train", argc, argv, &i, "--resume", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->resume = v;
        } else if ((m = sf_cli_value("train", argc, argv, &i, "--device", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->device = v;
        } else if (strcmp(argv[i], "--report") == 0) {
            a->report = 1;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            return sf_cli_unknown("train", argv[i], "--set, --out, --resume, --device, --report, --help");
        } else if (!a->config) {
            a->config = argv[i];
        } else {
            return sf_cli_error("train", SF_EXIT_USAGE, "unexpected argument '%s' (train takes one CONFIG)", argv[i]);
        }
    }
    if (!a->config && !a->resume)
        return sf_cli_error("train", SF_EXIT_USAGE, "no CONFIG given (see spikefuse train --help)");
    return SF_EXIT_OK;
}

/* runs/<config file name without .ini>-<YYYYmmdd-HHMMSS>. */
static void default_run_dir(const char *config, char *buf, size_t cap)
{
    const char *base = strrchr(config, '/');
    base = base ? base + 1 : config;
    size_t n = strlen(base);
    if (n > 4 && strcmp(base + n - 4, ".ini") == 0) n -= 4;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(buf, cap, "runs/%.*s-%s", (int)n, base, stamp);
}

/* The config of a continued run: the saved one, or CONFIG checked against it, with the overrides applied. */
static int resume_config(const train_args *a, sf_config **out)
{
    *out = NULL;
    char path[4096];
    sf_status s = sf_path_join(path, sizeof path, a->resume, SF_RUN_LAST);
    if (s != SF_OK) return sf_cli_status("train", s);
    struct stat sb;
    if (!sf_file_exists(path) && stat(a->resume, &sb) == 0 && sf_run_dir_is_free(a->resume))
        return sf_cli_error("train", SF_EXIT_FAILURE,
                            "cannot resume: %s holds no checkpoint (its run stopped before writing the first one); "
                            "start it anew with: spikefuse train CONFIG --out %s",
                            a->resume, a->resume);
    sf_config *saved = NULL, *wanted = NULL;
    s = sf_checkpoint_config(path, &saved);
    if (s != SF_OK) return sf_cli_error("train", sf_cli_exit_code(s), "cannot resume: %s", sf_last_error());
    int rc;
    if (a->config) {
        rc = sf_cli_load_config("train", a->config, a->sets, a->nsets, &wanted);
    } else {
        char *text = NULL;
        s = sf_config_write(saved, &text);
        if (s == SF_OK) s = sf_config_parse_string(text, path, &wanted);
        free(text);
        rc = s == SF_OK ? sf_cli_apply_sets("train", wanted, a->sets, a->nsets) : sf_cli_status("train", s);
    }
    if (rc == SF_EXIT_OK && a->device) rc = sf_cli_apply_device("train", wanted, a->device);
    if (rc == SF_EXIT_OK && sf_config_check_same_run(saved, wanted) != SF_OK)
        rc = sf_cli_error("train", SF_EXIT_CONFIG, "%s", sf_last_error());
    sf_config_free(saved);
    if (rc != SF_EXIT_OK) {
        sf_config_free(wanted);
        return rc;
    }
    *out = wanted;
    return SF_EXIT_OK;
}

/* What the trainer's callback serves: the progress display, and the report page when --report asked for it. */
typedef struct train_watch {
    sf_progress progress;
    const char *run_dir;
    int report;
    int report_failed; /* warned once already */
} train_watch;

/* Rewrites the report page; a failure is a warning, never a reason to stop training. */
static void refresh_report(train_watch *w, const sf_train_event *ev)
{
    sf_plot_request req = {.run_dir = w->run_dir,
                           .sample = 0,
                           .live = ev->kind == SF_TRAIN_EV_START ? ev->epoch <= ev->epochs : ev->epoch < ev->epochs};
    sf_plot_result res;
    if (sf_plot_run(&req, &res) == SF_OK || w->report_failed) return;
    w->report_failed = 1;
    fprintf(stderr, "spikefuse train: warning: %s/%s not written: %s\n", w->run_dir, SF_REPORT_FILE, sf_last_error());
}

static int on_event(const sf_train_event *ev, void *user)
{
    train_watch *w = user;
    int stop = sf_progress_event(ev, &w->progress);
    if (w->report && (ev->kind == SF_TRAIN_EV_START || ev->kind == SF_TRAIN_EV_EPOCH)) refresh_report(w, ev);
    return stop;
}

/* The other processes of a job: no console, but Ctrl-C / SIGTERM still asks the job to stop. */
static int quiet_event(const sf_train_event *ev, void *user)
{
    (void)ev, (void)user;
    return sf_cli_stop_requested();
}

static int report(const sf_train_summary *sum, sf_status s, const char *run_dir, const char *resume_dir,
                  sf_dist *dist)
{
    if (s != SF_OK) {
        int rc = sf_cli_status("train", s);
        /* a failure the others did not share would leave them waiting for this process */
        if (!sum->failed_together) sf_dist_abort(dist, rc, sf_last_error());
        return rc;
    }
    if (sf_dist_rank(dist) != 0) return SF_EXIT_OK; /* rank 0 reports */
    if (sum->interrupted && sum->resumable) {
        char when[64] = " before this process trained a step";
        if (sum->steps > 0) snprintf(when, sizeof when, " after %lld steps", (long long)sum->steps);
        fprintf(stderr, "spikefuse train: interrupted%s; continue with: spikefuse train --resume %s\n", when, run_dir);
        return SF_EXIT_INTERRUPTED;
    }
    if (sum->interrupted) {
        fprintf(stderr, "spikefuse train: interrupted before the run's first checkpoint: %s holds no run of it%s\n",
                run_dir, resume_dir ? " (the run being resumed is as it was)" : "");
        return SF_EXIT_INTERRUPTED;
    }
    if (sum->test_accuracy < 0) {
        printf("nothing to do: the run in %s has finished its %lld epochs (raise train.epochs with --set to go on)\n",
               run_dir, (long long)sum->epochs_done);
        return SF_EXIT_OK;
    }
    printf("final test accuracy %.2f%% (best %.2f%%) after %lld epochs, %lld steps, %.1f s; results in %s\n",
           100.0 * sum->test_accuracy, 100.0 * sum->best_test_accuracy, (long long)sum->epochs_done,
           (long long)sum->steps, sum->seconds, run_dir);
    return SF_EXIT_OK;
}

int sf_cmd_train(int argc, char **argv)
{
    train_args a;
    int help = 0, rc = parse_args(argc, argv, &a, &help);
    if (help) {
        fputs(train_help, stdout);
        return SF_EXIT_OK;
    }
    if (rc != SF_EXIT_OK) return rc;
    sf_config *cfg = NULL;
    if (a.resume) {
        rc = resume_config(&a, &cfg);
    } else {
        rc = sf_cli_load_config("train", a.config, a.sets, a.nsets, &cfg);
        if (rc == SF_EXIT_OK && a.device) rc = sf_cli_apply_device("train", cfg, a.device);
    }
    if (rc != SF_EXIT_OK) {
        sf_config_free(cfg);
        return rc;
    }
    char run_dir[4096];
    if (a.out)
        snprintf(run_dir, sizeof run_dir, "%s", a.out);
    else if (a.resume)
        snprintf(run_dir, sizeof run_dir, "%s", a.resume);
    else
        default_run_dir(a.config, run_dir, sizeof run_dir);

    sf_dist *dist = NULL;
    sf_dist_params dp;
    sf_dist_default_params(&dp);
    dp.time_parallel = cfg->train.time_parallel;
    dp.sync_bn = cfg->train.sync_bn;
    if (sf_dist_init(&dp, &dist) != SF_OK) {
        rc = sf_cli_error("train", SF_EXIT_FAILURE, "%s", sf_last_error());
        sf_config_free(cfg);
        return rc;
    }
    const int root = sf_dist_rank(dist) == 0;
    train_watch watch = {.run_dir = run_dir, .report = a.report && root};
    sf_progress_init(&watch.progress, cfg, run_dir);
    sf_train_options opt = {.run_dir = run_dir, .resume_dir = a.resume, .callback = root ? on_event : quiet_event,
                            .user = &watch, .dist = dist};
    sf_train_summary sum;
    sf_cli_catch_signals();
    sf_status s = sf_train_run(cfg, &opt, &sum);
    rc = report(&sum, s, run_dir, a.resume, dist);
    sf_dist_free(dist);
    sf_config_free(cfg);
    return rc;
}
