/*
** collectives.c -- the weight all-gather and the gradient reduce-scatter of
** the in-process world: every rank's plan (plan.c) run through the
** in-process transport.
**
** The emulation runs the ranks phase by phase: every rank's ops of a phase
** before the next phase. In process on CPU backends with more than one
** thread, a phase's ranks run side by side, each rank's ops in order on one
** thread (the ops then run single-threaded: sq_get_threads); otherwise one
** after another. Neither changes a byte: no rank reads in a phase what
** another writes in it (plan.h), every rank has buffers of its own, and no
** op's bytes depend on the threads. Side by side pays: a rank's ops work on
** pieces of a few hundred thousand elements, too small for each op to gain
** from splitting its loops over the threads (measured on 2 cores: the
** default training's collectives took as long on 2 threads as on 1).
**
** The in-process transport copies a message straight into the receiver's
** buffer when it is sent (sq_backend_copy between the two workers'
** backends, a peer copy between GPUs); receiving it is then nothing but
** the counting, so one pass over the ranks runs a phase whatever the order
** of a rank's sends and receives. A dry world runs the same plans with no
** memory and no transport: only the counting happens, and only the phases
** that move messages are visited.
**
** A transport of the caller's -- one rank per process, or an in-process
** one (world.h) -- may also hold a phase's messages back and deliver them
** all at its phase_end (NCCL's groups do): plan.h's phase rule makes that
** change no byte, since no op reads in the phase that delivers it what a
** message brings. Such a transport spends its time in phase_end, not in
** send and recv: that time is shared among the phase's links in
** proportion to the bytes this process's ranks moved on each.
*/
#include "world/world_internal.h"
#include "sq_clock.h"
#include "shardq/trace.h" /* sq_fnv1a64 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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
/* The world's view of any transport: timing and digests                   */
/* ------------------------------------------------------------------------ */

/* Every SEND and RECV of a rank goes through its own view of the
** transport: the bytes and the time inside the transport are counted per
** link (folded into the records at the end of the phase, end_phase), and
** with digests on, the bytes sent are hashed into the sender's digest. One
** view per rank, so that ranks running side by side count apart. */
typedef struct via_ctx {
    sq_world *w;
    const sq_transport *inner;
    int coll;
    double bytes[SQ_NLINK];   /* moved on each link in the current phase */
    double seconds[SQ_NLINK]; /* ... and the time that took in the transport */
} via_ctx;

static double msg_bytes(const sq_plan_msg *m)
{
    return (double)(m->code_bytes + m->scale_bytes + m->offset_bytes);
}

/* The sent bytes may live on a device: they are read to the host first. */
static int digest_part(sq_world *w, int r, const void *src, uint64_t bytes)
{
    if (!bytes) return SQ_OK;
    unsigned char *h = malloc((size_t)bytes);
    if (!h) return SQ_ERR_NOMEM;
    int rc = sq_backend_get(w->workers[r].be, h, src, (size_t)bytes);
    if (!rc) w->rec[r].digest = sq_fnv1a64(h, (size_t)bytes, w->rec[r].digest);
    free(h);
    return rc;
}

static int via_send(void *ctx, const sq_plan_msg *m, const sq_qbuf *from, sq_error *err)
{
    via_ctx *v = ctx;
    sq_world *w = v->w;
    int rc;
    if (w->digest && from &&
        ((rc = digest_part(w, m->src, from->codes, m->code_bytes)) ||
         (rc = digest_part(w, m->src, from->scales, m->scale_bytes)) ||
         (rc = digest_part(w, m->src, from->offsets, m->offset_bytes))))
        return rc;
    v->bytes[m->link] += msg_bytes(m);
    double t0 = sq_clock_s();
    rc = v->inner->send(v->inner->ctx, m, from, err);
    v->seconds[m->link] += sq_clock_s() - t0;
    return rc;
}

static int via_recv(void *ctx, const sq_plan_msg *m, sq_qbuf *to, sq_error *err)
{
    via_ctx *v = ctx;
    v->bytes[m->link] += msg_bytes(m);
    double t0 = sq_clock_s();
    int rc = v->inner->recv(v->inner->ctx, m, to, err);
    v->seconds[m->link] += sq_clock_s() - t0;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Running the plans of every rank                                          */
/* ------------------------------------------------------------------------ */

/* Runs rank r's ops of one phase of L's plans, listing them into ops (room
** for w->max_ops); a failure's sentence goes to *out, not to the world, so
** that ranks side by side do not write it at once. */
static int run_rank_phase(sq_world *w, const sq_plan_layout *L, const sq_transport *tr, int r,
                          int coll, int phase, uint32_t step, sq_plan_op *ops, sq_error *out)
{
    size_t nops = sq_plan_phase_ops(L, r, coll, phase, ops);
    if (w->dry) { /* only the counting */
        for (size_t i = 0; i < nops; i++) sq_plan_count(&ops[i], &w->traffic[r]);
        return SQ_OK;
    }
    sq_plan_mem *mem = &w->mem[r];
    for (size_t i = 0; i < nops; i++) {
        const sq_plan_op *op = &ops[i];
        sq_error e;
        e.msg[0] = '\0';
        int rc = sq_plan_exec_op(L, r, op, step, mem, tr, &w->traffic[r], &e);
        if (rc == SQ_OK) continue;
        if ((w->tr || w->itr) && (op->kind == SQ_PLAN_SEND || op->kind == SQ_PLAN_RECV))
            return sq_error_set(out, rc, "worker %d: %s %llu elements %s worker %d: %s", r,
                                op->kind == SQ_PLAN_SEND ? "sending" : "receiving",
                                (unsigned long long)op->n,
                                op->kind == SQ_PLAN_SEND ? "to" : "from", op->peer,
                                e.msg[0] ? e.msg : sq_strerror(rc));
        if (op->kind == SQ_PLAN_SEND || op->kind == SQ_PLAN_RECV) {
            char what[96];
            snprintf(what, sizeof what, "sending %llu elements to worker %d",
                     (unsigned long long)op->n, op->kind == SQ_PLAN_SEND ? op->peer : r);
            return sq_world_describe_fail(w, op->kind == SQ_PLAN_SEND ? r : op->peer, rc, what,
                                          out);
        }
        return sq_world_describe_fail(w, r, rc, op->what, out);
    }
    return SQ_OK;
}

/* How many threads run a phase's ranks side by side; 1: one after another.
** Side by side only in process (no transport of the caller's, which may
** expect one caller) and on CPU backends. */
static int rank_threads(const sq_world *w)
{
    if (w->dry || w->tr || w->itr || w->N < 2 || !sq_world_all_host(w)) return 1;
    const int nth = sq_get_threads();
    return nth < w->N ? nth : w->N;
}

/* One phase, every rank this process runs: with nth > 1 threads side by
** side; a failure is that of the lowest failing rank, as in turn (the
** ranks after it ran too, but the collective failed, so nothing of it is
** kept). */
static int run_phase(sq_world *w, const sq_plan_layout *L, const sq_transport *via, int nth,
                     sq_plan_op *ops, int coll, int phase, uint32_t step)
{
    if (nth < 2) {
        for (int r = 0; r < w->N; r++) {
            if (!w->dry && !sq_world_holds(w, r)) continue;
            sq_error e = {0};
            int rc = run_rank_phase(w, L, w->dry ? NULL : &via[r], r, coll, phase, step, ops, &e);
            if (rc) {
                w->err = e;
                return rc;
            }
        }
        return SQ_OK;
    }
    int bad = w->N;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
    for (int r = 0; r < w->N; r++) {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        sq_error e = {0};
        int rc = run_rank_phase(w, L, &via[r], r, coll, phase, step, ops + (size_t)t * w->max_ops,
                                &e);
        if (rc) {
#pragma omp critical(sq_world_rank_failed)
            if (r < bad) {
                bad = r;
                w->err = e;
            }
        }
    }
    return bad < w->N ? w->err.status : SQ_OK;
}

/* The end of a phase: each rank's time in the transport goes to its
** link's (in process to worker 0's record, where the ranks' times add up;
** with one rank per process to its own). A transport with a phase end
** spends its time there: that goes to the phase's links by their bytes
** (those of a phase without messages go to none; they still count in the
** collective's seconds). */
static int end_phase(sq_world *w, via_ctx *v, int coll, int phase)
{
    const sq_transport *t = w->tr ? w->tr : w->itr;
    sq_coll_time *ct = &w->rec[w->tr ? w->rank : 0].times[coll];
    double bytes[SQ_NLINK] = {0};
    for (int r = 0; r < w->N; r++)
        for (int l = 0; l < SQ_NLINK; l++) {
            bytes[l] += v[r].bytes[l];
            ct->link_seconds[l] += v[r].seconds[l];
            v[r].bytes[l] = v[r].seconds[l] = 0;
        }
    double moved = bytes[SQ_LINK_INTRA] + bytes[SQ_LINK_INTER];
    if (!t || !t->phase_end) return SQ_OK;
    sq_error e = {0};
    double t0 = sq_clock_s();
    int rc = t->phase_end(t->ctx, coll, phase, &e);
    double dt = sq_clock_s() - t0;
    if (moved > 0)
        for (int l = 0; l < SQ_NLINK; l++) ct->link_seconds[l] += dt * bytes[l] / moved;
    if (rc && w->tr)
        return sq_world_set_error(w, rc, "worker %d: end of phase %d of %s: %s", w->rank, phase,
                                  sq_coll_name(coll), sq_error_message(&e));
    if (rc)
        return sq_world_set_error(w, rc, "end of phase %d of %s: %s", phase, sq_coll_name(coll),
                                  sq_error_message(&e));
    return SQ_OK;
}

/* With one rank per process, the ranks meet before a collective's clock
** starts, so that its time is the collective's own and not also the wait
** for a rank still busy with what came before (the statistics' broadcasts,
** a slower forward pass): Megatron's timers take the same barrier
** (barrier_with_L1_time) for the same reason. Untimed, as the broadcasts
** are. */
static int meet_ranks(sq_world *w)
{
    if (!w->tr || !w->tr->gather_all || w->tr->nranks < 2) return SQ_OK;
    unsigned char mine = 0, *all = malloc((size_t)w->tr->nranks);
    if (!all) return sq_world_set_error(w, SQ_ERR_NOMEM, "out of memory");
    sq_error e = {0};
    int rc = w->tr->gather_all(w->tr->ctx, &mine, all, 1, &e);
    free(all);
    return rc ? sq_world_set_error(w, rc, "worker %d: meeting the other ranks: %s", w->rank,
                                   sq_error_message(&e))
              : SQ_OK;
}

/* In process every rank's phase p runs before phase p + 1; with a
** transport this process runs its own rank's phases, and the transport
** pairs its messages with the other processes'. A dry world counts every
** rank's messages here, with no transport: nothing moves. */
static int run_plans(sq_world *w, int coll, uint32_t step)
{
    const sq_transport inproc = {w, inproc_send, inproc_recv, NULL, NULL, NULL, 1, 0};
    const sq_transport *inner = w->tr ? w->tr : w->itr ? w->itr : &inproc;
    /* PowerSGD's steps numbered below grad.powersgd.start reduce with the
    ** ring (PyTorch's vanilla all-reduce before start_powerSGD_iter) */
    const sq_plan_layout *L = coll == SQ_COLL_GRAD && w->L.grad_path == SQ_GRAD_POWERSGD &&
                                      step < w->scheme.psgd_start
                                  ? &w->Lv
                                  : &w->L;
    const int np = sq_plan_nphases(L, coll);
    if (!w->dry) {
        int rc = meet_ranks(w);
        if (rc) return rc;
    }
    const int nth = rank_threads(w);
    via_ctx *v = calloc((size_t)w->N, sizeof *v);
    sq_transport *via = calloc((size_t)w->N, sizeof *via);
    sq_plan_op *ops = nth > 1 ? malloc((size_t)nth * w->max_ops * sizeof *ops) : w->ops;
    int rc = v && via && ops ? SQ_OK : sq_world_set_error(w, SQ_ERR_NOMEM, "out of memory");
    for (int r = 0; !rc && r < w->N; r++) {
        v[r] = (via_ctx){w, inner, coll, {0, 0}, {0, 0}};
        via[r] = (sq_transport){&v[r], via_send, via_recv, NULL, NULL, NULL, 1, 0};
    }
    double t0 = sq_clock_s();
    for (int phase = 0; phase < np && !rc; phase++) {
        if (w->dry && !sq_plan_phase_moves(L, coll, phase)) continue;
        rc = run_phase(w, L, via, nth, ops, coll, phase, step);
        if (!rc && !w->dry) rc = end_phase(w, v, coll, phase);
    }
    if (ops != w->ops) free(ops);
    free(v), free(via);
    if (rc || w->dry) return rc;
    /* in process the emulation's time is the world's; the ranks' records
    ** keep it on worker 0 (the slowest rank of one) */
    int r0 = w->tr ? w->rank : 0;
    w->rec[r0].times[coll].seconds += sq_clock_s() - t0;
    w->rec[r0].times[coll].calls++;
    if (coll == SQ_COLL_GRAD) { /* outside the timing: a measurement, not the collective */
        rc = sq_world_measure_residuals(w);
        if (rc) return rc;
    }
    return sq_world_sync_records(w);
}

/* Each worker encodes its master shard (or its difference to w-hat) into
** its own slot of the receive buffer; a ring forwards every slot around;
** every worker, the owner of a slot included, rebuilds w-hat from the
** encoded bytes alone, so all replicas stay bit for bit identical. */
int sq_world_gather_weights(sq_world *w, uint32_t step) { return run_plans(w, SQ_COLL_WEIGHT, step); }

int sq_world_reduce_grads(sq_world *w, uint32_t step) { return run_plans(w, SQ_COLL_GRAD, step); }
