/* raster.h — grids of cells over time steps (spike rasters, input rasters): which neurons a grid shows when a layer
 * has too many for one row each, the cells themselves, and a colour bar for analog values. */
#ifndef SF_PLOT_RASTER_H
#define SF_PLOT_RASTER_H

#include "plot/axes.h"

#include <stddef.h>
#include <stdint.h>

#define SF_RASTER_ROWS 64

/* The rows of a raster: which of a layer's n neurons it shows, in index order. */
typedef struct sf_subset {
    int64_t n;                   /* neurons in the layer */
    int64_t stride;              /* analog values of a large layer: every stride-th neuron; else 1 */
    int64_t active;              /* spikes of a large layer: how many neurons spike at least once (-1: not counted) */
    int64_t count;               /* rows */
    int64_t idx[SF_RASTER_ROWS]; /* the neuron of each row, ascending */
} sf_subset;

/* The rows for values v [T, n]: every neuron when n <= SF_RASTER_ROWS; else, for spikes, the neurons that spike at
 * least once (evenly spaced among them when there are more than SF_RASTER_ROWS: a large layer's silent rows would
 * show nothing), and for analog values every stride-th neuron. */
void sf_subset_pick(const float *v, int64_t T, int64_t n, int binary, sf_subset *out);
/* What the rows are, e.g. "all 32 neurons", "every 13th input (61 of 784)", "the 41 of 3136 neurons that spike". */
void sf_subset_describe(const sf_subset *s, const char *what, char *buf, size_t cap);

/* Time steps 0..T-1 across, one row per neuron of the subset up, the y ticks naming the neurons. */
void sf_raster_axes(sf_axes *ax, int64_t T, const sf_subset *sub);
/* Cells of values v [T, n] for the subset: spikes (binary) filled, analog values coloured over [-vmax, vmax]. */
void sf_raster_cells(cairo_t *cr, const sf_axes *ax, const float *v, int64_t T, const sf_subset *sub, int binary,
                     double vmax);
/* Whether every value is 0 or 1. */
int sf_values_binary(const float *v, int64_t n);

/* Blue (-1) through white (0) to red (+1). */
sf_rgb sf_diverging(double t);
/* A vertical colour bar of the diverging map at (x, y, w, h) labelled -vmax, 0, vmax and `label`. */
void sf_colorbar(cairo_t *cr, double x, double y, double w, double h, double vmax, const char *label);

#endif
