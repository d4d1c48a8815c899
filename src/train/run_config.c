/* run_config.c — configs of existing runs and the same-run check behind --resume. */
#include "spikefuse_train.h"

#include "core/error.h"
#include "train/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sf_status sf_checkpoint_config(const char *checkpoint_path, sf_config **out)
{
    *out = NULL;
    sf_safetensors *st = NULL;
    sf_checkpoint_info info;
    SF_TRY(sf_checkpoint_open(checkpoint_path, &st, &info));
    char name[4200];
    snprintf(name, sizeof name, "%s (its config)", checkpoint_path);
    sf_status s = sf_config_parse_string(info.config, name, out);
    sf_safetensors_free(st);
    return s;
}

/* Copies into `dst` the settings a continuation may change. */
static void copy_changeable(sf_config *dst, const sf_config *src)
{
    dst->train.epochs = src->train.epochs;
    memcpy(dst->train.data_dir, src->train.data_dir, sizeof dst->train.data_dir);
    memcpy(dst->train.data_cache, src->train.data_cache, sizeof dst->train.data_cache);
    dst->train.log_every = src->train.log_every;
    dst->train.threads = src->train.threads;
    dst->net.device = src->net.device;
}

/* A copy of an INI text without its comment lines (the writer names the file a config came from in one). */
static char *without_comments(const char *text)
{
    char *out = malloc(strlen(text) + 1);
    if (!out) return NULL;
    char *o = out;
    while (*text) {
        size_t n = strcspn(text, "\n");
        if (text[0] != ';' && text[0] != '#') {
            memcpy(o, text, n);
            o += n;
            *o++ = '\n';
        }
        text += n + (text[n] != 0);
    }
    *o = 0;
    return out;
}

/* The first line where two texts differ, copied into a/b (for the message). */
static void first_difference(const char *x, const char *y, char *a, char *b, size_t cap)
{
    while (*x && *y) {
        size_t nx = strcspn(x, "\n"), ny = strcspn(y, "\n");
        if (nx != ny || memcmp(x, y, nx) != 0) break;
        x += nx + (x[nx] != 0);
        y += ny + (y[ny] != 0);
    }
    snprintf(a, cap, "%.*s", (int)strcspn(x, "\n"), x);
    snprintf(b, cap, "%.*s", (int)strcspn(y, "\n"), y);
}

sf_status sf_config_check_same_run(const sf_config *saved, const sf_config *wanted)
{
    char *saved_text = NULL, *wanted_text = NULL, *aligned_text = NULL;
    sf_config *aligned = NULL;
    sf_status s = sf_config_write(saved, &saved_text);
    if (s == SF_OK) s = sf_config_write(wanted, &wanted_text);
    /* Parse the wanted config back and give it the saved run's changeable settings: what remains must match. */
    if (s == SF_OK) s = sf_config_parse_string(wanted_text, wanted->source, &aligned);
    if (s == SF_OK) {
        copy_changeable(aligned, saved);
        s = sf_config_write(aligned, &aligned_text);
    }
    char *x = s == SF_OK ? without_comments(saved_text) : NULL, *y = s == SF_OK ? without_comments(aligned_text) : NULL;
    if (s == SF_OK && (!x || !y)) s = sf_fail(SF_ERR_NOMEM, "out of memory");
    if (s == SF_OK && strcmp(x, y) != 0) {
        char a[256], b[256];
        first_difference(x, y, a, b, sizeof a);
        s = sf_fail(SF_ERR_INVALID,
                    "this config is not the run being resumed: it has '%s' where the run has '%s' (a resumed run "
                    "may change only train.epochs, train.data_dir, train.data_cache, train.log_every, train.threads "
                    "and the device)",
                    b, a);
    }
    sf_config_free(aligned);
    free(x);
    free(y);
    free(saved_text);
    free(wanted_text);
    free(aligned_text);
    return s;
}
