/*
** world_internal.h -- what the files of src/world share: the world's
** state, the per-worker buffers, and the wire helpers the plans' ops are
** executed with.
*/
#ifndef SQ_WORLD_INTERNAL_H
#define SQ_WORLD_INTERNAL_H

#include "shardq/backend.h"
#include "shardq/plan.h"
#include "shardq/world.h"

/* One emulated worker: its backend and its buffers (all in the backend's
** memory; NULL when the path does not need them or the world is dry). */
typedef struct sq_worker {
    sq_backend *be;
    float *grad;   /* padded: this worker's gradient (divided by N if a mean) */
    float *gout;   /* shard: its partition of the reduced gradient */
    float *what;   /* padded: w-hat, the model weights it computes with */
    float *master; /* shard: its fp32 master weights */
    float *tmp;    /* padded: scratch of unquantized sums */
    float *tmp2;   /* padded: scratch of bf16 decoding inside those sums */
    sq_qbuf wrecv; /* weight wire, padded: the all-gather's receive buffer */
    sq_qbuf genc;  /* first gradient wire, padded: its encoded gradient */
    sq_qbuf gswz;  /* the same, swizzled (two-level) */
    sq_qbuf grecv; /* padded: what the (first) all-to-all brings */
    sq_qbuf greq;  /* padded / G, inter wire: the requantized intra sum */
    sq_qbuf grecv2; /* padded / G, inter wire: what the inter all-to-all brings */
    sq_qbuf rsend, rrecv; /* shard: the ring's send and receive buffers */
    /* PowerSGD (plan.h's SQ_PLAN_PSGD_*): its state persists across steps */
    float *psgd_m;        /* rows x cols: M in a step, the residual between steps */
    float *psgd_warm;     /* 1 float: whether psgd_q holds a step's Q */
    sq_qbuf psgd_p, psgd_q, psgd_recv; /* fp32 wire: P, Q, the ring's incoming chunk */
    float *ef;     /* padded: error feedback's residual of the first gradient hop */
    float *ef2;    /* padded / G: the residual of the requantization (two-level) */
} sq_worker;

/* What each rank knows of itself and shares after every collective. */
typedef struct sq_rank_record {
    sq_traffic traffic;
    uint64_t digest;
    sq_coll_time times[SQ_NCOLL];
    double ef_e2, ef_x2; /* after the last reduce: |residuals|^2 and |gradient|^2 */
} sq_rank_record;

struct sq_world {
    sq_topo topo;
    int N;
    sq_scheme scheme;
    uint64_t n, padded, shard, unit;
    uint64_t seed;
    int dry;
    sq_grad_mode grad_path;     /* after the degenerate fallbacks */
    const sq_wire *single_wire; /* the wire of a single-level path */
    sq_placement pl;
    int have_placement;
    sq_worker *workers;
    sq_traffic *traffic;
    float *stage; /* host, padded: staging of puts */
    sq_plan_layout L;  /* what the plans of every rank derive from */
    sq_plan_layout Lv; /* grad.powersgd.start > 0: the ring of the steps before it */
    sq_plan_mem *mem;  /* each worker's buffers as its plan names them (NULL if dry) */
    sq_plan_op *ops;   /* room for one rank's ops of one phase */
    size_t max_ops;    /* ... that many */
    const sq_transport *tr; /* one rank per process: the runner's transport; NULL in process */
    const sq_transport *itr; /* in process: a transport for every rank's messages (world.h);
                             ** NULL: the world's own copies */
    int rank;          /* with tr: the worker this process holds; -1 in process */
    int digest;        /* hash what each worker sends */
    sq_rank_record *rec; /* per worker: digest and times (every rank's after a collective) */
    sq_error err;
};

/* Records the sentence with kind `status` and returns status. */
int sq_world_set_error(sq_world *w, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A failed backend call of worker r: records "worker r (be): what: status:
** backend's reason" and returns rc. */
int sq_world_fail(sq_world *w, int r, int rc, const char *what);
/* The same sentence into e (a rank run on a thread of its own). */
int sq_world_describe_fail(const sq_world *w, int r, int rc, const char *what, sq_error *e);

/* After a collective with a transport: every rank's record to every process. */
int sq_world_sync_records(sq_world *w);
/* After a reduce with error feedback: each held worker's squared norms of
** its residuals and its gradient into its record. */
int sq_world_measure_residuals(sq_world *w);

static inline int sq_node_of(const sq_world *w, int r) { return r / w->topo.per_node; }

/* Whether every worker's buffers are host memory (CPU backends). */
static inline int sq_world_all_host(const sq_world *w)
{
    for (int r = 0; r < w->N; r++)
        if (sq_backend_kind_of(w->workers[r].be) != SQ_BACKEND_CPU) return 0;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Wires (wire.c)                                                           */
/* ------------------------------------------------------------------------ */

int sq_wire_alloc(sq_backend *be, const sq_wire *wr, uint64_t n, sq_qbuf *q);
void sq_wire_free(sq_backend *be, const sq_wire *wr, sq_qbuf *q);
/* The view of q from element e on (e a multiple of 8 and of the group). */
sq_qbuf sq_wire_at(const sq_wire *wr, const sq_qbuf *q, uint64_t e);

int sq_wire_encode(sq_backend *be, const sq_wire *wr, const float *x, uint64_t n,
                   const sq_rng_key *key, sq_qbuf *out);
int sq_wire_decode(sq_backend *be, const sq_wire *wr, const sq_qbuf *q, uint64_t n, float *out);
/* out = D(chunks[0]) + ... + D(chunks[k-1]) in fp32, in chunk order; a
** codec's inverse Hadamard follows. tmp: n floats, used by bf16 wires.
** f16 (codec wires only, sq_scheme_validate): the fp16 arithmetic of
** sq_dequant_sum_f16. */
int sq_wire_sum(sq_backend *be, const sq_wire *wr, const sq_qbuf *chunks, int k, uint64_t n,
                int f16, float *out, float *tmp);
/* out = E_out(sum of the chunks), staying in the transformed domain; tmp
** and tmp2: n floats each, used unless both wires are codecs. f16 as above. */
int sq_wire_sum_requant(sq_backend *be, const sq_wire *in, const sq_qbuf *chunks, int k,
                        uint64_t n, int f16, const sq_wire *wout, const sq_rng_key *key,
                        sq_qbuf *out, float *tmp, float *tmp2);

#endif
