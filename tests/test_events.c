/* test_events.c — event datasets in memory: the checks on every event, binning into T frames (equal bins, fixed
 * windows cut and padded, count and binary cells, downsampling, merged polarities, one-row sensors) against a
 * plain reference written here, and the event-level augmentation (each kind against its definition, seeded per
 * epoch, identical through prefetching and a resumed loader). The file readers are tested in test_event_files.c. */
#include "data/dataset.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static sf_event ev(uint32_t t, int x, int y, int p) { return (sf_event){t, (uint16_t)x, (uint8_t)y, (uint8_t)p}; }

static sf_loader_params loader_params(int64_t T, int64_t B)
{
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = B;
    p.timesteps = T;
    p.training = 0;
    p.prefetch = 0;
    return p;
}

/* Bins samples 0..n-1 into a fresh [T, n, cells] buffer. */
static float *bin(const sf_dataset *ds, const sf_loader_params *p, int64_t epoch, int64_t n, size_t cells)
{
    int64_t idx[64];
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    float *x = malloc((size_t)p->timesteps * (size_t)n * cells * sizeof *x);
    for (size_t i = 0; i < (size_t)p->timesteps * (size_t)n * cells; i++) x[i] = -7.0f; /* all must be written */
    sf_events_bin_batch(ds, p, epoch, idx, n, x);
    return x;
}

/* The plain reference: counts per (bin, cell) of one sample's events, bins and cells computed the obvious way. */
static void reference(const sf_event *e, int n, int64_t T, int64_t window, int d, int merge, int frame_h, int frame_w,
                      int binary, float *out, size_t cells)
{
    memset(out, 0, (size_t)T * cells * sizeof *out);
    if (n == 0) return;
    const double first = e[0].t, span = (double)e[n - 1].t - first + 1.0;
    for (int i = 0; i < n; i++) {
        const int64_t b = window ? (int64_t)((e[i].t - first) / (double)window)
                                 : (int64_t)((e[i].t - first) * (double)T / span);
        if (b >= T) continue;
        const size_t c = ((size_t)(merge ? 0 : e[i].p) * frame_h + e[i].y / d) * frame_w + e[i].x / d;
        out[(size_t)b * cells + c] = binary ? 1.0f : out[(size_t)b * cells + c] + 1.0f;
    }
}

static void test_checks(void)
{
    sf_dataset *ds = NULL;
    CHECK_OK(sf_events_create(2, 4, 6, 3, &ds));
    if (!ds) return;
    const sf_event good[3] = {ev(100, 5, 3, 1), ev(100, 0, 0, 0), ev(250, 2, 1, 0)};
    CHECK_OK(sf_events_add_sample(ds, good, 3, 2));
    CHECK(ds->count == 1 && ds->offsets[1] == 3 && ds->labels[0] == 2, "one sample of 3 events");
    CHECK(ds->events[0].t == 0 && ds->events[2].t == 150, "times are stored from the sample's first event");
    CHECK_OK(sf_events_add_sample(ds, good, 0, 1));
    CHECK(ds->count == 1 && ds->skipped == 1, "an empty sample is skipped and counted");
    struct {
        sf_event e;
        int label;
        const char *needle;
    } bad[] = {{ev(120, 6, 0, 0), 0, "event 1 at x 6, y 0, polarity 0 is outside the sensor (6×4, 2 polarities)"},
               {ev(120, 0, 4, 0), 0, "outside the sensor"},
               {ev(120, 0, 0, 2), 0, "outside the sensor"},
               {ev(90, 0, 0, 0), 0, "event 1 goes back in time (90 µs after 100 µs)"},
               {ev(120, 0, 0, 0), 3, "label 3 is out of range (expected 0..2)"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const sf_event two[2] = {ev(100, 1, 1, 1), bad[i].e};
        sf_status s = sf_events_add_sample(ds, two, 2, bad[i].label);
        CHECK(s == SF_ERR_FORMAT && strstr(sf_last_error(), bad[i].needle), "%s: got %s", bad[i].needle,
              sf_last_error());
    }
    CHECK(ds->count == 1, "refused samples are not added");
    sf_dataset_free(ds);
}

/* A sensor of 2 polarities × 5 × 7 with three samples of known events. */
static sf_dataset *small_dataset(void)
{
    sf_dataset *ds = NULL;
    CHECK_OK(sf_events_create(2, 5, 7, 4, &ds));
    const sf_event a[6] = {ev(0, 0, 0, 0), ev(10, 6, 4, 1), ev(10, 6, 4, 1),
                           ev(55, 3, 2, 0), ev(99, 1, 3, 1), ev(99, 5, 0, 0)};
    const sf_event b[3] = {ev(1000, 2, 2, 1), ev(1000, 2, 2, 1), ev(1000, 3, 3, 0)}; /* a span of one µs */
    const sf_event c[5] = {ev(0, 1, 1, 0), ev(400, 2, 1, 1), ev(401, 4, 4, 0), ev(799, 6, 2, 1), ev(2000, 0, 3, 0)};
    CHECK_OK(sf_events_add_sample(ds, a, 6, 1));
    CHECK_OK(sf_events_add_sample(ds, b, 3, 0));
    CHECK_OK(sf_events_add_sample(ds, c, 5, 3));
    return ds;
}

static void test_binning(void)
{
    sf_dataset *ds = small_dataset();
    if (!ds || ds->count != 3) return;
    const int64_t T = 4;
    int ok_all = 1;
    for (int window = 0; window <= 1; window++)
        for (int d = 1; d <= 3; d++)
            for (int merge = 0; merge <= 1; merge++)
                for (int binary = 0; binary <= 1; binary++) {
                    sf_loader_params p = loader_params(T, 3);
                    p.events = (sf_event_params){.time_window_us = window ? 300 : 0, .frame = binary,
                                                 .downsample = d, .merge_polarity = merge};
                    int32_t frame[3];
                    sf_event_frame_shape(2, 5, 7, &p.events, frame);
                    const size_t cells = (size_t)frame[0] * frame[1] * frame[2];
                    CHECK(frame[0] == (merge ? 1 : 2) && frame[1] == (5 + d - 1) / d && frame[2] == (7 + d - 1) / d,
                          "frame shape %dx%dx%d", frame[0], frame[1], frame[2]);
                    float *x = bin(ds, &p, 0, 3, cells), *want = malloc((size_t)T * cells * sizeof *want);
                    int ok = 1;
                    for (int s = 0; s < 3; s++) {
                        reference(ds->events + ds->offsets[s], (int)(ds->offsets[s + 1] - ds->offsets[s]), T,
                                  p.events.time_window_us, d, merge, frame[1], frame[2], binary, want, cells);
                        for (int64_t t = 0; t < T; t++)
                            ok &= memcmp(x + ((size_t)t * 3 + s) * cells, want + (size_t)t * cells,
                                         cells * sizeof *x) == 0;
                    }
                    if (!ok)
                        fprintf(stderr, "binning differs: window %d downsample %d merge %d binary %d\n", window, d,
                                merge, binary);
                    ok_all &= ok;
                    free(x);
                    free(want);
                }
    CHECK(ok_all, "binning matches the plain reference in every mode");

    /* Hand-computed: sample a, T = 4 equal bins over 0..99 µs (span 100: bins of 25 µs), counts, full size. */
    sf_loader_params p = loader_params(4, 1);
    float *x = bin(ds, &p, 0, 1, 70);
    const float at = x[0 * 70 + 0], twice = x[0 * 70 + 35 + 4 * 7 + 6], mid = x[2 * 70 + 2 * 7 + 3],
                last = x[3 * 70 + 35 + 3 * 7 + 1];
    float total = 0.0f;
    for (int i = 0; i < 4 * 70; i++) total += x[i];
    CHECK(at == 1 && twice == 2 && mid == 1 && last == 1 && total == 6,
          "sample a: bin 0 holds (0,0) once and (6,4,p1) twice, bin 2 (3,2), bin 3 (1,3,p1): %g %g %g %g, total %g",
          at, twice, mid, last, total);
    free(x);
    /* Fixed windows of 300 µs on sample c (0..2000 µs): bins 0, 1, 1, 2 and the event at 2000 is cut (bin 6). */
    p.events.time_window_us = 300;
    int64_t idx = 2;
    float y[4 * 70];
    sf_events_bin_batch(ds, &p, 0, &idx, 1, y);
    float per_bin[4] = {0};
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 70; i++) per_bin[t] += y[t * 70 + i];
    CHECK(per_bin[0] == 1 && per_bin[1] == 2 && per_bin[2] == 1 && per_bin[3] == 0,
          "300 µs windows: 1, 2, 1, 0 events (the one at 2000 µs is cut): %g %g %g %g", per_bin[0], per_bin[1],
          per_bin[2], per_bin[3]);
    sf_dataset_free(ds);

    /* A sensor one row high gives [channels] inputs: 700 units downsampled by 4 are 175 inputs. */
    sf_event_params ep = {.downsample = 4};
    int32_t frame[3], shape[3];
    sf_event_frame_shape(1, 1, 700, &ep, frame);
    sf_event_input_shape(frame, shape);
    CHECK(shape[0] == 175 && shape[1] == 1 && shape[2] == 1, "SHD 700 / 4 -> [175] (%d %d %d)", shape[0], shape[1],
          shape[2]);
    ep.downsample = 4;
    sf_event_frame_shape(2, 128, 128, &ep, frame);
    sf_event_input_shape(frame, shape);
    CHECK(shape[0] == 2 && shape[1] == 32 && shape[2] == 32, "DVS 128 / 4 -> 2x32x32");
}

/* One sample of many events spread over a 16×16 sensor and 10 ms, for the augmentation's statistics. */
static sf_dataset *busy_dataset(int64_t n)
{
    sf_dataset *ds = NULL;
    CHECK_OK(sf_events_create(2, 16, 16, 2, &ds));
    sf_event *e = malloc((size_t)n * sizeof *e);
    for (int64_t i = 0; i < n; i++)
        e[i] = ev((uint32_t)(i * 10000 / n), (int)(i * 7 % 16), (int)(i * 3 % 16), (int)(i & 1));
    for (int s = 0; s < 4; s++) CHECK_OK(sf_events_add_sample(ds, e, n, s & 1));
    free(e);
    return ds;
}

static double sum(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

static void test_augmentation(void)
{
    const int64_t n = 20000, T = 5;
    sf_dataset *ds = busy_dataset(n);
    if (!ds) return;
    const size_t cells = 2 * 16 * 16, all = (size_t)T * 4 * cells;
    sf_loader_params p = loader_params(T, 4);
    p.training = 1;
    p.augment = 1;
    p.seed = 17;

    /* Dropping: about drop_event of the events go, a different set per epoch, the same in the same epoch. */
    p.events = (sf_event_params){.downsample = 1, .drop_event = 0.25f};
    float *a = bin(ds, &p, 3, 4, cells), *b = bin(ds, &p, 3, 4, cells), *c = bin(ds, &p, 4, 4, cells);
    const double kept = sum(a, all) / (4.0 * n);
    CHECK(kept > 0.74 && kept < 0.76, "drop_event 0.25 keeps %.4f of the events", kept);
    CHECK(memcmp(a, b, all * sizeof *a) == 0, "the same (seed, epoch) drops the same events");
    CHECK(memcmp(a, c, all * sizeof *a) != 0, "another epoch drops others");
    CHECK(memcmp(a, a + cells, cells * sizeof *a) != 0, "each sample has its own draws");
    free(a);
    free(b);
    free(c);

    /* Shift: the frame moves by one (dx, dy) per sample; events pushed off are lost; with no augmentation (or
     * an evaluation loader) nothing changes. */
    sf_loader_params plain = loader_params(1, 4);
    plain.events.downsample = 1;
    float *ref = bin(ds, &plain, 0, 4, cells);
    p.timesteps = 1;
    p.events = (sf_event_params){.downsample = 1, .shift = 3};
    a = bin(ds, &p, 0, 4, cells);
    int shifted_ok = 1, moved = 0;
    for (int s = 0; s < 4; s++) {
        int found = 0;
        for (int dy = -3; dy <= 3 && !found; dy++)
            for (int dx = -3; dx <= 3 && !found; dx++) {
                int match = 1;
                for (int pol = 0; pol < 2 && match; pol++)
                    for (int y = 0; y < 16 && match; y++)
                        for (int x = 0; x < 16 && match; x++) {
                            const int sx = x - dx, sy = y - dy;
                            const float want = sx < 0 || sx >= 16 || sy < 0 || sy >= 16
                                                   ? 0.0f
                                                   : ref[(size_t)s * cells + ((size_t)pol * 16 + sy) * 16 + sx];
                            match = a[(size_t)s * cells + ((size_t)pol * 16 + y) * 16 + x] == want;
                        }
                if (match) {
                    found = 1;
                    moved += dx != 0 || dy != 0;
                }
            }
        shifted_ok &= found;
    }
    CHECK(shifted_ok && moved >= 2, "each sample is the plain frame moved by some (dx, dy) in [-3, 3]² (%d moved)",
          moved);
    free(a);

    /* Flip: each sample is the plain frame or its mirror, and both occur among 4 samples × 3 epochs. */
    p.events = (sf_event_params){.downsample = 1, .flip = 1};
    int flips = 0, same = 0, other = 0;
    for (int epoch = 0; epoch < 3; epoch++) {
        a = bin(ds, &p, epoch, 4, cells);
        for (int s = 0; s < 4; s++) {
            int is_same = memcmp(a + (size_t)s * cells, ref + (size_t)s * cells, cells * sizeof *a) == 0, is_flip = 1;
            for (int q = 0; q < 32 && is_flip; q++)
                for (int x = 0; x < 16; x++)
                    is_flip &= a[(size_t)s * cells + (size_t)q * 16 + x] ==
                               ref[(size_t)s * cells + (size_t)q * 16 + 15 - x];
            flips += is_flip && !is_same;
            same += is_same;
            other += !is_flip && !is_same;
        }
        free(a);
    }
    CHECK(other == 0 && flips > 0 && same > 0, "flip: %d mirrored, %d plain, %d neither", flips, same, other);

    /* Time jitter: every event is kept, and the bins change; with jitter 0 they do not. */
    p.timesteps = T;
    p.events = (sf_event_params){.downsample = 1, .time_jitter_us = 400};
    sf_loader_params plain_t = loader_params(T, 4);
    plain_t.events.downsample = 1;
    float *ref_t = bin(ds, &plain_t, 0, 4, cells);
    a = bin(ds, &p, 0, 4, cells);
    CHECK(sum(a, all) == 4.0 * n && memcmp(a, ref_t, all * sizeof *a) != 0,
          "time jitter keeps every event and moves some across bins");
    free(a);
    p.events.time_jitter_us = 0;
    a = bin(ds, &p, 0, 4, cells);
    CHECK(memcmp(a, ref_t, all * sizeof *a) == 0, "augmentation with every amount 0 changes nothing");
    free(a);
    free(ref_t);
    free(ref);
    sf_dataset_free(ds);
}

/* A prefetching training loader with every augmentation, restored mid-epoch into a fresh synchronous one,
 * delivers exactly the same batches. */
static void test_resume(void)
{
    sf_dataset *ds = busy_dataset(3000);
    if (!ds) return;
    sf_loader_params p = loader_params(6, 2);
    p.training = 1;
    p.augment = 1;
    p.prefetch = 1;
    p.seed = 5;
    p.events = (sf_event_params){.downsample = 2, .frame = SF_FRAME_COUNT, .time_jitter_us = 50, .drop_event = 0.1f,
                                 .shift = 2, .flip = 1};
    sf_loader *a = NULL, *b = NULL;
    CHECK_OK(sf_loader_create(ds, &p, &a));
    p.prefetch = 0;
    CHECK_OK(sf_loader_create(ds, &p, &b));
    if (!a || !b) return;
    const sf_batch *x;
    CHECK_OK(sf_loader_next(a, &x));
    CHECK(x && x->C == 2 && x->H == 8 && x->W == 8, "the batch has the downsampled shape");
    CHECK_OK(sf_loader_next(a, &x));
    CHECK_OK(sf_loader_next(a, &x)); /* the epoch's end */
    sf_loader_state st;
    sf_loader_get_state(a, &st);
    CHECK_OK(sf_loader_set_state(b, &st));
    int equal = 1;
    const size_t n = 6 * 2 * 2 * 8 * 8;
    for (int k = 0; k < 5; k++) {
        const sf_batch *xa = NULL, *xb = NULL;
        CHECK_OK(sf_loader_next(a, &xa));
        CHECK_OK(sf_loader_next(b, &xb));
        if (!xa || !xb) {
            equal &= !xa && !xb;
            continue;
        }
        equal &= memcmp(xa->x, xb->x, n * sizeof(float)) == 0 && xa->labels[0] == xb->labels[0];
    }
    CHECK(equal, "a resumed loader sees the same augmented batches");
    p.events.downsample = 0;
    sf_loader *bad = NULL;
    sf_status s = sf_loader_create(ds, &p, &bad);
    CHECK(s == SF_ERR_INVALID && strstr(sf_last_error(), "downsample 0 >= 1"), "bad event parameters: %s",
          sf_last_error());
    sf_loader_free(a);
    sf_loader_free(b);
    sf_dataset_free(ds);
}

int main(void)
{
    test_checks();
    test_binning();
    test_augmentation();
    test_resume();
    return tu_finish("test_events");
}
