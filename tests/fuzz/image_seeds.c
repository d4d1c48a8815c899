/* image_seeds.c — writes fuzz_image's seed corpus into the folder it is given: JPEGs of 13×9 pixels in colour
 * (4:2:0), grayscale and CMYK, and a PNG with alpha, so the fuzzer starts inside each decoding path. */
#include <png.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

enum { W = 13, H = 9 };

static int jpeg(const char *dir, const char *name, int pf, int samp, const unsigned char *pix)
{
    char path[4096];
    unsigned char *b = NULL;
    unsigned long len = 0;
    tjhandle tj = tjInitCompress();
    int ok = tj && tjCompress2(tj, pix, W, 0, H, pf, &b, &len, samp, 75, 0) == 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = ok ? fopen(path, "wb") : NULL;
    ok = f && fwrite(b, 1, len, f) == len;
    if (f) ok &= fclose(f) == 0;
    tjFree(b);
    tjDestroy(tj);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_image_seeds DIR\n");
        return 2;
    }
    mkdir(argv[1], 0777);
    unsigned char pix[W * H * 4];
    for (int i = 0; i < W * H * 4; i++) pix[i] = (unsigned char)(i * 37 + i / 7);
    int ok = jpeg(argv[1], "rgb.jpg", TJPF_RGB, TJSAMP_420, pix);
    ok = ok && jpeg(argv[1], "gray.jpg", TJPF_GRAY, TJSAMP_GRAY, pix);
    ok = ok && jpeg(argv[1], "cmyk.jpg", TJPF_CMYK, TJSAMP_444, pix);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = W;
    img.height = H;
    img.format = PNG_FORMAT_RGBA;
    char path[4096];
    snprintf(path, sizeof path, "%s/rgba.png", argv[1]);
    ok = ok && png_image_write_to_file(&img, path, 0, pix, 0, NULL);
    if (!ok) fprintf(stderr, "fuzz_image_seeds: cannot write the seeds into %s\n", argv[1]);
    return ok ? 0 : 1;
}
