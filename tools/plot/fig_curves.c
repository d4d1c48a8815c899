/* fig_curves.c — the training curves from metrics.jsonl: loss, accuracy and learning rate against training steps
 * (with the epochs marked along the top), and each LIF layer's firing rate against epochs. */
#include "plot/axes.h"
#include "plot/figure.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The double at `offset` of each of n records of `size` bytes, times `scale`, as a malloc'd array (NULL: no memory). */
static double *field(const void *records, int64_t n, size_t size, size_t offset, double scale)
{
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; v && i < n; i++) {
        memcpy(&v[i], (const char *)records + (size_t)i * size + offset, sizeof *v);
        v[i] *= scale;
    }
    return v;
}

static double *step_field(const sf_metrics_log *log, size_t offset, double scale)
{
    return field(log->steps, log->n_steps, sizeof *log->steps, offset, scale);
}

static double *epoch_field(const sf_metrics_log *log, size_t offset, double scale)
{
    return field(log->epochs, log->n_epochs, sizeof *log->epochs, offset, scale);
}

/* The middle of each epoch's steps: where a mean over the epoch belongs on a step axis. */
static double *epoch_middles(const sf_metrics_log *log)
{
    double *v = epoch_field(log, offsetof(sf_epoch_point, step), 1);
    for (int64_t i = log->n_epochs - 1; v && i >= 0; i--) v[i] = (v[i] + (i > 0 ? v[i - 1] : 0)) / 2;
    return v;
}

static int all_present(double *const *arrays, int n)
{
    for (int i = 0; i < n; i++)
        if (!arrays[i]) return 0;
    return 1;
}

static void free_all(double **arrays, int n)
{
    for (int i = 0; i < n; i++) free(arrays[i]);
}

/* The mean of each point's window of `w` neighbours (fewer at the ends), skipping NaNs. */
static void moving_mean(const double *y, int64_t n, int64_t w, double *out)
{
    for (int64_t i = 0; i < n; i++) {
        double sum = 0;
        int64_t count = 0;
        for (int64_t j = i - w / 2; j <= i + w / 2; j++)
            if (j >= 0 && j < n && isfinite(y[j])) sum += y[j], count++;
        out[i] = count ? sum / (double)count : NAN;
    }
}

/* What each step line is: the mean over the steps since the previous one (the config's log_every). */
static void describe_logged(const sf_metrics_log *log, const char *what, char *buf, size_t cap)
{
    const double every = log->n_steps >= 2   ? log->steps[1].step - log->steps[0].step
                         : log->n_steps == 1 ? log->steps[0].step
                                             : 0;
    if (!(every > 1 && every < 1e15)) snprintf(buf, cap, "%severy step", what);
    else snprintf(buf, cap, "%smean of each %.0f steps", what, every);
}

/* A palette colour lightened, for the noisy raw series under its smoothed or per-epoch twin. */
static sf_rgb faint(int i) { return sf_mix(sf_palette(i), sf_paper, 0.45); }

/* ---------------------------------------------------------------- the epochs along the top of a step axis */

/* The last step of each epoch (1-based index; NaN where unknown), from epoch and step lines. */
static double *epoch_ends(const sf_metrics_log *log, int64_t *n_out)
{
    double last = 0;
    for (int64_t i = 0; i < log->n_epochs; i++) last = fmax(last, log->epochs[i].epoch);
    for (int64_t i = 0; i < log->n_steps; i++) last = fmax(last, log->steps[i].epoch);
    int64_t n = last > 100000 ? 100000 : (int64_t)last;
    double *end = malloc((size_t)(n + 1) * sizeof *end);
    if (!end) return NULL;
    for (int64_t e = 0; e <= n; e++) end[e] = e == 0 ? 0 : NAN;
    for (int64_t i = 0; i < log->n_steps; i++) {
        const double e = log->steps[i].epoch;
        if (e >= 1 && e <= (double)n && !(end[(int64_t)e] >= log->steps[i].step)) end[(int64_t)e] = log->steps[i].step;
    }
    for (int64_t i = 0; i < log->n_epochs; i++) {
        const double e = log->epochs[i].epoch;
        if (e >= 1 && e <= (double)n && isfinite(log->epochs[i].step)) end[(int64_t)e] = log->epochs[i].step;
    }
    *n_out = n;
    return end;
}

/* Dashed lines where epochs end and "epoch k" above each epoch's span (every k-th when they would crowd). */
static void draw_epochs(cairo_t *cr, const sf_axes *ax, const sf_metrics_log *log)
{
    int64_t n = 0;
    double *end = epoch_ends(log, &n);
    if (!end || n == 0) {
        free(end);
        return;
    }
    double span_px = ax->width / (double)n;
    sf_set_font(cr, SF_FONT_TICK, 0);
    int64_t every = 1;
    while (every < n && span_px * (double)every < sf_text_width(cr, "epoch 000") + 10) every++;
    double dash[] = {4.0, 3.0};
    cairo_set_line_width(cr, 1.0);
    for (int64_t e = 1; e <= n; e++) {
        if (!isfinite(end[e])) continue;
        double x = floor(sf_axes_px(ax, end[e])) + 0.5;
        if (e < n && span_px >= 6) {
            cairo_set_dash(cr, dash, 2, 0);
            sf_set_color(cr, sf_mix(sf_grid, sf_muted, 0.35));
            cairo_move_to(cr, x, ax->top);
            cairo_line_to(cr, x, ax->top + ax->height);
            cairo_stroke(cr);
            cairo_set_dash(cr, NULL, 0, 0);
        }
        double start = isfinite(end[e - 1]) ? end[e - 1] : end[e];
        if ((e - 1) % every == 0 || e == n) {
            char label[32];
            snprintf(label, sizeof label, "epoch %lld", (long long)e);
            sf_set_color(cr, sf_muted);
            sf_text(cr, (sf_axes_px(ax, start) + sf_axes_px(ax, end[e])) / 2, ax->top - 4, 0.5, 1, 0, label);
        }
    }
    free(end);
}

/* The x axis of step plots: from step 0 to the last step any line logged. */
static void step_axis(sf_axes *ax, const sf_metrics_log *log)
{
    double last = 0;
    for (int64_t i = 0; i < log->n_steps; i++) last = fmax(last, log->steps[i].step);
    for (int64_t i = 0; i < log->n_epochs; i++) last = fmax(last, log->epochs[i].step);
    sf_axes_set_x(ax, 0, last, 1);
    ax->xlabel = "training step (optimizer updates)";
}

/* Axes, epochs, series and legend of a step plot whose y range covers the series (from y_floor when finite). */
static void finish_step_plot(cairo_t *cr, sf_axes *ax, const sf_metrics_log *log, const sf_series *s, int n,
                             double y_floor, double y_scale_max)
{
    double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    sf_series_range(s, n, &xlo, &xhi, &ylo, &yhi);
    if (isfinite(y_floor)) ylo = fmin(ylo, y_floor);
    step_axis(ax, log);
    sf_axes_set_y(ax, ylo, yhi, 0);
    if (isfinite(y_scale_max) && ax->y1 > y_scale_max) ax->y1 = y_scale_max;
    sf_axes_draw(cr, ax);
    draw_epochs(cr, ax, log);
    sf_plot_series(cr, ax, s, n);
    sf_plot_legend(cr, ax, s, n);
}

/* ---------------------------------------------------------------- loss */

static void draw_loss(cairo_t *cr, const sf_figure *f)
{
    const sf_metrics_log *log = &f->data->run->log;
    double *a[] = {step_field(log, offsetof(sf_step_point, step), 1), step_field(log, offsetof(sf_step_point, loss), 1),
                   step_field(log, offsetof(sf_step_point, loss), 1), epoch_middles(log),
                   epoch_field(log, offsetof(sf_epoch_point, train_loss), 1)};
    if (!all_present(a, 5)) goto done;
    /* a moving mean over about a tenth of the points (odd, 3 to 51); none for fewer than 10 points */
    int64_t window = log->n_steps < 10 ? 1 : log->n_steps / 10 | 1;
    if (window > 51) window = 51;
    moving_mean(a[1], log->n_steps, window, a[2]);
    char raw[96], smooth[96];
    describe_logged(log, "", raw, sizeof raw);
    snprintf(smooth, sizeof smooth, "smoothed (moving mean of %lld)", (long long)window);
    sf_series s[] = {
        {.x = a[0], .y = a[1], .n = log->n_steps, .label = raw, .color = faint(0), .width = 1.2},
        {.x = a[0],
         .y = a[2],
         .n = window > 1 ? log->n_steps : 0,
         .label = window > 1 ? smooth : NULL,
         .color = sf_palette(0),
         .width = 2.4},
        {.x = a[3], .y = a[4], .n = log->n_epochs, .label = "mean of the epoch", .color = sf_palette(1), .marker = 5},
    };
    sf_figure_heading(cr, SF_FIG_W, SF_FIG_H, "Training loss", "cross-entropy on the training batches");
    sf_axes ax;
    sf_axes_place(&ax, 0);
    ax.ylabel = "loss";
    finish_step_plot(cr, &ax, log, s, 3, NAN, NAN);
done:
    free_all(a, 5);
}

/* ---------------------------------------------------------------- accuracy */

static void label_last(cairo_t *cr, const sf_axes *ax, const sf_series *s)
{
    for (int64_t i = s->n - 1; i >= 0; i--)
        if (isfinite(s->x[i]) && isfinite(s->y[i])) {
            char text[32];
            snprintf(text, sizeof text, "%.2f%%", s->y[i]);
            sf_set_font(cr, SF_FONT_LEGEND, 1);
            sf_set_color(cr, s->color);
            double x = sf_axes_px(ax, s->x[i]), y = sf_axes_py(ax, s->y[i]);
            sf_text(cr, x - 9, y - 7, 1, 1, 0, text);
            return;
        }
}

static void draw_accuracy(cairo_t *cr, const sf_figure *f)
{
    const sf_metrics_log *log = &f->data->run->log;
    double *a[] = {step_field(log, offsetof(sf_step_point, step), 1),
                   step_field(log, offsetof(sf_step_point, accuracy), 100),
                   epoch_field(log, offsetof(sf_epoch_point, step), 1),
                   epoch_field(log, offsetof(sf_epoch_point, train_accuracy), 100),
                   epoch_field(log, offsetof(sf_epoch_point, test_accuracy), 100),
                   epoch_middles(log)};
    if (!all_present(a, 6)) goto done;
    char raw[96];
    describe_logged(log, "train, ", raw, sizeof raw);
    sf_series s[] = {
        {.x = a[0], .y = a[1], .n = log->n_steps, .label = raw, .color = faint(0), .width = 1.2},
        {.x = a[5],
         .y = a[3],
         .n = log->n_epochs,
         .label = "train, mean of the epoch",
         .color = sf_palette(0),
         .width = 2.0,
         .marker = 4.5},
        {.x = a[2],
         .y = a[4],
         .n = log->n_epochs,
         .label = "test, after the epoch",
         .color = sf_palette(1),
         .width = 2.4,
         .marker = 5.5},
    };
    sf_figure_heading(cr, SF_FIG_W, SF_FIG_H, "Accuracy", "share of samples whose predicted class is the label");
    sf_axes ax;
    sf_axes_place(&ax, 0);
    ax.ylabel = "accuracy (%)";
    ax.y_suffix = "%";
    finish_step_plot(cr, &ax, log, s, 3, NAN, 100);
    label_last(cr, &ax, &s[2]);
done:
    free_all(a, 6);
}

/* ---------------------------------------------------------------- learning rate */

static void draw_lr(cairo_t *cr, const sf_figure *f)
{
    const sf_metrics_log *log = &f->data->run->log;
    int from_steps = log->n_steps > 0;
    double *a[] = {from_steps ? step_field(log, offsetof(sf_step_point, step), 1)
                              : epoch_field(log, offsetof(sf_epoch_point, step), 1),
                   from_steps ? step_field(log, offsetof(sf_step_point, lr), 1)
                              : epoch_field(log, offsetof(sf_epoch_point, lr), 1)};
    if (!all_present(a, 2)) goto done;
    sf_series s[] = {{.x = a[0],
                      .y = a[1],
                      .n = from_steps ? log->n_steps : log->n_epochs,
                      .color = sf_palette(2),
                      .width = 2.2,
                      .marker = from_steps ? 0 : 4.5}};
    sf_figure_heading(cr, SF_FIG_W, SF_FIG_H, "Learning rate", "the optimizer's step size, as the schedule set it");
    sf_axes ax;
    sf_axes_place(&ax, 0);
    ax.ylabel = "learning rate";
    finish_step_plot(cr, &ax, log, s, 1, 0, NAN);
done:
    free_all(a, 2);
}

/* ---------------------------------------------------------------- firing rates */

static void draw_rates(cairo_t *cr, const sf_figure *f)
{
    const sf_metrics_log *log = &f->data->run->log;
    const sf_trace *tr = f->data->trace;
    int32_t n = log->n_rates < 10 ? log->n_rates : 10;
    double *x = epoch_field(log, offsetof(sf_epoch_point, epoch), 1);
    double *y = malloc((size_t)(n * (log->n_epochs ? log->n_epochs : 1)) * sizeof *y);
    char labels[10][96];
    sf_series s[10];
    for (int32_t k = 0; x && y && k < n; k++) {
        for (int64_t e = 0; e < log->n_epochs; e++)
            y[k * log->n_epochs + e] = k < log->epochs[e].n_rates ? log->epochs[e].rates[k] : NAN;
        int32_t layer = sf_run_lif_layer(f->data->run, k);
        if (tr && k < tr->n_lif)
            snprintf(labels[k], sizeof labels[k], "layer %d: LIF, %lld neurons", (int)layer, (long long)tr->lif[k].n);
        else if (layer >= 0) snprintf(labels[k], sizeof labels[k], "layer %d: LIF", (int)layer);
        else snprintf(labels[k], sizeof labels[k], "LIF layer %d", (int)k + 1);
        s[k] = (sf_series){.x = x,
                           .y = y + k * log->n_epochs,
                           .n = log->n_epochs,
                           .label = labels[k],
                           .color = sf_palette(k),
                           .width = 2.2,
                           .marker = 5};
    }
    if (x && y) {
        sf_figure_heading(cr, SF_FIG_W, SF_FIG_H, "Firing rates",
                          "mean spikes per neuron and time step of each LIF layer, on the test set");
        sf_axes ax;
        sf_axes_place(&ax, 0);
        double xlo = 1, xhi = 1, ylo = 0, yhi = 0;
        sf_series_range(s, n, &xlo, &xhi, &ylo, &yhi);
        sf_axes_set_x(&ax, xlo, xhi, 1);
        sf_axes_set_y(&ax, 0, yhi, 0);
        ax.xlabel = "epoch";
        ax.ylabel = "firing rate (spikes / neuron / step)";
        sf_axes_draw(cr, &ax);
        sf_plot_series(cr, &ax, s, n);
        sf_plot_legend(cr, &ax, s, n);
    }
    free(x);
    free(y);
}

void sf_curve_figures(const sf_plot_data *d, sf_figure_list *list, sf_notes *notes)
{
    const sf_run *run = d->run;
    const sf_metrics_log *log = &run->log;
    if (!run->have_metrics) return;
    if (log->n_steps == 0 && log->n_epochs == 0) {
        sf_note(notes, "metrics.jsonl has no step or epoch line yet: no training curves");
        return;
    }
    sf_figure *f = sf_figure_add(list, "loss", draw_loss, d, 0);
    if (f)
        snprintf(f->caption, sizeof f->caption, "Training loss against optimizer steps, epochs marked along the top.");
    f = sf_figure_add(list, "accuracy", draw_accuracy, d, 0);
    if (f)
        snprintf(f->caption, sizeof f->caption,
                 "Training accuracy (logged means and epoch means) and test accuracy after each epoch.");
    f = sf_figure_add(list, "learning_rate", draw_lr, d, 0);
    if (f) snprintf(f->caption, sizeof f->caption, "Learning rate against optimizer steps.");
    if (log->n_rates == 0) {
        sf_note(notes, "no epoch line with firing rates yet: no firing-rate figure");
        return;
    }
    f = sf_figure_add(list, "firing_rates", draw_rates, d, 0);
    if (f)
        snprintf(f->caption, sizeof f->caption, "Firing rate of each LIF layer on the test set after each epoch%s.",
                 log->n_rates > 10 ? " (the first 10 layers)" : "");
}
