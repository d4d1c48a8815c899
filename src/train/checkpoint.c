/* checkpoint.c — saving and restoring a net with its training state through safetensors. */
#include "train/checkpoint.h"

#include "core/error.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SF_CHECKPOINT_FORMAT "spikefuse-checkpoint"

static const sf_tensor_role saved_roles[] = {SF_ROLE_PARAM, SF_ROLE_BUFFER, SF_ROLE_OPTIMIZER};

static sf_status add_role(sf_st_writer *w, const sf_net *net, sf_tensor_role role)
{
    int32_t n = sf_net_tensor_count(net, role);
    for (int32_t i = 0; i < n; i++) {
        sf_tensor_info ti;
        SF_TRY(sf_net_tensor_info(net, role, i, &ti));
        float *buf = malloc((size_t)(ti.numel ? ti.numel : 1) * sizeof *buf);
        if (!buf) return sf_fail(SF_ERR_NOMEM, "out of memory saving tensor %s", ti.name);
        sf_status s = sf_net_tensor_read(net, role, i, buf);
        if (s == SF_OK) s = sf_st_writer_add(w, ti.name, SF_DT_F32, ti.ndim, ti.shape, buf);
        free(buf);
        SF_TRY(s);
    }
    return SF_OK;
}

static sf_status meta_i64(sf_st_writer *w, const char *key, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return sf_st_writer_meta(w, key, buf);
}

static sf_status meta_u64(sf_st_writer *w, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return sf_st_writer_meta(w, key, buf);
}

static sf_status fill_writer(sf_st_writer *w, const sf_net *net, const sf_checkpoint_info *info)
{
    for (size_t r = 0; r < sizeof saved_roles / sizeof saved_roles[0]; r++) SF_TRY(add_role(w, net, saved_roles[r]));
    sf_net_state st;
    SF_TRY(sf_net_get_state(net, &st));
    char best[32];
    snprintf(best, sizeof best, "%.17g", info->best_metric);
    SF_TRY(sf_st_writer_meta(w, "format", SF_CHECKPOINT_FORMAT));
    SF_TRY(meta_i64(w, "format_version", SF_CHECKPOINT_VERSION));
    SF_TRY(sf_st_writer_meta(w, "spikefuse_version", sf_version()));
    SF_TRY(sf_st_writer_meta(w, "config", info->config ? info->config : ""));
    SF_TRY(meta_i64(w, "epoch", info->epoch));
    SF_TRY(meta_i64(w, "step", info->step));
    SF_TRY(meta_i64(w, "optimizer_steps", st.optimizer_steps));
    SF_TRY(meta_u64(w, "rng_seed", st.rng_seed));
    SF_TRY(meta_u64(w, "rng_counter", st.rng_counter));
    char scale[32];
    snprintf(scale, sizeof scale, "%.9g", (double)st.loss_scale);
    SF_TRY(sf_st_writer_meta(w, "loss_scale", scale));
    SF_TRY(meta_i64(w, "loss_scale_steps", st.loss_scale_steps));
    SF_TRY(sf_st_writer_meta(w, "loader_state", info->loader_state ? info->loader_state : ""));
    SF_TRY(meta_i64(w, "best_step", info->best_step));
    return sf_st_writer_meta(w, "best_metric", best);
}

sf_status sf_checkpoint_save(const sf_net *net, const sf_checkpoint_info *info, const char *path)
{
    sf_st_writer *w = NULL;
    SF_TRY(sf_st_writer_create(&w));
    sf_status s = fill_writer(w, net, info);
    if (s == SF_OK) s = sf_st_writer_save(w, path);
    sf_st_writer_free(w);
    return s == SF_OK ? s : sf_fail_context(s, "saving checkpoint %s: ", path);
}

/* Parses a decimal metadata field into *i (signed) or *u (unsigned). */
static sf_status meta_number(const sf_safetensors *st, const char *key, int is_unsigned, int64_t *i, uint64_t *u)
{
    const char *v = sf_safetensors_meta(st, key);
    if (!v || !*v) return sf_fail(SF_ERR_FORMAT, "__metadata__ lacks '%s'", key);
    char *end;
    errno = 0;
    if (is_unsigned) {
        if (*v == '-') return sf_fail(SF_ERR_FORMAT, "__metadata__ '%s' = '%s' is not an unsigned integer", key, v);
        *u = strtoull(v, &end, 10);
    } else {
        *i = strtoll(v, &end, 10);
    }
    if (*end || errno) return sf_fail(SF_ERR_FORMAT, "__metadata__ '%s' = '%s' is not an integer", key, v);
    return SF_OK;
}

static sf_status read_info(const sf_safetensors *st, sf_checkpoint_info *info)
{
    const char *fmt = sf_safetensors_meta(st, "format");
    if (!fmt || strcmp(fmt, SF_CHECKPOINT_FORMAT) != 0)
        return sf_fail(SF_ERR_FORMAT, "not a spikefuse checkpoint (__metadata__ 'format' is %s%s%s)",
                       fmt ? "'" : "", fmt ? fmt : "missing", fmt ? "'" : "");
    int64_t version = 0, epoch = 0, step = 0, best_step = -1;
    SF_TRY(meta_number(st, "format_version", 0, &version, NULL));
    if (version != SF_CHECKPOINT_VERSION)
        return sf_fail(SF_ERR_FORMAT, "checkpoint format version %" PRId64 " is not supported (this build reads %d)",
                       version, SF_CHECKPOINT_VERSION);
    SF_TRY(meta_number(st, "epoch", 0, &epoch, NULL));
    SF_TRY(meta_number(st, "step", 0, &step, NULL));
    if (epoch < 0 || step < 0) return sf_fail(SF_ERR_FORMAT, "negative epoch or step in __metadata__");
    if (sf_safetensors_meta(st, "best_step")) SF_TRY(meta_number(st, "best_step", 0, &best_step, NULL));
    if (best_step < -1 || best_step > step)
        return sf_fail(SF_ERR_FORMAT, "__metadata__ 'best_step' = %" PRId64 " is not a step up to %" PRId64, best_step,
                       step);
    const char *config = sf_safetensors_meta(st, "config");
    if (!config || !*config) return sf_fail(SF_ERR_FORMAT, "__metadata__ lacks the config");
    const char *best = sf_safetensors_meta(st, "best_metric");
    char *end = NULL;
    double best_metric = best ? strtod(best, &end) : -1.0;
    if (best && (end == best || *end)) return sf_fail(SF_ERR_FORMAT, "__metadata__ 'best_metric' is not a number");
    info->config = config;
    info->epoch = epoch;
    info->step = step;
    info->loader_state = sf_safetensors_meta(st, "loader_state");
    info->best_metric = best_metric;
    info->best_step = best_step;
    return SF_OK;
}

sf_status sf_checkpoint_open(const char *path, sf_safetensors **st, sf_checkpoint_info *info)
{
    SF_TRY(sf_safetensors_load(path, st));
    sf_status s = read_info(*st, info);
    if (s != SF_OK) {
        sf_safetensors_free(*st);
        *st = NULL;
        return sf_fail_context(s, "%s: ", path);
    }
    return SF_OK;
}

static sf_status restore_role(const sf_safetensors *st, sf_net *net, sf_tensor_role role)
{
    int32_t n = sf_net_tensor_count(net, role);
    for (int32_t i = 0; i < n; i++) {
        sf_tensor_info ti;
        SF_TRY(sf_net_tensor_info(net, role, i, &ti));
        const sf_st_entry *e = sf_safetensors_find(st, ti.name);
        if (!e) return sf_fail(SF_ERR_FORMAT, "tensor '%s' of the network is not in the checkpoint", ti.name);
        int same = e->ndim == ti.ndim;
        for (int32_t d = 0; same && d < ti.ndim; d++) same = e->shape[d] == ti.shape[d];
        if (!same) return sf_fail(SF_ERR_FORMAT, "tensor '%s' has another shape in the checkpoint", ti.name);
        float *buf = malloc((size_t)(ti.numel ? ti.numel : 1) * sizeof *buf);
        if (!buf) return sf_fail(SF_ERR_NOMEM, "out of memory restoring %s", ti.name);
        sf_status s = sf_safetensors_get_f32(st, ti.name, buf, ti.numel);
        for (int64_t k = 0; s == SF_OK && k < ti.numel; k++)
            if (!isfinite(buf[k]))
                s = sf_fail(SF_ERR_FORMAT, "tensor '%s' holds %g at element %" PRId64 ": not a trained value", ti.name,
                            (double)buf[k], k);
        if (s == SF_OK) s = sf_net_tensor_write(net, role, i, buf);
        free(buf);
        SF_TRY(s);
    }
    return SF_OK;
}

sf_status sf_checkpoint_restore(const sf_safetensors *st, sf_net *net, int with_training_state)
{
    SF_TRY(restore_role(st, net, SF_ROLE_PARAM));
    SF_TRY(restore_role(st, net, SF_ROLE_BUFFER));
    if (!with_training_state) return SF_OK;
    SF_TRY(restore_role(st, net, SF_ROLE_OPTIMIZER));
    sf_net_state ns;
    SF_TRY(sf_net_get_state(net, &ns));
    SF_TRY(meta_number(st, "optimizer_steps", 0, &ns.optimizer_steps, NULL));
    SF_TRY(meta_number(st, "rng_seed", 1, NULL, &ns.rng_seed));
    SF_TRY(meta_number(st, "rng_counter", 1, NULL, &ns.rng_counter));
    /* fp16's loss scale; checkpoints written before it existed keep the net's initial one */
    const char *scale = sf_safetensors_meta(st, "loss_scale");
    if (scale) {
        char *end = NULL;
        ns.loss_scale = strtof(scale, &end);
        if (end == scale || *end) return sf_fail(SF_ERR_FORMAT, "__metadata__ 'loss_scale' = '%s' is not a number", scale);
        SF_TRY(meta_number(st, "loss_scale_steps", 0, &ns.loss_scale_steps, NULL));
    }
    return sf_net_set_state(net, &ns);
}
