/* report.c — RUN/report.html: one self-contained page (no file or network it needs) with the run's state, its
 * final numbers, what is missing, every figure as inline SVG and the resolved config. */
#include "plot/plot.h"

#include "spikefuse_train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *style =
    "body{font-family:'DejaVu Sans',Verdana,sans-serif;color:#222429;background:#f6f7f9;margin:0;padding:24px 32px;"
    "max-width:1000px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;border-bottom:1px solid #dde0e5;"
    "padding-bottom:4px}"
    ".status{color:#5a5f68;margin:0 0 16px}"
    "table{border-collapse:collapse;background:#fff;font-size:14px}"
    "td{padding:5px 14px;border-bottom:1px solid #eceef1}td:first-child{color:#5a5f68}"
    ".notes{background:#fff7e0;border:1px solid #ecd9a0;padding:8px 16px;font-size:14px}"
    "figure{margin:0 0 22px;background:#fff;border:1px solid #e1e4e8;padding:8px}"
    "figure svg{display:block;width:100%;max-width:800px;height:auto}"
    "figcaption{font-size:13px;color:#5a5f68;margin-top:4px}"
    "pre{background:#fff;border:1px solid #e1e4e8;padding:10px;font-size:13px;overflow:auto}"
    "footer{color:#8a8f98;font-size:12px;margin-top:24px}";

/* The SVG document without its XML declaration, every id prefixed so the figures' glyph and clip ids (cairo
 * numbers them the same way in every document) stay apart on one page. */
static void inline_svg(sf_buf *page, const sf_buf *svg, int figure)
{
    static const char *const refs[] = {"id=\"", "href=\"#", "url(#"};
    const char *p = svg->data ? strstr(svg->data, "<svg") : NULL;
    if (!p) return;
    char prefix[16];
    snprintf(prefix, sizeof prefix, "f%d-", figure);
    while (*p) {
        size_t k = 0, n = 0;
        for (k = 0; k < 3; k++) {
            n = strlen(refs[k]);
            if (strncmp(p, refs[k], n) == 0) break;
        }
        if (k < 3) {
            sf_buf_append(page, p, n);
            sf_buf_puts(page, prefix);
            p += n;
        } else {
            sf_buf_append(page, p++, 1);
        }
    }
}

static const sf_epoch_point *best_epoch(const sf_metrics_log *log)
{
    const sf_epoch_point *best = NULL;
    for (int64_t i = 0; i < log->n_epochs; i++)
        if (isfinite(log->epochs[i].test_accuracy) && (!best || log->epochs[i].test_accuracy > best->test_accuracy))
            best = &log->epochs[i];
    return best;
}

static void status_line(sf_buf *b, const sf_run *run, int live)
{
    const sf_metrics_log *log = &run->log;
    long long done = (long long)log->n_epochs, total = run->cfg ? (long long)run->cfg->train.epochs : -1;
    double step = 0;
    for (int64_t i = 0; i < log->n_steps; i++) step = fmax(step, log->steps[i].step);
    for (int64_t i = 0; i < log->n_epochs; i++) step = fmax(step, log->epochs[i].step);
    sf_buf_puts(b, "<p class=\"status\">");
    if (log->stopped)
        sf_buf_printf(b, "Training stopped on a NaN/Inf loss or gradient at step %.0f. ", log->stopped_step);
    sf_buf_printf(b, "%s%lld", live ? "Training: " : "", done);
    if (total > 0) sf_buf_printf(b, " of %lld", total);
    sf_buf_printf(b, " epoch%s done, %.0f optimizer steps", done == 1 && total <= 0 ? "" : "s", step);
    if (live) sf_buf_printf(b, " · this page reloads every %d s", SF_REPORT_RELOAD_S);
    sf_buf_puts(b, ".</p>\n");
}

static void row(sf_buf *b, const char *name, const char *fmt, double v)
{
    if (!isfinite(v)) return;
    sf_buf_printf(b, "<tr><td>%s</td><td>", name);
    sf_buf_printf(b, fmt, v);
    sf_buf_puts(b, "</td></tr>\n");
}

static void numbers(sf_buf *b, const sf_run *run)
{
    const sf_metrics_log *log = &run->log;
    if (log->n_epochs == 0) return;
    const sf_epoch_point *last = &log->epochs[log->n_epochs - 1], *best = best_epoch(log);
    double seconds = 0;
    for (int64_t i = 0; i < log->n_epochs; i++)
        if (isfinite(log->epochs[i].train_seconds)) seconds += log->epochs[i].train_seconds;
    char label[96];
    sf_buf_puts(b, "<h2>Numbers</h2>\n<table>\n");
    snprintf(label, sizeof label, "test accuracy after epoch %.0f", last->epoch);
    row(b, label, "%.2f%%", 100 * last->test_accuracy);
    if (best) {
        snprintf(label, sizeof label, "best test accuracy (epoch %.0f)", best->epoch);
        row(b, label, "%.2f%%", 100 * best->test_accuracy);
    }
    row(b, "train accuracy, last epoch", "%.2f%%", 100 * last->train_accuracy);
    row(b, "train loss, last epoch", "%.4f", last->train_loss);
    for (int32_t k = 0; k < last->n_rates; k++) {
        int32_t layer = sf_run_lif_layer(run, k);
        if (layer >= 0) snprintf(label, sizeof label, "firing rate of layer %d (LIF), test set", (int)layer);
        else snprintf(label, sizeof label, "firing rate of LIF layer %d, test set", (int)k + 1);
        row(b, label, "%.4f spikes / neuron / step", last->rates[k]);
    }
    row(b, "training throughput, last epoch", "%.0f samples/s", last->samples_per_s);
    row(b, "training time (all epochs, test passes excluded)", "%.1f s", seconds);
    row(b, "peak memory of the network", "%.1f MiB", last->peak_bytes / (1024.0 * 1024.0));
    sf_buf_puts(b, "</table>\n");
}

static void notes_box(sf_buf *b, const sf_notes *notes)
{
    if (notes->n == 0) return;
    sf_buf_puts(b, "<div class=\"notes\"><p>Not everything could be drawn:</p><ul>\n");
    for (int i = 0; i < notes->n; i++) {
        sf_buf_puts(b, "<li>");
        sf_buf_html(b, notes->text[i]);
        sf_buf_puts(b, "</li>\n");
    }
    sf_buf_puts(b, "</ul></div>\n");
}

/* The figures whose names start (or do not start) with "sample_", under a heading. */
static void figures(sf_buf *b, const sf_figure_list *figs, const sf_buf *svgs, int samples, const char *heading)
{
    int any = 0;
    for (int i = 0; i < figs->n; i++) {
        const sf_figure *f = &figs->fig[i];
        if ((strncmp(f->name, "sample_", 7) == 0) != samples) continue;
        if (!any++) sf_buf_printf(b, "<h2>%s</h2>\n", heading);
        sf_buf_printf(b, "<figure id=\"%s\">\n", f->name);
        inline_svg(b, &svgs[i], i);
        sf_buf_puts(b, "<figcaption>");
        sf_buf_html(b, f->caption);
        sf_buf_puts(b, "</figcaption></figure>\n");
    }
}

/* The last component of the run directory's path ("runs/mlp/" gives "mlp"). */
static void run_name(const char *dir, char *buf, size_t cap)
{
    size_t end = strlen(dir);
    while (end > 1 && dir[end - 1] == '/') end--;
    size_t start = end;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(buf, cap, "%.*s", (int)(end - start), dir + start);
}

sf_status sf_report_write(const char *path, const sf_run *run, const sf_trace *trace, const sf_figure_list *figs,
                          const sf_buf *svgs, const sf_notes *notes, int live)
{
    sf_buf b = {0};
    char name[256];
    run_name(run->dir, name, sizeof name);
    sf_buf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    if (live) sf_buf_printf(&b, "<meta http-equiv=\"refresh\" content=\"%d\">\n", SF_REPORT_RELOAD_S);
    sf_buf_puts(&b, "<title>spikefuse run ");
    sf_buf_html(&b, name);
    sf_buf_printf(&b, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>spikefuse run ", style);
    sf_buf_html(&b, name);
    sf_buf_puts(&b, "</h1>\n");
    status_line(&b, run, live);
    notes_box(&b, notes);
    numbers(&b, run);
    figures(&b, figs, svgs, 0, "Training");
    if (trace) {
        char heading[96];
        snprintf(heading, sizeof heading, "Test sample %lld (label %d, predicted %d)", (long long)trace->sample,
                 trace->label, trace->predicted);
        figures(&b, figs, svgs, 1, heading);
    }
    if (run->config_text) {
        sf_buf_puts(&b, "<h2>Resolved config</h2>\n<pre>");
        sf_buf_html(&b, run->config_text);
        sf_buf_puts(&b, "</pre>\n");
    }
    char when[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    sf_buf_printf(&b, "<footer>Written by spikefuse %s at %s from ", sf_version(), when);
    sf_buf_html(&b, run->dir);
    sf_buf_puts(&b, ".</footer>\n</body>\n</html>\n");
    sf_status s =
        b.failed ? sf_fail(SF_ERR_NOMEM, "out of memory writing %s", path) : sf_write_file_atomic(path, b.data, b.len);
    sf_buf_free(&b);
    return s;
}
