/* plot_run.c — what `spikefuse plot` and `train --report` do: open the run, run the sample, list the figures,
 * render each once as SVG (and PNG when files are wanted), and write the files and the report page. */
#include "plot/plot.h"

#include "spikefuse_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sf_status write_figure_files(const char *dir, const sf_figure *f, const sf_buf *svg)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.png", dir, f->name);
    SF_TRY(sf_figure_png(f, path));
    snprintf(path, sizeof path, "%s/%s.svg", dir, f->name);
    return sf_write_file_atomic(path, svg->data, svg->len);
}

static sf_status draw_all(const sf_plot_request *req, const sf_run *run, const sf_trace *trace, sf_plot_result *res)
{
    sf_plot_data d = {run, trace};
    sf_figure_list *figs = calloc(1, sizeof *figs);
    sf_buf *svgs = calloc(SF_FIGURES_MAX, sizeof *svgs);
    sf_status s = figs && svgs ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
    if (s == SF_OK) {
        sf_curve_figures(&d, figs, &res->notes);
        sf_sample_figures(&d, figs);
        if (req->fig_dir) s = sf_dir_create(req->fig_dir);
    }
    for (int i = 0; s == SF_OK && i < figs->n; i++) {
        s = sf_figure_svg(&figs->fig[i], &svgs[i]);
        if (s == SF_OK && req->fig_dir) s = write_figure_files(req->fig_dir, &figs->fig[i], &svgs[i]);
    }
    const char *report_dir = req->report_dir ? req->report_dir : run->dir;
    if (s == SF_OK && req->report_dir) s = sf_dir_create(req->report_dir);
    if (s == SF_OK) s = sf_path_join(res->report, sizeof res->report, report_dir, SF_REPORT_FILE);
    if (s == SF_OK) s = sf_report_write(res->report, run, trace, figs, svgs, &res->notes, req->live);
    if (s == SF_OK) res->figures = figs->n;
    for (int i = 0; svgs && i < SF_FIGURES_MAX; i++) sf_buf_free(&svgs[i]);
    free(svgs);
    free(figs);
    return s;
}

sf_status sf_plot_run(const sf_plot_request *req, sf_plot_result *res)
{
    memset(res, 0, sizeof *res);
    sf_run run;
    SF_TRY(sf_run_open(req->run_dir, &run, &res->notes));
    sf_trace trace;
    int have = 0;
    sf_status s = sf_trace_run(&run, req->sample, &trace, &have, &res->notes);
    res->bad_sample = s != SF_OK;
    if (s == SF_OK) {
        res->have_sample = have;
        s = draw_all(req, &run, have ? &trace : NULL, res);
        if (have) sf_trace_free(&trace);
    }
    sf_run_close(&run);
    return s;
}
