/*
** shardq/plan.h -- one rank's plan of the collectives and the transport that carries it.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_PLAN_H
#define SHARDQ_PLAN_H

#include "shardq/backend.h"
#include "shardq/world.h"

SQ_BEGIN_DECLS

/*
** plan -- the collectives of the sharded world as a per-rank PLAN, and
** the TRANSPORT interface that moves a plan's messages between ranks.
**
** A plan is data: for one rank r of a K x G world under a scheme, and one
** collective (SQ_COLL_WEIGHT or SQ_COLL_GRAD), the ordered list of what r
** does -- which buffer it encodes with which wire and Philox key, which
** packed region it sends to which rank and where that rank keeps it, what it
** receives from whom into where, and how it decodes and sums, in the fixed
** summation orders of docs/schemes.md. A plan depends only on
** (topology, scheme, elements, seed, rank, collective); the training step is
** given when an op runs (it is word 2 of the Philox counter). The plan of
** one rank is complete on its own: a runner with one rank per process (MPI,
** NCCL, a Python caller) allocates the rank's buffers (sq_plan_buffer_len),
** runs its ops in order (sq_plan_exec_op) and gets the bytes the in-process
** world computes. The in-process world (sq_world) runs the plans of all its
** ranks through its own transport; it is one client of this interface.
**
** Buffers are named (sq_plan_buf) and addressed in ELEMENTS: a region of a
** packed buffer (sq_qbuf of a wire) from element e is its codes from byte
** code_bytes(e), its scales from scale_bytes(e), its offsets from
** offset_bytes(e) (sq_wire_* in world.h); every offset a plan names is a
** multiple of the wire's group and of 8 (the padding rule guarantees it),
** but in PowerSGD's all-reduces, whose fp32 values need no alignment.
**
** PowerSGD (grad path SQ_GRAD_POWERSGD, docs/schemes.md) is a plan too:
** a compute op (PSGD_PROJECT), a ring all-reduce of P (reduce-scatter
** phases that move and ACCUM, then all-gather phases), PSGD_BACK, the
** all-reduce of Q, and PSGD_OUT. Its state (PSGD_M's residual, PSGD_Q,
** PSGD_WARM) lives in the rank's buffers from one step to the next, so a
** runner keeps them. The steps below grad.powersgd.start run the plans of
** the same layout with grad_path SQ_GRAD_RING instead (sq_world does).
**
** Phases. Every op carries a phase number; the phases of a collective are
** the same for every rank (sq_plan_nphases). An op only reads what earlier
** phases of its own rank wrote, or what it received, so a runner may run
** the ranks' phases in any interleaving that respects each rank's order and
** the pairing of messages. The in-process world runs phase by phase:
** every rank's ops of phase p before phase p + 1 (its transport writes a
** message into the receiver's buffer when it is sent). Within a phase no
** rank writes a region that any rank's SEND or LOCAL of that phase reads,
** and no region is received twice, so the order inside a phase changes no
** byte.
**
** Message order (why a blocking transport cannot deadlock). The SENDs and
** RECVs of a phase come in ROUNDS; in round t each rank of a group (the
** whole world, a node, or the ranks of one local index) sends one message
** to rank (i + d) mod m and receives one from (i - d) mod m of the same
** group, for one shift d != 0. Inside a round the rank with the smallest
** index of its cycle of the shift (i < gcd(m, d)) lists its SEND first and
** every other rank its RECV first, so that even rendezvous (synchronous)
** sends complete around each cycle; every rank goes through the same rounds
** in the same order. Between one source and one destination messages are
** matched in the order they are listed (like MPI's non-overtaking rule); a
** runner may instead fuse the SEND and RECV of a round into one exchange
** (MPI_Sendrecv). A rank's chunk for itself never travels: it is a LOCAL
** copy, counted nowhere.
**
** Accounting. Bytes are counted by sq_plan_exec_op, not by the transport:
** a SEND adds codes, metadata, elements (padding included), the model's
** elements among them (model_n) and one message to the sender's
** sq_traffic of (collective, link); a RECV adds codes and metadata to the
** receiver's. The link is INTRA when both ranks sit on the same node.
**
** Errors: sq_status kinds; the sentence goes into the caller's sq_error.
*/
/* ------------------------------------------------------------------------ */
/* Layout: the padding rule, the paths and the shard lengths                 */
/* ------------------------------------------------------------------------ */

/* Wires are named by index into sq_plan_layout.wires. */
enum { SQ_PLAN_WIRE_WEIGHT = 0, SQ_PLAN_WIRE_INTRA = 1, SQ_PLAN_WIRE_INTER = 2, SQ_PLAN_NWIRE = 3 };

/* Everything a plan derives from (topology, scheme, elements, seed). */
typedef struct sq_plan_layout {
    sq_topo topo;
    int N, K, G;
    sq_scheme scheme;
    sq_wire wires[SQ_PLAN_NWIRE]; /* weight, grad.intra, grad.inter */
    uint64_t n;        /* the model's elements */
    uint64_t seed;
    uint64_t unit;     /* what the padding rounds n up to a multiple of */
    uint64_t padded;   /* P: elements of every full-size buffer */
    uint64_t shard;    /* S = P / N: a weight shard, a gradient partition */
    uint64_t quarter;  /* Q = P / G: what a node-local sum covers (two-level) */
    uint64_t slice;    /* S / pipe: one pipeline slice of a partition (two-level) */
    sq_grad_mode grad_path; /* after SDP4Bit's fallbacks (K = 1, G = 1, N = 1) and
                            ** PowerSGD's (a matrix it does not compress takes the ring) */
    int single_wire;   /* the wire of a single-level path: INTER if K > 1, else INTRA */
    /* grad_path POWERSGD: the matrix view of the buffer, and the rank */
    uint64_t psgd_rows, psgd_cols;
    int psgd_rank;
} sq_plan_layout;

/* Fills *L, or fails with SQ_ERR_ARG (topology, no elements, too many
** elements once padded) or SQ_ERR_SPEC (an invalid scheme, a padding unit
** that overflows). cfg->device and cfg->dry are ignored. */
int sq_plan_layout_init(const sq_world_config *cfg, sq_plan_layout *L, sq_error *err);

/* The path the gradient really takes on topo (SDP4Bit's fallbacks). */
sq_grad_mode sq_plan_grad_path(const sq_topo *topo, const sq_scheme *s);
/* The padding unit (docs/conventions.md): SQ_OK and *unit, or SQ_ERR_SPEC
** when the lcm of the groups, Hadamard sizes, pipe and N overflows. */
int sq_plan_pad_unit(const sq_topo *topo, const sq_scheme *s, uint64_t *unit, sq_error *err);
/* n rounded up to the padding unit, or 0 when that overflows 2^52. */
uint64_t sq_plan_padded(uint64_t n, uint64_t unit);
/* The model's elements in rank r's shard: min(shard, n - r * shard), 0 past n. */
uint64_t sq_plan_shard_len(const sq_plan_layout *L, int r);
/* Two-level swizzle: input block b = z * pipe + y (partition z, slice y;
** blocks of L->slice elements) moves to block y * N + (z mod G) * K + z / G. */
uint64_t sq_plan_swizzle_index(const sq_plan_layout *L, uint64_t b);
/* The Philox key of rank r's quantization at `site` in step `step`. */
sq_rng_key sq_plan_rng_key(const sq_plan_layout *L, uint32_t step, int r, int site);

/* ------------------------------------------------------------------------ */
/* Buffers of one rank                                                       */
/* ------------------------------------------------------------------------ */

typedef enum sq_plan_buf {
    SQ_PLAN_GRAD = 0, /* floats, P: the rank's gradient (pre-divided when a mean) */
    SQ_PLAN_GOUT,     /* floats, S: its partition of the reduced gradient */
    SQ_PLAN_WHAT,     /* floats, P: w-hat, the model weights */
    SQ_PLAN_MASTER,   /* floats, S: its fp32 master shard */
    SQ_PLAN_TMP,      /* floats: scratch of bf16 decoding and unquantized sums */
    SQ_PLAN_TMP2,     /* floats: second scratch (two-level, unquantized hops) */
    SQ_PLAN_WRECV,    /* weight wire, P: the all-gather's slots */
    SQ_PLAN_GENC,     /* first gradient wire, P: the encoded gradient */
    SQ_PLAN_GSWZ,     /* intra wire, P: the same, swizzled */
    SQ_PLAN_GRECV,    /* first gradient wire, P: what the (first) all-to-all brings */
    SQ_PLAN_GREQ,     /* inter wire, Q: the requantized node-local sum */
    SQ_PLAN_GRECV2,   /* inter wire, P / G: what the inter all-to-all brings */
    SQ_PLAN_RSEND,    /* single wire, S: the ring's outgoing partial sum */
    SQ_PLAN_RRECV,    /* single wire, S: the ring's incoming partial sum */
    SQ_PLAN_PSGD_M,   /* floats, rows x cols: PowerSGD's M in a step; between steps its
                      ** residual (error feedback) or the last M (without) */
    SQ_PLAN_PSGD_P,   /* single wire (fp32), rows x rank: P */
    SQ_PLAN_PSGD_Q,   /* single wire (fp32), cols x rank: Q, kept for the warm start */
    SQ_PLAN_PSGD_RECV, /* single wire (fp32): the largest chunk of P or Q the ring brings */
    SQ_PLAN_PSGD_WARM, /* floats, 1: 0 until a compressed step has left its Q */
    SQ_PLAN_EF,       /* floats, P: error feedback's residual of the first gradient hop */
    SQ_PLAN_EF2,      /* floats, Q: the residual of the requantization (two-level) */
    SQ_PLAN_NBUF
} sq_plan_buf;

/* Elements buffer b needs on a rank of this layout (0: unused), and its wire
** (-1 for a float buffer). */
uint64_t sq_plan_buffer_len(const sq_plan_layout *L, int b);
int sq_plan_buffer_wire(const sq_plan_layout *L, int b);
const char *sq_plan_buffer_name(int b);

/* One rank's memory as an executor sees it: its backend, and each buffer
** (f[b] for float buffers, q[b] for packed ones; unused ones may be NULL). */
typedef struct sq_plan_mem {
    sq_backend *be;
    float *f[SQ_PLAN_NBUF];
    sq_qbuf q[SQ_PLAN_NBUF];
} sq_plan_mem;

/* ------------------------------------------------------------------------ */
/* Ops                                                                      */
/* ------------------------------------------------------------------------ */

/* What an op does (f[]: float buffers, q[]: packed buffers of sq_plan_mem;
** "@off" is a view from element off on). ADD, SUM and SUM_REQUANT use the
** rank's TMP (and TMP2) as scratch; ENCODE, ENCODE_DIFF and SUM_REQUANT
** draw stochastic rounding from sq_plan_rng_key(L, step, rank, site).
** In the weight all-gather over a quantized wire under weight.recon=bf16,
** ENCODE, ENCODE_DIFF, DECODE and DECODE_ADD are their bf16 variants
** (sq_quantize_bf16, sq_quantize_diff_bf16, sq_dequantize_bf16,
** sq_dequantize_add_bf16).
**
** Error feedback (docs/schemes.md): an ENCODE or SUM_REQUANT of
** the gradient with ref >= 0 keeps its residual e in f[ref] (SQ_PLAN_EF or
** SQ_PLAN_EF2) from step to step. ENCODE then runs, in fp32 on the rank's
** backend: e := x + e (x = f[src]@src_off, e = f[ref]@ref_off, n elements);
** q[dst]@dst_off = E(e); e := e - D(q), the decoding in k chunks of stride
** elements through TMP. SUM_REQUANT: TMP := the sum, e := TMP + e,
** q[dst] = E_out(e), e := e - D_out(q[dst]) (n elements each; the sum and
** the encode each with their own transform, not the fused requantization).
** Without error feedback ref is -1 and neither op touches a residual. */
typedef enum sq_plan_kind {
    SQ_PLAN_COPY = 0,    /* f[dst]@dst_off = f[src]@src_off, n floats */
    SQ_PLAN_ENCODE,      /* q[dst]@dst_off = E_wire(f[src]@src_off, n), key of site */
    SQ_PLAN_ENCODE_DIFF, /* q[dst]@dst_off = Q_wire(f[src]@src_off - f[ref]@ref_off, n) */
    SQ_PLAN_SWIZZLE,     /* q[dst] block sq_plan_swizzle_index(b) = q[src] block b, all N * pipe blocks */
    SQ_PLAN_LOCAL,       /* q[dst]@dst_off = q[src]@src_off, n elements: the rank's own chunk */
    SQ_PLAN_SEND,        /* q[src]@src_off, n elements, to peer (which keeps it in dst@dst_off) */
    SQ_PLAN_RECV,        /* n elements from peer into q[dst]@dst_off */
    SQ_PLAN_DECODE,      /* f[dst] = D(q[src]), n elements */
    SQ_PLAN_DECODE_ADD,  /* f[dst] = f[ref] + D(q[src]), n elements (qWD's w-hat update) */
    SQ_PLAN_ADD,         /* f[dst] = raw(q[src]) + f[ref]@ref_off, n (the ring's partial sum) */
    SQ_PLAN_SUM,         /* f[dst] = D(c_0) + ... + D(c_{k-1}), c_j = q[src]@(src_off + j*stride) */
    SQ_PLAN_SUM_REQUANT, /* q[dst] (wire_out) = E_out(the same sum), key of site */
    SQ_PLAN_ACCUM,       /* q[dst]@dst_off = raw(q[src]) + q[dst]@dst_off, n fp32 values */
    SQ_PLAN_PSGD_PROJECT, /* PowerSGD: M = grad (+ residual), Q warm or drawn, P = M Q */
    SQ_PLAN_PSGD_BACK,   /* PowerSGD: P orthonormalized, Q = M^T P */
    SQ_PLAN_PSGD_OUT     /* PowerSGD: gout = own partition of P Q^T, residual = M - P Q^T / N */
} sq_plan_kind;

typedef struct sq_plan_op {
    sq_plan_kind kind;
    int phase;      /* same numbering on every rank */
    int round;      /* SEND/RECV: the round inside the phase; -1 otherwise */
    int coll;       /* SQ_COLL_WEIGHT or SQ_COLL_GRAD */
    int peer;       /* SEND: destination, RECV: source; -1 otherwise */
    int link;       /* SEND/RECV: SQ_LINK_INTRA or SQ_LINK_INTER */
    int wire;       /* SQ_PLAN_WIRE_* of what is encoded, moved or decoded */
    int wire_out;   /* SUM_REQUANT: the wire it requantizes to; else -1 */
    int site;       /* sq_site of the Philox key, -1 when none is used */
    int src, dst, ref;             /* sq_plan_buf, -1 when unused */
    uint64_t src_off, dst_off, ref_off; /* elements */
    uint64_t n;                    /* elements (of each chunk for SUM*) */
    uint64_t code_bytes, meta_bytes; /* SEND/RECV/LOCAL: the packed sizes of n elements */
    uint64_t model_n;              /* SEND/RECV: the model's elements among the n (the
                                   ** rest is padding): sq_link_traffic.sent_params.
                                   ** PowerSGD's factors are no model elements: a message
                                   ** of the reduce-scatter half of P's all-reduce counts
                                   ** those of the partition the ring reduce-scatter would
                                   ** send in its place, the others none (docs/schemes.md) */
    int k;                         /* SUM*: chunks */
    uint64_t stride;               /* SUM*: elements between chunks */
    const char *what;              /* what the op does, for messages */
} sq_plan_op;

typedef struct sq_plan sq_plan;

/* The plan of rank `rank` for collective coll. */
int sq_plan_build(const sq_world_config *cfg, int rank, int coll, sq_plan **out, sq_error *err);
/* The same from a layout already made. */
int sq_plan_build_layout(const sq_plan_layout *L, int rank, int coll, sq_plan **out,
                         sq_error *err);
void sq_plan_free(sq_plan *p);
size_t sq_plan_nops(const sq_plan *p);
const sq_plan_op *sq_plan_op_at(const sq_plan *p, size_t i);
const sq_plan_layout *sq_plan_layout_of(const sq_plan *p);
int sq_plan_rank(const sq_plan *p);
int sq_plan_coll(const sq_plan *p);

/* Phases of collective coll on this layout (the same on every rank). */
int sq_plan_nphases(const sq_plan_layout *L, int coll);
/* 1 if the phase moves messages (holds SENDs and RECVs), 0 if it only
** computes on each rank. */
int sq_plan_phase_moves(const sq_plan_layout *L, int coll, int phase);
/* The most ops one rank has in one phase: the capacity sq_plan_phase_ops needs. */
size_t sq_plan_max_phase_ops(const sq_plan_layout *L);
/* Writes rank r's ops of one phase into ops[] and returns their number:
** what sq_plan_build concatenates, phase after phase. */
size_t sq_plan_phase_ops(const sq_plan_layout *L, int r, int coll, int phase, sq_plan_op *ops);

/* ------------------------------------------------------------------------ */
/* Transport                                                                */
/* ------------------------------------------------------------------------ */

/* One message: n elements of wire `wire`, packed as three byte ranges (codes
** or raw values, scales, offsets; scales and offsets empty on a raw wire). */
typedef struct sq_plan_msg {
    int coll, link, phase, round;
    int src, dst;
    const sq_wire *wr;
    uint64_t n;
    uint64_t code_bytes, scale_bytes, offset_bytes;
    int dst_buf;      /* where the receiver keeps it: its buffer and element offset */
    uint64_t dst_off; /* (a transport that writes into the receiver's memory uses these) */
} sq_plan_msg;

/* How messages move. send() is called on the sending rank with the packed
** region it sends (from: views into the rank's memory at the message's
** first element), recv() on the receiving rank with the region to fill.
** A transport must deliver the bytes unchanged, match the messages of one
** (src, dst) pair in the order they were sent, and may return from send()
** before the message is received only if it has copied the bytes (the
** sender may overwrite them in a later phase). phase_end (may be NULL) is
** called by a runner after each phase it runs for all its ranks. Failures
** return a kind and describe it in err. For a dry rank (no memory) from
** and to are NULL: only the sizes in the message are meaningful. */
/*
** A transport of a runner with ONE RANK PER PROCESS (MPI, NCCL, a Python
** caller's) also carries what keeps the processes' views of the world in
** step (sq_world_config.transport): share() is a broadcast -- every process
** calls it with the same owner and size, and afterwards buf holds, on every
** process, the bytes the process of rank `owner` passed -- and gather_all()
** an all-gather: every process passes `bytes` of its own and gets every
** rank's in all[], rank 0 first. Both are collective over every rank and
** are never timed as a collective's traffic. nranks is the number of ranks
** (processes) the transport joins, rank this process's. An in-process
** transport leaves share and gather_all NULL.
*/
typedef struct sq_transport {
    void *ctx;
    int (*send)(void *ctx, const sq_plan_msg *m, const sq_qbuf *from, sq_error *err);
    int (*recv)(void *ctx, const sq_plan_msg *m, sq_qbuf *to, sq_error *err);
    int (*phase_end)(void *ctx, int coll, int phase, sq_error *err);
    int (*share)(void *ctx, int owner, void *buf, size_t bytes, sq_error *err);
    int (*gather_all)(void *ctx, const void *mine, void *all, size_t bytes, sq_error *err);
    int nranks, rank;
} sq_transport;

/* The message a SEND or RECV op of rank r stands for. */
sq_plan_msg sq_plan_message(const sq_plan_layout *L, int r, const sq_plan_op *op);

/* The accounting of one SEND (the sender's sent bytes, elements, the
** model's elements among them and one message) or RECV (the receiver's
** received bytes) into that rank's
** counters; other ops count nothing. sq_plan_exec_op calls it. */
void sq_plan_count(const sq_plan_op *op, sq_traffic *traffic);

/* Runs one op of rank r in step `step`: the codec work on mem's backend,
** SEND/RECV through tr, and the counting into traffic (rank r's counters;
** may be NULL). mem == NULL runs a dry rank: only SEND and RECV are counted
** (and passed to tr when tr is not NULL). */
int sq_plan_exec_op(const sq_plan_layout *L, int r, const sq_plan_op *op, uint32_t step,
                    sq_plan_mem *mem, const sq_transport *tr, sq_traffic *traffic, sq_error *err);

SQ_END_DECLS
#endif /* SHARDQ_PLAN_H */
