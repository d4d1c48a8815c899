/* make_imagefolder.c — writes an ImageNet-like image folder for the W11 loader benchmark (bench_imagefolder) and
 * for trying `dataset = imagefolder`: OUT/train/<class>/<name>.JPEG and OUT/val/<class>/<name>.JPEG, JPEGs of
 * 350–639 × 300–499 pixels (ImageNet's typical sizes, as peers_w9_w10.py's folder) at quality 90, 4:2:0.
 *
 * usage: make_imagefolder OUT [train images = 6000] [classes = 12] [val images = 600] [seed = 0]
 *
 * The content is photo-like for a JPEG decoder: a luminance of smooth value noise over three octaves (cells of 64,
 * 16 and 4 pixels) plus grain and a smoother colour, so the files carry detail at every frequency, mostly in luma,
 * and come out near ImageNet's ~110 kB average (printed at the end); flat colours would decode unrealistically
 * fast. Each class has its own colour cast, so a network can tell the classes apart. Images are drawn from (seed,
 * split, index) on OpenMP threads. */
#include "core/rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#define QUALITY 90

static int make_dir(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "make_imagefolder: cannot create %s: %s\n", path, strerror(errno));
        return 0;
    }
    return 1;
}

/* Value noise on a grid of `cell` pixels (corner values g, gw per row, in [-1/2, 1/2)) at pixel (x, y),
 * interpolated smoothly. */
static float noise(const float *g, int gw, int cell, int x, int y)
{
    const int gx = x / cell, gy = y / cell;
    float fx = (float)(x % cell) / cell, fy = (float)(y % cell) / cell;
    fx = fx * fx * (3 - 2 * fx);
    fy = fy * fy * (3 - 2 * fy);
    const float *r = g + (size_t)gy * gw + gx;
    return (r[0] * (1 - fx) + r[1] * fx) * (1 - fy) + (r[gw] * (1 - fx) + r[gw + 1] * fx) * fy;
}

/* Adds amp × value noise of `cell` pixels, drawn from (key, stream), to the w×h field v; g is scratch. */
static void add_octave(uint64_t key, uint64_t stream, int cell, float amp, int w, int h, float *v, float *g)
{
    const int gw = w / cell + 2, gh = h / cell + 2;
    for (int i = 0; i < gw * gh; i++) g[i] = sf_uniform(key, stream, (uint64_t)i) - 0.5f;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) v[(size_t)y * w + x] += amp * noise(g, gw, cell, x, y);
}

/* One image of class `label` into rgb (w×h×3), like a photo to a JPEG coder: a luminance with detail at every
 * scale (three octaves and grain) and smoother colour (one octave per channel and the class's cast); scratch holds
 * 2·w·h + the finest grid's floats. */
static void draw(uint64_t key, int label, int classes, int w, int h, unsigned char *rgb, float *scratch)
{
    const size_t n = (size_t)w * h;
    float *luma = scratch, *chroma = scratch + n, *grid = scratch + 2 * n;
    for (size_t i = 0; i < n; i++) luma[i] = 128.0f + 64.0f * (sf_uniform(key, 1, i) - 0.5f);
    add_octave(key, 2, 64, 200.0f, w, h, luma, grid);
    add_octave(key, 3, 16, 110.0f, w, h, luma, grid);
    add_octave(key, 4, 4, 80.0f, w, h, luma, grid);
    for (int c = 0; c < 3; c++) {
        /* the class's cast: a hue around the colour wheel */
        const float cast = 50.0f * (float)((label * 3 + c * classes) % (3 * classes)) / (3 * classes) - 25.0f;
        for (size_t i = 0; i < n; i++) chroma[i] = cast;
        add_octave(key, 5 + (uint64_t)c, 48, 90.0f, w, h, chroma, grid);
        for (size_t i = 0; i < n; i++) {
            const float p = luma[i] + chroma[i];
            rgb[i * 3 + c] = (unsigned char)(p < 0 ? 0 : p > 255 ? 255 : p);
        }
    }
}

/* Writes `count` images of one split; returns their total bytes, or -1 on an error (printed). */
static long long write_split(const char *out, const char *split, int count, int classes, uint64_t seed)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out, split);
    if (!make_dir(path)) return -1;
    for (int c = 0; c < classes; c++) {
        snprintf(path, sizeof path, "%s/%s/n%08d", out, split, c);
        if (!make_dir(path)) return -1;
    }
    long long bytes = 0;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(+ : bytes) reduction(| : failed)
    for (int i = 0; i < count; i++) {
        const uint64_t key = sf_hash3(seed, split[0], (uint64_t)i);
        const int w = 350 + (int)(sf_hash3(key, 1, 0) % 290), h = 300 + (int)(sf_hash3(key, 2, 0) % 200);
        const int label = i % classes;
        unsigned char *rgb = malloc((size_t)w * h * 3), *jpeg = NULL;
        float *grid = malloc((2 * (size_t)w * h + (size_t)(w / 4 + 2) * (h / 4 + 2)) * sizeof *grid);
        unsigned long len = 0;
        tjhandle tj = tjInitCompress();
        char file[4096];
        snprintf(file, sizeof file, "%s/%s/n%08d/%s_%06d.JPEG", out, split, label, split, i);
        FILE *f = NULL;
        if (rgb && grid && tj) {
            draw(key, label, classes, w, h, rgb, grid);
            if (tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, &len, TJSAMP_420, QUALITY, 0) == 0)
                f = fopen(file, "wb");
        }
        if (f && fwrite(jpeg, 1, len, f) == len && fclose(f) == 0) {
            bytes += (long long)len;
        } else {
            fprintf(stderr, "make_imagefolder: cannot write %s\n", file);
            failed = 1;
        }
        tjFree(jpeg);
        tjDestroy(tj);
        free(grid);
        free(rgb);
    }
    return failed ? -1 : bytes;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: make_imagefolder OUT [train images = 6000] [classes = 12] [val images = 600] "
                        "[seed = 0]\n");
        return 2;
    }
    const int train = argc > 2 ? atoi(argv[2]) : 6000, classes = argc > 3 ? atoi(argv[3]) : 12;
    const int val = argc > 4 ? atoi(argv[4]) : 600;
    const uint64_t seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
    if (train < classes || classes < 1 || val < 0) {
        fprintf(stderr, "make_imagefolder: need classes >= 1, train images >= classes, val images >= 0\n");
        return 2;
    }
    if (!make_dir(argv[1])) return 1;
    const long long a = write_split(argv[1], "train", train, classes, seed);
    const long long b = a < 0 ? -1 : write_split(argv[1], "val", val, classes, seed);
    if (b < 0) return 1;
    printf("%s: %d train and %d val JPEGs of %d classes, %.1f kB per image on average\n", argv[1], train, val,
           classes, (double)(a + b) / (train + val) / 1000.0);
    return 0;
}
