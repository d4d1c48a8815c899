/* image_resize.c — PIL's bilinear resampling (torchvision's on PIL images): a triangle filter widened by the shrink
 * factor (antialiased), taps normalised to 1 per output pixel. Rows first, then columns, one output row at a time,
 * into planar floats with no 8-bit rounding between the passes. */
#include "data/formats.h"

#include "core/error.h"

#include <math.h>
#include <stdlib.h>

/* The taps of one axis: output o reads count[o] source pixels from first[o] with weights w[o·taps ..]. */
typedef struct axis {
    int32_t *first, *count;
    float *w;
    int32_t taps;
} axis;

static double support_of(double len, int32_t out) { return len / out > 1.0 ? len / out : 1.0; }

static int32_t taps_of(double len, int32_t out) { return 2 * (int32_t)ceil(support_of(len, out)) + 1; }

static float triangle(double t)
{
    t = fabs(t);
    return t < 1.0 ? (float)(1.0 - t) : 0.0f;
}

/* The taps resizing [b0, b0 + len) to `out` pixels, reaching only pixels in [lo, hi). */
static void fill_axis(double b0, double len, int32_t out, int32_t lo, int32_t hi, axis *a)
{
    const double scale = len / out, support = support_of(len, out), inv = 1.0 / support;
    for (int32_t o = 0; o < out; o++) {
        const double center = b0 + (o + 0.5) * scale;
        int32_t first = (int32_t)(center - support + 0.5), last = (int32_t)(center + support + 0.5);
        if (first < lo) first = lo;
        if (last > hi) last = hi;
        if (first > hi - 1) first = hi - 1; /* a box at the very edge still reads one pixel */
        if (last <= first) last = first + 1;
        if (last - first > a->taps) last = first + a->taps;
        float *w = a->w + (size_t)o * (size_t)a->taps;
        double total = 0.0;
        for (int32_t k = 0; k < last - first; k++) total += w[k] = triangle((k + first - center + 0.5) * inv);
        for (int32_t k = 0; k < last - first; k++) w[k] = total > 0.0 ? (float)(w[k] / total) : 1.0f / (last - first);
        a->first[o] = first;
        a->count[o] = last - first;
    }
}

/* Room for n bytes in *p (capacity *cap). */
static sf_status reserve(void **p, size_t *cap, size_t n)
{
    if (n <= *cap) return SF_OK;
    void *grown = realloc(*p, n);
    if (!grown) return sf_fail(SF_ERR_NOMEM, "out of memory resizing an image (%zu bytes)", n);
    *p = grown;
    *cap = n;
    return SF_OK;
}

sf_status sf_resize_rgb(const sf_resize_job *j, sf_resize_scratch *s, float *dst)
{
    const int32_t ow = j->out_w, oh = j->out_h;
    axis ax = {.taps = taps_of(j->w, ow)}, ay = {.taps = taps_of(j->h, oh)};
    const size_t ints = 2 * ((size_t)ow + (size_t)oh), floats = (size_t)ow * ax.taps + (size_t)oh * ay.taps;
    SF_TRY(reserve((void **)&s->ints, &s->ints_cap, ints * sizeof(int32_t)));
    SF_TRY(reserve((void **)&s->weights, &s->weights_cap, floats * sizeof(float)));
    ax.first = s->ints, ax.count = ax.first + ow, ay.first = ax.count + ow, ay.count = ay.first + oh;
    ax.w = s->weights, ay.w = ax.w + (size_t)ow * ax.taps;
    fill_axis(j->x, j->w, ow, j->clip[0], j->clip[2], &ax);
    fill_axis(j->y, j->h, oh, j->clip[1], j->clip[3], &ay);
    /* the source columns any output reads */
    const int32_t x0 = ax.first[0] < ax.first[ow - 1] ? ax.first[0] : ax.first[ow - 1];
    int32_t x1 = x0;
    for (int32_t o = 0; o < ow; o++)
        if (ax.first[o] + ax.count[o] > x1) x1 = ax.first[o] + ax.count[o];
    const size_t span = 3 * (size_t)(x1 - x0), plane = (size_t)ow * oh, stride = 3 * (size_t)j->W;
    SF_TRY(reserve((void **)&s->row, &s->row_cap, span * sizeof(float)));
    float *row = s->row;
    for (int32_t oy = 0; oy < oh; oy++) {
        const float *wy = ay.w + (size_t)oy * ay.taps;
        for (size_t i = 0; i < span; i++) row[i] = 0.0f;
        for (int32_t k = 0; k < ay.count[oy]; k++) {
            const uint8_t *src = j->src + (size_t)(ay.first[oy] + k) * stride + 3 * (size_t)x0;
            const float w = wy[k];
            for (size_t i = 0; i < span; i++) row[i] += w * (float)src[i];
        }
        float *out = dst + (size_t)oy * ow;
        for (int32_t ox = 0; ox < ow; ox++) {
            const float *wx = ax.w + (size_t)ox * ax.taps, *in = row + 3 * (size_t)(ax.first[ox] - x0);
            float r = 0.0f, g = 0.0f, b = 0.0f;
            for (int32_t k = 0; k < ax.count[ox]; k++) {
                r += wx[k] * in[3 * k];
                g += wx[k] * in[3 * k + 1];
                b += wx[k] * in[3 * k + 2];
            }
            const int32_t at = j->flip ? ow - 1 - ox : ox;
            out[at] = r * j->gain;
            out[plane + at] = g * j->gain;
            out[2 * plane + at] = b * j->gain;
        }
    }
    return SF_OK;
}

void sf_resize_scratch_free(sf_resize_scratch *s)
{
    free(s->ints);
    free(s->weights);
    free(s->row);
}
