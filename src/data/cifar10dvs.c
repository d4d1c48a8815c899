/* cifar10dvs.c — CIFAR10-DVS (Li et al. 2017): CIFAR-10 images shown to a DVS128 (128×128), 1000 recordings per
 * class in <class>/cifar10_<class>_<n>.aedat, AEDAT 2.0 (formats.h, sf_aedat2_parse, says how its bits map). */
#include "data/formats.h"

#include "core/error.h"

#include <string.h>

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

sf_status sf_aedat2_parse(const uint8_t *buf, size_t len, sf_event *out, int64_t *n)
{
    static const char magic[] = "#!AER-DAT2.0";
    *n = 0;
    if (len < sizeof magic - 1 || memcmp(buf, magic, sizeof magic - 1) != 0)
        return sf_fail(SF_ERR_FORMAT, "not an AEDAT 2.0 file (it does not start with %s)", magic);
    size_t pos = 0;
    while (pos < len && buf[pos] == '#') {
        const uint8_t *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl) return sf_fail(SF_ERR_FORMAT, "the header's last line does not end (truncated file?)");
        pos = (size_t)(nl - buf) + 1;
    }
    if ((len - pos) % SF_AEDAT2_EVENT_BYTES)
        return sf_fail(SF_ERR_FORMAT, "%zu bytes of events is not a whole number of 8-byte events (truncated file?)",
                       len - pos);
    const size_t count = (len - pos) / SF_AEDAT2_EVENT_BYTES;
    uint64_t wraps = 0, first = 0;
    uint32_t last = 0;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *e = buf + pos + i * SF_AEDAT2_EVENT_BYTES;
        const uint32_t address = be32(e), ts = be32(e + 4);
        if (i > 0 && ts < last) {
            if (last - ts < (1u << 31))
                return sf_fail(SF_ERR_FORMAT, "event %zu goes back in time (%lu µs after %lu µs)", i,
                               (unsigned long)ts, (unsigned long)last);
            wraps += (uint64_t)1 << 32; /* the 32-bit clock wrapped */
        }
        last = ts;
        const uint64_t t = wraps + ts;
        if (i == 0) first = t;
        if (t - first > UINT32_MAX)
            return sf_fail(SF_ERR_FORMAT, "event %zu is more than 2^32 µs after the first", i);
        out[i] = (sf_event){.t = (uint32_t)(t - first), .x = (uint16_t)(127 - (address >> 8 & 0x7f)),
                            .y = (uint8_t)(127 - (address >> 1 & 0x7f)), .p = (uint8_t)(1 - (address & 1))};
    }
    *n = (int64_t)count;
    return SF_OK;
}

static const char *const cifar10dvs_classes[] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                  "dog",      "frog",       "horse", "ship", "truck", NULL};

sf_status sf_cifar10dvs_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                             sf_dataset **out)
{
    const sf_event_folders e = {.suffix = ".aedat", .bytes_per_event = SF_AEDAT2_EVENT_BYTES, .parse = sf_aedat2_parse,
                                .classes = cifar10dvs_classes};
    return sf_event_folders_load(f, &e, dir, split, f->classes, out);
}
