/* nir_h5.c — NIR graphs to and from HDF5 files (libhdf5), in the layout of the `nir` package's nir.write/nir.read.
 *
 * Both directions go through an in-memory file image (libhdf5's core driver): a write is one atomic file write of
 * the finished image, and a read parses the same way whether the bytes come from a file or from memory. */
#include "io/nir.h"

#include "core/error.h"
#include "io/files.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file: a scalar string dataset "version" at the root and a group "node": a string "type" = "NIRGraph", a group
 * "nodes" of one group per node (its "type", a dataset per field; a nested "NIRGraph" node holds a subgraph alike),
 * a string array "edges" [n, 2], and an optional group "metadata". */

#define NIR_MAX_FILE_BYTES ((size_t)16 << 30)
#define DEFLATE_LEVEL 4
#define CHUNK_MAX_BYTES ((int64_t)64 << 20)
/* The name libhdf5's core driver gives the in-memory file: it refuses a name that exists on disk, and nothing can
 * exist below /dev/null. */
#define IMAGE_NAME "/dev/null/spikefuse-nir-image"

/* libhdf5 prints its error stack to stderr unless told not to; each entry point silences it for its duration. */
typedef struct h5_quiet {
    H5E_auto2_t func;
    void *data;
} h5_quiet;

static h5_quiet quiet_begin(void)
{
    h5_quiet q = {0};
    H5Eget_auto2(H5E_DEFAULT, &q.func, &q.data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return q;
}

static void quiet_end(h5_quiet q) { H5Eset_auto2(H5E_DEFAULT, q.func, q.data); }

/* ================================================================ reading */

/* What one file may make us read in all, however its groups are linked (a group linked from many places is read
 * each time): NIR graphs are small, and a file must not make the reader work or allocate without bound. */
typedef struct budget {
    int64_t nodes, edges, elements;
} budget;
#define BUDGET_NODES SF_NIR_MAX_NODES
#define BUDGET_EDGES (2 * SF_NIR_MAX_EDGES)
#define BUDGET_ELEMENTS SF_NIR_MAX_ELEMENTS

static sf_status read_graph(hid_t gid, const char *path, int depth, sf_nir_graph *g, budget *b);

static sf_status bad(const char *path, const char *what) { return sf_fail(SF_ERR_FORMAT, "%s: %s", path, what); }

/* "path/name" into sub (paths are bounded: SF_NIR_MAX_DEPTH levels of names shorter than SF_NIR_MAX_NAME). */
#define PATH_CAP 4096
static void join(char *sub, const char *path, const char *name)
{
    if (snprintf(sub, PATH_CAP, "%s/%s", path, name) >= PATH_CAP) sub[PATH_CAP - 1] = 0;
}

/* The member names of a group, in libhdf5's name order. */
static sf_status member_name(hid_t gid, const char *path, hsize_t i, char *name, size_t cap)
{
    ssize_t n = H5Lget_name_by_idx(gid, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, cap, H5P_DEFAULT);
    if (n < 0) return bad(path, "unreadable member name");
    if ((size_t)n >= cap || n == 0) return bad(path, "a member name is empty or too long");
    return SF_OK;
}

/* Opens member `name` of gid, which must be a hard link (soft and external links could lead anywhere). */
static sf_status open_member(hid_t gid, const char *path, const char *name, hid_t *obj, H5I_type_t *kind)
{
    H5L_info_t li;
    if (H5Lget_info(gid, name, &li, H5P_DEFAULT) < 0) return bad(path, "unreadable link");
    if (li.type != H5L_TYPE_HARD) return sf_fail(SF_ERR_FORMAT, "%s/%s: only hard links are read", path, name);
    *obj = H5Oopen(gid, name, H5P_DEFAULT);
    if (*obj < 0) return sf_fail(SF_ERR_FORMAT, "%s/%s: cannot be opened", path, name);
    *kind = H5Iget_type(*obj);
    return SF_OK;
}

/* The dimensions of a dataset's simple or scalar dataspace. */
static sf_status dataset_shape(hid_t ds, const char *path, int32_t *ndim, int64_t *shape, int64_t *numel)
{
    hid_t sp = H5Dget_space(ds);
    if (sp < 0) return bad(path, "unreadable dataspace");
    H5S_class_t cls = H5Sget_simple_extent_type(sp);
    int nd = cls == H5S_SCALAR ? 0 : cls == H5S_SIMPLE ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t dims[H5S_MAX_RANK];
    sf_status s = SF_OK;
    if (nd < 0 || nd > SF_NIR_MAX_DIMS)
        s = bad(path, "a dataset must be a scalar or an array of at most 8 dimensions");
    else if (nd > 0 && H5Sget_simple_extent_dims(sp, dims, NULL) != nd)
        s = bad(path, "unreadable dimensions");
    H5Sclose(sp);
    SF_TRY(s);
    *ndim = nd;
    *numel = 1;
    for (int d = 0; d < nd; d++) {
        if (dims[d] > (hsize_t)SF_NIR_MAX_ELEMENTS || (dims[d] && *numel > SF_NIR_MAX_ELEMENTS / (int64_t)dims[d]))
            return bad(path, "the dataset has more elements than any network needs");
        shape[d] = (int64_t)dims[d];
        *numel *= shape[d];
    }
    return SF_OK;
}

/* Reads `count` strings (variable or fixed length) of a string dataset into malloc'd copies. */
static sf_status read_strings(hid_t ds, hid_t ftype, const char *path, int64_t count, char **out)
{
    sf_status s = SF_OK;
    hid_t mtype = H5Tcopy(H5T_C_S1);
    if (mtype < 0) return bad(path, "string type");
    if (H5Tis_variable_str(ftype) > 0) {
        char **ptrs = calloc((size_t)(count ? count : 1), sizeof *ptrs);
        if (!ptrs) s = sf_fail(SF_ERR_NOMEM, "out of memory");
        if (s == SF_OK && (H5Tset_size(mtype, H5T_VARIABLE) < 0 || H5Tset_cset(mtype, H5Tget_cset(ftype)) < 0 ||
                           H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs) < 0))
            s = bad(path, "unreadable strings");
        for (int64_t i = 0; s == SF_OK && i < count; i++)
            if (!(out[i] = strdup(ptrs[i] ? ptrs[i] : ""))) s = sf_fail(SF_ERR_NOMEM, "out of memory");
        if (ptrs) {
            hid_t sp = H5Dget_space(ds);
            if (sp >= 0) {
                H5Dvlen_reclaim(mtype, sp, H5P_DEFAULT, ptrs);
                H5Sclose(sp);
            }
        }
        free(ptrs);
    } else {
        size_t len = H5Tget_size(ftype);
        int fits = len && len <= ((size_t)64 << 20) / (size_t)(count ? count : 1);
        char *buf = fits ? malloc((size_t)(count ? count : 1) * len) : NULL;
        if (!buf) s = fits ? sf_fail(SF_ERR_NOMEM, "out of memory") : bad(path, "implausibly long strings");
        if (s == SF_OK && (H5Tset_size(mtype, len) < 0 || H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0))
            s = bad(path, "unreadable strings");
        for (int64_t i = 0; s == SF_OK && i < count; i++) {
            const char *p = buf + (size_t)i * len;
            size_t n = strnlen(p, len);
            while (n && p[n - 1] == ' ') n--; /* space-padded fixed strings */
            if (!(out[i] = strndup(p, n))) s = sf_fail(SF_ERR_NOMEM, "out of memory");
        }
        free(buf);
    }
    H5Tclose(mtype);
    return s;
}

static void free_strings(char **s, int64_t n)
{
    for (int64_t i = 0; i < n; i++) free(s[i]);
}

/* One dataset of a node (or of metadata) as a field. */
static sf_status read_field(hid_t ds, const char *path, const char *name, sf_nir_fields *f, budget *b)
{
    int32_t ndim = 0;
    int64_t shape[SF_NIR_MAX_DIMS], numel = 0;
    SF_TRY(dataset_shape(ds, path, &ndim, shape, &numel));
    if ((b->elements -= numel) < 0) return bad(path, "the file holds more numbers than any network needs");
    hid_t ftype = H5Dget_type(ds);
    if (ftype < 0) return bad(path, "unreadable type");
    H5T_class_t cls = H5Tget_class(ftype);
    sf_status s = SF_OK;
    if (cls == H5T_STRING) {
        char *text = NULL;
        if (ndim != 0) s = bad(path, "a string field must be a scalar");
        if (s == SF_OK) s = read_strings(ds, ftype, path, 1, &text);
        if (s == SF_OK) s = sf_nir_set_text(f, name, text);
        free(text);
    } else if (cls == H5T_FLOAT || cls == H5T_INTEGER) {
        sf_nir_dtype dt = cls == H5T_INTEGER ? SF_NIR_I64 : H5Tget_size(ftype) == 4 ? SF_NIR_F32 : SF_NIR_F64;
        double *v = malloc((size_t)(numel ? numel : 1) * sizeof *v);
        if (!v) s = sf_fail(SF_ERR_NOMEM, "%s: out of memory for %lld values", path, (long long)numel);
        if (s == SF_OK && numel && H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
            s = bad(path, "unreadable numbers (corrupt data or an unsupported number type)");
        if (s == SF_OK) s = sf_nir_set(f, name, dt, ndim, shape, v);
        free(v);
    } else {
        s = bad(path, "a field must hold numbers or a string");
    }
    H5Tclose(ftype);
    return s;
}

/* Every member of a group through `visit` (members are opened; visit gets the object, its kind and name). */
typedef sf_status (*member_visitor)(hid_t obj, H5I_type_t kind, const char *path, const char *name, void *ctx);

static sf_status for_each_member(hid_t gid, const char *path, member_visitor visit, void *ctx)
{
    H5G_info_t info;
    if (H5Gget_info(gid, &info) < 0) return bad(path, "unreadable group");
    if (info.nlinks > SF_NIR_MAX_NODES) return bad(path, "too many members");
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char name[SF_NIR_MAX_NAME], sub[PATH_CAP];
        SF_TRY(member_name(gid, path, i, name, sizeof name));
        join(sub, path, name);
        hid_t obj;
        H5I_type_t kind;
        SF_TRY(open_member(gid, path, name, &obj, &kind));
        sf_status s = visit(obj, kind, sub, name, ctx);
        H5Oclose(obj);
        SF_TRY(s);
    }
    return SF_OK;
}

typedef struct fields_ctx {
    sf_nir_fields *fields;
    budget *b;
} fields_ctx;

static sf_status visit_metadata(hid_t obj, H5I_type_t kind, const char *path, const char *name, void *ctx)
{
    fields_ctx *c = ctx;
    if (kind != H5I_DATASET) return SF_OK; /* nested metadata is not ours to interpret */
    return read_field(obj, path, name, c->fields, c->b);
}

static sf_status visit_node_member(hid_t obj, H5I_type_t kind, const char *path, const char *name, void *ctx)
{
    fields_ctx *c = ctx;
    if (kind == H5I_GROUP) {
        if (strcmp(name, "metadata") == 0) return SF_OK;
        if (strcmp(name, "nodes") == 0) return SF_OK; /* a subgraph's: read_graph reads it */
        return bad(path, "unexpected group in a node");
    }
    if (kind != H5I_DATASET) return bad(path, "neither a group nor a dataset");
    if (strcmp(name, "type") == 0 || strcmp(name, "edges") == 0) return SF_OK;
    return read_field(obj, path, name, c->fields, c->b);
}

/* A dataset that must exist: member `name` of gid, opened with its shape and type (the caller closes both). */
typedef struct dataset {
    char path[PATH_CAP];
    hid_t obj, type;
    int32_t ndim;
    int64_t shape[SF_NIR_MAX_DIMS], numel;
} dataset;

static sf_status open_dataset(hid_t gid, const char *path, const char *name, dataset *d)
{
    join(d->path, path, name);
    d->obj = d->type = -1;
    if (H5Lexists(gid, name, H5P_DEFAULT) <= 0) return bad(d->path, "missing");
    H5I_type_t kind;
    SF_TRY(open_member(gid, path, name, &d->obj, &kind));
    if (kind != H5I_DATASET) return bad(d->path, "must be a dataset");
    SF_TRY(dataset_shape(d->obj, d->path, &d->ndim, d->shape, &d->numel));
    d->type = H5Dget_type(d->obj);
    return d->type >= 0 ? SF_OK : bad(d->path, "unreadable type");
}

static void close_dataset(dataset *d)
{
    if (d->type >= 0) H5Tclose(d->type);
    if (d->obj >= 0) H5Oclose(d->obj);
}

/* A scalar string dataset `name` of gid (e.g. a node's type). */
static sf_status read_text(hid_t gid, const char *path, const char *name, char **out)
{
    *out = NULL;
    dataset d;
    sf_status s = open_dataset(gid, path, name, &d);
    if (s == SF_OK && (H5Tget_class(d.type) != H5T_STRING || d.ndim != 0)) s = bad(d.path, "must be a scalar string");
    if (s == SF_OK) s = read_strings(d.obj, d.type, d.path, 1, out);
    close_dataset(&d);
    return s;
}

typedef struct nodes_ctx {
    sf_nir_graph *g;
    int depth;
    budget *b;
} nodes_ctx;

static sf_status visit_node(hid_t obj, H5I_type_t kind, const char *path, const char *name, void *ctx)
{
    nodes_ctx *c = ctx;
    if (kind != H5I_GROUP) return bad(path, "a node must be a group");
    if (--c->b->nodes < 0) return bad(path, "the file holds more nodes than any network needs");
    char *type = NULL;
    SF_TRY(read_text(obj, path, "type", &type));
    sf_nir_node *node = NULL;
    sf_status s = sf_nir_add_node(c->g, name, type, &node);
    if (s != SF_OK) s = sf_fail_context(SF_ERR_FORMAT, "%s: ", path);
    free(type);
    SF_TRY(s);
    fields_ctx fc = {&node->fields, c->b};
    SF_TRY(for_each_member(obj, path, visit_node_member, &fc));
    if (strcmp(node->type, "NIRGraph") != 0) return SF_OK;
    if (c->depth + 1 > SF_NIR_MAX_DEPTH) return bad(path, "subgraphs nested too deeply");
    SF_TRY(sf_nir_graph_create(&node->subgraph));
    return read_graph(obj, path, c->depth + 1, node->subgraph, c->b);
}

/* The edges dataset: [n, 2] node names (an empty numeric array stands for no edges, as h5py writes []). */
static sf_status read_edges(hid_t gid, const char *path, sf_nir_graph *g, budget *b)
{
    dataset d;
    sf_status s = open_dataset(gid, path, "edges", &d);
    char **names = NULL;
    if (s == SF_OK && !(d.numel == 0 && d.ndim == 1) &&
        (H5Tget_class(d.type) != H5T_STRING || d.ndim != 2 || d.shape[1] != 2))
        s = bad(d.path, "must be an [n, 2] array of node names");
    if (s == SF_OK && (d.numel > 2 * (int64_t)SF_NIR_MAX_EDGES || (b->edges -= d.numel / 2) < 0))
        s = bad(d.path, "more edges than any network needs");
    if (s == SF_OK && d.numel > 0) {
        names = calloc((size_t)d.numel, sizeof *names);
        s = names ? read_strings(d.obj, d.type, d.path, d.numel, names) : sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; s == SF_OK && i + 1 < d.numel; i += 2) {
        s = sf_nir_add_edge(g, names[i], names[i + 1]);
        if (s != SF_OK) s = sf_fail_context(s, "%s: ", d.path);
    }
    if (names) free_strings(names, d.numel);
    free(names);
    close_dataset(&d);
    return s;
}

static sf_status read_graph(hid_t gid, const char *path, int depth, sf_nir_graph *g, budget *b)
{
    char sub[PATH_CAP];
    join(sub, path, "nodes");
    if (H5Lexists(gid, "nodes", H5P_DEFAULT) <= 0) return bad(sub, "missing");
    hid_t obj;
    H5I_type_t kind;
    SF_TRY(open_member(gid, path, "nodes", &obj, &kind));
    nodes_ctx c = {g, depth, b};
    sf_status s = kind == H5I_GROUP ? for_each_member(obj, sub, visit_node, &c) : bad(sub, "must be a group");
    H5Oclose(obj);
    SF_TRY(s);
    SF_TRY(read_edges(gid, path, g, b));
    if (H5Lexists(gid, "metadata", H5P_DEFAULT) <= 0) return SF_OK;
    join(sub, path, "metadata");
    SF_TRY(open_member(gid, path, "metadata", &obj, &kind));
    fields_ctx fc = {&g->metadata, b};
    s = kind == H5I_GROUP ? for_each_member(obj, sub, visit_metadata, &fc) : SF_OK;
    H5Oclose(obj);
    return s;
}

/* The root: "version" and the graph in "node". */
static sf_status read_root(hid_t file, sf_nir_graph *g)
{
    char *version = NULL, *type = NULL;
    if (H5Lexists(file, "version", H5P_DEFAULT) > 0) {
        SF_TRY(read_text(file, "", "version", &version));
        snprintf(g->version, sizeof g->version, "%s", version);
        free(version);
    }
    if (H5Lexists(file, "node", H5P_DEFAULT) <= 0) return bad("node", "missing: not a NIR file");
    hid_t obj;
    H5I_type_t kind;
    SF_TRY(open_member(file, "", "node", &obj, &kind));
    sf_status s = kind == H5I_GROUP ? read_text(obj, "node", "type", &type) : bad("node", "must be a group");
    if (s == SF_OK && strcmp(type, "NIRGraph") != 0) s = sf_fail(SF_ERR_FORMAT, "node/type is '%s', not NIRGraph", type);
    budget b = {BUDGET_NODES, BUDGET_EDGES, BUDGET_ELEMENTS};
    if (s == SF_OK) s = read_graph(obj, "node", 0, g, &b);
    free(type);
    H5Oclose(obj);
    return s;
}

sf_status sf_nir_read_memory(const void *data, size_t len, const char *name, sf_nir_graph **out)
{
    *out = NULL;
    if (len < 8 || memcmp(data, "\211HDF\r\n\032\n", 8) != 0)
        return sf_fail(SF_ERR_FORMAT, "%s: not an HDF5 file (a NIR graph is one)", name);
    sf_nir_graph *g = NULL;
    SF_TRY(sf_nir_graph_create(&g));
    h5_quiet q = quiet_begin();
    sf_status s = SF_OK;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), file = -1;
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 || H5Pset_file_image(fapl, (void *)data, len) < 0)
        s = sf_fail(SF_ERR_NOMEM, "%s: libhdf5 could not take the file image", name);
    if (s == SF_OK && (file = H5Fopen(IMAGE_NAME, H5F_ACC_RDONLY, fapl)) < 0)
        s = sf_fail(SF_ERR_FORMAT, "%s: libhdf5 cannot open it (corrupt or truncated HDF5)", name);
    if (s == SF_OK) {
        s = read_root(file, g);
        if (s != SF_OK) s = sf_fail_context(s, "%s: ", name);
    }
    if (file >= 0) H5Fclose(file);
    if (fapl >= 0) H5Pclose(fapl);
    quiet_end(q);
    if (s != SF_OK) {
        sf_nir_graph_free(g);
        return s;
    }
    *out = g;
    return SF_OK;
}

sf_status sf_nir_read(const char *path, sf_nir_graph **out)
{
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    SF_TRY(sf_read_file(path, NIR_MAX_FILE_BYTES, &buf, &len));
    sf_status s = sf_nir_read_memory(buf, len, path, out);
    free(buf);
    return s;
}

/* ================================================================ writing */

static sf_status h5_check(int failed, const char *what)
{
    return failed ? sf_fail(SF_ERR_IO, "libhdf5 failed writing %s", what) : SF_OK;
}

/* Writes `n` strings as a dataset of variable-length UTF-8 strings (a scalar when ndim is 0), as h5py does. */
static sf_status write_strings(hid_t loc, const char *name, int ndim, const hsize_t *dims, const char *const *text)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    int failed = t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0;
    hid_t sp = failed ? -1 : ndim ? H5Screate_simple(ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t ds = sp < 0 ? -1 : H5Dcreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    failed = ds < 0 || H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, text) < 0;
    if (ds >= 0) H5Dclose(ds);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return h5_check(failed, name);
}

/* Chunks for a compressed array: the whole array, with the first dimension split to keep a chunk at most
 * CHUNK_MAX_BYTES (libhdf5 refuses chunks of 4 GiB or more). */
static void chunk_dims(const sf_nir_field *f, hsize_t *chunk)
{
    int64_t row = 8;
    for (int32_t d = 1; d < f->ndim; d++) row *= f->shape[d];
    int64_t rows = row > CHUNK_MAX_BYTES ? 1 : CHUNK_MAX_BYTES / row;
    for (int32_t d = 0; d < f->ndim; d++) chunk[d] = (hsize_t)f->shape[d];
    if ((int64_t)chunk[0] > rows) chunk[0] = (hsize_t)rows;
}

static sf_status write_field(hid_t loc, const sf_nir_field *f)
{
    if (f->dtype == SF_NIR_STRING) return write_strings(loc, f->name, 0, NULL, (const char *const *)&f->text);
    hid_t ftype = f->dtype == SF_NIR_F32 ? H5T_IEEE_F32LE : f->dtype == SF_NIR_F64 ? H5T_IEEE_F64LE : H5T_STD_I64LE;
    hsize_t dims[SF_NIR_MAX_DIMS], chunk[SF_NIR_MAX_DIMS];
    for (int32_t d = 0; d < f->ndim; d++) dims[d] = (hsize_t)f->shape[d];
    hid_t sp = f->ndim ? H5Screate_simple(f->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int failed = sp < 0 || dcpl < 0;
    if (!failed && f->ndim && f->numel) {
        chunk_dims(f, chunk);
        failed = H5Pset_chunk(dcpl, f->ndim, chunk) < 0 || H5Pset_deflate(dcpl, DEFLATE_LEVEL) < 0;
    }
    hid_t ds = failed ? -1 : H5Dcreate2(loc, f->name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    failed = ds < 0 || (f->numel && H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, f->values) < 0);
    if (ds >= 0) H5Dclose(ds);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    return h5_check(failed, f->name);
}

static sf_status write_fields(hid_t loc, const sf_nir_fields *f)
{
    for (int32_t i = 0; i < f->count; i++) SF_TRY(write_field(loc, &f->items[i]));
    return SF_OK;
}

/* A new group `name` in loc, passed to fn and closed. */
static sf_status in_group(hid_t loc, const char *name, sf_status (*fn)(hid_t, const void *), const void *arg)
{
    hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return h5_check(1, name);
    sf_status s = fn(g, arg);
    H5Gclose(g);
    return s;
}

static sf_status write_graph(hid_t loc, const void *arg);

static sf_status write_node(hid_t loc, const void *arg)
{
    const sf_nir_node *n = arg;
    SF_TRY(write_fields(loc, &n->fields));
    if (n->subgraph) return write_graph(loc, n->subgraph); /* it writes the type, "NIRGraph" */
    return write_strings(loc, "type", 0, NULL, (const char *const *)&n->type);
}

static sf_status write_nodes(hid_t loc, const void *arg)
{
    const sf_nir_graph *g = arg;
    for (int32_t i = 0; i < g->num_nodes; i++) SF_TRY(in_group(loc, g->nodes[i].name, write_node, &g->nodes[i]));
    return SF_OK;
}

static sf_status write_metadata(hid_t loc, const void *arg) { return write_fields(loc, arg); }

static sf_status write_graph(hid_t loc, const void *arg)
{
    const sf_nir_graph *g = arg;
    const char *type = "NIRGraph";
    SF_TRY(write_strings(loc, "type", 0, NULL, &type));
    SF_TRY(in_group(loc, "nodes", write_nodes, g));
    const char **names = malloc((size_t)(g->num_edges ? g->num_edges : 1) * 2 * sizeof *names);
    if (!names) return sf_fail(SF_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < g->num_edges; i++) {
        names[2 * i] = g->nodes[g->edges[i].from].name;
        names[2 * i + 1] = g->nodes[g->edges[i].to].name;
    }
    hsize_t dims[2] = {(hsize_t)g->num_edges, 2};
    sf_status s = write_strings(loc, "edges", 2, dims, names);
    free(names);
    SF_TRY(s);
    return g->metadata.count ? in_group(loc, "metadata", write_metadata, &g->metadata) : SF_OK;
}

/* The whole file as an in-memory image (malloc'd). */
static sf_status write_image(const sf_nir_graph *g, const char *version, void **image, size_t *len)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0) {
        if (fapl >= 0) H5Pclose(fapl);
        return h5_check(1, "the file");
    }
    hid_t file = H5Fcreate(IMAGE_NAME, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (file < 0) return h5_check(1, "the file");
    sf_status s = write_strings(file, "version", 0, NULL, &version);
    if (s == SF_OK) s = in_group(file, "node", write_graph, g);
    if (s == SF_OK && H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) s = h5_check(1, "the file");
    ssize_t n = s == SF_OK ? H5Fget_file_image(file, NULL, 0) : -1;
    if (s == SF_OK && n <= 0) s = h5_check(1, "the file image");
    if (s == SF_OK && !(*image = malloc((size_t)n))) s = sf_fail(SF_ERR_NOMEM, "out of memory");
    if (s == SF_OK && H5Fget_file_image(file, *image, (size_t)n) != n) s = h5_check(1, "the file image");
    if (s == SF_OK) *len = (size_t)n;
    H5Fclose(file);
    return s;
}

sf_status sf_nir_write(const sf_nir_graph *g, const char *version, const char *path)
{
    void *image = NULL;
    size_t len = 0;
    h5_quiet q = quiet_begin();
    sf_status s = write_image(g, version, &image, &len);
    quiet_end(q);
    if (s == SF_OK) s = sf_write_file_atomic(path, image, len);
    free(image);
    return s == SF_OK ? s : sf_fail_context(s, "writing %s: ", path);
}
