/*
** train.c -- one training run into the store (app.h): the job `shardq
** train` runs once its options are read, and `shardq demo` runs for its
** capture; the caller shows its progress and its outcome.
*/
#include "app/app.h"

int sq_app_train_run(const sq_app_train *t, const sq_sweep_hooks *hooks, sq_sweep_outcome *out,
                     sq_error *err)
{
    /* sgemm: the summary reads the GFLOP/s beside this machine's rate */
    sq_sweep_job job = {.cfg = t->cfg, .db = t->db, .key = t->key, .sweep = t->sweep,
                        .busy_ms = t->busy_ms, .capture = t->capture,
                        .capture_every = t->capture_every, .sgemm = 1,
                        .transport = t->transport};
    if (hooks) job.hooks = *hooks;
    return sq_sweep_job_run(&job, out, err);
}
