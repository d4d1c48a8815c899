/* progress.c — the live progress bar (terminal) and per-epoch summary lines of `spikefuse train`. */
#include "progress.h"

#include "cli.h"
#include "spikefuse_train.h"

#include <inttypes.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Redraws at most this often: a terminal fed every step of a fast net would spend more time drawing than training. */
#define REDRAW_SECONDS 0.1

void sf_progress_init(sf_progress *p, const sf_config *cfg, const char *run_dir)
{
    memset(p, 0, sizeof *p);
    p->out = stderr;
    p->live = isatty(fileno(stderr));
    p->cfg = cfg;
    p->run_dir = run_dir;
}

static int terminal_columns(FILE *f)
{
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40) return ws.ws_col;
    return 80;
}

static void format_duration(double s, char *buf, size_t cap)
{
    int64_t t = (int64_t)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%" PRId64 ":%02d:%02d", t / 3600, (int)(t / 60 % 60), (int)(t % 60));
    else
        snprintf(buf, cap, "%d:%02d", (int)(t / 60), (int)(t % 60));
}

/* Replaces the current terminal line with `text`, cut to the terminal's width so it never wraps. */
static void draw_line(sf_progress *p, const char *text)
{
    int cols = terminal_columns(p->out);
    fprintf(p->out, "\r%.*s\033[K", cols - 1, text);
    fflush(p->out);
    p->bar_shown = 1;
}

static void clear_bar(sf_progress *p)
{
    if (!p->bar_shown) return;
    fputs("\r\033[K", p->out);
    p->bar_shown = 0;
}

/* "epoch 2/10 [=====>     ] 28160/60000 4213/s ETA 0:07 loss 0.4821 acc 82.91%": the bar takes what the
 * terminal's width leaves, so the figures are never cut off. */
static void draw_bar(sf_progress *p, const sf_train_event *ev)
{
    char head[64], tail[256], bar[64], eta[32], line[512];
    double left = ev->batch ? ev->epoch_seconds / (double)ev->batch * (double)(ev->batches - ev->batch) : 0;
    format_duration(left, eta, sizeof eta);
    snprintf(head, sizeof head, "epoch %" PRId64 "/%" PRId64, ev->epoch, ev->epochs);
    /* Fixed-width numbers keep the bar from jumping as they grow. */
    char total[32];
    int digits = snprintf(total, sizeof total, "%" PRId64, ev->batches * ev->batch_size);
    snprintf(tail, sizeof tail, "%*" PRId64 "/%s %6.0f/s ETA %s loss %.4f acc %6.2f%%", digits,
             ev->batch * ev->batch_size, total, ev->samples_per_s, eta, ev->loss, 100.0 * ev->accuracy);
    int width = terminal_columns(p->out) - 1 - (int)strlen(head) - (int)strlen(tail) - 4;
    if (width > 30) width = 30;
    if (width >= 5) {
        int filled = ev->batches ? (int)(width * ev->batch / ev->batches) : 0;
        bar[0] = '[';
        for (int i = 0; i < width; i++) bar[1 + i] = i < filled ? '=' : (i == filled ? '>' : ' ');
        bar[width + 1] = ']';
        bar[width + 2] = 0;
        snprintf(line, sizeof line, "%s %s %s", head, bar, tail);
    } else {
        snprintf(line, sizeof line, "%s %s", head, tail);
    }
    draw_line(p, line);
}

static void print_start(sf_progress *p, const sf_train_event *ev)
{
    fprintf(p->out,
            "training %s on %s: %" PRId64 " training / %" PRId64 " test samples, %" PRId64 " batches of %" PRId64
            " per epoch, T=%" PRId64 "\n",
            p->cfg->source, sf_dataset_kind_name(p->cfg->train.dataset), ev->train_samples, ev->test_samples,
            ev->batches, ev->batch_size, p->cfg->train.timesteps);
    if (ev->skipped_samples > 0)
        fprintf(p->out, "skipped %" PRId64 " empty samples (no events) of the dataset files\n", ev->skipped_samples);
    for (int32_t i = 0; i < ev->num_notes; i++) fprintf(p->out, "spikefuse train: warning: %s\n", ev->notes[i]);
    if (ev->epoch > 1 || ev->batch > 0)
        fprintf(p->out, "resuming at epoch %" PRId64 ", batch %" PRId64 " (step %" PRId64 ")\n", ev->epoch,
                ev->batch, ev->step);
    fprintf(p->out, "results go to %s\n", p->run_dir);
}

static void print_epoch(sf_progress *p, const sf_train_event *ev)
{
    char peak[32], rss[32], took[32];
    format_duration(ev->epoch_seconds + ev->test_seconds, took, sizeof took);
    clear_bar(p);
    fprintf(p->out,
            "epoch %" PRId64 "/%" PRId64 ": train loss %.4f acc %.2f%% | test acc %.2f%%%s | %.0f samples/s | %s | "
            "lr %.3g | peak %s (rss %s) | firing",
            ev->epoch, ev->epochs, ev->loss, 100.0 * ev->accuracy, 100.0 * ev->test_accuracy,
            ev->is_best ? " (best)" : "", ev->samples_per_s, took, (double)ev->lr,
            sf_cli_bytes((double)ev->peak_bytes, peak, sizeof peak),
            sf_cli_bytes((double)ev->peak_rss_bytes, rss, sizeof rss));
    for (int32_t i = 0; i < ev->num_rates; i++) fprintf(p->out, " %.3f", (double)ev->firing_rates[i]);
    if (ev->skipped) fprintf(p->out, " | %" PRId64 " steps skipped (fp16 loss scaling)", ev->skipped);
    if (ev->epoch_seconds > 0 && ev->data_wait_seconds >= 0.01 * ev->epoch_seconds)
        fprintf(p->out, " | waited for data %.0f%% of the time", 100.0 * ev->data_wait_seconds / ev->epoch_seconds);
    if (ev->bad_images) fprintf(p->out, " | %" PRId64 " bad images skipped", ev->bad_images);
    fputc('\n', p->out);
    fflush(p->out);
}

int sf_progress_event(const sf_train_event *ev, void *user)
{
    sf_progress *p = user;
    switch (ev->kind) {
    case SF_TRAIN_EV_START: print_start(p, ev); break;
    case SF_TRAIN_EV_STEP:
        if (p->live) {
            double now = sf_now_seconds();
            if (now - p->last_draw >= REDRAW_SECONDS || ev->batch == ev->batches) {
                draw_bar(p, ev);
                p->last_draw = now;
            }
        }
        break;
    case SF_TRAIN_EV_TEST:
        if (p->live) {
            char line[256];
            snprintf(line, sizeof line, "epoch %" PRId64 "/%" PRId64 ": testing on %" PRId64 " samples ...",
                     ev->epoch, ev->epochs, ev->test_samples);
            draw_line(p, line);
        }
        break;
    case SF_TRAIN_EV_EPOCH: print_epoch(p, ev); break;
    }
    if (sf_cli_stop_requested()) {
        clear_bar(p);
        return 1;
    }
    return 0;
}
