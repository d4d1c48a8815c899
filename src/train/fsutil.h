/* fsutil.h — the file-system steps the trainer needs to never lose a user's files: run directories that are
 * created fresh (or explicitly resumed), durable renames, whole-file reads and atomic small-file writes. */
#ifndef SF_TRAIN_FSUTIL_H
#define SF_TRAIN_FSUTIL_H

#include "spikefuse.h"

#include <stddef.h>

/* Creates `dir` and its missing parents. With must_be_empty, an existing directory that holds any entry is
 * refused (SF_ERR_STATE) so a run never writes over earlier results. */
sf_status sf_dir_prepare(const char *dir, int must_be_empty);
/* Whether two paths name the same existing directory ("run", "./run/" and a symlink to it are one). */
int sf_same_dir(const char *a, const char *b);
/* fsyncs the directory that holds `path`, so a rename inside it survives a power loss. */
sf_status sf_fsync_parent(const char *path);
/* Writes `len` bytes to `path` through a temporary file in the same directory, fsync, rename, fsync of the
 * directory: readers see the old content or the new, never a mix. */
sf_status sf_write_file_atomic(const char *path, const void *data, size_t len);
/* Gives `path` the mode a newly created file gets (0666 less the umask): mkstemp's temporaries are 0600. */
sf_status sf_set_default_mode(const char *path);
/* Reads a whole file into a NUL-terminated malloc'd buffer (*len, optional, gets its size without the NUL). */
sf_status sf_read_file(const char *path, char **out, size_t *len);
/* Deletes leftover temporary files "<name>.tmp.XXXXXX" (from a save killed midway) in `dir`. */
sf_status sf_remove_stale_temps(const char *dir);
/* Joins dir and name into buf ("dir/name"); SF_ERR_INVALID if it does not fit. */
sf_status sf_path_join(char *buf, size_t cap, const char *dir, const char *name);

#endif
