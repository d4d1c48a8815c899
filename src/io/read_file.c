/* read_file.c — reading a whole file into memory, as it is or gunzipped, in one loop whose buffer grows with the
 * bytes actually read. */
#include "io/files.h"

#include "core/error.h"
#include "io/interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FIRST_CAPACITY ((size_t)1 << 16)
/* Bytes read per call: gzread takes an unsigned count, and a request to stop is heard between calls. */
#define MAX_CHUNK ((size_t)1 << 26)

/* An open file: read as it is (plain) or through zlib (gz). */
typedef struct source {
    FILE *plain;
    gzFile gz;
    const char *path;
} source;

/* Up to `want` bytes into dst; *got is 0 at the end of the input. */
static sf_status read_chunk(source *src, char *dst, size_t want, size_t *got)
{
    *got = 0;
    if (src->plain) {
        *got = fread(dst, 1, want, src->plain);
        if (*got < want && ferror(src->plain)) return sf_fail(SF_ERR_IO, "reading %s: %s", src->path, strerror(errno));
        return SF_OK;
    }
    int n = gzread(src->gz, dst, (unsigned)want);
    int code;
    const char *msg = gzerror(src->gz, &code);
    if (n < 0) return sf_fail(SF_ERR_FORMAT, "reading %s: %s", src->path, code == Z_ERRNO ? strerror(errno) : msg);
    /* A gzip stream cut short ends like a whole one, with an error recorded. */
    if (n == 0 && code != Z_OK)
        return sf_fail(SF_ERR_FORMAT, "reading %s: %s (truncated or corrupt gzip)", src->path, msg);
    *got = (size_t)n;
    return SF_OK;
}

/* Reads to the end of input. `capacity` is the first buffer size (a regular file's size is a good guess); the
 * buffer doubles from there, never beyond what max_bytes allows: one byte more (to see that the file is larger),
 * and the NUL. `limit_why` says, in the refusal, what set max_bytes when it was not the caller. */
static sf_status read_all(source *src, size_t max_bytes, const char *limit_why, size_t capacity, char **out,
                          size_t *len)
{
    const size_t limit = max_bytes < SIZE_MAX / 4 ? max_bytes + 2 : SIZE_MAX / 2;
    size_t cap = capacity < limit ? capacity : limit, n = 0;
    char *buf = malloc(cap);
    if (!buf) return sf_fail(SF_ERR_NOMEM, "out of memory reading %s", src->path);
    for (;;) {
        if (n > max_bytes) {
            free(buf);
            return sf_fail(limit_why ? SF_ERR_NOMEM : SF_ERR_FORMAT, "%s is larger than %zu bytes%s%s", src->path,
                           max_bytes, src->gz ? " (decompressed)" : "", limit_why ? limit_why : "");
        }
        if (n + 1 == cap) {
            size_t grown = cap < limit / 2 ? 2 * cap : limit;
            char *bigger = realloc(buf, grown);
            if (!bigger) {
                free(buf);
                return sf_fail(SF_ERR_NOMEM, "out of memory reading %s (%zu bytes)", src->path, grown);
            }
            buf = bigger;
            cap = grown;
        }
        size_t got = 0, want = cap - 1 - n < MAX_CHUNK ? cap - 1 - n : MAX_CHUNK;
        sf_status s = sf_interrupt_check();
        if (s == SF_OK) s = read_chunk(src, buf + n, want, &got);
        if (s != SF_OK) {
            free(buf);
            return s;
        }
        if (got == 0) break;
        n += got;
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return SF_OK;
}

/* Opens `path` for reading. A directory is refused by name: read() on one fails with a bare EISDIR, and some readers
 * would take its st_size or ftell for a length. */
static sf_status open_readable(const char *path, int *fd, struct stat *st)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0) return sf_fail(SF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    int err = fstat(*fd, st) != 0 ? errno : 0;
    if (err || S_ISDIR(st->st_mode)) {
        close(*fd);
        *fd = -1;
        return err ? sf_fail(SF_ERR_IO, "cannot stat %s: %s", path, strerror(err))
                   : sf_fail(SF_ERR_IO, "%s is a directory, not a file", path);
    }
    return SF_OK;
}

sf_status sf_read_file(const char *path, size_t max_bytes, char **out, size_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    int fd;
    struct stat st;
    SF_TRY(open_readable(path, &fd, &st));
    source src = {.plain = fdopen(fd, "rb"), .path = path};
    if (!src.plain) {
        close(fd);
        return sf_fail(SF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    }
    size_t capacity = FIRST_CAPACITY;
    if (S_ISREG(st.st_mode) && st.st_size > 0)
        capacity = (uint64_t)st.st_size < SIZE_MAX / 4 ? (size_t)st.st_size + 2 : SIZE_MAX / 4;
    sf_status s = read_all(&src, max_bytes, NULL, capacity, out, len);
    fclose(src.plain);
    return s;
}

/* `path` opened through zlib (gzip, or a plain file as it is). */
static sf_status open_gz(const char *path, source *src)
{
    int fd;
    struct stat st;
    SF_TRY(open_readable(path, &fd, &st));
    errno = 0;
    *src = (source){.gz = gzdopen(fd, "rb"), .path = path};
    if (src->gz) return SF_OK;
    close(fd);
    return sf_fail(SF_ERR_IO, "cannot open %s: %s", path, errno ? strerror(errno) : "zlib could not allocate");
}

sf_status sf_read_file_gz(const char *path, size_t max_bytes, char **out, size_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    source src;
    SF_TRY(open_gz(path, &src));
    /* what a gzip stream unpacks to is bounded by what this machine can hold, whatever the caller allows */
    const size_t room = sf_memory_available();
    sf_status s = read_all(&src, room < max_bytes ? room : max_bytes,
                           room < max_bytes ? ": the memory this machine has available" : NULL, FIRST_CAPACITY, out, len);
    gzclose(src.gz);
    return s;
}

sf_status sf_read_file_gz_head(const char *path, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    source src;
    SF_TRY(open_gz(path, &src));
    sf_status s = SF_OK;
    size_t got = 1;
    while (s == SF_OK && got > 0 && *len < cap) {
        s = read_chunk(&src, buf + *len, cap - *len, &got);
        *len += got;
    }
    gzclose(src.gz);
    return s;
}

sf_status sf_read_file_into(const char *path, size_t max_bytes, uint8_t **buf, size_t *cap, size_t *len)
{
    *len = 0;
    int fd;
    struct stat st;
    SF_TRY(open_readable(path, &fd, &st));
    /* Room for the size the file has now and one byte more, to see it end (or grow) without a second read. */
    size_t want = S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size < max_bytes ? (size_t)st.st_size + 1
                                                                                             : FIRST_CAPACITY;
    sf_status s = SF_OK;
    size_t n = 0;
    for (;;) {
        if (n > max_bytes) {
            s = sf_fail(SF_ERR_FORMAT, "%s is larger than %zu bytes", path, max_bytes);
            break;
        }
        if (n == *cap || want > *cap) {
            const size_t grown = want > *cap ? want : 2 * *cap;
            uint8_t *bigger = realloc(*buf, grown);
            if (!bigger) {
                s = sf_fail(SF_ERR_NOMEM, "out of memory reading %s (%zu bytes)", path, grown);
                break;
            }
            *buf = bigger;
            *cap = grown;
        }
        const ssize_t got = read(fd, *buf + n, *cap - n < MAX_CHUNK ? *cap - n : MAX_CHUNK);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            s = sf_fail(SF_ERR_IO, "reading %s: %s", path, strerror(errno));
            break;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (s == SF_OK) *len = n;
    return s;
}

int sf_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int sf_path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

sf_status sf_not_a_file(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return sf_fail(SF_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    return sf_fail(SF_ERR_IO, "%s is %s, not a file", path, S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
}

size_t sf_memory_available(void)
{
    /* MemAvailable: what the kernel can give without swapping (Linux 3.14 on); else the physical memory */
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    if (f) fclose(f);
    if (kib > 0) return kib < SIZE_MAX / 1024 ? (size_t)kib * 1024 : SIZE_MAX;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 && (unsigned long)pages < SIZE_MAX / (unsigned long)page ? (size_t)pages * (size_t)page
                                                                                           : SIZE_MAX;
}
