/* events.c — event datasets: creating one for a sensor, and appending samples with every event checked (on the
 * sensor, times in order), the one place an event dataset is built from what a reader decoded. */
#include "data/formats.h"

#include "core/error.h"
#include "io/interrupt.h"

#include <stdlib.h>
#include <string.h>

sf_status sf_events_create(int32_t polarities, int32_t height, int32_t width, int32_t classes, sf_dataset **out)
{
    *out = NULL;
    if (polarities > 255 || height > 256 || width > 65536)
        return sf_fail(SF_ERR_INVALID, "event sensor %d×%d×%d: at most 255 polarities, 256 rows, 65536 columns",
                       polarities, height, width);
    sf_dataset *ds = NULL;
    SF_TRY(sf_dataset_create_of_type(SF_SAMPLES_EVENTS, 0, polarities, height, width, classes, &ds));
    ds->offsets = calloc(1, sizeof *ds->offsets);
    ds->offsets_cap = ds->labels_cap = 1;
    if (!ds->offsets) {
        sf_dataset_free(ds);
        return sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    *out = ds;
    return SF_OK;
}

/* Room for `need` elements of `size` bytes in *buf (capacity *cap), growing by half again. */
static sf_status reserve(void **buf, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return SF_OK;
    size_t grown = *cap + *cap / 2 > need ? *cap + *cap / 2 : need;
    if (grown > SIZE_MAX / 2 / size) return sf_fail(SF_ERR_NOMEM, "event dataset too large (%zu elements)", need);
    void *b = realloc(*buf, grown * size);
    if (!b) return sf_fail(SF_ERR_NOMEM, "out of memory for %zu events or samples", grown);
    *buf = b;
    *cap = grown;
    return SF_OK;
}

static sf_status check_events(const sf_dataset *ds, const sf_event *ev, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const sf_event *e = &ev[i];
        if (e->x >= ds->width || e->y >= ds->height || e->p >= ds->channels)
            return sf_fail(SF_ERR_FORMAT,
                           "event %lld at x %d, y %d, polarity %d is outside the sensor (%d×%d, %d polarit%s)",
                           (long long)i, e->x, e->y, e->p, ds->width, ds->height, ds->channels,
                           ds->channels == 1 ? "y" : "ies");
        if (i > 0 && e->t < ev[i - 1].t)
            return sf_fail(SF_ERR_FORMAT, "event %lld goes back in time (%lu µs after %lu µs)", (long long)i,
                           (unsigned long)e->t, (unsigned long)ev[i - 1].t);
    }
    return SF_OK;
}

sf_status sf_events_add_sample(sf_dataset *ds, const sf_event *ev, int64_t n, int32_t label)
{
    SF_TRY(sf_interrupt_check()); /* every event reader adds its samples here: a request to stop is heard */
    if (ds->type != SF_SAMPLES_EVENTS) return sf_fail(SF_ERR_INVALID, "adding events to a dataset of another type");
    if (label < 0 || label >= ds->classes)
        return sf_fail(SF_ERR_FORMAT, "label %d is out of range (expected 0..%d)", label, ds->classes - 1);
    if (n < 0) return sf_fail(SF_ERR_INVALID, "a sample of %lld events", (long long)n);
    SF_TRY(check_events(ds, ev, n));
    if (n == 0) {
        ds->skipped++;
        return SF_OK;
    }
    const size_t have = (size_t)ds->offsets[ds->count], samples = (size_t)ds->count + 1;
    if ((size_t)n > SIZE_MAX / 2 - have) return sf_fail(SF_ERR_NOMEM, "event dataset too large");
    SF_TRY(reserve((void **)&ds->events, &ds->events_cap, have + (size_t)n, sizeof *ds->events));
    SF_TRY(reserve((void **)&ds->offsets, &ds->offsets_cap, samples + 1, sizeof *ds->offsets));
    SF_TRY(reserve((void **)&ds->labels, &ds->labels_cap, samples, sizeof *ds->labels));
    sf_event *dst = ds->events + have;
    for (int64_t i = 0; i < n; i++) {
        dst[i] = ev[i];
        dst[i].t = ev[i].t - ev[0].t;
    }
    ds->labels[ds->count] = label;
    ds->count++;
    ds->offsets[ds->count] = (int64_t)(have + (size_t)n);
    return SF_OK;
}
