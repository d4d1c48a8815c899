/* make_events.c — writes a small event dataset in the files its authors distribute, for trying the event readers
 * (docs/tutorials/event-data.md) without downloading anything:
 *   shd         OUT/shd_train.h5, OUT/shd_test.h5 (HDF5: /spikes/times in s, /spikes/units, /labels; 700 units, 20 classes)
 *   nmnist      OUT/Train/<digit>/NNNNN.bin, OUT/Test/<digit>/NNNNN.bin (5-byte events, 34×34, 10 classes)
 *   dvsgesture  OUT/userNN_led.aedat (AEDAT 3.1), OUT/userNN_led_labels.csv, OUT/trials_to_{train,test}.txt
 *               (128×128, 11 classes: each recording performs every gesture once)
 *
 * usage: make_events OUT shd|nmnist|dvsgesture [training samples per class = 8] [test samples per class = 2]
 *
 * Each class's events fall in its own band of the sensor (units, columns or rows), at uniform random times, so a
 * network learns the classes within an epoch or two; the events are drawn from (class, sample, event). */
#include "core/rng.h"

#include <errno.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EVENTS 2000 /* per sample: about a quarter of a real SHD or N-MNIST sample's */

static int fail(const char *what, const char *path)
{
    fprintf(stderr, "make_events: cannot %s %s: %s\n", what, path, strerror(errno));
    return 0;
}

static int make_dir(const char *path) { return mkdir(path, 0777) == 0 || errno == EEXIST || fail("create", path); }

/* OUT and the folders above it, as mkdir -p. */
static int make_dirs(const char *path)
{
    char part[4096];
    snprintf(part, sizeof part, "%s", path);
    for (char *p = part + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (!make_dir(part)) return 0;
            *p = '/';
        }
    return make_dir(part);
}

static int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return fail("write", path);
    int ok = fwrite(data, 1, len, f) == len;
    ok &= fclose(f) == 0;
    return ok || fail("write", path);
}

/* Event k of sample `sample` of class c: a position in c's band of `bands` across `extent`, a time in [0, span). */
static uint32_t band_pos(int c, int bands, int extent, uint64_t sample, int k)
{
    const int width = extent / bands;
    return (uint32_t)(c * width) + (uint32_t)(sf_uniform(sample, 1, (uint64_t)k) * (float)width);
}

static uint32_t draw_time(uint64_t sample, int k, uint32_t span)
{
    return (uint32_t)(sf_uniform(sample, 2, (uint64_t)k) * (float)span);
}

static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The sorted times of a sample's events (every reader wants them in order). */
static void sorted_times(uint64_t sample, uint32_t span, uint32_t *t)
{
    for (int k = 0; k < EVENTS; k++) t[k] = draw_time(sample, k, span);
    qsort(t, EVENTS, sizeof *t, cmp_u32);
}

/* ---- SHD: one HDF5 file per split, samples of 1 s */
static int write_shd_split(const char *path, int per_class, uint64_t split)
{
    const int classes = 20, n = classes * per_class;
    hvl_t *times = calloc((size_t)n, sizeof *times), *units = calloc((size_t)n, sizeof *units);
    uint16_t *labels = calloc((size_t)n, sizeof *labels);
    float *tbuf = calloc((size_t)n * EVENTS, sizeof *tbuf);
    uint16_t *ubuf = calloc((size_t)n * EVENTS, sizeof *ubuf);
    if (!times || !units || !labels || !tbuf || !ubuf) return fail("allocate samples for", path);
    uint32_t t[EVENTS];
    for (int s = 0; s < n; s++) {
        const int c = s % classes;
        const uint64_t key = split << 32 | (uint64_t)s;
        sorted_times(key, 1000000, t);
        for (int k = 0; k < EVENTS; k++) {
            tbuf[(size_t)s * EVENTS + k] = (float)t[k] * 1e-6f;
            ubuf[(size_t)s * EVENTS + k] = (uint16_t)band_pos(c, classes, 700, key, k);
        }
        times[s] = (hvl_t){EVENTS, tbuf + (size_t)s * EVENTS};
        units[s] = (hvl_t){EVENTS, ubuf + (size_t)s * EVENTS};
        labels[s] = (uint16_t)c;
    }
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    int ok = f >= 0;
    if (ok) {
        hsize_t dims[1] = {(hsize_t)n};
        hid_t sp = H5Screate_simple(1, dims, NULL), g = H5Gcreate2(f, "spikes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t tf = H5Tvlen_create(H5T_IEEE_F32LE), tm = H5Tvlen_create(H5T_NATIVE_FLOAT);
        hid_t uf = H5Tvlen_create(H5T_STD_U16LE), um = H5Tvlen_create(H5T_NATIVE_UINT16);
        hid_t d1 = H5Dcreate2(g, "times", tf, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t d2 = H5Dcreate2(g, "units", uf, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t d3 = H5Dcreate2(f, "labels", H5T_STD_U16LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        ok = H5Dwrite(d1, tm, H5S_ALL, H5S_ALL, H5P_DEFAULT, times) >= 0 &&
             H5Dwrite(d2, um, H5S_ALL, H5S_ALL, H5P_DEFAULT, units) >= 0 &&
             H5Dwrite(d3, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels) >= 0;
        H5Dclose(d1), H5Dclose(d2), H5Dclose(d3), H5Tclose(tf), H5Tclose(tm), H5Tclose(uf), H5Tclose(um);
        H5Gclose(g), H5Sclose(sp);
        ok &= H5Fclose(f) >= 0;
    }
    free(times), free(units), free(labels), free(tbuf), free(ubuf);
    if (!ok) fprintf(stderr, "make_events: writing the HDF5 file %s failed\n", path);
    return ok;
}

/* ---- N-MNIST: one file per sample, 300 ms each; an event is x, y, then polarity (top bit) and a 23-bit µs time */
static int write_nmnist_split(const char *out, const char *split, int per_class, uint64_t split_key)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out, split);
    if (!make_dir(path)) return 0;
    uint8_t buf[EVENTS * 5];
    uint32_t t[EVENTS];
    for (int c = 0; c < 10; c++) {
        snprintf(path, sizeof path, "%s/%s/%d", out, split, c);
        if (!make_dir(path)) return 0;
        for (int i = 0; i < per_class; i++) {
            const uint64_t key = split_key << 32 | (uint64_t)(c * per_class + i);
            sorted_times(key, 300000, t);
            for (int k = 0; k < EVENTS; k++) {
                uint8_t *e = buf + 5 * k;
                e[0] = (uint8_t)band_pos(c, 10, 34, key, k);                    /* x: the class's columns */
                e[1] = (uint8_t)(sf_uniform(key, 3, (uint64_t)k) * 34.0f);      /* y: anywhere */
                e[2] = (uint8_t)((k & 1) << 7 | (t[k] >> 16 & 0x7f));
                e[3] = (uint8_t)(t[k] >> 8);
                e[4] = (uint8_t)t[k];
            }
            snprintf(path, sizeof path, "%s/%s/%d/%05d.bin", out, split, c, i);
            if (!write_file(path, buf, sizeof buf)) return 0;
        }
    }
    return 1;
}

/* ---- DVS128 Gesture: one AEDAT 3.1 recording per user holding the 11 gestures in turn, 200 ms each */
static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static int write_gesture_user(const char *out, int user)
{
    static const char header[] = "#!AER-DAT3.1\r\n#Format: RAW\r\n#Source 1: DVS128\r\n#!END-HEADER\r\n";
    const int classes = 11;
    const uint32_t span = 200000;
    const size_t packet = 28 + (size_t)EVENTS * 8, len = strlen(header) + (size_t)classes * packet;
    uint8_t *buf = malloc(len);
    char csv[1024], path[4096];
    if (!buf) return fail("allocate a recording for", out);
    memcpy(buf, header, strlen(header));
    int used = snprintf(csv, sizeof csv, "class,startTime_usec,endTime_usec\r\n");
    uint32_t t[EVENTS];
    for (int c = 0; c < classes; c++) {
        uint8_t *p = buf + strlen(header) + (size_t)c * packet;
        const uint64_t key = (uint64_t)user << 32 | (uint64_t)c;
        const uint32_t start = 1000 + (uint32_t)c * span;
        /* packet header: type 1 (polarity), source 0, event size 8, timestamp at byte 4, no overflow, capacity,
         * number, valid */
        const uint32_t head[7] = {1, 8, 4, 0, EVENTS, EVENTS, EVENTS};
        for (int k = 0; k < 7; k++) put32(p + 4 * k, head[k]);
        sorted_times(key, span, t);
        for (int k = 0; k < EVENTS; k++) {
            const uint32_t x = (uint32_t)(sf_uniform(key, 3, (uint64_t)k) * 128.0f), y = band_pos(c, classes, 128, key, k);
            put32(p + 28 + 8 * k, x << 17 | y << 2 | (uint32_t)(k & 1) << 1 | 1u);
            put32(p + 32 + 8 * k, start + t[k]);
        }
        used += snprintf(csv + used, sizeof csv - (size_t)used, "%d,%u,%u\r\n", c + 1, start, start + span);
    }
    snprintf(path, sizeof path, "%s/user%02d_led.aedat", out, user);
    int ok = write_file(path, buf, len);
    free(buf);
    snprintf(path, sizeof path, "%s/user%02d_led_labels.csv", out, user);
    return ok && write_file(path, csv, (size_t)used);
}

/* Users 1..train are the training trials, the next `test` users the test trials. */
static int write_gesture(const char *out, int train, int test)
{
    char list[2][4096] = {{0}}, path[4096];
    for (int u = 1; u <= train + test; u++) {
        if (!write_gesture_user(out, u)) return 0;
        char *l = list[u > train];
        snprintf(l + strlen(l), sizeof list[0] - strlen(l), "user%02d_led.aedat\n", u);
    }
    snprintf(path, sizeof path, "%s/trials_to_train.txt", out);
    if (!write_file(path, list[0], strlen(list[0]))) return 0;
    snprintf(path, sizeof path, "%s/trials_to_test.txt", out);
    return write_file(path, list[1], strlen(list[1]));
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: make_events OUT shd|nmnist|dvsgesture [training samples per class = 8] "
                        "[test samples per class = 2]\n");
        return 2;
    }
    const char *out = argv[1], *format = argv[2];
    const int train = argc > 3 ? atoi(argv[3]) : 8, test = argc > 4 ? atoi(argv[4]) : 2;
    if (train < 1 || test < 1 || train > 1000 || test > 1000) {
        fprintf(stderr, "make_events: samples per class must be 1 to 1000\n");
        return 2;
    }
    char path[4096];
    if (!make_dirs(out)) return 1;
    int ok;
    if (strcmp(format, "shd") == 0) {
        snprintf(path, sizeof path, "%s/shd_train.h5", out);
        ok = write_shd_split(path, train, 0);
        snprintf(path, sizeof path, "%s/shd_test.h5", out);
        ok = ok && write_shd_split(path, test, 1);
    } else if (strcmp(format, "nmnist") == 0) {
        ok = write_nmnist_split(out, "Train", train, 0) && write_nmnist_split(out, "Test", test, 1);
    } else if (strcmp(format, "dvsgesture") == 0) {
        ok = write_gesture(out, train, test); /* a user per sample of each class */
    } else {
        fprintf(stderr, "make_events: unknown format '%s' (shd, nmnist or dvsgesture)\n", format);
        return 2;
    }
    if (ok) printf("make_events: %s in %s: %d training and %d test samples per class\n", format, out, train, test);
    return ok ? 0 : 1;
}
