/*
** check_plan.c -- the per-rank plans of the world's collectives: every
** SEND has its RECV, no rank receives twice into one region in a phase,
** the bytes the plans name are the bytes a dry world counts, and running
** every rank's plan on its own, through a transport that is not the
** world's (mailboxes of copied bytes, buffered or rendezvous), gives the
** gradients and weights of sq_world_reduce_grads / sq_world_gather_weights
** byte for byte (error feedback's residuals too) -- and never deadlocks. So
** does a transport that delivers every message only at the end of its
** phase, reading the sender's bytes then and poisoning the receiver's
** region until then (what NCCL's transport does with one group per
** phase): no op of a phase reads what the phase receives, or writes what
** it sends.
*/
#include "check_util.h"
#include "shardq/codec.h"
#include "shardq/backend.h"
#include "shardq/plan.h"
#include "shardq/world.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

typedef struct topo3 {
    int K, G, pipe;
} topo3;

static const topo3 topos[] = {{2, 4, 1}, {2, 4, 2}, {3, 2, 4}, {1, 4, 1},
                              {4, 1, 2}, {2, 2, 1}, {1, 1, 1}, {1, 2, 1}};
#define NTOPOS (sizeof topos / sizeof topos[0])
#define N_ELEMS 3001

/* Every preset, and error feedback on the hops of the all-to-all paths
** ("PRESET+KNOB": the knob on top). */
static const char *const configs[] = {
    "baseline", "qw", "qwd", "ulq", "tlq", "tlqhs", "sdp4bit", "zeropp", "zeropp8", "qsdp",
    "qgz", "qwz", "powersgd", "powersgd4", "qsgd", "efsignsgd", "topk", "qsdp+grad.ef=1", "sdp4bit+grad.ef=1",
    "ulq+grad.inter.ef=1", "tlq+grad.intra.ef=1"};
#define NCONFIGS (sizeof configs / sizeof configs[0])

static sq_world_config make_config(const topo3 *t, const char *name, uint64_t n, int dry)
{
    sq_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topo.nodes = t->K;
    cfg.topo.per_node = t->G;
    sq_error e = {0};
    char preset[32];
    const char *plus = strchr(name, '+');
    snprintf(preset, sizeof preset, "%.*s", plus ? (int)(plus - name) : (int)strlen(name), name);
    ck_assert_msg(sq_scheme_preset(preset, &cfg.scheme, &e) == SQ_OK, "%s", e.msg);
    if (plus) ck_assert_msg(sq_scheme_set(&cfg.scheme, plus + 1, &e) == SQ_OK, "%s", e.msg);
    if (t->pipe > 1) {
        char kv[32];
        snprintf(kv, sizeof kv, "grad.pipe=%d", t->pipe);
        ck_assert_msg(sq_scheme_set(&cfg.scheme, kv, &e) == SQ_OK, "%s", e.msg);
    }
    if (sq_scheme_per_tensor(&cfg.scheme)) {
        /* per-tensor rules (zeropp8, qgz, qwz): the model as one 1-D tensor */
        const uint64_t shape[1] = {n};
        sq_scheme one;
        ck_assert_int_eq(sq_scheme_for_tensor(&cfg.scheme, &cfg.topo, shape, 1, &one, &e), SQ_OK);
        cfg.scheme = one;
    }
    cfg.elements = n;
    cfg.seed = 4242;
    cfg.dry = dry;
    return cfg;
}

static sq_plan **build_all(const sq_world_config *cfg, int coll, int N)
{
    sq_plan **p = calloc((size_t)N, sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (int r = 0; r < N; r++) {
        sq_error e = {0};
        ck_assert_msg(sq_plan_build(cfg, r, coll, &p[r], &e) == SQ_OK, "%s", e.msg);
        ck_assert_int_eq(sq_plan_rank(p[r]), r);
        ck_assert_int_eq(sq_plan_coll(p[r]), coll);
    }
    return p;
}

static void free_all(sq_plan **p, int N)
{
    for (int r = 0; r < N; r++) sq_plan_free(p[r]);
    free(p);
}

/* ------------------------------------------------------------------------ */
/* (a) consistency                                                          */
/* ------------------------------------------------------------------------ */

typedef struct region {
    int buf;
    uint64_t lo, hi;
} region;

static int region_cmp(const void *a, const void *b)
{
    const region *x = a, *y = b;
    if (x->buf != y->buf) return x->buf < y->buf ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The k-th RECV of rank dst from src in a phase, or NULL. */
static const sq_plan_op *nth_recv(const sq_plan *p, int src, int phase, int k)
{
    for (size_t i = 0; i < sq_plan_nops(p); i++) {
        const sq_plan_op *o = sq_plan_op_at(p, i);
        if (o->phase == phase && o->kind == SQ_PLAN_RECV && o->peer == src && k-- == 0) return o;
    }
    return NULL;
}

static void check_consistent(const sq_world_config *cfg, int coll, const char *what)
{
    sq_plan_layout L;
    ck_assert_int_eq(sq_plan_layout_init(cfg, &L, NULL), SQ_OK);
    const int N = L.N, np = sq_plan_nphases(&L, coll);
    sq_plan **p = build_all(cfg, coll, N);
    int *seen = calloc((size_t)N * (size_t)N, sizeof *seen), efs = 0;
    ck_assert_ptr_nonnull(seen);
    for (int ph = 0; ph < np; ph++) {
        int sends = 0, recvs = 0;
        memset(seen, 0, (size_t)N * (size_t)N * sizeof *seen);
        for (int r = 0; r < N; r++) {
            size_t nr = 0, cap = sq_plan_nops(p[r]) + 1;
            region *rg = malloc(cap * sizeof *rg);
            ck_assert_ptr_nonnull(rg);
            for (size_t i = 0; i < sq_plan_nops(p[r]); i++) {
                const sq_plan_op *o = sq_plan_op_at(p[r], i);
                ck_assert_int_eq(o->coll, coll);
                if (o->phase != ph) continue;
                /* every region lies inside its buffer */
                if (o->src >= 0 && o->kind != SQ_PLAN_SUM && o->kind != SQ_PLAN_SUM_REQUANT &&
                    o->kind != SQ_PLAN_SWIZZLE)
                    ck_assert_msg(o->src_off + o->n <= sq_plan_buffer_len(&L, o->src),
                                  "%s rank %d op %zu: source past %s", what, r, i,
                                  sq_plan_buffer_name(o->src));
                if (o->kind == SQ_PLAN_SUM || o->kind == SQ_PLAN_SUM_REQUANT)
                    ck_assert(o->src_off + (uint64_t)(o->k - 1) * o->stride + o->n <=
                              sq_plan_buffer_len(&L, o->src));
                if (o->kind == SQ_PLAN_SWIZZLE)
                    ck_assert_uint_eq((uint64_t)o->k * o->n, sq_plan_buffer_len(&L, o->src));
                /* error feedback: a residual as long as what is encoded, and
                ** its chunks through TMP cover it */
                if (o->ref >= 0 && (o->kind == SQ_PLAN_ENCODE || o->kind == SQ_PLAN_SUM_REQUANT)) {
                    ck_assert_int_eq(coll, SQ_COLL_GRAD);
                    ck_assert(o->ref == SQ_PLAN_EF || o->ref == SQ_PLAN_EF2);
                    ck_assert_uint_eq(o->ref_off + o->n, sq_plan_buffer_len(&L, o->ref));
                    if (o->kind == SQ_PLAN_ENCODE) {
                        ck_assert_uint_eq((uint64_t)o->k * o->stride, o->n);
                        ck_assert_uint_le(o->stride, sq_plan_buffer_len(&L, SQ_PLAN_TMP));
                        ck_assert_uint_eq(o->stride % sq_wire_group(&L.wires[o->wire]), 0);
                    } else {
                        ck_assert_uint_le(o->n, sq_plan_buffer_len(&L, SQ_PLAN_TMP));
                    }
                    efs++;
                }
                if (o->kind == SQ_PLAN_RECV || o->kind == SQ_PLAN_LOCAL) {
                    ck_assert_msg(o->dst_off + o->n <= sq_plan_buffer_len(&L, o->dst),
                                  "%s rank %d op %zu: receives past %s", what, r, i,
                                  sq_plan_buffer_name(o->dst));
                    ck_assert_int_eq(sq_plan_buffer_wire(&L, o->dst), o->wire);
                    rg[nr++] = (region){o->dst, o->dst_off, o->dst_off + o->n};
                }
                if (o->kind == SQ_PLAN_RECV) recvs++;
                if (o->kind != SQ_PLAN_SEND) continue;
                sends++;
                /* the k-th message r -> peer meets the k-th RECV of peer from r */
                ck_assert(o->peer >= 0 && o->peer < N && o->peer != r);
                const sq_plan_op *m = nth_recv(p[o->peer], r, ph, seen[r * N + o->peer]++);
                ck_assert_msg(m != NULL, "%s phase %d: rank %d sends to %d, which never receives",
                              what, ph, r, o->peer);
                ck_assert_int_eq(m->n, o->n);
                ck_assert_int_eq(m->wire, o->wire);
                ck_assert_int_eq(m->round, o->round);
                ck_assert_int_eq(m->link, o->link);
                ck_assert_int_eq(m->dst, o->dst);
                ck_assert_msg(m->dst_off == o->dst_off, "%s phase %d: %d -> %d lands at %llu, "
                              "received at %llu", what, ph, r, o->peer,
                              (unsigned long long)o->dst_off, (unsigned long long)m->dst_off);
                ck_assert_int_eq(sq_plan_buffer_wire(&L, o->src), o->wire);
                ck_assert_int_eq(o->link, r / L.G == o->peer / L.G ? SQ_LINK_INTRA : SQ_LINK_INTER);
            }
            /* no rank writes one region twice in a phase */
            qsort(rg, nr, sizeof *rg, region_cmp);
            for (size_t i = 1; i < nr; i++)
                ck_assert_msg(rg[i].buf != rg[i - 1].buf || rg[i].lo >= rg[i - 1].hi,
                              "%s phase %d rank %d: %s [%llu, %llu) received twice", what, ph, r,
                              sq_plan_buffer_name(rg[i].buf), (unsigned long long)rg[i].lo,
                              (unsigned long long)rg[i - 1].hi);
            free(rg);
        }
        ck_assert_int_eq(sends, recvs);
        ck_assert_int_eq(sends > 0, sq_plan_phase_moves(&L, coll, ph));
    }
    /* one op per hop with error feedback on every rank, and a buffer for it */
    int hops = (sq_plan_buffer_len(&L, SQ_PLAN_EF) > 0) + (sq_plan_buffer_len(&L, SQ_PLAN_EF2) > 0);
    ck_assert_int_eq(efs, coll == SQ_COLL_GRAD ? N * hops : 0);
    /* the ops of a plan are its phases in order */
    for (int r = 0; r < N; r++)
        for (size_t i = 1; i < sq_plan_nops(p[r]); i++)
            ck_assert_int_le(sq_plan_op_at(p[r], i - 1)->phase, sq_plan_op_at(p[r], i)->phase);
    free(seen);
    free_all(p, N);
}

/* The bytes the plans name, against a dry world's counters. */
static void check_bytes(const sq_world_config *cfg, const char *what)
{
    sq_world *w;
    sq_error e = {0};
    ck_assert_msg(sq_world_open(cfg, &w, &e) == SQ_OK, "%s", e.msg);
    ck_assert_int_eq(sq_world_gather_weights(w, 3), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(w, 3), SQ_OK);
    sq_plan_layout L;
    ck_assert_int_eq(sq_plan_layout_init(cfg, &L, NULL), SQ_OK);
    ck_assert_uint_eq(L.padded, sq_world_padded(w));
    ck_assert_uint_eq(L.shard, sq_world_shard(w));
    ck_assert_uint_eq(L.unit, sq_world_pad_unit(w));
    const int N = L.N;
    sq_traffic *t = calloc((size_t)N, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (int coll = 0; coll < SQ_NCOLL; coll++) {
        sq_plan **p = build_all(cfg, coll, N);
        for (int r = 0; r < N; r++)
            for (size_t i = 0; i < sq_plan_nops(p[r]); i++) {
                const sq_plan_op *o = sq_plan_op_at(p[r], i);
                if (o->kind != SQ_PLAN_SEND && o->kind != SQ_PLAN_RECV) continue;
                sq_plan_msg m = sq_plan_message(&L, r, o);
                sq_link_traffic *x = &t[r].t[coll][o->link];
                if (o->kind == SQ_PLAN_SEND) {
                    x->sent_codes += m.code_bytes;
                    x->sent_meta += m.scale_bytes + m.offset_bytes;
                    x->sent_elems += m.n;
                    x->sent_params += o->model_n;
                    x->messages++;
                } else {
                    x->recv_codes += m.code_bytes;
                    x->recv_meta += m.scale_bytes + m.offset_bytes;
                }
            }
        free_all(p, N);
    }
    for (int r = 0; r < N; r++)
        ck_assert_msg(memcmp(&t[r], sq_world_traffic(w, r), sizeof t[r]) == 0,
                      "%s: rank %d: the plans' bytes differ from the dry world's", what, r);
    free(t);
    sq_world_close(w);
}

START_TEST(test_plans_consistent)
{
    ck_assert_uint_eq(NCONFIGS, sq_scheme_npresets + 4); /* every preset, then the EF ones */
    for (size_t p = 0; p < sq_scheme_npresets; p++) ck_assert_str_eq(configs[p], sq_scheme_presets[p]);
    for (size_t ti = 0; ti < NTOPOS; ti++)
        for (size_t p = 0; p < NCONFIGS; p++) {
            sq_world_config cfg = make_config(&topos[ti], configs[p], N_ELEMS, 1);
            char what[96];
            snprintf(what, sizeof what, "%dx%d pipe %d %s", topos[ti].K, topos[ti].G,
                     topos[ti].pipe, configs[p]);
            check_consistent(&cfg, SQ_COLL_WEIGHT, what);
            check_consistent(&cfg, SQ_COLL_GRAD, what);
            check_bytes(&cfg, what);
        }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* (b) a transport of mailboxes, one rank at a time                         */
/* ------------------------------------------------------------------------ */

typedef struct letter {
    struct letter *next;
    uint64_t n, codes, scales, offsets;
    unsigned char *bytes;
} letter;

typedef struct postoffice {
    int N;
    sq_plan_mem *mem;
    letter **head, **tail; /* a FIFO per (src, dst) */
    int pending;
} postoffice;

static int post_send(void *ctx, const sq_plan_msg *m, const sq_qbuf *from, sq_error *err)
{
    postoffice *po = ctx;
    sq_backend *be = po->mem[m->src].be;
    letter *l = calloc(1, sizeof *l);
    if (!l) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    l->n = m->n, l->codes = m->code_bytes, l->scales = m->scale_bytes, l->offsets = m->offset_bytes;
    l->bytes = malloc((size_t)(l->codes + l->scales + l->offsets) + 1);
    if (!l->bytes) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    int rc = sq_backend_get(be, l->bytes, from->codes, (size_t)l->codes);
    if (!rc && l->scales) rc = sq_backend_get(be, l->bytes + l->codes, from->scales, (size_t)l->scales);
    if (!rc && l->offsets)
        rc = sq_backend_get(be, l->bytes + l->codes + l->scales, from->offsets, (size_t)l->offsets);
    if (rc) return sq_error_set(err, rc, "reading a message");
    int q = m->src * po->N + m->dst;
    if (po->tail[q]) po->tail[q]->next = l;
    else po->head[q] = l;
    po->tail[q] = l;
    po->pending++;
    return SQ_OK;
}

static int post_recv(void *ctx, const sq_plan_msg *m, sq_qbuf *to, sq_error *err)
{
    postoffice *po = ctx;
    int q = m->src * po->N + m->dst;
    letter *l = po->head[q];
    if (!l) return sq_error_set(err, SQ_ERR_ARG, "rank %d: nothing from %d", m->dst, m->src);
    if (l->n != m->n || l->codes != m->code_bytes || l->scales != m->scale_bytes ||
        l->offsets != m->offset_bytes)
        return sq_error_set(err, SQ_ERR_FORMAT, "rank %d: a message from %d of another size",
                            m->dst, m->src);
    po->head[q] = l->next;
    if (!po->head[q]) po->tail[q] = NULL;
    sq_backend *be = po->mem[m->dst].be;
    int rc = sq_backend_put(be, to->codes, l->bytes, (size_t)l->codes);
    if (!rc && l->scales) rc = sq_backend_put(be, to->scales, l->bytes + l->codes, (size_t)l->scales);
    if (!rc && l->offsets)
        rc = sq_backend_put(be, to->offsets, l->bytes + l->codes + l->scales, (size_t)l->offsets);
    free(l->bytes);
    free(l);
    po->pending--;
    return rc;
}

static int has_mail(const postoffice *po, int src, int dst) { return po->head[src * po->N + dst] != NULL; }

/* One rank's memory, allocated as the layout says. */
static void alloc_mem(const sq_plan_layout *L, sq_backend *be, sq_plan_mem *m)
{
    memset(m, 0, sizeof *m);
    m->be = be;
    for (int b = 0; b < SQ_PLAN_NBUF; b++) {
        uint64_t n = sq_plan_buffer_len(L, b);
        if (!n) continue;
        int wi = sq_plan_buffer_wire(L, b);
        if (wi < 0) {
            void *p = NULL;
            ck_assert_int_eq(sq_backend_alloc(be, (size_t)n * 4, &p), SQ_OK);
            ck_assert_int_eq(sq_backend_fill(be, p, 0, (size_t)n * 4), SQ_OK);
            m->f[b] = p;
        } else if (sq_wire_raw(&L->wires[wi])) {
            void *p = NULL;
            ck_assert_int_eq(sq_backend_alloc(be, (size_t)sq_wire_code_bytes(&L->wires[wi], n), &p),
                             SQ_OK);
            m->q[b].codes = p;
        } else {
            ck_assert_int_eq(sq_backend_qbuf_alloc(be, &L->wires[wi].codec, n, &m->q[b]), SQ_OK);
        }
    }
}

static void free_mem(const sq_plan_layout *L, sq_plan_mem *m)
{
    for (int b = 0; b < SQ_PLAN_NBUF; b++) {
        int wi = sq_plan_buffer_wire(L, b);
        if (wi < 0) sq_backend_free(m->be, m->f[b]);
        else if (sq_wire_raw(&L->wires[wi])) sq_backend_free(m->be, m->q[b].codes);
        else sq_backend_qbuf_free(m->be, &m->q[b]);
    }
}

/* Runs every rank's plan of one collective, one rank at a time as far as
** it can go. Buffered: a SEND posts a copy and goes on; a RECV waits for
** its letter. Rendezvous: a SEND or RECV waits until the peer stands at
** the matching RECV or SEND, and then both happen. Fails on a deadlock. */
static void run_plans(const sq_plan_layout *L, sq_plan **p, sq_plan_mem *mem, postoffice *po,
                      uint32_t step, sq_traffic *traffic, int rendezvous)
{
    const int N = L->N;
    const sq_transport tr = {po, post_send, post_recv, NULL, NULL, NULL, 1, 0};
    size_t *at = calloc((size_t)N, sizeof *at);
    ck_assert_ptr_nonnull(at);
    for (;;) {
        int progress = 0, done = 1;
        for (int r = 0; r < N; r++) {
            while (at[r] < sq_plan_nops(p[r])) {
                const sq_plan_op *o = sq_plan_op_at(p[r], at[r]);
                sq_error e = {0};
                if (o->kind == SQ_PLAN_SEND || o->kind == SQ_PLAN_RECV) {
                    int send = o->kind == SQ_PLAN_SEND, peer = o->peer;
                    if (!rendezvous && !send && !has_mail(po, peer, r)) break;
                    if (rendezvous) {
                        const sq_plan_op *q = sq_plan_op_at(p[peer], at[peer]);
                        if (!q || q->peer != r ||
                            q->kind != (send ? SQ_PLAN_RECV : SQ_PLAN_SEND))
                            break;
                        const sq_plan_op *s = send ? o : q, *v = send ? q : o;
                        int sr = send ? r : peer, vr = send ? peer : r;
                        ck_assert_msg(sq_plan_exec_op(L, sr, s, step, &mem[sr], &tr, &traffic[sr],
                                                      &e) == SQ_OK, "%s", e.msg);
                        ck_assert_msg(sq_plan_exec_op(L, vr, v, step, &mem[vr], &tr, &traffic[vr],
                                                      &e) == SQ_OK, "%s", e.msg);
                        at[peer]++, at[r]++;
                        progress = 1;
                        continue;
                    }
                }
                ck_assert_msg(sq_plan_exec_op(L, r, o, step, &mem[r], &tr, &traffic[r], &e) == SQ_OK,
                              "rank %d op %zu: %s", r, at[r], e.msg);
                at[r]++;
                progress = 1;
            }
            if (at[r] < sq_plan_nops(p[r])) done = 0;
        }
        if (done) break;
        ck_assert_msg(progress, "the plans deadlock (%s sends)", rendezvous ? "rendezvous" : "buffered");
    }
    ck_assert_int_eq(po->pending, 0);
    free(at);
}

static float *test_data(uint64_t n, uint64_t seed)
{
    float *x = malloc((size_t)n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    sqt_fill(x, n, seed);
    return x;
}

/* ------------------------------------------------------------------------ */
/* (c) a transport that delivers a phase's messages at its end              */
/* ------------------------------------------------------------------------ */

typedef struct held {
    int src, dst, done;
    sq_qbuf at;          /* the sender's bytes or the receiver's region, as noted */
    uint64_t len[3];
} held;

typedef struct holder {
    sq_backend **be;     /* each worker's backend */
    held *s, *v;         /* sends and receives of the phase, in the order noted */
    size_t ns, nv, cap;
    int phase_ends;      /* phase_end calls (the world's in-process transport) */
} holder;

static held *hold(holder *h, int send, const sq_plan_msg *m, const sq_qbuf *b)
{
    held **q = send ? &h->s : &h->v;
    size_t *n = send ? &h->ns : &h->nv;
    if (*n == h->cap) { /* both lists grow together */
        h->cap = h->cap ? 2 * h->cap : 64;
        h->s = realloc(h->s, h->cap * sizeof *h->s);
        h->v = realloc(h->v, h->cap * sizeof *h->v);
        ck_assert(h->s && h->v);
    }
    held *x = &(*q)[(*n)++];
    *x = (held){m->src, m->dst, 0, *b, {m->code_bytes, m->scale_bytes, m->offset_bytes}};
    return x;
}

static int hold_send(void *ctx, const sq_plan_msg *m, const sq_qbuf *from, sq_error *err)
{
    (void)err;
    hold(ctx, 1, m, from); /* no copy: the bytes are read at the end of the phase */
    return SQ_OK;
}

static int hold_recv(void *ctx, const sq_plan_msg *m, sq_qbuf *to, sq_error *err)
{
    holder *h = ctx;
    held *x = hold(h, 0, m, to);
    /* garbage until delivered: an op of this phase that read it would differ */
    void *p[3] = {to->codes, to->scales, to->offsets};
    for (int i = 0; i < 3; i++)
        if (x->len[i] && sq_backend_fill(h->be[m->dst], p[i], 0xA5, (size_t)x->len[i]))
            return sq_error_set(err, SQ_ERR_ARG, "poisoning a receive");
    return SQ_OK;
}

/* The end of a phase: the k-th send of each (src, dst) meets the k-th receive. */
static void hold_flush(holder *h)
{
    for (size_t k = 0; k < h->ns; k++) {
        held *a = &h->s[k], *b = NULL;
        for (size_t j = 0; j < h->nv && !b; j++)
            if (!h->v[j].done && h->v[j].src == a->src && h->v[j].dst == a->dst) b = &h->v[j];
        ck_assert_msg(b != NULL, "a message of %d to %d is never received in its phase", a->src,
                      a->dst);
        ck_assert(memcmp(a->len, b->len, sizeof a->len) == 0);
        b->done = 1;
        const void *from[3] = {a->at.codes, a->at.scales, a->at.offsets};
        void *to[3] = {b->at.codes, b->at.scales, b->at.offsets};
        for (int i = 0; i < 3; i++)
            if (a->len[i])
                ck_assert_int_eq(sq_backend_copy(h->be[b->dst], to[i], h->be[a->src], from[i],
                                                 (size_t)a->len[i]), SQ_OK);
    }
    ck_assert_uint_eq(h->ns, h->nv);
    h->ns = h->nv = 0;
}

/* Every rank's ops of a phase, then its messages, phase after phase. */
static void run_deferred(const sq_plan_layout *L, int coll, sq_plan_mem *mem, uint32_t step,
                         sq_traffic *traffic)
{
    holder h = {calloc((size_t)L->N, sizeof(sq_backend *)), NULL, NULL, 0, 0, 0, 0};
    const sq_transport tr = {&h, hold_send, hold_recv, NULL, NULL, NULL, 1, 0};
    sq_plan_op *ops = malloc(sq_plan_max_phase_ops(L) * sizeof *ops);
    ck_assert(ops && h.be);
    for (int r = 0; r < L->N; r++) h.be[r] = mem[r].be;
    for (int ph = 0; ph < sq_plan_nphases(L, coll); ph++) {
        for (int r = 0; r < L->N; r++) {
            size_t n = sq_plan_phase_ops(L, r, coll, ph, ops);
            for (size_t i = 0; i < n; i++) {
                sq_error e = {0};
                ck_assert_msg(sq_plan_exec_op(L, r, &ops[i], step, &mem[r], &tr, &traffic[r], &e) ==
                              SQ_OK, "rank %d phase %d op %zu: %s", r, ph, i, e.msg);
            }
        }
        hold_flush(&h);
    }
    free(ops), free(h.s), free(h.v), free(h.be);
}

static int hold_phase_end(void *ctx, int coll, int phase, sq_error *err)
{
    (void)coll, (void)phase, (void)err;
    holder *h = ctx;
    h->phase_ends++;
    hold_flush(h);
    return SQ_OK;
}

/* The world with an in-process transport (share and gather_all NULL, as
** NCCL's over one process's GPUs): every rank's messages go through it and
** arrive only at phase_end, and the world gives its own bytes, traffic and
** digests. */
static void check_world_transport(const topo3 *t, const char *preset)
{
    sq_world_config cfg = make_config(t, preset, N_ELEMS, 0);
    cfg.digest = 1;
    sq_world *a, *b;
    sq_error e = {0};
    ck_assert_msg(sq_world_open(&cfg, &a, &e) == SQ_OK, "%s", e.msg);
    const int N = sq_world_workers(a);
    holder h = {calloc((size_t)N, sizeof(sq_backend *)), NULL, NULL, 0, 0, 0, 0};
    const sq_transport tr = {&h, hold_send, hold_recv, hold_phase_end, NULL, NULL, 1, 0};
    cfg.transport = &tr;
    ck_assert_msg(sq_world_open(&cfg, &b, &e) == SQ_OK, "%s", e.msg);
    ck_assert_ptr_nonnull(h.be);
    for (int r = 0; r < N; r++) {
        h.be[r] = sq_world_backend(b, r);
        ck_assert_int_eq(sq_world_holds(b, r), 1);
    }
    ck_assert_int_eq(sq_world_local_rank(b), -1);
    const uint64_t n = N_ELEMS, S = sq_world_shard(a);
    float *x = test_data(n, 3), *ga = malloc((size_t)S * 4), *gb = malloc((size_t)S * 4);
    float *wa = malloc((size_t)n * 4), *wb = malloc((size_t)n * 4);
    ck_assert(ga && gb && wa && wb);
    ck_assert_int_eq(sq_world_init_weights(a, x), SQ_OK);
    ck_assert_int_eq(sq_world_init_weights(b, x), SQ_OK);
    free(x);
    for (uint32_t step = 1; step <= 2; step++) {
        for (int r = 0; r < N; r++) {
            x = test_data(n, 50 + step * 10 + (uint64_t)r);
            ck_assert_int_eq(sq_world_put_grad(a, r, x), SQ_OK);
            ck_assert_int_eq(sq_world_put_grad(b, r, x), SQ_OK);
            free(x);
        }
        ck_assert_int_eq(sq_world_reduce_grads(a, step), SQ_OK);
        ck_assert_msg(sq_world_reduce_grads(b, step) == SQ_OK, "%s", sq_world_error(b));
        for (int r = 0; r < N; r++) {
            ck_assert_int_eq(sq_world_get_grad_shard(a, r, ga), SQ_OK);
            ck_assert_int_eq(sq_world_get_grad_shard(b, r, gb), SQ_OK);
            ck_assert_msg(memcmp(ga, gb, (size_t)S * 4) == 0, "%s: rank %d: gradient differs",
                          preset, r);
            for (uint64_t i = 0; i < S; i++) ga[i] *= -0.5f; /* a step, the same on both */
            ck_assert_int_eq(sq_world_get_master(a, r, gb), SQ_OK);
            for (uint64_t i = 0; i < S && (uint64_t)r * S + i < n; i++) gb[i] += 1e-3f * ga[i];
            ck_assert_int_eq(sq_world_put_master(a, r, gb), SQ_OK);
            ck_assert_int_eq(sq_world_put_master(b, r, gb), SQ_OK);
        }
        ck_assert_int_eq(sq_world_gather_weights(a, step), SQ_OK);
        ck_assert_msg(sq_world_gather_weights(b, step) == SQ_OK, "%s", sq_world_error(b));
        for (int r = 0; r < N; r++) {
            ck_assert_int_eq(sq_world_get_weights(a, r, wa), SQ_OK);
            ck_assert_int_eq(sq_world_get_weights(b, r, wb), SQ_OK);
            ck_assert_msg(memcmp(wa, wb, (size_t)n * 4) == 0, "%s: rank %d: weights differ",
                          preset, r);
        }
    }
    for (int r = 0; r < N; r++) {
        ck_assert_msg(memcmp(sq_world_traffic(a, r), sq_world_traffic(b, r), sizeof(sq_traffic)) == 0,
                      "%s: rank %d: traffic differs", preset, r);
        ck_assert_uint_eq(sq_world_wire_digest(a, r), sq_world_wire_digest(b, r));
    }
    /* phase_end after every phase of both collectives, both steps */
    sq_plan_layout L;
    ck_assert_int_eq(sq_plan_layout_init(&cfg, &L, NULL), SQ_OK);
    ck_assert_int_eq(h.phase_ends,
                     2 * (sq_plan_nphases(&L, SQ_COLL_WEIGHT) + sq_plan_nphases(&L, SQ_COLL_GRAD)));
    free(ga), free(gb), free(wa), free(wb), free(h.s), free(h.v), free(h.be);
    sq_world_close(a);
    sq_world_close(b);
}

/* mode 0: buffered mailboxes, 1: rendezvous, 2: delivered at the end of each phase */
static void check_execution(const topo3 *t, const char *preset, uint64_t n, int mode)
{
    char what[96];
    snprintf(what, sizeof what, "%dx%d pipe %d %s n %llu", t->K, t->G, t->pipe, preset,
             (unsigned long long)n);
    sq_world_config cfg = make_config(t, preset, n, 0);
    sq_world *w;
    sq_error e = {0};
    ck_assert_msg(sq_world_open(&cfg, &w, &e) == SQ_OK, "%s", e.msg);
    sq_plan_layout L;
    ck_assert_int_eq(sq_plan_layout_init(&cfg, &L, NULL), SQ_OK);
    const int N = L.N;
    const uint64_t P = L.padded, S = L.shard;

    /* the inputs: initial weights, a moved master (so that qWD's difference
    ** is not zero), one gradient per rank */
    float *w0 = test_data(n, 11), *w1 = calloc((size_t)P, sizeof *w1);
    float *padw = calloc((size_t)P, sizeof *padw), *g = calloc((size_t)P, sizeof *g);
    ck_assert(w1 && padw && g);
    memcpy(padw, w0, (size_t)n * 4);
    for (uint64_t i = 0; i < n; i++) w1[i] = w0[i] + 0.01f * w0[(i * 7) % n];
    ck_assert_int_eq(sq_world_init_weights(w, w0), SQ_OK);
    for (int r = 0; r < N; r++) ck_assert_int_eq(sq_world_put_master(w, r, w1 + (uint64_t)r * S), SQ_OK);

    sq_backend *be;
    ck_assert_int_eq(sq_backend_open("cpu", &be, NULL), SQ_OK);
    sq_plan_mem *mem = calloc((size_t)N, sizeof *mem);
    ck_assert_ptr_nonnull(mem);
    for (int r = 0; r < N; r++) {
        alloc_mem(&L, be, &mem[r]);
        ck_assert_int_eq(sq_backend_put(be, mem[r].f[SQ_PLAN_WHAT], padw, (size_t)P * 4), SQ_OK);
        ck_assert_int_eq(sq_backend_put(be, mem[r].f[SQ_PLAN_MASTER], w1 + (uint64_t)r * S, (size_t)S * 4),
                         SQ_OK);
        float *x = test_data(n, 100 + (uint64_t)r);
        ck_assert_int_eq(sq_world_put_grad(w, r, x), SQ_OK);
        memset(g, 0, (size_t)P * 4);
        for (uint64_t i = 0; i < n; i++)
            g[i] = cfg.scheme.grad_mean && N > 1 ? x[i] / (float)N : x[i];
        ck_assert_int_eq(sq_backend_put(be, mem[r].f[SQ_PLAN_GRAD], g, (size_t)P * 4), SQ_OK);
        free(x);
    }

    postoffice po = {N, mem, calloc((size_t)N * N, sizeof(letter *)),
                     calloc((size_t)N * N, sizeof(letter *)), 0};
    ck_assert(po.head && po.tail);
    sq_traffic *traffic = calloc((size_t)N, sizeof *traffic);
    ck_assert_ptr_nonnull(traffic);
    const uint32_t step = 5;
    for (int coll = 0; coll < SQ_NCOLL; coll++) {
        if (mode == 2) {
            run_deferred(&L, coll, mem, step, traffic);
            continue;
        }
        sq_plan **p = build_all(&cfg, coll, N);
        run_plans(&L, p, mem, &po, step, traffic, mode == 1);
        free_all(p, N);
    }
    ck_assert_int_eq(sq_world_gather_weights(w, step), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(w, step), SQ_OK);

    float *a = malloc((size_t)P * 4), *b = malloc((size_t)P * 4);
    ck_assert(a && b);
    for (int r = 0; r < N; r++) {
        ck_assert_int_eq(sq_world_get_grad_shard(w, r, a), SQ_OK);
        ck_assert_int_eq(sq_backend_get(be, b, mem[r].f[SQ_PLAN_GOUT], (size_t)S * 4), SQ_OK);
        ck_assert_msg(memcmp(a, b, (size_t)S * 4) == 0, "%s: rank %d: gradient shard differs", what, r);
        ck_assert_int_eq(sq_world_get_weights(w, r, a), SQ_OK);
        ck_assert_int_eq(sq_backend_get(be, b, mem[r].f[SQ_PLAN_WHAT], (size_t)n * 4), SQ_OK);
        ck_assert_msg(memcmp(a, b, (size_t)n * 4) == 0, "%s: rank %d: weights differ", what, r);
        ck_assert_msg(memcmp(&traffic[r], sq_world_traffic(w, r), sizeof traffic[r]) == 0,
                      "%s: rank %d: traffic differs", what, r);
        /* error feedback's residuals, as the world keeps them */
        for (int hop = 0; hop < 2; hop++) {
            uint64_t len = sq_world_residual_len(w, hop);
            ck_assert_uint_eq(len, sq_plan_buffer_len(&L, hop ? SQ_PLAN_EF2 : SQ_PLAN_EF));
            if (!len) continue;
            ck_assert_int_eq(sq_world_get_residual(w, r, hop, a), SQ_OK);
            ck_assert_int_eq(sq_backend_get(be, b, mem[r].f[hop ? SQ_PLAN_EF2 : SQ_PLAN_EF],
                                            (size_t)len * 4), SQ_OK);
            ck_assert_msg(memcmp(a, b, (size_t)len * 4) == 0, "%s: rank %d: residual %d differs",
                          what, r, hop);
        }
    }
    free(a), free(b);
    for (int r = 0; r < N; r++) free_mem(&L, &mem[r]);
    free(mem), free(traffic), free(po.head), free(po.tail);
    free(w0), free(w1), free(padw), free(g);
    sq_backend_close(be);
    sq_world_close(w);
}

START_TEST(test_mailbox_buffered)
{
    for (size_t ti = 0; ti < NTOPOS; ti++)
        for (size_t p = 0; p < NCONFIGS; p++)
            check_execution(&topos[ti], configs[p], N_ELEMS, 0);
}
END_TEST

START_TEST(test_mailbox_rendezvous)
{
    for (size_t ti = 0; ti < NTOPOS; ti++)
        for (size_t p = 0; p < NCONFIGS; p++)
            check_execution(&topos[ti], configs[p], 777, 1);
}
END_TEST

START_TEST(test_deferred_to_phase_end)
{
    for (size_t ti = 0; ti < NTOPOS; ti++)
        for (size_t p = 0; p < NCONFIGS; p++)
            check_execution(&topos[ti], configs[p], N_ELEMS, 2);
}
END_TEST

START_TEST(test_world_inprocess_transport)
{
    for (size_t ti = 0; ti < NTOPOS; ti++)
        for (size_t p = 0; p < NCONFIGS; p++)
            check_world_transport(&topos[ti], configs[p]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The public helpers                                                       */
/* ------------------------------------------------------------------------ */

START_TEST(test_helpers)
{
    const topo3 t = {3, 2, 4};
    sq_world_config cfg = make_config(&t, "sdp4bit", 100003, 1);
    sq_plan_layout L;
    sq_error e = {0};
    ck_assert_int_eq(sq_plan_layout_init(&cfg, &L, &e), SQ_OK);
    /* the swizzle is a permutation of the N * pipe blocks */
    const uint64_t nb = (uint64_t)L.N * (uint64_t)cfg.scheme.pipe;
    char *hit = calloc((size_t)nb, 1);
    ck_assert_ptr_nonnull(hit);
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t d = sq_plan_swizzle_index(&L, b);
        ck_assert_uint_lt(d, nb);
        ck_assert_int_eq(hit[d], 0);
        hit[d] = 1;
    }
    free(hit);
    /* partition z = 3 (node 1, local 1), slice 2 moves to slice-major block
    ** 2 * 6 + 1 * 3 + 1 */
    ck_assert_uint_eq(sq_plan_swizzle_index(&L, 3 * 4 + 2), 2 * 6 + 1 * 3 + 1);
    ck_assert_uint_eq(L.padded % L.unit, 0);
    ck_assert_uint_eq(sq_plan_padded(100003, L.unit), L.padded);
    ck_assert_uint_eq(sq_plan_padded(1, 1), 1);
    ck_assert_uint_eq(sq_plan_padded(UINT64_MAX - 3, 8), 0);
    uint64_t sum = 0;
    for (int r = 0; r < L.N; r++) sum += sq_plan_shard_len(&L, r);
    ck_assert_uint_eq(sum, 100003);
    sq_rng_key k = sq_plan_rng_key(&L, 9, 5, SQ_SITE_GRAD_INTER);
    ck_assert_uint_eq(k.seed, 4242);
    ck_assert_uint_eq(k.step, 9);
    ck_assert_uint_eq(k.worker, 5);
    ck_assert_uint_eq(k.site, SQ_SITE_GRAD_INTER);
    ck_assert_int_eq(sq_plan_grad_path(&cfg.topo, &cfg.scheme), SQ_GRAD_TWOLEVEL);
    sq_topo one = {1, 4};
    ck_assert_int_eq(sq_plan_grad_path(&one, &cfg.scheme), SQ_GRAD_A2A);
    /* bad arguments */
    sq_plan *p;
    ck_assert_int_eq(sq_plan_build(&cfg, L.N, SQ_COLL_GRAD, &p, &e), SQ_ERR_ARG);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(sq_plan_build(&cfg, 0, 7, &p, &e), SQ_ERR_ARG);
    cfg.elements = 0;
    ck_assert_int_eq(sq_plan_build(&cfg, 0, SQ_COLL_GRAD, &p, &e), SQ_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "elements"), "%s", e.msg);
}
END_TEST

static Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_helpers);
    tcase_add_test(tc, test_plans_consistent);
    tcase_add_test(tc, test_mailbox_buffered);
    tcase_add_test(tc, test_mailbox_rendezvous);
    tcase_add_test(tc, test_deferred_to_phase_end);
    tcase_add_test(tc, test_world_inprocess_transport);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return sqt_run(plan_suite());
}
