/* axes.h — a plot area on a figure: data ranges with round tick steps, the mapping from data to canvas, the frame
 * with grid, ticks and axis titles, series (lines and markers) and a legend placed where the data leaves room. */
#ifndef SF_PLOT_AXES_H
#define SF_PLOT_AXES_H

#include "plot/style.h"

#include <stdint.h>

/* Margins of the plot area inside a figure (px): room for the heading, tick labels and axis titles. */
#define SF_MARGIN_LEFT 78.0
#define SF_MARGIN_RIGHT 26.0
#define SF_MARGIN_TOP 74.0
#define SF_MARGIN_BOTTOM 56.0

typedef struct sf_axes {
    double left, top, width, height; /* the plot area on the canvas */
    double x0, x1, y0, y1;           /* the data range it shows */
    double xstep, ystep;             /* tick spacing */
    const char *xlabel, *ylabel;     /* axis titles with their units */
    const char *y_suffix;            /* written after each y tick label ("%"), or NULL */
    const int64_t *y_names;          /* when set, the tick at whole number r is labelled y_names[r] (raster rows) */
} sf_axes;

/* A plot area with the standard margins, `extra_right` px more on the right (for a legend outside). */
void sf_axes_place(sf_axes *ax, double extra_right);
/* The x range shows [lo, hi] with a little room on each side, ticks at round values inside; the y range is widened
 * to round values at both ends. `integer`: ticks only at whole numbers (epochs, time steps). */
void sf_axes_set_x(sf_axes *ax, double lo, double hi, int integer);
void sf_axes_set_y(sf_axes *ax, double lo, double hi, int integer);
/* Exactly [lo, hi] (grids of cells), ticks at round values inside. */
void sf_axes_set_x_exact(sf_axes *ax, double lo, double hi, int integer);
void sf_axes_set_y_exact(sf_axes *ax, double lo, double hi, int integer);
/* Canvas coordinates of data values. */
double sf_axes_px(const sf_axes *ax, double x);
double sf_axes_py(const sf_axes *ax, double y);
/* Grid, frame, ticks, tick labels and the axis titles. */
void sf_axes_draw(cairo_t *cr, const sf_axes *ax);
/* Clips drawing to the plot area (with `slack` px around it); undo with cairo_reset_clip. */
void sf_axes_clip(cairo_t *cr, const sf_axes *ax, double slack);

typedef struct sf_series {
    const double *x, *y; /* n points; a NaN y breaks the line */
    int64_t n;
    const char *label; /* NULL: not in the legend */
    sf_rgb color;
    double width;  /* line width (px); 0: no line */
    double marker; /* marker radius (px); 0: none */
    double alpha;  /* opacity; 0 means opaque */
    int dashed;    /* a dashed line (reference lines such as a threshold) */
} sf_series;

/* The range of the finite values of `n` series (unchanged where there are none); returns the number of points. */
int64_t sf_series_range(const sf_series *s, int n, double *xlo, double *xhi, double *ylo, double *yhi);
/* Draws the series in order, clipped to the plot area. */
void sf_plot_series(cairo_t *cr, const sf_axes *ax, const sf_series *s, int n);
/* The legend of the labelled series, inside the plot area in the corner that covers the least of their lines. */
void sf_plot_legend(cairo_t *cr, const sf_axes *ax, const sf_series *s, int n);
/* A legend entry drawn at (x, y) (its left middle); returns the height it takes. */
double sf_legend_entry(cairo_t *cr, double x, double y, const sf_series *s);

#endif
