/* encode.c — turning images into T steps of network input (direct, Poisson rate, latency), with the per-channel
 * normalisation of direct inputs and the seeded crop/flip augmentation. */
#include "data/dataset.h"

#include "core/error.h"
#include "data/draws.h"

#include <math.h>
#include <string.h>

static const char *const encoding_names[] = {"direct", "poisson", "latency"};

sf_status sf_encoding_parse(const char *name, sf_encoding *out)
{
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, encoding_names[i]) == 0) {
            *out = (sf_encoding)i;
            return SF_OK;
        }
    return sf_fail(SF_ERR_INVALID, "unknown encoding '%s' (expected direct, poisson or latency)",
                   name ? name : "(null)");
}

const char *sf_encoding_name(sf_encoding e) { return (unsigned)e <= SF_ENCODING_LATENCY ? encoding_names[e] : "?"; }

/* Zero padding on each side of the random crop (the usual CIFAR-10 recipe). */
#define SF_CROP_PAD 4

/* Where output pixel (y, x) of a sample is read from: a crop offset in [-pad, pad] per axis and a flip. */
typedef struct view {
    int dy, dx, flip;
} view;

static view sample_view(const sf_loader_params *p, uint64_t aug_key, int64_t sample)
{
    view v = {0, 0, 0};
    if (!(p->training && p->augment)) return v;
    uint64_t r = sf_hash3(aug_key, (uint64_t)sample, 0);
    v.dy = (int)(r % (2 * SF_CROP_PAD + 1)) - SF_CROP_PAD;
    v.dx = (int)((r >> 16) % (2 * SF_CROP_PAD + 1)) - SF_CROP_PAD;
    v.flip = (int)((r >> 40) & 1);
    return v;
}

/* Intensity in [0, 1] of output pixel (c, y, x), 0 where the crop reaches into the padding. */
static float pixel(const sf_dataset *ds, const uint8_t *img, view v, int c, int y, int x)
{
    int sy = y + v.dy, sx = (v.flip ? ds->width - 1 - x : x) + v.dx;
    if (sy < 0 || sy >= ds->height || sx < 0 || sx >= ds->width) return 0.0f;
    return (float)img[((size_t)c * ds->height + sy) * ds->width + sx] / 255.0f;
}

void sf_encode_batch(const sf_dataset *ds, const sf_loader_params *p, int64_t epoch, const int64_t *idx,
                     int64_t count, float *x)
{
    const int64_t T = p->timesteps, B = p->batch;
    const int C = ds->channels, H = ds->height, W = ds->width;
    const size_t chw = (size_t)C * H * W, step = (size_t)B * chw;
    const uint64_t aug_key = sf_draw_key(p->seed, SF_DRAW_AUGMENT, epoch);
    const uint64_t poisson_key = sf_draw_key(p->seed, SF_DRAW_POISSON, epoch);
    const float *mean = p->std[0] != 0.0f ? p->mean : ds->mean, *std = p->std[0] != 0.0f ? p->std : ds->std;
    for (int64_t b = 0; b < count; b++) {
        const int64_t sample = idx[b];
        const uint8_t *img = ds->images + (size_t)sample * chw;
        const view v = sample_view(p, aug_key, sample);
        float *out = x + (size_t)b * chw;
        for (int c = 0; c < C; c++) {
            const float scale = p->normalize ? 1.0f / std[c] : 1.0f, shift = p->normalize ? mean[c] : 0.0f;
            for (int y = 0; y < H; y++)
                for (int xx = 0; xx < W; xx++) {
                    const size_t q = ((size_t)c * H + y) * W + xx;
                    const float val = pixel(ds, img, v, c, y, xx);
                    switch (p->encoding) {
                    case SF_ENCODING_DIRECT: {
                        const float in = (val - shift) * scale;
                        for (int64_t t = 0; t < T; t++) out[(size_t)t * step + q] = in;
                        break;
                    }
                    case SF_ENCODING_POISSON:
                        for (int64_t t = 0; t < T; t++)
                            out[(size_t)t * step + q] =
                                sf_uniform(poisson_key, (uint64_t)sample, (uint64_t)t * chw + q) < val ? 1.0f : 0.0f;
                        break;
                    case SF_ENCODING_LATENCY: {
                        const int64_t fire = val > 0.0f ? (int64_t)lroundf((float)(T - 1) * (1.0f - val)) : -1;
                        for (int64_t t = 0; t < T; t++) out[(size_t)t * step + q] = t == fire ? 1.0f : 0.0f;
                        break;
                    }
                    }
                }
        }
    }
}
