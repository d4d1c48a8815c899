/* png_stats.c — what the shell tests need to know about a PNG file, read with cairo: "WIDTH HEIGHT INKED COLOURS
 * [MATCHING]", INKED the share of pixels that are not white (0 to 1), COLOURS how many distinct colours it holds
 * (counted up to 1000), MATCHING (when a colour RRGGBB is given) how many pixels are within 8 levels of it in each
 * channel. Exit 1 when the file is not a readable PNG. Usage: png_stats FILE.png [RRGGBB] */
#include <cairo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_COLOURS 1000

int main(int argc, char **argv)
{
    unsigned int want = 0;
    if (argc < 2 || argc > 3 || (argc == 3 && sscanf(argv[2], "%6x", &want) != 1)) {
        fprintf(stderr, "usage: png_stats FILE.png [RRGGBB]\n");
        return 2;
    }
    cairo_surface_t *s = cairo_image_surface_create_from_png(argv[1]);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "png_stats: %s: %s\n", argv[1], cairo_status_to_string(cairo_surface_status(s)));
        return 1;
    }
    int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    int stride = cairo_image_surface_get_stride(s);
    const unsigned char *data = cairo_image_surface_get_data(s);
    static uint32_t seen[MAX_COLOURS];
    int colours = 0;
    long long inked = 0, matching = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t rgb = ((const uint32_t *)(data + (size_t)y * stride))[x] & 0xffffffu;
            inked += rgb != 0xffffffu;
            int near = 1;
            for (int shift = 0; shift < 24; shift += 8)
                near &= abs((int)((rgb >> shift) & 255) - (int)((want >> shift) & 255)) <= 8;
            matching += near;
            int known = 0;
            for (int i = 0; i < colours && !known; i++) known = seen[i] == rgb;
            if (!known && colours < MAX_COLOURS) seen[colours++] = rgb;
        }
    printf("%d %d %.4f %d", w, h, w && h ? (double)inked / ((double)w * h) : 0.0, colours);
    if (argc == 3) printf(" %lld", matching);
    putchar('\n');
    cairo_surface_destroy(s);
    return 0;
}
