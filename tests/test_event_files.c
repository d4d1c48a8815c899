/* test_event_files.c — the event dataset readers on small files written here in each real format (N-MNIST .bin
 * byte by byte, DVS128 Gesture AEDAT 3.1 with its labels CSV and trials lists, CIFAR10-DVS AEDAT 2.0, N-Caltech101
 * in N-MNIST's format, SHD/SSC HDF5 through libhdf5, plain and gzipped) with known events: the events and labels
 * read back, and every kind of bad input (truncated or corrupt files, events off the sensor, times going backwards,
 * labels that disagree, empty samples, missing files) refused with a message naming the file and the sample. */
#include "data/formats.h"
#include "io/files.h"
#include "testutil.h"

#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <zlib.h>

static char tmpdir[256];

static void put(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot create %s", path);
    if (!f) return;
    CHECK(fwrite(buf, 1, len, f) == len, "fwrite %s", path);
    fclose(f);
}

static void put_text(const char *path, const char *text) { put(path, text, strlen(text)); }

static void gzip_file(const char *from, const char *to)
{
    FILE *f = fopen(from, "rb");
    gzFile g = gzopen(to, "wb");
    CHECK(f && g, "gzip %s", from);
    char buf[4096];
    size_t n;
    while (f && g && (n = fread(buf, 1, sizeof buf, f)) > 0) gzwrite(g, buf, (unsigned)n);
    if (f) fclose(f);
    if (g) gzclose(g);
}

static char *path_of(char *buf, size_t cap, const char *rel)
{
    snprintf(buf, cap, "%s/%s", tmpdir, rel);
    return buf;
}

static void mkdirs(const char *rel)
{
    char path[512], cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path_of(path, sizeof path, rel));
    CHECK(system(cmd) == 0, "%s", cmd);
}

static void expect_fail(sf_status got, sf_status want, const char *needle, const char *needle2, const char *what)
{
    CHECK(got == want && strstr(sf_last_error(), needle) && (!needle2 || strstr(sf_last_error(), needle2)),
          "%s: got %s: %s", what, sf_status_str(got), sf_last_error());
}

static sf_status load(sf_dataset_kind kind, const char *rel, sf_split split, sf_dataset **out)
{
    char dir[512];
    *out = NULL;
    return sf_dataset_load(kind, path_of(dir, sizeof dir, rel), split, NULL, out);
}

/* ---------------------------------------------------------------- N-MNIST */

/* One 5-byte N-MNIST event. */
static void nm_event(uint8_t *b, int x, int y, int p, uint32_t t)
{
    b[0] = (uint8_t)x;
    b[1] = (uint8_t)y;
    b[2] = (uint8_t)(p << 7 | (t >> 16 & 0x7f));
    b[3] = (uint8_t)(t >> 8);
    b[4] = (uint8_t)t;
}

static void write_nmnist(const char *root, int per_digit)
{
    for (int split = 0; split < 2; split++)
        for (int d = 0; d < 10; d++) {
            char rel[256], path[512];
            snprintf(rel, sizeof rel, "%s/%s/%d", root, split ? "Test" : "Train", d);
            mkdirs(rel);
            for (int k = 0; k < per_digit; k++) {
                uint8_t b[4 * 5];
                nm_event(b, d, 33 - d, 1, 1000u + (uint32_t)k);
                nm_event(b + 5, 33, 0, 0, 5000);
                nm_event(b + 10, 0, 240, 0, 0); /* overflow marker: +8192 µs from here on */
                nm_event(b + 15, k, 5, 1, 100);
                snprintf(rel + strlen(rel), sizeof rel - strlen(rel), "/%05d.bin", 7 - k);
                put(path_of(path, sizeof path, rel), b, sizeof b);
                *strrchr(rel, '/') = 0;
            }
        }
}

static void test_nmnist(void)
{
    write_nmnist("nm", 2);
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(load(SF_DATASET_NMNIST, "nm", SF_SPLIT_TRAIN, &tr));
    CHECK_OK(load(SF_DATASET_NMNIST, "nm", SF_SPLIT_TEST, &te));
    if (!tr || !te) return;
    CHECK(tr->count == 20 && te->count == 20 && tr->type == SF_SAMPLES_EVENTS, "20 samples per split");
    CHECK(tr->channels == 2 && tr->height == 34 && tr->width == 34 && tr->classes == 10, "sensor 2x34x34, 10 classes");
    int ok = 1;
    for (int s = 0; s < 20; s++) {
        /* Files sorted by name: 00006.bin (k = 1) before 00007.bin (k = 0). */
        const int d = s / 2, k = 1 - s % 2;
        const sf_event *e = tr->events + tr->offsets[s];
        ok &= tr->labels[s] == d && tr->offsets[s + 1] - tr->offsets[s] == 3;
        ok &= e[0].x == d && e[0].y == 33 - d && e[0].p == 1 && e[0].t == 0;
        ok &= e[1].x == 33 && e[1].y == 0 && e[1].p == 0 && e[1].t == 4000u - (uint32_t)k;
        ok &= e[2].x == k && e[2].y == 5 && e[2].t == 8192u + 100u - 1000u - (uint32_t)k;
    }
    CHECK(ok, "events, labels and the overflow marker read back as written");
    sf_dataset_free(tr);
    sf_dataset_free(te);

    /* Bad files: each error names the file. */
    char path[512];
    uint8_t b[10];
    nm_event(b, 1, 1, 0, 300);
    nm_event(b + 5, 1, 1, 0, 200);
    put(path_of(path, sizeof path, "nm/Test/4/00007.bin"), b, 10);
    expect_fail(load(SF_DATASET_NMNIST, "nm", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "nm/Test/4/00007.bin",
                "event 1 goes back in time", "times going backwards");
    nm_event(b + 5, 34, 1, 0, 400);
    put(path, b, 10);
    expect_fail(load(SF_DATASET_NMNIST, "nm", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "00007.bin: event 1 at x 34",
                "outside the sensor", "event off the sensor");
    put(path, b, 7);
    expect_fail(load(SF_DATASET_NMNIST, "nm", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "00007.bin",
                "not a whole number of 5-byte events", "truncated file");
    put(path, b, 0);
    CHECK_OK(load(SF_DATASET_NMNIST, "nm", SF_SPLIT_TEST, &te));
    CHECK(te && te->count == 19 && te->skipped == 1, "an empty file is skipped and counted");
    sf_dataset_free(te);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -r '%s/nm/Test/9'", tmpdir);
    CHECK(system(cmd) == 0, "%s", cmd);
    expect_fail(load(SF_DATASET_NMNIST, "nm", SF_SPLIT_TEST, &te), SF_ERR_IO, "nm/Test/9", "garrickorchard",
                "a missing digit folder names it and where N-MNIST is published");
    CHECK(te == NULL, "no dataset on failure");
}

/* ---------------------------------------------------------------- CIFAR10-DVS (AEDAT 2.0) */

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* An AEDAT 2.0 recording of n events: event i at raw x (bits 1-7) 3i+k, raw y (bits 8-14) 100-i, polarity bit i&1,
 * timestamp t0 + 10i µs (wrapping past 2^32 as a 32-bit clock does). Returns its length; the caller frees *out. */
static size_t aedat2(int n, int k, uint32_t t0, uint8_t **out)
{
    static const char header[] = "#!AER-DAT2.0\r\n# This is a raw AE data file - do not edit\r\n#\r\n";
    const size_t h = sizeof header - 1, len = h + 8 * (size_t)n;
    uint8_t *b = malloc(len);
    memcpy(b, header, h);
    for (int i = 0; i < n; i++) {
        const uint32_t x = (uint32_t)(3 * i + k) & 0x7f, y = (uint32_t)(100 - i) & 0x7f;
        be32(b + h + 8 * (size_t)i, y << 8 | x << 1 | (uint32_t)(i & 1));
        be32(b + h + 8 * (size_t)i + 4, t0 + 10u * (uint32_t)i);
    }
    *out = b;
    return len;
}

static const char *const c10_classes[] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                          "dog",      "frog",       "horse", "ship", "truck"};

/* data_dir/<class>/cifar10_<class>_<n>.aedat, n = 0..10: file n of class c has n + c + 2 events. */
static void write_cifar10dvs(const char *root)
{
    for (int c = 0; c < 10; c++)
        for (int n = 0; n <= 10; n++) {
            char rel[256];
            snprintf(rel, sizeof rel, "%s/%s", root, c10_classes[c]);
            if (n == 0) mkdirs(rel);
            snprintf(rel + strlen(rel), sizeof rel - strlen(rel), "/cifar10_%s_%d.aedat", c10_classes[c], n);
            uint8_t *b = NULL;
            const size_t len = aedat2(n + c + 2, n, 5000u * (uint32_t)n, &b);
            char path[512];
            put(path_of(path, sizeof path, rel), b, len);
            free(b);
        }
}

static void test_cifar10dvs(void)
{
    write_cifar10dvs("c10");
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TRAIN, &tr));
    CHECK_OK(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TEST, &te));
    if (!tr || !te) return;
    CHECK(tr->count == 100 && te->count == 10 && tr->channels == 2 && tr->height == 128 && tr->width == 128 &&
              tr->classes == 10,
          "11 recordings per class: 1 test, 10 training (%lld, %lld), 2×128×128, 10 classes", (long long)tr->count,
          (long long)te->count);
    int ok = 1;
    for (int c = 0; c < 10; c++)
        for (int j = 0; j < 10; j++) {
            /* natural order: _1, _2, ..., _10 after the test split's _0 */
            const int s = c * 10 + j, n = j + 1, count = n + c + 2;
            const sf_event *e = tr->events + tr->offsets[s];
            ok &= tr->labels[s] == c && tr->offsets[s + 1] - tr->offsets[s] == count;
            for (int i = 0; i < count; i++)
                ok &= e[i].x == 127 - ((100 - i) & 0x7f) && e[i].y == 127 - ((3 * i + n) & 0x7f) &&
                      e[i].p == 1 - (i & 1) && e[i].t == 10u * (uint32_t)i;
        }
    CHECK(ok, "events read back mapped as SpikingJelly maps them (x = 127 - bits 8-14, y = 127 - bits 1-7, "
              "p = 1 - bit 0), labels in CIFAR-10's order, recordings in natural order");
    CHECK(te->labels[3] == 3 && te->offsets[4] - te->offsets[3] == 0 + 3 + 2, "the test split is each class's _0");
    int32_t shape[3], classes;
    sf_data_params p;
    sf_data_default_params(&p);
    p.events.downsample = 2;
    sf_data_input_shape(SF_DATASET_CIFAR10DVS, &p, shape, &classes);
    CHECK(shape[0] == 2 && shape[1] == 64 && shape[2] == 64 && classes == 10, "input 2×64×64 with downsample 2");
    sf_dataset_free(tr);
    sf_dataset_free(te);

    /* The clock wrapping past 2^32 µs continues; a recording of no events is skipped and counted. */
    uint8_t *b = NULL;
    const size_t len = aedat2(30, 0, 0xffffff00u, &b), header = len - 8 * 30;
    sf_event ev[30];
    int64_t n = 0;
    CHECK_OK(sf_aedat2_parse(b, len, ev, &n));
    CHECK(n == 30 && ev[29].t == 290 && ev[26].t == 260, "a wrapped clock continues (%lld events)", (long long)n);
    char path[512];
    put(path_of(path, sizeof path, "c10/cat/cifar10_cat_0.aedat"), b, header); /* the header alone */
    CHECK_OK(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TEST, &te));
    CHECK(te && te->count == 9 && te->skipped == 1, "a recording without events is skipped and counted");
    sf_dataset_free(te);
    /* Bad files, each named. */
    put(path, b, len - 3);
    expect_fail(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "cat/cifar10_cat_0.aedat",
                "not a whole number of 8-byte events", "a truncated recording");
    free(b);
    aedat2(30, 0, 1000, &b);
    be32(b + header + 8 * 5 + 4, 1001);
    put(path, b, len);
    expect_fail(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "cifar10_cat_0.aedat",
                "event 5 goes back in time", "a recording going back in time");
    memcpy(b, "#!AER-DAT3.1", 12);
    put(path, b, len);
    expect_fail(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "cifar10_cat_0.aedat",
                "not an AEDAT 2.0 file", "another AEDAT version");
    put(path, "#!AER-DAT2.0 and no end of line", 31);
    expect_fail(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "cifar10_cat_0.aedat",
                "does not end", "a header cut short");
    free(b);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm '%s'/c10/dog/*.aedat", tmpdir);
    CHECK(system(cmd) == 0, "%s", cmd);
    expect_fail(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TRAIN, &te), SF_ERR_FORMAT, "c10/dog",
                "holds no .aedat recordings", "an empty class folder");
    snprintf(cmd, sizeof cmd, "rmdir '%s'/c10/dog", tmpdir);
    CHECK(system(cmd) == 0, "%s", cmd);
    expect_fail(load(SF_DATASET_CIFAR10DVS, "c10", SF_SPLIT_TRAIN, &te), SF_ERR_IO, "c10/dog", "figshare",
                "a missing class folder names where CIFAR10-DVS is published");
    CHECK(te == NULL, "no dataset on failure");
}

/* ---------------------------------------------------------------- N-Caltech101 (N-MNIST's format) */

static void test_ncaltech101(void)
{
    /* 101 classes of 5 recordings (1 test, 4 training) and BACKGROUND_Google's 5, unpacked as Caltech101/ */
    for (int c = -1; c < 101; c++) {
        char rel[128], path[512];
        if (c < 0) snprintf(rel, sizeof rel, "ncal/Caltech101/BACKGROUND_Google");
        else snprintf(rel, sizeof rel, "ncal/Caltech101/class_%03d", c);
        mkdirs(rel);
        for (int k = 1; k <= 5; k++) {
            uint8_t b[3 * 5];
            nm_event(b, 239, 179, 1, 100u * (uint32_t)k);         /* the sensor's far corner */
            nm_event(b + 5, (c + 1) % 240, k, 0, 100u * (uint32_t)k + 7);
            nm_event(b + 10, c + 1, 0, 1, 100u * (uint32_t)k + 9);
            char file[160];
            snprintf(file, sizeof file, "%s/image_%04d.bin", rel, k);
            put(path_of(path, sizeof path, file), b, sizeof b);
        }
    }
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(load(SF_DATASET_NCALTECH101, "ncal", SF_SPLIT_TRAIN, &tr)); /* the folder holding Caltech101/ */
    CHECK_OK(load(SF_DATASET_NCALTECH101, "ncal/Caltech101", SF_SPLIT_TEST, &te));
    if (!tr || !te) return;
    CHECK(tr->count == 404 && te->count == 101 && tr->classes == 101 && tr->channels == 2 && tr->height == 180 &&
              tr->width == 240,
          "101 classes without the background, 4 + 1 recordings each, sensor 2×180×240 (%lld, %lld)",
          (long long)tr->count, (long long)te->count);
    const sf_event *e = tr->events + tr->offsets[4 * 7 + 2]; /* class 7, image_0004 */
    CHECK(tr->labels[4 * 7 + 2] == 7 && e[0].x == 239 && e[0].y == 179 && e[1].x == 8 && e[1].y == 4 &&
              e[1].t == 7 && e[2].t == 9 && e[2].p == 1,
          "events and labels read back");
    sf_dataset_free(tr);
    sf_dataset_free(te);
    sf_data_params p;
    sf_data_default_params(&p);
    p.background_class = 1;
    char dir[512];
    CHECK_OK(sf_dataset_load(SF_DATASET_NCALTECH101, path_of(dir, sizeof dir, "ncal"), SF_SPLIT_TEST, &p, &te));
    CHECK(te && te->count == 102 && te->classes == 102 && te->labels[0] == 0 && te->labels[1] == 1 &&
              te->events[te->offsets[0] + 1].x == 0,
          "with ncaltech101_background: 102 classes, BACKGROUND_Google first");
    sf_dataset_free(te);

    char path[512], cmd[700];
    uint8_t b[10];
    nm_event(b, 240, 3, 0, 10);
    nm_event(b + 5, 1, 1, 0, 20);
    put(path_of(path, sizeof path, "ncal/Caltech101/class_050/image_0001.bin"), b, 10);
    expect_fail(load(SF_DATASET_NCALTECH101, "ncal", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "class_050/image_0001.bin",
                "event 0 at x 240", "an event off the 240-wide sensor");
    put(path, b, 7);
    expect_fail(load(SF_DATASET_NCALTECH101, "ncal", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "class_050/image_0001.bin",
                "not a whole number of 5-byte events", "a truncated recording");
    snprintf(cmd, sizeof cmd, "rm -r '%s/ncal/Caltech101/class_100'", tmpdir);
    CHECK(system(cmd) == 0, "%s", cmd);
    expect_fail(load(SF_DATASET_NCALTECH101, "ncal", SF_SPLIT_TEST, &te), SF_ERR_FORMAT,
                "100 class folders, expected 101 besides BACKGROUND_Google", "garrickorchard",
                "a class folder missing");
}

/* ---------------------------------------------------------------- DVS128 Gesture (AEDAT 3.1) */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf;

static void add(buf *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = 2 * (b->len + n);
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void add32(buf *b, uint32_t v)
{
    const uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    add(b, le, 4);
}

static void packet_header(buf *b, int type, uint32_t size, uint32_t overflow, uint32_t capacity, uint32_t number)
{
    add32(b, (uint32_t)type); /* type i16 and source i16 = 0 */
    add32(b, size);
    add32(b, 4);              /* timestamp offset: where the timestamp sits in an event */
    add32(b, overflow);
    add32(b, capacity);
    add32(b, number);
    add32(b, number);
}

static void polarity(buf *b, int x, int y, int p, int valid, uint32_t ts)
{
    add32(b, (uint32_t)x << 17 | (uint32_t)y << 2 | (uint32_t)p << 1 | (uint32_t)valid);
    add32(b, ts);
}

/* A recording: events at 1000 + 10·i µs (i = 0..99) at (i % 128, (3i) % 128), polarity i & 1, a special-event
 * packet and an invalid event between; with overflow_second the last 50 are at 2^31 + 10·(i - 50) µs instead (a
 * packet with timestamp overflow 1). */
static buf aedat_recording(int overflow_second)
{
    buf b = {0};
    const char *header = "#!AER-DAT3.1\r\n#Format: RAW\r\n#Source 1: DVS128\r\n#!END-HEADER\r\n";
    add(&b, header, strlen(header));
    packet_header(&b, 1, 8, 0, 52, 51); /* capacity above number: the spare slot is skipped */
    for (int i = 0; i < 50; i++) polarity(&b, i % 128, 3 * i % 128, i & 1, 1, 1000u + 10u * (uint32_t)i);
    polarity(&b, 5, 5, 0, 0, 1495); /* invalid: not an event */
    polarity(&b, 0, 0, 0, 1, 1);    /* beyond `number` */
    packet_header(&b, 0, 8, 0, 1, 1); /* a special event */
    add32(&b, 0);
    add32(&b, 1500);
    packet_header(&b, 1, 8, (uint32_t)overflow_second, 50, 50);
    for (int i = 50; i < 100; i++)
        polarity(&b, i % 128, 3 * i % 128, i & 1, 1,
                 overflow_second ? 10u * (uint32_t)(i - 50) : 1000u + 10u * (uint32_t)i);
    return b;
}

static void write_gesture(const char *root)
{
    char path[512], rel[256];
    mkdirs(root);
    buf b = aedat_recording(0);
    snprintf(rel, sizeof rel, "%s/user01_led.aedat", root);
    put(path_of(path, sizeof path, rel), b.p, b.len);
    snprintf(rel, sizeof rel, "%s/user02_led.aedat", root);
    put(path_of(path, sizeof path, rel), b.p, b.len);
    free(b.p);
    snprintf(rel, sizeof rel, "%s/user01_led_labels.csv", root);
    put_text(path_of(path, sizeof path, rel), "class,startTime_usec,endTime_usec\r\n1,1000,1200\r\n11,1200,1995\r\n"
                                              "5,1500,1700\r\n");
    snprintf(rel, sizeof rel, "%s/user02_led_labels.csv", root);
    put_text(path_of(path, sizeof path, rel), "class,startTime_usec,endTime_usec\n3,1100,1150\n");
    snprintf(rel, sizeof rel, "%s/trials_to_train.txt", root);
    put_text(path_of(path, sizeof path, rel), "user01_led.aedat\r\n\r\n");
    snprintf(rel, sizeof rel, "%s/trials_to_test.txt", root);
    put_text(path_of(path, sizeof path, rel), "user02_led.aedat\nuser01_led.aedat\n");
}

static void test_gesture(void)
{
    write_gesture("gest/DvsGesture");
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TRAIN, &tr)); /* the folder holding DvsGesture */
    CHECK_OK(load(SF_DATASET_DVSGESTURE, "gest/DvsGesture", SF_SPLIT_TEST, &te));
    if (!tr || !te) return;
    CHECK(tr->count == 3 && te->count == 4, "3 gestures in training, 1 + 3 in test (%lld, %lld)", (long long)tr->count,
          (long long)te->count);
    CHECK(tr->channels == 2 && tr->height == 128 && tr->width == 128 && tr->classes == 11, "sensor and classes");
    /* Spans [1000, 1200): events 0..19; [1200, 1995): 20..99; [1500, 1700): 50..69. */
    const int first[3] = {0, 20, 50}, count[3] = {20, 80, 20}, label[3] = {0, 10, 4};
    int ok = 1;
    for (int s = 0; s < 3; s++) {
        ok &= tr->labels[s] == label[s] && tr->offsets[s + 1] - tr->offsets[s] == count[s];
        for (int j = 0; j < count[s]; j++) {
            const sf_event *e = tr->events + tr->offsets[s] + j;
            const int i = first[s] + j;
            ok &= e->x == i % 128 && e->y == 3 * i % 128 && e->p == (i & 1) && e->t == 10u * (uint32_t)j;
        }
    }
    CHECK(ok, "each labelled span holds its events, times from its first event");
    CHECK(te->labels[0] == 2 && te->offsets[1] == 5, "user02's one gesture [1100, 1150): 5 events, class 3");
    sf_dataset_free(tr);
    sf_dataset_free(te);

    /* The overflow count extends the timestamps: a second packet 2^31 µs later. */
    char path[512];
    buf b = aedat_recording(1);
    sf_event ev[128];
    int64_t n = 0, origin = 0;
    CHECK_OK(sf_aedat_parse(b.p, b.len, ev, 128, &n, &origin));
    CHECK(n == 100 && origin == 1000 && ev[50].t == (1u << 31) - 1000u && ev[99].t == (1u << 31) - 510u,
          "overflow: %lld events, t[50] %u", (long long)n, (unsigned)ev[50].t);
    /* Truncated in a packet, or in the header. */
    CHECK(sf_aedat_parse(b.p, b.len - 3, ev, 128, &n, &origin) == SF_ERR_FORMAT &&
              strstr(sf_last_error(), "packet 2: truncated"),
          "truncated packet: %s", sf_last_error());
    CHECK(sf_aedat_parse(b.p, 30, ev, 128, &n, &origin) == SF_ERR_FORMAT && strstr(sf_last_error(), "#!END-HEADER"),
          "cut header: %s", sf_last_error());
    buf back = {0};
    add(&back, "#!AER-DAT3.1\n#!END-HEADER\n", 26);
    packet_header(&back, 1, 8, 0, 3, 3);
    polarity(&back, 1, 1, 0, 1, 500);
    polarity(&back, 1, 1, 0, 1, 700);
    polarity(&back, 1, 1, 0, 1, 600);
    CHECK(sf_aedat_parse(back.p, back.len, ev, 128, &n, &origin) == SF_ERR_FORMAT &&
              strstr(sf_last_error(), "packet 0 event 2 goes back in time (100 µs after 200 µs)"),
          "a recording going back in time: %s", sf_last_error());
    free(back.p);
    CHECK(sf_aedat_parse((const uint8_t *)"#!AER-DAT2.0\r\n", 14, ev, 128, &n, &origin) == SF_ERR_FORMAT &&
              strstr(sf_last_error(), "not an AEDAT 3.1 file"),
          "another version: %s", sf_last_error());
    free(b.p);

    /* Labels that disagree with the events, bad rows, a missing labels file, events off the sensor. */
    put_text(path_of(path, sizeof path, "gest/DvsGesture/user02_led_labels.csv"), "class,s,e\n3,5000,6000\n");
    expect_fail(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "user02_led_labels.csv:2",
                "lies outside the recording", "a gesture outside the recording");
    put_text(path, "class,s,e\n12,1000,1100\n");
    expect_fail(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "user02_led_labels.csv",
                "line 2: class 12 is out of range (expected 1..11)", "a class out of range");
    put_text(path, "class,s,e\n3,1000\n");
    expect_fail(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "user02_led_labels.csv",
                "line 2: expected class,start_us,end_us", "a short row");
    put_text(path, "class,s,e\n3,1100,1050\n");
    expect_fail(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TEST, &te), SF_ERR_FORMAT,
                "line 2: the gesture's span from 1100 to 1050 µs", "ends before it starts",
                "a gesture ending before it starts (the span named, not the class)");
    put_text(path, "class,s,e\n3,1001,1009\n");
    CHECK_OK(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TEST, &te));
    CHECK(te && te->count == 3 && te->skipped == 1, "a gesture without events is skipped and counted");
    sf_dataset_free(te);
    remove(path);
    expect_fail(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TEST, &te), SF_ERR_IO, "user02_led_labels.csv",
                "research.ibm.com", "a missing labels file");
    put_text(path_of(path, sizeof path, "gest/DvsGesture/trials_to_test.txt"), "../user01_led.aedat\n");
    expect_fail(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TEST, &te), SF_ERR_FORMAT, "trials_to_test.txt",
                "line 1: expected the name of a .aedat file", "a trials list naming another folder");
    b = (buf){0};
    const char *header = "#!AER-DAT3.1\n#!END-HEADER\n";
    add(&b, header, strlen(header));
    packet_header(&b, 1, 8, 0, 2, 2);
    polarity(&b, 3, 3, 0, 1, 1000);
    polarity(&b, 130, 3, 0, 1, 1100);
    put(path_of(path, sizeof path, "gest/DvsGesture/user01_led.aedat"), b.p, b.len);
    free(b.p);
    expect_fail(load(SF_DATASET_DVSGESTURE, "gest", SF_SPLIT_TRAIN, &tr), SF_ERR_FORMAT, "user01_led.aedat, gesture "
                "of", "event 1 at x 130, y 3, polarity 0 is outside the sensor", "an event off the sensor");
    expect_fail(load(SF_DATASET_DVSGESTURE, "nowhere", SF_SPLIT_TRAIN, &tr), SF_ERR_IO, "nowhere/trials_to_train.txt",
                "DvsGesture.tar.gz", "a missing dataset");
}

/* ---------------------------------------------------------------- SHD / SSC (HDF5) */

typedef struct shd_sample {
    int n;
    float times[4];
    uint16_t units[4];
} shd_sample;

/* A one-dimensional dataset `name` under `where` declaring n entries stored as `file_type`, the first `written` of
 * them written from `data` (of `mem_type`); contiguous, or chunked (and deflated) when asked. */
static void write_1d(hid_t where, const char *name, hid_t file_type, hid_t mem_type, hsize_t n, hsize_t written,
                     const void *data, int chunked, int deflate)
{
    hsize_t dims[1] = {n}, chunk[1] = {n < 1024 ? n : 1024}, start[1] = {0}, count[1] = {written};
    hid_t sp = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) H5Pset_chunk(dcpl, 1, chunk);
    if (deflate) H5Pset_deflate(dcpl, 9);
    hid_t d = H5Dcreate2(where, name, file_type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0, "creating /%s of %llu entries", name, (unsigned long long)n);
    if (written) {
        hid_t mem = H5Screate_simple(1, count, NULL);
        H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL);
        CHECK(H5Dwrite(d, mem_type, mem, sp, H5P_DEFAULT, data) >= 0, "writing /%s", name);
        H5Sclose(mem);
    }
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
}

/* An SHD-layout file: /spikes/times (vlen float32), /spikes/units (vlen uint16), /labels (uint16), declaring
 * declared[k] entries of which written[k] are written from t, u and labels. */
static void write_shd_file(const char *path, const hvl_t *t, const hvl_t *u, const uint16_t *labels,
                           const hsize_t declared[3], const hsize_t written[3], int chunked, int deflate)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "spikes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t tf = H5Tvlen_create(H5T_IEEE_F32LE), uf = H5Tvlen_create(H5T_STD_U16LE);
    hid_t tm = H5Tvlen_create(H5T_NATIVE_FLOAT), um = H5Tvlen_create(H5T_NATIVE_UINT16);
    write_1d(g, "times", tf, tm, declared[0], written[0], t, chunked, deflate);
    write_1d(g, "units", uf, um, declared[1], written[1], u, chunked, deflate);
    write_1d(f, "labels", H5T_STD_U16LE, H5T_NATIVE_UINT16, declared[2], written[2], labels, chunked, deflate);
    H5Tclose(tf);
    H5Tclose(uf);
    H5Tclose(tm);
    H5Tclose(um);
    H5Gclose(g);
    H5Fclose(f);
}

/* The samples s[0..n) as SHD's file, contiguous; n_units and n_labels can differ from n to write a file that
 * disagrees with itself. */
static void write_h5(const char *path, const shd_sample *s, int n, int n_units, const uint16_t *labels, int n_labels)
{
    hvl_t t[8], u[8];
    for (int i = 0; i < n; i++) {
        t[i] = (hvl_t){(size_t)s[i].n, (void *)s[i].times};
        u[i] = (hvl_t){(size_t)s[i].n, (void *)s[i].units};
    }
    const hsize_t sizes[3] = {(hsize_t)n, (hsize_t)n_units, (hsize_t)n_labels};
    write_shd_file(path, t, u, labels, sizes, sizes, 0, 0);
}

static const shd_sample shd_samples[3] = {
    {3, {0.010f, 0.0105f, 0.5f}, {0, 699, 350}},
    {1, {0.25f}, {12}},
    {4, {0.0f, 0.0f, 1.0f, 1.25f}, {5, 5, 6, 7}},
};

static void test_shd(void)
{
    char path[512], gz[512];
    mkdirs("shd");
    mkdirs("ssc");
    const uint16_t labels[3] = {19, 0, 7};
    write_h5(path_of(path, sizeof path, "shd/shd_train.h5"), shd_samples, 3, 3, labels, 3);
    write_h5(path_of(path, sizeof path, "shd/test.h5"), shd_samples, 2, 2, labels, 2);
    gzip_file(path, path_of(gz, sizeof gz, "shd/shd_test.h5.gz"));
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr));
    CHECK_OK(load(SF_DATASET_SHD, "shd", SF_SPLIT_TEST, &te)); /* from the .h5.gz */
    if (!tr || !te) return;
    CHECK(tr->count == 3 && te->count == 2 && tr->classes == 20 && tr->width == 700 && tr->height == 1,
          "SHD: 3 and 2 samples of a 700-channel sensor, 20 classes");
    int ok = 1;
    for (int s = 0; s < 3; s++) {
        ok &= tr->labels[s] == labels[s] && tr->offsets[s + 1] - tr->offsets[s] == shd_samples[s].n;
        for (int j = 0; j < shd_samples[s].n; j++) {
            const sf_event *e = tr->events + tr->offsets[s] + j;
            const long want = lround(((double)shd_samples[s].times[j] - shd_samples[s].times[0]) * 1e6);
            ok &= e->x == shd_samples[s].units[j] && e->y == 0 && e->p == 0 && labs((long)e->t - want) <= 1;
        }
    }
    CHECK(ok, "spike times (µs from each sample's first spike), units and labels read back");
    CHECK(te->offsets[2] == 4 && te->labels[1] == 0, "the gzipped file reads the same");
    sf_data_params dp;
    sf_data_default_params(&dp);
    int32_t shape[3], classes;
    sf_data_input_shape(SF_DATASET_SSC, &dp, shape, &classes);
    CHECK(shape[0] == 700 && shape[1] == 1 && classes == 35, "SSC: [700] inputs, 35 classes");
    sf_dataset_free(tr);
    sf_dataset_free(te);

    /* SSC reads the same layout; a label past 34 is refused with the sample named. */
    const uint16_t ssc_labels[3] = {34, 3, 35};
    write_h5(path_of(path, sizeof path, "ssc/ssc_train.h5"), shd_samples, 3, 3, ssc_labels, 3);
    expect_fail(load(SF_DATASET_SSC, "ssc", SF_SPLIT_TRAIN, &tr), SF_ERR_FORMAT, "ssc_train.h5: sample 2",
                "label 35 is out of range (expected 0..34)", "SSC label out of range");

    /* A file that disagrees with itself, bad spikes, a truncated file, no file at all. */
    write_h5(path_of(path, sizeof path, "shd/shd_train.h5"), shd_samples, 3, 3, labels, 2);
    expect_fail(load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr), SF_ERR_FORMAT, "shd_train.h5",
                "/labels has 2 entries but /spikes/times has 3", "labels disagreeing with the spikes");
    shd_sample bad[3] = {shd_samples[0], shd_samples[1], shd_samples[2]};
    bad[1].units[0] = 700;
    write_h5(path, bad, 3, 3, labels, 3);
    expect_fail(load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr), SF_ERR_FORMAT, "shd_train.h5: sample 1",
                "event 0 at x 700", "a unit past 699");
    bad[1] = shd_samples[1];
    bad[2].times[2] = 0.5f;
    bad[2].times[3] = 0.25f;
    write_h5(path, bad, 3, 3, labels, 3);
    expect_fail(load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr), SF_ERR_FORMAT, "shd_train.h5: sample 2",
                "event 3 goes back in time", "spike times going backwards");
    bad[2] = shd_samples[2];
    bad[0].times[1] = -0.5f;
    write_h5(path, bad, 3, 3, labels, 3);
    expect_fail(load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr), SF_ERR_FORMAT, "sample 0: spike 1 has time -0.5",
                NULL, "a negative time");
    bad[0] = shd_samples[0];
    bad[1].n = 0;
    write_h5(path, bad, 3, 3, labels, 3);
    CHECK_OK(load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr));
    CHECK(tr && tr->count == 2 && tr->skipped == 1 && tr->labels[1] == 7, "an empty sample is skipped and counted");
    sf_dataset_free(tr);
    char *bytes = NULL;
    size_t len = 0;
    write_h5(path, shd_samples, 3, 3, labels, 3);
    CHECK_OK(sf_read_file(path, SIZE_MAX, &bytes, &len));
    if (bytes) {
        for (size_t cut = 8; cut < len; cut += len / 7 + 1) {
            put(path, bytes, cut);
            tr = NULL;
            sf_status s = load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr);
            CHECK(s == SF_ERR_FORMAT && tr == NULL && strstr(sf_last_error(), "shd_train.h5"),
                  "cut at %zu of %zu bytes: %s", cut, len, sf_last_error());
        }
        put(path, "not hdf5 at all", 15);
        expect_fail(load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr), SF_ERR_FORMAT, "shd_train.h5",
                    "not an HDF5 file", "not HDF5");
        free(bytes);
    }
    remove(path);
    expect_fail(load(SF_DATASET_SHD, "shd", SF_SPLIT_TRAIN, &tr), SF_ERR_IO, "shd/shd_train.h5.gz", "zenkelab",
                "a missing file names both names and where SHD is published");
}

/* ---------------------------------------------------------------- hostile SHD files
 * Each must be refused at once, with little memory: a small file declaring 2^40 samples read as fill values for
 * hours, and a gzip bomb grew to 16 GiB before any check. */

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* An SHD-layout file whose chunked datasets (deflated when `deflate`) declare n samples and store `written` (at most
 * 4) of them, each shd_samples[0] with label 3. */
static void write_chunked_h5(const char *path, hsize_t n, hsize_t written, int deflate)
{
    hvl_t t[4], u[4];
    uint16_t labels[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (hvl_t){(size_t)shd_samples[0].n, (void *)shd_samples[0].times};
        u[i] = (hvl_t){(size_t)shd_samples[0].n, (void *)shd_samples[0].units};
        labels[i] = 3;
    }
    const hsize_t declared[3] = {n, n, n}, stored[3] = {written, written, written};
    write_shd_file(path, t, u, labels, declared, stored, 1, deflate);
}

/* A gzip file of `head` (may be empty) followed by `members` gzip members of 64 MiB of zeros each. */
static void write_gz_bomb(const char *path, const void *head, size_t head_len, int members)
{
    char member[600];
    snprintf(member, sizeof member, "%s.member", path);
    const size_t zeros_len = (size_t)64 << 20;
    void *zeros = calloc(1, zeros_len);
    gzFile g = gzopen(member, "wb1");
    CHECK(zeros && g && gzwrite(g, zeros, (unsigned)zeros_len) == (int)zeros_len, "writing 64 MiB of zeros");
    if (g) gzclose(g);
    free(zeros);
    char *bytes = NULL;
    size_t len = 0;
    CHECK_OK(sf_read_file(member, SIZE_MAX, &bytes, &len));
    g = gzopen(path, "wb");
    if (head_len) gzwrite(g, head, (unsigned)head_len);
    gzclose(g);
    FILE *f = fopen(path, "ab");
    for (int i = 0; f && bytes && i < members; i++) fwrite(bytes, 1, len, f);
    if (f) fclose(f);
    free(bytes);
    remove(member);
}

/* Loading SHD's training split from `rel` fails as wanted within a few seconds, growing memory by less than 256 MiB. */
static void expect_quick_fail(const char *rel, sf_status want, const char *needle, const char *what)
{
    sf_dataset *ds = NULL;
    const double t0 = seconds_now(), rss0 = peak_rss_mib();
    expect_fail(load(SF_DATASET_SHD, rel, SF_SPLIT_TRAIN, &ds), want, "shd_train.h5", needle, what);
    const double took = seconds_now() - t0, grew = peak_rss_mib() - rss0;
    CHECK(took < 10.0 && grew < 256.0, "%s: refused after %.1f s, memory grew by %.0f MiB", what, took, grew);
    sf_dataset_free(ds);
}

static void test_shd_hostile(void)
{
    char path[512];
    mkdirs("forged");
    write_chunked_h5(path_of(path, sizeof path, "forged/shd_train.h5"), (hsize_t)1 << 40, 0, 0);
    expect_quick_fail("forged", SF_ERR_FORMAT, "declares 1099511627776 entries but stores only 0 of the 1073741824 chunks",
                      "2^40 samples, none written");
    write_chunked_h5(path, (hsize_t)1 << 40, 1, 1);
    expect_quick_fail("forged", SF_ERR_FORMAT, "stores only 1 of the 1073741824 chunks",
                      "2^40 deflated samples, one written");
    /* a chunked, deflated file that stores what it declares reads as any other */
    write_chunked_h5(path, 4, 4, 1);
    sf_dataset *whole = NULL;
    CHECK_OK(load(SF_DATASET_SHD, "forged", SF_SPLIT_TRAIN, &whole));
    CHECK(whole && whole->count == 4 && whole->labels[3] == 3, "a chunked, deflated file reads its 4 samples");
    sf_dataset_free(whole);

    /* a 16 MB .h5.gz that unpacks to 16 GiB of zeros; the same behind a real HDF5 file; a superblock claiming 1 PiB */
    mkdirs("bomb");
    write_gz_bomb(path_of(path, sizeof path, "bomb/shd_train.h5.gz"), NULL, 0, 256);
    expect_quick_fail("bomb", SF_ERR_FORMAT, "not an HDF5 file", "a gzip bomb of zeros");
    const uint16_t labels[3] = {19, 0, 7};
    char h5[512], *bytes = NULL;
    size_t len = 0;
    write_h5(path_of(h5, sizeof h5, "bomb/real.h5"), shd_samples, 3, 3, labels, 3);
    CHECK_OK(sf_read_file(h5, SIZE_MAX, &bytes, &len));
    if (!bytes || len < 48) return;
    write_gz_bomb(path, bytes, len, 256);
    expect_quick_fail("bomb", SF_ERR_FORMAT, "is larger than", "a gzip bomb behind a real HDF5 header");
    CHECK(bytes[8] == 0, "libhdf5 wrote a version 0 superblock (its end-of-file address at byte 40)");
    const uint64_t petabyte = (uint64_t)1 << 50;
    memcpy(bytes + 40, &petabyte, 8);
    write_gz_bomb(path, bytes, len, 0);
    expect_quick_fail("bomb", SF_ERR_NOMEM, "more than this machine has available", "a superblock claiming 1 PiB");
    free(bytes);

    /* a directory where the file belongs; a file whose every sample is empty */
    mkdirs("dir/shd_train.h5");
    expect_quick_fail("dir", SF_ERR_IO, "is a directory, not a file", "shd_train.h5 a directory");
    shd_sample empty[2] = {shd_samples[0], shd_samples[1]};
    empty[0].n = empty[1].n = 0;
    mkdirs("empty");
    write_h5(path_of(path, sizeof path, "empty/shd_train.h5"), empty, 2, 2, labels, 2);
    sf_dataset *ds = NULL;
    expect_fail(load(SF_DATASET_SHD, "empty", SF_SPLIT_TRAIN, &ds), SF_ERR_FORMAT, "holds no samples",
                "every one is empty", "a split without samples is a data problem");
}

/* ---------------------------------------------------------------- the frame cache */

/* Every batch of an evaluation loader over ds, concatenated. */
static float *all_batches(const sf_dataset *ds, int64_t T, const sf_event_params *ep, size_t *n)
{
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 4;
    p.timesteps = T;
    p.training = 0;
    p.events = *ep;
    sf_loader *l = NULL;
    CHECK_OK(sf_loader_create(ds, &p, &l));
    if (!l) return NULL;
    float *out = NULL;
    *n = 0;
    for (const sf_batch *b; sf_loader_next(l, &b) == SF_OK && b;) {
        const size_t k = (size_t)(b->T * b->B * b->C * b->H * b->W);
        out = realloc(out, (*n + k) * sizeof *out);
        memcpy(out + *n, b->x, k * sizeof *out);
        *n += k;
    }
    sf_loader_free(l);
    return out;
}

static void test_cache(void)
{
    write_nmnist("cached", 3);
    char dir[512], cache[512], cmd[1200];
    path_of(dir, sizeof dir, "cached");
    path_of(cache, sizeof cache, "frames");
    sf_data_params p;
    sf_data_default_params(&p);
    p.timesteps = 3;
    p.events.downsample = 2;
    p.events.time_window_us = 2000;
    sf_dataset *plain = NULL, *built = NULL, *again = NULL;
    CHECK_OK(sf_dataset_load(SF_DATASET_NMNIST, dir, SF_SPLIT_TEST, &p, &plain));
    p.cache_dir = cache;
    CHECK_OK(sf_dataset_load(SF_DATASET_NMNIST, dir, SF_SPLIT_TEST, &p, &built));
    if (!plain || !built) return;
    CHECK(plain->type == SF_SAMPLES_EVENTS && built->type == SF_SAMPLES_FRAMES && built->count == 30 &&
              built->frames_T == 3 && built->channels == 2 && built->height == 17 && built->width == 17,
          "the cached split is binned frames of the downsampled shape");
    /* The cache is read back without parsing: a sample file removed since does not change it. */
    snprintf(cmd, sizeof cmd, "rm '%s/Test/3/00007.bin' && ls '%s' | grep -c '^nmnist-test-.*\\.frames$' >/dev/null",
             dir, cache);
    CHECK(system(cmd) == 0, "%s", cmd);
    CHECK_OK(sf_dataset_load(SF_DATASET_NMNIST, dir, SF_SPLIT_TEST, &p, &again));
    CHECK(again && again->type == SF_SAMPLES_FRAMES && again->count == 30, "the second load reads the cache");
    for (int binary = 0; binary <= 1 && again; binary++) {
        sf_event_params ep = p.events;
        ep.frame = binary;
        size_t n1 = 0, n2 = 0, n3 = 0;
        float *a = all_batches(plain, 3, &ep, &n1), *b = all_batches(built, 3, &ep, &n2),
              *c = all_batches(again, 3, &ep, &n3);
        CHECK(a && b && c && n1 == n2 && n1 == n3 && memcmp(a, b, n1 * sizeof *a) == 0 &&
                  memcmp(a, c, n1 * sizeof *a) == 0,
              "%s frames: cached batches equal the binned ones", binary ? "binary" : "count");
        free(a);
        free(b);
        free(c);
    }
    sf_loader_params lp;
    sf_loader_default_params(&lp);
    lp.timesteps = 4;
    sf_loader *l = NULL;
    CHECK(sf_loader_create(again, &lp, &l) == SF_ERR_INVALID && strstr(sf_last_error(), "binned into 3 steps"),
          "a loader of another T is refused: %s", sf_last_error());
    sf_dataset_free(again);
    again = NULL;

    /* A damaged or truncated cache file is rebuilt (here from the files as they are now: 29 samples). */
    for (int damage = 0; damage < 2; damage++) {
        snprintf(cmd, sizeof cmd,
                 damage ? "f=$(ls '%s'/nmnist-test-*.frames) && truncate -s -7 \"$f\""
                        : "f=$(ls '%s'/nmnist-test-*.frames) && printf 'X' | dd of=\"$f\" bs=1 seek=300 conv=notrunc "
                          "status=none",
                 cache);
        CHECK(system(cmd) == 0, "%s", cmd);
        CHECK_OK(sf_dataset_load(SF_DATASET_NMNIST, dir, SF_SPLIT_TEST, &p, &again));
        CHECK(again && again->type == SF_SAMPLES_FRAMES && again->count == 29, "%s cache rebuilt (%lld samples)",
              damage ? "a truncated" : "a damaged", again ? (long long)again->count : -1);
        sf_dataset_free(again);
        again = NULL;
    }
    /* An augmented training split is binned per epoch, never cached; another T is another file. */
    p.events.shift = 1;
    CHECK_OK(sf_dataset_load(SF_DATASET_NMNIST, dir, SF_SPLIT_TRAIN, &p, &again));
    CHECK(again && again->type == SF_SAMPLES_EVENTS, "the augmented training split is not cached");
    sf_dataset_free(again);
    p.timesteps = 5;
    CHECK_OK(sf_dataset_load(SF_DATASET_NMNIST, dir, SF_SPLIT_TEST, &p, &again));
    snprintf(cmd, sizeof cmd, "test $(ls '%s' | grep -c '^nmnist-test-.*\\.frames$') -eq 2", cache);
    CHECK(again && again->frames_T == 5 && system(cmd) == 0, "another T is cached in another file");
    sf_dataset_free(again);
    sf_dataset_free(plain);
    sf_dataset_free(built);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sf_test_event_files_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_nmnist();
    test_gesture();
    test_cifar10dvs();
    test_ncaltech101();
    test_shd();
    test_shd_hostile();
    test_cache();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish("test_event_files");
}
