/* fuzz_metrics.c — libFuzzer target for what `spikefuse plot` makes of a run's metrics.jsonl (a file a crash may cut
 * and a user may edit): the input bytes are the file, read by plot's metrics reader and drawn as every training
 * curve figure (SVG, in memory), so that no line makes the axes loop (an epoch of 1e19 once did), overflows a
 * float-to-integer conversion or hands cairo a matrix it refuses. */
#include "plot/figure.h"

#include <fontconfig/fontconfig.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Draws the figures of the metrics `text` (len bytes); they must render. */
static void draw(const char *text, size_t len)
{
    sf_run run;
    memset(&run, 0, sizeof run);
    sf_notes notes = {0};
    if (sf_metrics_log_parse(text, len, "metrics.jsonl", &run.log, &notes) != SF_OK) return;
    run.have_metrics = 1;
    const sf_plot_data d = {&run, NULL};
    sf_figure_list *figs = calloc(1, sizeof *figs);
    if (figs) sf_curve_figures(&d, figs, &notes);
    for (int i = 0; figs && i < figs->n; i++) {
        sf_buf svg = {0};
        /* a figure drawn from any metrics renders: cairo's errors (a NaN or unbounded coordinate) are bugs here */
        if (sf_figure_svg(&figs->fig[i], &svg) != SF_OK) __builtin_trap();
        sf_buf_free(&svg);
    }
    free(figs);
    sf_metrics_log_free(&run.log);
}

/* cairo's and fontconfig's caches, emptied at exit so that the leak check sees only what a run left */
static void release_font_caches(void)
{
    cairo_debug_reset_static_data();
    FcFini();
}

/* fontconfig and cairo fill their caches on first use: once here, not inside a run that the leak check watches. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    atexit(release_font_caches);
    static const char warm[] =
        "{\"type\":\"step\",\"epoch\":1,\"step\":1,\"loss\":2,\"accuracy\":0.1,\"lr\":0.01}\n"
        "{\"type\":\"step\",\"epoch\":1,\"step\":2,\"loss\":1,\"accuracy\":0.3,\"lr\":0.01}\n"
        "{\"type\":\"epoch\",\"epoch\":1,\"step\":2,\"train_loss\":1.5,\"train_accuracy\":0.2,"
        "\"test_accuracy\":0.25,\"firing_rates\":[0.1,0.2],\"lr\":0.01,\"best\":true}\n";
    draw(warm, sizeof warm - 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    draw((const char *)data, size);
    return 0;
}
