/* spans.c — the profile's record of timed exchanges (sf_dist_profile), which the transports add to as they read
 * their timers: apart from dist.c, which starts the transports, so that they depend on it and not the reverse. */
#include "distributed/dist_internal.h"

#include "core/error.h"

#include <stdlib.h>

sf_status sf_dist_add_span(sf_dist *d, int what, double at_ms, double ms)
{
    d->prof_ms[what] += ms;
    d->prof_calls[what]++;
    if (d->n_spans == d->cap_spans) {
        int64_t cap = d->cap_spans ? 2 * d->cap_spans : 64;
        sf_dist_span *more = realloc(d->spans, sizeof *more * (size_t)cap);
        if (!more) return sf_fail(SF_ERR_NOMEM, "profiling: out of memory for %lld spans", (long long)cap);
        d->spans = more;
        d->cap_spans = cap;
    }
    d->spans[d->n_spans++] = (sf_dist_span){(sf_dist_timer)what, at_ms, ms};
    return SF_OK;
}
