/* safetensors.c — safetensors reading (fully bounds-checked: files may be hostile) and atomic writing. */
#include "io/safetensors.h"

#include "core/error.h"
#include "io/files.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A header larger than this is refused before any allocation sized from it. */
#define SF_ST_MAX_HEADER (100u << 20)

static const struct {
    const char *name;
    size_t size;
} dtype_info[] = {{"F32", 4}, {"F64", 8}, {"U8", 1}, {"I32", 4}, {"I64", 8}};

static int dtype_from_name(const char *s, sf_dtype *out)
{
    for (int i = 0; i < (int)(sizeof dtype_info / sizeof dtype_info[0]); i++)
        if (strcmp(s, dtype_info[i].name) == 0) {
            *out = (sf_dtype)i;
            return 1;
        }
    return 0;
}

void sf_safetensors_free(sf_safetensors *st)
{
    if (!st) return;
    for (int32_t i = 0; i < st->count; i++) free(st->entries[i].name);
    free(st->entries);
    free(st->data);
    cJSON_Delete((cJSON *)st->metadata);
    free(st);
}

static sf_status parse_entry(const cJSON *item, size_t data_size, sf_st_entry *e)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsObject(item) || !cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs))
        return sf_fail(SF_ERR_FORMAT, "tensor '%s' lacks dtype, shape or data_offsets", item->string);
    if (!dtype_from_name(dt->valuestring, &e->dtype))
        return sf_fail(SF_ERR_FORMAT, "tensor '%s' has unsupported dtype '%s' (F32, F64, U8, I32, I64)",
                       item->string, dt->valuestring);
    int n = cJSON_GetArraySize(shape);
    if (n > SF_ST_MAX_DIMS) return sf_fail(SF_ERR_FORMAT, "tensor '%s' has %d dimensions", item->string, n);
    e->ndim = n;
    e->numel = 1;
    for (int i = 0; i < n; i++) {
        const cJSON *d = cJSON_GetArrayItem(shape, i);
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 9.0e15 ||
            d->valuedouble != (double)(int64_t)d->valuedouble)
            return sf_fail(SF_ERR_FORMAT, "tensor '%s' has a bad dimension", item->string);
        e->shape[i] = (int64_t)d->valuedouble;
        if (e->shape[i] && e->numel > INT64_MAX / e->shape[i])
            return sf_fail(SF_ERR_FORMAT, "tensor '%s' is too large", item->string);
        e->numel *= e->shape[i];
    }
    const cJSON *b = cJSON_GetArrayItem(offs, 0), *en = cJSON_GetArrayItem(offs, 1);
    if (cJSON_GetArraySize(offs) != 2 || !cJSON_IsNumber(b) || !cJSON_IsNumber(en) || !(b->valuedouble >= 0) ||
        !(en->valuedouble >= b->valuedouble) || !(en->valuedouble <= (double)data_size) ||
        b->valuedouble != floor(b->valuedouble) || en->valuedouble != floor(en->valuedouble))
        return sf_fail(SF_ERR_FORMAT, "tensor '%s' has data_offsets outside the file", item->string);
    e->offset = (size_t)b->valuedouble;
    e->nbytes = (size_t)en->valuedouble - e->offset;
    if ((uint64_t)e->numel > e->nbytes / dtype_info[e->dtype].size ||
        (size_t)e->numel * dtype_info[e->dtype].size != e->nbytes)
        return sf_fail(SF_ERR_FORMAT, "tensor '%s': shape and byte size disagree", item->string);
    e->name = strdup(item->string);
    return e->name ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* JSON allows a key twice; a tensor name given twice would make lookups ambiguous, so it is refused. Sorting keeps
 * this O(n log n) for hostile headers with many entries. */
static sf_status check_unique_names(const sf_safetensors *st)
{
    if (st->count < 2) return SF_OK;
    char **names = malloc((size_t)st->count * sizeof *names);
    if (!names) return sf_fail(SF_ERR_NOMEM, "out of memory reading safetensors");
    for (int32_t i = 0; i < st->count; i++) names[i] = st->entries[i].name;
    qsort(names, (size_t)st->count, sizeof *names, compare_names);
    sf_status s = SF_OK;
    for (int32_t i = 1; i < st->count && s == SF_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0) s = sf_fail(SF_ERR_FORMAT, "tensor '%s' appears twice", names[i]);
    free(names);
    return s;
}

static unsigned long tensor_crc(const void *bytes, size_t n)
{
    return crc32_z(crc32_z(0, Z_NULL, 0), bytes, n);
}

/* Every tensor against the CRC-32 table of __metadata__ (if the file has one): each tensor listed once, no more. */
static sf_status verify_crcs(const sf_safetensors *st)
{
    const char *text = sf_safetensors_meta(st, SF_ST_CRC_KEY);
    if (!text) return SF_OK;
    cJSON *table = cJSON_Parse(text);
    sf_status s = SF_OK;
    if (!cJSON_IsObject(table))
        s = sf_fail(SF_ERR_FORMAT, "__metadata__ '%s' is not a JSON object of CRC-32s", SF_ST_CRC_KEY);
    else if (cJSON_GetArraySize(table) != st->count)
        s = sf_fail(SF_ERR_FORMAT, "__metadata__ '%s' lists %d tensors, the file holds %d", SF_ST_CRC_KEY,
                    cJSON_GetArraySize(table), (int)st->count);
    for (int32_t i = 0; s == SF_OK && i < st->count; i++) {
        const sf_st_entry *e = &st->entries[i];
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(table, e->name);
        char *end = NULL;
        unsigned long recorded = cJSON_IsString(want) ? strtoul(want->valuestring, &end, 16) : 0;
        if (!end || *end || strlen(want->valuestring) != 8)
            s = sf_fail(SF_ERR_FORMAT, "tensor '%s' has no CRC-32 in __metadata__ '%s'", e->name, SF_ST_CRC_KEY);
        else if (tensor_crc(st->data + e->offset, e->nbytes) != recorded)
            s = sf_fail(SF_ERR_FORMAT, "tensor '%s' is damaged: its bytes do not match the CRC-32 recorded for it (%s)",
                        e->name, want->valuestring);
    }
    cJSON_Delete(table);
    return s;
}

sf_status sf_safetensors_parse(const uint8_t *buf, size_t len, sf_safetensors **out)
{
    *out = NULL;
    if (len < 8) return sf_fail(SF_ERR_FORMAT, "file too short for a safetensors header (%zu bytes)", len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > SF_ST_MAX_HEADER || hlen > len - 8)
        return sf_fail(SF_ERR_FORMAT, "header length %llu does not fit the file (%zu bytes)",
                       (unsigned long long)hlen, len);
    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return sf_fail(SF_ERR_FORMAT, "header is not a JSON object");
    }
    sf_safetensors *st = calloc(1, sizeof *st);
    size_t data_size = len - 8 - (size_t)hlen;
    int n = cJSON_GetArraySize(root);
    if (st) {
        st->entries = calloc((size_t)n + 1, sizeof *st->entries);
        st->data = malloc(data_size ? data_size : 1);
    }
    if (!st || !st->entries || !st->data) {
        cJSON_Delete(root);
        sf_safetensors_free(st);
        return sf_fail(SF_ERR_NOMEM, "out of memory reading safetensors");
    }
    memcpy(st->data, buf + 8 + hlen, data_size);
    st->data_size = data_size;
    sf_status status = SF_OK;
    for (cJSON *item = root->child; item && status == SF_OK; item = item->next) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (st->metadata) status = sf_fail(SF_ERR_FORMAT, "__metadata__ appears twice");
            if (status == SF_OK && !cJSON_IsObject(item))
                status = sf_fail(SF_ERR_FORMAT, "__metadata__ is not an object");
            for (cJSON *m = item->child; m && status == SF_OK; m = m->next)
                if (!cJSON_IsString(m))
                    status = sf_fail(SF_ERR_FORMAT, "__metadata__ value '%s' is not a string", m->string);
            if (status == SF_OK) st->metadata = cJSON_Duplicate(item, 1);
            continue;
        }
        status = parse_entry(item, data_size, &st->entries[st->count]);
        if (status == SF_OK) st->count++;
    }
    cJSON_Delete(root);
    if (status == SF_OK) status = check_unique_names(st);
    if (status == SF_OK) status = verify_crcs(st);
    if (status != SF_OK) {
        sf_safetensors_free(st);
        return status;
    }
    *out = st;
    return SF_OK;
}

sf_status sf_safetensors_load(const char *path, sf_safetensors **out)
{
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    SF_TRY(sf_read_file(path, SIZE_MAX, &buf, &len));
    sf_status s = sf_safetensors_parse((const uint8_t *)buf, len, out);
    free(buf);
    return s == SF_OK ? s : sf_fail_context(s, "%s: ", path);
}

const sf_st_entry *sf_safetensors_find(const sf_safetensors *st, const char *name)
{
    for (int32_t i = 0; i < st->count; i++)
        if (strcmp(st->entries[i].name, name) == 0) return &st->entries[i];
    return NULL;
}

static sf_status find_sized(const sf_safetensors *st, const char *name, int64_t numel, const sf_st_entry **e)
{
    *e = sf_safetensors_find(st, name);
    if (!*e) return sf_fail(SF_ERR_FORMAT, "tensor '%s' is missing", name);
    if ((*e)->numel != numel)
        return sf_fail(SF_ERR_FORMAT, "tensor '%s' has %lld elements, expected %lld", name,
                       (long long)(*e)->numel, (long long)numel);
    return SF_OK;
}

/* Element i of an entry as double; memcpy keeps unaligned data legal. */
static double element(const sf_safetensors *st, const sf_st_entry *e, int64_t i)
{
    const uint8_t *p = st->data + e->offset + (size_t)i * dtype_info[e->dtype].size;
    switch (e->dtype) {
    case SF_DT_F32: { float v; memcpy(&v, p, 4); return v; }
    case SF_DT_F64: { double v; memcpy(&v, p, 8); return v; }
    case SF_DT_U8: return *p;
    case SF_DT_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case SF_DT_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    }
    return 0;
}

sf_status sf_safetensors_get_f32(const sf_safetensors *st, const char *name, float *dst, int64_t numel)
{
    const sf_st_entry *e;
    SF_TRY(find_sized(st, name, numel, &e));
    if (e->dtype == SF_DT_F32) {
        memcpy(dst, st->data + e->offset, e->nbytes);
        return SF_OK;
    }
    for (int64_t i = 0; i < numel; i++) dst[i] = (float)element(st, e, i);
    return SF_OK;
}

sf_status sf_safetensors_get_f64(const sf_safetensors *st, const char *name, double *dst, int64_t numel)
{
    const sf_st_entry *e;
    SF_TRY(find_sized(st, name, numel, &e));
    for (int64_t i = 0; i < numel; i++) dst[i] = element(st, e, i);
    return SF_OK;
}

const char *sf_safetensors_meta(const sf_safetensors *st, const char *key)
{
    const cJSON *v = st->metadata ? cJSON_GetObjectItemCaseSensitive((const cJSON *)st->metadata, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ------------------------------------------------------------------------------------------------ writing */

typedef struct st_blob {
    char *name;
    sf_dtype dtype;
    int32_t ndim;
    int64_t shape[SF_ST_MAX_DIMS];
    void *bytes;
    size_t nbytes;
} st_blob;

struct sf_st_writer {
    st_blob *blobs;
    int32_t count, cap;
    cJSON *meta;
};

sf_status sf_st_writer_create(sf_st_writer **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out || !((*out)->meta = cJSON_CreateObject())) {
        free(*out);
        *out = NULL;
        return sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    return SF_OK;
}

void sf_st_writer_free(sf_st_writer *w)
{
    if (!w) return;
    for (int32_t i = 0; i < w->count; i++) {
        free(w->blobs[i].name);
        free(w->blobs[i].bytes);
    }
    free(w->blobs);
    cJSON_Delete(w->meta);
    free(w);
}

sf_status sf_st_writer_add(sf_st_writer *w, const char *name, sf_dtype dtype, int32_t ndim, const int64_t *shape,
                           const void *data)
{
    if (ndim < 0 || ndim > SF_ST_MAX_DIMS) return sf_fail(SF_ERR_INVALID, "tensor '%s': %d dims", name, ndim);
    if (w->count == w->cap) {
        int32_t cap = w->cap ? 2 * w->cap : 16;
        st_blob *b = realloc(w->blobs, (size_t)cap * sizeof *b);
        if (!b) return sf_fail(SF_ERR_NOMEM, "out of memory");
        w->blobs = b;
        w->cap = cap;
    }
    st_blob *b = &w->blobs[w->count];
    memset(b, 0, sizeof *b);
    size_t numel = 1;
    for (int32_t i = 0; i < ndim; i++) numel *= (size_t)(b->shape[i] = shape[i]);
    b->ndim = ndim;
    b->dtype = dtype;
    b->nbytes = numel * dtype_info[dtype].size;
    b->name = strdup(name);
    b->bytes = malloc(b->nbytes ? b->nbytes : 1);
    if (!b->name || !b->bytes) {
        free(b->name);
        free(b->bytes);
        return sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    memcpy(b->bytes, data, b->nbytes);
    w->count++;
    return SF_OK;
}

sf_status sf_st_writer_meta(sf_st_writer *w, const char *key, const char *value)
{
    if (strcmp(key, SF_ST_CRC_KEY) == 0)
        return sf_fail(SF_ERR_INVALID, "__metadata__ '%s' is written by the writer itself", SF_ST_CRC_KEY);
    cJSON_DeleteItemFromObjectCaseSensitive(w->meta, key);
    return cJSON_AddStringToObject(w->meta, key, value) ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
}

/* The CRC-32 table of the writer's tensors as JSON text (see safetensors.h), or NULL when out of memory. */
static char *crc_table(const sf_st_writer *w)
{
    cJSON *t = cJSON_CreateObject();
    for (int32_t i = 0; t && i < w->count; i++) {
        char hex[16];
        snprintf(hex, sizeof hex, "%08lx", tensor_crc(w->blobs[i].bytes, w->blobs[i].nbytes));
        cJSON_AddStringToObject(t, w->blobs[i].name, hex);
    }
    char *text = t ? cJSON_PrintUnformatted(t) : NULL;
    cJSON_Delete(t);
    return text;
}

static char *header_json(const sf_st_writer *w, size_t *len)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_Duplicate(w->meta, 1);
    char *crcs = crc_table(w);
    if (!root || !meta || !crcs || !cJSON_AddStringToObject(meta, SF_ST_CRC_KEY, crcs)) {
        cJSON_Delete(root);
        cJSON_Delete(meta);
        free(crcs);
        return NULL;
    }
    free(crcs);
    cJSON_AddItemToObject(root, "__metadata__", meta);
    size_t off = 0;
    for (int32_t i = 0; i < w->count; i++) {
        const st_blob *b = &w->blobs[i];
        cJSON *t = cJSON_AddObjectToObject(root, b->name);
        cJSON_AddStringToObject(t, "dtype", dtype_info[b->dtype].name);
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int32_t d = 0; d < b->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)b->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + b->nbytes)));
        off += b->nbytes;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!s) return NULL;
    /* Pad the header with spaces to a multiple of 8 so the data section stays aligned. */
    size_t n = strlen(s), padded = (n + 7) & ~(size_t)7;
    char *p = realloc(s, padded + 1);
    if (!p) {
        free(s);
        return NULL;
    }
    memset(p + n, ' ', padded - n);
    p[padded] = 0;
    *len = padded;
    return p;
}

sf_status sf_st_writer_save(sf_st_writer *w, const char *path)
{
    size_t hlen = 0;
    char *header = header_json(w, &hlen);
    if (!header) return sf_fail(SF_ERR_NOMEM, "out of memory building the safetensors header");
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    sf_atomic_file f;
    if (sf_atomic_file_open(&f, path) == SF_OK) {
        sf_atomic_file_write(&f, len8, sizeof len8);
        sf_atomic_file_write(&f, header, hlen);
        for (int32_t i = 0; i < w->count; i++) sf_atomic_file_write(&f, w->blobs[i].bytes, w->blobs[i].nbytes);
    }
    free(header);
    return sf_atomic_file_commit(&f);
}
