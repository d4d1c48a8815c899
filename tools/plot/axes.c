/* axes.c — ranges, ticks, frame, series and legend of axes.h. */
#include "plot/axes.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TICK_LEN 4.0
#define LEGEND_ROW 19.0
#define LEGEND_SAMPLE 26.0
#define LEGEND_PAD 8.0

void sf_axes_place(sf_axes *ax, double extra_right)
{
    *ax = (sf_axes){0};
    ax->left = SF_MARGIN_LEFT;
    ax->top = SF_MARGIN_TOP;
    ax->width = SF_FIG_W - SF_MARGIN_LEFT - SF_MARGIN_RIGHT - extra_right;
    ax->height = SF_FIG_H - SF_MARGIN_TOP - SF_MARGIN_BOTTOM;
    ax->x0 = ax->y0 = 0;
    ax->x1 = ax->y1 = 1;
    ax->xstep = ax->ystep = 0.2;
}

/* A round step (1, 2, 2.5 or 5 times a power of ten; no 2.5 for whole numbers) giving about `ticks` intervals. */
static double round_step(double span, int ticks, int integer)
{
    double raw = span / ticks, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    double nice = f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : (f <= 2.5 && !integer) ? 2.5 : f <= 5.0 ? 5.0 : 10.0;
    double step = nice * mag;
    return integer && step < 1.0 ? 1.0 : step;
}

/* An empty or single-valued range becomes one of some width around the value, wide enough that doubles tell its
 * ticks apart (a range near 1e19 is no wider by ±1). */
static void widen(double *lo, double *hi, int integer)
{
    if (!isfinite(*lo) || !isfinite(*hi) || fabs(*lo) > 1e300 || fabs(*hi) > 1e300) *lo = 0, *hi = 1;
    const double m = fmax(fabs(*lo), fabs(*hi));
    if (*hi - *lo > m * 1e-9) return;
    const double d = fmax(integer ? 1.0 : fmax(m * 0.1, 1e-3), m * 1e-6);
    *lo -= d;
    *hi += d;
}

/* One axis shows exactly [lo, hi] with about `ticks` round intervals. */
static void set_exact(double *from, double *to, double *step, double lo, double hi, int integer, int ticks)
{
    widen(&lo, &hi, integer);
    *from = lo;
    *to = hi;
    *step = round_step(hi - lo, ticks, integer);
}

void sf_axes_set_x_exact(sf_axes *ax, double lo, double hi, int integer)
{
    set_exact(&ax->x0, &ax->x1, &ax->xstep, lo, hi, integer, 8);
}

void sf_axes_set_x(sf_axes *ax, double lo, double hi, int integer)
{
    widen(&lo, &hi, integer);
    double pad = fmax((hi - lo) * 0.025, integer ? 0.3 : 0);
    sf_axes_set_x_exact(ax, lo - pad, hi + pad, integer);
}

void sf_axes_set_y_exact(sf_axes *ax, double lo, double hi, int integer)
{
    set_exact(&ax->y0, &ax->y1, &ax->ystep, lo, hi, integer, 6);
}

void sf_axes_set_y(sf_axes *ax, double lo, double hi, int integer)
{
    widen(&lo, &hi, integer);
    /* a little room, so no line runs along the frame unless the data ends on a round value far from it */
    double pad = (hi - lo) * 0.02;
    lo = lo >= 0 && lo - pad < 0 ? 0 : lo - pad; /* never below 0 for data that is not */
    hi += pad;
    double step = round_step(hi - lo, 5, integer);
    ax->y0 = floor(lo / step + 1e-9) * step;
    ax->y1 = ceil(hi / step - 1e-9) * step;
    if (ax->y1 <= ax->y0) ax->y1 = ax->y0 + step;
    ax->ystep = step;
}

/* Canvas coordinates far off the figure are held at a distance cairo's fixed-point coordinates still hold (a value
 * millions of times past the axis range would make its matrix invalid); what lies there is clipped anyway. */
#define FAR_PX 1e6

static double held(double px) { return px > FAR_PX ? FAR_PX : px < -FAR_PX ? -FAR_PX : px; }

double sf_axes_px(const sf_axes *ax, double x)
{
    return held(ax->left + (x - ax->x0) / (ax->x1 - ax->x0) * ax->width);
}

double sf_axes_py(const sf_axes *ax, double y)
{
    return held(ax->top + ax->height - (y - ax->y0) / (ax->y1 - ax->y0) * ax->height);
}

/* Decimals that show every multiple of `step` exactly (0.25 needs 2). */
static int decimals(double step)
{
    for (int d = 0; d < 8; d++) {
        double scaled = step * pow(10.0, d);
        if (fabs(scaled - round(scaled)) < 1e-6 * fmax(1.0, scaled)) return d;
    }
    return 8;
}

/* Small values (below 0.01) are shown as multiples of a power of ten that the axis title names: 2.5, not 0.0025. */
static int tick_power(double lo, double hi)
{
    double m = fmax(fabs(lo), fabs(hi));
    return m > 0 && m < 1e-2 ? (int)floor(log10(m)) : 0;
}

/* "×10⁻³" for power -3 (UTF-8 superscripts, which the figures' font has). */
static void power_text(int power, char *buf, size_t cap)
{
    static const char *const sup[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
    char digits[16];
    snprintf(digits, sizeof digits, "%d", power < 0 ? -power : power);
    snprintf(buf, cap, "×10%s", power < 0 ? "⁻" : "");
    for (const char *d = digits; *d; d++) snprintf(buf + strlen(buf), cap - strlen(buf), "%s", sup[*d - '0']);
}

static void tick_label(char *buf, size_t cap, double v, double step, const char *suffix)
{
    if (fabs(v) < step * 1e-6) v = 0; /* no "-0" */
    int d = decimals(step);
    if (d > 5) snprintf(buf, cap, "%.2g%s", v, suffix ? suffix : "");
    else snprintf(buf, cap, "%.*f%s", d, v, suffix ? suffix : "");
}

/* Canvas coordinates snapped to the pixel grid so 1 px lines stay sharp. */
static double crisp(double v) { return floor(v) + 0.5; }

#define MAX_TICKS 64
#define MAX_LINE_SAMPLES 1024

/* The multiples of step in [lo, hi], counted by an integer so that the loop ends whatever the doubles do: *first,
 * and the count (0 for no step or more than MAX_TICKS). */
static int tick_count(double lo, double hi, double step, double *first)
{
    if (!(step > 0) || !isfinite(lo) || !isfinite(hi)) return 0;
    const double k0 = ceil(lo / step - 1e-9), k1 = floor(hi / step + 1e-9);
    *first = k0 * step;
    return k1 >= k0 && k1 - k0 < MAX_TICKS ? (int)(k1 - k0) + 1 : 0;
}

void sf_axes_draw(cairo_t *cr, const sf_axes *ax)
{
    char buf[64];
    double bottom = ax->top + ax->height, right = ax->left + ax->width;
    cairo_set_line_width(cr, 1.0);
    sf_set_font(cr, SF_FONT_TICK, 0);
    /* ticks: multiples of the step inside the range (none when the step is 0) */
    double first = 0;
    for (int k = 0, n = tick_count(ax->x0, ax->x1, ax->xstep, &first); k < n; k++) {
        const double v = first + k * ax->xstep, x = crisp(sf_axes_px(ax, v));
        sf_set_color(cr, sf_grid);
        cairo_move_to(cr, x, ax->top);
        cairo_line_to(cr, x, bottom);
        cairo_stroke(cr);
        sf_set_color(cr, sf_muted);
        cairo_move_to(cr, x, bottom);
        cairo_line_to(cr, x, bottom + TICK_LEN);
        cairo_stroke(cr);
        tick_label(buf, sizeof buf, v, ax->xstep, NULL);
        sf_text(cr, x, bottom + TICK_LEN + 3, 0.5, 0, 0, buf);
    }
    int power = tick_power(ax->y0, ax->y1);
    double scale = pow(10.0, -power), widest = 0;
    for (int k = 0, n = tick_count(ax->y0, ax->y1, ax->ystep, &first); k < n; k++) {
        const double v = first + k * ax->ystep, y = crisp(sf_axes_py(ax, v));
        sf_set_color(cr, sf_grid);
        cairo_move_to(cr, ax->left, y);
        cairo_line_to(cr, right, y);
        cairo_stroke(cr);
        sf_set_color(cr, sf_muted);
        cairo_move_to(cr, ax->left - TICK_LEN, y);
        cairo_line_to(cr, ax->left, y);
        cairo_stroke(cr);
        if (ax->y_names) snprintf(buf, sizeof buf, "%lld", (long long)ax->y_names[(int64_t)llround(v)]);
        else tick_label(buf, sizeof buf, v * scale, ax->ystep * scale, ax->y_suffix);
        widest = fmax(widest, sf_text(cr, ax->left - TICK_LEN - 4, y, 1, 0.5, 0, buf));
    }
    sf_set_color(cr, sf_muted);
    cairo_rectangle(cr, crisp(ax->left), crisp(ax->top), floor(ax->width), floor(ax->height));
    cairo_stroke(cr);
    sf_set_color(cr, sf_ink);
    sf_set_font(cr, SF_FONT_LABEL, 0);
    if (ax->xlabel) sf_text(cr, ax->left + ax->width / 2, SF_FIG_H - 8, 0.5, 1, 0, ax->xlabel);
    if (ax->ylabel) {
        /* rotated, just left of the widest tick label */
        char title[160], times[32] = "";
        if (power) power_text(power, times, sizeof times);
        snprintf(title, sizeof title, power ? "%s (%s)" : "%s", ax->ylabel, times);
        double x = fmax(ax->left - TICK_LEN - 4 - widest - 8, SF_FONT_LABEL + 4);
        sf_text(cr, x, ax->top + ax->height / 2, 0.5, 1, -SF_PI / 2, title);
    }
}

void sf_axes_clip(cairo_t *cr, const sf_axes *ax, double slack)
{
    cairo_rectangle(cr, ax->left - slack, ax->top - slack, ax->width + 2 * slack, ax->height + 2 * slack);
    cairo_clip(cr);
}

int64_t sf_series_range(const sf_series *s, int n, double *xlo, double *xhi, double *ylo, double *yhi)
{
    int64_t count = 0;
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < s[k].n; i++) {
            double x = s[k].x[i], y = s[k].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            if (count == 0) {
                *xlo = *xhi = x;
                *ylo = *yhi = y;
            }
            *xlo = fmin(*xlo, x), *xhi = fmax(*xhi, x);
            *ylo = fmin(*ylo, y), *yhi = fmax(*yhi, y);
            count++;
        }
    return count;
}

static double opacity(const sf_series *s) { return s->alpha > 0 ? s->alpha : 1.0; }

static void draw_marker(cairo_t *cr, double x, double y, const sf_series *s)
{
    cairo_arc(cr, x, y, s->marker, 0, 2 * SF_PI);
    sf_set_color_alpha(cr, s->color, opacity(s));
    cairo_fill_preserve(cr);
    sf_set_color(cr, sf_paper);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
}

static void set_pen(cairo_t *cr, const sf_series *s)
{
    static const double dash[] = {7.0, 4.0};
    cairo_set_line_width(cr, s->width);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, s->dashed ? CAIRO_LINE_CAP_BUTT : CAIRO_LINE_CAP_ROUND);
    cairo_set_dash(cr, dash, s->dashed ? 2 : 0, 0);
}

static void draw_line(cairo_t *cr, const sf_axes *ax, const sf_series *s)
{
    int pen_down = 0;
    for (int64_t i = 0; i < s->n; i++) {
        if (!isfinite(s->x[i]) || !isfinite(s->y[i])) {
            pen_down = 0;
            continue;
        }
        double x = sf_axes_px(ax, s->x[i]), y = sf_axes_py(ax, s->y[i]);
        if (pen_down) cairo_line_to(cr, x, y);
        else cairo_move_to(cr, x, y);
        pen_down = 1;
    }
    sf_set_color_alpha(cr, s->color, opacity(s));
    set_pen(cr, s);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
}

void sf_plot_series(cairo_t *cr, const sf_axes *ax, const sf_series *s, int n)
{
    cairo_save(cr);
    sf_axes_clip(cr, ax, 6);
    for (int k = 0; k < n; k++) {
        if (s[k].width > 0) draw_line(cr, ax, &s[k]);
        for (int64_t i = 0; s[k].marker > 0 && i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i]))
                draw_marker(cr, sf_axes_px(ax, s[k].x[i]), sf_axes_py(ax, s[k].y[i]), &s[k]);
    }
    cairo_restore(cr);
}

double sf_legend_entry(cairo_t *cr, double x, double y, const sf_series *s)
{
    if (s->width > 0) {
        sf_set_color_alpha(cr, s->color, opacity(s));
        set_pen(cr, s);
        cairo_set_line_width(cr, fmax(s->width, 1.5));
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + LEGEND_SAMPLE, y);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
    }
    if (s->marker > 0) draw_marker(cr, x + LEGEND_SAMPLE / 2, y, s);
    sf_set_color(cr, sf_ink);
    sf_set_font(cr, SF_FONT_LEGEND, 0);
    sf_text(cr, x + LEGEND_SAMPLE + 7, y, 0, 0.5, 0, s->label);
    return LEGEND_ROW;
}

static int inside(double px, double py, double x, double y, double w, double h)
{
    return px >= x && px <= x + w && py >= y && py <= y + h;
}

/* How much of the series a canvas rectangle would hide: their points, and their lines sampled every 3 px. */
static int64_t covered(const sf_axes *ax, const sf_series *s, int n, double x, double y, double w, double h)
{
    int64_t count = 0;
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < s[k].n; i++) {
            double px = sf_axes_px(ax, s[k].x[i]), py = sf_axes_py(ax, s[k].y[i]);
            if (!isfinite(px) || !isfinite(py)) continue;
            count += inside(px, py, x, y, w, h);
            if (i == 0 || s[k].width <= 0) continue;
            double qx = sf_axes_px(ax, s[k].x[i - 1]), qy = sf_axes_py(ax, s[k].y[i - 1]);
            if (!isfinite(qx) || !isfinite(qy)) continue;
            /* a line longer than the canvas is sampled no finer than one across it */
            const double len = hypot(px - qx, py - qy);
            const int64_t steps = len < 3.0 * MAX_LINE_SAMPLES ? (int64_t)(len / 3.0) : MAX_LINE_SAMPLES;
            for (int64_t j = 1; j < steps; j++) {
                double t = (double)j / (double)steps;
                count += inside(qx + (px - qx) * t, qy + (py - qy) * t, x, y, w, h);
            }
        }
    return count;
}

void sf_plot_legend(cairo_t *cr, const sf_axes *ax, const sf_series *s, int n)
{
    int rows = 0;
    double text_w = 0;
    sf_set_font(cr, SF_FONT_LEGEND, 0);
    for (int k = 0; k < n; k++)
        if (s[k].label) {
            rows++;
            text_w = fmax(text_w, sf_text_width(cr, s[k].label));
        }
    if (rows == 0) return;
    double w = LEGEND_PAD * 2 + LEGEND_SAMPLE + 7 + text_w, h = LEGEND_PAD * 2 + rows * LEGEND_ROW - 4;
    const double inset = 10;
    const double corners[4][2] = {{ax->left + ax->width - inset - w, ax->top + inset},
                                  {ax->left + inset, ax->top + inset},
                                  {ax->left + ax->width - inset - w, ax->top + ax->height - inset - h},
                                  {ax->left + inset, ax->top + ax->height - inset - h}};
    int best = 0;
    int64_t fewest = -1;
    for (int c = 0; c < 4; c++) {
        int64_t under = covered(ax, s, n, corners[c][0], corners[c][1], w, h);
        if (fewest < 0 || under < fewest) fewest = under, best = c;
    }
    double x = corners[best][0], y = corners[best][1];
    cairo_rectangle(cr, x, y, w, h);
    sf_set_color_alpha(cr, sf_paper, 0.88);
    cairo_fill_preserve(cr);
    sf_set_color(cr, sf_grid);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
    double row_y = y + LEGEND_PAD + LEGEND_ROW / 2 - 2;
    for (int k = 0; k < n; k++)
        if (s[k].label) row_y += sf_legend_entry(cr, x + LEGEND_PAD, row_y, &s[k]);
}
