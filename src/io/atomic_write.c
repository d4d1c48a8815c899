/* atomic_write.c — writing a file through a temporary beside it (fsync, rename, fsync of the directory), and
 * removing the temporaries such a write leaves when it is killed. */
#include "io/files.h"

#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temporaries are "<path>" TEMP_SUFFIX, whose X's mkstemp replaces with as many random characters. */
#define TEMP_MARK ".tmp."
#define TEMP_SUFFIX TEMP_MARK "XXXXXX"
#define TEMP_RANDOM (sizeof TEMP_SUFFIX - sizeof TEMP_MARK)

/* fsyncs the directory that holds `path`, so a rename inside it survives a power loss. */
static sf_status fsync_parent(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n == 0) n = 1; /* "/file" lives in "/" */
        if (n >= sizeof dir) return sf_fail(SF_ERR_IO, "path '%s' is too long", path);
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

/* Gives `path` the mode a newly created file gets (0666 less the umask). */
static sf_status set_default_mode(const char *path)
{
    mode_t mask = umask(0);
    umask(mask);
    if (chmod(path, 0666 & ~mask) != 0) return sf_fail(SF_ERR_IO, "chmod %s: %s", path, strerror(errno));
    return SF_OK;
}

sf_status sf_atomic_file_open(sf_atomic_file *f, const char *path)
{
    f->path = path;
    f->fd = -1;
    int n = snprintf(f->tmp, sizeof f->tmp, "%s" TEMP_SUFFIX, path);
    if (n < 0 || (size_t)n >= sizeof f->tmp) return f->status = sf_fail(SF_ERR_IO, "path '%s' is too long", path);
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0)
        return f->status = sf_fail(SF_ERR_IO, "cannot create a temporary file beside %s: %s", path, strerror(errno));
    return f->status = SF_OK;
}

sf_status sf_atomic_file_write(sf_atomic_file *f, const void *data, size_t len)
{
    const char *p = data;
    while (len && f->status == SF_OK) {
        ssize_t k = write(f->fd, p, len);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            f->status = sf_fail(SF_ERR_IO, "writing %s: %s", f->tmp, strerror(errno));
        } else {
            p += k;
            len -= (size_t)k;
        }
    }
    return f->status;
}

sf_status sf_atomic_file_commit(sf_atomic_file *f)
{
    if (f->fd < 0) return f->status;
    sf_status s = f->status;
    if (s == SF_OK && fsync(f->fd) != 0) s = sf_fail(SF_ERR_IO, "fsync %s: %s", f->tmp, strerror(errno));
    if (close(f->fd) != 0 && s == SF_OK) s = sf_fail(SF_ERR_IO, "close %s: %s", f->tmp, strerror(errno));
    f->fd = -1;
    if (s == SF_OK) s = set_default_mode(f->tmp);
    if (s == SF_OK && rename(f->tmp, f->path) != 0)
        s = sf_fail(SF_ERR_IO, "rename %s to %s: %s", f->tmp, f->path, strerror(errno));
    if (s != SF_OK) {
        unlink(f->tmp);
        return f->status = s;
    }
    return f->status = fsync_parent(f->path);
}

sf_status sf_write_file_atomic(const char *path, const void *data, size_t len)
{
    sf_atomic_file f;
    SF_TRY(sf_atomic_file_open(&f, path));
    sf_atomic_file_write(&f, data, len);
    return sf_atomic_file_commit(&f);
}

/* The characters mkstemp put in place of the X's: as many, none of them a dot. */
static int is_temp_random(const char *random)
{
    return strlen(random) == TEMP_RANDOM && !strchr(random, '.');
}

/* A name that TEMP_SUFFIX makes: "<name>.tmp." and the random characters. */
static int is_stale_temp(const char *name)
{
    const char *t = strstr(name, TEMP_MARK);
    return t && t != name && is_temp_random(t + strlen(TEMP_MARK));
}

int sf_is_temp_of(const char *entry, const char *name)
{
    const size_t n = strlen(name), m = strlen(TEMP_MARK);
    return strncmp(entry, name, n) == 0 && strncmp(entry + n, TEMP_MARK, m) == 0 && is_temp_random(entry + n + m);
}

sf_status sf_copy_file_atomic(const char *src, const char *dst)
{
    char *bytes = NULL;
    size_t len = 0;
    SF_TRY(sf_read_file(src, SIZE_MAX, &bytes, &len));
    sf_status s = sf_write_file_atomic(dst, bytes, len);
    free(bytes);
    return s;
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
