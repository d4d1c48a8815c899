/* dataset.c — datasets held in memory: creating one, filling it from the sample views the readers return (the one
 * place an image dataset is built from a file's bytes), and freeing it. */
#include "data/formats.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

#define SF_DATASET_MAX_SIDE 16384

/* Datasets stay below half the address space, so sizes computed from them never overflow. */
static sf_status check_size(int64_t count, size_t sample)
{
    if ((uint64_t)count > SIZE_MAX / 2 / sample)
        return sf_fail(SF_ERR_INVALID, "dataset of %lld samples of %zu bytes is too large", (long long)count, sample);
    return SF_OK;
}

sf_status sf_dataset_create_of_type(sf_sample_type type, int64_t count, int32_t channels, int32_t height,
                                    int32_t width, int32_t classes, sf_dataset **out)
{
    *out = NULL;
    const int32_t max_channels =
        type == SF_SAMPLES_IMAGES || type == SF_SAMPLES_FILES ? SF_DATASET_MAX_CHANNELS : SF_DATASET_MAX_SIDE;
    if (count < 0 || channels < 1 || channels > max_channels || height < 1 || height > SF_DATASET_MAX_SIDE ||
        width < 1 || width > SF_DATASET_MAX_SIDE || classes < 1 || classes > SF_DATASET_MAX_CLASSES)
        return sf_fail(SF_ERR_INVALID,
                       "dataset of %lld samples of %d×%d×%d with %d classes: channels must be 1..%d, sides 1..%d, "
                       "classes 1..%d",
                       (long long)count, channels, height, width, classes, max_channels, SF_DATASET_MAX_SIDE,
                       SF_DATASET_MAX_CLASSES);
    const size_t sample = (size_t)channels * (size_t)height * (size_t)width;
    SF_TRY(check_size(count, type == SF_SAMPLES_IMAGES ? sample + sizeof(int32_t) : sizeof(int32_t)));
    sf_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return sf_fail(SF_ERR_NOMEM, "out of memory");
    ds->type = type;
    ds->count = count;
    ds->channels = channels;
    ds->height = height;
    ds->width = width;
    ds->classes = classes;
    if (type == SF_SAMPLES_IMAGES) ds->images = calloc(count ? (size_t)count * sample : 1, 1);
    ds->labels = calloc(count ? (size_t)count : 1, sizeof *ds->labels);
    if ((type == SF_SAMPLES_IMAGES && !ds->images) || !ds->labels) {
        sf_dataset_free(ds);
        return sf_fail(SF_ERR_NOMEM, "out of memory for %lld samples of %zu bytes", (long long)count, sample);
    }
    for (int c = 0; c < SF_DATASET_MAX_CHANNELS; c++) ds->std[c] = 1.0f;
    *out = ds;
    return SF_OK;
}

sf_status sf_dataset_create(int64_t count, int32_t channels, int32_t height, int32_t width, int32_t classes,
                            sf_dataset **out)
{
    return sf_dataset_create_of_type(SF_SAMPLES_IMAGES, count, channels, height, width, classes, out);
}

static size_t sample_bytes(const sf_dataset *d)
{
    return (size_t)d->channels * (size_t)d->height * (size_t)d->width;
}

/* Samples of v into d from sample `first` on. */
static void copy_samples(sf_dataset *d, int64_t first, const sf_sample_view *v)
{
    const size_t sample = sample_bytes(d);
    for (int64_t i = 0; i < v->count; i++) {
        memcpy(d->images + (size_t)(first + i) * sample, v->images + (size_t)i * v->image_stride, sample);
        d->labels[first + i] = v->labels[(size_t)i * v->label_stride];
    }
}

sf_status sf_dataset_append(sf_dataset **ds, const sf_sample_view *v)
{
    sf_dataset *d = *ds;
    if (!d) {
        SF_TRY(sf_dataset_create(v->count, v->channels, v->height, v->width, v->classes, &d));
        copy_samples(d, 0, v);
        *ds = d;
        return SF_OK;
    }
    if (d->type != SF_SAMPLES_IMAGES) return sf_fail(SF_ERR_INVALID, "appending images to a dataset without images");
    if (d->channels != v->channels || d->height != v->height || d->width != v->width || d->classes != v->classes)
        return sf_fail(SF_ERR_INVALID,
                       "appending samples of %d×%d×%d with %d classes to a dataset of %d×%d×%d with %d classes",
                       v->channels, v->height, v->width, v->classes, d->channels, d->height, d->width, d->classes);
    const size_t sample = sample_bytes(d);
    if (v->count < 0 || v->count > INT64_MAX - d->count)
        return sf_fail(SF_ERR_INVALID, "appending %lld samples to a dataset of %lld", (long long)v->count,
                       (long long)d->count);
    const int64_t count = d->count + v->count;
    SF_TRY(check_size(count, sample));
    uint8_t *images = realloc(d->images, count ? (size_t)count * sample : 1);
    if (!images) return sf_fail(SF_ERR_NOMEM, "out of memory for %lld samples of %zu bytes", (long long)count, sample);
    d->images = images;
    int32_t *labels = realloc(d->labels, (count ? (size_t)count : 1) * sizeof *labels);
    if (!labels) return sf_fail(SF_ERR_NOMEM, "out of memory for %lld labels", (long long)count);
    d->labels = labels;
    copy_samples(d, d->count, v);
    d->count = count;
    return SF_OK;
}

void sf_dataset_free(sf_dataset *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    free(ds->events);
    free(ds->offsets);
    free(ds->frames_block);
    free(ds->files); /* one block */
    free(ds);
}
