/* imagefolder.c — ImageNet-layout folders (train/<class>/..., val/) listed as files and labels (read per batch:
 * image_sample.c). Classes are train/'s folders in byte order; a class's images are its .jpg/.jpeg/.png files (any
 * case), then its subfolders', each in byte order; val/ has the same folders, or images and a val_labels file.
 * Other image endings (.bmp, ...) are refused, other and hidden files left out. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Subfolders deeper than this below a class folder are refused (a link loop would never end). */
#define MAX_DEPTH 16
#define LABELS_MAX_BYTES ((size_t)256 << 20)

/* One allocation: this header, then name_at, bad, the names and the root they point into. */
struct sf_image_files {
    const char *root;    /* the split's folder */
    const char *names;   /* each sample's path below root, NUL-terminated, back to back */
    const int64_t *name_at; /* [count] */
    atomic_uchar *bad;   /* [count] 1 once the image failed to decode */
    atomic_llong bad_count;
    int32_t skip_bad;
};

/* ---------------------------------------------------------------- the list being built */

typedef struct file_list {
    char *names;
    size_t bytes, bytes_cap;
    int64_t *name_at;
    int32_t *labels;
    int64_t count, cap;
} file_list;

static sf_status list_add(file_list *l, const char *rel, int32_t label)
{
    const size_t len = strlen(rel) + 1;
    if (l->count == l->cap) {
        const int64_t cap = l->cap ? 2 * l->cap : 1024;
        int64_t *at = realloc(l->name_at, (size_t)cap * sizeof *at);
        if (at) l->name_at = at;
        int32_t *lb = at ? realloc(l->labels, (size_t)cap * sizeof *lb) : NULL;
        if (!lb) return sf_fail(SF_ERR_NOMEM, "out of memory listing %lld images", (long long)l->count);
        l->labels = lb;
        l->cap = cap;
    }
    if (l->bytes + len > l->bytes_cap) {
        const size_t cap = 2 * (l->bytes + len) + 4096;
        char *grown = realloc(l->names, cap);
        if (!grown) return sf_fail(SF_ERR_NOMEM, "out of memory listing %lld images", (long long)l->count);
        l->names = grown;
        l->bytes_cap = cap;
    }
    memcpy(l->names + l->bytes, rel, len);
    l->name_at[l->count] = (int64_t)l->bytes;
    l->labels[l->count++] = label;
    l->bytes += len;
    return SF_OK;
}

static void list_free(file_list *l)
{
    free(l->names);
    free(l->name_at);
    free(l->labels);
}

/* ---------------------------------------------------------------- walking class folders */

static int ends_with(const char *name, const char *ending)
{
    const size_t n = strlen(name), k = strlen(ending);
    return n >= k && strcasecmp(name + n - k, ending) == 0;
}

static int is_image_name(const char *name)
{
    return ends_with(name, ".jpg") || ends_with(name, ".jpeg") || ends_with(name, ".png");
}

/* Endings torchvision's ImageFolder also reads, in formats spikefuse does not decode. */
static int is_other_image_name(const char *name)
{
    static const char *const others[] = {".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (ends_with(name, others[i])) return 1;
    return 0;
}

/* The images of folder root/rel (and its subfolders) appended with `label`. */
static sf_status walk(const char *root, const char *rel, int32_t label, int depth, file_list *l)
{
    char dir[4096];
    SF_TRY(sf_path_join(dir, sizeof dir, root, rel));
    if (depth > MAX_DEPTH)
        return sf_fail(SF_ERR_FORMAT, "%s: folders nested more than %d deep (a link back to a folder above?)", dir,
                       MAX_DEPTH);
    sf_dir_entry *e = NULL;
    size_t n = 0;
    SF_TRY(sf_dir_entries(dir, &e, &n));
    sf_status s = SF_OK;
    for (int pass = 0; pass < 2 && s == SF_OK; pass++) /* the files first, then the subfolders */
        for (size_t i = 0; i < n && s == SF_OK; i++) {
            const int file = e[i].kind == SF_ENTRY_FILE;
            if (pass == 0 && file && is_other_image_name(e[i].name)) {
                s = sf_fail(SF_ERR_FORMAT, "%s/%s: spikefuse reads JPEG and PNG images only (convert it, or move it "
                            "out of the folder)", dir, e[i].name);
                break;
            }
            if (pass == 0 ? !(file && is_image_name(e[i].name)) : e[i].kind != SF_ENTRY_DIR) continue;
            char sub[4096];
            s = sf_path_join(sub, sizeof sub, rel, e[i].name);
            if (s == SF_OK) s = pass == 0 ? list_add(l, sub, label) : walk(root, sub, label, depth + 1, l);
        }
    free(e);
    return s;
}

/* The class folders of `dir` (its subfolders, in byte order); SF_ERR_IO when it is missing. */
static sf_status class_folders(const sf_dataset_format *f, const char *dir, sf_dir_entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!sf_dir_exists(dir)) return sf_fail(SF_ERR_IO, "%s not found: no folder %s; %s", f->pretty, dir, f->provider);
    sf_dir_entry *e = NULL;
    size_t count = 0, k = 0;
    SF_TRY(sf_dir_entries(dir, &e, &count));
    for (size_t i = 0; i < count; i++)
        if (e[i].kind == SF_ENTRY_DIR) e[k++] = e[i];
    *out = e;
    *n = k;
    return SF_OK;
}

/* Every class folder of `dir`, label i for the i-th; each must hold an image. */
static sf_status walk_classes(const char *dir, const sf_dir_entry *classes, size_t n, file_list *l)
{
    for (size_t c = 0; c < n; c++) {
        const int64_t before = l->count;
        SF_TRY(walk(dir, classes[c].name, (int32_t)c, 0, l));
        if (l->count == before)
            return sf_fail(SF_ERR_FORMAT, "%s/%s: the class folder holds no image (.jpg, .jpeg or .png)", dir,
                           classes[c].name);
    }
    return SF_OK;
}

/* val/'s class folders must be train/'s. */
static sf_status same_classes(const char *train, const sf_dir_entry *a, size_t na, const char *val,
                              const sf_dir_entry *b, size_t nb)
{
    for (size_t i = 0; i < na || i < nb; i++) {
        const int cmp = i >= na ? 1 : i >= nb ? -1 : strcmp(a[i].name, b[i].name);
        if (cmp == 0) continue;
        const char *missing_in = cmp < 0 ? val : train, *name = cmp < 0 ? a[i].name : b[i].name;
        return sf_fail(SF_ERR_FORMAT,
                       "the class folders of %s and %s differ: %s has no folder %s (%zu classes in train, %zu in "
                       "val)",
                       train, val, missing_in, name, na, nb);
    }
    return SF_OK;
}

/* ---------------------------------------------------------------- a flat val/ and its labels file */

typedef struct label_line {
    const char *name; /* NUL-terminated in the file's buffer */
    int32_t label, line;
    int used;
} label_line;

static int compare_lines(const void *a, const void *b)
{
    return strcmp(((const label_line *)a)->name, ((const label_line *)b)->name);
}

/* A class token: a class folder's name, else a 0-based index in their order. -1 when it is neither. */
static int32_t class_of(const char *token, const sf_dir_entry *classes, size_t n)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the folders are in byte order */
        const size_t mid = lo + (hi - lo) / 2;
        const int cmp = strcmp(classes[mid].name, token);
        if (cmp == 0) return (int32_t)mid;
        if (cmp < 0) lo = mid + 1;
        else hi = mid;
    }
    char *end;
    errno = 0;
    const long v = isdigit((unsigned char)token[0]) ? strtol(token, &end, 10) : -1;
    return v >= 0 && errno == 0 && *end == 0 && (size_t)v < n ? (int32_t)v : -1;
}

/* The lines of a labels file: "name class", split at the first comma or blank, the rest of the line ignored (Caffe's
 * val.txt, Kaggle's LOC_val_solution.csv); a first line whose class is not one is a header. Cuts `text` in place. */
static sf_status parse_labels(const char *path, char *text, size_t len, const sf_dir_entry *classes, size_t n,
                              label_line **out, size_t *count)
{
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    label_line *ll = malloc(lines * sizeof *ll);
    if (!ll) return sf_fail(SF_ERR_NOMEM, "out of memory reading %s", path);
    size_t k = 0;
    int32_t line = 0, first = 1;
    for (char *p = text, *stop = text + len; p < stop; p++) {
        char *eol = memchr(p, '\n', (size_t)(stop - p));
        if (!eol) eol = stop;
        *eol = 0;
        line++;
        char *name = p + strspn(p, " \t\r");
        p = eol;
        if (!*name) continue;
        const size_t name_len = strcspn(name, " \t\r,");
        char *rest = name + name_len;
        rest += strspn(rest, " \t\r,");
        rest[strcspn(rest, " \t\r,")] = 0;
        name[name_len] = 0;
        const int32_t label = *rest ? class_of(rest, classes, n) : -1;
        const int header = first;
        first = 0;
        if (label < 0 && header) continue;
        if (label < 0) {
            free(ll);
            if (!*rest)
                return sf_fail(SF_ERR_FORMAT, "%s:%d: no class after %s (expected \"name class\")", path, line, name);
            return sf_fail(SF_ERR_FORMAT,
                           "%s:%d: '%s' is neither a class folder of train/ nor a class index below %zu (expected "
                           "\"name class\" per line)",
                           path, line, rest, n);
        }
        ll[k++] = (label_line){name, label, line, 0};
    }
    qsort(ll, k, sizeof *ll, compare_lines);
    for (size_t i = 1; i < k; i++)
        if (strcmp(ll[i].name, ll[i - 1].name) == 0) {
            const int32_t a = ll[i - 1].line < ll[i].line ? ll[i - 1].line : ll[i].line;
            const int32_t b = ll[i - 1].line < ll[i].line ? ll[i].line : ll[i - 1].line;
            sf_status s = sf_fail(SF_ERR_FORMAT, "%s:%d: %s was given a class on line %d already", path, b,
                                  ll[i].name, a);
            free(ll);
            return s;
        }
    *out = ll;
    *count = k;
    return SF_OK;
}

static label_line *find_line(label_line *ll, size_t n, const char *name)
{
    const label_line key = {.name = name};
    return bsearch(&key, ll, n, sizeof *ll, compare_lines);
}

/* The images of a flat val/ with the classes the labels file gives them (by file name, or by name without its
 * ending); every image needs a line, every line an image. */
static sf_status flat_val(const char *val, const char *labels_path, const sf_dir_entry *classes, size_t n,
                          file_list *l)
{
    char *text = NULL;
    size_t len = 0, count = 0;
    label_line *ll = NULL;
    sf_status s = sf_read_file(labels_path, LABELS_MAX_BYTES, &text, &len);
    if (s == SF_OK) s = parse_labels(labels_path, text, len, classes, n, &ll, &count);
    sf_dir_entry *e = NULL;
    size_t files = 0;
    if (s == SF_OK) s = sf_dir_entries(val, &e, &files);
    for (size_t i = 0; i < files && s == SF_OK; i++) {
        if (e[i].kind != SF_ENTRY_FILE || !is_image_name(e[i].name)) {
            if (e[i].kind == SF_ENTRY_FILE && is_other_image_name(e[i].name))
                s = sf_fail(SF_ERR_FORMAT, "%s/%s: spikefuse reads JPEG and PNG images only", val, e[i].name);
            continue;
        }
        label_line *hit = find_line(ll, count, e[i].name);
        if (!hit) {
            char stem[4096];
            snprintf(stem, sizeof stem, "%s", e[i].name);
            *strrchr(stem, '.') = 0;
            hit = find_line(ll, count, stem);
        }
        if (!hit) s = sf_fail(SF_ERR_FORMAT, "%s/%s: %s gives it no class", val, e[i].name, labels_path);
        else if (hit->used) s = sf_fail(SF_ERR_FORMAT, "%s:%d: %s names two images of %s", labels_path, hit->line,
                                        hit->name, val);
        else {
            hit->used = 1;
            s = list_add(l, e[i].name, hit->label);
        }
    }
    for (size_t i = 0; i < count && s == SF_OK; i++)
        if (!ll[i].used)
            s = sf_fail(SF_ERR_FORMAT, "%s:%d: no image %s in %s", labels_path, ll[i].line, ll[i].name, val);
    if (s == SF_OK && l->count == 0) s = sf_fail(SF_ERR_FORMAT, "%s holds no image (.jpg, .jpeg or .png)", val);
    free(e);
    free(ll);
    free(text);
    return s;
}

/* ---------------------------------------------------------------- the split */

/* The labels file's path: as given when absolute, else in the data folder. */
static sf_status labels_path(const char *dir, const char *given, char *out, size_t cap)
{
    if (given[0] == '/') {
        const int n = snprintf(out, cap, "%s", given);
        return n >= 0 && (size_t)n < cap ? SF_OK : sf_fail(SF_ERR_IO, "path '%s' is too long", given);
    }
    SF_TRY(sf_path_join(out, cap, dir, given));
    if (!sf_file_exists(out)) return sf_fail(SF_ERR_IO, "val_labels: no file %s", out);
    return SF_OK;
}

/* The split's images into l; the split's folder into root. */
static sf_status list_split(const sf_dataset_format *f, const char *dir, sf_split split, const sf_image_params *ip,
                            char *root, size_t cap, file_list *l)
{
    char train[4096];
    sf_dir_entry *classes = NULL, *val_classes = NULL;
    size_t n = 0, nv = 0;
    SF_TRY(sf_path_join(train, sizeof train, dir, "train"));
    sf_status s = class_folders(f, train, &classes, &n);
    if (s == SF_OK && (size_t)ip->classes != n)
        s = sf_fail(SF_ERR_INVALID,
                    "%s holds %zu class folders (%s ... %s), but the config has classes = %d: set [train] classes = "
                    "%zu (and the last layer's outputs)",
                    train, n, n ? classes[0].name : "none", n ? classes[n - 1].name : "none", ip->classes, n);
    if (s == SF_OK) s = sf_path_join(root, cap, dir, split == SF_SPLIT_TRAIN ? "train" : "val");
    if (s == SF_OK && split == SF_SPLIT_TRAIN) s = walk_classes(root, classes, n, l);
    if (s == SF_OK && split == SF_SPLIT_TEST) s = class_folders(f, root, &val_classes, &nv);
    const int flat = nv == 0, labelled = ip->val_labels && ip->val_labels[0];
    if (s == SF_OK && split == SF_SPLIT_TEST) {
        char path[4096];
        if (!flat && labelled)
            s = sf_fail(SF_ERR_INVALID, "%s has class folders, and val_labels = %s too: give one or the other", root,
                        ip->val_labels);
        else if (flat && !labelled)
            s = sf_fail(SF_ERR_INVALID,
                        "%s has no class folders: set [train] val_labels to the file naming each image's class (a "
                        "line \"name class\" per image), or sort its images into class folders as in train/",
                        root);
        else if (flat)
            s = labels_path(dir, ip->val_labels, path, sizeof path);
        if (s == SF_OK) s = flat ? flat_val(root, path, classes, n, l) : same_classes(train, classes, n, root,
                                                                                     val_classes, nv);
        if (s == SF_OK && !flat) s = walk_classes(root, val_classes, nv, l);
    }
    free(classes);
    free(val_classes);
    return s;
}

/* The list in one block (freed by sf_dataset_free with free()). */
static sf_image_files *pack(const file_list *l, const char *root, int32_t skip_bad)
{
    const size_t n = (size_t)l->count, head = (sizeof(sf_image_files) + 7) & ~(size_t)7, root_len = strlen(root) + 1;
    char *block = malloc(head + n * sizeof(int64_t) + n * sizeof(atomic_uchar) + l->bytes + root_len);
    if (!block) return NULL;
    sf_image_files *files = (sf_image_files *)(void *)block;
    int64_t *name_at = (int64_t *)(void *)(block + head);
    atomic_uchar *bad = (atomic_uchar *)(name_at + n);
    char *names = (char *)(bad + n), *copy = names + l->bytes;
    if (n) memcpy(name_at, l->name_at, n * sizeof *name_at);
    for (size_t i = 0; i < n; i++) atomic_init(&bad[i], 0);
    if (l->bytes) memcpy(names, l->names, l->bytes);
    memcpy(copy, root, root_len);
    *files = (sf_image_files){.root = copy, .names = names, .name_at = name_at, .bad = bad, .skip_bad = skip_bad};
    atomic_init(&files->bad_count, 0);
    return files;
}

sf_status sf_imagefolder_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                              sf_dataset **out)
{
    const sf_image_params *ip = &p->images;
    if (ip->size < 1 || ip->size > 4096 || ip->classes < 1 || ip->classes > SF_DATASET_MAX_CLASSES)
        return sf_fail(SF_ERR_INVALID, "image folder of %d classes at %d×%d: classes must be 1..%d, the size 1..4096",
                       ip->classes, ip->size, ip->size, SF_DATASET_MAX_CLASSES);
    char root[4096];
    file_list l = {0};
    sf_status s = list_split(f, dir, split, ip, root, sizeof root, &l);
    sf_dataset *ds = NULL;
    if (s == SF_OK)
        s = sf_dataset_create_of_type(SF_SAMPLES_FILES, l.count, f->channels, ip->size, ip->size, ip->classes, &ds);
    if (s == SF_OK && !(ds->files = pack(&l, root, ip->skip_bad)))
        s = sf_fail(SF_ERR_NOMEM, "out of memory for the list of %lld images", (long long)l.count);
    if (s == SF_OK) memcpy(ds->labels, l.labels, (size_t)l.count * sizeof *l.labels);
    list_free(&l);
    if (s != SF_OK) {
        sf_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SF_OK;
}

sf_status sf_image_path(const sf_dataset *ds, int64_t sample, char *out, size_t cap)
{
    return sf_path_join(out, cap, ds->files->root, ds->files->names + ds->files->name_at[sample]);
}

void sf_image_mark_bad(const sf_dataset *ds, int64_t sample)
{
    if (!atomic_exchange(&ds->files->bad[sample], 1)) atomic_fetch_add(&ds->files->bad_count, 1);
}

int sf_image_skips_bad(const sf_dataset *ds) { return ds->files && ds->files->skip_bad; }

int64_t sf_dataset_bad_images(const sf_dataset *ds)
{
    return ds && ds->files ? (int64_t)atomic_load(&ds->files->bad_count) : 0;
}
