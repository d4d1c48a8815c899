/* gzfile.c — reading a whole file into memory, gunzipping it when it is gzip (zlib reads plain files as they are). */
#include "data/dataset.h"

#include "core/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

sf_status sf_read_file_gz(const char *path, size_t max_bytes, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return sf_fail(SF_ERR_IO, "cannot open %s: %s", path, errno ? strerror(errno) : "zlib could not allocate");
    size_t cap = 1 << 20, n = 0;
    uint8_t *data = malloc(cap);
    sf_status s = data ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory reading %s", path);
    /* The buffer grows with what was actually read: nothing in the file decides an allocation. */
    while (s == SF_OK) {
        if (n == cap) {
            if (cap >= max_bytes) {
                s = sf_fail(SF_ERR_FORMAT, "%s is larger than %zu bytes (decompressed): not a dataset file", path,
                            max_bytes);
                break;
            }
            size_t ncap = cap * 2 < max_bytes ? cap * 2 : max_bytes;
            uint8_t *p = realloc(data, ncap);
            if (!p) {
                s = sf_fail(SF_ERR_NOMEM, "out of memory reading %s (%zu bytes)", path, ncap);
                break;
            }
            data = p;
            cap = ncap;
        }
        size_t want = cap - n < (1u << 30) ? cap - n : (1u << 30);
        int got = gzread(f, data + n, (unsigned)want);
        if (got < 0) {
            int code;
            const char *msg = gzerror(f, &code);
            s = sf_fail(SF_ERR_FORMAT, "reading %s: %s", path, code == Z_ERRNO ? strerror(errno) : msg);
            break;
        }
        if (got == 0) {
            /* End of input; a gzip stream cut short ends here too, with an error recorded. */
            int code;
            const char *msg = gzerror(f, &code);
            if (code != Z_OK)
                s = sf_fail(SF_ERR_FORMAT, "reading %s: %s (truncated or corrupt gzip)", path, msg);
            break;
        }
        n += (size_t)got;
    }
    gzclose(f);
    if (s != SF_OK) {
        free(data);
        return s;
    }
    *buf = data;
    *len = n;
    return SF_OK;
}
