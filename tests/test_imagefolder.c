/* test_imagefolder.c — image folders on small files written here with libjpeg-turbo and libpng: the layout (classes
 * in byte order, nested folders, files that are not images), val/ with class folders or flat with a labels file,
 * grayscale, CMYK and PNG images whatever their names say, the random resized crop's ranges and determinism (and a
 * resumed or synchronous loader seeing the same batches), the evaluation and training crops against a resize
 * written independently here (PIL's bilinear filter in double precision, crop and resize in torchvision's order),
 * the DCT-scaled decode against the full one, and every kind of bad input refused with the file named, or skipped
 * and counted with skip_bad. */
#include "core/error.h"
#include "data/formats.h"
#include "io/files.h"
#include "testutil.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

static char tmpdir[256];

static char *path_of(char *buf, size_t cap, const char *rel)
{
    snprintf(buf, cap, "%s/%s", tmpdir, rel);
    return buf;
}

/* Runs a shell command formatted with the temporary folder as its first argument. */
static void sh(const char *fmt, ...)
{
    char cmd[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    CHECK(system(cmd) == 0, "%s", cmd);
}

static void mkdirs(const char *rel)
{
    char path[512], cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path_of(path, sizeof path, rel));
    CHECK(system(cmd) == 0, "%s", cmd);
}

/* The folder a file of rel goes into, created. */
static char *file_path(char *buf, size_t cap, const char *rel)
{
    path_of(buf, cap, rel);
    char *slash = strrchr(buf, '/');
    *slash = 0;
    CHECK_OK(sf_dir_create(buf));
    *slash = '/';
    return buf;
}

static void put(const char *rel, const void *buf, size_t len)
{
    char path[512];
    FILE *f = fopen(file_path(path, sizeof path, rel), "wb");
    CHECK(f != NULL, "cannot create %s", path);
    if (!f) return;
    CHECK(fwrite(buf, 1, len, f) == len, "fwrite %s", path);
    fclose(f);
}

/* A colourful pattern, different per seed, its frequencies scaled by f (1: up to a third of the sampling rate). */
static uint8_t *pattern_f(int w, int h, int seed, double f)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                const double a = f * (0.21 * x * (c + 1) + 0.13 * y), b = f * (0.17 * y - 0.05 * x * c);
                const double v = 128 + 90 * sin(a + seed) * cos(b);
                p[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

static uint8_t *pattern(int w, int h, int seed) { return pattern_f(w, h, seed, 1.0); }

/* A JPEG of pixels `pix` in pixel format pf (TJPF_RGB, TJPF_GRAY, TJPF_CMYK); its bytes in *out (tjFree them). */
static unsigned long jpeg_bytes(int w, int h, int pf, const uint8_t *pix, int quality, unsigned char **out)
{
    tjhandle tj = tjInitCompress();
    unsigned long len = 0;
    *out = NULL;
    const int samp = pf == TJPF_GRAY ? TJSAMP_GRAY : pf == TJPF_CMYK ? TJSAMP_444 : TJSAMP_420;
    CHECK(tj && tjCompress2(tj, pix, w, 0, h, pf, out, &len, samp, quality, 0) == 0, "tjCompress2: %s",
          tjGetErrorStr2(tj));
    tjDestroy(tj);
    return len;
}

static void jpeg_file(const char *rel, int w, int h, int pf, const uint8_t *pix)
{
    unsigned char *b = NULL;
    unsigned long len = jpeg_bytes(w, h, pf, pix, 92, &b);
    put(rel, b, len);
    tjFree(b);
}

static void pattern_jpeg(const char *rel, int w, int h, int seed)
{
    uint8_t *p = pattern(w, h, seed);
    jpeg_file(rel, w, h, TJPF_RGB, p);
    free(p);
}

static void png_file(const char *rel, int w, int h, const uint8_t *pix, int alpha)
{
    char path[512];
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB;
    CHECK(png_image_write_to_file(&img, file_path(path, sizeof path, rel), 0, pix, 0, NULL), "png %s: %s", path,
          img.message);
}

/* The full-size RGB pixels of a JPEG file, as a reference (malloc'd). */
static uint8_t *decode_ref(const char *rel, int *w, int *h)
{
    char path[512];
    FILE *f = fopen(path_of(path, sizeof path, rel), "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    rewind(f);
    unsigned char *b = malloc((size_t)n);
    const size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    tjhandle tj = tjInitDecompress();
    int s, cs;
    uint8_t *rgb = NULL;
    if (got == (size_t)n && tjDecompressHeader3(tj, b, (unsigned long)n, w, h, &s, &cs) == 0) {
        rgb = malloc((size_t)*w * *h * 3);
        tjDecompress2(tj, b, (unsigned long)n, rgb, *w, 0, *h, TJPF_RGB, 0);
    }
    tjDestroy(tj);
    free(b);
    return rgb;
}

/* PIL's bilinear resize, written out in double precision: columns first, then rows, as ImagingResample does. */
static void ref_weights(int in, int out, double *w, int *first, int *count, int taps)
{
    const double scale = (double)in / out, support = scale > 1 ? scale : 1;
    for (int o = 0; o < out; o++) {
        const double center = (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        double total = 0;
        for (int k = 0; k < hi - lo; k++) {
            const double t = fabs((k + lo - center + 0.5) / support);
            total += w[o * taps + k] = t < 1 ? 1 - t : 0;
        }
        for (int k = 0; k < hi - lo; k++) w[o * taps + k] /= total;
        first[o] = lo;
        count[o] = hi - lo;
    }
}

static double *ref_resize(const uint8_t *src, int W, int H, int nw, int nh)
{
    const int tx = 2 * (int)ceil((double)W / nw + 1) + 1, ty = 2 * (int)ceil((double)H / nh + 1) + 1;
    double *wx = calloc((size_t)nw * tx, sizeof *wx), *wy = calloc((size_t)nh * ty, sizeof *wy);
    int *fx = malloc(nw * sizeof *fx), *cx = malloc(nw * sizeof *cx), *fy = malloc(nh * sizeof *fy),
        *cy = malloc(nh * sizeof *cy);
    ref_weights(W, nw, wx, fx, cx, tx);
    ref_weights(H, nh, wy, fy, cy, ty);
    double *mid = calloc((size_t)H * nw * 3, sizeof *mid), *out = calloc((size_t)nh * nw * 3, sizeof *out);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < nw; x++)
            for (int c = 0; c < 3; c++)
                for (int k = 0; k < cx[x]; k++)
                    mid[((size_t)y * nw + x) * 3 + c] += wx[x * tx + k] * src[((size_t)y * W + fx[x] + k) * 3 + c];
    for (int y = 0; y < nh; y++)
        for (int x = 0; x < nw; x++)
            for (int c = 0; c < 3; c++)
                for (int k = 0; k < cy[y]; k++)
                    out[((size_t)y * nw + x) * 3 + c] += wy[y * ty + k] * mid[((size_t)(fy[y] + k) * nw + x) * 3 + c];
    free(wx), free(wy), free(fx), free(cx), free(fy), free(cy), free(mid);
    return out;
}

static sf_status load(const char *rel, sf_split split, int32_t classes, int32_t size, const char *labels,
                      int skip_bad, sf_dataset **out)
{
    char dir[512];
    sf_data_params p;
    sf_data_default_params(&p);
    p.images = (sf_image_params){.size = size, .classes = classes, .skip_bad = skip_bad, .val_labels = labels};
    *out = NULL;
    return sf_dataset_load(SF_DATASET_IMAGEFOLDER, path_of(dir, sizeof dir, rel), split, &p, out);
}

static void expect_fail(sf_status got, sf_status want, const char *needle, const char *needle2, const char *what)
{
    CHECK(got == want && strstr(sf_last_error(), needle) && (!needle2 || strstr(sf_last_error(), needle2)),
          "%s: got %s: %s", what, sf_status_str(got), sf_last_error());
}

static const char *name_of(const sf_dataset *ds, int64_t i)
{
    static char path[4096];
    return sf_image_path(ds, i, path, sizeof path) == SF_OK ? path + strlen(tmpdir) + 1 : "?";
}

static sf_loader_params eval_params(int64_t batch)
{
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = batch;
    p.training = 0;
    p.normalize = 0;
    p.threads = 2;
    return p;
}

/* ---------------------------------------------------------------- layout */

static void test_layout(void)
{
    pattern_jpeg("lay/train/b_cls/x1.jpg", 20, 16, 1);
    pattern_jpeg("lay/train/b_cls/x0.JPEG", 20, 16, 2);
    uint8_t *p = pattern(20, 16, 3);
    png_file("lay/train/b_cls/sub/y.png", 20, 16, p, 0);
    free(p);
    put("lay/train/b_cls/notes.txt", "not an image", 12);
    pattern_jpeg("lay/train/b_cls/.hidden.jpg", 20, 16, 4);
    pattern_jpeg("lay/train/a_cls/a.jpeg", 20, 16, 5);
    pattern_jpeg("lay/train/C_cls/c.jpg", 20, 16, 6);
    put("lay/train/README", "a file beside the classes", 25);
    for (int c = 0; c < 3; c++) {
        static const char *const cls[] = {"C_cls", "a_cls", "b_cls"};
        char rel[128];
        snprintf(rel, sizeof rel, "lay/val/%s/v%d.jpg", cls[c], c);
        pattern_jpeg(rel, 20, 16, 10 + c);
    }
    sf_dataset *tr = NULL, *te = NULL;
    CHECK_OK(load("lay", SF_SPLIT_TRAIN, 3, 16, NULL, 0, &tr));
    CHECK_OK(load("lay", SF_SPLIT_TEST, 3, 16, NULL, 0, &te));
    if (!tr || !te) return;
    CHECK(tr->type == SF_SAMPLES_FILES && tr->count == 5 && tr->classes == 3 && tr->channels == 3 &&
              tr->height == 16 && tr->width == 16,
          "5 training images of 3 classes at 16x16 (%lld)", (long long)tr->count);
    static const char *const want[] = {"lay/train/C_cls/c.jpg", "lay/train/a_cls/a.jpeg", "lay/train/b_cls/x0.JPEG",
                                       "lay/train/b_cls/x1.jpg", "lay/train/b_cls/sub/y.png"};
    static const int32_t labels[] = {0, 1, 2, 2, 2};
    int ok = 1;
    for (int i = 0; i < 5; i++) ok &= strcmp(name_of(tr, i), want[i]) == 0 && tr->labels[i] == labels[i];
    CHECK(ok, "classes in byte order (C_cls, a_cls, b_cls), a folder's files before its subfolders, others left out");
    CHECK(te->count == 3 && te->labels[0] == 0 && te->labels[2] == 2 &&
              strcmp(name_of(te, 1), "lay/val/a_cls/v1.jpg") == 0,
          "val/ with the same class folders");
    sf_dataset_free(tr);
    sf_dataset_free(te);

    expect_fail(load("lay", SF_SPLIT_TRAIN, 10, 16, NULL, 0, &tr), SF_ERR_INVALID, "lay/train holds 3 class folders",
                "classes = 3", "a class count that is not the folders'");
    expect_fail(load("nowhere", SF_SPLIT_TRAIN, 3, 16, NULL, 0, &tr), SF_ERR_IO, "nowhere/train", "ImageNet",
                "a missing folder names it and the layout");
    mkdirs("lay/val/d_cls");
    pattern_jpeg("lay/val/d_cls/d.jpg", 20, 16, 7);
    expect_fail(load("lay", SF_SPLIT_TEST, 3, 16, NULL, 0, &te), SF_ERR_FORMAT, "differ",
                "lay/train has no folder d_cls", "val/ with a class train/ lacks");
    sh("rm -r '%s/lay/val/d_cls' '%s/lay/val/C_cls'", tmpdir, tmpdir);
    expect_fail(load("lay", SF_SPLIT_TEST, 3, 16, NULL, 0, &te), SF_ERR_FORMAT, "lay/val has no folder C_cls", NULL,
                "val/ missing a class of train/");
    expect_fail(load("lay", SF_SPLIT_TEST, 3, 16, "labels.txt", 0, &te), SF_ERR_INVALID, "has class folders",
                "val_labels", "val_labels beside class folders");
    mkdirs("lay/train/e_cls");
    put("lay/train/e_cls/readme.txt", "x", 1);
    expect_fail(load("lay", SF_SPLIT_TRAIN, 4, 16, NULL, 0, &tr), SF_ERR_FORMAT, "lay/train/e_cls",
                "holds no image", "an empty class folder");
    pattern_jpeg("lay/train/e_cls/e.jpg", 20, 16, 8);
    put("lay/train/e_cls/photo.bmp", "BM", 2);
    expect_fail(load("lay", SF_SPLIT_TRAIN, 4, 16, NULL, 0, &tr), SF_ERR_FORMAT, "e_cls/photo.bmp",
                "JPEG and PNG images only", "an image format torchvision reads but spikefuse does not");
}

/* ---------------------------------------------------------------- a flat val/ with a labels file */

static void test_flat_val(void)
{
    static const char *const cls[] = {"n01", "n02", "n03"};
    for (int c = 0; c < 3; c++) {
        char rel[128];
        snprintf(rel, sizeof rel, "flat/train/%s/t.jpg", cls[c]);
        pattern_jpeg(rel, 20, 16, c);
    }
    pattern_jpeg("flat/val/ILSVRC_v1.JPEG", 20, 16, 1);
    pattern_jpeg("flat/val/ILSVRC_v2.JPEG", 20, 16, 2);
    pattern_jpeg("flat/val/ILSVRC_v3.JPEG", 20, 16, 3);
    /* Kaggle's CSV (a header, the name without its ending, the class first in the rest) and Caffe's val.txt lines */
    const char *labels = "ImageId,PredictionString\nILSVRC_v1,n03 1 2 3 4\r\n\nILSVRC_v2.JPEG 0\nILSVRC_v3,n02\n";
    put("flat/val_labels.csv", labels, strlen(labels));
    sf_dataset *te = NULL;
    CHECK_OK(load("flat", SF_SPLIT_TEST, 3, 16, "val_labels.csv", 0, &te));
    CHECK(te && te->count == 3 && te->labels[0] == 2 && te->labels[1] == 0 && te->labels[2] == 1,
          "each image's class by folder name or index");
    sf_dataset_free(te);
    expect_fail(load("flat", SF_SPLIT_TEST, 3, 16, NULL, 0, &te), SF_ERR_INVALID, "flat/val has no class folders",
                "val_labels", "a flat val/ without labels");
    expect_fail(load("flat", SF_SPLIT_TEST, 3, 16, "missing.txt", 0, &te), SF_ERR_IO, "missing.txt", NULL,
                "a labels file that is not there");
    const char *cases[][3] = {
        {"ILSVRC_v1 n03\nILSVRC_v2 n01\n", "ILSVRC_v3.JPEG", "gives it no class"},
        {"ILSVRC_v1 n03\nILSVRC_v2 n01\nILSVRC_v3 n01\nILSVRC_v9 n02\n", "val_labels.csv:4", "no image ILSVRC_v9"},
        {"ILSVRC_v1 n03\nILSVRC_v2 n07\n", "val_labels.csv:2", "'n07' is neither"},
        {"ILSVRC_v1 n03\nILSVRC_v2 3\n", "val_labels.csv:2", "'3' is neither"},
        {"ILSVRC_v1 n03\nILSVRC_v1 n01\n", "val_labels.csv:2", "on line 1 already"},
        {"ILSVRC_v1 n03\nILSVRC_v2\n", "val_labels.csv:2", "no class after ILSVRC_v2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        put("flat/val_labels.csv", cases[i][0], strlen(cases[i][0]));
        expect_fail(load("flat", SF_SPLIT_TEST, 3, 16, "val_labels.csv", 0, &te), SF_ERR_FORMAT, cases[i][1],
                    cases[i][2], cases[i][2]);
    }
    /* one line, two images of that name with different endings */
    pattern_jpeg("flat/val/ILSVRC_v3.jpg", 20, 16, 4);
    put("flat/val_labels.csv", labels, strlen(labels));
    expect_fail(load("flat", SF_SPLIT_TEST, 3, 16, "val_labels.csv", 0, &te), SF_ERR_FORMAT, "val_labels.csv:5",
                "ILSVRC_v3 names two images", "a line naming two images");
}

/* ---------------------------------------------------------------- grayscale, CMYK, PNG */

static void flat_pixels(uint8_t *p, int n, int channels, const uint8_t *v)
{
    for (int i = 0; i < n; i++) memcpy(p + (size_t)i * channels, v, (size_t)channels);
}

static void test_kinds(void)
{
    enum { W = 24, H = 20 };
    uint8_t pix[W * H * 4];
    flat_pixels(pix, W * H, 4, (const uint8_t[]){10, 200, 30, 0});
    png_file("kinds/train/k/alpha.png", W, H, pix, 1); /* alpha 0: dropped, as PIL's convert("RGB") does */
    /* CMYK as Adobe stores it (255: no ink): R = C·K/255 */
    flat_pixels(pix, W * H, 4, (const uint8_t[]){200, 100, 50, 255});
    jpeg_file("kinds/train/k/cmyk.jpg", W, H, TJPF_CMYK, pix);
    flat_pixels(pix, W * H, 4, (const uint8_t[]){200, 100, 50, 128});
    jpeg_file("kinds/train/k/cmyk2.jpg", W, H, TJPF_CMYK, pix);
    flat_pixels(pix, W * H, 1, (const uint8_t[]){90});
    jpeg_file("kinds/train/k/gray.jpg", W, H, TJPF_GRAY, pix);
    flat_pixels(pix, W * H, 3, (const uint8_t[]){240, 20, 120});
    png_file("kinds/train/k/png.JPEG", W, H, pix, 0); /* a PNG named .JPEG, as ImageNet has */
    sf_dataset *ds = NULL;
    CHECK_OK(load("kinds", SF_SPLIT_TRAIN, 1, 16, NULL, 0, &ds));
    if (!ds) return;
    sf_loader_params p = eval_params(5);
    sf_loader *l = NULL;
    const sf_batch *b = NULL;
    CHECK_OK(sf_loader_create(ds, &p, &l));
    if (l) CHECK_OK(sf_loader_next(l, &b));
    static const double want[5][3] = {{10, 200, 30}, {200, 100, 50}, {100, 50, 25}, {90, 90, 90}, {240, 20, 120}};
    double worst = 0;
    for (int s = 0; b && s < 5; s++)
        for (int c = 0; c < 3; c++)
            for (int q = 0; q < 256; q++) {
                const double d = fabs(b->x[((size_t)s * 3 + c) * 256 + q] * 255.0 - want[s][c]);
                worst = d > worst ? d : worst;
            }
    CHECK(b && worst <= 3.0, "PNG with alpha, CMYK (two inks), grayscale and a PNG named .JPEG decode to their "
                             "colours (worst %.2f levels off)", worst);
    sf_loader_free(l);
    sf_dataset_free(ds);
}

/* ---------------------------------------------------------------- crops */

static void test_crop_draws(void)
{
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.augment = 1;
    p.seed = 7;
    const int32_t W = 500, H = 375;
    int in_range = 1, inside = 1, flips = 0, same = 1, differ = 0;
    double area_lo = 1, area_hi = 0, ratio_lo = 10, ratio_hi = 0;
    for (int64_t s = 0; s < 4000; s++) {
        sf_image_crop c, again, other;
        sf_image_crop_of(&p, 224, 3, s, W, H, &c);
        sf_image_crop_of(&p, 224, 3, s, W, H, &again);
        sf_image_crop_of(&p, 224, 4, s, W, H, &other);
        same &= memcmp(&c, &again, sizeof c) == 0;
        differ += c.x != other.x || c.w != other.w;
        const double area = c.w * c.h / (W * H), ratio = c.w / c.h;
        area_lo = fmin(area_lo, area), area_hi = fmax(area_hi, area);
        ratio_lo = fmin(ratio_lo, ratio), ratio_hi = fmax(ratio_hi, ratio);
        in_range &= area >= 0.08 * 0.97 && area <= 1.0 && ratio >= 0.75 * 0.98 && ratio <= 4.0 / 3.0 * 1.02;
        inside &= c.x >= 0 && c.y >= 0 && c.x + c.w <= W && c.y + c.h <= H && c.x == floor(c.x) && c.inside;
        flips += c.flip;
    }
    CHECK(in_range && inside, "area fractions in [0.08, 1] (seen %.3f..%.3f), ratios in [3/4, 4/3] (%.3f..%.3f), "
                              "integer boxes inside the image", area_lo, area_hi, ratio_lo, ratio_hi);
    CHECK(area_lo < 0.1 && area_hi > 0.95 && ratio_lo < 0.78 && ratio_hi > 1.28, "the ranges are covered");
    CHECK(flips > 1800 && flips < 2200, "half flipped (%d of 4000)", flips);
    CHECK(same && differ > 3900, "a function of (seed, epoch, sample): the same again, another in another epoch");
    p.crop_scale_min = 0.5f;
    sf_image_crop c;
    int big = 1;
    for (int64_t s = 0; s < 1000; s++) {
        sf_image_crop_of(&p, 224, 0, s, W, H, &c);
        big &= c.w * c.h >= 0.5 * 0.97 * W * H;
    }
    CHECK(big, "crop_scale_min bounds the area from below");
    /* evaluation: the short side to 256 for 224, the centre */
    p.training = 0;
    sf_image_crop_of(&p, 224, 0, 0, 500, 375, &c);
    /* 500x375 → 341x256 (341 = ⌊256·500/375⌋), then the centre 224: from x 58 (round half to even) and y 16 */
    CHECK(fabs(c.w - 224 * 500.0 / 341) < 1e-9 && fabs(c.h - 224 * 375.0 / 256) < 1e-9 && !c.flip && !c.inside &&
              fabs(c.x - 58 * 500.0 / 341) < 1e-9 && fabs(c.y - 16 * 375.0 / 256) < 1e-9,
          "evaluation crop of 500x375: %g,%g %gx%g", c.x, c.y, c.w, c.h);
}

/* The batch slot's planar floats against a reference image (H×W×3 doubles in [0, 255]) at offset (top, left). */
static double worst_diff(const float *x, int size, const double *ref, int ref_w, int top, int left, int flip)
{
    double worst = 0;
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < size; y++)
            for (int xx = 0; xx < size; xx++) {
                const int rx = left + (flip ? size - 1 - xx : xx);
                const double d = fabs(x[((size_t)c * size + y) * size + xx] -
                                      ref[((size_t)(top + y) * ref_w + rx) * 3 + c] / 255.0);
                worst = d > worst ? d : worst;
            }
    return worst;
}

static void test_crop_numbers(void)
{
    /* small enough that no DCT scaling applies: the loader's pixels are the full decode's */
    pattern_jpeg("num/train/a/wide.jpg", 61, 47, 1);
    pattern_jpeg("num/train/a/tall.jpg", 40, 58, 2);
    sf_dataset *ds = NULL;
    const int size = 32, R = 36; /* ⌊32·256/224⌋ */
    CHECK_OK(load("num", SF_SPLIT_TRAIN, 1, size, NULL, 0, &ds));
    if (!ds) return;
    static const char *const files[] = {"num/train/a/tall.jpg", "num/train/a/wide.jpg"};
    sf_loader_params p = eval_params(2);
    sf_loader *l = NULL;
    const sf_batch *b = NULL;
    CHECK_OK(sf_loader_create(ds, &p, &l));
    if (l) CHECK_OK(sf_loader_next(l, &b));
    for (int i = 0; b && i < 2; i++) {
        int W, H;
        uint8_t *rgb = decode_ref(files[i], &W, &H);
        /* torchvision: Resize(36) then CenterCrop(32) */
        const int nw = W <= H ? R : (int)((double)R * W / H), nh = W <= H ? (int)((double)R * H / W) : R;
        double *ref = ref_resize(rgb, W, H, nw, nh);
        const int top = (int)nearbyint((nh - size) / 2.0), left = (int)nearbyint((nw - size) / 2.0);
        const double d = worst_diff(b->x + (size_t)i * 3 * size * size, size, ref, nw, top, left, 0);
        CHECK(d < 2e-5, "%s: the evaluation crop equals Resize(%d) + CenterCrop(%d) to %.2g", files[i], R, size, d);
        free(ref);
        free(rgb);
    }
    sf_loader_free(l);
    /* training: the random crop cut out, then resized, then flipped */
    p.training = 1;
    p.augment = 1;
    p.seed = 3;
    int flipped = 0, checked = 0;
    double worst = 0;
    CHECK_OK(sf_loader_create(ds, &p, &l));
    for (int epoch = 0; l && epoch < 6; epoch++)
        for (const sf_batch *tb = NULL; sf_loader_next(l, &tb) == SF_OK && tb;)
            for (int i = 0; i < 2; i++) {
                /* which file: the order is the epoch's shuffle */
                int64_t order[2];
                sf_shuffle_order(p.seed, epoch, 2, order);
                const int64_t s = order[i];
                int W, H;
                uint8_t *rgb = decode_ref(files[s], &W, &H);
                sf_image_crop c;
                sf_image_crop_of(&p, size, epoch, s, W, H, &c);
                const int cw = (int)c.w, ch = (int)c.h;
                uint8_t *crop = malloc((size_t)cw * ch * 3);
                for (int y = 0; y < ch; y++)
                    memcpy(crop + (size_t)y * cw * 3, rgb + ((size_t)(c.y + y) * W + (size_t)c.x) * 3, (size_t)cw * 3);
                double *ref = ref_resize(crop, cw, ch, size, size);
                worst = fmax(worst, worst_diff(tb->x + (size_t)i * 3 * size * size, size, ref, size, 0, 0, c.flip));
                flipped += c.flip;
                checked++;
                free(ref);
                free(crop);
                free(rgb);
            }
    CHECK(checked == 12 && flipped > 0 && flipped < 12 && worst < 2e-5,
          "the training crops equal RandomResizedCrop + flip to %.2g (%d of %d flipped)", worst, flipped, checked);
    sf_loader_free(l);
    sf_dataset_free(ds);

    /* a large image is decoded at 1/8 of its size for a 32-pixel output: close to the full decode's resize */
    uint8_t *smooth = pattern_f(400, 300, 4, 0.1);
    jpeg_file("big/train/a/big.jpg", 400, 300, TJPF_RGB, smooth);
    free(smooth);
    CHECK_OK(load("big", SF_SPLIT_TRAIN, 1, size, NULL, 0, &ds));
    p = eval_params(1);
    l = NULL;
    if (ds) CHECK_OK(sf_loader_create(ds, &p, &l));
    if (l) CHECK_OK(sf_loader_next(l, &b));
    int W, H;
    uint8_t *rgb = decode_ref("big/train/a/big.jpg", &W, &H);
    const int nw = (int)(36.0 * 400 / 300);
    double *ref = ref_resize(rgb, W, H, nw, 36), mean = 0;
    const int left = (int)nearbyint((nw - size) / 2.0), top = 2;
    for (int c = 0; l && b && c < 3; c++)
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++)
                mean += fabs(b->x[((size_t)c * size + y) * size + x] -
                             ref[((size_t)(top + y) * nw + left + x) * 3 + c] / 255.0);
    mean /= 3.0 * size * size;
    CHECK(l && b && mean < 0.02, "the DCT-scaled decode resizes to within %.4f (mean) of the full one", mean);
    free(ref);
    free(rgb);
    sf_loader_free(l);
    sf_dataset_free(ds);
}

/* ---------------------------------------------------------------- loaders: threads, resume, encodings */

/* n images of a few sizes, root/train/c<i % classes>/i<i>.jpg, except those of `broken` (bit i), which hold text. */
static void write_images(const char *root, int n, int classes, unsigned broken)
{
    for (int i = 0; i < n; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "%s/train/c%d/i%02d.jpg", root, i % classes, i);
        if (broken >> i & 1) put(rel, "broken", 6);
        else pattern_jpeg(rel, 30 + i, 26 + (i % 4), i);
    }
}

static void test_loader_determinism(void)
{
    write_images("det", 12, 3, 0);
    sf_dataset *ds = NULL;
    CHECK_OK(load("det", SF_SPLIT_TRAIN, 3, 16, NULL, 0, &ds));
    if (!ds) return;
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 4;
    p.timesteps = 3;
    p.augment = 1;
    p.erase_p = 0.5f;
    p.seed = 11;
    p.threads = 3;
    sf_loader_params sync = p;
    sync.prefetch = 0;
    sync.threads = 2;
    sf_loader *a = NULL, *s = NULL;
    CHECK_OK(sf_loader_create(ds, &p, &a));
    CHECK_OK(sf_loader_create(ds, &sync, &s));
    if (!a || !s) return;
    const size_t n = (size_t)3 * 4 * 3 * 16 * 16, step = n / 3;
    float *saved = malloc(n * sizeof *saved);
    int equal = 1, steps_equal = 1;
    for (int k = 0; k < 6 + 2; k++) { /* two epochs of 3 batches, two epoch ends */
        const sf_batch *x = NULL, *y = NULL;
        CHECK_OK(sf_loader_next(a, &x));
        CHECK_OK(sf_loader_next(s, &y));
        if (!x || !y) {
            equal &= !x && !y;
            continue;
        }
        equal &= memcmp(x->x, y->x, n * sizeof *x->x) == 0 && memcmp(x->labels, y->labels, 4 * sizeof *x->labels) == 0;
        steps_equal &= memcmp(x->x, x->x + step, step * sizeof *x->x) == 0; /* direct: every step the image */
        if (x->epoch == 1 && x->index == 1) memcpy(saved, x->x, n * sizeof *saved);
    }
    CHECK(equal, "threads with prefetch and the synchronous loader give identical batches");
    CHECK(steps_equal, "the direct encoding repeats the image over T");
    const sf_loader_state at = {1, 1};
    const sf_batch *b = NULL;
    CHECK_OK(sf_loader_set_state(a, &at));
    CHECK_OK(sf_loader_next(a, &b));
    CHECK(b && b->epoch == 1 && b->index == 1 && memcmp(b->x, saved, n * sizeof *saved) == 0,
          "a repositioned loader (a resumed run) sees the same batch");
    free(saved);
    sf_loader_free(a);
    sf_loader_free(s);
    sf_dataset_free(ds);
}

/* ---------------------------------------------------------------- bad images */

/* The first batch of an evaluation loader over `rel`; its status. */
static sf_status first_batch(const char *rel, int32_t classes, int skip, int64_t batch, sf_dataset **ds,
                             sf_loader **l, const sf_batch **b)
{
    *l = NULL;
    *b = NULL;
    SF_TRY(load(rel, SF_SPLIT_TRAIN, classes, 16, NULL, skip, ds));
    sf_loader_params p = eval_params(batch);
    SF_TRY(sf_loader_create(*ds, &p, l));
    return sf_loader_next(*l, b);
}

static void test_bad_images(void)
{
    unsigned char *good = NULL;
    uint8_t *pix = pattern(160, 120, 9);
    const unsigned long len = jpeg_bytes(160, 120, TJPF_RGB, pix, 90, &good);
    free(pix);
    struct {
        const char *name, *needle;
        size_t len;
        int corrupt;
    } cases[] = {
        {"truncated.jpg", "does not decode", len / 2, 0},
        {"corrupt.jpg", "not a readable JPEG", len, 1},
        {"text.JPEG", "neither a JPEG nor a PNG", 0, 0},
        {"empty.jpg", "the file is empty", 0, 0},
        {"cut.png", "PNG", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char rel[128], cmd[700], path[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", path_of(path, sizeof path, "bad"));
        CHECK(system(cmd) == 0, "%s", cmd);
        put("bad/train/a/fine.jpg", good, len);
        snprintf(rel, sizeof rel, "bad/train/a/%s", cases[i].name);
        if (strstr(cases[i].name, "text")) {
            put(rel, "this is not an image\n", 21);
        } else if (strstr(cases[i].name, "png")) {
            uint8_t px[16 * 16 * 3] = {0};
            png_file(rel, 16, 16, px, 0);
            char full[512];
            CHECK(truncate(path_of(full, sizeof full, rel), 60) == 0, "truncate");
        } else {
            unsigned char *b = malloc(len + 1);
            memcpy(b, good, len);
            if (cases[i].corrupt) memset(b + 2, 0x5a, 40); /* the markers after SOI */
            put(rel, b, cases[i].len);
            free(b);
        }
        sf_dataset *ds = NULL;
        sf_loader *l = NULL;
        const sf_batch *b = NULL;
        expect_fail(first_batch("bad", 1, 0, 2, &ds, &l, &b), SF_ERR_FORMAT, rel, cases[i].needle, cases[i].name);
        const sf_status again = l ? sf_loader_next(l, &b) : SF_OK;
        CHECK(again == SF_ERR_FORMAT && strstr(sf_last_error(), rel), "%s: asking again gives the error again",
              cases[i].name);
        sf_loader_free(l);
        sf_dataset_free(ds);
        /* skipped and counted instead */
        CHECK_OK(first_batch("bad", 1, 1, 2, &ds, &l, &b));
        CHECK(b && b->valid == 1 && sf_dataset_bad_images(ds) == 1 &&
                  memcmp(b->x, b->x + 3 * 16 * 16, 3 * 16 * 16 * sizeof *b->x) == 0,
              "%s: skipped: one real sample, repeated, one bad image counted", cases[i].name);
        sf_loader_free(l);
        sf_dataset_free(ds);
    }
    tjFree(good);
}

/* skip_bad over epochs: each bad image counted once, batches full of good ones, evaluation counting them only. */
static void test_skip_counting(void)
{
    write_images("skip", 10, 2, 1u << 3 | 1u << 8);
    sf_dataset *ds = NULL;
    CHECK_OK(load("skip", SF_SPLIT_TRAIN, 2, 16, NULL, 1, &ds));
    if (!ds) return;
    sf_loader_params p;
    sf_loader_default_params(&p);
    p.batch = 5;
    p.augment = 1;
    p.threads = 2;
    sf_loader *l = NULL;
    CHECK_OK(sf_loader_create(ds, &p, &l));
    int64_t valid = 0, batches = 0;
    for (int k = 0; l && k < 3 * 3; k++) {
        const sf_batch *b = NULL;
        CHECK_OK(sf_loader_next(l, &b));
        if (b) valid += b->valid, batches++;
    }
    CHECK(batches == 6 && valid == 3 * 8 && sf_dataset_bad_images(ds) == 2,
          "3 epochs: %lld real samples in %lld batches (8 good images each epoch), 2 bad images counted once",
          (long long)valid, (long long)batches);
    sf_loader_free(l);
    p = eval_params(4);
    CHECK_OK(sf_loader_create(ds, &p, &l));
    valid = 0;
    for (const sf_batch *b = NULL; l && sf_loader_next(l, &b) == SF_OK && b;) valid += b->valid;
    CHECK(valid == 8, "evaluation counts the 8 good images (%lld)", (long long)valid);
    sf_loader_free(l);
    sf_dataset_free(ds);
    /* every image of a training batch bad: an error, not a batch of nothing */
    write_images("allbad", 4, 1, 0xf);
    CHECK_OK(load("allbad", SF_SPLIT_TRAIN, 1, 16, NULL, 1, &ds));
    p.training = 1;
    p.batch = 4;
    l = NULL;
    const sf_batch *b = NULL;
    if (ds) CHECK_OK(sf_loader_create(ds, &p, &l));
    expect_fail(l ? sf_loader_next(l, &b) : SF_ERR_STATE, SF_ERR_FORMAT, "all of its 4 images are bad", NULL,
                "a training batch of bad images only");
    sf_loader_free(l);
    sf_dataset_free(ds);
}

/* Unreadable files and folders: root reads everything, so the checks run in a child without its privileges. */
static void test_unreadable(void)
{
    pattern_jpeg("perm1/train/a/ok.jpg", 24, 20, 1);
    pattern_jpeg("perm1/train/a/secret.jpg", 24, 20, 2);
    pattern_jpeg("perm2/train/a/ok.jpg", 24, 20, 3);
    pattern_jpeg("perm2/train/b/ok.jpg", 24, 20, 4);
    char path[512];
    CHECK(chmod(tmpdir, 0755) == 0, "chmod %s", tmpdir);
    CHECK(chmod(path_of(path, sizeof path, "perm1/train/a/secret.jpg"), 0) == 0, "chmod %s", path);
    CHECK(chmod(path_of(path, sizeof path, "perm2/train/b"), 0) == 0, "chmod %s", path);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(8);
        int bad = 0;
        sf_dataset *ds = NULL;
        sf_loader *l = NULL;
        const sf_batch *b = NULL;
        sf_status s = first_batch("perm1", 1, 0, 2, &ds, &l, &b);
        if (!(s == SF_ERR_IO && strstr(sf_last_error(), "perm1/train/a/secret.jpg") &&
              strstr(sf_last_error(), strerror(EACCES)))) {
            fprintf(stderr, "unreadable image: %s: %s\n", sf_status_str(s), sf_last_error());
            bad |= 1;
        }
        sf_loader_free(l);
        sf_dataset_free(ds);
        s = load("perm2", SF_SPLIT_TRAIN, 2, 16, NULL, 0, &ds);
        if (!(s == SF_ERR_IO && strstr(sf_last_error(), "perm2/train/b") &&
              strstr(sf_last_error(), strerror(EACCES)))) {
            fprintf(stderr, "unreadable folder: %s: %s\n", sf_status_str(s), sf_last_error());
            bad |= 2;
        }
        sf_dataset_free(ds);
        _exit(bad);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "an unreadable image and class folder are named with the "
                                                          "reason (child's exit %d)", WEXITSTATUS(status));
    CHECK(chmod(path_of(path, sizeof path, "perm2/train/b"), 0755) == 0, "chmod %s", path);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sf_test_imagefolder_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_layout();
    test_flat_val();
    test_kinds();
    test_crop_draws();
    test_crop_numbers();
    test_loader_determinism();
    test_bad_images();
    test_skip_counting();
    test_unreadable();
    sh("rm -rf '%s'", tmpdir);
    return tu_finish("test_imagefolder");
}
