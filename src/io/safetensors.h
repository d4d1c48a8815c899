/* safetensors.h — reading and atomically writing safetensors files (an 8-byte little-endian header length, a JSON
 * header, raw tensor bytes). The writer records each tensor's CRC-32 in __metadata__[SF_ST_CRC_KEY] as a JSON text
 * {"name": "8 hex digits", ...}; the reader checks it and refuses a damaged tensor by name (no key: unchecked). */
#ifndef SF_IO_SAFETENSORS_H
#define SF_IO_SAFETENSORS_H

#include "spikefuse_train.h"

#include <stddef.h>
#include <stdint.h>

typedef enum sf_dtype { SF_DT_F32 = 0, SF_DT_F64, SF_DT_U8, SF_DT_I32, SF_DT_I64 } sf_dtype;

#define SF_ST_MAX_DIMS 8
#define SF_ST_CRC_KEY "crc32"

typedef struct sf_st_entry {
    char *name;
    sf_dtype dtype;
    int32_t ndim;
    int64_t shape[SF_ST_MAX_DIMS];
    int64_t numel;
    size_t offset, nbytes; /* within the data section */
} sf_st_entry;

/* A loaded file (the handle sf_safetensors of include/spikefuse_train.h, freed by sf_safetensors_free there). */
struct sf_safetensors {
    sf_st_entry *entries;
    int32_t count;
    uint8_t *data; /* the data section */
    size_t data_size;
    void *metadata; /* cJSON object of "__metadata__" (string values), or NULL */
};

/* Parses a whole file held in memory (copied); every offset, size and shape is checked against the buffer, and the
 * tensors against their recorded CRC-32s. */
sf_status sf_safetensors_parse(const uint8_t *buf, size_t len, sf_safetensors **out);
sf_status sf_safetensors_load(const char *path, sf_safetensors **out);
const sf_st_entry *sf_safetensors_find(const sf_safetensors *st, const char *name);
/* Copies tensor `name` converted to float32 / float64; its element count must be `numel`. */
sf_status sf_safetensors_get_f32(const sf_safetensors *st, const char *name, float *dst, int64_t numel);
sf_status sf_safetensors_get_f64(const sf_safetensors *st, const char *name, double *dst, int64_t numel);
/* A string value of __metadata__, or NULL. */
const char *sf_safetensors_meta(const sf_safetensors *st, const char *key);

typedef struct sf_st_writer sf_st_writer;
sf_status sf_st_writer_create(sf_st_writer **out);
void sf_st_writer_free(sf_st_writer *w);
/* Copies the bytes of one tensor into the writer. */
sf_status sf_st_writer_add(sf_st_writer *w, const char *name, sf_dtype dtype, int32_t ndim, const int64_t *shape,
                           const void *data);
sf_status sf_st_writer_meta(sf_st_writer *w, const char *key, const char *value);
/* Writes `path` atomically (io/files.h: a temporary beside it, fsync, rename, fsync of the directory), so a crash
 * at any moment leaves either the old file or the new one. */
sf_status sf_st_writer_save(sf_st_writer *w, const char *path);

#endif
