/* shd.c — the Spiking Heidelberg Digits and Spiking Speech Commands (Cramer et al. 2020): HDF5 files
 * {shd,ssc}_{train,test}.h5 (or the .h5.gz files as distributed) holding spikes/times (seconds) and spikes/units
 * (channel 0..699) as variable-length arrays per sample, and labels. Read with libhdf5, which is trusted to parse
 * the container; every rank, length, type class and value it hands over is checked here before use. */
#include "data/formats.h"

#include "core/error.h"
#include "io/files.h"

#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Samples read from the file per hyperslab, so SSC's variable-length arrays never sit in memory all at once. */
#define SHD_CHUNK 512
/* The most entries a byte of compressed storage can stand for: deflate's limit is about 1032 to 1. */
#define SHD_MAX_COMPRESSION 1100

sf_status sf_shd_sample_events(const double *times, size_t n_times, const uint32_t *units, size_t n_units,
                               sf_event *out)
{
    if (n_times != n_units)
        return sf_fail(SF_ERR_FORMAT, "%zu spike times but %zu units", n_times, n_units);
    for (size_t i = 0; i < n_times; i++) {
        /* 2^32 µs from time 0 is more than an hour: SHD's samples last about a second. */
        if (!(times[i] >= 0.0 && times[i] < 4294.0))
            return sf_fail(SF_ERR_FORMAT, "spike %zu has time %g s (expected 0 <= t < 4294 s)", i, times[i]);
        if (units[i] > UINT16_MAX) return sf_fail(SF_ERR_FORMAT, "spike %zu has unit %u", i, units[i]);
        out[i] = (sf_event){.t = (uint32_t)llround(times[i] * 1e6), .x = (uint16_t)units[i]};
    }
    return SF_OK;
}

typedef struct h5_handles {
    hid_t file, times, units, labels;
} h5_handles;

static void close_handles(h5_handles *h)
{
    if (h->times >= 0) H5Dclose(h->times);
    if (h->units >= 0) H5Dclose(h->units);
    if (h->labels >= 0) H5Dclose(h->labels);
    if (h->file >= 0) H5Fclose(h->file);
}

/* Whether the file stores all `count` entries d declares (unwritten chunks read as fill values, so a small file
 * could declare 2^40): every chunk needed written, and the stored bytes (<= the file's) hold them at <= 1:1
 * uncompressed or SHD_MAX_COMPRESSION compressed. */
static sf_status check_storage(hid_t file, hid_t d, const char *name, hsize_t count)
{
    H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
    hsize_t file_bytes = 0, chunk = 0, chunks = 0;
    hid_t type = H5Dget_type(d), dcpl = H5Dget_create_plist(d);
    const size_t elem = type >= 0 ? H5Tget_size(type) : 0;
    const int filters = dcpl >= 0 ? H5Pget_nfilters(dcpl) : -1, external = dcpl >= 0 ? H5Pget_external_count(dcpl) : -1;
    const H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
    const int chunked = layout == H5D_CHUNKED && H5Pget_chunk(dcpl, 1, &chunk) == 1 && chunk > 0;
    if (type >= 0) H5Tclose(type);
    if (dcpl >= 0) H5Pclose(dcpl);
    const hsize_t stored = H5Dget_storage_size(d);
    const hid_t space = H5Dget_space(d);
    const herr_t listed = chunked && space >= 0 ? H5Dget_num_chunks(d, space, &chunks) : -1;
    if (space >= 0) H5Sclose(space);
    if (H5Dget_space_status(d, &status) < 0 || H5Fget_filesize(file, &file_bytes) < 0 || elem == 0 || filters < 0 ||
        external < 0 || (layout == H5D_CHUNKED && listed < 0))
        return sf_fail(SF_ERR_FORMAT, "cannot read how /%s is stored", name);
    if (layout == H5D_VIRTUAL || external > 0)
        return sf_fail(SF_ERR_FORMAT, "/%s is stored outside the file (external or virtual dataset)", name);
    if (count == 0) return SF_OK;
    const hsize_t needed = chunked ? (count - 1) / chunk + 1 : 1;
    const int written = chunked ? chunks >= needed : status == H5D_SPACE_STATUS_ALLOCATED;
    const double need = (double)count * (double)elem, held = (double)stored * (filters ? SHD_MAX_COMPRESSION : 1);
    if (!written)
        return sf_fail(SF_ERR_FORMAT,
                       "/%s declares %llu entries but stores only %llu of the %llu chunks that hold them: the others "
                       "were never written (a damaged or forged file)",
                       name, (unsigned long long)count, (unsigned long long)(chunked ? chunks : 0),
                       (unsigned long long)needed);
    if (need > held || stored > file_bytes)
        return sf_fail(SF_ERR_FORMAT,
                       "/%s declares %llu entries (%.0f bytes) but the file stores %llu bytes of them (a damaged or "
                       "forged file)",
                       name, (unsigned long long)count, need, (unsigned long long)stored);
    return SF_OK;
}

/* Opens dataset `name` of `file` and checks it is one-dimensional of `count` elements (count < 0: sets it) whose
 * type has class `cls` (and, for variable-length arrays, a base of class `base`), all of them stored in the file. */
static sf_status open_checked(hid_t file, const char *name, H5T_class_t cls, H5T_class_t base, hsize_t *count,
                              hid_t *out)
{
    *out = -1;
    if (H5Lexists(file, "spikes", H5P_DEFAULT) <= 0 || H5Lexists(file, name, H5P_DEFAULT) <= 0)
        return sf_fail(SF_ERR_FORMAT, "has no dataset /%s", name);
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) return sf_fail(SF_ERR_FORMAT, "cannot open /%s", name);
    hid_t space = H5Dget_space(d), type = H5Dget_type(d);
    hsize_t dims[2] = {0, 0};
    const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank == 1) H5Sget_simple_extent_dims(space, dims, NULL);
    H5T_class_t got = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS, got_base = H5T_NO_CLASS;
    if (got == H5T_VLEN) {
        hid_t super = H5Tget_super(type);
        got_base = super >= 0 ? H5Tget_class(super) : H5T_NO_CLASS;
        if (super >= 0) H5Tclose(super);
    }
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    sf_status s = SF_OK;
    if (rank != 1)
        s = sf_fail(SF_ERR_FORMAT, "/%s has %d dimensions (expected 1)", name, rank);
    else if (got != cls || (cls == H5T_VLEN && got_base != base))
        s = sf_fail(SF_ERR_FORMAT, "/%s has the wrong element type (expected %s)", name,
                    cls == H5T_INTEGER ? "integers" : base == H5T_FLOAT ? "arrays of floats" : "arrays of integers");
    else if (*count != (hsize_t)-1 && dims[0] != *count)
        s = sf_fail(SF_ERR_FORMAT, "/%s has %llu entries but /spikes/times has %llu (the file disagrees with "
                    "itself)", name, (unsigned long long)dims[0], (unsigned long long)*count);
    if (s == SF_OK) s = check_storage(file, d, name, dims[0]);
    if (s != SF_OK) {
        H5Dclose(d);
        return s;
    }
    *count = dims[0];
    *out = d;
    return SF_OK;
}

/* Rows [first, first + n) of a one-dimensional dataset read as memory type `mem`. */
static sf_status read_rows(hid_t d, hid_t mem, hsize_t first, hsize_t n, void *buf)
{
    hid_t fspace = H5Dget_space(d), mspace = H5Screate_simple(1, &n, NULL);
    herr_t e = fspace >= 0 && mspace >= 0 ? H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &first, NULL, &n, NULL) : -1;
    if (e >= 0) e = H5Dread(d, mem, mspace, fspace, H5P_DEFAULT, buf);
    if (mspace >= 0) H5Sclose(mspace);
    if (fspace >= 0) H5Sclose(fspace);
    return e < 0 ? sf_fail(SF_ERR_FORMAT, "cannot read samples %llu..%llu", (unsigned long long)first,
                           (unsigned long long)(first + n - 1))
                 : SF_OK;
}

/* Samples [first, first + n) appended to ds; `scratch` (*cap events) grows as needed. */
static sf_status read_chunk(const h5_handles *h, hsize_t first, hsize_t n, sf_dataset *ds, sf_event **scratch,
                            size_t *cap)
{
    hvl_t times[SHD_CHUNK], units[SHD_CHUNK];
    int64_t labels[SHD_CHUNK];
    hid_t tmem = H5Tvlen_create(H5T_NATIVE_DOUBLE), umem = H5Tvlen_create(H5T_NATIVE_UINT32);
    hid_t space = H5Screate_simple(1, &n, NULL);
    int have_t = 0, have_u = 0;
    sf_status s = tmem >= 0 && umem >= 0 && space >= 0 ? SF_OK : sf_fail(SF_ERR_NOMEM, "HDF5 types");
    if (s == SF_OK) s = read_rows(h->times, tmem, first, n, times);
    have_t = s == SF_OK;
    if (s == SF_OK) s = read_rows(h->units, umem, first, n, units);
    have_u = s == SF_OK;
    if (s == SF_OK) s = read_rows(h->labels, H5T_NATIVE_INT64, first, n, labels);
    for (hsize_t i = 0; i < n && s == SF_OK; i++) {
        const unsigned long long sample = first + i;
        if (times[i].len > *cap) {
            sf_event *grown = realloc(*scratch, times[i].len * sizeof **scratch);
            if (!grown) s = sf_fail(SF_ERR_NOMEM, "out of memory for %zu events", times[i].len);
            else *scratch = grown, *cap = times[i].len;
        }
        if (s == SF_OK && labels[i] != (int32_t)labels[i])
            s = sf_fail(SF_ERR_FORMAT, "sample %llu: label %lld is out of range", sample, (long long)labels[i]);
        if (s == SF_OK)
            s = sf_shd_sample_events(times[i].p, times[i].len, units[i].p, units[i].len, *scratch);
        if (s == SF_OK) s = sf_events_add_sample(ds, *scratch, (int64_t)times[i].len, (int32_t)labels[i]);
        if (s != SF_OK) s = sf_fail_context(s, "sample %llu: ", sample);
    }
    /* H5Dvlen_reclaim, not H5Treclaim: Debian's libhdf5 1.10.8 declares the latter but does not export it. */
    if (have_t) H5Dvlen_reclaim(tmem, space, H5P_DEFAULT, times);
    if (have_u) H5Dvlen_reclaim(umem, space, H5P_DEFAULT, units);
    if (space >= 0) H5Sclose(space);
    if (tmem >= 0) H5Tclose(tmem);
    if (umem >= 0) H5Tclose(umem);
    return s;
}

/* Every sample of an opened file into *out. */
static sf_status read_file(const sf_dataset_format *f, hid_t file, sf_dataset **out)
{
    h5_handles h = {file, -1, -1, -1};
    hsize_t count = (hsize_t)-1;
    sf_status s = open_checked(file, "spikes/times", H5T_VLEN, H5T_FLOAT, &count, &h.times);
    if (s == SF_OK) s = open_checked(file, "spikes/units", H5T_VLEN, H5T_INTEGER, &count, &h.units);
    if (s == SF_OK) s = open_checked(file, "labels", H5T_INTEGER, H5T_NO_CLASS, &count, &h.labels);
    sf_dataset *ds = NULL;
    if (s == SF_OK) s = sf_events_create(f->channels, f->height, f->width, f->classes, &ds);
    sf_event *scratch = NULL;
    size_t cap = 0;
    for (hsize_t first = 0; s == SF_OK && first < count; first += SHD_CHUNK)
        s = read_chunk(&h, first, count - first < SHD_CHUNK ? count - first : SHD_CHUNK, ds, &scratch, &cap);
    free(scratch);
    close_handles(&h);
    if (s != SF_OK) {
        sf_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SF_OK;
}

/* libhdf5 prints its error stack to stderr unless told not to; the messages returned here say what failed. */
typedef struct quiet_hdf5 {
    H5E_auto2_t func;
    void *data;
} quiet_hdf5;

static quiet_hdf5 hdf5_quiet(void)
{
    quiet_hdf5 q;
    H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return q;
}

static void hdf5_restore(quiet_hdf5 q) { H5Eset_auto2(H5E_DEFAULT, q.func, q.data); }

static sf_status not_hdf5(void) { return sf_fail(SF_ERR_FORMAT, "not an HDF5 file (no HDF5 signature)"); }

static sf_status read_or_fail(const sf_dataset_format *f, hid_t file, sf_dataset **out)
{
    if (file < 0) return sf_fail(SF_ERR_FORMAT, "libhdf5 cannot open it (truncated or corrupt HDF5 file)");
    return read_file(f, file, out);
}

sf_status sf_shd_parse(const sf_dataset_format *f, const uint8_t *buf, size_t len, sf_dataset **out)
{
    *out = NULL;
    if (len < 8 || memcmp(buf, "\x89HDF\r\n\x1a\n", 8) != 0) return not_hdf5();
    const quiet_hdf5 q = hdf5_quiet();
    /* libhdf5 copies the image: its no-copy mode leaks a small record per file in 1.10 (seen under ASan). */
    sf_status s = read_or_fail(f, H5LTopen_file_image((void *)buf, len, 0), out);
    hdf5_restore(q);
    return s;
}

/* A plain .h5 file is read through libhdf5's own file access, without a copy in memory. */
static sf_status read_h5(const sf_dataset_format *f, const char *path, sf_dataset **out)
{
    const quiet_hdf5 q = hdf5_quiet();
    sf_status s = H5Fis_hdf5(path) > 0 ? read_or_fail(f, H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), out)
                                        : not_hdf5();
    hdf5_restore(q);
    return s;
}

/* The size an HDF5 file says it has: its superblock's end-of-file address (past a base address), from the first
 * bytes of the file (the signature at offset 0). 0 when the superblock is not one this reads. */
static uint64_t hdf5_claimed_size(const uint8_t *head, size_t n)
{
    if (n < 16) return 0;
    const int version = head[8];
    /* versions 0 and 1: the sizes at 13 and the addresses after 24 (28 for 1) bytes; 2 and 3: the size at 9, the
     * addresses after 12 bytes; the addresses are base, (free-space or extension), end of file */
    const size_t offsets = version <= 1 ? head[13] : head[9], first = version == 0 ? 24 : version == 1 ? 28 : 12;
    if (version > 3 || (offsets != 4 && offsets != 8) || first + 3 * offsets > n) return 0;
    uint64_t base = 0, eof = 0;
    for (size_t i = 0; i < offsets; i++) {
        base |= (uint64_t)head[first + i] << (8 * i);
        eof |= (uint64_t)head[first + 2 * offsets + i] << (8 * i);
    }
    return eof > UINT64_MAX - base ? 0 : base + eof;
}

/* A .h5.gz unpacked into memory for libhdf5 (which copies it), bounded by its superblock's size (against gzip
 * bombs) and by half the available memory. */
static sf_status read_h5_gz(const sf_dataset_format *f, const char *path, sf_dataset **out)
{
    char head[512];
    size_t n = 0;
    SF_TRY(sf_read_file_gz_head(path, head, sizeof head, &n));
    if (n < 8 || memcmp(head, "\x89HDF\r\n\x1a\n", 8) != 0) return not_hdf5();
    const uint64_t claimed = hdf5_claimed_size((const uint8_t *)head, n);
    const size_t room = sf_memory_available() / 2;
    if (claimed == 0) return sf_fail(SF_ERR_FORMAT, "its HDF5 superblock gives no file size (damaged file)");
    if (claimed > room)
        return sf_fail(SF_ERR_NOMEM,
                       "unpacked it would take %.1f GiB, and libhdf5 copies it: more than this machine has available "
                       "(%.1f GiB free); gunzip it beside itself so that it is read from disk",
                       (double)claimed / (1 << 30), 2.0 * (double)room / (1 << 30));
    char *buf = NULL;
    size_t len = 0;
    sf_status s = sf_read_file_gz(path, (size_t)claimed, &buf, &len);
    if (s == SF_OK) s = sf_shd_parse(f, (const uint8_t *)buf, len, out);
    free(buf);
    return s;
}

sf_status sf_shd_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                      sf_dataset **out)
{
    char name[64], path[4096];
    snprintf(name, sizeof name, "%s_%s.h5", f->name, split == SF_SPLIT_TRAIN ? "train" : "test");
    SF_TRY(sf_path_join(path, sizeof path, dir, name));
    const int gz = !sf_path_exists(path);
    if (gz) {
        const size_t n = strlen(path);
        if (n + 3 < sizeof path) memcpy(path + n, ".gz", 4);
        if (!sf_path_exists(path))
            return sf_fail(SF_ERR_IO, "%s not found: looked for %s/%s and %s/%s.gz; %s", f->pretty, dir, name, dir,
                           name, f->provider);
    }
    if (!sf_file_exists(path)) return sf_not_a_file(path);
    sf_status s = gz ? read_h5_gz(f, path, out) : read_h5(f, path, out);
    return s == SF_OK ? s : sf_fail_context(s, "%s: ", path);
}
