/*
** collectives.c -- the weight all-gather and the gradient reduce-scatter of
** the in-process world: every rank's plan (plan.c) run through the
** in-process transport.
**
** The emulation runs the ranks one after another, phase by phase: every
** rank's ops of a phase before the next phase. That changes no byte,
** because no rank reads in a phase what another writes in it (plan.h).
**
** The in-process transport copies a message straight into the receiver's
** buffer when it is sent (sq_backend_copy between the two workers'
** backends, a peer copy between GPUs); receiving it is then nothing but
** the counting, so one pass over the ranks runs a phase whatever the order
** of a rank's sends and receives. A dry world runs the same plans with no
** memory and no transport: only the counting happens, and only the phases
** that move messages are visited.
*/
#include "world/world_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The in-process transport                                                 */
/* ------------------------------------------------------------------------ */

static int inproc_send(void *ctx, const sq_plan_msg *m, const sq_qbuf *from, sq_error *err)
{
    sq_world *w = ctx;
    (void)err;
    if (w->dry) return SQ_OK;
    sq_backend *sb = w->workers[m->src].be, *db = w->workers[m->dst].be;
    sq_qbuf to = sq_wire_at(m->wr, &w->mem[m->dst].q[m->dst_buf], m->dst_off);
    int rc = sq_backend_copy(db, to.codes, sb, from->codes, (size_t)m->code_bytes);
    if (rc == SQ_OK && m->scale_bytes)
        rc = sq_backend_copy(db, to.scales, sb, from->scales, (size_t)m->scale_bytes);
    if (rc == SQ_OK && m->offset_bytes)
        rc = sq_backend_copy(db, to.offsets, sb, from->offsets, (size_t)m->offset_bytes);
    return rc;
}

static int inproc_recv(void *ctx, const sq_plan_msg *m, sq_qbuf *to, sq_error *err)
{
    (void)ctx, (void)m, (void)to, (void)err;
    return SQ_OK; /* the sender wrote it already */
}

/* ------------------------------------------------------------------------ */
/* Running the plans of every rank                                          */
/* ------------------------------------------------------------------------ */

/* Runs rank r's ops of one phase. */
static int run_rank_phase(sq_world *w, const sq_transport *tr, int r, int coll, int phase,
                          uint32_t step)
{
    size_t nops = sq_plan_phase_ops(&w->L, r, coll, phase, w->ops);
    if (w->dry) { /* only the counting */
        for (size_t i = 0; i < nops; i++) sq_plan_count(&w->ops[i], &w->traffic[r]);
        return SQ_OK;
    }
    sq_plan_mem *mem = &w->mem[r];
    for (size_t i = 0; i < nops; i++) {
        const sq_plan_op *op = &w->ops[i];
        sq_error e;
        e.msg[0] = '\0';
        int rc = sq_plan_exec_op(&w->L, r, op, step, mem, tr, &w->traffic[r], &e);
        if (rc == SQ_OK) continue;
        if (op->kind == SQ_PLAN_SEND || op->kind == SQ_PLAN_RECV) {
            char what[96];
            snprintf(what, sizeof what, "sending %llu elements to worker %d",
                     (unsigned long long)op->n, op->kind == SQ_PLAN_SEND ? op->peer : r);
            return sq_world_fail(w, op->kind == SQ_PLAN_SEND ? r : op->peer, rc, what);
        }
        return sq_world_fail(w, r, rc, op->what);
    }
    return SQ_OK;
}

static int run_plans(sq_world *w, int coll, uint32_t step)
{
    const sq_transport inproc = {w, inproc_send, inproc_recv, NULL};
    const sq_transport *tr = w->dry ? NULL : &inproc;
    const int np = sq_plan_nphases(&w->L, coll);
    for (int phase = 0; phase < np; phase++) {
        if (w->dry && !sq_plan_phase_moves(&w->L, coll, phase)) continue;
        for (int r = 0; r < w->N; r++) {
            int rc = run_rank_phase(w, tr, r, coll, phase, step);
            if (rc) return rc;
        }
    }
    return SQ_OK;
}

/* Each worker encodes its master shard (or its difference to w-hat) into
** its own slot of the receive buffer; a ring forwards every slot around;
** every worker, the owner of a slot included, rebuilds w-hat from the
** encoded bytes alone, so all replicas stay bit for bit identical. */
int sq_world_gather_weights(sq_world *w, uint32_t step) { return run_plans(w, SQ_COLL_WEIGHT, step); }

int sq_world_reduce_grads(sq_world *w, uint32_t step) { return run_plans(w, SQ_COLL_GRAD, step); }
