/* style.c — the palette, fonts and text placement of style.h. */
#include "plot/style.h"

#include <math.h>

const sf_rgb sf_ink = {0.13, 0.14, 0.16};
const sf_rgb sf_muted = {0.40, 0.42, 0.46};
const sf_rgb sf_grid = {0.89, 0.90, 0.92};
const sf_rgb sf_paper = {1.0, 1.0, 1.0};
const sf_rgb sf_spike = {0.10, 0.16, 0.30};
const sf_rgb sf_threshold = {0.80, 0.15, 0.15};

/* Hues far enough apart to tell ten lines apart, and dark enough to read on white. */
static const sf_rgb palette[] = {
    {0.12, 0.40, 0.72}, {0.91, 0.47, 0.07}, {0.17, 0.58, 0.27}, {0.80, 0.18, 0.20}, {0.52, 0.36, 0.72},
    {0.56, 0.37, 0.24}, {0.86, 0.40, 0.68}, {0.42, 0.43, 0.45}, {0.64, 0.64, 0.10}, {0.07, 0.66, 0.72},
};

sf_rgb sf_palette(int i)
{
    int n = (int)(sizeof palette / sizeof palette[0]);
    return palette[((i % n) + n) % n];
}

sf_rgb sf_mix(sf_rgb a, sf_rgb b, double t)
{
    return (sf_rgb){a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t};
}

void sf_set_color(cairo_t *cr, sf_rgb c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

void sf_set_color_alpha(cairo_t *cr, sf_rgb c, double alpha) { cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha); }

void sf_set_font(cairo_t *cr, double size, int bold)
{
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

double sf_text_width(cairo_t *cr, const char *text)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, text, &e);
    return e.x_advance;
}

double sf_text(cairo_t *cr, double x, double y, double ax, double ay, double angle, const char *text)
{
    cairo_text_extents_t e;
    cairo_font_extents_t fe;
    cairo_text_extents(cr, text, &e);
    cairo_font_extents(cr, &fe);
    /* Vertical placement uses the font's ascent and descent, not the glyphs' box, so labels on one row share a
     * baseline whatever letters they hold. */
    double h = fe.ascent + fe.descent;
    if (!isfinite(x) || !isfinite(y)) return e.x_advance; /* no place to draw it (a cairo matrix may not hold NaN) */
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, angle);
    cairo_move_to(cr, -ax * e.x_advance, -ay * h + fe.ascent);
    cairo_show_text(cr, text);
    cairo_restore(cr);
    return e.x_advance;
}

void sf_figure_heading(cairo_t *cr, double width, double height, const char *title, const char *subtitle)
{
    sf_set_color(cr, sf_paper);
    cairo_rectangle(cr, 0, 0, width, height);
    cairo_fill(cr);
    sf_set_color(cr, sf_ink);
    sf_set_font(cr, SF_FONT_TITLE, 1);
    sf_text(cr, 16, 12, 0, 0, 0, title);
    if (subtitle && *subtitle) {
        sf_set_color(cr, sf_muted);
        sf_set_font(cr, SF_FONT_SUBTITLE, 0);
        /* a long subtitle gets a smaller font rather than running off the figure */
        double room = width - 32, w = sf_text_width(cr, subtitle);
        if (w > room) sf_set_font(cr, SF_FONT_SUBTITLE * room / w, 0);
        sf_text(cr, 16, 35, 0, 0, 0, subtitle);
    }
}
