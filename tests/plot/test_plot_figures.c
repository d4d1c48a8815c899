/* test_plot_figures.c — the figures of tools/plot drawn from known numbers: PNGs of the expected size that are not
 * blank, curve end points and raster cells at the pixels the numbers put them, metrics lines still being written
 * or broken skipped with a note, and clear failures for directories that are not runs. */
#include "plot/axes.h"
#include "plot/plot.h"
#include "testutil.h"

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Everything goes under the directory the test runs in (ctest: the build tree). */
static const char *work = "plot_work";

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void make_dir(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", work, name);
    mkdir(out, 0777);
}

static int file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static char buf[4 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, text) != NULL;
}

static int notes_have(const sf_notes *notes, const char *text)
{
    for (int i = 0; i < notes->n; i++)
        if (strstr(notes->text[i], text)) return 1;
    return 0;
}

/* ---------------------------------------------------------------- reading PNGs back (cairo) */

typedef struct png {
    cairo_surface_t *s;
    int w, h;
} png;

static png load_png(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.png", dir, name);
    png p = {cairo_image_surface_create_from_png(path), 0, 0};
    if (cairo_surface_status(p.s) != CAIRO_STATUS_SUCCESS) {
        CHECK(0, "%s is not a readable PNG: %s", path, cairo_status_to_string(cairo_surface_status(p.s)));
        return p;
    }
    p.w = cairo_image_surface_get_width(p.s);
    p.h = cairo_image_surface_get_height(p.s);
    CHECK(p.w == SF_FIG_W && p.h == SF_FIG_H, "%s is %dx%d, expected %dx%d", path, p.w, p.h, SF_FIG_W, SF_FIG_H);
    return p;
}

static sf_rgb pixel(const png *p, double x, double y)
{
    int ix = (int)floor(x), iy = (int)floor(y);
    if (p->w == 0 || ix < 0 || iy < 0 || ix >= p->w || iy >= p->h) return (sf_rgb){-1, -1, -1};
    const unsigned char *row = cairo_image_surface_get_data(p->s) + iy * cairo_image_surface_get_stride(p->s);
    uint32_t v = ((const uint32_t *)row)[ix];
    return (sf_rgb){((v >> 16) & 255) / 255.0, ((v >> 8) & 255) / 255.0, (v & 255) / 255.0};
}

static int same_color(sf_rgb a, sf_rgb b) { return fabs(a.r - b.r) + fabs(a.g - b.g) + fabs(a.b - b.b) < 0.06; }

/* Not blank: between 2% and 70% of the pixels are not the white background, in more than 20 colours. */
static void expect_drawn(const png *p, const char *what)
{
    if (p->w == 0) return;
    int64_t inked = 0, total = (int64_t)p->w * p->h;
    uint32_t seen[64];
    int distinct = 0;
    for (int y = 0; y < p->h; y++)
        for (int x = 0; x < p->w; x++) {
            sf_rgb c = pixel(p, x, y);
            inked += !same_color(c, sf_paper);
            uint32_t key = (uint32_t)(c.r * 255) << 16 | (uint32_t)(c.g * 255) << 8 | (uint32_t)(c.b * 255);
            int known = 0;
            for (int i = 0; i < distinct; i++) known |= seen[i] == key;
            if (!known && distinct < 64) seen[distinct++] = key;
        }
    double share = (double)inked / (double)total;
    CHECK(share > 0.02 && share < 0.7, "%s: %.1f%% of the pixels are drawn", what, 100 * share);
    CHECK(distinct > 20, "%s: only %d colours", what, distinct);
}

/* The canvas position of a data point on axes with the standard margins and the given ranges. */
static void at(double x, double x0, double x1, double y, double y0, double y1, double *px, double *py)
{
    double width = SF_FIG_W - SF_MARGIN_LEFT - SF_MARGIN_RIGHT, height = SF_FIG_H - SF_MARGIN_TOP - SF_MARGIN_BOTTOM;
    *px = SF_MARGIN_LEFT + (x - x0) / (x1 - x0) * width;
    *py = SF_MARGIN_TOP + height - (y - y0) / (y1 - y0) * height;
}

static void expect_color_at(const png *p, double x, double y, sf_rgb want, const char *what)
{
    sf_rgb got = pixel(p, x, y);
    CHECK(same_color(got, want), "%s: pixel (%.0f, %.0f) is (%.2f %.2f %.2f), expected (%.2f %.2f %.2f)", what, x, y,
          got.r, got.g, got.b, want.r, want.g, want.b);
}

/* ---------------------------------------------------------------- a run with known metrics */

static const char *config_text = "[train]\ndataset = fashion-mnist\ndata_dir = /nonexistent\nepochs = 4\n"
                                 "batch = 32\ntimesteps = 2\n\n[flatten]\n[linear]\nout = 16\n[lif]\n[linear]\n"
                                 "out = 16\n[lif]\n[linear]\nout = 10\n";

/* 300 steps in 3 epochs of 100, a step line every 10 steps; the loss falls from 2.3 towards 0.6 and the training
 * accuracy rises from 10% towards 90% linearly; the epochs' numbers are listed here. */
static const double epoch_loss[3] = {1.8, 1.0, 0.6}, epoch_train_acc[3] = {0.40, 0.60, 0.85},
                    epoch_test_acc[3] = {0.30, 0.55, 0.80}, rates[2][3] = {{0.10, 0.15, 0.20}, {0.02, 0.03, 0.04}};

static void write_metrics(const char *dir, const char *tail)
{
    char path[512];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "w");
    if (!f) return;
    for (int step = 10; step <= 300; step += 10) {
        fprintf(f, "{\"type\":\"step\",\"epoch\":%d,\"step\":%d,\"loss\":%.6f,\"accuracy\":%.6f,\"lr\":0.001}\n",
                (step - 1) / 100 + 1, step, 2.3 - 1.7 * step / 300.0, 0.1 + 0.8 * step / 300.0);
        if (step % 100 == 0) {
            int e = step / 100 - 1;
            fprintf(f,
                    "{\"type\":\"epoch\",\"epoch\":%d,\"step\":%d,\"train_loss\":%g,\"train_accuracy\":%g,"
                    "\"test_accuracy\":%g,\"firing_rates\":[%g,%g],\"lr\":0.001,\"samples_per_s\":5000,"
                    "\"train_seconds\":2.5,\"test_seconds\":0.5,\"peak_bytes\":1048576,\"best\":true}\n",
                    e + 1, step, epoch_loss[e], epoch_train_acc[e], epoch_test_acc[e], rates[0][e], rates[1][e]);
        }
    }
    fputs(tail, f);
    fclose(f);
}

static void test_curves(void)
{
    char run[300], figs[400];
    make_dir("known", run, sizeof run);
    write_text(run, "config.ini", config_text);
    write_metrics(run, "");
    snprintf(figs, sizeof figs, "%s/figs", run);
    sf_plot_request req = {.run_dir = run, .fig_dir = figs, .sample = 0};
    sf_plot_result res;
    CHECK_OK(sf_plot_run(&req, &res));
    CHECK(res.figures == 4 && !res.have_sample, "%d figures, sample %d: expected the 4 curves only", res.figures,
          res.have_sample);
    CHECK(notes_have(&res.notes, "no checkpoint"), "a run without checkpoints is noted");

    /* accuracy: y 0..100% (data 12.7% to 90%), x -7.5..307.5 (steps 0 to 300 with 2.5% room) */
    png p = load_png(figs, "accuracy");
    expect_drawn(&p, "accuracy.png");
    double x, y;
    at(300, -7.5, 307.5, 100 * epoch_test_acc[2], 0, 100, &x, &y);
    expect_color_at(&p, x, y, sf_palette(1), "the last test accuracy (80% at step 300)");
    at(100, -7.5, 307.5, 100 * epoch_test_acc[0], 0, 100, &x, &y);
    expect_color_at(&p, x, y, sf_palette(1), "the first test accuracy (30% at step 100)");
    at(250, -7.5, 307.5, 100 * epoch_train_acc[2], 0, 100, &x, &y);
    expect_color_at(&p, x, y, sf_palette(0), "the last epoch's training accuracy (85% in its middle, step 250)");
    at(300, -7.5, 307.5, 40, 0, 100, &x, &y);
    CHECK(!same_color(pixel(&p, x, y), sf_palette(1)), "no test accuracy point at 40%% where none was logged");
    cairo_surface_destroy(p.s);

    /* loss: y 0.5..2.5 (data 0.6 to 2.24 in steps of 0.5); an epoch's mean sits in the epoch's middle */
    p = load_png(figs, "loss");
    expect_drawn(&p, "loss.png");
    at(250, -7.5, 307.5, epoch_loss[2], 0.5, 2.5, &x, &y);
    expect_color_at(&p, x, y, sf_palette(1), "the last epoch's loss (0.6 at step 250)");
    at(150, -7.5, 307.5, epoch_loss[1], 0.5, 2.5, &x, &y);
    expect_color_at(&p, x, y, sf_palette(1), "the second epoch's loss (1.0 at step 150)");
    cairo_surface_destroy(p.s);

    /* firing rates: x epochs 0.7..3.3, y 0..0.25 */
    p = load_png(figs, "firing_rates");
    expect_drawn(&p, "firing_rates.png");
    at(3, 0.7, 3.3, rates[0][2], 0, 0.25, &x, &y);
    expect_color_at(&p, x, y, sf_palette(0), "layer 2's rate after epoch 3 (0.2)");
    at(1, 0.7, 3.3, rates[1][0], 0, 0.25, &x, &y);
    expect_color_at(&p, x, y, sf_palette(1), "layer 4's rate after epoch 1 (0.02)");
    cairo_surface_destroy(p.s);

    p = load_png(figs, "learning_rate");
    expect_drawn(&p, "learning_rate.png");
    cairo_surface_destroy(p.s);

    /* the page: the numbers of the last and best epochs, the config, every figure inline, reloading while live */
    char page[400];
    snprintf(page, sizeof page, "%s/report.html", run);
    CHECK(file_has(page, "80.00%"), "report.html shows the final test accuracy");
    CHECK(file_has(page, "layer 4"), "report.html names the LIF layers as the config numbers them");
    CHECK(file_has(page, "out = 16"), "report.html shows the config");
    CHECK(file_has(page, "no checkpoint"), "report.html says what is missing");
    CHECK(file_has(page, "id=\"f3-glyph"), "each figure's SVG ids get their own prefix");
    CHECK(!file_has(page, "http-equiv=\"refresh\""), "a finished run's page does not reload");
    req.live = 1;
    req.fig_dir = NULL;
    CHECK_OK(sf_plot_run(&req, &res));
    CHECK(file_has(page, "http-equiv=\"refresh\""), "a live run's page reloads itself");
}

/* A metrics file as a killed or still-running trainer leaves it: the last line cut, and a broken line. */
static void test_partial_metrics(void)
{
    char run[300];
    make_dir("partial", run, sizeof run);
    write_metrics(run, "{\"type\":\"step\",\"epoch\":4,\"step\":305,\"accuracy\":0.9}\nnot json\n"
                       "{\"type\":\"step\",\"epoch\":4,\"step\":310,\"lo");
    sf_plot_request req = {.run_dir = run, .sample = 0, .live = 1};
    sf_plot_result res;
    CHECK_OK(sf_plot_run(&req, &res));
    CHECK(res.figures == 4, "%d figures from the complete lines", res.figures);
    CHECK(notes_have(&res.notes, "metrics.jsonl:36: the last line has no end"), "the cut line is noted by number");
    CHECK(notes_have(&res.notes, "metrics.jsonl:35: not a JSON object"), "the broken line is noted by number");
    CHECK(notes_have(&res.notes, "no config.ini"), "the missing config is noted");

    sf_metrics_log log;
    sf_notes notes = {0};
    char path[400];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    CHECK_OK(sf_metrics_log_read(path, &log, &notes));
    CHECK(log.n_steps == 31 && log.n_epochs == 3 && log.n_rates == 2, "%lld steps, %lld epochs, %d rates",
          (long long)log.n_steps, (long long)log.n_epochs, log.n_rates);
    CHECK(log.n_epochs == 3 && log.epochs[2].test_accuracy == 0.8 && log.epochs[2].rates[1] == 0.04,
          "epoch 3's numbers as written");
    CHECK(log.n_steps == 31 && isnan(log.steps[30].loss) && log.steps[30].accuracy == 0.9,
          "a line without a loss has a NaN loss and its other numbers");
    sf_metrics_log_free(&log);
}

/* ---------------------------------------------------------------- a sample with known spikes */

enum { T = 4, N = 10, K = 3 };

static void test_sample(void)
{
    static float input[T * 16], spikes[T * N], membrane[T * N], output[T * K];
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < 16; i++) input[t * 16 + i] = (float)((i + t) % 4 == 0);
        for (int i = 0; i < N; i++) {
            /* neuron i fires at step t when (i + t) % 3 == 0, its potential 1.5 then, else 0.5·(i % 3) */
            spikes[t * N + i] = (float)((i + t) % 3 == 0);
            membrane[t * N + i] = spikes[t * N + i] != 0 ? 1.5f : 0.5f * (float)(i % 3);
        }
        for (int k = 0; k < K; k++) output[t * K + k] = (float)(k == 1 ? t : -t);
    }
    sf_trace_layer layer = {
        .layer = 2, .c = N, .h = 1, .w = 1, .n = N, .threshold = 1.0f, .spikes = spikes, .membrane = membrane};
    sf_trace tr = {.sample = 7,
                   .T = T,
                   .label = 1,
                   .predicted = 1,
                   .encoding = SF_ENCODING_POISSON,
                   .c = 1,
                   .h = 4,
                   .w = 4,
                   .input = input,
                   .n_lif = 1,
                   .lif = &layer,
                   .classes = K,
                   .output = output,
                   .out_layer = 3,
                   .out_kind = SF_LAYER_LINEAR,
                   .ckpt_epoch = 2,
                   .ckpt_name = "best.safetensors"};
    sf_run run = {0};
    sf_plot_data d = {&run, &tr};
    sf_figure_list list = {0};
    sf_sample_figures(&d, &list);
    const char *names[] = {"sample_input", "sample_spikes_layer2", "sample_membrane_layer2", "sample_output"};
    CHECK(list.n == 4, "%d sample figures", list.n);
    char dir[300], path[400];
    make_dir("sample", dir, sizeof dir);
    for (int i = 0; i < list.n && i < 4; i++) {
        CHECK(strcmp(list.fig[i].name, names[i]) == 0, "figure %d is %s", i, list.fig[i].name);
        snprintf(path, sizeof path, "%s/%s.png", dir, list.fig[i].name);
        CHECK_OK(sf_figure_png(&list.fig[i], path));
        png p = load_png(dir, list.fig[i].name);
        expect_drawn(&p, list.fig[i].name);
        cairo_surface_destroy(p.s);
    }

    /* the raster: steps -0.5..3.5 across, neurons -0.5..9.5 up; each cell checked a few px off its centre (grid
     * lines run through the centres) */
    png p = load_png(dir, "sample_spikes_layer2");
    int64_t wrong = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) {
            double x, y;
            at(t, -0.5, 3.5, i, -0.5, 9.5, &x, &y);
            sf_rgb c = pixel(&p, x + 5, y + 4);
            wrong += spikes[t * N + i] != 0 ? !same_color(c, sf_spike) : !same_color(c, sf_paper);
        }
    CHECK(wrong == 0, "%lld raster cells do not show the spike or silence at their place", (long long)wrong);
    cairo_surface_destroy(p.s);

    /* the membrane plot: y 0..2 (data 0 to 1.5 in steps of 0.5), so the threshold 1 runs along y = 234 */
    p = load_png(dir, "sample_membrane_layer2");
    double x, y;
    at(0, 0, 1, 1.0, 0, 2.0, &x, &y);
    int red = 0;
    for (int px = (int)SF_MARGIN_LEFT; px < SF_FIG_W - SF_MARGIN_RIGHT; px++) {
        /* the 1.6 px line covers two pixel rows in part: red blended with white */
        sf_rgb c = pixel(&p, px, y - 0.5);
        red += c.r > 0.75 && c.g < 0.6 && c.b < 0.6;
    }
    CHECK(red > 300, "the dashed threshold line at y = %.0f: %d red pixels", y, red);
    cairo_surface_destroy(p.s);
}

/* ---------------------------------------------------------------- not a run */

static void test_not_a_run(void)
{
    sf_plot_result res;
    char dir[300];
    sf_plot_request req = {.run_dir = "/nonexistent/run", .sample = 0};
    CHECK(sf_plot_run(&req, &res) == SF_ERR_IO && strstr(sf_last_error(), "/nonexistent/run"),
          "a missing directory: %s", sf_last_error());
    make_dir("empty", dir, sizeof dir);
    req.run_dir = dir;
    CHECK(sf_plot_run(&req, &res) == SF_ERR_IO && strstr(sf_last_error(), "not a spikefuse run directory"),
          "an empty directory: %s", sf_last_error());
    char file[400];
    make_dir("with_a_file", dir, sizeof dir);
    write_text(dir, "config.ini", config_text);
    snprintf(file, sizeof file, "%s/config.ini", dir);
    req.run_dir = file;
    CHECK(sf_plot_run(&req, &res) == SF_ERR_IO && strstr(sf_last_error(), "not a directory"), "a file: %s",
          sf_last_error());
}

int main(void)
{
    mkdir(work, 0777);
    test_curves();
    test_partial_metrics();
    test_sample();
    test_not_a_run();
    return tu_finish("test_plot_figures");
}
