/* nir_graph.c — NIR graphs in memory: nodes with named fields, edges, lookups and freeing. */
#include "io/nir.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

sf_status sf_nir_graph_create(sf_nir_graph **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory");
}

static void field_clear(sf_nir_field *f)
{
    free(f->name);
    free(f->values);
    free(f->text);
    memset(f, 0, sizeof *f);
}

static void fields_free(sf_nir_fields *f)
{
    for (int32_t i = 0; i < f->count; i++) field_clear(&f->items[i]);
    free(f->items);
    f->items = NULL;
    f->count = 0;
}

void sf_nir_graph_free(sf_nir_graph *g)
{
    if (!g) return;
    for (int32_t i = 0; i < g->num_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].type);
        fields_free(&g->nodes[i].fields);
        sf_nir_graph_free(g->nodes[i].subgraph);
    }
    free(g->nodes);
    free(g->edges);
    fields_free(&g->metadata);
    free(g);
}

int32_t sf_nir_graph_nodes(const sf_nir_graph *g) { return g->num_nodes; }

int32_t sf_nir_graph_edges(const sf_nir_graph *g) { return g->num_edges; }

int32_t sf_nir_find_node(const sf_nir_graph *g, const char *name)
{
    for (int32_t i = 0; i < g->num_nodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return i;
    return -1;
}

const sf_nir_field *sf_nir_field_of(const sf_nir_fields *f, const char *name)
{
    for (int32_t i = 0; i < f->count; i++)
        if (strcmp(f->items[i].name, name) == 0) return &f->items[i];
    return NULL;
}

sf_status sf_nir_add_node(sf_nir_graph *g, const char *name, const char *type, sf_nir_node **out)
{
    if (!name[0] || strlen(name) >= SF_NIR_MAX_NAME) return sf_fail(SF_ERR_INVALID, "NIR node name '%s' is empty or too long", name);
    if (sf_nir_find_node(g, name) >= 0) return sf_fail(SF_ERR_INVALID, "NIR node '%s' exists already", name);
    if (g->num_nodes >= SF_NIR_MAX_NODES) return sf_fail(SF_ERR_INVALID, "more than %d NIR nodes", SF_NIR_MAX_NODES);
    sf_nir_node *nodes = realloc(g->nodes, (size_t)(g->num_nodes + 1) * sizeof *nodes);
    if (!nodes) return sf_fail(SF_ERR_NOMEM, "out of memory");
    g->nodes = nodes;
    sf_nir_node *n = &nodes[g->num_nodes];
    memset(n, 0, sizeof *n);
    n->name = strdup(name);
    n->type = strdup(type);
    if (!n->name || !n->type) {
        free(n->name);
        free(n->type);
        return sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    g->num_nodes++;
    if (out) *out = n;
    return SF_OK;
}

sf_status sf_nir_add_edge(sf_nir_graph *g, const char *from, const char *to)
{
    int32_t a = sf_nir_find_node(g, from), b = sf_nir_find_node(g, to);
    if (a < 0 || b < 0)
        return sf_fail(SF_ERR_FORMAT, "edge %s -> %s names a node that is not in the graph", from, to);
    if (g->num_edges >= SF_NIR_MAX_EDGES) return sf_fail(SF_ERR_FORMAT, "more than %d NIR edges", SF_NIR_MAX_EDGES);
    for (int32_t i = 0; i < g->num_edges; i++)
        if (g->edges[i].from == a && g->edges[i].to == b)
            return sf_fail(SF_ERR_FORMAT, "edge %s -> %s is given twice", from, to);
    sf_nir_edge *e = realloc(g->edges, (size_t)(g->num_edges + 1) * sizeof *e);
    if (!e) return sf_fail(SF_ERR_NOMEM, "out of memory");
    g->edges = e;
    e[g->num_edges++] = (sf_nir_edge){a, b};
    return SF_OK;
}

void sf_nir_unset(sf_nir_fields *f, const char *name)
{
    for (int32_t i = 0; i < f->count; i++)
        if (strcmp(f->items[i].name, name) == 0) {
            field_clear(&f->items[i]);
            f->items[i] = f->items[--f->count];
            return;
        }
}

/* A fresh field named `name` at the end of f (an existing one of that name is removed first). */
static sf_status new_field(sf_nir_fields *f, const char *name, sf_nir_field **out)
{
    sf_nir_unset(f, name);
    if (f->count >= SF_NIR_MAX_FIELDS) return sf_fail(SF_ERR_INVALID, "more than %d fields", SF_NIR_MAX_FIELDS);
    sf_nir_field *items = realloc(f->items, (size_t)(f->count + 1) * sizeof *items);
    if (!items) return sf_fail(SF_ERR_NOMEM, "out of memory");
    f->items = items;
    sf_nir_field *x = &items[f->count];
    memset(x, 0, sizeof *x);
    if (!(x->name = strdup(name))) return sf_fail(SF_ERR_NOMEM, "out of memory");
    f->count++;
    *out = x;
    return SF_OK;
}

/* A numeric field with its shape and an allocated, unfilled value array. */
static sf_status new_numeric(sf_nir_fields *f, const char *name, sf_nir_dtype dtype, int32_t ndim,
                             const int64_t *shape, sf_nir_field **out)
{
    if (ndim < 0 || ndim > SF_NIR_MAX_DIMS) return sf_fail(SF_ERR_INVALID, "field %s: %d dimensions", name, ndim);
    int64_t numel = 1;
    for (int32_t d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && numel > SF_NIR_MAX_ELEMENTS / shape[d]))
            return sf_fail(SF_ERR_INVALID, "field %s: shape too large", name);
        numel *= shape[d];
    }
    sf_nir_field *x = NULL;
    SF_TRY(new_field(f, name, &x));
    x->dtype = dtype;
    x->ndim = ndim;
    for (int32_t d = 0; d < ndim; d++) x->shape[d] = shape[d];
    x->numel = numel;
    x->values = malloc((size_t)(numel ? numel : 1) * sizeof *x->values);
    if (!x->values) {
        sf_nir_unset(f, name);
        return sf_fail(SF_ERR_NOMEM, "out of memory for field %s", name);
    }
    *out = x;
    return SF_OK;
}

sf_status sf_nir_set(sf_nir_fields *f, const char *name, sf_nir_dtype dtype, int32_t ndim, const int64_t *shape,
                     const double *values)
{
    sf_nir_field *x = NULL;
    SF_TRY(new_numeric(f, name, dtype, ndim, shape, &x));
    memcpy(x->values, values, (size_t)x->numel * sizeof *x->values);
    return SF_OK;
}

sf_status sf_nir_set_f32(sf_nir_fields *f, const char *name, int32_t ndim, const int64_t *shape, const float *values)
{
    sf_nir_field *x = NULL;
    SF_TRY(new_numeric(f, name, SF_NIR_F32, ndim, shape, &x));
    for (int64_t i = 0; i < x->numel; i++) x->values[i] = values[i];
    return SF_OK;
}

sf_status sf_nir_set_text(sf_nir_fields *f, const char *name, const char *text)
{
    sf_nir_field *x = NULL;
    SF_TRY(new_field(f, name, &x));
    x->dtype = SF_NIR_STRING;
    if (!(x->text = strdup(text))) {
        sf_nir_unset(f, name);
        return sf_fail(SF_ERR_NOMEM, "out of memory");
    }
    return SF_OK;
}
