/* dirs.c — paths and directories: joining, creating with parents, listing, checking emptiness and identity. */
#define _DEFAULT_SOURCE /* readdir's d_type and its DT_ values */
#include "io/files.h"

#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

sf_status sf_path_join(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return sf_fail(SF_ERR_IO, "path '%s/%s' is too long", dir, name);
    return SF_OK;
}

sf_status sf_dir_create(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) return sf_fail(SF_ERR_IO, "bad directory name '%s'", dir);
    memcpy(path, dir, n + 1);
    /* Create each prefix in turn; EEXIST is fine as long as the last one is a directory (checked below). */
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != 0) continue;
        char saved = path[i];
        path[i] = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return sf_fail(SF_ERR_IO, "cannot create directory %s: %s", path, strerror(errno));
        path[i] = saved;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sf_fail(SF_ERR_IO, "%s exists and is not a directory", dir);
    return SF_OK;
}

sf_status sf_dir_check_empty(const char *dir, int (*ignore)(const char *name))
{
    DIR *d = opendir(dir);
    if (!d) return sf_fail(SF_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    const char *found = NULL;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && !(ignore && ignore(e->d_name)))
            found = e->d_name;
    sf_status s = found ? sf_fail(SF_ERR_STATE, "%s is not empty (it holds %s)", dir, found) : SF_OK;
    closedir(d);
    return s;
}

int sf_dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_suffix(const char *name, const char *suffix)
{
    const size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

sf_status sf_dir_list(const char *dir, const char *suffix, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    /* Two passes over the directory: the count and bytes first, then the names into one block. */
    DIR *d = opendir(dir);
    if (!d) return sf_fail(SF_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    size_t count = 0, bytes = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && has_suffix(e->d_name, suffix)) {
            count++;
            bytes += strlen(e->d_name) + 1;
        }
    char **list = malloc((count + 1) * sizeof *list + bytes);
    if (!list) {
        closedir(d);
        return sf_fail(SF_ERR_NOMEM, "out of memory listing %s", dir);
    }
    char *text = (char *)(list + count + 1);
    size_t got = 0, used = 0;
    rewinddir(d);
    /* Entries that appeared since the first pass are left out rather than overflow the block. */
    while ((e = readdir(d)) != NULL && got < count) {
        const size_t len = strlen(e->d_name) + 1;
        if (e->d_name[0] == '.' || !has_suffix(e->d_name, suffix) || used + len > bytes) continue;
        char path[4096];
        struct stat st;
        if (sf_path_join(path, sizeof path, dir, e->d_name) != SF_OK || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        memcpy(text + used, e->d_name, len);
        list[got++] = text + used;
        used += len;
    }
    closedir(d);
    qsort(list, got, sizeof *list, compare_names);
    *names = list;
    *n = got;
    return SF_OK;
}

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const sf_dir_entry *)a)->name, ((const sf_dir_entry *)b)->name);
}

static sf_entry_kind kind_of(const char *dir, const struct dirent *e)
{
    if (e->d_type == DT_REG) return SF_ENTRY_FILE;
    if (e->d_type == DT_DIR) return SF_ENTRY_DIR;
    if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) return SF_ENTRY_OTHER;
    char path[4096];
    struct stat st;
    if (sf_path_join(path, sizeof path, dir, e->d_name) != SF_OK || stat(path, &st) != 0) return SF_ENTRY_OTHER;
    return S_ISREG(st.st_mode) ? SF_ENTRY_FILE : S_ISDIR(st.st_mode) ? SF_ENTRY_DIR : SF_ENTRY_OTHER;
}

sf_status sf_dir_entries(const char *dir, sf_dir_entry **entries, size_t *n)
{
    *entries = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return sf_fail(SF_ERR_IO, "cannot list the folder %s: %s", dir, strerror(errno));
    /* One pass: the kinds and names into growing arrays (names as offsets: their block moves as it grows). */
    size_t count = 0, cap = 0, bytes = 0, bytes_cap = 0;
    struct { size_t at; sf_entry_kind kind; } *found = NULL;
    char *names = NULL;
    sf_status s = SF_OK;
    struct dirent *e;
    for (errno = 0; s == SF_OK && (e = readdir(d)) != NULL; errno = 0) {
        if (e->d_name[0] == '.') continue;
        const size_t len = strlen(e->d_name) + 1;
        if (count == cap) {
            cap = cap ? 2 * cap : 64;
            void *grown = realloc(found, cap * sizeof *found);
            if (!grown) s = sf_fail(SF_ERR_NOMEM, "out of memory listing %s", dir);
            else found = grown;
        }
        if (s == SF_OK && bytes + len > bytes_cap) {
            bytes_cap = 2 * (bytes + len);
            char *grown = realloc(names, bytes_cap);
            if (!grown) s = sf_fail(SF_ERR_NOMEM, "out of memory listing %s", dir);
            else names = grown;
        }
        if (s != SF_OK) break;
        memcpy(names + bytes, e->d_name, len);
        found[count].at = bytes;
        found[count++].kind = kind_of(dir, e);
        bytes += len;
    }
    if (s == SF_OK && errno != 0) s = sf_fail(SF_ERR_IO, "cannot list the folder %s: %s", dir, strerror(errno));
    closedir(d);
    sf_dir_entry *list = s == SF_OK ? malloc((count + 1) * sizeof *list + bytes) : NULL;
    if (s == SF_OK && !list) s = sf_fail(SF_ERR_NOMEM, "out of memory listing %s", dir);
    if (s == SF_OK) {
        char *text = (char *)(list + count + 1);
        if (bytes) memcpy(text, names, bytes);
        for (size_t i = 0; i < count; i++) list[i] = (sf_dir_entry){text + found[i].at, found[i].kind};
        qsort(list, count, sizeof *list, compare_entries);
        *entries = list;
        *n = count;
    }
    free(found);
    free(names);
    return s;
}

int sf_same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && S_ISDIR(sa.st_mode) && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* The identity of the directory holding `path` (its parent, or "." for a bare name) and the name in it. */
static int parent_of(const char *path, struct stat *dir, const char **name)
{
    const char *slash = strrchr(path, '/');
    char parent[4096];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == path) snprintf(parent, sizeof parent, "/");
    else if ((size_t)(slash - path) < sizeof parent) snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    else return 0;
    *name = slash ? slash + 1 : path;
    return stat(parent, dir) == 0 && S_ISDIR(dir->st_mode);
}

int sf_same_path(const char *a, const char *b)
{
    struct stat sa, sb;
    if (strcmp(a, b) == 0) return 1;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    const char *na, *nb;
    return parent_of(a, &sa, &na) && parent_of(b, &sb, &nb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
           strcmp(na, nb) == 0;
}
