/* raster.h — grids of cells over time steps (spike rasters, input rasters): which neurons a grid shows when a layer
 * has too many for one row each, the cells themselves, and a colour bar for analog values. */
#ifndef SF_PLOT_RASTER_H
#define SF_PLOT_RASTER_H

#include "plot/axes.h"

#include <stddef.h>
#include <stdint.h>

/* Neurons 0, stride, 2·stride, ... below n: `count` of them. */
typedef struct sf_subset {
    int64_t n, stride, count;
} sf_subset;

/* Every neuron when n <= max_rows, else evenly spaced ones (an unbiased view, never the most active). */
void sf_subset_pick(int64_t n, int64_t max_rows, sf_subset *out);
/* "all 32 neurons" or "every 8th neuron (64 of 512)". */
void sf_subset_describe(const sf_subset *s, const char *what, char *buf, size_t cap);

/* Time steps 0..T-1 across, the subset's neuron indices up (so the y ticks are real indices). */
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
