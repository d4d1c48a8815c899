/* buffer.c — the growing byte buffer of buffer.h. */
#include "plot/buffer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(sf_buf *b, size_t extra)
{
    if (b->failed) return 0;
    if (b->len + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void sf_buf_append(sf_buf *b, const void *bytes, size_t n)
{
    if (!reserve(b, n)) return;
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = 0;
}

void sf_buf_puts(sf_buf *b, const char *text) { sf_buf_append(b, text, strlen(text)); }

void sf_buf_printf(sf_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sf_buf_html(sf_buf *b, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '&': sf_buf_puts(b, "&amp;"); break;
        case '<': sf_buf_puts(b, "&lt;"); break;
        case '>': sf_buf_puts(b, "&gt;"); break;
        case '"': sf_buf_puts(b, "&quot;"); break;
        default: sf_buf_append(b, p, 1);
        }
    }
}

void sf_buf_free(sf_buf *b)
{
    free(b->data);
    *b = (sf_buf){0};
}
