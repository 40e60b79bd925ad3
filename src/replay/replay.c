/*
** replay.c -- a scheme over a captured trace, param by param (replay.h).
*/
#include "shardq/replay.h"
#include "shardq/layout.h"
#include "shardq/metrics.h"
#include "metrics/metrics_internal.h"
#include "replay_internal.h"
#include "sq_clock.h"
#include "trace/readtiles.h"
#include "trace/wfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

int sq_replay_tiles = 1;               /* replay_internal.h */
unsigned long sq_replay_tiled_steps = 0;

sq_topo sq_replay_default_topo(const sq_trace *t)
{
    sq_topo topo = {2, 4};
    if (t->topo[0] && sscanf(t->topo, "%dx%d", &topo.nodes, &topo.per_node) == 2) return topo;
    if (t->workers > 1) {
        topo.nodes = 1;
        topo.per_node = t->workers;
    } else {
        topo.nodes = 2;
        topo.per_node = 4;
    }
    return topo;
}

enum { T_READ = 0, T_GRAD = 1, T_WEIGHT = 2, T_STATS = 3 };

/* What one step accumulates over the params. */
typedef struct step_acc {
    sq_erracc e[2];        /* 0 grad, 1 weight */
    uint64_t clipped[2];
    uint64_t clip_n[2];    /* elements the clipped counts are out of */
    double seconds;
} step_acc;

/* Buffers of one param's replay. */
typedef struct param_bufs {
    float *g, *shard, *wcur, *what, *what0, *tmp;
    float *red; /* the whole reduced gradient, when a sink wants it */
    double *g64, *exact;
} param_bufs;

static void free_bufs(param_bufs *b)
{
    free(b->g), free(b->shard), free(b->wcur), free(b->what), free(b->what0), free(b->tmp);
    free(b->red);
    free(b->g64), free(b->exact);
    memset(b, 0, sizeof *b);
}

static int alloc_bufs(param_bufs *b, uint64_t n, uint64_t shard, uint64_t padded, int weights,
                      int whole_grad)
{
    memset(b, 0, sizeof *b);
    size_t nn = (size_t)n, ns = (size_t)shard;
    b->g = malloc(nn * sizeof *b->g);
    b->g64 = malloc(nn * sizeof *b->g64);
    b->exact = malloc((size_t)padded * sizeof *b->exact);
    b->shard = malloc(ns * sizeof *b->shard);
    b->tmp = malloc((nn > ns ? nn : ns) * sizeof *b->tmp);
    if (whole_grad && !(b->red = malloc((size_t)padded * sizeof *b->red))) return SQ_ERR_NOMEM;
    if (weights) {
        b->wcur = malloc(nn * sizeof *b->wcur);
        b->what = malloc(nn * sizeof *b->what);
        b->what0 = malloc(nn * sizeof *b->what0);
    }
    return b->g && b->g64 && b->exact && b->shard && b->tmp &&
                   (!weights || (b->wcur && b->what && b->what0))
               ? SQ_OK
               : SQ_ERR_NOMEM;
}

typedef struct replay_state {
    const sq_replay_config *cfg;
    int N;                 /* workers */
    double *ef;            /* per step and worker: the residuals' |e|^2, the gradients' |x|^2,
                           ** summed over the units that keep a residual */
    int has_ef;            /* some unit keeps one */
    const sq_trace *t;
    const sq_replay_sink *sink;
    sq_replay_result *res;
    step_acc *acc;
    size_t nsteps;
    size_t wfirst;         /* index of the first step with weights: the weight path starts there */
    sq_erracc total[2];
    uint64_t clipped[2], clip_n[2];
    sq_traffic traffic;
    size_t done, units;
    const sq_layout *layout;
} replay_state;

static void add_timing(replay_state *st, int op, double seconds, uint64_t bytes)
{
    sq_timing_row *r = &st->res->timings[op];
    r->calls++;
    r->seconds += seconds;
    r->bytes += bytes;
}

/* The read of param p of the weights (worker < 0) or of a gradient, begun
** at t0 (< 0: timed by the caller): its time and the bytes of trace it
** covered. */
static void count_read(replay_state *st, const sq_trace_step *ts, int worker, size_t p, double t0)
{
    const uint64_t bytes = sq_trace_tensor_bytes(ts, worker, p);
    add_timing(st, T_READ, t0 < 0 ? 0 : sq_clock_s() - t0, bytes);
    st->res->trace_bytes += bytes;
}

/* The sink's tensor callback, if any. */
static int give_tensor(replay_state *st, uint32_t step, size_t p, int path, const float *x,
                       sq_error *err)
{
    if (!st->sink || !st->sink->tensor) return SQ_OK;
    if (st->sink->tensor(st->sink->ctx, step, p, path, x, st->t->params[p].n) == 0) return SQ_OK;
    return sq_error_set(err, SQ_ERR_INTERRUPTED, "param '%s', step %u: stopped by the caller",
                        st->t->params[p].name, (unsigned)step);
}

/* Unit u of the layout: its slots, its world and its buffers. Buffers
** are laid out as the unit's flat buffer: param p at its slot's offset. */
typedef struct unit_run {
    const char *label;          /* "param 'NAME'" or "bucket of N params from 'NAME'" */
    const sq_layout_slot *slot; /* count of them */
    size_t count;
    uint64_t n;                 /* elements of the unit */
    sq_world *w;
    param_bufs b;
    const float *what0;         /* worker 0's w-hat: b.what0, or where the world holds it */
    sq_erracc *ge, *we;         /* per slot, one step's */
} unit_run;

/* A failed world call at trace step `step`: the world's kind and sentence
** after the trace, the step and the unit, since the world knows neither
** file nor tensor ("a result does not fit fp32" alone names no input). */
static int world_fail(const replay_state *st, const unit_run *ur, uint32_t step, int rc,
                      sq_error *err)
{
    return sq_error_set(err, rc, "%s: step %u, %s: %s", st->t->path, (unsigned)step, ur->label,
                        sq_world_error(ur->w));
}

/* Loads param slot k of trace worker tw (worker < 0: the weights) into
** x + offset and, unless x64 is NULL, x64 + offset. */
static int load_slot(replay_state *st, sq_trace_step *ts, int tw, const sq_layout_slot *k, float *x,
                     double *x64, sq_error *err)
{
    double t0 = sq_clock_s();
    int rc = sq_trace_load(ts, tw, k->param, x + k->offset, x64 ? x64 + k->offset : NULL, err);
    if (!rc) count_read(st, ts, tw, k->param, t0);
    return rc;
}

/* Whether the unit's values in the file of trace worker tw (worker < 0:
** the weights) need fp64 to be held exactly: only F64 does; F32, F16 and
** BF16 values are fp32 numbers, so the fp64 reference is their fp32 copy
** widened, and the replay skips writing and reading an fp64 copy. */
static int unit_wide(const replay_state *st, const sq_trace_step *ts, int tw, const unit_run *ur)
{
    if (ts->npy) return 0;
    for (size_t k = 0; k < ur->count; k++) {
        size_t p = ur->slot[k].param;
        const sq_st_entry *e = tw < 0 ? ts->wentry[p] : ts->gentry[(size_t)tw * st->t->nparams + p];
        if (e->dtype == SQ_ST_F64) return 1;
    }
    return 0;
}

/* Loads the unit from the file of trace worker tw into x, and into x64 when
** its values need fp64 (*wide). */
static int load_unit(replay_state *st, sq_trace_step *ts, int tw, const unit_run *ur, float *x,
                     double *x64, int *wide, sq_error *err)
{
    *wide = unit_wide(st, ts, tw, ur);
    for (size_t k = 0; k < ur->count; k++) {
        int rc = load_slot(st, ts, tw, &ur->slot[k], x, *wide ? x64 : NULL, err);
        if (rc) return rc;
    }
    return SQ_OK;
}

/* The part of slot sl inside the unit's elements [from, to): its elements
** [*first, *first + len) (len 0: none). */
static uint64_t slot_part(const sq_layout_slot *sl, uint64_t from, uint64_t to, uint64_t *first)
{
    uint64_t lo = sl->offset > from ? sl->offset : from;
    uint64_t hi = sl->offset + sl->n < to ? sl->offset + sl->n : to;
    *first = lo - sl->offset;
    return lo < hi ? hi - lo : 0;
}

/* Drops the pages of the elements [from, to) of the unit in the gradient
** files of trace workers 0 .. K-1. */
static void release_span(sq_trace_step *ts, const unit_run *ur, int K, uint64_t from, uint64_t to)
{
    for (int tw = 0; tw < K; tw++)
        for (size_t q = 0; q < ur->count; q++) {
            uint64_t first, len = slot_part(&ur->slot[q], from, to, &first);
            if (len) sq_trace_release_part(ts, tw, ur->slot[q].param, first, len);
        }
}

/* The staging of grad_step in one pass over the unit, tile by tile: each
** trace worker's values of a tile are read from its file, put into the
** world (sq_world_put_grad_part), counted for clipping and added into the
** exact fp64 sum while they are in cache, where grad_step would make a pass
** over memory for each of the four per worker. The same sums in the same
** order, so the same bytes. Returns SQ_OK, or nonzero where the pass does
** not apply or did not finish (a world of ranks or of devices, fp64
** values, a bad value, no memory): the caller then runs the whole path,
** which also names a bad value's file and element. */
static int stage_grads_tiled(replay_state *st, unit_run *ur, sq_trace_step *ts, uint64_t *clipped)
{
    sq_world *w = ur->w;
    const int N = sq_world_workers(w), W = st->t->workers, K = W < N ? W : N;
    const uint64_t n = ur->n, g = sq_step_grad_group(w);
    const int mean = sq_world_scheme(w)->grad_mean, f16 = sq_world_scheme(w)->grad_dtype ==
                                                               SQ_GRAD_FP16;
    if (!sq_replay_tiles || ts->npy || n == 0) return SQ_ERR_UNSUPPORTED;
    for (int r = 0; r < N; r++)
        if (sq_world_put_grad_part(w, r, 0, 0, NULL) != SQ_OK) return SQ_ERR_UNSUPPORTED;
    for (int tw = 0; tw < K; tw++)
        if (unit_wide(st, ts, tw, ur)) return SQ_ERR_UNSUPPORTED;
    const uint64_t T = g >= SQ_READ_TILE ? g : SQ_READ_TILE / g * g, ntiles = (n + T - 1) / T;
    double *exact = ur->b.exact;
    uint64_t clip = 0;
    int failed = 0;
#pragma omp parallel num_threads(sq_get_threads()) reduction(+ : clip) reduction(| : failed) \
    if (ntiles > 1)
    {
        float *x = malloc((size_t)T * sizeof *x), *tmp = f16 ? malloc((size_t)T * sizeof *tmp) : x;
        if (!x || !tmp) failed = 1;
        uint64_t kept = UINT64_MAX; /* the first element read and not yet dropped */
#pragma omp for schedule(static)
        for (uint64_t k = 0; k < ntiles; k++) {
            if (failed) continue;
            const uint64_t a = k * T, len = n - a < T ? n - a : T;
            if (kept == UINT64_MAX) kept = a;
            if (a + len - kept >= SQ_READ_RELEASE) {
                release_span(ts, ur, K, kept, a);
                kept = a;
            }
            double *e = exact + a;
            memset(e, 0, (size_t)len * sizeof *e);
            for (int tw = 0; tw < K && !failed; tw++) {
                /* the slots lie end to end over the unit, in offset order */
                for (size_t q = 0; q < ur->count && !failed; q++) {
                    const sq_layout_slot *sl = &ur->slot[q];
                    uint64_t first, m = slot_part(sl, a, a + len, &first);
                    if (m && sq_trace_load_part(ts, tw, sl->param, first, m,
                                                x + (sl->offset + first - a)) != SQ_OK)
                        failed = 1;
                }
                uint32_t copies = 0;
                for (int r = tw; r < N && !failed; r += W, copies++)
                    if (sq_world_put_grad_part(w, r, a, len, x) != SQ_OK) failed = 1;
                if (failed) break;
                const double c = copies;
                for (uint64_t i = 0; i < len; i++) e[i] += c * (double)x[i];
                clip += (uint64_t)copies * sq_step_grad_clipped(w, x, len, f16 ? tmp : NULL);
            }
            /* sq_step_exact_mean's division */
            if (mean && !failed)
                for (uint64_t i = 0; i < len; i++) e[i] /= (double)N;
        }
        if (tmp != x) free(tmp);
        free(x);
    }
    if (failed) return SQ_ERR_UNSUPPORTED;
    memset(exact + n, 0, (size_t)(sq_world_padded(w) - n) * sizeof *exact);
    *clipped += clip;
    __atomic_fetch_add(&sq_replay_tiled_steps, 1, __ATOMIC_RELAXED);
    return SQ_OK;
}

/* The gradient path of unit ur at trace step ts: stats per slot into
** ur->ge, the clipped count into *clipped. */
static int grad_step(replay_state *st, unit_run *ur, sq_trace_step *ts, uint64_t *clipped,
                     sq_error *err)
{
    const sq_trace *t = st->t;
    sq_world *w = ur->w;
    param_bufs *b = &ur->b;
    const int N = sq_world_workers(w), W = t->workers;
    const uint64_t n = ur->n, S = sq_world_shard(w);
    int rc;
    double t0 = sq_clock_s();
    uint64_t tiled = 0;
    if (stage_grads_tiled(st, ur, ts, &tiled) == SQ_OK) {
        /* the reads as the whole path counts them; their time is the pass's */
        *clipped += tiled;
        for (int tw = 0; tw < W && tw < N; tw++)
            for (size_t k = 0; k < ur->count; k++) {
                count_read(st, ts, tw, ur->slot[k].param, -1);
                sq_trace_release(ts, tw, ur->slot[k].param);
            }
        st->res->timings[T_READ].seconds += sq_clock_s() - t0;
    } else {
        sq_step_exact_zero(w, b->exact);
        for (int tw = 0; tw < W && tw < N; tw++) {
            int wide;
            if ((rc = load_unit(st, ts, tw, ur, b->g, b->g64, &wide, err))) return rc;
            uint32_t copies = 0;
            for (int r = tw; r < N; r += W) {
                copies++;
                if ((rc = sq_world_put_grad(w, r, b->g)))
                    return world_fail(st, ur, ts->step, rc, err);
            }
            *clipped += sq_step_add_grad(w, b->exact, b->g, wide ? b->g64 : NULL, copies, b->tmp);
        }
        sq_step_exact_mean(w, b->exact);
    }
    t0 = sq_clock_s();
    if ((rc = sq_world_reduce_grads(w, ts->step))) return world_fail(st, ur, ts->step, rc, err);
    /* what the collective read and wrote: every worker's full gradient in,
    ** its partition out, fp32 */
    add_timing(st, T_GRAD, sq_clock_s() - t0, (uint64_t)N * (n + S) * 4);
    t0 = sq_clock_s();
    if (b->red) {
        /* the whole result, then each param's slice of it */
        if ((rc = sq_step_grad_error(w, NULL, b->red, NULL, NULL)))
            return world_fail(st, ur, ts->step, rc, err);
        /* each param's sums in element order on one thread (params side
        ** by side: the figures never depend on the threads) */
#pragma omp parallel for num_threads(sq_get_threads()) schedule(dynamic) if (ur->count > 1)
        for (size_t k = 0; k < ur->count; k++)
            sq_erracc_add(&ur->ge[k], b->red + ur->slot[k].offset, b->exact + ur->slot[k].offset,
                          ur->slot[k].n);
    } else if ((rc = sq_step_grad_error(w, b->exact, NULL, b->shard, &ur->ge[0]))) {
        return world_fail(st, ur, ts->step, rc, err);
    }
    add_timing(st, T_STATS, sq_clock_s() - t0, 0);
    if (b->red && st->sink && st->sink->tensor)
        for (size_t k = 0; k < ur->count; k++)
            if ((rc = give_tensor(st, ts->step, ur->slot[k].param, SQ_REPLAY_GRAD,
                                  b->red + ur->slot[k].offset, err)))
                return rc;
    return SQ_OK;
}

static int give_weights(replay_state *st, unit_run *ur, uint32_t step, sq_error *err)
{
    for (size_t k = 0; k < ur->count; k++) {
        int rc = give_tensor(st, step, ur->slot[k].param, SQ_REPLAY_WEIGHT,
                             ur->what0 + ur->slot[k].offset, err);
        if (rc) return rc;
    }
    return SQ_OK;
}

/* Worker 0's w-hat into ur->what0 (in process where the world holds it:
** no copy of the unit per step), every replica compared with it. */
static int read_what(replay_state *st, unit_run *ur, uint32_t step, sq_error *err)
{
    int differs, rc = sq_step_replicas_view(ur->w, ur->b.what0, ur->b.what, &ur->what0, &differs);
    if (rc) return world_fail(st, ur, step, rc, err);
    if (differs)
        return sq_error_set(err, SQ_ERR_CONFLICT, "param '%s', step %u: the replicas of the "
                            "weights differ (worker %d against worker 0): a bug in the world",
                            st->t->params[ur->slot[0].param].name, (unsigned)step, differs);
    return SQ_OK;
}

/* Whether the weight path has a row at step index s: a step with weights
** after the first (which initialises). Weights may come at a cadence of
** their own: the steps between two weight steps have gradients only, and
** the weight path goes from one weight step to the next, as training with
** an all-gather at that cadence would. */
static int weight_row(const replay_state *st, size_t s)
{
    return st->res->has_weight && s > st->wfirst && sq_trace_step_has_weights(st->t, s);
}

/* The weight path of unit ur at step index s, a step with weights (the
** first one, st->wfirst, initialises). */
static int weight_step(replay_state *st, unit_run *ur, sq_trace_step *ts, size_t s,
                       uint64_t *clipped, int *did, sq_error *err)
{
    sq_world *w = ur->w;
    param_bufs *b = &ur->b;
    const int N = sq_world_workers(w);
    const uint64_t n = ur->n, S = sq_world_shard(w);
    int rc, wide;
    if ((rc = load_unit(st, ts, -1, ur, b->wcur, b->g64, &wide, err))) return rc;
    *did = 0;
    if (s == st->wfirst) {
        /* the full-precision broadcast that starts training; w-hat is what
        ** the world made of it */
        if ((rc = sq_world_init_weights(w, b->wcur))) return world_fail(st, ur, ts->step, rc, err);
        if ((rc = read_what(st, ur, ts->step, err))) return rc;
        return give_weights(st, ur, ts->step, err);
    }
    /* before the gather: ur->what0 is still the step before's w-hat */
    *clipped += sq_step_weight_clipped(w, b->wcur, ur->what0, n, b->tmp);
    for (int r = 0; r < N; r++) {
        uint64_t first = (uint64_t)r * S, len = sq_world_shard_len(w, r);
        const float *src = b->wcur + first;
        if (len < S) {
            /* a shard that reaches into the padding: zeros past the model */
            memset(b->shard, 0, (size_t)S * sizeof *b->shard);
            if (len) memcpy(b->shard, b->wcur + first, (size_t)len * sizeof *b->shard);
            src = b->shard;
        }
        if ((rc = sq_world_put_master(w, r, src))) return world_fail(st, ur, ts->step, rc, err);
    }
    double t0 = sq_clock_s();
    if ((rc = sq_world_gather_weights(w, ts->step)))
        return world_fail(st, ur, ts->step, rc, err);
    add_timing(st, T_WEIGHT, sq_clock_s() - t0, (uint64_t)N * (n + S) * 4);
    t0 = sq_clock_s();
    if ((rc = read_what(st, ur, ts->step, err))) return rc;
    /* params side by side, as the gradient's statistics */
#pragma omp parallel for num_threads(sq_get_threads()) schedule(dynamic) if (ur->count > 1)
    for (size_t k = 0; k < ur->count; k++) {
        const sq_layout_slot *sl = &ur->slot[k];
        if (wide)
            sq_erracc_add(&ur->we[k], ur->what0 + sl->offset, b->g64 + sl->offset, sl->n);
        else
            sq_erracc_add_f32(&ur->we[k], ur->what0 + sl->offset, b->wcur + sl->offset, sl->n);
    }
    add_timing(st, T_STATS, sq_clock_s() - t0, 0);
    *did = 1;
    return give_weights(st, ur, ts->step, err);
}

/* Error feedback's figure of step index s over every unit: the mean over
** workers of |e_r| / |x_r|, both summed over the units (the whole model's
** residual against its whole gradient); NaN when no unit keeps one. */
static double step_residual(const replay_state *st, size_t s)
{
    if (!st->has_ef) return NAN;
    double sum = 0;
    for (int r = 0; r < st->N; r++) {
        const double *p = &st->ef[(s * (size_t)st->N + (size_t)r) * 2];
        sum += sq_world_residual_ratio(p[0], p[1]);
    }
    return sum / st->N;
}

/* Rows to the sink; a sink that refuses them without saying why stopped
** the replay. */
static int emit(replay_state *st, const sq_stat_row *rows, size_t n, sq_error *err)
{
    if (!n || !st->sink || !st->sink->rows) return SQ_OK;
    int rc = st->sink->rows(st->sink->ctx, rows, n, err);
    return rc < 0 ? rc : rc ? SQ_ERR_INTERRUPTED : SQ_OK;
}

/* Replays unit u over every step. */
static int replay_unit(replay_state *st, size_t u, sq_error *err)
{
    const sq_replay_config *cfg = st->cfg;
    const sq_trace *t = st->t;
    const sq_layout *L = st->layout;
    const int do_grad = st->res->has_grad, do_weight = st->res->has_weight;
    unit_run ur = {.slot = L->slots + L->units[u].first, .count = L->units[u].count,
                   .n = L->units[u].n};
    sq_world_config base = {.topo = cfg->topo, .scheme = cfg->scheme, .seed = cfg->seed,
                            .device = cfg->device, .transport = cfg->transport};
    char name[300];
    sq_layout_unit_label(L, u, t->params[ur.slot[0].param].name, name, sizeof name);
    ur.label = name;
    sq_error werr = {0};
    const sq_trace_param *tp = &t->params[ur.slot[0].param];
    int rc = sq_layout_open_world(L, u, &base, tp->shape, tp->ndim, &ur.w, &werr);
    if (rc)
        return sq_error_set(err, rc, "%s (%llu elements): %s", name, (unsigned long long)ur.n,
                            sq_error_message(&werr));
    sq_world *w = ur.w;
    const int N = sq_world_workers(w);
    const uint64_t n = ur.n;
    /* the whole reduced gradient is needed to cut it into params, or when
    ** a sink wants it */
    int whole = do_grad && (ur.count > 1 || (st->sink && st->sink->tensor));
    sq_stat_row *rows = calloc(2 * st->nsteps * ur.count, sizeof *rows);
    ur.ge = calloc(ur.count, sizeof *ur.ge);
    ur.we = calloc(ur.count, sizeof *ur.we);
    if (!rows || !ur.ge || !ur.we ||
        alloc_bufs(&ur.b, n, sq_world_shard(w), sq_world_padded(w), do_weight, whole)) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory for %llu elements x %d workers",
                          name, (unsigned long long)n, N);
        goto fail;
    }
    size_t nrows = 0;
    for (size_t s = 0; s < st->nsteps; s++) {
        double t0 = sq_clock_s();
        sq_trace_step ts;
        /* only the files this replay reads: the weights, and the gradients
        ** of trace workers 0 .. min(W, N) - 1 */
        const int wstep = do_weight && sq_trace_step_has_weights(t, s);
        if ((rc = sq_trace_step_open(t, s, wstep, do_grad ? N : 0, &ts, err))) goto fail;
        for (size_t k = 0; k < ur.count; k++) {
            sq_erracc_init(&ur.ge[k]);
            sq_erracc_init(&ur.we[k]);
        }
        uint64_t gclip = 0, wclip = 0;
        int wdid = 0;
        rc = do_grad ? grad_step(st, &ur, &ts, &gclip, err) : SQ_OK;
        if (!rc && wstep) rc = weight_step(st, &ur, &ts, s, &wclip, &wdid, err);
        sq_trace_step_close(&ts);
        if (rc) goto fail;
        double secs = sq_clock_s() - t0;
        step_acc *a = &st->acc[s];
        a->seconds += secs;
        /* error feedback's state after the step: the unit's figure for its
        ** tensors, its squared norms into the step's */
        const double ef_rel = do_grad ? sq_world_residual_rel(w) : NAN;
        for (int r = 0; do_grad && r < N; r++) {
            double e2, x2;
            if (!sq_world_residual_norms(w, r, &e2, &x2)) break;
            st->has_ef = 1;
            st->ef[(s * (size_t)N + (size_t)r) * 2] += e2;
            st->ef[(s * (size_t)N + (size_t)r) * 2 + 1] += x2;
        }
        /* clipping is a property of a group, and groups straddle params in
        ** a bucket: a param's row carries its unit's fraction */
        for (size_t k = 0; k < ur.count; k++) {
            const char *tensor = t->params[ur.slot[k].param].name;
            if (do_grad) {
                rows[nrows++] = (sq_stat_row){.step = t->steps[s], .path = "grad", .tensor = tensor,
                                              .st = sq_erracc_finish(&ur.ge[k]),
                                              .frac_clipped = sq_step_frac(gclip, n * (uint64_t)N),
                                              .seconds = secs, .ef_residual = ef_rel};
                /* merge into the step's and the run's accumulators */
                sq_erracc_merge(&a->e[0], &ur.ge[k]);
                sq_erracc_merge(&st->total[0], &ur.ge[k]);
            }
            if (wdid) {
                rows[nrows++] = (sq_stat_row){.step = t->steps[s], .path = "weight",
                                              .tensor = tensor, .st = sq_erracc_finish(&ur.we[k]),
                                              .frac_clipped = sq_step_frac(wclip, n),
                                              .seconds = secs, .ef_residual = NAN};
                sq_erracc_merge(&a->e[1], &ur.we[k]);
                sq_erracc_merge(&st->total[1], &ur.we[k]);
            }
        }
        if (do_grad) {
            a->clipped[0] += gclip, a->clip_n[0] += n * (uint64_t)N;
            st->clipped[0] += gclip, st->clip_n[0] += n * (uint64_t)N;
        }
        if (wdid) {
            a->clipped[1] += wclip, a->clip_n[1] += n;
            st->clipped[1] += wclip, st->clip_n[1] += n;
        }
        st->done++;
        if (st->sink && st->sink->progress) st->sink->progress(st->sink->ctx, st->done, st->units);
    }
    sq_world_add_traffic(w, &st->traffic);
    sq_world_add_times(w, st->res->coll);
    st->res->padded += sq_world_padded(w);
    st->res->residual_bytes += sq_world_residual_bytes(w);
    if (cfg->tensor_rows && (rc = emit(st, rows, nrows, err))) goto fail;
    rc = SQ_OK;
fail:
    free_bufs(&ur.b);
    free(rows), free(ur.ge), free(ur.we);
    sq_world_close(w);
    return rc;
}

/* A trace of W gradient files per step on N workers: worker r gets file
** r mod W, so N > W reuses files and N < W leaves some unread. Either is
** refused unless asked for; one file per step is every worker's. */
static int check_workers(const sq_replay_config *cfg, const sq_trace *t, sq_replay_result *out,
                         sq_error *err)
{
    const int W = t->workers, N = sq_topo_workers(&cfg->topo);
    if (W <= 1 || W == N) return SQ_OK;
    out->reused_workers = N > W ? N - W : 0;
    out->dropped_workers = W > N ? W - N : 0;
    if (cfg->reuse_workers) return SQ_OK;
    if (N > W)
        return sq_error_set(err, SQ_ERR_CONFLICT,
                            "%s: the trace has %d gradient files per step (grads-w00 .. w%02d) but "
                            "the topology %dx%d has %d workers: workers %d .. %d would reuse the "
                            "files of trace workers %d .. %d (worker r gets file r mod %d); ask "
                            "for it to accept that",
                            t->path, W, W - 1, cfg->topo.nodes, cfg->topo.per_node, N, W, N - 1,
                            0, (N - W < W ? N - W : W) - 1, W);
    return sq_error_set(err, SQ_ERR_CONFLICT,
                        "%s: the trace has %d gradient files per step but the topology %dx%d has "
                        "%d workers: the files of trace workers %d .. %d (grads-w%02d .. w%02d) "
                        "would be dropped; ask for it to accept that",
                        t->path, W, cfg->topo.nodes, cfg->topo.per_node, N, N, W - 1, N, W - 1);
}

int sq_replay_run(const sq_replay_config *cfg, const sq_trace *t, const sq_replay_sink *sink,
                  sq_replay_result *out, sq_error *err)
{
    memset(out, 0, sizeof *out);
    out->ef_residual = out->ef_residual_mean = NAN;
    double t_start = sq_clock_s();
    replay_state st = {.cfg = cfg, .t = t, .sink = sink, .res = out};
    st.nsteps = cfg->max_steps && cfg->max_steps < t->nsteps ? cfg->max_steps : t->nsteps;
    out->steps = st.nsteps;
    out->has_grad = (cfg->paths & SQ_REPLAY_GRAD) != 0;
    /* the weight path compares each step with weights with what the weight
    ** steps before it left behind: it needs two of them */
    st.wfirst = st.nsteps;
    for (size_t s = 0; s < st.nsteps; s++) {
        if (!sq_trace_step_has_weights(t, s)) continue;
        if (st.wfirst == st.nsteps) st.wfirst = s;
        out->weight_steps++;
    }
    out->has_weight = (cfg->paths & SQ_REPLAY_WEIGHT) && out->weight_steps >= 2;
    if (!out->has_weight) out->weight_steps = 0;
    out->consecutive = 1;
    for (size_t s = 1; s < st.nsteps; s++)
        if (t->steps[s] != t->steps[s - 1] + 1) out->consecutive = 0;
    static const char *const ops[SQ_REPLAY_NTIMINGS] = {"read", "grad_reducescatter",
                                                        "weight_allgather", "stats"};
    for (int k = 0; k < SQ_REPLAY_NTIMINGS; k++) out->timings[k].op = ops[k];
    if (!out->has_grad && !out->has_weight) {
        /* the trace lacks what was asked for, or nothing was asked */
        int weights_only = (cfg->paths & SQ_REPLAY_WEIGHT) && !(cfg->paths & SQ_REPLAY_GRAD);
        return sq_error_set(err, weights_only ? SQ_ERR_NOTFOUND : SQ_ERR_ARG,
                            "%s: nothing to replay: %s", t->path,
                            weights_only ? (t->has_weights ? "the weight path needs at least "
                                                             "two steps with weights"
                                                           : "the trace holds no weights")
                                         : "no path chosen");
    }
    size_t nonempty = 0;
    for (size_t p = 0; p < t->nparams; p++)
        if (t->params[p].n) nonempty++;
    if (!nonempty) {
        /* statistics of nothing would read as a perfect scheme */
        return sq_error_set(err, SQ_ERR_NOTFOUND, "%s: nothing to replay: every tensor of the "
                            "trace has 0 elements", t->path);
    }
    int rc = out->has_grad ? check_workers(cfg, t, out, err) : SQ_OK;
    if (rc) return rc;
    uint64_t *sizes = malloc((t->nparams ? t->nparams : 1) * sizeof *sizes);
    if (!sizes) return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", t->path);
    for (size_t p = 0; p < t->nparams; p++) sizes[p] = t->params[p].n;
    sq_layout layout;
    rc = sq_layout_for_scheme(&cfg->scheme, sizes, t->nparams, &layout, err);
    free(sizes);
    if (rc) return rc;
    st.layout = &layout;
    st.units = layout.nunits * st.nsteps;
    out->layout = layout.kind;
    out->units = layout.nunits;
    st.N = sq_topo_workers(&cfg->topo);
    st.acc = calloc(st.nsteps, sizeof *st.acc);
    st.ef = calloc(st.nsteps * (size_t)st.N * 2 + 1, sizeof *st.ef);
    if (!st.acc || !st.ef) {
        free(st.acc), free(st.ef);
        sq_layout_free(&layout);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", t->path);
    }
    for (size_t s = 0; s < st.nsteps; s++) {
        sq_erracc_init(&st.acc[s].e[0]);
        sq_erracc_init(&st.acc[s].e[1]);
    }
    sq_erracc_init(&st.total[0]);
    sq_erracc_init(&st.total[1]);
    for (size_t u = 0; u < layout.nunits; u++) {
        if ((rc = replay_unit(&st, u, err))) goto done;
        out->params += layout.units[u].count;
        out->elements += layout.units[u].n;
    }
    /* the steps as a whole */
    sq_stat_row *rows = calloc(2 * st.nsteps, sizeof *rows);
    if (!rows) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", t->path);
        goto done;
    }
    size_t nrows = 0;
    for (size_t s = 0; s < st.nsteps; s++) {
        const step_acc *a = &st.acc[s];
        if (out->has_grad)
            rows[nrows++] = (sq_stat_row){.step = t->steps[s], .path = "grad",
                                          .st = sq_erracc_finish(&a->e[0]),
                                          .frac_clipped = sq_step_frac(a->clipped[0], a->clip_n[0]),
                                          .seconds = a->seconds,
                                          .ef_residual = step_residual(&st, s)};
        if (weight_row(&st, s))
            rows[nrows++] = (sq_stat_row){.step = t->steps[s], .path = "weight",
                                          .st = sq_erracc_finish(&a->e[1]),
                                          .frac_clipped = sq_step_frac(a->clipped[1], a->clip_n[1]),
                                          .seconds = a->seconds, .ef_residual = NAN};
    }
    if (out->has_grad && st.has_ef) {
        out->ef_residual = step_residual(&st, st.nsteps - 1);
        out->ef_residual_mean = 0;
        for (size_t s = 0; s < st.nsteps; s++) out->ef_residual_mean += step_residual(&st, s);
        out->ef_residual_mean /= (double)st.nsteps;
    }
    rc = emit(&st, rows, nrows, err);
    free(rows);
    if (rc) goto done;
    out->grad = sq_erracc_finish(&st.total[0]);
    out->weight = sq_erracc_finish(&st.total[1]);
    out->grad_clipped = sq_step_frac(st.clipped[0], st.clip_n[0]);
    out->weight_clipped = sq_step_frac(st.clipped[1], st.clip_n[1]);
    sq_bytes_rows(&st.traffic, out->bytes);
    rc = SQ_OK;
done:
    free(st.acc);
    free(st.ef);
    sq_layout_free(&layout);
    out->seconds = sq_clock_s() - t_start;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) out->peak_rss = (uint64_t)ru.ru_maxrss * 1024;
    return rc;
}
