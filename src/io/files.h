/* files.h — the file-system steps that never lose a user's files: whole-file reads (plain or gunzipped), atomic
 * writes, cleanup of temporaries a killed write left, exclusive locks, paths and directories. */
#ifndef SF_IO_FILES_H
#define SF_IO_FILES_H

#include "spikefuse_train.h"

#include <stddef.h>
#include <stdint.h>

/* The file helpers programs use too are public (include/spikefuse_train.h: sf_read_file, sf_file_exists, atomic
 * writes, sf_path_join, sf_dir_create); the rest follow. */

/* ---------------------------------------------------------------- reading
 * sf_read_file, gunzipping a gzip file: max_bytes and sf_memory_available bound the decompressed size (past the
 * latter SF_ERR_NOMEM saying so); a cut or corrupt gzip stream is SF_ERR_FORMAT. */
sf_status sf_read_file_gz(const char *path, size_t max_bytes, char **out, size_t *len);
/* A whole file into *buf (capacity *cap, grown with realloc as needed, kept for the next call), its size in *len;
 * more than max_bytes is SF_ERR_FORMAT. For reading many files without a malloc each. */
sf_status sf_read_file_into(const char *path, size_t max_bytes, uint8_t **buf, size_t *cap, size_t *len);
/* The first decompressed bytes of a gzip file (at most cap; fewer when it is shorter) into buf: enough to judge its
 * header before the whole of it is unpacked. */
sf_status sf_read_file_gz_head(const char *path, char *buf, size_t cap, size_t *len);
/* SF_ERR_IO saying what `path` is instead of a file ("X is a directory, not a file"), for a reader that found
 * something other than a regular file where its file belongs. */
sf_status sf_not_a_file(const char *path);
/* The memory this machine can give the process now (Linux: MemAvailable; else the physical memory), in bytes: the
 * bound of what a reader may unpack into memory. */
size_t sf_memory_available(void);

/* ---------------------------------------------------------------- atomic writing (sf_atomic_file) */

/* Deletes the temporaries "<name>.tmp.XXXXXX" that atomic writes killed midway left in `dir`. */
sf_status sf_remove_stale_temps(const char *dir);
/* Whether the directory entry `entry` is a temporary that an atomic write of a file named `name` made. */
int sf_is_temp_of(const char *entry, const char *name);
/* Copies the file `src` over `dst` atomically (a whole-file read, then an atomic write). */
sf_status sf_copy_file_atomic(const char *src, const char *dst);

/* ---------------------------------------------------------------- locks
 * An exclusive flock on `path` (created if missing; never stale: the kernel releases it with its holder), the
 * holder's pid written into it; a second process gets SF_ERR_STATE naming that pid. The file is never removed (two
 * processes could then lock two files). Without locks on the file system: SF_OK, *fd = -1, unguarded. */
sf_status sf_lock_acquire(const char *path, int *fd);
void sf_lock_release(int fd); /* -1: nothing */

/* ---------------------------------------------------------------- paths and directories */

/* SF_ERR_STATE ("DIR is not empty (it holds NAME)") when `dir` has an entry for which `ignore` (may be NULL) is 0. */
sf_status sf_dir_check_empty(const char *dir, int (*ignore)(const char *name));
/* The names of the regular files in `dir` ending in `suffix`, sorted bytewise, as one malloc'd array of *n
 * pointers followed by the strings (free it with one free()). A directory that cannot be read is SF_ERR_IO. */
sf_status sf_dir_list(const char *dir, const char *suffix, char ***names, size_t *n);
/* One entry of a directory listing. */
typedef enum sf_entry_kind { SF_ENTRY_OTHER = 0, SF_ENTRY_FILE, SF_ENTRY_DIR } sf_entry_kind;
typedef struct sf_dir_entry {
    const char *name;
    sf_entry_kind kind; /* of what a link points to (a dangling link: SF_ENTRY_OTHER) */
} sf_dir_entry;
/* Every entry of `dir` but hidden ones, sorted bytewise, as one malloc'd array of *n entries followed by their names
 * (one free()); kinds from the directory, stat where it does not say. Unreadable: SF_ERR_IO naming dir and reason. */
sf_status sf_dir_entries(const char *dir, sf_dir_entry **entries, size_t *n);
/* Whether two paths name the same existing directory ("run", "./run/" and a symlink to it are one). */
int sf_same_dir(const char *a, const char *b);

#endif
