/* event_folders.c — event datasets of one folder per class and one file per recording, with no official split
 * (CIFAR10-DVS, N-Caltech101): the test split is the first tenth of each class (formats.h says how). */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDING_MAX_FILE_BYTES ((size_t)1 << 30)

/* Names compared with their runs of digits as numbers: image_9 before image_10. */
static int natural_compare(const char *a, const char *b)
{
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            while (*a == '0') a++;
            while (*b == '0') b++;
            size_t na = strspn(a, "0123456789"), nb = strspn(b, "0123456789");
            if (na != nb) return na < nb ? -1 : 1;
            const int cmp = strncmp(a, b, na);
            if (cmp) return cmp;
            a += na;
            b += nb;
            continue;
        }
        if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int compare_names(const void *a, const void *b)
{
    const int cmp = natural_compare(*(char *const *)a, *(char *const *)b);
    return cmp ? cmp : strcmp(*(char *const *)a, *(char *const *)b);
}

/* The recordings of one class folder in the split appended to ds with label `label`. */
static sf_status load_class(const sf_event_folders *e, const char *folder, sf_split split, int32_t label,
                            sf_dataset *ds, sf_event **scratch, size_t *cap)
{
    char **names = NULL;
    size_t n = 0;
    SF_TRY(sf_dir_list(folder, e->suffix, &names, &n));
    if (n == 0) {
        free(names);
        return sf_fail(SF_ERR_FORMAT, "%s holds no %s recordings", folder, e->suffix);
    }
    qsort(names, n, sizeof *names, compare_names);
    const size_t tests = (size_t)floor((double)n * SF_EVENT_TEST_FRACTION + 0.5);
    const size_t first = split == SF_SPLIT_TEST ? 0 : tests, last = split == SF_SPLIT_TEST ? tests : n;
    sf_status s = SF_OK;
    uint8_t *buf = NULL;
    size_t buf_cap = 0;
    for (size_t i = first; i < last && s == SF_OK; i++) {
        char path[4096];
        size_t len = 0;
        int64_t count = 0;
        s = sf_path_join(path, sizeof path, folder, names[i]);
        if (s == SF_OK) s = sf_read_file_into(path, RECORDING_MAX_FILE_BYTES, &buf, &buf_cap, &len);
        const size_t room = len / e->bytes_per_event + 1;
        if (s == SF_OK && room > *cap) {
            sf_event *grown = realloc(*scratch, room * sizeof *grown);
            if (!grown) s = sf_fail(SF_ERR_NOMEM, "out of memory for the %zu events of %s", room, path);
            else *scratch = grown, *cap = room;
        }
        if (s == SF_OK) s = e->parse(buf, len, *scratch, &count);
        if (s == SF_OK) s = sf_events_add_sample(ds, *scratch, count, label);
        if (s != SF_OK) s = sf_fail_context(s, "%s: ", path);
    }
    free(buf);
    free(names);
    return s;
}

/* The class folders in label order into names[0..classes): e->classes, or the folders of base but e->excluded in
 * byte order (*listing then holds their names: free it). */
static sf_status class_names(const sf_dataset_format *f, const sf_event_folders *e, const char *base,
                             int32_t classes, const char **names, sf_dir_entry **listing)
{
    *listing = NULL;
    if (e->classes) {
        for (int32_t c = 0; c < classes; c++) names[c] = e->classes[c];
        return SF_OK;
    }
    sf_dir_entry *entries = NULL;
    size_t count = 0;
    int32_t k = 0;
    SF_TRY(sf_dir_entries(base, &entries, &count));
    for (size_t i = 0; i < count; i++)
        if (entries[i].kind == SF_ENTRY_DIR && !(e->excluded && strcmp(entries[i].name, e->excluded) == 0)) {
            if (k < classes) names[k] = entries[i].name;
            k++;
        }
    if (k != classes) {
        free(entries);
        return sf_fail(SF_ERR_FORMAT, "%s in %s: %d class folders, expected %d%s%s; %s", f->pretty, base, k, classes,
                       e->excluded ? " besides " : "", e->excluded ? e->excluded : "", f->provider);
    }
    *listing = entries;
    return SF_OK;
}

sf_status sf_event_folders_load(const sf_dataset_format *f, const sf_event_folders *e, const char *dir,
                                sf_split split, int32_t classes, sf_dataset **out)
{
    char base[4096], folder[4096];
    snprintf(base, sizeof base, "%s", dir);
    if (e->unpacked) { /* the folder the archive unpacks to, or the one holding it */
        SF_TRY(sf_path_join(folder, sizeof folder, dir, e->unpacked));
        if (sf_dir_exists(folder)) snprintf(base, sizeof base, "%s", folder);
    }
    if (!sf_dir_exists(base))
        return sf_fail(SF_ERR_IO, "%s not found: no folder %s; %s", f->pretty, base, f->provider);
    const char **names = malloc((size_t)classes * sizeof *names);
    if (!names) return sf_fail(SF_ERR_NOMEM, "out of memory");
    sf_dir_entry *listing = NULL;
    sf_status s = class_names(f, e, base, classes, names, &listing);
    sf_dataset *ds = NULL;
    sf_event *scratch = NULL;
    size_t cap = 0;
    if (s == SF_OK) s = sf_events_create(f->channels, f->height, f->width, classes, &ds);
    for (int32_t c = 0; c < classes && s == SF_OK; c++) {
        s = sf_path_join(folder, sizeof folder, base, names[c]);
        if (s == SF_OK && !sf_dir_exists(folder))
            s = sf_fail(SF_ERR_IO, "%s not found: no class folder %s; %s", f->pretty, folder, f->provider);
        if (s == SF_OK) s = load_class(e, folder, split, c, ds, &scratch, &cap);
    }
    free(scratch);
    free(listing);
    free(names);
    if (s != SF_OK) {
        sf_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SF_OK;
}
