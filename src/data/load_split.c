/* load_split.c — one split of a dataset: through its format's loader, or for event data through the frame cache
 * where a cache folder is set, then checked against the format's shape and class count. */
#include "data/formats.h"

#include "core/error.h"

sf_status sf_dataset_load(sf_dataset_kind kind, const char *dir, sf_split split, const sf_data_params *p,
                          sf_dataset **out)
{
    *out = NULL;
    const sf_dataset_format *f = sf_dataset_format_of(kind);
    if (!f) return sf_fail(SF_ERR_INVALID, "unknown dataset kind %d", (int)kind);
    sf_data_params defaults;
    if (!p) {
        sf_data_default_params(&defaults);
        p = &defaults;
    }
    if (!dir || !*dir) dir = f->default_dir;
    const sf_event_params *e = &p->events;
    const int augmented =
        split == SF_SPLIT_TRAIN && (e->time_jitter_us || e->drop_event > 0.0f || e->shift || e->flip);
    /* the cache keeps labels in a byte */
    if (f->events && p->cache_dir && *p->cache_dir && !augmented && sf_format_classes(f, p) <= 256) {
        if (p->timesteps < 1 || p->timesteps > (1 << 20))
            return sf_fail(SF_ERR_INVALID, "frame cache: timesteps %lld is not in 1..2^20", (long long)p->timesteps);
        SF_TRY(sf_frame_cache_load(f, dir, split, p, out));
    } else {
        SF_TRY(f->load(f, dir, split, p, out));
    }
    sf_dataset *ds = *out;
    sf_status s = SF_OK;
    if (f->height && ds->type != SF_SAMPLES_FRAMES &&
        (ds->channels != f->channels || ds->height != f->height || ds->width != f->width))
        s = sf_fail(SF_ERR_FORMAT, "%s in %s holds %d×%d×%d images, expected %d×%d×%d", f->pretty, dir, ds->channels,
                    ds->height, ds->width, f->channels, f->height, f->width);
    else if (f->channels && ds->classes != sf_format_classes(f, p))
        s = sf_fail(SF_ERR_FORMAT, "%s in %s has %d classes, expected %d", f->pretty, dir, ds->classes,
                    sf_format_classes(f, p));
    else if (ds->count == 0)
        s = sf_fail(SF_ERR_FORMAT, "the %s split of %s in %s holds no samples%s",
                    split == SF_SPLIT_TRAIN ? "training" : "test", f->pretty, dir,
                    ds->skipped ? ": every one is empty (no events)" : "");
    if (s != SF_OK) {
        sf_dataset_free(ds);
        *out = NULL;
        return s;
    }
    sf_dataset_kind_stats(kind, ds->mean, ds->std);
    return SF_OK;
}
