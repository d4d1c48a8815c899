/* cmd_plot.c — `spikefuse plot`: the figures of a run directory as PNG and SVG files, and its report page. */
#include "cli.h"
#include "plot/plot.h"

#include <stdio.h>
#include <string.h>

static const char *plot_help =
    "usage: spikefuse plot RUN [--out DIR] [--sample N]\n\n"
    "Draws the pictures of a run directory (one that spikefuse train wrote, finished or still training) as PNG\n"
    "and SVG files:\n"
    "  loss, accuracy, learning_rate   against optimizer steps, the epochs marked along the top\n"
    "  firing_rates                    each LIF layer's firing rate on the test set after each epoch\n"
    "  sample_input                    one test sample as the network received it at each time step\n"
    "  sample_spikes_layerK            layer K's spike raster for that sample (an even subset of a large layer)\n"
    "  sample_membrane_layerK          membrane potentials of layer K's most active neurons, with the threshold\n"
    "  sample_output                   the last layer's outputs at each time step\n"
    "The sample figures come from best.safetensors (last.safetensors until there is one), run on the CPU. It\n"
    "also writes report.html: one page with every figure, the final numbers and the resolved config.\n"
    "What a run does not have yet (no checkpoint, no metrics, a metrics line still being written) is skipped\n"
    "with a note on stderr and on the page.\n\n"
    "options:\n"
    "  --out DIR     where the figures and report.html go (default: the figures in RUN/plots, the page\n"
    "                RUN/report.html); with it, nothing is written into RUN, which may be read-only\n"
    "  --sample N    which test sample the sample figures show (default 0)\n"
    "  -h, --help    this text\n\n"
    "exit codes: 0 done, 1 failed (not a run directory, unreadable files), 2 bad command line or sample index.\n";

typedef struct plot_args {
    const char *run, *out;
    int64_t sample;
} plot_args;

static int parse_args(int argc, char **argv, plot_args *a, int *help)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (sf_cli_is_help(argv[i])) {
            *help = 1;
            return SF_EXIT_OK;
        }
        if ((m = sf_cli_value("plot", argc, argv, &i, "--out", &v)) != 0) {
            if (m < 0) return SF_EXIT_USAGE;
            a->out = v;
        } else if ((m = sf_cli_value("plot", argc, argv, &i, "--sample", &v)) != 0) {
            if (m < 0 || !sf_cli_int("plot", "--sample", v, 0, INT64_MAX, &a->sample)) return SF_EXIT_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1] != 0) {
            return sf_cli_unknown("plot", argv[i], "--out, --sample, --help");
        } else if (!a->run) {
            a->run = argv[i];
        } else {
            return sf_cli_error("plot", SF_EXIT_USAGE, "unexpected argument '%s' (plot takes one RUN directory)",
                                argv[i]);
        }
    }
    if (!a->run) return sf_cli_error("plot", SF_EXIT_USAGE, "no RUN directory given (see spikefuse plot --help)");
    return SF_EXIT_OK;
}

int sf_cmd_plot(int argc, char **argv)
{
    plot_args a;
    int help = 0, rc = parse_args(argc, argv, &a, &help);
    if (help) {
        fputs(plot_help, stdout);
        return SF_EXIT_OK;
    }
    if (rc != SF_EXIT_OK) return rc;
    char out[4200];
    if (a.out) snprintf(out, sizeof out, "%s", a.out);
    else snprintf(out, sizeof out, "%s/plots", a.run);
    sf_plot_request req = {.run_dir = a.run, .fig_dir = out, .report_dir = a.out, .sample = a.sample};
    sf_plot_result res;
    sf_status s = sf_plot_run(&req, &res);
    for (int i = 0; i < res.notes.n; i++) fprintf(stderr, "spikefuse plot: note: %s\n", res.notes.text[i]);
    if (res.bad_sample)
        return sf_cli_error("plot", SF_EXIT_USAGE, "--sample %lld: %s", (long long)a.sample, sf_last_error());
    if (s != SF_OK) return sf_cli_status("plot", s);
    printf("%d figures (PNG and SVG) in %s; the report page is %s\n", res.figures, out, res.report);
    return SF_EXIT_OK;
}
