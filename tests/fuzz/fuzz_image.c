/* fuzz_image.c — libFuzzer target for the image files of image folders: the bytes identified (JPEG, PNG or
 * neither) and their header read, the training and the evaluation crop of the size they claim placed, decoded at the
 * DCT scale each allows, and resized into a 24×24 input, mirrored or not. */
#include "data/formats.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define SIZE 24

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_image_decoder *d = NULL;
    float *x = malloc(3 * SIZE * SIZE * sizeof *x);
    int32_t w = 0, h = 0;
    if (x && sf_image_decoder_create(&d) == SF_OK && sf_image_read_bytes(d, "fuzz", data, size, &w, &h) == SF_OK) {
        sf_loader_params p;
        sf_loader_default_params(&p);
        p.augment = 1;
        for (int training = 0; training < 2; training++) {
            p.training = training;
            sf_image_crop c;
            sf_image_crop_of(&p, SIZE, 0, (int64_t)size, w, h, &c);
            sf_decoded_image im;
            if (c.w <= 0 || c.h <= 0 || c.x < 0 || c.y < 0 || c.x + c.w > w + 1e-9 || c.y + c.h > h + 1e-9)
                __builtin_trap();
            if (sf_image_decode(d, SIZE / c.w > SIZE / c.h ? SIZE / c.w : SIZE / c.h, &im) != SF_OK) break;
            const double sx = (double)im.width / w, sy = (double)im.height / h;
            const sf_resize_job j = {.src = im.rgb, .W = im.width, .H = im.height, .x = c.x * sx, .y = c.y * sy,
                                     .w = c.w * sx, .h = c.h * sy, .clip = {0, 0, im.width, im.height},
                                     .out_w = SIZE, .out_h = SIZE, .flip = c.flip, .gain = 1.0f / 255.0f};
            if (sf_resize_rgb(&j, sf_image_decoder_scratch(d), x) != SF_OK) break;
            for (int i = 0; i < 3 * SIZE * SIZE; i++)
                if (!(x[i] >= -1e-5f && x[i] <= 1.0f + 1e-5f)) __builtin_trap();
            /* read again for the other crop */
            if (sf_image_read_bytes(d, "fuzz", data, size, &w, &h) != SF_OK) __builtin_trap();
        }
    }
    sf_image_decoder_free(d);
    free(x);
    return 0;
}
