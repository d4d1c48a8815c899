/* job.c — the trainer's side of a run over several processes: the split of the batch and of T, the same-run
 * checks, the network in the job, and the per-step and per-evaluation sums (job.h). */
#include "train/job.h"

#include "train/choices.h"

#include "core/error.h"
#include "io/files.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

sf_status sf_job_plan(sf_dist *dist, const sf_config *cfg, sf_job *out)
{
    memset(out, 0, sizeof *out);
    out->dist = dist;
    out->size = out->data_ranks = out->time_parallel = 1;
    if (dist) {
        out->rank = sf_dist_rank(dist);
        out->size = sf_dist_size(dist);
        out->data_rank = sf_dist_data_rank(dist);
        out->data_ranks = sf_dist_data_size(dist);
        out->time_parallel = sf_dist_time_parallel(dist);
    }
    out->root = out->rank == 0;
    const sf_config_train *t = &cfg->train;
    if (t->time_parallel != out->time_parallel)
        return sf_fail(SF_ERR_INVALID, "%s: train.time_parallel = %d, but the job was started with %d", cfg->source,
                       t->time_parallel, out->time_parallel);
    if (t->timesteps % t->time_parallel != 0)
        return sf_fail(SF_ERR_INVALID, "%s: train.time_parallel = %d does not divide train.timesteps = %" PRId64,
                       cfg->source, t->time_parallel, t->timesteps);
    out->global_batch = t->global_batch ? t->global_batch : t->batch * out->data_ranks;
    if (out->global_batch % out->data_ranks != 0)
        return sf_fail(SF_ERR_INVALID,
                       "%s: train.global_batch = %" PRId64 " is not divisible by the %d data-parallel ranks (%d "
                       "processes / time_parallel %d)",
                       cfg->source, out->global_batch, out->data_ranks, out->size, out->time_parallel);
    out->batch = out->global_batch / out->data_ranks;
    return SF_OK;
}

/* FNV-1a, 64 bits: a fingerprint to compare across processes, not a defence against tampering. */
static uint64_t fnv1a(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

sf_status sf_job_check_same(const sf_job *j, const char *config_text)
{
    if (j->size == 1) return SF_OK;
    SF_TRY(sf_dist_check_same(j->dist, "resolved config (with its --set options)",
                              fnv1a(config_text, strlen(config_text))));
    char *exe = NULL;
    size_t len = 0;
    uint64_t h = 0; /* unreadable: compares as a binary of its own */
    if (sf_read_file("/proc/self/exe", (size_t)1 << 31, &exe, &len) == SF_OK) h = fnv1a(exe, len);
    free(exe);
    return sf_dist_check_same(j->dist, "program binary", h);
}

void sf_job_shard(const sf_job *j, sf_loader_params *lp)
{
    lp->batch = j->batch;
    lp->shards = j->data_ranks;
    lp->shard = j->data_rank;
}

sf_status sf_job_build_net(const sf_job *j, const sf_config *cfg, const char *choices, sf_net **out)
{
    sf_config mine = *cfg; /* shares the layer list: only the device differs */
    if (j->dist) mine.net.device = sf_dist_device(j->dist, cfg->net.device);
    SF_TRY(sf_config_build_net(&mine, out));
    if (j->dist) SF_TRY(sf_dist_attach(j->dist, *out));
    if (choices) SF_TRY(sf_choices_apply_conv(choices, *out));
    SF_TRY(sf_net_set_static_input(*out, sf_config_input_static(cfg)));
    return sf_net_compile(*out, cfg->train.timesteps, j->batch);
}

sf_status sf_job_step_sums(const sf_job *j, double *loss, double *correct, int *stop)
{
    if (j->size == 1) return SF_OK;
    /* one sum over the world: every segment of a data rank reports the same loss and count */
    double v[3] = {*loss, *correct, *stop ? 1.0 : 0.0};
    SF_TRY(sf_dist_sum_all(j->dist, v, 3));
    *loss = v[0] / j->size;
    *correct = v[1] / j->time_parallel;
    *stop = v[2] > 0;
    return SF_OK;
}

sf_status sf_job_merge_eval(const sf_job *j, sf_eval_result *r)
{
    if (j->size == 1) return SF_OK;
    const int32_t n = r->num_rates;
    double *v = calloc((size_t)n + 2, sizeof *v);
    if (!v) return sf_fail(SF_ERR_NOMEM, "out of memory");
    /* counts over the world, then / time_parallel: the segments of a data rank count the same samples; rates
     * weighted by samples over every process: each segment's rates cover its own steps */
    v[0] = (double)r->samples;
    v[1] = (double)r->correct;
    for (int32_t i = 0; i < n; i++) v[2 + i] = (double)r->firing_rates[i] * (double)r->samples;
    sf_status s = sf_dist_sum_all(j->dist, v, n + 2);
    if (s == SF_OK) {
        for (int32_t i = 0; i < n; i++) r->firing_rates[i] = v[0] > 0 ? (float)(v[2 + i] / v[0]) : 0.0f;
        r->samples = (int64_t)(v[0] / j->time_parallel + 0.5);
        r->correct = (int64_t)(v[1] / j->time_parallel + 0.5);
        r->accuracy = r->samples ? (double)r->correct / (double)r->samples : 0.0;
    }
    free(v);
    return s;
}

sf_status sf_job_optimizer_whole(const sf_job *j, sf_net *net)
{
    return j->dist ? sf_dist_optimizer_gather(j->dist, net) : SF_OK;
}

sf_status sf_job_optimizer_parts(const sf_job *j, sf_net *net)
{
    return j->dist ? sf_dist_optimizer_shard(j->dist, net) : SF_OK;
}

sf_status sf_job_agree(const sf_job *j, sf_status s, const char *what)
{
    if (j->size == 1) return s;
    double failed = s != SF_OK;
    sf_status e = sf_dist_sum_all(j->dist, &failed, 1);
    if (s != SF_OK) return s;
    SF_TRY(e);
    if (failed > 0)
        return sf_fail(SF_ERR_STATE, "%s failed on %.0f of the %d processes (their messages say why)", what, failed,
                       j->size);
    return SF_OK;
}
