/* style.h — the one look every figure shares: canvas size, margins, fonts, colours and line widths, and the text
 * helpers that place labels by their alignment. */
#ifndef SF_PLOT_STYLE_H
#define SF_PLOT_STYLE_H

#include <cairo.h>

#define SF_PI 3.14159265358979323846

/* Every figure is this size (pixels in the PNG, px units in the SVG). */
#define SF_FIG_W 800
#define SF_FIG_H 450

/* Font sizes (px) */
#define SF_FONT_TITLE 17.0
#define SF_FONT_SUBTITLE 12.5
#define SF_FONT_LABEL 13.0
#define SF_FONT_TICK 11.5
#define SF_FONT_LEGEND 12.0

typedef struct sf_rgb {
    double r, g, b;
} sf_rgb;

extern const sf_rgb sf_ink;       /* text, frame */
extern const sf_rgb sf_muted;     /* subtitles, tick labels */
extern const sf_rgb sf_grid;      /* grid lines */
extern const sf_rgb sf_paper;     /* the background */
extern const sf_rgb sf_spike;     /* a spike in a raster */
extern const sf_rgb sf_threshold; /* the firing threshold line */
/* The i-th colour of the series palette (10 distinct hues, repeating). */
sf_rgb sf_palette(int i);
/* The colour at t in [0, 1] between `a` and `b`. */
sf_rgb sf_mix(sf_rgb a, sf_rgb b, double t);

void sf_set_color(cairo_t *cr, sf_rgb c);
void sf_set_color_alpha(cairo_t *cr, sf_rgb c, double alpha);
/* Selects the figures' sans-serif face at `size` px. */
void sf_set_font(cairo_t *cr, double size, int bold);
/* Draws `text` so that the point (x, y) sits at fraction (ax, ay) of its box (0, 0: top left; 0.5, 0.5: centre;
 * 1, 1: bottom right), rotated by `angle` radians about that point. Returns the text's width. */
double sf_text(cairo_t *cr, double x, double y, double ax, double ay, double angle, const char *text);
double sf_text_width(cairo_t *cr, const char *text);
/* The figure's background, title and subtitle (subtitle may be NULL). */
void sf_figure_heading(cairo_t *cr, double width, double height, const char *title, const char *subtitle);

#endif
