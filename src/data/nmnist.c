/* nmnist.c — N-MNIST (Orchard et al. 2015): one .bin file per sample under Train/<digit>/ and Test/<digit>/, read
 * from the unzipped folders or, through libzip, from Train.zip and Test.zip as distributed. Each event is 5 bytes:
 * x (8 bits), y (8 bits), then polarity (1 bit) and a timestamp in µs (23 bits), big-endian; an event with y = 240
 * is not an event but marks a timestamp overflow, after which 2^13 µs are added to the timestamps (as the
 * dataset's published reader does). Sensor 34×34. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#define NMNIST_OVERFLOW_Y 240
#define NMNIST_OVERFLOW_US (1u << 13)
/* The largest file accepted: real samples are a few tens of kilobytes. */
#define NMNIST_MAX_FILE_BYTES ((size_t)64 << 20)

sf_status sf_nmnist_parse(const uint8_t *buf, size_t len, sf_event *out, int64_t *n)
{
    *n = 0;
    if (len % SF_NMNIST_EVENT_BYTES)
        return sf_fail(SF_ERR_FORMAT, "%zu bytes is not a whole number of 5-byte events (truncated file?)", len);
    uint32_t offset = 0;
    int64_t k = 0;
    for (size_t i = 0; i < len; i += SF_NMNIST_EVENT_BYTES) {
        const uint8_t *b = buf + i;
        const uint32_t t = (uint32_t)(b[2] & 0x7f) << 16 | (uint32_t)b[3] << 8 | b[4];
        if (b[1] == NMNIST_OVERFLOW_Y) {
            if (offset > UINT32_MAX - (1u << 23) - NMNIST_OVERFLOW_US)
                return sf_fail(SF_ERR_FORMAT, "event %zu: too many timestamp overflows", i / SF_NMNIST_EVENT_BYTES);
            offset += NMNIST_OVERFLOW_US;
            continue;
        }
        out[k++] = (sf_event){.t = t + offset, .x = b[0], .y = b[1], .p = (uint8_t)(b[2] >> 7)};
    }
    *n = k;
    return SF_OK;
}

/* Room for the events of a file of len bytes in *scratch. */
static sf_status reserve_events(size_t len, sf_event **scratch, size_t *cap)
{
    if (len / SF_NMNIST_EVENT_BYTES <= *cap) return SF_OK;
    sf_event *grown = realloc(*scratch, len / SF_NMNIST_EVENT_BYTES * sizeof **scratch);
    if (!grown) return sf_fail(SF_ERR_NOMEM, "out of memory for %zu events", len / SF_NMNIST_EVENT_BYTES);
    *scratch = grown;
    *cap = len / SF_NMNIST_EVENT_BYTES;
    return SF_OK;
}

/* One sample file's bytes appended to ds; `where` names the file in errors. */
static sf_status add_file(const uint8_t *buf, size_t len, int digit, const char *where, sf_dataset *ds,
                          sf_event **scratch, size_t *cap)
{
    int64_t n = 0;
    sf_status s = reserve_events(len, scratch, cap);
    if (s == SF_OK) s = sf_nmnist_parse(buf, len, *scratch, &n);
    if (s == SF_OK) s = sf_events_add_sample(ds, *scratch, n, digit);
    return s == SF_OK ? s : sf_fail_context(s, "%s: ", where);
}

/* The samples of one digit's folder appended to ds, in file-name order. */
static sf_status load_digit(const char *folder, int digit, sf_dataset *ds, sf_event **scratch, size_t *cap)
{
    char **names = NULL;
    size_t count = 0;
    SF_TRY(sf_dir_list(folder, ".bin", &names, &count));
    sf_status s = SF_OK;
    for (size_t i = 0; i < count && s == SF_OK; i++) {
        char path[4096];
        char *buf = NULL;
        size_t len = 0;
        s = sf_path_join(path, sizeof path, folder, names[i]);
        if (s == SF_OK) s = sf_read_file(path, NMNIST_MAX_FILE_BYTES, &buf, &len);
        if (s == SF_OK) s = add_file((const uint8_t *)buf, len, digit, path, ds, scratch, cap);
        free(buf);
    }
    free(names);
    return s;
}

/* A sample file inside the zip: its digit (the name of the folder holding it), its index and name. */
typedef struct zip_sample {
    int digit;
    zip_uint64_t index;
    const char *name;
} zip_sample;

static int compare_samples(const void *a, const void *b)
{
    const zip_sample *x = a, *y = b;
    return x->digit != y->digit ? x->digit - y->digit : strcmp(x->name, y->name);
}

/* The digit of an entry ".../<digit>/<name>.bin", or -1 for any other entry (folders, other files). */
static int entry_digit(const char *name)
{
    const size_t n = strlen(name);
    const char *slash = strrchr(name, '/');
    if (n < 4 || strcmp(name + n - 4, ".bin") != 0 || !slash || slash - name < 1) return -1;
    const char d = slash[-1];
    if (d < '0' || d > '9' || (slash - name >= 2 && slash[-2] != '/')) return -1;
    return d - '0';
}

/* The bytes of entry `index` into a malloc'd buffer. */
static sf_status read_entry(zip_t *z, const zip_sample *e, char **out, size_t *len)
{
    zip_stat_t st;
    if (zip_stat_index(z, e->index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return sf_fail(SF_ERR_FORMAT, "%s: cannot read its size: %s", e->name, zip_strerror(z));
    if (st.size > NMNIST_MAX_FILE_BYTES) return sf_fail(SF_ERR_FORMAT, "%s: larger than a sample", e->name);
    char *buf = malloc(st.size ? (size_t)st.size : 1);
    zip_file_t *zf = buf ? zip_fopen_index(z, e->index, 0) : NULL;
    const zip_int64_t got = zf ? zip_fread(zf, buf, st.size) : -1;
    sf_status s = SF_OK;
    if (!buf) s = sf_fail(SF_ERR_NOMEM, "out of memory");
    else if (got < 0 || (zip_uint64_t)got != st.size)
        s = sf_fail(SF_ERR_FORMAT, "%s: cannot be decompressed: %lld of %llu bytes (damaged zip)", e->name,
                    (long long)got, (unsigned long long)st.size);
    /* zip_fclose reports a CRC mismatch found at the end of the entry. */
    if (zf && zip_fclose(zf) != 0 && s == SF_OK) s = sf_fail(SF_ERR_FORMAT, "%s: CRC mismatch (damaged zip)", e->name);
    if (s != SF_OK) {
        free(buf);
        return s;
    }
    *out = buf;
    *len = (size_t)st.size;
    return SF_OK;
}

/* Every sample in the zip as distributed (Train.zip / Test.zip), in (digit, name) order like the folders. */
static sf_status load_zip(const sf_dataset_format *f, const char *path, sf_dataset *ds, sf_event **scratch,
                          size_t *cap)
{
    int err = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &err);
    if (!z) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        sf_status s = sf_fail(SF_ERR_FORMAT, "%s: not a readable zip file (%s)", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return s;
    }
    const zip_int64_t n = zip_get_num_entries(z, 0);
    zip_sample *list = malloc((size_t)(n > 0 ? n : 1) * sizeof *list);
    size_t count = 0;
    int per_digit[10] = {0};
    sf_status s = list ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory listing %s", path);
    for (zip_int64_t i = 0; i < n && s == SF_OK; i++) {
        const char *name = zip_get_name(z, (zip_uint64_t)i, 0);
        const int digit = name ? entry_digit(name) : -1;
        if (digit < 0) continue;
        list[count++] = (zip_sample){digit, (zip_uint64_t)i, name};
        per_digit[digit]++;
    }
    for (int d = 0; d < 10 && s == SF_OK; d++)
        if (per_digit[d] == 0)
            s = sf_fail(SF_ERR_FORMAT, "%s holds no <digit>/*.bin files of digit %d; %s", path, d, f->provider);
    if (s == SF_OK) qsort(list, count, sizeof *list, compare_samples);
    for (size_t i = 0; i < count && s == SF_OK; i++) {
        char *buf = NULL, where[8192 + 16];
        size_t len = 0;
        snprintf(where, sizeof where, "%.4096s:%.4096s", path, list[i].name);
        s = read_entry(z, &list[i], &buf, &len);
        if (s == SF_OK) s = add_file((const uint8_t *)buf, len, list[i].digit, where, ds, scratch, cap);
        else s = sf_fail_context(s, "%s:", path);
        free(buf);
    }
    free(list);
    zip_discard(z);
    return s;
}

sf_status sf_nmnist_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                         sf_dataset **out)
{
    const char *part = split == SF_SPLIT_TRAIN ? "Train" : "Test";
    char base[4096], folder[4096], zip_name[16], zip_path[4096];
    snprintf(zip_name, sizeof zip_name, "%s.zip", part);
    SF_TRY(sf_path_join(base, sizeof base, dir, part));
    SF_TRY(sf_path_join(folder, sizeof folder, base, "0"));
    SF_TRY(sf_path_join(zip_path, sizeof zip_path, dir, zip_name));
    /* The unzipped folders when they are there, else the zip as distributed. */
    const int from_zip = !sf_dir_exists(folder) && sf_file_exists(zip_path);
    sf_dataset *ds = NULL;
    SF_TRY(sf_events_create(f->channels, f->height, f->width, f->classes, &ds));
    sf_event *scratch = NULL;
    size_t cap = 0;
    sf_status s = from_zip ? load_zip(f, zip_path, ds, &scratch, &cap) : SF_OK;
    for (int digit = 0; digit < 10 && s == SF_OK && !from_zip; digit++) {
        char name[4];
        snprintf(name, sizeof name, "%d", digit);
        s = sf_path_join(folder, sizeof folder, base, name);
        if (s == SF_OK && !sf_dir_exists(folder))
            s = sf_fail(SF_ERR_IO, "%s not found: looked for the folder %s and for %s; %s", f->pretty, folder,
                        zip_path, f->provider);
        if (s == SF_OK) s = load_digit(folder, digit, ds, &scratch, &cap);
    }
    free(scratch);
    if (s != SF_OK) {
        sf_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SF_OK;
}
