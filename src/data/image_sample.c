/* image_sample.c — one sample of an image folder into its slot of a batch: where its crop lies (torchvision's
 * RandomResizedCrop and flip for training, Resize and CenterCrop for evaluation), the file decoded at the DCT scale
 * the crop allows, resized into planar floats in [0, 1], erased and encoded. */
#include "data/formats.h"

#include "core/error.h"
#include "data/draws.h"

#include <math.h>
#include <string.h>

#define CROP_TRIES 10
#define RATIO_MIN (3.0 / 4.0)
#define RATIO_MAX (4.0 / 3.0)

/* Python's round(), half to even (the default rounding mode), as torchvision's crops round. */
static double round_even(double v) { return nearbyint(v); }

/* torchvision's RandomResizedCrop.get_params with scale (crop_scale_min, 1) and ratio (3/4, 4/3). */
static void random_crop(const sf_loader_params *p, uint64_t key, int64_t sample, int32_t W, int32_t H,
                        sf_image_crop *c)
{
    const double area = (double)W * H, lo = p->crop_scale_min, log_lo = log(RATIO_MIN), log_hi = log(RATIO_MAX);
    const uint64_t id = (uint64_t)sample;
    for (uint64_t k = 0; k < 3 * CROP_TRIES; k += 3) {
        const double target = area * (lo + (1.0 - lo) * sf_uniform(key, id, k));
        const double ratio = exp(log_lo + (log_hi - log_lo) * sf_uniform(key, id, k + 1));
        const double w = round_even(sqrt(target * ratio)), h = round_even(sqrt(target / ratio));
        if (w < 1 || w > W || h < 1 || h > H) continue;
        const uint64_t at = sf_hash3(key, id, k + 2);
        c->x = (double)(at % (uint64_t)(W - (int32_t)w + 1));
        c->y = (double)((at >> 32) % (uint64_t)(H - (int32_t)h + 1));
        c->w = w;
        c->h = h;
        return;
    }
    /* the centre crop of the ratio nearest the image's */
    double w = W, h = H;
    if ((double)W / H < RATIO_MIN) h = round_even(w / RATIO_MIN);
    else if ((double)W / H > RATIO_MAX) w = round_even(h * RATIO_MAX);
    c->w = w;
    c->h = h;
    c->x = floor((W - w) / 2.0);
    c->y = floor((H - h) / 2.0);
}

void sf_image_crop_of(const sf_loader_params *p, int32_t size, int64_t epoch, int64_t sample, int32_t W, int32_t H,
                      sf_image_crop *out)
{
    memset(out, 0, sizeof *out);
    if (p->training && p->augment) {
        const uint64_t key = sf_draw_key(p->seed, SF_DRAW_CROP, epoch);
        random_crop(p, key, sample, W, H, out);
        out->flip = (int32_t)(sf_hash3(key, (uint64_t)sample, 3 * CROP_TRIES) & 1);
        out->inside = 1;
        return;
    }
    /* Resize(⌊size·256/224⌋): the short side to that, the long one in proportion (truncated); then the centre. */
    const int32_t short_side = (int32_t)floor(size * 256.0 / 224.0);
    const int32_t new_w = W <= H ? short_side : (int32_t)((double)short_side * W / H);
    const int32_t new_h = W <= H ? (int32_t)((double)short_side * H / W) : short_side;
    const double sx = (double)W / new_w, sy = (double)H / new_h;
    out->x = round_even((new_w - size) / 2.0) * sx;
    out->y = round_even((new_h - size) / 2.0) * sy;
    out->w = size * sx;
    out->h = size * sy;
}

static int32_t clamp(double v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : (int32_t)v; }

sf_status sf_image_sample(const sf_dataset *ds, const sf_loader_params *p, sf_image_decoder *d, int64_t epoch,
                          int64_t sample, float *x, size_t step)
{
    const int32_t size = ds->height;
    const size_t hw = (size_t)size * size, chw = (size_t)ds->channels * hw;
    char path[4096];
    int32_t W = 0, H = 0;
    sf_image_crop c;
    sf_decoded_image im;
    sf_status s = sf_image_path(ds, sample, path, sizeof path);
    if (s == SF_OK) s = sf_image_read(d, path, &W, &H);
    if (s == SF_OK) {
        sf_image_crop_of(p, size, epoch, sample, W, H, &c);
        s = sf_image_decode(d, fmax(size / c.w, size / c.h), &im);
    }
    if (s == SF_OK) {
        const double sx = (double)im.width / W, sy = (double)im.height / H;
        sf_resize_job j = {.src = im.rgb, .W = im.width, .H = im.height, .x = c.x * sx, .y = c.y * sy,
                           .w = c.w * sx, .h = c.h * sy, .clip = {0, 0, im.width, im.height}, .out_w = size,
                           .out_h = size, .flip = c.flip, .gain = 1.0f / 255.0f};
        if (c.inside) {
            j.clip[0] = clamp(floor(j.x), 0, im.width - 1);
            j.clip[1] = clamp(floor(j.y), 0, im.height - 1);
            j.clip[2] = clamp(ceil(j.x + j.w), j.clip[0] + 1, im.width);
            j.clip[3] = clamp(ceil(j.y + j.h), j.clip[1] + 1, im.height);
        }
        s = sf_resize_rgb(&j, sf_image_decoder_scratch(d), x);
    }
    if (s != SF_OK) {
        for (int64_t t = 0; t < p->timesteps; t++) memset(x + (size_t)t * step, 0, chw * sizeof *x);
        return s;
    }
    const uint64_t aug_key = sf_draw_key(p->seed, SF_DRAW_AUGMENT, epoch);
    if (p->training && p->augment) sf_erase_apply(sf_erase_rect_of(p, size, size, aug_key, sample), 3, size, size, x);
    const float *mean = p->std[0] != 0.0f ? p->mean : ds->mean, *std = p->std[0] != 0.0f ? p->std : ds->std;
    sf_encode_steps(p, mean, std, hw, ds->channels, sf_draw_key(p->seed, SF_DRAW_POISSON, epoch), sample, x, step);
    return SF_OK;
}
