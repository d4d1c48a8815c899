/* plot.h — pictures of a training run, for `spikefuse plot` and `spikefuse train --report`: the figures as PNG and
 * SVG files, and RUN/report.html, one self-contained page with the figures inline, the final numbers and the
 * resolved config. Works on a run in progress: it draws what the run has written so far. */
#ifndef SF_PLOT_PLOT_H
#define SF_PLOT_PLOT_H

#include "plot/figure.h"
#include "plot/run.h"

#define SF_REPORT_FILE "report.html"
#define SF_REPORT_RELOAD_S 30

typedef struct sf_plot_request {
    const char *run_dir;
    const char *fig_dir; /* where NAME.png and NAME.svg go; NULL: no figure files, the page only */
    const char *report_dir; /* where report.html goes; NULL: the run directory */
    int64_t sample;      /* the test-set index of the sample figures */
    int live;            /* training goes on: the page reloads itself every SF_REPORT_RELOAD_S seconds */
} sf_plot_request;

typedef struct sf_plot_result {
    int figures;       /* how many were drawn */
    int have_sample;   /* the sample figures are among them */
    int bad_sample;    /* the failure was the sample index: outside the test set */
    sf_notes notes;    /* what could not be drawn, and why */
    char report[4200]; /* the page's path */
} sf_plot_result;

/* Draws everything the run allows and writes the files (each atomically). Fails when the directory is not a run
 * (SF_ERR_IO, SF_ERR_INVALID), when `sample` is outside the test set (SF_ERR_INVALID), or when writing fails;
 * missing parts of a run are notes. */
sf_status sf_plot_run(const sf_plot_request *req, sf_plot_result *res);

/* report.c: the page at `path` from the figures' SVG documents (svgs[i] belongs to figs->fig[i]). */
sf_status sf_report_write(const char *path, const sf_run *run, const sf_trace *trace, const sf_figure_list *figs,
                          const sf_buf *svgs, const sf_notes *notes, int live);

#endif
