/* test_imagefolder_train.c — the image-folder pipeline end to end: a 10-class folder of small JPEGs written here
 * (each class its own hue and stripe direction, sizes from 40×36 to 71×59, quality 90), examples/imagefolder_tiny.ini
 * and the small SEW-ResNet of examples/imagefolder_sew_tiny.ini trained on it by the trainer for their 3 epochs, and
 * the held-out val/ images classified well above chance. Prints the images/s of each run (decoding, augmentation and
 * the steps) on this machine. */
#include "core/rng.h"
#include "testutil.h"
#include "spikefuse_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#define CLASSES 10
#define TRAIN_PER_CLASS 30
#define VAL_PER_CLASS 10
#define PI 3.14159265358979323846

/* A picture of class k: stripes at angle k·18° of the class's hue, over a random brightness, with grain. */
static void draw(int k, uint64_t seed, int w, int h, unsigned char *rgb)
{
    const double angle = k * PI / CLASSES, hue = 2 * PI * k / CLASSES, phase = 6.28 * sf_uniform(seed, 1, 0);
    const double bright = 0.6 + 0.4 * sf_uniform(seed, 2, 0), freq = 0.55 + 0.2 * sf_uniform(seed, 3, 0);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const double s = 0.5 + 0.5 * sin(freq * (x * cos(angle) + y * sin(angle)) + phase);
            for (int c = 0; c < 3; c++) {
                const double tint = 0.5 + 0.5 * cos(hue - 2.0944 * c);
                double v = 255 * bright * (0.25 + 0.75 * s * tint) + 30 * (sf_uniform(seed, 4 + (uint64_t)c,
                                                                                     (uint64_t)(y * w + x)) - 0.5);
                rgb[((size_t)y * w + x) * 3 + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

static int write_split(const char *root, const char *split, int per_class)
{
    tjhandle tj = tjInitCompress();
    char folder[600];
    snprintf(folder, sizeof folder, "%s/%s", root, split);
    int ok = tj != NULL && mkdir(folder, 0777) == 0;
    for (int k = 0; k < CLASSES && ok; k++)
        for (int i = 0; i < per_class && ok; i++) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s/class_%d", root, split, k);
            if (i == 0) ok = mkdir(path, 0777) == 0;
            const uint64_t seed = sf_hash3(split[0], (uint64_t)k, (uint64_t)i);
            const int w = 40 + (int)(seed % 32), h = 36 + (int)((seed >> 8) % 24);
            unsigned char *rgb = malloc((size_t)w * h * 3), *jpeg = NULL;
            unsigned long len = 0;
            draw(k, seed, w, h, rgb);
            ok = ok && tjCompress2(tj, rgb, w, 0, h, TJPF_RGB, &jpeg, &len, TJSAMP_420, 90, 0) == 0;
            snprintf(path + strlen(path), sizeof path - strlen(path), "/%04d.jpg", i);
            FILE *f = ok ? fopen(path, "wb") : NULL;
            ok = f && fwrite(jpeg, 1, len, f) == len;
            if (f) ok &= fclose(f) == 0;
            tjFree(jpeg);
            free(rgb);
        }
    tjDestroy(tj);
    return ok;
}

typedef struct progress {
    double samples_per_s, data_wait, seconds;
} progress;

static int on_event(const sf_train_event *ev, void *user)
{
    progress *p = user;
    if (ev->kind == SF_TRAIN_EV_EPOCH) {
        p->samples_per_s = ev->samples_per_s;
        p->data_wait += ev->data_wait_seconds;
        p->seconds += ev->epoch_seconds;
    }
    return 0;
}

/* Trains examples/<file> on the folder for its 3 epochs: the held-out images well above chance. */
static void train_config(const char *file, const char *dir, const char *run_dir)
{
    char path[600], set[256];
    snprintf(path, sizeof path, "%s/%s", SF_EXAMPLES_DIR, file);
    sf_config *cfg = NULL;
    CHECK_OK(sf_config_load(path, &cfg));
    snprintf(set, sizeof set, "train.data_dir=%s", dir);
    if (cfg) CHECK_OK(sf_config_set_arg(cfg, set));
    progress p = {0};
    sf_train_options opt = {.run_dir = run_dir, .callback = on_event, .user = &p};
    sf_train_summary sum = {.best_test_accuracy = -1};
    if (cfg) CHECK_OK(sf_train_run(cfg, &opt, &sum));
    CHECK(cfg && sum.epochs_done == 3 && sum.best_test_accuracy >= 0.5,
          "%s: 3 epochs reach %.1f%% on the held-out images (chance: 10%%)", file, 100 * sum.best_test_accuracy);
    printf("imagefolder end to end, %s: %d training images of %d classes at 32x32, T=2, %.0f images/s in the last "
           "epoch (%.1f%% of the training time waiting for data), best held-out accuracy %.1f%%, %.1f s\n",
           file, CLASSES * TRAIN_PER_CLASS, CLASSES, p.samples_per_s,
           p.seconds > 0 ? 100 * p.data_wait / p.seconds : 0, 100 * sum.best_test_accuracy, sum.seconds);
    sf_config_free(cfg);
}

int main(void)
{
    char root[] = "/tmp/sf_test_imagefolder_train_XXXXXX", dir[128], run_dir[128], cmd[300];
    if (!mkdtemp(root)) return 2;
    snprintf(dir, sizeof dir, "%s/images", root);
    CHECK(mkdir(dir, 0777) == 0 && write_split(dir, "train", TRAIN_PER_CLASS) && write_split(dir, "val", VAL_PER_CLASS),
          "writing the image folder in %s", dir);
    const char *configs[2] = {"imagefolder_tiny.ini", "imagefolder_sew_tiny.ini"};
    for (int k = 0; k < 2; k++) {
        snprintf(run_dir, sizeof run_dir, "%s/run%d", root, k);
        train_config(configs[k], dir, run_dir);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return tu_finish("test_imagefolder_train");
}
