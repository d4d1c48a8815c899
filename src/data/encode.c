/* encode.c — turning images into T steps of network input (direct, Poisson rate, latency), with the per-channel
 * normalisation of direct inputs and the seeded crop/flip and random erasing augmentations. */
#include "data/formats.h"

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

/* Where output pixel (y, x) of a sample is read from: a crop offset in [-pad, pad] per axis and a flip. */
typedef struct view {
    int dy, dx, flip;
} view;

static view sample_view(const sf_loader_params *p, uint64_t aug_key, int64_t sample)
{
    view v = {0, 0, 0};
    if (!(p->training && p->augment)) return v;
    uint64_t r = sf_hash3(aug_key, (uint64_t)sample, 0);
    const uint64_t span = 2 * (uint64_t)p->crop_pad + 1;
    v.dy = (int)(r % span) - p->crop_pad;
    v.dx = (int)((r >> 16) % span) - p->crop_pad;
    v.flip = (int)((r >> 40) & 1);
    return v;
}

/* Random erasing's rectangle, as docs/config.md (erase_p) specifies, or none. Its draws take indices 1.. of the
 * sample's augmentation stream, leaving index 0 to the crop/flip. */
sf_erase_rect sf_erase_rect_of(const sf_loader_params *p, int H, int W, uint64_t aug_key, int64_t sample)
{
    const sf_erase_rect none = {0, 0, 0, 0};
    const uint64_t id = (uint64_t)sample;
    if (!(p->training && p->augment) || sf_uniform(aug_key, id, 1) >= p->erase_p) return none;
    const double area = (double)H * W, log_lo = log(0.3), log_hi = log(3.3);
    for (uint64_t k = 2; k < 2 + 3 * 10; k += 3) {
        const double s = 0.02 + 0.31 * sf_uniform(aug_key, id, k);
        const double r = exp(log_lo + (log_hi - log_lo) * sf_uniform(aug_key, id, k + 1));
        const int h = (int)lround(sqrt(s * area * r)), w = (int)lround(sqrt(s * area / r));
        if (h > H || w > W) continue;
        const uint64_t at = sf_hash3(aug_key, id, k + 2);
        return (sf_erase_rect){(int)(at % (uint64_t)(H - h + 1)), (int)((at >> 32) % (uint64_t)(W - w + 1)), h, w};
    }
    return none;
}

void sf_erase_apply(sf_erase_rect e, int C, int H, int W, float *x)
{
    for (int c = 0; c < C; c++)
        for (int y = e.y; y < e.y + e.h; y++) memset(x + ((size_t)c * H + y) * W + e.x, 0, (size_t)e.w * sizeof *x);
}

/* Intensity in [0, 1] of output pixel (c, y, x), 0 where the crop reaches into the padding. */
static float pixel(const sf_dataset *ds, const uint8_t *img, view v, int c, int y, int x)
{
    int sy = y + v.dy, sx = (v.flip ? ds->width - 1 - x : x) + v.dx;
    if (sy < 0 || sy >= ds->height || sx < 0 || sx >= ds->width) return 0.0f;
    return (float)img[((size_t)c * ds->height + sy) * ds->width + sx] / 255.0f;
}

/* Step 0 is written last because it holds the input. */
void sf_encode_steps(const sf_loader_params *p, const float *mean, const float *std, size_t hw, int C,
                     uint64_t poisson_key, int64_t sample, float *x0, size_t step)
{
    const int64_t T = p->timesteps;
    const size_t chw = (size_t)C * hw;
    switch (p->encoding) {
    case SF_ENCODING_DIRECT:
        if (p->normalize)
            for (int c = 0; c < C; c++)
                for (size_t q = (size_t)c * hw; q < (size_t)(c + 1) * hw; q++) x0[q] = (x0[q] - mean[c]) / std[c];
        for (int64_t t = 1; t < T; t++) memcpy(x0 + (size_t)t * step, x0, chw * sizeof *x0);
        break;
    case SF_ENCODING_POISSON: {
        /* sf_uniform(poisson_key, sample, t·chw + q), with the part that depends on the sample hashed once. */
        const uint64_t sample_key = sf_mix64(sf_mix64(poisson_key) ^ (uint64_t)sample);
        for (int64_t t = T - 1; t >= 0; t--) {
            float *xt = x0 + (size_t)t * step;
            const uint64_t base = (uint64_t)t * chw;
            for (size_t q = 0; q < chw; q++) {
                const float u = (float)(sf_mix64(sample_key ^ (base + q)) >> 40) * (1.0f / 16777216.0f);
                xt[q] = u < x0[q] ? 1.0f : 0.0f;
            }
        }
        break;
    }
    case SF_ENCODING_LATENCY:
        for (int64_t t = 1; t < T; t++) memset(x0 + (size_t)t * step, 0, chw * sizeof *x0);
        for (size_t q = 0; q < chw; q++) {
            const float v = x0[q];
            const int64_t fire = v > 0.0f ? (int64_t)lroundf((float)(T - 1) * (1.0f - v)) : -1;
            x0[q] = 0.0f;
            if (fire >= 0) x0[(size_t)fire * step + q] = 1.0f;
        }
        break;
    }
}

void sf_encode_batch(const sf_dataset *ds, const sf_loader_params *p, int64_t epoch, const int64_t *idx,
                     int64_t count, float *x)
{
    const int C = ds->channels, H = ds->height, W = ds->width;
    const size_t hw = (size_t)H * W, chw = (size_t)C * hw, step = (size_t)p->batch * chw;
    const uint64_t aug_key = sf_draw_key(p->seed, SF_DRAW_AUGMENT, epoch);
    const uint64_t poisson_key = sf_draw_key(p->seed, SF_DRAW_POISSON, epoch);
    const float *mean = p->std[0] != 0.0f ? p->mean : ds->mean, *std = p->std[0] != 0.0f ? p->std : ds->std;
    for (int64_t b = 0; b < count; b++) {
        const int64_t sample = idx[b];
        const uint8_t *img = ds->images + (size_t)sample * chw;
        const view v = sample_view(p, aug_key, sample);
        float *out = x + (size_t)b * chw;
        if (v.dy == 0 && v.dx == 0 && !v.flip) {
            for (size_t q = 0; q < chw; q++) out[q] = (float)img[q] / 255.0f;
        } else {
            for (int c = 0; c < C; c++)
                for (int y = 0; y < H; y++)
                    for (int xx = 0; xx < W; xx++) out[((size_t)c * H + y) * W + xx] = pixel(ds, img, v, c, y, xx);
        }
        sf_erase_apply(sf_erase_rect_of(p, H, W, aug_key, sample), C, H, W, out);
        sf_encode_steps(p, mean, std, hw, C, poisson_key, sample, out, step);
    }
}
