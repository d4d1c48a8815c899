/* fig_layers.c — per LIF layer, for one test sample: the spike raster (every neuron, or an even subset of a large
 * layer) and the membrane potential of the most active neurons with the threshold they fire at. */
#include "plot/figure.h"
#include "plot/raster.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define TRACES 4
#define LEGEND_OUTSIDE 170.0

static int64_t spike_total(const sf_trace_layer *l, int64_t T)
{
    int64_t n = 0;
    for (int64_t i = 0; i < T * l->n; i++) n += l->spikes[i] != 0;
    return n;
}

static void draw_spikes(cairo_t *cr, const sf_figure *f)
{
    const sf_trace *tr = f->data->trace;
    const sf_trace_layer *l = &tr->lif[f->item];
    sf_subset sub;
    sf_subset_pick(l->spikes, tr->T, l->n, 1, &sub);
    char title[128], subtitle[256], which[96];
    sf_subset_describe(&sub, "neuron", which, sizeof which);
    snprintf(title, sizeof title, "Spikes of layer %d (LIF, %lld neurons), test sample %lld", (int)l->layer,
             (long long)l->n, (long long)tr->sample);
    snprintf(subtitle, sizeof subtitle, "rows: %s · firing rate of the layer on this sample: %.3f", which,
             (double)spike_total(l, tr->T) / (double)(tr->T * l->n));
    sf_figure_heading(cr, SF_FIG_W, SF_FIG_H, title, subtitle);
    sf_axes ax;
    sf_axes_place(&ax, 0);
    sf_raster_axes(&ax, tr->T, &sub);
    ax.ylabel = l->c > 1 && l->h * l->w > 1 ? "neuron (index over channel, row, column)" : "neuron (index)";
    sf_axes_draw(cr, &ax);
    sf_raster_cells(cr, &ax, l->spikes, tr->T, &sub, 1, 1);
    if (sub.count == 0) {
        sf_set_color(cr, sf_muted);
        sf_set_font(cr, SF_FONT_LABEL, 0);
        sf_text(cr, ax.left + ax.width / 2, ax.top + ax.height / 2, 0.5, 0.5, 0, "no neuron spikes on this sample");
    }
}

typedef struct neuron_summary {
    int64_t spikes;
    double low, high; /* the lowest and highest h */
} neuron_summary;

static neuron_summary summarize(const sf_trace_layer *l, int64_t T, int64_t i)
{
    neuron_summary s = {0, INFINITY, -INFINITY};
    for (int64_t t = 0; t < T; t++) {
        s.spikes += l->spikes[t * l->n + i] != 0;
        s.low = fmin(s.low, l->membrane[t * l->n + i]);
        s.high = fmax(s.high, l->membrane[t * l->n + i]);
    }
    return s;
}

/* How well neuron i shows a kind of behaviour (higher is better; -inf: not that kind). Kind 0: fires at some steps
 * and not at others, the widest swing of h first; 1: never fires, nearest the threshold first; 2: fires at every
 * step, nearest the threshold first. */
static double score(const sf_trace_layer *l, int64_t T, int64_t i, int kind)
{
    neuron_summary s = summarize(l, T, i);
    switch (kind) {
    case 0: return s.spikes > 0 && s.spikes < T ? s.high - s.low : -INFINITY;
    case 1: return s.spikes == 0 ? s.high : -INFINITY;
    default: return s.spikes == T ? -s.low : -INFINITY;
    }
}

/* Up to TRACES neurons that show what the layer does: two that fire at some steps, one that never fires and one
 * that fires at every step, where the layer has them; the free places go to more of the first kind, then any. */
static int32_t pick_traces(const sf_trace_layer *l, int64_t T, int64_t *chosen)
{
    static const int plan[] = {0, 0, 1, 2, 0, 0, 0, 0, 1, 1, 2, 2};
    int32_t k = 0;
    for (size_t p = 0; p < sizeof plan / sizeof plan[0] && k < TRACES; p++) {
        int64_t best = -1;
        double best_score = -INFINITY;
        for (int64_t i = 0; i < l->n; i++) {
            int taken = 0;
            for (int32_t j = 0; j < k; j++) taken |= chosen[j] == i;
            double sc = taken ? -INFINITY : score(l, T, i, plan[p]);
            if (sc > best_score) best = i, best_score = sc;
        }
        if (best >= 0) chosen[k++] = best;
    }
    return k;
}

static void draw_membrane(cairo_t *cr, const sf_figure *f)
{
    const sf_trace *tr = f->data->trace;
    const sf_trace_layer *l = &tr->lif[f->item];
    int64_t chosen[TRACES];
    int32_t k = pick_traces(l, tr->T, chosen);
    double *x = malloc((size_t)tr->T * sizeof *x), *y = malloc((size_t)(TRACES * 2 * tr->T) * sizeof *y);
    if (!x || !y) goto done;
    /* s[0]: the threshold across the whole plot (drawn under the traces, first in the legend); then per neuron its
     * trace and, on top, its spikes */
    char labels[TRACES][64], text[64];
    double tx[2] = {0, 0}, ty[2] = {l->threshold, l->threshold};
    snprintf(text, sizeof text, "threshold %g", (double)l->threshold);
    sf_series s[TRACES * 2 + 1] = {
        {.x = tx, .y = ty, .n = 2, .label = text, .color = sf_threshold, .width = 1.6, .dashed = 1}};
    for (int64_t t = 0; t < tr->T; t++) x[t] = (double)t;
    for (int32_t j = 0; j < k; j++) {
        double *h = y + j * 2 * tr->T, *fired = h + tr->T;
        int64_t spikes = 0;
        for (int64_t t = 0; t < tr->T; t++) {
            h[t] = l->membrane[t * l->n + chosen[j]];
            int spike = l->spikes[t * l->n + chosen[j]] != 0;
            fired[t] = spike ? h[t] : NAN;
            spikes += spike;
        }
        snprintf(labels[j], sizeof labels[j], "neuron %lld: %lld spike%s", (long long)chosen[j], (long long)spikes,
                 spikes == 1 ? "" : "s");
        sf_rgb color = sf_palette(j < 3 ? j : j + 1); /* not palette 3, the red of the threshold */
        s[1 + 2 * j] =
            (sf_series){.x = x, .y = h, .n = tr->T, .label = labels[j], .color = color, .width = 2.0, .marker = 3};
        s[2 + 2 * j] = (sf_series){.x = x, .y = fired, .n = tr->T, .color = color, .marker = 6.5};
    }
    char title[128], subtitle[256];
    snprintf(title, sizeof title, "Membrane potential in layer %d (LIF), test sample %lld", (int)l->layer,
             (long long)tr->sample);
    snprintf(
        subtitle, sizeof subtitle,
        "%d of its %lld neurons: some firing now and then, silent, always firing; h before the reset; dot: a spike",
        (int)k, (long long)l->n);
    sf_figure_heading(cr, SF_FIG_W, SF_FIG_H, title, subtitle);
    sf_axes ax;
    sf_axes_place(&ax, LEGEND_OUTSIDE);
    double xlo = 0, xhi = 0, ylo = 0, yhi = 0;
    sf_series_range(s, 1 + 2 * k, &xlo, &xhi, &ylo, &yhi);
    sf_axes_set_x(&ax, 0, (double)tr->T - 1, 1);
    sf_axes_set_y(&ax, ylo, yhi, 0);
    tx[0] = ax.x0, tx[1] = ax.x1;
    ax.xlabel = "time step";
    ax.ylabel = "membrane potential h";
    sf_axes_draw(cr, &ax);
    sf_plot_series(cr, &ax, s, 1 + 2 * k);
    /* beside the plot: traces cross every corner of it */
    double ly = ax.top + 8;
    for (int32_t j = 0; j < 1 + 2 * k; j++)
        if (s[j].label) ly += sf_legend_entry(cr, ax.left + ax.width + 18, ly, &s[j]);
done:
    free(x);
    free(y);
}

void sf_layer_figures(const sf_plot_data *d, sf_figure_list *list)
{
    const sf_trace *tr = d->trace;
    for (int32_t i = 0; i < tr->n_lif; i++) {
        const sf_trace_layer *l = &tr->lif[i];
        char name[64], which[96];
        sf_subset sub;
        sf_subset_pick(l->spikes, tr->T, l->n, 1, &sub);
        sf_subset_describe(&sub, "neuron", which, sizeof which);
        snprintf(name, sizeof name, "sample_spikes_layer%d", (int)l->layer);
        sf_figure *f = sf_figure_add(list, name, draw_spikes, d, i);
        if (f)
            snprintf(f->caption, sizeof f->caption, "Spike raster of layer %d (LIF) for test sample %lld: %s.",
                     (int)l->layer, (long long)tr->sample, which);
        snprintf(name, sizeof name, "sample_membrane_layer%d", (int)l->layer);
        f = sf_figure_add(list, name, draw_membrane, d, i);
        if (f)
            snprintf(f->caption, sizeof f->caption,
                     "Membrane potential of a few neurons of layer %d (firing at some steps, never, at every step), "
                     "with the threshold %g.",
                     (int)l->layer, (double)l->threshold);
    }
}
