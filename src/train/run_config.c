/* run_config.c — configs of existing runs and the same-run check behind --resume. */
#include "spikefuse_train.h"

#include "core/error.h"
#include "train/run_config.h"
#include "io/files.h"
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
    dst->train.data_threads = src->train.data_threads;
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
                    "may change only train.epochs, train.data_dir, train.data_cache, train.log_every, train.threads, "
                    "train.data_threads and the device)",
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

#define CONFIG_FILE_MAX_BYTES ((size_t)1 << 20)

/* A config text as the writer puts it, without comments: two texts that say the same give the same one. With `cfg`,
 * the parsed config too. */
static sf_status canonical(const char *text, const char *name, sf_config **cfg, char **out)
{
    sf_config *c = NULL;
    char *written = NULL;
    *out = NULL;
    SF_TRY(sf_config_parse_string(text, name, &c));
    sf_status s = sf_config_write(c, &written);
    if (s == SF_OK && !(*out = without_comments(written))) s = sf_fail(SF_ERR_NOMEM, "out of memory");
    free(written);
    if (s == SF_OK && cfg) *cfg = c;
    else sf_config_free(c);
    return s;
}

/* DIR/config.ini's text into *text (NULL when there is none). */
static sf_status read_config_file(const char *dir, char *path, size_t cap, char **text)
{
    *text = NULL;
    SF_TRY(sf_path_join(path, cap, dir, SF_RUN_CONFIG));
    return sf_path_exists(path) ? sf_read_file(path, CONFIG_FILE_MAX_BYTES, text, NULL) : SF_OK;
}

sf_status sf_run_config_file_check(const char *dir, const char *run_text, char *note, size_t cap)
{
    if (cap) note[0] = 0;
    char path[4096], *text = NULL;
    SF_TRY(read_config_file(dir, path, sizeof path, &text));
    if (!text || strcmp(text, run_text) == 0) {
        free(text);
        return SF_OK;
    }
    sf_config *run = NULL, *file = NULL;
    char *want = NULL, *have = NULL, a[256] = "", b[256] = "";
    sf_status s = canonical(run_text, "the run's recorded config", &run, &want);
    const sf_status parsed = s == SF_OK ? canonical(text, path, &file, &have) : s;
    if (parsed == SF_OK) first_difference(want, have, a, b, sizeof a);
    if (s == SF_OK && parsed != SF_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", sf_last_error());
        s = sf_fail(SF_ERR_INVALID,
                    "%s no longer reads as a config (%s): --resume continues the run with the config recorded in "
                    "%s/%s and rewrites config.ini; restore or delete it to continue the run as it was",
                    path, why, dir, SF_RUN_LAST);
    } else if (s == SF_OK && strcmp(want, have) != 0 && sf_config_check_same_run(run, file) == SF_OK) {
        snprintf(note, cap, "%s has '%s' where the run has '%s': --resume continues with the config recorded in %s "
                 "and rewrites config.ini (change such a setting with --set)", path, b, a, SF_RUN_LAST);
    } else if (s == SF_OK && strcmp(want, have) != 0) {
        s = sf_fail(SF_ERR_INVALID,
                    "%s was edited: it has '%s' where the run has '%s'. --resume continues a run with the config "
                    "recorded in %s/%s and would lose the edit (it rewrites config.ini): undo the edit or delete "
                    "config.ini to continue the run as it was; to train with the edited config, start a new run from "
                    "this state: spikefuse train %s --set train.init=%s/%s --out NEW_DIR",
                    path, b, a, dir, SF_RUN_LAST, path, dir, SF_RUN_LAST);
    }
    sf_config_free(run);
    sf_config_free(file);
    free(want);
    free(have);
    free(text);
    return s;
}

sf_status sf_run_config_file_same(const char *dir, const char *text)
{
    char path[4096], *file = NULL, *a = NULL, *b = NULL;
    SF_TRY(read_config_file(dir, path, sizeof path, &file));
    const int same = file && canonical(text, "config", NULL, &a) == SF_OK && canonical(file, path, NULL, &b) == SF_OK &&
                     strcmp(a, b) == 0;
    free(file);
    free(a);
    free(b);
    return same ? SF_OK : SF_ERR_STATE;
}
