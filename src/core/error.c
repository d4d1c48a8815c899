/* error.c — thread-local last-error message and status names. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *sf_last_error(void) { return last_error; }

sf_status sf_fail(sf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

sf_status sf_fail_context(sf_status status, const char *fmt, ...)
{
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t n = strlen(prefix);
    if (n >= sizeof last_error) n = sizeof last_error - 1;
    memcpy(last_error, prefix, n);
    size_t m = strlen(old);
    if (m > sizeof last_error - 1 - n) m = sizeof last_error - 1 - n;
    memcpy(last_error + n, old, m);
    last_error[n + m] = 0;
    return status;
}

const char *sf_status_str(sf_status s)
{
    switch (s) {
    case SF_OK: return "ok";
    case SF_ERR_INVALID: return "invalid argument";
    case SF_ERR_NOMEM: return "out of memory";
    case SF_ERR_IO: return "i/o error";
    case SF_ERR_FORMAT: return "malformed data";
    case SF_ERR_UNSUPPORTED: return "unsupported";
    case SF_ERR_DEVICE: return "device error";
    case SF_ERR_NUMERIC: return "non-finite value";
    case SF_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}
