/*
** world.c -- the workers, their buffers and their traffic counters. The
** padding rule is in plan.c, the collectives in collectives.c.
*/
#include "world/world_internal.h"
#include "sq_hd.h"
#include "sq_internal.h"
#include "shardq/trace.h" /* SQ_FNV1A64_BASIS */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef SQ_HAVE_AVX512_PATHS
#include <immintrin.h>
#endif

int sq_world_set_error(sq_world *w, int status, const char *fmt, ...)
{
    w->err.status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err.msg, sizeof w->err.msg, fmt, ap);
    va_end(ap);
    return status;
}

int sq_world_describe_fail(const sq_world *w, int r, int rc, const char *what, sq_error *e)
{
    sq_backend *be = w->workers ? w->workers[r].be : NULL;
    const char *why = be ? sq_backend_error(be) : "";
    return sq_error_set(e, rc, "worker %d (%s): %s: %s%s%s", r, be ? sq_backend_name(be) : "-",
                        what, sq_strerror(rc), *why ? ": " : "", why);
}

int sq_world_fail(sq_world *w, int r, int rc, const char *what)
{
    return sq_world_describe_fail(w, r, rc, what, &w->err);
}

const char *sq_world_error(const sq_world *w) { return w ? w->err.msg : "no world"; }

const char *sq_coll_name(int coll)
{
    return coll == SQ_COLL_WEIGHT ? "weight_allgather" : "grad_reducescatter";
}

const char *sq_link_name(int link) { return link == SQ_LINK_INTRA ? "intra" : "inter"; }

/* ------------------------------------------------------------------------ */
/* Topology                                                                 */
/* ------------------------------------------------------------------------ */

int sq_topo_parse(const char *text, sq_topo *t, sq_error *err)
{
    unsigned long k = 0, g = 0;
    const char *p = text ? text : "";
    char *end;
    int ok = *p >= '0' && *p <= '9';
    if (ok) k = strtoul(p, &end, 10), ok = *end == 'x' && end[1] >= '0' && end[1] <= '9';
    if (ok) g = strtoul(end + 1, &end, 10), ok = *end == '\0';
    if (!ok) return sq_error_set(err, SQ_ERR_ARG, "'%s': expected NODESxPER_NODE, e.g. 16x4", p);
    if (k < 1 || g < 1 || k > SQ_WORLD_MAX_WORKERS || g > SQ_WORLD_MAX_WORKERS ||
        k * g > SQ_WORLD_MAX_WORKERS)
        return sq_error_set(err, SQ_ERR_ARG, "'%s': nodes and workers per node must be at least 1, "
                            "and at most %d workers in all", p, SQ_WORLD_MAX_WORKERS);
    t->nodes = (int)k;
    t->per_node = (int)g;
    return SQ_OK;
}

static uint64_t mul(uint64_t a, uint64_t b, int *overflow)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) *overflow = 1;
    return r;
}

/* Every byte of one iteration is counted in 64 bits, and the counters are
** summed over links, collectives and workers. A worker sends at most P
** elements on each wire it uses (N - 1 shards, or G - 1 sub-chunks of P / G),
** so N times the bytes of P elements on all three wires bounds every sum;
** past 2^64 the counts would wrap and print as small, wrong numbers. */
static int check_counters(sq_world *w)
{
    const sq_wire *wires[3] = {&w->scheme.weight, &w->scheme.grad_intra, &w->scheme.grad_inter};
    uint64_t per = 0;
    int ov = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t b = sq_wire_code_bytes(wires[i], w->padded) + sq_wire_meta_bytes(wires[i], w->padded);
        if (__builtin_add_overflow(per, b, &per)) ov = 1;
    }
    if (w->grad_path == SQ_GRAD_POWERSGD) { /* two all-reduces of fp32 factors */
        uint64_t f = mul(8, mul(w->L.psgd_rows + w->L.psgd_cols, (uint64_t)w->L.psgd_rank, &ov), &ov);
        if (__builtin_add_overflow(per, f, &per)) ov = 1;
    }
    (void)mul(per, (uint64_t)w->N, &ov);
    if (!ov) return SQ_OK;
    return sq_world_set_error(w, SQ_ERR_ARG, "elements %llu on %d workers: the bytes of one "
                              "iteration overflow the 64-bit traffic counters; use fewer elements "
                              "or workers", (unsigned long long)w->n, w->N);
}

/* ------------------------------------------------------------------------ */
/* Opening and closing                                                      */
/* ------------------------------------------------------------------------ */

static int alloc_floats(sq_world *w, int r, uint64_t n, float **p, const char *what)
{
    void *q = NULL;
    if (sq_backend_kind_of(w->workers[r].be) == SQ_BACKEND_CPU) {
        /* zero pages from the system: no pass of our own over memory the
        ** first step writes anyway */
        if (!(*p = calloc(n ? (size_t)n : 1, sizeof(float))))
            return sq_world_set_error(w, SQ_ERR_NOMEM, "worker %d (cpu): %s: out of memory "
                                      "(%llu floats)", r, what, (unsigned long long)n);
        return SQ_OK;
    }
    int rc = sq_backend_alloc(w->workers[r].be, (size_t)n * sizeof(float), &q);
    if (rc) return sq_world_fail(w, r, rc, what);
    rc = sq_backend_fill(w->workers[r].be, q, 0, (size_t)n * sizeof(float));
    *p = q;
    return rc ? sq_world_fail(w, r, rc, what) : SQ_OK;
}

static int alloc_wire(sq_world *w, int r, const sq_wire *wr, uint64_t n, sq_qbuf *q,
                      const char *what)
{
    int rc = sq_wire_alloc(w->workers[r].be, wr, n, q);
    return rc ? sq_world_fail(w, r, rc, what) : SQ_OK;
}

static uint64_t wire_bytes(const sq_wire *wr, uint64_t n)
{
    return sq_wire_code_bytes(wr, n) + sq_wire_meta_bytes(wr, n);
}

/* The bytes alloc_worker takes for one worker (keep the two in step), and
** the host staging: what a world on the CPU needs beside the caller's. */
static uint64_t world_bytes(const sq_world *w, int workers)
{
    const sq_scheme *s = &w->scheme;
    const uint64_t P = w->padded, S = w->shard, Q = P / (uint64_t)w->topo.per_node;
    uint64_t b = 4 * (2 * P + 2 * S);
    if (w->N > 1) b += wire_bytes(&s->weight, P);
    if (w->grad_path == SQ_GRAD_RING) b += 2 * wire_bytes(w->single_wire, S) + 4 * S;
    if (w->grad_path == SQ_GRAD_A2A) b += 2 * wire_bytes(w->single_wire, P) + 4 * S;
    if (w->grad_path == SQ_GRAD_TWOLEVEL)
        b += 3 * wire_bytes(&s->grad_intra, P) + 2 * wire_bytes(&s->grad_inter, Q) + 8 * Q;
    if (w->grad_path == SQ_GRAD_POWERSGD) {
        /* M (the residual between steps), P, Q, the incoming chunk, the flag */
        for (int k = SQ_PLAN_PSGD_M; k <= SQ_PLAN_PSGD_WARM; k++)
            b += 4 * sq_plan_buffer_len(&w->L, k);
        if (s->psgd_start) b += 2 * wire_bytes(w->single_wire, S) + 4 * S;
    }
    b += sq_world_residual_bytes(w);
    int ov = 0;
    uint64_t all = mul(b, (uint64_t)workers, &ov) + 4 * P;
    return ov || all < 4 * P ? UINT64_MAX : all;
}

/* Workers on the CPU share its memory: a world larger than all of it would
** be filled until the system killed the process, so it is refused first. */
static int check_memory(sq_world *w, const char *device)
{
    if (device && strcmp(device, "cpu") != 0) return SQ_OK; /* on GPUs: their allocator says */
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0) return SQ_OK;
    uint64_t have = (uint64_t)pages * (uint64_t)size, need = world_bytes(w, w->tr ? 1 : w->N);
    if (need <= have) return SQ_OK;
    return sq_world_set_error(w, SQ_ERR_NOMEM, "elements %llu on %d workers: the buffers take %.3g "
                              "GB, more than the %.3g GB of memory; use fewer elements or workers",
                              (unsigned long long)w->n, w->tr ? 1 : w->N, (double)need / 1e9,
                              (double)have / 1e9);
}

/* Each worker gets the buffers of the paths the scheme runs on this
** topology, and nothing else. */
static int alloc_worker(sq_world *w, int r)
{
    sq_worker *k = &w->workers[r];
    const sq_scheme *s = &w->scheme;
    uint64_t P = w->padded, S = w->shard;
    int rc;
    if ((rc = alloc_floats(w, r, P, &k->grad, "allocating the gradient")) ||
        (rc = alloc_floats(w, r, S, &k->gout, "allocating the reduced shard")) ||
        (rc = alloc_floats(w, r, P, &k->what, "allocating the model weights")) ||
        (rc = alloc_floats(w, r, S, &k->master, "allocating the master shard")))
        return rc;
    if (w->N > 1 && (rc = alloc_wire(w, r, &s->weight, P, &k->wrecv, "allocating the weight wire")))
        return rc;
    switch (w->grad_path) {
    case SQ_GRAD_RING:
        if ((rc = alloc_wire(w, r, w->single_wire, S, &k->rsend, "allocating the ring buffers")) ||
            (rc = alloc_wire(w, r, w->single_wire, S, &k->rrecv, "allocating the ring buffers")) ||
            (rc = alloc_floats(w, r, S, &k->tmp, "allocating scratch")))
            return rc;
        break;
    case SQ_GRAD_A2A:
        if ((rc = alloc_wire(w, r, w->single_wire, P, &k->genc, "allocating the gradient wire")) ||
            (rc = alloc_wire(w, r, w->single_wire, P, &k->grecv, "allocating the receive buffer")) ||
            (rc = alloc_floats(w, r, S, &k->tmp, "allocating scratch")))
            return rc;
        break;
    case SQ_GRAD_TWOLEVEL: {
        uint64_t Q = P / (uint64_t)w->topo.per_node;
        if ((rc = alloc_wire(w, r, &s->grad_intra, P, &k->genc, "allocating the gradient wire")) ||
            (rc = alloc_wire(w, r, &s->grad_intra, P, &k->gswz, "allocating the swizzle buffer")) ||
            (rc = alloc_wire(w, r, &s->grad_intra, P, &k->grecv, "allocating the intra receive buffer")) ||
            (rc = alloc_wire(w, r, &s->grad_inter, Q, &k->greq, "allocating the requantized sum")) ||
            (rc = alloc_wire(w, r, &s->grad_inter, Q, &k->grecv2, "allocating the inter receive buffer")) ||
            (rc = alloc_floats(w, r, Q, &k->tmp, "allocating scratch")) ||
            (rc = alloc_floats(w, r, Q, &k->tmp2, "allocating scratch")))
            return rc;
        break;
    }
    case SQ_GRAD_POWERSGD: {
        const sq_plan_layout *L = &w->L;
        const sq_wire *fp32 = w->single_wire;
        if ((rc = alloc_floats(w, r, sq_plan_buffer_len(L, SQ_PLAN_PSGD_M), &k->psgd_m,
                               "allocating PowerSGD's residual")) ||
            (rc = alloc_floats(w, r, 1, &k->psgd_warm, "allocating PowerSGD's state")) ||
            (rc = alloc_wire(w, r, fp32, sq_plan_buffer_len(L, SQ_PLAN_PSGD_P), &k->psgd_p,
                             "allocating PowerSGD's P")) ||
            (rc = alloc_wire(w, r, fp32, sq_plan_buffer_len(L, SQ_PLAN_PSGD_Q), &k->psgd_q,
                             "allocating PowerSGD's Q")) ||
            (rc = alloc_wire(w, r, fp32, sq_plan_buffer_len(L, SQ_PLAN_PSGD_RECV), &k->psgd_recv,
                             "allocating PowerSGD's receive buffer")))
            return rc;
        /* the steps before grad.powersgd.start take the ring */
        if (s->psgd_start &&
            ((rc = alloc_wire(w, r, fp32, S, &k->rsend, "allocating the ring buffers")) ||
             (rc = alloc_wire(w, r, fp32, S, &k->rrecv, "allocating the ring buffers")) ||
             (rc = alloc_floats(w, r, S, &k->tmp, "allocating scratch"))))
            return rc;
        break;
    }
    default:
        break;
    }
    /* error feedback's residuals: zero until the first reduce */
    uint64_t e1 = sq_plan_buffer_len(&w->L, SQ_PLAN_EF);
    uint64_t e2 = sq_plan_buffer_len(&w->L, SQ_PLAN_EF2);
    if ((e1 && (rc = alloc_floats(w, r, e1, &k->ef, "allocating the error-feedback residual"))) ||
        (e2 && (rc = alloc_floats(w, r, e2, &k->ef2, "allocating the error-feedback residual"))))
        return rc;
    return SQ_OK;
}

static void free_worker(sq_world *w, int r)
{
    sq_worker *k = &w->workers[r];
    sq_backend *be = k->be;
    if (!be) return;
    const sq_scheme *s = &w->scheme;
    float *floats[] = {k->grad, k->gout, k->what, k->master, k->tmp, k->tmp2, k->ef, k->ef2};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) sq_backend_free(be, floats[i]);
    sq_wire_free(be, &s->weight, &k->wrecv);
    const sq_wire *first = w->grad_path == SQ_GRAD_TWOLEVEL ? &s->grad_intra : w->single_wire;
    sq_wire_free(be, first, &k->genc);
    sq_wire_free(be, first, &k->gswz);
    sq_wire_free(be, first, &k->grecv);
    sq_wire_free(be, &s->grad_inter, &k->greq);
    sq_wire_free(be, &s->grad_inter, &k->grecv2);
    sq_wire_free(be, w->single_wire, &k->rsend);
    sq_wire_free(be, w->single_wire, &k->rrecv);
    sq_backend_free(be, k->psgd_m);
    sq_backend_free(be, k->psgd_warm);
    sq_wire_free(be, w->single_wire, &k->psgd_p);
    sq_wire_free(be, w->single_wire, &k->psgd_q);
    sq_wire_free(be, w->single_wire, &k->psgd_recv);
}

/* Worker r's buffers under the names its plan uses. */
static void plan_mem(sq_world *w, int r)
{
    sq_worker *k = &w->workers[r];
    sq_plan_mem *m = &w->mem[r];
    m->be = k->be;
    m->f[SQ_PLAN_GRAD] = k->grad, m->f[SQ_PLAN_GOUT] = k->gout;
    m->f[SQ_PLAN_WHAT] = k->what, m->f[SQ_PLAN_MASTER] = k->master;
    m->f[SQ_PLAN_TMP] = k->tmp, m->f[SQ_PLAN_TMP2] = k->tmp2;
    m->q[SQ_PLAN_WRECV] = k->wrecv, m->q[SQ_PLAN_GENC] = k->genc;
    m->q[SQ_PLAN_GSWZ] = k->gswz, m->q[SQ_PLAN_GRECV] = k->grecv;
    m->q[SQ_PLAN_GREQ] = k->greq, m->q[SQ_PLAN_GRECV2] = k->grecv2;
    m->q[SQ_PLAN_RSEND] = k->rsend, m->q[SQ_PLAN_RRECV] = k->rrecv;
    m->f[SQ_PLAN_PSGD_M] = k->psgd_m, m->f[SQ_PLAN_PSGD_WARM] = k->psgd_warm;
    m->q[SQ_PLAN_PSGD_P] = k->psgd_p, m->q[SQ_PLAN_PSGD_Q] = k->psgd_q;
    m->q[SQ_PLAN_PSGD_RECV] = k->psgd_recv;
    m->f[SQ_PLAN_EF] = k->ef, m->f[SQ_PLAN_EF2] = k->ef2;
}

int sq_world_open(const sq_world_config *cfg, sq_world **out, sq_error *err)
{
    *out = NULL;
    sq_plan_layout L;
    int rc = sq_plan_layout_init(cfg, &L, err);
    if (rc) return rc;
    sq_world *w = calloc(1, sizeof *w);
    if (!w) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    w->L = L;
    w->topo = cfg->topo;
    w->N = L.N;
    w->scheme = cfg->scheme;
    w->n = cfg->elements;
    w->seed = cfg->seed;
    w->dry = cfg->dry;
    w->grad_path = L.grad_path;
    w->single_wire = L.single_wire == SQ_PLAN_WIRE_INTER ? &w->scheme.grad_inter
                                                         : &w->scheme.grad_intra;
    w->unit = L.unit;
    w->padded = L.padded;
    w->shard = L.shard;
    w->Lv = L;
    w->Lv.grad_path = SQ_GRAD_RING; /* PowerSGD's steps before grad.powersgd.start */
    w->tr = cfg->transport;
    w->rank = -1;
    w->digest = cfg->digest;
    const int N = w->N;
    if (w->tr && !w->tr->share && !w->tr->gather_all) {
        /* an in-process transport: every worker here, its messages through it */
        w->itr = w->tr;
        w->tr = NULL;
        if (!w->itr->send || !w->itr->recv) {
            rc = sq_world_set_error(w, SQ_ERR_ARG, "an in-process transport needs send and recv");
            goto fail;
        }
    }
    if (w->tr) {
        const sq_transport *t = w->tr;
        if (!t->send || !t->recv || !t->share || !t->gather_all) {
            rc = sq_world_set_error(w, SQ_ERR_ARG, "a transport of one rank per process needs "
                                    "send, recv, share and gather_all");
            goto fail;
        }
        if (t->nranks != N || t->rank < 0 || t->rank >= N) {
            rc = sq_world_set_error(w, SQ_ERR_ARG, "the transport joins %d ranks (this one %d), the "
                                    "topology %dx%d has %d workers: one rank per worker",
                                    t->nranks, t->rank, w->topo.nodes, w->topo.per_node, N);
            goto fail;
        }
        w->rank = t->rank;
    }
    const uint64_t P = w->padded;
    if ((rc = check_counters(w)) != SQ_OK) goto fail;
    w->traffic = calloc((size_t)N, sizeof *w->traffic);
    w->workers = calloc((size_t)N, sizeof *w->workers);
    w->max_ops = sq_plan_max_phase_ops(&w->L);
    w->ops = malloc(w->max_ops * sizeof *w->ops);
    w->rec = calloc((size_t)N, sizeof *w->rec);
    if (!w->traffic || !w->workers || !w->ops || !w->rec) {
        rc = sq_world_set_error(w, SQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int r = 0; w->digest && r < N; r++) w->rec[r].digest = SQ_FNV1A64_BASIS;
    if (!w->dry) {
        if ((rc = check_memory(w, cfg->device)) != SQ_OK) goto fail;
        if ((rc = sq_placement_open(cfg->device ? cfg->device : "cpu", &w->pl, &w->err))) goto fail;
        w->have_placement = 1;
        w->stage = malloc((size_t)P * sizeof(float));
        w->mem = calloc((size_t)N, sizeof *w->mem);
        if (!w->stage || !w->mem) {
            rc = sq_world_set_error(w, SQ_ERR_NOMEM, "out of memory: %llu elements of host staging",
                                    (unsigned long long)P);
            goto fail;
        }
        for (int r = 0; r < N; r++) {
            if (!sq_world_holds(w, r)) continue;
            w->workers[r].be = sq_placement_worker(&w->pl, (uint64_t)r);
            if ((rc = alloc_worker(w, r)) != SQ_OK) goto fail;
            plan_mem(w, r);
        }
    }
    *out = w;
    return SQ_OK;
fail:
    sq_error_set(err, rc, "%s", w->err.msg);
    sq_world_close(w);
    return rc;
}

void sq_world_close(sq_world *w)
{
    if (!w) return;
    if (w->workers)
        for (int r = 0; r < w->N; r++) free_worker(w, r);
    if (w->have_placement) sq_placement_close(&w->pl);
    free(w->workers);
    free(w->traffic);
    free(w->stage);
    free(w->mem);
    free(w->ops);
    free(w->rec);
    free(w);
}

/* ------------------------------------------------------------------------ */
/* Accessors                                                                */
/* ------------------------------------------------------------------------ */

const sq_topo *sq_world_topo(const sq_world *w) { return &w->topo; }
const sq_scheme *sq_world_scheme(const sq_world *w) { return &w->scheme; }
int sq_world_workers(const sq_world *w) { return w->N; }
uint64_t sq_world_elements(const sq_world *w) { return w->n; }
uint64_t sq_world_padded(const sq_world *w) { return w->padded; }
uint64_t sq_world_shard(const sq_world *w) { return w->shard; }
uint64_t sq_world_pad_unit(const sq_world *w) { return w->unit; }
uint64_t sq_world_shard_len(const sq_world *w, int r) { return sq_plan_shard_len(&w->L, r); }
sq_grad_mode sq_world_grad_path(const sq_world *w) { return w->grad_path; }
const sq_wire *sq_world_single_wire(const sq_world *w) { return w->single_wire; }
struct sq_backend *sq_world_backend(const sq_world *w, int r)
{
    return (r >= 0 && r < w->N && w->workers) ? w->workers[r].be : NULL;
}

int sq_world_holds(const sq_world *w, int r)
{
    return r >= 0 && r < w->N && (w->rank < 0 || r == w->rank);
}

int sq_world_local_rank(const sq_world *w) { return w->rank; }

sq_coll_time sq_world_times(const sq_world *w, int coll)
{
    sq_coll_time t = {0, 0, {0, 0}};
    if (coll < 0 || coll >= SQ_NCOLL) return t;
    for (int r = 0; r < w->N; r++) {
        const sq_coll_time *x = &w->rec[r].times[coll];
        if (x->calls > t.calls) t.calls = x->calls;
        if (x->seconds > t.seconds) t.seconds = x->seconds;
        for (int l = 0; l < SQ_NLINK; l++)
            if (x->link_seconds[l] > t.link_seconds[l]) t.link_seconds[l] = x->link_seconds[l];
    }
    return t;
}

void sq_world_add_times(const sq_world *w, sq_coll_time sum[SQ_NCOLL])
{
    for (int c = 0; c < SQ_NCOLL; c++) {
        sq_coll_time t = sq_world_times(w, c);
        sum[c].calls += t.calls;
        sum[c].seconds += t.seconds;
        for (int l = 0; l < SQ_NLINK; l++) sum[c].link_seconds[l] += t.link_seconds[l];
    }
}

uint64_t sq_world_wire_digest(const sq_world *w, int r)
{
    return (r >= 0 && r < w->N) ? w->rec[r].digest : 0;
}

int sq_world_share(sq_world *w, int owner, void *buf, size_t bytes)
{
    if (!w->tr || bytes == 0) return SQ_OK;
    sq_error e = {0};
    int rc = w->tr->share(w->tr->ctx, owner, buf, bytes, &e);
    return rc ? sq_world_set_error(w, rc, "sharing %zu bytes of worker %d: %s", bytes, owner,
                                   sq_error_message(&e))
              : SQ_OK;
}

int sq_world_sync_records(sq_world *w)
{
    if (!w->tr) return SQ_OK;
    sq_rank_record mine = w->rec[w->rank];
    mine.traffic = w->traffic[w->rank];
    sq_error e = {0};
    int rc = w->tr->gather_all(w->tr->ctx, &mine, w->rec, sizeof mine, &e);
    if (rc) return sq_world_set_error(w, rc, "exchanging the ranks' counters: %s",
                                      sq_error_message(&e));
    for (int r = 0; r < w->N; r++) w->traffic[r] = w->rec[r].traffic;
    return SQ_OK;
}

const sq_traffic *sq_world_traffic(const sq_world *w, int r)
{
    return (r >= 0 && r < w->N) ? &w->traffic[r] : NULL;
}

void sq_world_add_traffic(const sq_world *w, sq_traffic *sum)
{
    for (int r = 0; r < w->N; r++)
        for (int c = 0; c < SQ_NCOLL; c++)
            for (int l = 0; l < SQ_NLINK; l++) {
                const sq_link_traffic *x = &w->traffic[r].t[c][l];
                sq_link_traffic *y = &sum->t[c][l];
                y->sent_codes += x->sent_codes, y->sent_meta += x->sent_meta;
                y->recv_codes += x->recv_codes, y->recv_meta += x->recv_meta;
                y->sent_elems += x->sent_elems, y->messages += x->messages;
                y->sent_params += x->sent_params;
            }
}

void sq_world_reset_traffic(sq_world *w) { memset(w->traffic, 0, (size_t)w->N * sizeof *w->traffic); }

/* ------------------------------------------------------------------------ */
/* Host data in and out                                                     */
/* ------------------------------------------------------------------------ */

static int check_worker(sq_world *w, int r, const void *p)
{
    if (w->dry) return sq_world_set_error(w, SQ_ERR_UNSUPPORTED, "a dry world (sizes only) holds no data");
    if (r < 0 || r >= w->N || !p)
        return sq_world_set_error(w, SQ_ERR_ARG, "worker %d: no such worker (0 to %d) or no buffer",
                                  r, w->N - 1);
    return SQ_OK;
}

static int check_finite(sq_world *w, const float *x, uint64_t n, int r, const char *what)
{
    size_t i = sq_find_nonfinite(x, (size_t)n);
    if (i == n) return SQ_OK;
    return sq_world_set_error(w, SQ_ERR_NONFINITE, "worker %d: %s, element %zu: %s", r, what, i,
                              x[i] != x[i] ? "NaN" : "infinite");
}

/* Only the process that holds worker r keeps what is put for it. */
static int put(sq_world *w, int r, void *dst, const void *src, uint64_t bytes, const char *what)
{
    if (!sq_world_holds(w, r)) return SQ_OK;
    int rc = sq_backend_put(w->workers[r].be, dst, src, (size_t)bytes);
    return rc ? sq_world_fail(w, r, rc, what) : SQ_OK;
}

/* The holder reads; with a transport every process then gets its bytes. */
static int get(sq_world *w, int r, void *dst, const void *src, uint64_t bytes, const char *what)
{
    if (sq_world_holds(w, r)) {
        int rc = sq_backend_get(w->workers[r].be, dst, src, (size_t)bytes);
        if (rc) return sq_world_fail(w, r, rc, what);
    }
    return sq_world_share(w, r, dst, (size_t)bytes);
}

int sq_world_init_weights(sq_world *w, const float *host_w0)
{
    int rc;
    if ((rc = check_worker(w, 0, host_w0)) || (rc = check_finite(w, host_w0, w->n, 0, "initial weights")))
        return rc;
    memcpy(w->stage, host_w0, (size_t)w->n * sizeof(float));
    memset(w->stage + w->n, 0, (size_t)(w->padded - w->n) * sizeof(float));
    /* The reference systems start every replica from one bf16 model (and
    ** their fp32 masters from it); here the master stays the fp32 w0 the
    ** caller gives, and w-hat is that model's bf16 copy. One worker has no
    ** wire: its w-hat is always its master. */
    const int bf16 = w->N > 1 && !sq_wire_raw(&w->scheme.weight) &&
                     w->scheme.weight_recon == SQ_RECON_BF16;
    for (uint64_t i = 0; bf16 && i < w->n; i++)
        if (sq_hd_nonfinite(sq_hd_bf16_round(host_w0[i])))
            return sq_world_set_error(w, SQ_ERR_RANGE, "initial weights, element %llu: %g is "
                                      "beyond bf16's range (weight.recon=bf16)",
                                      (unsigned long long)i, (double)host_w0[i]);
    for (int r = 0; r < w->N; r++) {
        sq_worker *k = &w->workers[r];
        if ((rc = put(w, r, k->master, w->stage + (uint64_t)r * w->shard, w->shard * 4,
                      "writing the initial master shard")))
            return rc;
    }
    if (bf16)
        for (uint64_t i = 0; i < w->n; i++) w->stage[i] = sq_hd_bf16_round(w->stage[i]);
    if (w->rank < 0 && sq_world_all_host(w)) {
        /* every replica in this process's memory: copied side by side, so
        ** that the first touch of N fresh buffers (most of the time of
        ** this copy) runs on every thread */
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static, 1)
        for (int r = 0; r < w->N; r++)
            memcpy(w->workers[r].what, w->stage, (size_t)w->padded * sizeof(float));
        return SQ_OK;
    }
    for (int r = 0; r < w->N; r++)
        if ((rc = put(w, r, w->workers[r].what, w->stage, w->padded * 4, "writing the initial weights")))
            return rc;
    return SQ_OK;
}

int sq_world_put_master(sq_world *w, int r, const float *host_shard)
{
    int rc;
    if ((rc = check_worker(w, r, host_shard)) ||
        (rc = check_finite(w, host_shard, w->shard, r, "master shard")))
        return rc;
    /* the padding past n is part of no parameter and must stay zero */
    uint64_t first = (uint64_t)r * w->shard;
    for (uint64_t i = first < w->n ? w->n - first : 0; i < w->shard; i++)
        if (host_shard[i] != 0.0f || 1.0f / host_shard[i] < 0)
            return sq_world_set_error(w, SQ_ERR_ARG, "worker %d: master shard, element %llu: padding "
                                      "(past the %llu elements of the model) must stay +0", r,
                                      (unsigned long long)i, (unsigned long long)w->n);
    return put(w, r, w->workers[r].master, host_shard, w->shard * 4, "writing the master shard");
}

int sq_world_get_master(sq_world *w, int r, float *host_shard)
{
    int rc = check_worker(w, r, host_shard);
    return rc ? rc : get(w, r, host_shard, w->workers[r].master, w->shard * 4, "reading the master shard");
}

int sq_world_get_weights(sq_world *w, int r, float *host_out)
{
    int rc = check_worker(w, r, host_out);
    return rc ? rc : get(w, r, host_out, w->workers[r].what, w->n * 4, "reading the model weights");
}

const float *sq_world_weights_in_place(const sq_world *w, int r)
{
    if (!w || r < 0 || r >= w->N || !sq_world_holds(w, r) ||
        sq_backend_kind_of(w->workers[r].be) != SQ_BACKEND_CPU)
        return NULL;
    return w->workers[r].what;
}

#ifdef SQ_HAVE_AVX512_PATHS
/* dst = x * inv with streaming stores, returning whether any x is not
** finite. For a piece of a worker's gradient buffer, which is far larger
** than the caches and is next read from memory by the reduce-scatter:
** plain stores would first read every line of it in (a bucket replay's
** staging took 15% longer with them). The same products, so the same
** bytes. */
SQ_AVX512
static int mul_stream(const float *restrict x, float inv, uint64_t n, float *restrict dst)
{
    uint32_t bad = 0;
    uint64_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 63); i++) {
        dst[i] = x[i] * inv;
        bad |= sq_hd_nonfinite(x[i]);
    }
    const __m512 v = _mm512_set1_ps(inv);
    const __m512i e = _mm512_set1_epi32(0x7f800000);
    __mmask16 m = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_loadu_ps(x + i);
        m |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(a), e), e);
        _mm512_stream_ps(dst + i, _mm512_mul_ps(a, v));
    }
    for (; i < n; i++) {
        dst[i] = x[i] * inv;
        bad |= sq_hd_nonfinite(x[i]);
    }
    _mm_sfence(); /* the streamed lines reach memory before anyone reads them */
    return bad != 0 || m != 0;
}
#endif

/* dst = x / div, returning whether any x is not finite: the check rides
** on the pass that reads x anyway. Split over the threads (each element
** is its own division): this runs for every worker at every step. */
SQ_MULTIVERSION
static int div_pass(const float *restrict x, float div, uint64_t n, float *restrict dst)
{
    uint32_t bad = 0;
    /* by a power of two (N = 2, 4, 8 ...), a multiplication by its
    ** reciprocal, which is exact: both are the correctly rounded x / div */
    if (sq_bits_f32(div) << 9 == 0) {
        const float inv = 1.0f / div;
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) \
    reduction(| : bad) if (n >= (1u << 16))
        for (uint64_t i = 0; i < n; i++) {
            dst[i] = x[i] * inv;
            bad |= sq_hd_nonfinite(x[i]);
        }
        return bad != 0;
    }
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) \
    reduction(| : bad) if (n >= (1u << 16))
    for (uint64_t i = 0; i < n; i++) {
        dst[i] = x[i] / div;
        bad |= sq_hd_nonfinite(x[i]);
    }
    return bad != 0;
}

/* x[i] rounded to fp16 in place, returning whether any overflowed (the
** input is finite, so a non-finite result is an overflow). */
SQ_MULTIVERSION
static int round_f16_pass(float *restrict x, uint64_t n)
{
    uint32_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        x[i] = sq_hd_round_f16(x[i]);
        bad |= sq_hd_nonfinite(x[i]);
    }
    return bad != 0;
}

/* What a worker's gradient is divided by before the reduction: N for a
** mean (Megatron's division of the gradient buffer), else 1. */
static float grad_divisor(const sq_world *w)
{
    return w->scheme.grad_mean && w->N > 1 ? (float)w->N : 1.0f;
}

/* The gradient's elements [first, first + len) as a worker holds them,
** into dst (the worker's whole gradient buffer, or the staging): Megatron
** divides the fp32 gradient buffer by N before reducing, so that the sum is
** the mean; we do the same division, in fp32. Under grad.dtype=fp16 (qgZ
** quantizes fp16 gradients) the quotient rounded to fp16, after the
** division, where DeepSpeed divides by K after the hops. The part that
** ends at n zeroes the padding. SQ_ERR_NONFINITE for a NaN or an Inf in x,
** SQ_ERR_RANGE for an fp16 overflow; no message. stream: dst is a piece of
** a worker's buffer, written with streaming stores where they apply (fp32
** gradients: the fp16 rounding reads the quotients back at once). */
static int grad_into(const sq_world *w, const float *x, uint64_t first, uint64_t len, float *dst,
                     int stream)
{
    const float div = grad_divisor(w);
    int bad;
#ifdef SQ_HAVE_AVX512_PATHS
    /* by a power of two: the multiplication div_pass makes */
    if (stream && w->scheme.grad_dtype != SQ_GRAD_FP16 && sq_bits_f32(div) << 9 == 0 &&
        sq_cpu_avx512())
        bad = mul_stream(x, 1.0f / div, len, dst + first);
    else
#endif
        bad = div_pass(x, div, len, dst + first);
    (void)stream;
    if (bad) return SQ_ERR_NONFINITE;
    if (w->scheme.grad_dtype == SQ_GRAD_FP16 && round_f16_pass(dst + first, len)) return SQ_ERR_RANGE;
    if (first + len == w->n) memset(dst + w->n, 0, (size_t)(w->padded - w->n) * sizeof(float));
    return SQ_OK;
}

int sq_world_put_grad(sq_world *w, int r, const float *host_grad)
{
    int rc;
    if ((rc = check_worker(w, r, host_grad))) return rc;
    /* A worker in host memory takes the result straight into its buffer (no
    ** staging and copy: this runs for every worker at every step). */
    float *dst = sq_world_holds(w, r) && sq_backend_kind_of(w->workers[r].be) == SQ_BACKEND_CPU
                     ? w->workers[r].grad
                     : w->stage;
    rc = grad_into(w, host_grad, 0, w->n, dst, 0);
    if (rc == SQ_ERR_NONFINITE) return check_finite(w, host_grad, w->n, r, "gradient");
    if (rc == SQ_ERR_RANGE) {
        const float div = grad_divisor(w);
        for (uint64_t i = 0; i < w->n; i++)
            if (sq_hd_nonfinite(dst[i]))
                return sq_world_set_error(w, SQ_ERR_RANGE,
                                          "worker %d: gradient element %llu = %g overflows "
                                          "fp16 (grad.dtype=fp16)",
                                          r, (unsigned long long)i, (double)(host_grad[i] / div));
    }
    return dst == w->stage ? put(w, r, w->workers[r].grad, w->stage, w->padded * 4,
                                 "writing the gradient")
                           : SQ_OK;
}

int sq_world_put_grad_part(sq_world *w, int r, uint64_t first, uint64_t len, const float *x)
{
    /* No message on any path: parts run on several threads at once, and
    ** the world's one error text is not theirs to share. */
    if (w->dry || w->rank >= 0 || r < 0 || r >= w->N ||
        sq_backend_kind_of(w->workers[r].be) != SQ_BACKEND_CPU)
        return SQ_ERR_UNSUPPORTED;
    if (first > w->n || len > w->n - first || (len && !x)) return SQ_ERR_ARG;
    return len ? grad_into(w, x, first, len, w->workers[r].grad, 1) : SQ_OK;
}

int sq_world_get_grad_shard(sq_world *w, int r, float *host_out)
{
    int rc = check_worker(w, r, host_out);
    return rc ? rc : get(w, r, host_out, w->workers[r].gout, w->shard * 4, "reading the reduced shard");
}

int sq_world_replicas_differ(sq_world *w, const float *what0, float *tmp, int *differs)
{
    *differs = 0;
    int rc = check_worker(w, 0, what0);
    if (rc) return rc;
    if (!w->tr) {
        if (sq_world_all_host(w)) {
            /* replicas in host memory are compared where they lie, side by
            ** side, with worker 0's (what0 is its copy); the first that
            ** differs is the one named */
            int first = w->N;
#pragma omp parallel for num_threads(sq_get_threads()) schedule(static) reduction(min : first) \
    if ((uint64_t)w->N * w->n >= (1u << 20))
            for (int r = 1; r < w->N; r++)
                /* bytes, not values: -0 against +0 or two NaNs are a divergence too */
                if (memcmp(w->workers[r].what, what0, (size_t)w->n * sizeof *tmp) != 0 && r < first)
                    first = r;
            *differs = first < w->N ? first : 0;
            return SQ_OK;
        }
        for (int r = 0; r < w->N; r++) {
            const float *x = w->workers[r].what;
            if (sq_backend_kind_of(w->workers[r].be) != SQ_BACKEND_CPU) {
                if ((rc = get(w, r, tmp, x, w->n * 4, "reading the model weights"))) return rc;
                x = tmp;
            }
            if (memcmp(x, what0, (size_t)w->n * sizeof *tmp) != 0) {
                *differs = r;
                return SQ_OK;
            }
        }
        return SQ_OK;
    }
    /* one rank per process: each compares its own replica; one flag each travels */
    int r = w->rank, mine = 0;
    if ((rc = sq_backend_get(w->workers[r].be, tmp, w->workers[r].what, (size_t)w->n * 4)))
        return sq_world_fail(w, r, rc, "reading the model weights");
    mine = memcmp(tmp, what0, (size_t)w->n * sizeof *tmp) != 0;
    int *flags = malloc((size_t)w->N * sizeof *flags);
    if (!flags) return sq_world_set_error(w, SQ_ERR_NOMEM, "out of memory");
    sq_error e = {0};
    rc = w->tr->gather_all(w->tr->ctx, &mine, flags, sizeof mine, &e);
    if (rc) {
        free(flags);
        return sq_world_set_error(w, rc, "exchanging the replica checks: %s", sq_error_message(&e));
    }
    for (int k = 0; k < w->N && !*differs; k++)
        if (flags[k]) *differs = k;
    free(flags);
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Error feedback's residuals                                               */
/* ------------------------------------------------------------------------ */

static int residual_buf(int hop) { return hop == 0 ? SQ_PLAN_EF : SQ_PLAN_EF2; }

uint64_t sq_world_residual_len(const sq_world *w, int hop)
{
    return hop == 0 || hop == 1 ? sq_plan_buffer_len(&w->L, residual_buf(hop)) : 0;
}

uint64_t sq_world_residual_bytes(const sq_world *w)
{
    return 4 * (sq_world_residual_len(w, 0) + sq_world_residual_len(w, 1));
}

/* The sum of squares in fp64, element by element in order: the same figure
** from the same bytes on every backend. */
static double sum_sq(const float *x, uint64_t n)
{
    double s = 0;
    for (uint64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

/* Worker r's n floats at p, read where they lie (through the staging
** buffer from a device). */
static int sum_sq_of(sq_world *w, int r, const float *p, uint64_t n, double *out)
{
    *out = 0;
    if (!n) return SQ_OK;
    if (sq_backend_kind_of(w->workers[r].be) == SQ_BACKEND_CPU) {
        *out = sum_sq(p, n);
        return SQ_OK;
    }
    int rc = sq_backend_get(w->workers[r].be, w->stage, p, (size_t)n * sizeof(float));
    if (rc) return sq_world_fail(w, r, rc, "reading the error-feedback residual");
    *out = sum_sq(w->stage, n);
    return SQ_OK;
}

int sq_world_measure_residuals(sq_world *w)
{
    if (w->dry || !sq_world_residual_bytes(w)) return SQ_OK;
    const uint64_t e1 = sq_world_residual_len(w, 0), e2 = sq_world_residual_len(w, 1);
    for (int r = 0; r < w->N; r++) {
        if (!sq_world_holds(w, r)) continue;
        sq_worker *k = &w->workers[r];
        double a = 0, b = 0, x = 0;
        int rc;
        if ((rc = sum_sq_of(w, r, k->ef, e1, &a)) || (rc = sum_sq_of(w, r, k->ef2, e2, &b)) ||
            (rc = sum_sq_of(w, r, k->grad, w->padded, &x)))
            return rc;
        w->rec[r].ef_e2 = a + b;
        w->rec[r].ef_x2 = x;
    }
    return SQ_OK;
}

int sq_world_residual_norms(const sq_world *w, int r, double *e2, double *x2)
{
    *e2 = *x2 = 0;
    if (r < 0 || r >= w->N || w->dry || !sq_world_residual_bytes(w)) return 0;
    *e2 = w->rec[r].ef_e2;
    *x2 = w->rec[r].ef_x2;
    return 1;
}

double sq_world_residual_rel(const sq_world *w)
{
    double sum = 0, e2, x2;
    for (int r = 0; r < w->N; r++) {
        if (!sq_world_residual_norms(w, r, &e2, &x2)) return NAN;
        sum += sq_world_residual_ratio(e2, x2);
    }
    return sum / w->N;
}

double sq_world_residual_ratio(double e2, double x2)
{
    return e2 == 0 ? 0 : x2 == 0 ? INFINITY : sqrt(e2 / x2);
}

int sq_world_get_residual(sq_world *w, int r, int hop, float *host_out)
{
    int rc = check_worker(w, r, host_out);
    if (rc) return rc;
    uint64_t n = sq_world_residual_len(w, hop);
    if (!n)
        return sq_world_set_error(w, SQ_ERR_ARG, "residual %d: no hop of this world keeps one "
                                  "(error feedback is off there, or the path does not take it)",
                                  hop);
    const float *p = hop == 0 ? w->workers[r].ef : w->workers[r].ef2;
    return get(w, r, host_out, p, n * 4, "reading the error-feedback residual");
}

int sq_world_reset_residuals(sq_world *w)
{
    for (int r = 0; r < w->N && !w->dry; r++) {
        if (!sq_world_holds(w, r)) continue;
        sq_worker *k = &w->workers[r];
        for (int hop = 0; hop < 2; hop++) {
            uint64_t n = sq_world_residual_len(w, hop);
            float *p = hop == 0 ? k->ef : k->ef2;
            int rc = n ? sq_backend_fill(k->be, p, 0, (size_t)n * sizeof(float)) : SQ_OK;
            if (rc) return sq_world_fail(w, r, rc, "zeroing the error-feedback residual");
        }
        w->rec[r].ef_e2 = w->rec[r].ef_x2 = 0;
    }
    return SQ_OK;
}
