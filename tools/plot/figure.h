/* figure.h — the figures of a run: each is a drawing function over a SF_FIG_W × SF_FIG_H canvas that cairo renders
 * to a PNG file and to SVG text (a file, or inline in the report page). */
#ifndef SF_PLOT_FIGURE_H
#define SF_PLOT_FIGURE_H

#include "plot/buffer.h"
#include "plot/run.h"

#include <cairo.h>

typedef struct sf_plot_data {
    const sf_run *run;
    const sf_trace *trace; /* NULL when no sample could be run */
} sf_plot_data;

typedef struct sf_figure sf_figure;
struct sf_figure {
    char name[64];     /* file stem: NAME.png, NAME.svg */
    char caption[512]; /* what it shows, for the report page */
    void (*draw)(cairo_t *cr, const sf_figure *f);
    const sf_plot_data *data;
    int32_t item; /* per-layer figures: which of the trace's LIF layers */
};

#define SF_FIGURES_MAX 48
typedef struct sf_figure_list {
    int n;
    sf_figure fig[SF_FIGURES_MAX];
} sf_figure_list;

/* Adds a figure (ignored past SF_FIGURES_MAX); returns it so the caller can write its caption, or NULL. */
sf_figure *sf_figure_add(sf_figure_list *list, const char *name, void (*draw)(cairo_t *, const sf_figure *),
                         const sf_plot_data *data, int32_t item);

/* The figures of the training curves that the metrics allow: loss, accuracy, learning rate, firing rates. */
void sf_curve_figures(const sf_plot_data *d, sf_figure_list *list, sf_notes *notes);
/* The figures of the sample: its input, each LIF layer's spikes and membrane potentials (sf_layer_figures), the
 * output. */
void sf_sample_figures(const sf_plot_data *d, sf_figure_list *list);
void sf_layer_figures(const sf_plot_data *d, sf_figure_list *list);

/* Renders to a PNG file (written atomically) / appends the SVG document to `out`. */
sf_status sf_figure_png(const sf_figure *f, const char *path);
sf_status sf_figure_svg(const sf_figure *f, sf_buf *out);

#endif
