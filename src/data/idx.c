/* idx.c — the IDX format of MNIST and Fashion-MNIST: a magic of two zero bytes, a type byte (0x08: unsigned
 * bytes) and a dimension count, then each dimension as a big-endian uint32, then the data. An images file and a
 * labels file make one split. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

sf_status sf_idx_parse(const uint8_t *buf, size_t len, sf_idx_view *out)
{
    memset(out, 0, sizeof *out);
    if (len < 4) return sf_fail(SF_ERR_FORMAT, "IDX file too short (%zu bytes) for its 4-byte magic", len);
    if (buf[0] != 0 || buf[1] != 0)
        return sf_fail(SF_ERR_FORMAT, "bad IDX magic %02x %02x %02x %02x (expected 00 00 08 NN): not an IDX file",
                       buf[0], buf[1], buf[2], buf[3]);
    if (buf[2] != 0x08)
        return sf_fail(SF_ERR_FORMAT, "IDX element type 0x%02x is not supported (only 0x08, unsigned bytes)", buf[2]);
    int ndim = buf[3];
    if (ndim < 1 || ndim > 4) return sf_fail(SF_ERR_FORMAT, "IDX file has %d dimensions (expected 1 to 4)", ndim);
    size_t header = 4 + 4 * (size_t)ndim;
    if (len < header)
        return sf_fail(SF_ERR_FORMAT, "IDX file truncated in its header (%zu of %zu bytes)", len, header);
    /* The product is bounded by the bytes present, so the count can never overflow before it is rejected. */
    uint64_t numel = 1, avail = len - header;
    for (int i = 0; i < ndim; i++) {
        uint32_t d = be32(buf + 4 + 4 * i);
        if (d == 0) return sf_fail(SF_ERR_FORMAT, "IDX dimension %d is 0", i);
        out->dims[i] = d;
        if (numel > avail / d)
            return sf_fail(SF_ERR_FORMAT,
                           "IDX file truncated: its dimensions need more than the %llu data bytes present",
                           (unsigned long long)avail);
        numel *= d;
    }
    if (numel != avail)
        return sf_fail(SF_ERR_FORMAT, "IDX file size disagrees with its dimensions: %llu data bytes, expected %llu",
                       (unsigned long long)avail, (unsigned long long)numel);
    out->ndim = ndim;
    out->numel = (int64_t)numel;
    out->data = buf + header;
    return SF_OK;
}

sf_status sf_idx_samples(const uint8_t *images, size_t images_len, const uint8_t *labels, size_t labels_len,
                         int32_t classes, sf_sample_view *out)
{
    memset(out, 0, sizeof *out);
    sf_idx_view im, lb;
    sf_status s = sf_idx_parse(images, images_len, &im);
    if (s != SF_OK) return sf_fail_context(s, "images: ");
    s = sf_idx_parse(labels, labels_len, &lb);
    if (s != SF_OK) return sf_fail_context(s, "labels: ");
    if (im.ndim != 3 && im.ndim != 4)
        return sf_fail(SF_ERR_FORMAT, "images: IDX file has %d dimensions (expected N×H×W or N×C×H×W)", im.ndim);
    if (lb.ndim != 1) return sf_fail(SF_ERR_FORMAT, "labels: IDX file has %d dimensions (expected 1)", lb.ndim);
    if (im.dims[0] != lb.dims[0])
        return sf_fail(SF_ERR_FORMAT, "images and labels disagree: %lld images, %lld labels", (long long)im.dims[0],
                       (long long)lb.dims[0]);
    int64_t c = im.ndim == 4 ? im.dims[1] : 1, h = im.dims[im.ndim - 2], w = im.dims[im.ndim - 1];
    if (c > SF_DATASET_MAX_CHANNELS || h > 16384 || w > 16384)
        return sf_fail(SF_ERR_FORMAT, "images: %lld×%lld×%lld per sample is not an image size this reader takes",
                       (long long)c, (long long)h, (long long)w);
    for (int64_t i = 0; i < lb.numel; i++)
        if (lb.data[i] >= classes)
            return sf_fail(SF_ERR_FORMAT, "labels: label %d of sample %lld is out of range (expected 0..%d)",
                           lb.data[i], (long long)i, classes - 1);
    *out = (sf_sample_view){.count = lb.numel, .channels = (int32_t)c, .height = (int32_t)h, .width = (int32_t)w,
                            .classes = classes, .images = im.data, .labels = lb.data,
                            .image_stride = (size_t)(c * h * w), .label_stride = 1};
    return SF_OK;
}

/* The IDX file `stem` in dir: stem.gz or stem. */
static sf_status find_idx(const sf_dataset_format *f, const char *dir, const char *stem, char *path, size_t cap)
{
    char name[80];
    snprintf(name, sizeof name, "%s.gz", stem);
    SF_TRY(sf_path_join(path, cap, dir, name));
    if (sf_path_exists(path)) return sf_file_exists(path) ? SF_OK : sf_not_a_file(path);
    SF_TRY(sf_path_join(path, cap, dir, stem));
    if (sf_path_exists(path)) return sf_file_exists(path) ? SF_OK : sf_not_a_file(path);
    return sf_fail(SF_ERR_IO, "%s not found: looked for %s/%s.gz and %s/%s; %s", f->pretty, dir, stem, dir, stem,
                   f->provider);
}

sf_status sf_idx_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                      sf_dataset **out)
{
    const char *prefix = split == SF_SPLIT_TRAIN ? "train" : "t10k";
    char stem[64], img_path[4096], lbl_path[4096];
    snprintf(stem, sizeof stem, "%s-images-idx3-ubyte", prefix);
    SF_TRY(find_idx(f, dir, stem, img_path, sizeof img_path));
    snprintf(stem, sizeof stem, "%s-labels-idx1-ubyte", prefix);
    SF_TRY(find_idx(f, dir, stem, lbl_path, sizeof lbl_path));
    char *img = NULL, *lbl = NULL;
    size_t img_len = 0, lbl_len = 0;
    sf_status s = sf_read_file_gz(img_path, SF_DATASET_MAX_FILE_BYTES, &img, &img_len);
    if (s == SF_OK) s = sf_read_file_gz(lbl_path, SF_DATASET_MAX_FILE_BYTES, &lbl, &lbl_len);
    if (s == SF_OK) {
        sf_sample_view v;
        s = sf_idx_samples((const uint8_t *)img, img_len, (const uint8_t *)lbl, lbl_len, f->classes, &v);
        if (s == SF_OK) s = sf_dataset_append(out, &v);
        if (s != SF_OK) s = sf_fail_context(s, "%s with %s: ", img_path, lbl_path);
    }
    free(img);
    free(lbl);
    return s;
}
