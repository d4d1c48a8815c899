/* job.h — the trainer's side of a run over several processes (src/distributed): how the global batch and T divide,
 * checks that all run the same thing, this process's network joining the job, and the sums that make every process
 * report and decide alike. With one process every call is trivial. */
#ifndef SF_TRAIN_JOB_H
#define SF_TRAIN_JOB_H

#include "config/config.h"
#include "distributed/dist.h"
#include "spikefuse_train.h"

typedef struct sf_job {
    sf_dist *dist;          /* NULL: a process alone */
    int32_t rank, size;     /* in the world */
    int32_t data_rank, data_ranks;
    int32_t time_parallel;
    int64_t batch;          /* this process's samples per step */
    int64_t global_batch;   /* samples per step over the data ranks */
    int32_t root;           /* rank 0: console, metrics and checkpoints */
} sf_job;

/* The split of cfg's work over dist's processes (dist may be NULL): SF_ERR_INVALID naming the setting when the
 * data ranks do not divide the global batch, or time_parallel does not divide T or the processes. */
sf_status sf_job_plan(sf_dist *dist, const sf_config *cfg, sf_job *out);
/* Every process must run the same binary with the same resolved config (hashes compared at start-up). */
sf_status sf_job_check_same(const sf_job *j, const char *config_text);
/* This process's part of each global batch (batch and shard of a loader's parameters). */
void sf_job_shard(const sf_job *j, sf_loader_params *lp);
/* cfg's network on this process's device, taking part in the job, compiled for T and this process's batch; with
 * `choices` (a run directory's choices file, or NULL) the convolution choices recorded there, before it plans. */
sf_status sf_job_build_net(const sf_job *j, const sf_config *cfg, const char *choices, sf_net **out);
/* After each step: *loss becomes the mean over the data ranks, *correct their sum, *stop whether any process wants
 * to stop (so that all stop after the same step). */
sf_status sf_job_step_sums(const sf_job *j, double *loss, double *correct, int *stop);
/* An evaluation's counts summed over the data ranks, its firing rates averaged over every process. */
sf_status sf_job_merge_eval(const sf_job *j, sf_eval_result *r);
/* The whole optimizer state on every process (for what reads or writes all of it: a checkpoint, a resume), and back
 * to each process's part where src/distributed shards it; every process calls them at the same point. */
sf_status sf_job_optimizer_whole(const sf_job *j, sf_net *net);
sf_status sf_job_optimizer_parts(const sf_job *j, sf_net *net);
/* Whether every process got `s` == SF_OK: returns s, or, where s is SF_OK but another process failed, an error
 * naming how many failed (their own messages say why). */
sf_status sf_job_agree(const sf_job *j, sf_status s, const char *what);

#endif
