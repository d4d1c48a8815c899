/* nir.h — NIR graphs (Pedersen et al. 2024) in memory and in the `nir` package's HDF5 files (nir_h5.c). A graph:
 * named nodes, each with a type ("Affine", "LIF", ...) and named fields (numeric arrays or strings), and edges
 * between node names; a node's input is the sum of its predecessors' outputs. Any type and field is held: their
 * meaning is config/config_nir.h's business. */
#ifndef SF_IO_NIR_H
#define SF_IO_NIR_H

#include "spikefuse_train.h"

#include <stddef.h>
#include <stdint.h>

#define SF_NIR_MAX_DIMS 8
/* What a file may hold before it is refused as implausible (each is far above any real network). */
#define SF_NIR_MAX_NODES 4096
#define SF_NIR_MAX_EDGES 16384
#define SF_NIR_MAX_FIELDS 64
#define SF_NIR_MAX_NAME 256
#define SF_NIR_MAX_DEPTH 8
#define SF_NIR_MAX_ELEMENTS (INT64_C(1) << 30)

/* How a numeric field is stored in the file; in memory every number is a double (exact for float32 and for
 * integers up to 2^53). */
typedef enum sf_nir_dtype { SF_NIR_F32 = 0, SF_NIR_F64, SF_NIR_I64, SF_NIR_STRING } sf_nir_dtype;

typedef struct sf_nir_field {
    char *name;
    sf_nir_dtype dtype;
    int32_t ndim; /* 0: a scalar */
    int64_t shape[SF_NIR_MAX_DIMS];
    int64_t numel;
    double *values; /* numel numbers (NULL for a string) */
    char *text;     /* SF_NIR_STRING: the string */
} sf_nir_field;

typedef struct sf_nir_fields {
    sf_nir_field *items;
    int32_t count;
} sf_nir_fields;

typedef struct sf_nir_node {
    char *name;
    char *type;
    sf_nir_fields fields;
    sf_nir_graph *subgraph; /* type "NIRGraph": the nested graph */
} sf_nir_node;

typedef struct sf_nir_edge {
    int32_t from, to; /* node indices */
} sf_nir_edge;

struct sf_nir_graph {
    sf_nir_node *nodes;
    int32_t num_nodes;
    sf_nir_edge *edges;
    int32_t num_edges;
    sf_nir_fields metadata; /* the graph's "metadata" group: scalars and strings */
    char version[32];       /* the file's "version" (root graph only) */
};

/* An empty graph (sf_nir_graph_free, sf_nir_read and sf_nir_write: include/spikefuse_train.h). */
sf_status sf_nir_graph_create(sf_nir_graph **out);

/* Appends a node; its name must be new and not empty. *out (optional) points at it until the next append. */
sf_status sf_nir_add_node(sf_nir_graph *g, const char *name, const char *type, sf_nir_node **out);
/* Appends the edge from -> to (node names); a repeated edge is refused, as NIR refuses it. */
sf_status sf_nir_add_edge(sf_nir_graph *g, const char *from, const char *to);
/* Sets (or replaces) a numeric field from `numel` doubles or floats, with the given shape. */
sf_status sf_nir_set(sf_nir_fields *f, const char *name, sf_nir_dtype dtype, int32_t ndim, const int64_t *shape,
                     const double *values);
sf_status sf_nir_set_f32(sf_nir_fields *f, const char *name, int32_t ndim, const int64_t *shape, const float *values);
sf_status sf_nir_set_text(sf_nir_fields *f, const char *name, const char *text);
/* Removes a field if present. */
void sf_nir_unset(sf_nir_fields *f, const char *name);

/* Index of the node named `name`, or -1. */
int32_t sf_nir_find_node(const sf_nir_graph *g, const char *name);
/* The field named `name`, or NULL. */
const sf_nir_field *sf_nir_field_of(const sf_nir_fields *f, const char *name);

/* Reads a whole NIR file held in memory as sf_nir_read reads a file: every node's fields whatever its type; node
 * groups named "metadata" are skipped; edges must name existing nodes. Malformed content is SF_ERR_FORMAT naming
 * the HDF5 path of what is wrong ("node/nodes/fc/weight: ..."). */
sf_status sf_nir_read_memory(const void *data, size_t len, const char *name, sf_nir_graph **out);

#endif
