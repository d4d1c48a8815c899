/* image_decode.c — one image file into 8-bit RGB, whatever its name says: JPEG via TurboJPEG (CMYK and YCCK too; at
 * DCT scale 1/2, 1/4 or 1/8 where the crop still covers its output, skipping most of the IDCT), PNG via libpng (as
 * PIL's convert("RGB"): alpha dropped). Other, truncated, corrupt or too large files are errors naming the file. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#define IMAGE_MAX_FILE_BYTES ((size_t)256 << 20)
#define IMAGE_MAX_PIXELS ((int64_t)1 << 27)

enum image_kind { IMAGE_JPEG = 1, IMAGE_PNG };

struct sf_image_decoder {
    tjhandle tj;
    uint8_t *file, *pixels;
    size_t file_cap, file_len, pixels_cap;
    enum image_kind kind;
    int32_t width, height, cmyk;
    png_image png;
    sf_resize_scratch resize;
    char path[4096];
};

sf_status sf_image_decoder_create(sf_image_decoder **out)
{
    *out = NULL;
    sf_image_decoder *d = calloc(1, sizeof *d);
    if (!d) return sf_fail(SF_ERR_NOMEM, "out of memory");
    d->tj = tjInitDecompress();
    if (!d->tj) {
        free(d);
        return sf_fail(SF_ERR_NOMEM, "libjpeg-turbo cannot start a decompressor: %s", tjGetErrorStr2(NULL));
    }
    *out = d;
    return SF_OK;
}

void sf_image_decoder_free(sf_image_decoder *d)
{
    if (!d) return;
    tjDestroy(d->tj);
    png_image_free(&d->png);
    sf_resize_scratch_free(&d->resize);
    free(d->file);
    free(d->pixels);
    free(d);
}

sf_resize_scratch *sf_image_decoder_scratch(sf_image_decoder *d) { return &d->resize; }

static sf_status check_size(const sf_image_decoder *d, int64_t w, int64_t h)
{
    if (w < 1 || h < 1 || w * h > IMAGE_MAX_PIXELS)
        return sf_fail(SF_ERR_FORMAT, "%s: an image of %lld×%lld pixels (at most %lld pixels are read)", d->path,
                       (long long)w, (long long)h, (long long)IMAGE_MAX_PIXELS);
    return SF_OK;
}

static sf_status jpeg_header(sf_image_decoder *d)
{
    int w = 0, h = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(d->tj, d->file, d->file_len, &w, &h, &subsamp, &colorspace) != 0)
        return sf_fail(SF_ERR_FORMAT, "%s: not a readable JPEG (%s)", d->path, tjGetErrorStr2(d->tj));
    d->width = w;
    d->height = h;
    d->cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
    return check_size(d, w, h);
}

static sf_status png_header(sf_image_decoder *d)
{
    png_image_free(&d->png);
    memset(&d->png, 0, sizeof d->png);
    d->png.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&d->png, d->file, d->file_len))
        return sf_fail(SF_ERR_FORMAT, "%s: not a readable PNG (%s)", d->path, d->png.message);
    d->width = (int32_t)d->png.width;
    d->height = (int32_t)d->png.height;
    return check_size(d, d->png.width, d->png.height);
}

/* What the bytes in d->file are, and the image's size from its header. */
static sf_status identify(sf_image_decoder *d, int32_t *width, int32_t *height)
{
    static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const char *path = d->path;
    const uint8_t *b = d->file;
    if (d->file_len >= 2 && b[0] == 0xff && b[1] == 0xd8) {
        d->kind = IMAGE_JPEG;
        SF_TRY(jpeg_header(d));
    } else if (d->file_len >= 8 && memcmp(b, png_magic, 8) == 0) {
        d->kind = IMAGE_PNG;
        SF_TRY(png_header(d));
    } else if (d->file_len == 0) {
        return sf_fail(SF_ERR_FORMAT, "%s: the file is empty", path);
    } else {
        return sf_fail(SF_ERR_FORMAT, "%s: neither a JPEG nor a PNG image (it starts with 0x%02x 0x%02x)", path, b[0],
                       d->file_len > 1 ? b[1] : 0);
    }
    *width = d->width;
    *height = d->height;
    return SF_OK;
}

sf_status sf_image_read(sf_image_decoder *d, const char *path, int32_t *width, int32_t *height)
{
    snprintf(d->path, sizeof d->path, "%s", path);
    d->kind = 0;
    SF_TRY(sf_read_file_into(path, IMAGE_MAX_FILE_BYTES, &d->file, &d->file_cap, &d->file_len));
    return identify(d, width, height);
}

sf_status sf_image_read_bytes(sf_image_decoder *d, const char *name, const uint8_t *bytes, size_t len,
                              int32_t *width, int32_t *height)
{
    snprintf(d->path, sizeof d->path, "%s", name);
    d->kind = 0;
    d->file_len = 0;
    if (len > d->file_cap) {
        uint8_t *grown = realloc(d->file, len);
        if (!grown) return sf_fail(SF_ERR_NOMEM, "%s: out of memory for %zu bytes", name, len);
        d->file = grown;
        d->file_cap = len;
    }
    if (len) memcpy(d->file, bytes, len);
    d->file_len = len;
    return identify(d, width, height);
}

static sf_status reserve_pixels(sf_image_decoder *d, size_t n)
{
    if (n <= d->pixels_cap) return SF_OK;
    uint8_t *grown = realloc(d->pixels, n);
    if (!grown) return sf_fail(SF_ERR_NOMEM, "%s: out of memory for %zu bytes of pixels", d->path, n);
    d->pixels = grown;
    d->pixels_cap = n;
    return SF_OK;
}

/* 4 bytes per pixel to 3 in place: RGBA drops alpha; CMYK as Adobe writes it (inverted: 255 is no ink) becomes
 * R = C·K/255 and so on, as PIL and TensorFlow convert it. */
static void to_rgb(uint8_t *p, size_t pixels, int cmyk)
{
    for (size_t i = 0; i < pixels; i++) {
        const uint8_t *in = p + 4 * i;
        uint8_t *out = p + 3 * i;
        const unsigned k = in[3];
        const uint8_t r = in[0], g = in[1], b = in[2];
        out[0] = cmyk ? (uint8_t)((r * k + 127) / 255) : r;
        out[1] = cmyk ? (uint8_t)((g * k + 127) / 255) : g;
        out[2] = cmyk ? (uint8_t)((b * k + 127) / 255) : b;
    }
}

/* The largest power-of-two DCT scale 1/2^k (k <= 3) not below min_scale. */
static tjscalingfactor jpeg_scale(double min_scale)
{
    tjscalingfactor f = {1, 1};
    while (f.denom < 8 && 1.0 / (2 * f.denom) >= min_scale) f.denom *= 2;
    return f;
}

static sf_status jpeg_decode(sf_image_decoder *d, double min_scale, sf_decoded_image *out)
{
    const tjscalingfactor f = jpeg_scale(min_scale);
    const int w = TJSCALED(d->width, f), h = TJSCALED(d->height, f);
    SF_TRY(reserve_pixels(d, (size_t)w * (size_t)h * (d->cmyk ? 4 : 3)));
    if (tjDecompress2(d->tj, d->file, d->file_len, d->pixels, w, 0, h, d->cmyk ? TJPF_CMYK : TJPF_RGB, 0) != 0) {
        /* Warnings leave a whole image; of them, a file that ends early is refused (PIL's "image file is
         * truncated"), others (extraneous bytes between markers) are not. */
        const char *why = tjGetErrorStr2(d->tj);
        if (tjGetErrorCode(d->tj) != TJERR_WARNING || strstr(why, "Premature end of JPEG file"))
            return sf_fail(SF_ERR_FORMAT, "%s: the JPEG does not decode (%s)", d->path, why);
    }
    if (d->cmyk) to_rgb(d->pixels, (size_t)w * (size_t)h, 1);
    *out = (sf_decoded_image){d->pixels, w, h};
    return SF_OK;
}

static sf_status png_decode(sf_image_decoder *d, sf_decoded_image *out)
{
    d->png.format = PNG_FORMAT_RGBA;
    SF_TRY(reserve_pixels(d, PNG_IMAGE_SIZE(d->png)));
    if (!png_image_finish_read(&d->png, NULL, d->pixels, 0, NULL))
        return sf_fail(SF_ERR_FORMAT, "%s: the PNG does not decode (%s)", d->path, d->png.message);
    to_rgb(d->pixels, (size_t)d->width * (size_t)d->height, 0);
    *out = (sf_decoded_image){d->pixels, d->width, d->height};
    return SF_OK;
}

sf_status sf_image_decode(sf_image_decoder *d, double min_scale, sf_decoded_image *out)
{
    if (d->kind == IMAGE_JPEG) return jpeg_decode(d, min_scale, out);
    if (d->kind == IMAGE_PNG) return png_decode(d, out);
    return sf_fail(SF_ERR_STATE, "no image read");
}
