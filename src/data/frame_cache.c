/* frame_cache.c — binned event splits (counts, no augmentation) in <cache dir>/<dataset>-<split>-<key hash>.frames,
 * read back when the key (format, split, data folder's device, inode and mtime, T, binning), sizes and CRC-32 match;
 * otherwise rebuilt and written atomically. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"
#include "io/interrupt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

/* File: CACHE_MAGIC, u32 key length, the key, zero padding to 8 bytes; i64 count, T; i32 C, H, W, classes (<= 256);
 * i64 skipped; u8 labels × count (padded to 8); u16 counts × count·T·C·H·W; u32 CRC-32 of all before it. Integers in
 * the writer's byte order, which the u16 CACHE_BYTE_ORDER after the magic tells. */
#define CACHE_MAGIC "SFFRAME1"
#define CACHE_BYTE_ORDER 0x0102u
/* Samples binned together when a cache is built. */
#define CACHE_CHUNK 64

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* What identifies a binned split; two splits with the same key have the same frames. */
static sf_status cache_key(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                           char *key, size_t cap)
{
    /* The folder by device and inode: the same whatever path (relative, through links) names it. */
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sf_fail(SF_ERR_IO, "%s not found: cannot open the folder %s; %s", f->pretty, dir, f->provider);
    int n = snprintf(key, cap,
                     "spikefuse frames v1; dataset %s; split %s; data folder %llu:%llu modified %lld.%09ld; T %lld; "
                     "time_window_us %lld; downsample %d; polarity %s; classes %d",
                     f->name, split == SF_SPLIT_TRAIN ? "train" : "test", (unsigned long long)st.st_dev,
                     (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec,
                     st.st_mtim.tv_nsec, (long long)p->timesteps, (long long)p->events.time_window_us,
                     p->events.downsample, p->events.merge_polarity ? "merge" : "keep", sf_format_classes(f, p));
    if (n < 0 || (size_t)n >= cap) return sf_fail(SF_ERR_INVALID, "frame cache key too long");
    return SF_OK;
}

typedef struct cache_header {
    int64_t count, T;
    int32_t shape[3], classes;
    int64_t skipped;
} cache_header;

/* The bytes before the labels, the labels' padded size, and the counts' size; 0 on overflow. */
static size_t layout(size_t key_len, const cache_header *h, size_t *labels, size_t *frames)
{
    if (h->shape[0] < 1 || h->shape[1] < 1 || h->shape[2] < 1 || h->shape[0] > 65536 || h->shape[1] > 65536 ||
        h->shape[2] > 65536)
        return 0;
    const size_t cells = (size_t)h->shape[0] * (size_t)h->shape[1] * (size_t)h->shape[2];
    if (h->count < 0 || h->T < 1 || (uint64_t)h->count > SIZE_MAX / 4 / sizeof(uint16_t) / (uint64_t)h->T / cells)
        return 0;
    *labels = pad8((size_t)h->count);
    *frames = (size_t)h->count * (size_t)h->T * cells * sizeof(uint16_t);
    return 8 + 2 + 2 + 4 + pad8(key_len) + sizeof *h;
}

/* A frames dataset of `classes` classes from a cache file's bytes (taking `buf`), or SF_ERR_FORMAT when it is not
 * the one wanted. */
static sf_status parse_cache(char *buf, size_t len, const char *key, int32_t classes, sf_dataset **out)
{
    const size_t key_len = strlen(key);
    uint16_t order;
    uint32_t stored_len, crc;
    cache_header h;
    size_t labels, frames, head;
    if (len < 16 + pad8(key_len) + sizeof h + 4 || memcmp(buf, CACHE_MAGIC, 8) != 0)
        return sf_fail(SF_ERR_FORMAT, "not a frame cache file");
    memcpy(&order, buf + 8, 2);
    memcpy(&stored_len, buf + 12, 4);
    if (order != CACHE_BYTE_ORDER || stored_len != key_len || memcmp(buf + 16, key, key_len) != 0)
        return sf_fail(SF_ERR_FORMAT, "written for other data or binning");
    memcpy(&h, buf + 16 + pad8(key_len), sizeof h);
    if (!(head = layout(key_len, &h, &labels, &frames)) || h.classes != classes || head + labels + frames + 4 != len)
        return sf_fail(SF_ERR_FORMAT, "sizes disagree with the file's length (truncated?)");
    memcpy(&crc, buf + len - 4, 4);
    if ((uint32_t)crc32_z(0, (const Bytef *)buf, len - 4) != crc) return sf_fail(SF_ERR_FORMAT, "checksum mismatch");
    for (int64_t i = 0; i < h.count; i++)
        if ((uint8_t)buf[head + (size_t)i] >= classes) return sf_fail(SF_ERR_FORMAT, "a label is out of range");
    sf_dataset *ds = NULL;
    SF_TRY(sf_dataset_create_of_type(SF_SAMPLES_FRAMES, h.count, h.shape[0], h.shape[1], h.shape[2], classes, &ds));
    for (int64_t i = 0; i < h.count; i++) ds->labels[i] = (uint8_t)buf[head + (size_t)i];
    ds->frames_block = buf;
    ds->frames = (const uint16_t *)(void *)(buf + head + labels);
    ds->frames_T = h.T;
    ds->skipped = h.skipped;
    *out = ds;
    return SF_OK;
}

/* Bins every sample of `events` (counts, no augmentation) into u16 counts [count, T, cells]; *fits is 0 when a
 * count does not fit 16 bits. */
static sf_status bin_all(const sf_dataset *events, const sf_data_params *p, const int32_t shape[3], uint16_t *out,
                         int *fits)
{
    const size_t cells = (size_t)shape[0] * shape[1] * shape[2];
    const int64_t T = p->timesteps;
    sf_loader_params lp;
    sf_loader_default_params(&lp);
    lp.batch = CACHE_CHUNK;
    lp.timesteps = T;
    lp.training = 0;
    lp.events = (sf_event_params){.time_window_us = p->events.time_window_us, .frame = SF_FRAME_COUNT,
                                  .downsample = p->events.downsample, .merge_polarity = p->events.merge_polarity};
    float *x = malloc((size_t)T * CACHE_CHUNK * cells * sizeof *x);
    if (!x) return sf_fail(SF_ERR_NOMEM, "out of memory binning the frame cache");
    int64_t idx[CACHE_CHUNK];
    sf_status s = SF_OK;
    *fits = 1;
    for (int64_t first = 0; first < events->count && s == SF_OK && *fits; first += CACHE_CHUNK) {
        if ((s = sf_interrupt_check()) != SF_OK) break;
        const int64_t n = events->count - first < CACHE_CHUNK ? events->count - first : CACHE_CHUNK;
        for (int64_t b = 0; b < n; b++) idx[b] = first + b;
        sf_events_bin_batch(events, &lp, 0, idx, n, x);
        for (int64_t b = 0; b < n && *fits; b++)
            for (int64_t t = 0; t < T; t++) {
                const float *src = x + ((size_t)t * CACHE_CHUNK + (size_t)b) * cells;
                uint16_t *dst = out + ((size_t)(first + b) * (size_t)T + (size_t)t) * cells;
                for (size_t q = 0; q < cells; q++) {
                    if (src[q] > 65535.0f) *fits = 0;
                    dst[q] = (uint16_t)src[q];
                }
            }
    }
    free(x);
    return s;
}

/* Writes the cache file of `ds` (a frames dataset whose frames are `frames`) atomically. */
static sf_status write_cache(const char *path, const char *key, const sf_dataset *ds, const uint16_t *frames)
{
    const size_t key_len = strlen(key);
    const cache_header h = {ds->count, ds->frames_T, {ds->channels, ds->height, ds->width}, ds->classes, ds->skipped};
    size_t labels, frames_len;
    const size_t head = layout(key_len, &h, &labels, &frames_len);
    char *start = calloc(1, head + labels);
    if (!start) return sf_fail(SF_ERR_NOMEM, "out of memory writing the frame cache");
    const uint16_t order = CACHE_BYTE_ORDER;
    const uint32_t len32 = (uint32_t)key_len;
    memcpy(start, CACHE_MAGIC, 8);
    memcpy(start + 8, &order, 2);
    memcpy(start + 12, &len32, 4);
    memcpy(start + 16, key, key_len);
    memcpy(start + 16 + pad8(key_len), &h, sizeof h);
    for (int64_t i = 0; i < ds->count; i++) start[head + (size_t)i] = (char)(uint8_t)ds->labels[i];
    uint32_t crc = (uint32_t)crc32_z(0, (const Bytef *)start, head + labels);
    crc = (uint32_t)crc32_z(crc, (const Bytef *)frames, frames_len);
    sf_atomic_file af;
    sf_status s = sf_atomic_file_open(&af, path);
    if (s == SF_OK) {
        sf_atomic_file_write(&af, start, head + labels);
        sf_atomic_file_write(&af, frames, frames_len);
        sf_atomic_file_write(&af, &crc, 4);
        s = sf_atomic_file_commit(&af);
    }
    free(start);
    return s;
}

/* Bins a freshly loaded events dataset into a frames dataset and writes its cache file. */
static sf_status build(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                       const char *path, const char *key, sf_dataset **out)
{
    sf_dataset *events = NULL, *ds = NULL;
    SF_TRY(f->load(f, dir, split, p, &events));
    int32_t frame[3], shape[3];
    sf_event_frame_shape(events->channels, events->height, events->width, &p->events, frame);
    sf_event_input_shape(frame, shape);
    sf_status s = sf_dataset_create_of_type(SF_SAMPLES_FRAMES, events->count, shape[0], shape[1], shape[2],
                                            events->classes, &ds);
    const size_t n = (size_t)events->count * (size_t)p->timesteps * (size_t)shape[0] * shape[1] * shape[2];
    uint16_t *frames = s == SF_OK ? malloc(n ? n * sizeof *frames : 1) : NULL;
    if (s == SF_OK && !frames) s = sf_fail(SF_ERR_NOMEM, "out of memory for %zu cached counts", n);
    int fits = 1;
    if (s == SF_OK) s = bin_all(events, p, shape, frames, &fits);
    if (s == SF_OK && !fits) { /* a count past 65535: this split is binned in the loader, uncached */
        free(frames);
        sf_dataset_free(ds);
        *out = events;
        return SF_OK;
    }
    if (s == SF_OK) {
        memcpy(ds->labels, events->labels, (size_t)events->count * sizeof *ds->labels);
        ds->frames_block = frames;
        ds->frames = frames;
        ds->frames_T = p->timesteps;
        ds->skipped = events->skipped;
        s = sf_dir_create(p->cache_dir);
        if (s == SF_OK) s = write_cache(path, key, ds, frames);
        /* a cache that cannot be written costs the next run the binning, not this one its data */
        if (s == SF_ERR_IO) {
            snprintf(ds->warning, sizeof ds->warning, "the frame cache in %.200s cannot be written (%.300s): the %s "
                     "split is binned in memory, uncached", p->cache_dir, sf_last_error(),
                     split == SF_SPLIT_TRAIN ? "training" : "test");
            s = SF_OK;
        }
    } else {
        free(frames);
    }
    sf_dataset_free(events);
    if (s != SF_OK) {
        sf_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SF_OK;
}

sf_status sf_frame_cache_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                              sf_dataset **out)
{
    char key[512], name[96], path[4096];
    SF_TRY(cache_key(f, dir, split, p, key, sizeof key));
    snprintf(name, sizeof name, "%s-%s-%08lx.frames", f->name, split == SF_SPLIT_TRAIN ? "train" : "test",
             (unsigned long)crc32_z(0, (const Bytef *)key, strlen(key)));
    SF_TRY(sf_path_join(path, sizeof path, p->cache_dir, name));
    if (sf_file_exists(path)) {
        char *buf = NULL;
        size_t len = 0;
        if (sf_read_file(path, SIZE_MAX, &buf, &len) == SF_OK &&
            parse_cache(buf, len, key, sf_format_classes(f, p), out) == SF_OK)
            return SF_OK;
        free(buf); /* unreadable, stale or damaged: built again below */
    }
    return build(f, dir, split, p, path, key, out);
}
