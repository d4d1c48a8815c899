/* error.h — recording failures: every failing library call sets a thread-local message and returns a status. */
#ifndef SF_CORE_ERROR_H
#define SF_CORE_ERROR_H

#include "spikefuse.h"

#if defined(__GNUC__)
#define SF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SF_PRINTF(a, b)
#endif

/* Records the message and returns `status`, so callers write `return sf_fail(SF_ERR_INVALID, "...", ...);`. */
sf_status sf_fail(sf_status status, const char *fmt, ...) SF_PRINTF(2, 3);
/* Prefixes the current message with context ("loading x.safetensors: ") and returns `status` unchanged. */
sf_status sf_fail_context(sf_status status, const char *fmt, ...) SF_PRINTF(2, 3);

/* Propagates a failure from an expression returning sf_status. */
#define SF_TRY(expr)                                                                                                \
    do {                                                                                                            \
        sf_status sf_try_status_ = (expr);                                                                          \
        if (sf_try_status_ != SF_OK) return sf_try_status_;                                                         \
    } while (0)

#endif
