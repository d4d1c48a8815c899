/* choices.c — the run directory's record of a network's measured decisions (choices.h). */
#include "train/choices.h"

#include "core/error.h"
#include "io/files.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHOICES_MAGIC "spikefuse-choices 1"
#define CHOICES_MAX_BYTES ((size_t)1 << 20)

static const char *device_kind_name(sf_device d) { return d.kind == SF_DEVICE_CUDA ? "cuda" : "cpu"; }

/* The layers of the compiled net as sf_net_layer_sparsity reports them, malloc'd (*n of them). */
static sf_status layer_choices(const sf_net *net, sf_layer_sparsity **out, int32_t *n)
{
    *n = sf_net_num_layers(net);
    *out = malloc((size_t)(*n > 0 ? *n : 1) * sizeof **out);
    if (!*out) return sf_fail(SF_ERR_NOMEM, "out of memory reading the network's choices");
    sf_net_layer_sparsity(net, *out, *n);
    return SF_OK;
}

static int chooses(const sf_layer_sparsity *q) { return q->eligible && q->mode == SF_SPARSE_AUTO; }

/* The net's convolution choices, each line prefixed "conv " by the backend, appended to the malloc'd text. */
static sf_status append_conv_choices(const sf_net *net, char **text, size_t *len)
{
    size_t n = 0;
    SF_TRY(sf_net_conv_choices(net, NULL, 0, &n));
    if (n == 0) return SF_OK;
    char *grown = realloc(*text, *len + n + 1);
    if (!grown) return sf_fail(SF_ERR_NOMEM, "out of memory writing the network's choices");
    *text = grown;
    SF_TRY(sf_net_conv_choices(net, grown + *len, n + 1, &n));
    *len += n;
    return SF_OK;
}

sf_status sf_choices_write(const sf_net *net, const char *path)
{
    sf_layer_sparsity *q = NULL;
    int32_t n = 0;
    SF_TRY(layer_choices(net, &q, &n));
    sf_net_params p;
    sf_net_get_params(net, &p);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sf_status s = f ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory writing %s", path);
    if (f) {
        fprintf(f, "%s\ndevice %s\nprecision %s\n", CHOICES_MAGIC, device_kind_name(p.device),
                sf_precision_name(p.precision));
        for (int32_t i = 0; i < n; i++)
            if (chooses(&q[i]))
                fprintf(f, "sparse %d %.9g %.9g\n", (int)i, (double)q[i].crossover_forward,
                        (double)q[i].crossover_backward);
        if (fclose(f) != 0 || !text) s = sf_fail(SF_ERR_NOMEM, "out of memory writing %s", path);
    }
    if (s == SF_OK) s = append_conv_choices(net, &text, &len);
    if (s == SF_OK) s = sf_write_file_atomic(path, text, len);
    free(text);
    free(q);
    return s;
}

/* A density in [0, 1] at *at, which moves past it. */
static int density(char **at, float *out)
{
    char *end;
    errno = 0;
    *out = strtof(*at, &end);
    if (end == *at || errno || !(*out >= 0.0f && *out <= 1.0f)) return 0;
    *at = end;
    return 1;
}

/* One "sparse LAYER XFWD XBWD" line applied to layer LAYER of `net` (its densities stay the net's). */
static sf_status apply_sparse(char *args, const sf_layer_sparsity *q, int32_t n, char *seen, sf_net *net)
{
    char *at;
    errno = 0;
    const long layer = strtol(args, &at, 10);
    sf_layer_sparsity rec;
    if (at == args || errno || layer < 0 || layer >= n || !density(&at, &rec.crossover_forward) ||
        !density(&at, &rec.crossover_backward) || *at)
        return sf_fail(SF_ERR_FORMAT, "expected 'sparse LAYER XFWD XBWD' (densities in [0, 1])");
    if (!chooses(&q[layer]) || seen[layer])
        return sf_fail(SF_ERR_FORMAT, "layer %ld %s", layer,
                       seen[layer] ? "is recorded twice" : "does not choose its path (sparse = auto) in this network");
    seen[layer] = 1;
    rec.density = q[layer].density;
    rec.grad_density = q[layer].grad_density;
    return sf_net_set_layer_sparsity(net, (int32_t)layer, &rec);
}

/* The lines of a choices file applied to `net`: a header naming the device and precision, then the decisions;
 * `conv` takes the convolution lines (the net not yet compiled), else the sparse ones (compiled). */
static sf_status apply_text(char *text, sf_net *net, bool conv, char *note, size_t cap)
{
    sf_layer_sparsity *q = NULL;
    int32_t n = 0;
    if (!conv) SF_TRY(layer_choices(net, &q, &n));
    char *seen = calloc((size_t)(n > 0 ? n : 1), 1);
    sf_net_params p;
    sf_net_get_params(net, &p);
    char want_device[16], want_precision[16];
    snprintf(want_device, sizeof want_device, "device %s", device_kind_name(p.device));
    snprintf(want_precision, sizeof want_precision, "precision %s", sf_precision_name(p.precision));
    sf_status s = seen ? SF_OK : sf_fail(SF_ERR_NOMEM, "out of memory applying the run's choices");
    int line = 0, here = 1;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); s == SF_OK && l && here; l = strtok_r(NULL, "\n", &save)) {
        line++;
        if (line == 1) {
            if (strcmp(l, CHOICES_MAGIC) != 0) s = sf_fail(SF_ERR_FORMAT, "it does not start with '%s'", CHOICES_MAGIC);
        } else if (strncmp(l, "device ", 7) == 0) {
            here = strcmp(l, want_device) == 0;
        } else if (strncmp(l, "precision ", 10) == 0) {
            here = strcmp(l, want_precision) == 0;
        } else if (strncmp(l, "sparse ", 7) == 0) {
            if (!conv) s = apply_sparse(l + 7, q, n, seen, net);
        } else if (strncmp(l, "conv ", 5) == 0) {
            if (conv) s = sf_net_set_conv_choice(net, l);
        } else {
            s = sf_fail(SF_ERR_FORMAT, "unknown line '%.60s'", l);
        }
        if (s != SF_OK) s = sf_fail_context(s, "line %d: ", line);
    }
    if (s == SF_OK && !here && !conv)
        snprintf(note, cap, "the run's choices were measured on another device kind or precision: this run on %s in "
                 "%s measured its own", device_kind_name(p.device), sf_precision_name(p.precision));
    for (int32_t i = 0; s == SF_OK && here && i < n; i++)
        if (chooses(&q[i]) && !seen[i])
            s = sf_fail(SF_ERR_FORMAT, "layer %d chooses its path (sparse = auto) but has no recorded choice", (int)i);
    free(seen);
    free(q);
    return s;
}

static sf_status apply_file(const char *path, sf_net *net, bool conv, char *note, size_t cap)
{
    if (cap) note[0] = 0;
    if (!sf_path_exists(path)) return SF_OK;
    char *text = NULL;
    SF_TRY(sf_read_file(path, CHOICES_MAX_BYTES, &text, NULL));
    sf_status s = apply_text(text, net, conv, note, cap);
    free(text);
    return s == SF_OK ? s : sf_fail_context(s, "%s: ", path);
}

sf_status sf_choices_apply_conv(const char *path, sf_net *net) { return apply_file(path, net, true, NULL, 0); }

sf_status sf_choices_apply(const char *path, sf_net *net, char *note, size_t cap)
{
    return apply_file(path, net, false, note, cap);
}
