/* fig_sample.c — the figures of one test sample's input and output: the image it was made from and the input
 * raster over the time steps, and the last layer's outputs at each step. The per-layer figures are in
 * fig_layers.c; sf_sample_figures lists them all. */
#include "plot/figure.h"
#include "plot/raster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *encoding_text(sf_encoding e)
{
    switch (e) {
    case SF_ENCODING_DIRECT: return "direct encoding: the normalised image at every step";
    case SF_ENCODING_POISSON: return "Poisson encoding: a pixel spikes with probability = its intensity";
    case SF_ENCODING_LATENCY: return "latency encoding: one spike per pixel, brightest first";
    }
    return "";
}

/* The input averaged over the steps as an image (grey, or RGB for 3 channels), each pixel a square of `scale` px.
 * Squares rather than a scaled image surface: browsers smooth an SVG's embedded image, squares stay sharp. */
static void draw_image(cairo_t *cr, const sf_trace *tr, double x, double y, double scale)
{
    int64_t hw = (int64_t)tr->h * tr->w, chw = tr->c * hw;
    double lo = INFINITY, hi = -INFINITY;
    double *mean = calloc((size_t)chw, sizeof *mean);
    if (!mean) return;
    for (int64_t t = 0; t < tr->T; t++)
        for (int64_t i = 0; i < chw; i++) mean[i] += tr->input[t * chw + i] / (double)tr->T;
    for (int64_t i = 0; i < chw; i++) lo = fmin(lo, mean[i]), hi = fmax(hi, mean[i]);
    double range = hi > lo ? hi - lo : 1;
    cairo_save(cr);
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    for (int64_t p = 0; p < hw; p++) {
        double rgb[3];
        for (int k = 0; k < 3; k++) {
            /* one channel: grey; three: RGB; otherwise the channels' mean in grey */
            double v = 0;
            if (tr->c == 3) v = mean[k * hw + p];
            else
                for (int c = 0; c < tr->c; c++) v += mean[c * hw + p] / tr->c;
            rgb[k] = (v - lo) / range;
        }
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle(cr, x + (double)(p % tr->w) * scale, y + (double)(p / tr->w) * scale, scale, scale);
        cairo_fill(cr);
    }
    cairo_restore(cr);
    free(mean);
    sf_set_color(cr, sf_muted);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, x - 0.5, y - 0.5, tr->w * scale + 1, tr->h * scale + 1);
    cairo_stroke(cr);
}

static void draw_input(cairo_t *cr, const sf_figure *f)
{
    const sf_trace *tr = f->data->trace;
    int64_t n = (int64_t)tr->c * tr->h * tr->w;
    char title[128], subtitle[256], which[96];
    snprintf(title, sizeof title, "Input of test sample %lld", (long long)tr->sample);
    snprintf(subtitle, sizeof subtitle, "label %d, predicted %d · %s", tr->label, tr->predicted,
             encoding_text(tr->encoding));
    sf_figure_heading(cr, SF_FIG_W, SF_FIG_H, title, subtitle);

    double side = SF_FIG_H - SF_MARGIN_TOP - SF_MARGIN_BOTTOM;
    double scale = floor(side / (tr->h > tr->w ? tr->h : tr->w));
    draw_image(cr, tr, 24, SF_MARGIN_TOP, scale);
    sf_set_color(cr, sf_muted);
    sf_set_font(cr, SF_FONT_TICK, 0);
    sf_text(cr, 24 + tr->w * scale / 2, SF_MARGIN_TOP + tr->h * scale + 8, 0.5, 0, 0,
            "the input's mean over the steps");

    int binary = sf_values_binary(tr->input, tr->T * n);
    sf_subset sub;
    sf_subset_pick(tr->input, tr->T, n, binary, &sub);
    sf_subset_describe(&sub, "input", which, sizeof which);
    sf_axes ax;
    sf_axes_place(&ax, 0);
    ax.left = 24 + tr->w * scale + 96;
    ax.width = SF_FIG_W - ax.left - (binary ? SF_MARGIN_RIGHT : 90);
    sf_raster_axes(&ax, tr->T, &sub);
    ax.ylabel = NULL;
    double vmax = 0;
    for (int64_t i = 0; i < tr->T * n; i++) vmax = fmax(vmax, fabs(tr->input[i]));
    sf_axes_draw(cr, &ax);
    sf_raster_cells(cr, &ax, tr->input, tr->T, &sub, binary, vmax);
    sf_set_color(cr, sf_ink);
    sf_set_font(cr, SF_FONT_LABEL, 0);
    char ylabel[160];
    snprintf(ylabel, sizeof ylabel, "input (pixel index): %s", which);
    sf_text(cr, ax.left - 44, ax.top + ax.height / 2, 0.5, 1, -SF_PI / 2, ylabel);
    if (!binary) sf_colorbar(cr, ax.left + ax.width + 16, ax.top + 24, 14, ax.height - 24, vmax, "value");
}

static void draw_output(cairo_t *cr, const sf_figure *f)
{
    const sf_trace *tr = f->data->trace;
    int32_t K = tr->classes;
    double *x = malloc((size_t)tr->T * sizeof *x), *y = malloc((size_t)(tr->T * K) * sizeof *y);
    sf_series *s = calloc((size_t)K, sizeof *s);
    char(*labels)[48] = calloc((size_t)K, sizeof *labels);
    if (!x || !y || !s || !labels) goto done;
    for (int64_t t = 0; t < tr->T; t++) x[t] = (double)t;
    for (int32_t k = 0; k < K; k++) {
        for (int64_t t = 0; t < tr->T; t++) y[k * tr->T + t] = tr->output[t * K + k];
        int is_label = k == tr->label, is_pred = k == tr->predicted, stands_out = is_label || is_pred;
        snprintf(labels[k], sizeof labels[k], "class %d%s", (int)k,
                 is_label && is_pred ? ": label, predicted"
                 : is_label          ? ": label"
                 : is_pred           ? ": predicted"
                                     : "");
        s[k] = (sf_series){.x = x,
                           .y = y + k * tr->T,
                           .n = tr->T,
                           .label = labels[k],
                           .color = sf_palette(k),
                           .width = stands_out ? 3.0 : 1.4,
                           .marker = stands_out ? 4.5 : 3,
                           .alpha = stands_out ? 1.0 : 0.75};
    }
    char title[128], subtitle[256];
    snprintf(title, sizeof title, "Output of test sample %lld over time", (long long)tr->sample);
    snprintf(subtitle, sizeof subtitle, "layer %d (%s) at each step; the %s readout %s", (int)tr->out_layer,
             sf_layer_kind_name(tr->out_kind), tr->readout == SF_READOUT_LEAKY ? "leaky" : "mean",
             tr->readout == SF_READOUT_LEAKY ? "integrates them with a leak" : "averages them over the steps");
    sf_figure_heading(cr, SF_FIG_W, SF_FIG_H, title, subtitle);
    sf_axes ax;
    sf_axes_place(&ax, 180);
    double xlo = 0, xhi = 0, ylo = 0, yhi = 0;
    sf_series_range(s, K, &xlo, &xhi, &ylo, &yhi);
    sf_axes_set_x(&ax, 0, (double)tr->T - 1, 1);
    sf_axes_set_y(&ax, ylo, yhi, 0);
    ax.xlabel = "time step";
    ax.ylabel = "output";
    sf_axes_draw(cr, &ax);
    /* the label and the prediction last, on top */
    for (int pass = 0; pass < 2; pass++)
        for (int32_t k = 0; k < K; k++)
            if ((k == tr->label || k == tr->predicted) == pass) sf_plot_series(cr, &ax, &s[k], 1);
    double lx = ax.left + ax.width + 18, ly = ax.top + 8;
    for (int32_t k = 0; k < K && ly < ax.top + ax.height; k++) ly += sf_legend_entry(cr, lx, ly, &s[k]);
done:
    free(x);
    free(y);
    free(s);
    free(labels);
}

void sf_sample_figures(const sf_plot_data *d, sf_figure_list *list)
{
    const sf_trace *tr = d->trace;
    if (!tr) return;
    const char *why = tr->ckpt_name;
    sf_figure *f = sf_figure_add(list, "sample_input", draw_input, d, 0);
    if (f)
        snprintf(f->caption, sizeof f->caption,
                 "Test sample %lld as the network received it at each of its %lld time steps (%s), run through %s "
                 "(epoch %lld).",
                 (long long)tr->sample, (long long)tr->T, encoding_text(tr->encoding), why, (long long)tr->ckpt_epoch);
    sf_layer_figures(d, list);
    f = sf_figure_add(list, "sample_output", draw_output, d, 0);
    if (f)
        snprintf(f->caption, sizeof f->caption, "The last layer's %d outputs for test sample %lld at each time step.",
                 (int)tr->classes, (long long)tr->sample);
}
