/* raster.c — neuron subsets, cell grids and the colour bar of raster.h. */
#include "plot/raster.h"

#include <math.h>
#include <stdio.h>

static int spikes_ever(const float *v, int64_t T, int64_t n, int64_t i)
{
    for (int64_t t = 0; t < T; t++)
        if (v[t * n + i] != 0) return 1;
    return 0;
}

void sf_subset_pick(const float *v, int64_t T, int64_t n, int binary, sf_subset *out)
{
    out->n = n;
    out->stride = 1;
    out->active = -1;
    out->count = 0;
    if (n <= SF_RASTER_ROWS) {
        for (int64_t i = 0; i < n; i++) out->idx[out->count++] = i;
    } else if (!binary) {
        out->stride = (n + SF_RASTER_ROWS - 1) / SF_RASTER_ROWS;
        for (int64_t i = 0; i < n; i += out->stride) out->idx[out->count++] = i;
    } else {
        out->active = 0;
        for (int64_t i = 0; i < n; i++) out->active += spikes_ever(v, T, n, i);
        int64_t rows = out->active < SF_RASTER_ROWS ? out->active : SF_RASTER_ROWS;
        /* row j shows the (j·active/rows)-th neuron that spikes */
        for (int64_t i = 0, k = 0; i < n && out->count < rows; i++) {
            if (!spikes_ever(v, T, n, i)) continue;
            if (k++ == out->count * out->active / rows) out->idx[out->count++] = i;
        }
    }
}

static const char *ordinal_suffix(int64_t k)
{
    if (k % 100 >= 11 && k % 100 <= 13) return "th";
    return k % 10 == 1 ? "st" : k % 10 == 2 ? "nd" : k % 10 == 3 ? "rd" : "th";
}

void sf_subset_describe(const sf_subset *s, const char *what, char *buf, size_t cap)
{
    long long n = (long long)s->n, count = (long long)s->count, active = (long long)s->active;
    if (s->active == 0) snprintf(buf, cap, "none of the %lld %ss spikes", n, what);
    else if (s->active > 0 && count == active) snprintf(buf, cap, "the %lld of %lld %ss that spike", active, n, what);
    else if (s->active > 0)
        snprintf(buf, cap, "%lld of the %lld %ss that spike (of %lld), evenly spaced", count, active, what, n);
    else if (s->stride > 1)
        snprintf(buf, cap, "every %lld%s %s (%lld of %lld)", (long long)s->stride, ordinal_suffix(s->stride), what,
                 count, n);
    else snprintf(buf, cap, "all %lld %ss", n, what);
}

void sf_raster_axes(sf_axes *ax, int64_t T, const sf_subset *sub)
{
    sf_axes_set_x_exact(ax, -0.5, (double)T - 0.5, 1);
    sf_axes_set_y_exact(ax, -0.5, (double)(sub->count > 0 ? sub->count : 1) - 0.5, 1);
    ax->y_names = sub->idx;
    if (sub->count == 0) ax->ystep = 0; /* no rows, no ticks */
    ax->xlabel = "time step";
}

int sf_values_binary(const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] != 0.0f && v[i] != 1.0f) return 0;
    return 1;
}

sf_rgb sf_diverging(double t)
{
    static const sf_rgb cold = {0.13, 0.35, 0.66}, hot = {0.75, 0.16, 0.16};
    t = fmax(-1.0, fmin(1.0, t));
    return t < 0 ? sf_mix(sf_paper, cold, -t) : sf_mix(sf_paper, hot, t);
}

void sf_raster_cells(cairo_t *cr, const sf_axes *ax, const float *v, int64_t T, const sf_subset *sub, int binary,
                     double vmax)
{
    /* A gap between cells keeps single spikes apart when cells are large; small cells get none. */
    double cw = ax->width / (double)T, ch = ax->height / (double)(sub->count > 0 ? sub->count : 1);
    double gx = cw > 8 ? 1.5 : 0, gy = ch >= 4 ? 1 : 0;
    cairo_save(cr);
    sf_axes_clip(cr, ax, 0);
    for (int64_t r = 0; r < sub->count; r++) {
        int64_t neuron = sub->idx[r];
        double y = sf_axes_py(ax, (double)r + 0.5);
        for (int64_t t = 0; t < T; t++) {
            double value = v[t * sub->n + neuron];
            if (binary && value == 0) continue;
            sf_set_color(cr, binary ? sf_spike : sf_diverging(vmax > 0 ? value / vmax : 0));
            cairo_rectangle(cr, sf_axes_px(ax, (double)t - 0.5) + gx / 2, y + gy / 2, cw - gx, ch - gy);
            cairo_fill(cr);
        }
    }
    cairo_restore(cr);
}

void sf_colorbar(cairo_t *cr, double x, double y, double w, double h, double vmax, const char *label)
{
    cairo_pattern_t *g = cairo_pattern_create_linear(0, y + h, 0, y);
    for (int i = 0; i <= 8; i++) {
        sf_rgb c = sf_diverging(i / 4.0 - 1.0);
        cairo_pattern_add_color_stop_rgb(g, i / 8.0, c.r, c.g, c.b);
    }
    cairo_rectangle(cr, x, y, w, h);
    cairo_set_source(cr, g);
    cairo_fill_preserve(cr);
    cairo_pattern_destroy(g);
    sf_set_color(cr, sf_muted);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
    char text[32];
    sf_set_font(cr, SF_FONT_TICK, 0);
    const double values[3] = {vmax, 0, -vmax};
    for (int i = 0; i < 3; i++) {
        snprintf(text, sizeof text, "%.2g", fabs(values[i]) < 1e-12 ? 0.0 : values[i]);
        sf_text(cr, x + w + 4, y + h * i / 2.0, 0, 0.5, 0, text);
    }
    sf_set_color(cr, sf_ink);
    sf_set_font(cr, SF_FONT_LABEL, 0);
    sf_text(cr, x + w / 2, y - 8, 0.5, 1, 0, label);
}
