/* fsutil.c — run directories, durable renames, whole-file reads and atomic small-file writes. */
#include "train/fsutil.h"

#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

sf_status sf_path_join(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return sf_fail(SF_ERR_INVALID, "path '%s/%s' is too long", dir, name);
    return SF_OK;
}

static int dir_is_empty(const char *dir, int *empty)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    *empty = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            *empty = 0;
            break;
        }
    closedir(d);
    return 0;
}

static sf_status make_dirs(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) return sf_fail(SF_ERR_INVALID, "bad directory name '%s'", dir);
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

sf_status sf_dir_prepare(const char *dir, int must_be_empty)
{
    SF_TRY(make_dirs(dir));
    if (!must_be_empty) return SF_OK;
    int empty = 0;
    if (dir_is_empty(dir, &empty) != 0) return sf_fail(SF_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    if (!empty)
        return sf_fail(SF_ERR_STATE,
                       "%s is not empty: refusing to write a new run over it (choose another --out, or continue "
                       "that run with --resume %s)",
                       dir, dir);
    return SF_OK;
}

int sf_same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && S_ISDIR(sa.st_mode) && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

sf_status sf_fsync_parent(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1; /* "/file" lives in "/" */
        if (n >= sizeof dir) return sf_fail(SF_ERR_INVALID, "path '%s' is too long", path);
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return sf_fail(SF_ERR_IO, "cannot open directory %s: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    /* Some file systems cannot fsync a directory (EINVAL); the rename is then as durable as they allow. */
    if (rc != 0 && err != EINVAL) return sf_fail(SF_ERR_IO, "fsync of directory %s: %s", dir, strerror(err));
    return SF_OK;
}

sf_status sf_set_default_mode(const char *path)
{
    mode_t mask = umask(0);
    umask(mask);
    if (chmod(path, 0666 & ~mask) != 0) return sf_fail(SF_ERR_IO, "chmod %s: %s", path, strerror(errno));
    return SF_OK;
}

sf_status sf_write_file_atomic(const char *path, const void *data, size_t len)
{
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof tmp) return sf_fail(SF_ERR_INVALID, "path '%s' is too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0) return sf_fail(SF_ERR_IO, "cannot create a temporary file beside %s: %s", path, strerror(errno));
    sf_status s = SF_OK;
    const char *p = data;
    while (len && s == SF_OK) {
        ssize_t k = write(fd, p, len);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) s = sf_fail(SF_ERR_IO, "writing %s: %s", tmp, strerror(errno));
        else {
            p += k;
            len -= (size_t)k;
        }
    }
    if (s == SF_OK && fsync(fd) != 0) s = sf_fail(SF_ERR_IO, "fsync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && s == SF_OK) s = sf_fail(SF_ERR_IO, "close %s: %s", tmp, strerror(errno));
    if (s == SF_OK) s = sf_set_default_mode(tmp);
    if (s == SF_OK && rename(tmp, path) != 0) s = sf_fail(SF_ERR_IO, "rename %s to %s: %s", tmp, path, strerror(errno));
    if (s != SF_OK) {
        unlink(tmp);
        return s;
    }
    return sf_fsync_parent(path);
}

sf_status sf_read_file(const char *path, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return sf_fail(SF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int failed = ferror(f);
    fclose(f);
    if (!buf) return sf_fail(SF_ERR_NOMEM, "out of memory reading %s", path);
    if (failed) {
        free(buf);
        return sf_fail(SF_ERR_IO, "error reading %s", path);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return SF_OK;
}

/* A name the atomic writers here and in io/safetensors.c leave behind when killed: "<name>.tmp.XXXXXX". */
static int is_stale_temp(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    return t && t != name && strlen(t + 5) == 6 && !strchr(t + 5, '.');
}

sf_status sf_remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return sf_fail(SF_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    sf_status s = SF_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && s == SF_OK) {
        if (!is_stale_temp(e->d_name)) continue;
        char path[4096];
        s = sf_path_join(path, sizeof path, dir, e->d_name);
        if (s == SF_OK && unlink(path) != 0 && errno != ENOENT)
            s = sf_fail(SF_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    }
    closedir(d);
    return s;
}
