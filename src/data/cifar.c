/* cifar.c — the CIFAR-10 binary format: records of one label byte followed by a 3×32×32 channel-planar image. */
#include "data/dataset.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

#define SF_CIFAR_IMAGE_BYTES (3 * 32 * 32)

sf_status sf_cifar_parse(const uint8_t *buf, size_t len, sf_dataset **ds)
{
    if (len == 0) return sf_fail(SF_ERR_FORMAT, "CIFAR-10 file is empty");
    if (len % SF_CIFAR_RECORD_BYTES)
        return sf_fail(SF_ERR_FORMAT,
                       "CIFAR-10 file of %zu bytes is not a whole number of %d-byte records (truncated, or not a "
                       "CIFAR-10 binary file)",
                       len, SF_CIFAR_RECORD_BYTES);
    size_t n = len / SF_CIFAR_RECORD_BYTES;
    for (size_t i = 0; i < n; i++)
        if (buf[i * SF_CIFAR_RECORD_BYTES] >= 10)
            return sf_fail(SF_ERR_FORMAT, "CIFAR-10 record %zu has label %d (expected 0..9)", i,
                           buf[i * SF_CIFAR_RECORD_BYTES]);
    sf_dataset *d = *ds;
    size_t old = 0;
    if (!d) {
        SF_TRY(sf_dataset_create((int64_t)n, 3, 32, 32, 10, &d));
    } else {
        if (d->channels != 3 || d->height != 32 || d->width != 32 || d->classes != 10)
            return sf_fail(SF_ERR_INVALID, "appending CIFAR-10 records to a dataset of another shape");
        old = (size_t)d->count;
        uint8_t *im = realloc(d->images, (old + n) * SF_CIFAR_IMAGE_BYTES);
        if (!im) return sf_fail(SF_ERR_NOMEM, "out of memory for %zu CIFAR-10 images", old + n);
        d->images = im;
        uint8_t *lb = realloc(d->labels, old + n);
        if (!lb) return sf_fail(SF_ERR_NOMEM, "out of memory for %zu CIFAR-10 labels", old + n);
        d->labels = lb;
        d->count = (int64_t)(old + n);
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *rec = buf + i * SF_CIFAR_RECORD_BYTES;
        d->labels[old + i] = rec[0];
        memcpy(d->images + (old + i) * SF_CIFAR_IMAGE_BYTES, rec + 1, SF_CIFAR_IMAGE_BYTES);
    }
    *ds = d;
    return SF_OK;
}
