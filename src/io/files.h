/* files.h — the file-system steps spikefuse needs to never lose a user's files: whole-file reads (plain or
 * gunzipped), atomic writes (temporary file, fsync, rename, fsync of the directory), the cleanup of temporaries a
 * killed write left, exclusive locks, and paths and directories. */
#ifndef SF_IO_FILES_H
#define SF_IO_FILES_H

#include "spikefuse_train.h"

#include <stddef.h>

/* The file helpers programs use too are public (include/spikefuse_train.h: sf_read_file, sf_file_exists, atomic
 * writes, sf_path_join, sf_dir_create); the rest follow. */

/* ---------------------------------------------------------------- reading
 * sf_read_file, gunzipping transparently when the file is gzip (zlib's gz* API reads plain files as they are);
 * max_bytes bounds the decompressed size, and a cut or corrupt gzip stream is SF_ERR_FORMAT. */
sf_status sf_read_file_gz(const char *path, size_t max_bytes, char **out, size_t *len);

/* ---------------------------------------------------------------- atomic writing (sf_atomic_file) */

/* Deletes the temporaries "<name>.tmp.XXXXXX" that atomic writes killed midway left in `dir`. */
sf_status sf_remove_stale_temps(const char *dir);
/* Whether the directory entry `entry` is a temporary that an atomic write of a file named `name` made. */
int sf_is_temp_of(const char *entry, const char *name);
/* Copies the file `src` over `dst` atomically (a whole-file read, then an atomic write). */
sf_status sf_copy_file_atomic(const char *src, const char *dst);

/* ---------------------------------------------------------------- locks
 * An exclusive lock (flock) on the file `path`, created if missing: at most one process holds it, and the kernel
 * releases it however the holder ends (kill -9 included), so a lock is never stale. The holder writes its pid into
 * the file; a second process is refused with SF_ERR_STATE and a message naming that pid. The file stays in place
 * after the release (removing it would let two processes lock two different files). On a file system that offers
 * no locks the call succeeds without one (*fd = -1): spikefuse still runs there, unguarded. */
sf_status sf_lock_acquire(const char *path, int *fd);
void sf_lock_release(int fd); /* -1: nothing */

/* ---------------------------------------------------------------- paths and directories */

/* SF_ERR_STATE ("DIR is not empty (it holds NAME)") when `dir` has an entry for which `ignore` (may be NULL) is 0. */
sf_status sf_dir_check_empty(const char *dir, int (*ignore)(const char *name));
/* Whether `path` is an existing directory (or a link to one). */
int sf_dir_exists(const char *path);
/* The names of the regular files in `dir` ending in `suffix`, sorted bytewise, as one malloc'd array of *n
 * pointers followed by the strings (free it with one free()). A directory that cannot be read is SF_ERR_IO. */
sf_status sf_dir_list(const char *dir, const char *suffix, char ***names, size_t *n);
/* Whether two paths name the same existing directory ("run", "./run/" and a symlink to it are one). */
int sf_same_dir(const char *a, const char *b);

#endif
