/* dvsgesture.c — DVS128 Gesture (Amir et al. 2017; 128×128, 2 polarities): recordings userXX_<lighting>.aedat in
 * AEDAT 3.1 with userXX_<lighting>_labels.csv (class 1..11, start µs, end µs), split by trials_to_{train,test}.txt;
 * every labelled span of a recording is one sample. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* AEDAT 3.1: '#' header lines from "#!AER-DAT3.1" to "#!END-HEADER", then packets: a 28-byte little-endian header
 * (type i16, source i16, event size i32, ts offset i32, ts overflow i32, capacity i32, number i32, valid i32), then
 * capacity × size bytes, the first `number` events used. A polarity event (type 1): a 32-bit word (bit 0 valid, bit
 * 1 polarity, bits 2-16 y, bits 17-31 x) and a 31-bit timestamp, extended by the packet's overflow count. */
#define AEDAT_PACKET_HEADER 28
#define AEDAT_POLARITY_TYPE 1
#define AEDAT_POLARITY_SIZE 8
#define GESTURE_MAX_FILE_BYTES ((size_t)4 << 30)

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The offset of the first packet: just past the "#!END-HEADER" line. */
static sf_status skip_header(const uint8_t *buf, size_t len, size_t *pos)
{
    static const char magic[] = "#!AER-DAT3.1", end[] = "#!END-HEADER";
    if (len < sizeof magic - 1 || memcmp(buf, magic, sizeof magic - 1) != 0)
        return sf_fail(SF_ERR_FORMAT, "not an AEDAT 3.1 file (it does not start with %s)", magic);
    size_t i = 0;
    while (i < len && buf[i] == '#') {
        const uint8_t *nl = memchr(buf + i, '\n', len - i);
        if (!nl) break;
        const size_t line = (size_t)(nl - (buf + i));
        const int is_end = line >= sizeof end - 1 && memcmp(buf + i, end, sizeof end - 1) == 0;
        i += line + 1;
        if (is_end) {
            *pos = i;
            return SF_OK;
        }
    }
    return sf_fail(SF_ERR_FORMAT, "AEDAT header has no %s line (truncated file?)", end);
}

sf_status sf_aedat_parse(const uint8_t *buf, size_t len, sf_event *out, size_t cap, int64_t *n, int64_t *origin)
{
    *n = 0;
    *origin = 0;
    size_t pos = 0;
    SF_TRY(skip_header(buf, len, &pos));
    int64_t k = 0;
    for (int64_t packet = 0; pos < len; packet++) {
        if (len - pos < AEDAT_PACKET_HEADER)
            return sf_fail(SF_ERR_FORMAT, "packet %lld: truncated header (%zu bytes left)", (long long)packet,
                           len - pos);
        const uint8_t *h = buf + pos;
        const int type = h[0] | h[1] << 8;
        const uint32_t size = le32(h + 4), overflow = le32(h + 12), capacity = le32(h + 16), number = le32(h + 20);
        if (size == 0 || size > (1u << 20) || capacity > (1u << 30) || number > capacity)
            return sf_fail(SF_ERR_FORMAT, "packet %lld: event size %u, capacity %u, number %u are not consistent",
                           (long long)packet, size, capacity, number);
        const size_t body = (size_t)size * capacity;
        if (body > len - pos - AEDAT_PACKET_HEADER)
            return sf_fail(SF_ERR_FORMAT, "packet %lld: truncated (%zu bytes of events, %zu left)", (long long)packet,
                           body, len - pos - AEDAT_PACKET_HEADER);
        const uint8_t *e = h + AEDAT_PACKET_HEADER;
        pos += AEDAT_PACKET_HEADER + body;
        if (type != AEDAT_POLARITY_TYPE) continue; /* special, frame, IMU events */
        if (size < AEDAT_POLARITY_SIZE || overflow >= (1u << 31))
            return sf_fail(SF_ERR_FORMAT, "packet %lld: polarity events of %u bytes, timestamp overflow %u",
                           (long long)packet, size, overflow);
        for (uint32_t i = 0; i < number; i++, e += size) {
            const uint32_t data = le32(e), ts = le32(e + 4);
            if (!(data & 1)) continue; /* invalidated event */
            if (ts >> 31)
                return sf_fail(SF_ERR_FORMAT, "packet %lld event %u: negative timestamp", (long long)packet, i);
            const int64_t t = (int64_t)overflow << 31 | ts;
            if (k == 0) *origin = t;
            const int64_t rel = t - *origin;
            if (rel < 0 || rel > UINT32_MAX)
                return sf_fail(SF_ERR_FORMAT, "packet %lld event %u: timestamp %lld µs is %s the first event's",
                               (long long)packet, i, (long long)t, rel < 0 ? "before" : "more than 2^32 µs after");
            if (k > 0 && (uint32_t)rel < out[k - 1].t)
                return sf_fail(SF_ERR_FORMAT, "packet %lld event %u goes back in time (%lld µs after %lu µs)",
                               (long long)packet, i, (long long)rel, (unsigned long)out[k - 1].t);
            if ((size_t)k == cap) return sf_fail(SF_ERR_INVALID, "more than %zu events", cap);
            const uint32_t x = data >> 17 & 0x7fff, y = data >> 2 & 0x7fff;
            if (x > UINT16_MAX || y > 255)
                return sf_fail(SF_ERR_FORMAT, "packet %lld event %u at x %u, y %u is outside any sensor read here",
                               (long long)packet, i, x, y);
            out[k++] = (sf_event){.t = (uint32_t)rel, .x = (uint16_t)x, .y = (uint8_t)y, .p = (uint8_t)(data >> 1 & 1)};
        }
    }
    *n = k;
    return SF_OK;
}

/* The next line of text[*pos..len) without its line end, as [*start, *end); 0 at the end of the text. */
static int next_line(const char *text, size_t len, size_t *pos, size_t *start, size_t *end)
{
    if (*pos >= len) return 0;
    *start = *pos;
    const char *nl = memchr(text + *pos, '\n', len - *pos);
    *end = nl ? (size_t)(nl - text) : len;
    *pos = *end + 1;
    while (*end > *start && (text[*end - 1] == '\r' || text[*end - 1] == ' ' || text[*end - 1] == '\t')) (*end)--;
    while (*start < *end && (text[*start] == ' ' || text[*start] == '\t')) (*start)++;
    return 1;
}

/* Three unsigned decimal integers separated by commas, the whole of the line. */
static int parse_row(const char *text, size_t start, size_t end, uint64_t v[3])
{
    char row[128];
    if (end - start >= sizeof row) return 0;
    memcpy(row, text + start, end - start);
    row[end - start] = 0;
    const char *q = row;
    for (int i = 0; i < 3; i++) {
        char *stop;
        while (*q == ' ') q++;
        if (*q < '0' || *q > '9') return 0;
        errno = 0;
        v[i] = strtoull(q, &stop, 10);
        if (errno == ERANGE) return 0;
        for (q = stop; *q == ' '; q++) {}
        if (*q != (i < 2 ? ',' : 0)) return 0;
        q++;
    }
    return 1;
}

sf_status sf_gesture_labels_parse(const char *text, size_t len, int32_t classes, sf_gesture_span *spans, size_t cap,
                                  size_t *n)
{
    *n = 0;
    size_t pos = 0, start, end, line = 0;
    while (next_line(text, len, &pos, &start, &end)) {
        line++;
        if (start == end) continue;
        uint64_t v[3];
        if (!parse_row(text, start, end, v)) {
            if (line == 1) continue; /* the header: class,startTime_usec,endTime_usec */
            return sf_fail(SF_ERR_FORMAT, "line %zu: expected class,start_us,end_us", line);
        }
        if (v[0] < 1 || v[0] > (uint64_t)classes)
            return sf_fail(SF_ERR_FORMAT, "line %zu: class %llu is out of range (expected 1..%d)", line,
                           (unsigned long long)v[0], classes);
        if (v[1] >= v[2] || v[2] > INT64_MAX)
            return sf_fail(SF_ERR_FORMAT, "line %zu: the gesture's span from %llu to %llu µs %s", line,
                           (unsigned long long)v[1], (unsigned long long)v[2],
                           v[1] >= v[2] ? "ends before it starts (start_us must be below end_us)"
                                        : "ends past 2^63 µs");
        if (*n == cap) return sf_fail(SF_ERR_FORMAT, "line %zu: more than %zu gestures", line, cap);
        spans[(*n)++] = (sf_gesture_span){.label = (int32_t)v[0] - 1, .start = (int64_t)v[1], .end = (int64_t)v[2],
                                          .line = (int32_t)line};
    }
    return SF_OK;
}

/* The first index in ev[0..n) whose time is >= t (sf_aedat_parse returns events in time order). */
static int64_t lower_bound(const sf_event *ev, int64_t n, int64_t t)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)ev[mid].t < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

#define GESTURE_MAX_SPANS 1024

/* One recording and its labels: each span [start, end) becomes a sample. */
static sf_status load_trial(const sf_dataset_format *f, const char *dir, const char *name, sf_dataset *ds)
{
    const size_t stem = strlen(name) - strlen(".aedat");
    char aedat[4096], csv[4096], csv_name[512];
    snprintf(csv_name, sizeof csv_name, "%.*s_labels.csv", (int)stem, name);
    SF_TRY(sf_path_join(aedat, sizeof aedat, dir, name));
    SF_TRY(sf_path_join(csv, sizeof csv, dir, csv_name));
    for (int i = 0; i < 2; i++) {
        const char *file = i ? csv : aedat;
        if (sf_path_exists(file) && !sf_file_exists(file)) return sf_not_a_file(file);
        if (!sf_file_exists(file)) return sf_fail(SF_ERR_IO, "%s not found: looked for %s; %s", f->pretty, file, f->provider);
    }
    char *buf = NULL, *labels = NULL;
    size_t len = 0, labels_len = 0, nspans = 0;
    sf_gesture_span spans[GESTURE_MAX_SPANS];
    sf_status s = sf_read_file(csv, 1 << 20, &labels, &labels_len);
    if (s == SF_OK) s = sf_gesture_labels_parse(labels, labels_len, f->classes, spans, GESTURE_MAX_SPANS, &nspans);
    free(labels);
    if (s != SF_OK) return sf_fail_context(s, "%s: ", csv);
    s = sf_read_file(aedat, GESTURE_MAX_FILE_BYTES, &buf, &len);
    sf_event *ev = s == SF_OK ? malloc((len / AEDAT_POLARITY_SIZE + 1) * sizeof *ev) : NULL;
    if (s == SF_OK && !ev) s = sf_fail(SF_ERR_NOMEM, "out of memory for the events of %s", aedat);
    int64_t n = 0, origin = 0;
    if (s == SF_OK) s = sf_aedat_parse((const uint8_t *)buf, len, ev, len / AEDAT_POLARITY_SIZE + 1, &n, &origin);
    free(buf);
    if (s != SF_OK) {
        free(ev);
        return sf_fail_context(s, "%s: ", aedat);
    }
    for (size_t i = 0; i < nspans && s == SF_OK; i++) {
        const sf_gesture_span *g = &spans[i];
        const int64_t last = n > 0 ? origin + ev[n - 1].t : origin;
        if (g->end <= origin || g->start > last) {
            s = sf_fail(SF_ERR_FORMAT,
                        "%s:%d: the gesture from %lld to %lld µs lies outside the recording %s (%lld to %lld µs)", csv,
                        g->line, (long long)g->start, (long long)g->end, aedat, (long long)origin, (long long)last);
            break;
        }
        const int64_t a = lower_bound(ev, n, g->start - origin), b = lower_bound(ev, n, g->end - origin);
        s = sf_events_add_sample(ds, ev + a, b - a, g->label);
        if (s != SF_OK) s = sf_fail_context(s, "%s, gesture of %s:%d: ", aedat, csv, g->line);
    }
    free(ev);
    return s;
}

sf_status sf_gesture_trials_parse(const char *text, size_t len, char ***names, size_t *n)
{
    *names = NULL;
    *n = 0;
    size_t pos = 0, start, end, count = 0, line = 0;
    while (next_line(text, len, &pos, &start, &end)) count += start < end;
    char **list = malloc((count + 1) * sizeof *list + len + 1);
    if (!list) return sf_fail(SF_ERR_NOMEM, "out of memory");
    char *strings = (char *)(list + count + 1);
    size_t k = 0;
    for (pos = 0; next_line(text, len, &pos, &start, &end);) {
        line++;
        if (start == end) continue;
        const size_t w = end - start;
        if (w <= strlen(".aedat") || memcmp(text + end - 6, ".aedat", 6) != 0 || memchr(text + start, '/', w) ||
            memchr(text + start, '\0', w) || w > 255) {
            free(list);
            return sf_fail(SF_ERR_FORMAT, "line %zu: expected the name of a .aedat file in the same folder", line);
        }
        memcpy(strings, text + start, w);
        strings[w] = 0;
        list[k++] = strings;
        strings += w + 1;
    }
    *names = list;
    *n = k;
    return SF_OK;
}

sf_status sf_gesture_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                          sf_dataset **out)
{
    char path[4096];
    const char *list_name = split == SF_SPLIT_TRAIN ? "trials_to_train.txt" : "trials_to_test.txt";
    /* Accept the folder the archive unpacks to or the one holding it. */
    char unpacked[4096];
    SF_TRY(sf_path_join(unpacked, sizeof unpacked, dir, "DvsGesture"));
    SF_TRY(sf_path_join(path, sizeof path, unpacked, list_name));
    if (sf_file_exists(path)) dir = unpacked;
    SF_TRY(sf_path_join(path, sizeof path, dir, list_name));
    if (!sf_file_exists(path))
        return sf_fail(SF_ERR_IO, "%s not found: looked for %s; %s", f->pretty, path, f->provider);
    char *text = NULL, **names = NULL;
    size_t len = 0, n = 0;
    SF_TRY(sf_read_file(path, 1 << 20, &text, &len));
    sf_status s = sf_gesture_trials_parse(text, len, &names, &n);
    free(text);
    if (s != SF_OK) return sf_fail_context(s, "%s: ", path);
    sf_dataset *ds = NULL;
    s = sf_events_create(f->channels, f->height, f->width, f->classes, &ds);
    for (size_t i = 0; i < n && s == SF_OK; i++) s = load_trial(f, dir, names[i], ds);
    free(names);
    if (s != SF_OK) {
        sf_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SF_OK;
}
