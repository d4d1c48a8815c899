/* buffer.h — a growing byte buffer: what cairo's SVG stream and the report page are written into before they go to
 * a file in one atomic write. */
#ifndef SF_PLOT_BUFFER_H
#define SF_PLOT_BUFFER_H

#include <stddef.h>

typedef struct sf_buf {
    char *data; /* NUL-terminated after len bytes once anything was appended */
    size_t len, cap;
    int failed; /* an allocation failed: later appends do nothing */
} sf_buf;

void sf_buf_append(sf_buf *b, const void *bytes, size_t n);
void sf_buf_puts(sf_buf *b, const char *text);
void sf_buf_printf(sf_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Appends text with &, <, > and " written as HTML entities. */
void sf_buf_html(sf_buf *b, const char *text);
void sf_buf_free(sf_buf *b);

#endif
