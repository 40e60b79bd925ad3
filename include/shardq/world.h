/*
** shardq/world.h -- the sharded world: topology, wires, schemes, the two collectives, traffic.
**
** Part of the public API of libshardq (docs/library.md); every
** declaration below is exported, everything else in the library is hidden.
*/
#ifndef SHARDQ_WORLD_H
#define SHARDQ_WORLD_H

#include "shardq/codec.h"

#include <stddef.h>
#include <stdint.h>

SQ_BEGIN_DECLS

/*
** world -- the emulated sharded world: K nodes x G workers, each with its
** own buffers on a backend, and the two collectives of sharded
** data-parallel training between them, under a quantization scheme.
**
** One training step moves data twice (docs/schemes.md):
**
**   weight all-gather      every worker owns 1/N of the fp32 master weights;
**                          afterwards every worker holds the full model
**                          weights (w-hat), reconstructed from what travelled;
**   gradient reduce-scatter every worker holds a full gradient; afterwards
**                          worker r holds partition r of the mean (or sum).
**
** Both run for real: payloads are encoded on the sending worker, copied
** between the workers' buffers (sq_backend_copy), and decoded and summed on
** the receiving one. Every copy is counted: bytes sent and received per
** worker, per collective, per link level (intra-node, inter-node), codes
** and metadata apart. A "dry" world allocates nothing and moves nothing but
** counts the same bytes, so the traffic of any size can be read off.
**
** Worker r = k * G + l sits on node k at local index l. Buffers hold
** sq_world_padded() elements: the tail past the user's n is zero, and the
** padding makes every shard, partition and pipeline slice hold whole
** groups (docs/conventions.md).
**
** The collectives are executed as per-rank plans (world/plan.h) through
** an in-process transport: every rank's ops of one phase, then the next
** phase. A runner with one rank per process executes the same plans.
**
** Errors: functions return an sq_status kind of shardq.h; the world keeps
** an sq_error whose sentence (sq_world_error) names the worker, buffer or
** knob at fault.
*/
/* ------------------------------------------------------------------------ */
/* Topology                                                                 */
/* ------------------------------------------------------------------------ */

#define SQ_WORLD_MAX_WORKERS 4096

typedef struct sq_topo {
    int nodes;    /* K */
    int per_node; /* G */
} sq_topo;

/* "KxG" (e.g. "16x4"), K, G >= 1, K * G <= SQ_WORLD_MAX_WORKERS. */
int sq_topo_parse(const char *text, sq_topo *t, sq_error *err); /* SQ_ERR_ARG when malformed */
static inline int sq_topo_workers(const sq_topo *t) { return t->nodes * t->per_node; }

/* ------------------------------------------------------------------------ */
/* Wires: what one hop carries                                              */
/* ------------------------------------------------------------------------ */

/* A wire is a codec (bits 1..8) or an unquantized dtype: bits 16 is bf16,
** bits 32 is fp32 (then the codec's other fields are ignored). A codec
** whose kind fixes its own codes -- topk, randk, and the casts bf16 and
** fp16 -- makes a codec wire whatever bits says (the bits knob is then
** ignored, and printed as the codec's own width). */
/* How a wire's group size is chosen: the codec's group (fixed), or a
** reference system's rule that sizes it per tensor from the tensor's shape
** (sq_scheme_for_tensor resolves it; a world refuses an unresolved rule). */
typedef enum sq_group_rule {
    SQ_GROUP_FIXED = 0, /* codec.group elements */
    SQ_GROUP_QGZ = 1,   /* DeepSpeed qgZ: numel / max(shape[0], shape[1], N) */
    SQ_GROUP_QWZ = 2    /* DeepSpeed qwZ: CUDAQuantizer's block count of a partition */
} sq_group_rule;

typedef struct sq_wire {
    int bits;
    sq_codec codec;     /* codec.bits == bits when bits <= 8 */
    sq_group_rule rule; /* SQ_GROUP_FIXED unless a per-tensor rule sizes the groups */
    int ef;             /* 1: error feedback at this hop's encode (gradient wires only;
                        ** docs/schemes.md); 0: off */
} sq_wire;

/* Unquantized: the bits 16 (bf16) and 32 (fp32) wires of the sym and minmax
** kinds. A kind that fixes its own codes (topk, randk, the casts, a plug-in)
** is a codec wire whatever its bits. */
static inline int sq_wire_raw(const sq_wire *w)
{
    return w->bits > 8 && w->codec.kind != SQ_KIND_TOPK && w->codec.kind != SQ_KIND_RANDK &&
           w->codec.kind != SQ_KIND_BF16 && w->codec.kind != SQ_KIND_FP16 &&
           w->codec.kind != SQ_KIND_PLUGIN;
}
/* Elements per group: the codec's group, 1 for a raw wire or a cast. */
uint64_t sq_wire_group(const sq_wire *w);
uint64_t sq_wire_code_bytes(const sq_wire *w, uint64_t n); /* codes or raw values */
uint64_t sq_wire_meta_bytes(const sq_wire *w, uint64_t n); /* scales + offsets */

/* ------------------------------------------------------------------------ */
/* Schemes                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum sq_weight_mode {
    SQ_WEIGHT_DIRECT = 0, /* the weights themselves travel (baseline, qW) */
    SQ_WEIGHT_DIFF = 1    /* w - w-hat travels, w-hat += D(q) everywhere (qWD) */
} sq_weight_mode;

/* How a quantized weight wire (bits 1..8) rebuilds w-hat (docs/schemes.md).
** An unquantized wire ignores it: its dtype is the
** precision. */
typedef enum sq_weight_recon {
    SQ_RECON_BF16 = 0, /* the reference systems: the bf16 master copy is
                       ** quantized (or its bf16 difference to w-hat), and
                       ** w-hat := bf16(D(q)) or bf16(bf16(D(q)) + w-hat),
                       ** so w-hat is a bf16 tensor (the default) */
    SQ_RECON_FP32 = 1  /* the fp32 master and fp32 arithmetic throughout:
                       ** w-hat := D(q) or w-hat + D(q) in fp32 */
} sq_weight_recon;

typedef enum sq_grad_mode {
    SQ_GRAD_RING = 0,    /* ring reduce-scatter, unquantized partial sums */
    SQ_GRAD_A2A = 1,     /* single-level all-to-all, dequantize-sum */
    SQ_GRAD_TWOLEVEL = 2, /* intra all-to-all, dequant-sum-requant, inter all-to-all */
    SQ_GRAD_NONE = 3,     /* one worker: no communication (never a knob's value) */
    SQ_GRAD_POWERSGD = 4  /* PowerSGD: two fp32 ring all-reduces of low-rank factors */
} sq_grad_mode;

/* The arithmetic of the gradient path. FP16 is DeepSpeed's qgZ: the input
** is rounded to fp16, every decoded chunk and every partial sum too, so the
** result holds fp16 values; it needs quantized hops without a transform. */
typedef enum sq_grad_dtype { SQ_GRAD_FP32 = 0, SQ_GRAD_FP16 = 1 } sq_grad_dtype;

/* Per-tensor fallbacks of a reference. QGZ: DeepSpeed's qgZ sends a 1-D
** tensor, one whose numel is not a multiple of 2N, and every tensor of a
** one-node world through the unquantized reduce-scatter. */
typedef enum sq_grad_fallback { SQ_FALLBACK_NONE = 0, SQ_FALLBACK_QGZ = 1 } sq_grad_fallback;

typedef struct sq_scheme {
    char preset[16];         /* the preset it started from */
    sq_weight_mode weight_mode;
    sq_wire weight;          /* the weight all-gather's wire */
    sq_weight_recon weight_recon; /* w-hat's arithmetic on a quantized wire */
    sq_grad_mode grad_mode;
    sq_wire grad_intra;      /* first hop of twolevel; the wire when K = 1 */
    sq_wire grad_inter;      /* second hop of twolevel; the wire when K > 1 */
    int pipe;                /* pipeline slices of twolevel, >= 1 */
    int grad_mean;           /* 1: gradients pre-divided by N (a mean), 0: a sum */
    int layout;              /* sq_layout_kind (layout.h): flat buckets or a world per param */
    uint64_t bucket;         /* elements per bucket (layout.h), 0: one bucket */
    sq_grad_dtype grad_dtype; /* what the gradient path computes in */
    sq_grad_fallback grad_fallback; /* per-tensor fallbacks to the fp32 ring */
    /* grad.mode=powersgd (docs/schemes.md): the knobs of PyTorch's
    ** PowerSGDState, and the matrix view of the world's buffer */
    int psgd_rank;           /* grad.powersgd.rank: matrix_approximation_rank */
    int psgd_warm;           /* grad.powersgd.warm: warm_start (reuse last step's Q) */
    int psgd_ef;             /* grad.powersgd.ef: use_error_feedback */
    uint32_t psgd_start;     /* grad.powersgd.start: steps below it reduce uncompressed */
    double psgd_minrate;     /* grad.powersgd.minrate: min_compression_rate */
    float psgd_eps;          /* grad.powersgd.eps: orthogonalization_epsilon */
    uint64_t psgd_cols;      /* grad.powersgd.cols: columns of a shapeless world's view, 0: auto */
    uint64_t psgd_view_cols; /* set by sq_scheme_for_tensor: numel / shape[0] of the tensor
                             ** (no knob; 0: the world is not one tensor of known shape) */
} sq_scheme;

/* The presets of DESIGN.md section 1, in the order `shardq schemes` lists. */
extern const char *const sq_scheme_presets[];
extern const size_t sq_scheme_npresets;

/* Loads a preset by name (an unknown name is SQ_ERR_SPEC, the sentence
** lists the presets). */
int sq_scheme_preset(const char *name, sq_scheme *s, sq_error *err);
/* Applies one "key=value" knob (sq_scheme_knobs lists the keys); an unknown
** key or a value out of range is SQ_ERR_SPEC, NULL arguments SQ_ERR_ARG. */
int sq_scheme_set(sq_scheme *s, const char *assignment, sq_error *err);
/* SQ_OK if the knobs form a scheme the world can run, else SQ_ERR_SPEC
** with the reason (ring over a quantized wire, a Hadamard size that the
** groups do not hold, ...). */
int sq_scheme_validate(const sq_scheme *s, sq_error *err);
/* 1 when s has per-tensor rules (a group rule of a wire, or a fallback):
** such a scheme runs only where each tensor is its own world. */
int sq_scheme_per_tensor(const sq_scheme *s);
/* The concrete scheme one tensor of this shape (ndim >= 1 sizes, row-major
** as the framework reports it) runs under when each tensor is its own world
** of topology topo: per-tensor group rules resolved to sizes, the
** reference's fallbacks applied (a fallback becomes grad.mode=ring with
** fp32 wires and fp32 arithmetic). Under grad.mode=powersgd, out's
** psgd_view_cols = numel / shape[0]: the tensor viewed as a matrix of
** shape[0] rows, as PyTorch's powerSGD_hook does. Otherwise, without
** per-tensor rules, *out = *s.
** SQ_ERR_ARG for NULL arguments or a shape with no elements, SQ_ERR_SPEC
** when a rule finds no group size for it. */
int sq_scheme_for_tensor(const sq_scheme *s, const sq_topo *topo, const uint64_t *shape, int ndim,
                         sq_scheme *out, sq_error *err);
/* Canonical "key=value,..." text of every knob, fixed order. */
int sq_scheme_format(const sq_scheme *s, char *buf, size_t len);
#define SQ_SCHEME_STRLEN 1024

typedef struct sq_knob {
    const char *key;
    const char *values; /* what it accepts */
    const char *help;
} sq_knob;
extern const sq_knob sq_scheme_knobs[];
extern const size_t sq_scheme_nknobs;
/* The value of knob key in s, as text (for `shardq schemes`). */
int sq_scheme_get(const sq_scheme *s, const char *key, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Traffic                                                                  */
/* ------------------------------------------------------------------------ */

enum { SQ_COLL_WEIGHT = 0, SQ_COLL_GRAD = 1, SQ_NCOLL = 2 };
enum { SQ_LINK_INTRA = 0, SQ_LINK_INTER = 1, SQ_NLINK = 2 };

/* One worker's traffic on one link level of one collective.
**
** sent_elems counts every element a message carries, the padding of
** sq_world_padded() included; sent_params counts the model's own elements
** among them, EXACTLY: every message carries whole blocks of the padded
** buffer (a weight slot, a gradient partition, the swizzled slices of the
** two-level hops) and counts how much of those blocks lies in [0, n). So
** sums over workers, steps and worlds (one per tensor or per bucket) are
** exact integers, and over one collective every real element is counted
** once per hop it makes: (N - 1) * n for the ring all-gather, the ring
** reduce-scatter and the all-to-all, K (G - 1) * n intra and (K - 1) * n
** inter for the two-level path.
**
**   bits per element (on the wire)  = 8 (sent_codes + sent_meta) / sent_elems
**   bits per real parameter (cost)  = 8 (sent_codes + sent_meta) / sent_params
**   padding overhead                = sent_elems / sent_params
**
** A link can carry padding alone (sent_params 0 with sent_elems > 0): its
** bits per parameter are then undefined (JSON null, store NULL). */
typedef struct sq_link_traffic {
    uint64_t sent_codes, sent_meta; /* bytes; raw values count as codes */
    uint64_t recv_codes, recv_meta;
    uint64_t sent_elems;            /* elements those sent bytes encode, padding included */
    uint64_t messages;              /* copies sent */
    uint64_t sent_params;           /* the model's elements among sent_elems (no padding) */
} sq_link_traffic;

typedef struct sq_traffic {
    sq_link_traffic t[SQ_NCOLL][SQ_NLINK];
} sq_traffic;

const char *sq_coll_name(int coll); /* "weight_allgather", "grad_reducescatter" */
const char *sq_link_name(int link); /* "intra", "inter" */

/* ------------------------------------------------------------------------ */
/* The world                                                                */
/* ------------------------------------------------------------------------ */

typedef struct sq_world sq_world;
struct sq_transport;

/*
** One process or one rank per process. With transport NULL every worker
** lives in this process and the collectives run every rank's plan through
** the in-process transport. With a transport of nranks = N ranks (plan.h),
** the process holds worker transport->rank alone: its collectives run that
** rank's plan, the messages move through the transport, and the world
** stays the same object on every process -- every process makes the same
** calls in the same order (a runner that executes one program on every
** rank, as MPI does):
**   put_*(r, x)  r's data is put by the process that holds r; the others
**                check it the same way (so a NaN fails on every process)
**                and keep nothing;
**   get_*(r, x)  collective: every process gets worker r's bytes (the
**                holder reads them, the transport shares them);
**   traffic, times, digests: every rank's, exchanged after each collective.
** So a driver written for the in-process world (replay, training, `shardq
** world --run`) runs unchanged on real ranks, computes the same statistics
** on every process, and its bytes equal the in-process run's.
**
** A transport whose share and gather_all are NULL is an IN-PROCESS one
** (plan.h): every worker lives in this process as with NULL, but every
** rank's messages go through its send and recv instead of the world's own
** copies, and its phase_end (when not NULL) runs after each phase -- so a
** transport may deliver a phase's messages there (sq_nccl_open_local moves
** them between GPUs with NCCL).
*/
typedef struct sq_world_config {
    sq_topo topo;
    sq_scheme scheme;
    uint64_t elements;  /* n: elements of the model (and of each gradient) */
    uint64_t seed;      /* Philox key of every stochastic rounding */
    const char *device; /* placement: "cpu" (NULL), "cuda", "cuda:0,1" */
    int dry;            /* 1: count bytes only, no buffers */
    const struct sq_transport *transport; /* NULL: every worker here; else one rank per
                                          ** process, or in process (share NULL, below) */
    int digest;         /* 1: hash every message a worker sends (sq_world_wire_digest) */
} sq_world_config;

/* Opens a world, or fails with the kind and a sentence in err (the
** topology, the scheme, the elements, the padding, memory, the device). */
int sq_world_open(const sq_world_config *cfg, sq_world **out, sq_error *err);
void sq_world_close(sq_world *w);
/* The sentence of the world's last failure ("" if none). */
const char *sq_world_error(const sq_world *w);

const sq_topo *sq_world_topo(const sq_world *w);
const sq_scheme *sq_world_scheme(const sq_world *w);
int sq_world_workers(const sq_world *w);
uint64_t sq_world_elements(const sq_world *w); /* n */
uint64_t sq_world_padded(const sq_world *w);   /* n rounded up by the padding rule */
uint64_t sq_world_shard(const sq_world *w);    /* padded / N */
/* The elements of the model in worker r's shard: min(shard, n - r * shard),
** 0 for a shard of padding only. A shard can be larger than the whole model
** (1000 elements on 8 workers with groups of 2048 pad to 8 shards of 2048),
** so a caller's shard buffers need sq_world_shard() elements, not n / N or n. */
uint64_t sq_world_shard_len(const sq_world *w, int r);
/* The unit the padding rounds to, so that tests can check the rule. */
uint64_t sq_world_pad_unit(const sq_world *w);
/* The backend that holds worker r's buffers (NULL in a dry world). */
struct sq_backend *sq_world_backend(const sq_world *w, int r);

/* Weights. init: every worker's w-hat := w0 and its master shard := its
** slice of w0 (the identical initialisation of every replica; no traffic).
** With weight.recon=bf16 and a quantized weight wire, w-hat := bf16(w0)
** instead (the bf16 model every replica starts from; the master stays the
** fp32 w0 as given).
** put_master/get_master: worker r's fp32 master shard (shard elements;
** the part past n must stay zero and put_master rejects anything else). */
int sq_world_init_weights(sq_world *w, const float *host_w0);
int sq_world_put_master(sq_world *w, int r, const float *host_shard);
int sq_world_get_master(sq_world *w, int r, float *host_shard);
/* The weight all-gather of training step `step`. In process on CPU
** backends, this and the reduce-scatter run each phase's ranks side by
** side on sq_get_threads() threads (one rank per thread; the bytes are
** those of the ranks in turn), so a plug-in codec may be called from
** several threads at once (plugin.h allows it). */
int sq_world_gather_weights(sq_world *w, uint32_t step);
/* Worker r's w-hat: n elements (the padding is not returned). */
int sq_world_get_weights(sq_world *w, int r, float *host_out);
/* Worker r's w-hat where it lies, when that is this process's host memory
** (a CPU worker held here), else NULL: read-only, valid until the next
** init_weights or gather_weights. Saves get_weights' copy. */
const float *sq_world_weights_in_place(const sq_world *w, int r);

/* Gradients. put_grad: worker r's gradient (n elements, finite; divided by N
** on the way in when the scheme averages; after a refusal the worker's
** gradient is undefined until the next put). reduce: the gradient
** reduce-scatter of step `step`. get_grad_shard: worker r's partition of
** the result, shard elements. */
int sq_world_put_grad(sq_world *w, int r, const float *host_grad);
int sq_world_reduce_grads(sq_world *w, uint32_t step);
/* put_grad of the elements [first, first + len) of worker r's gradient
** alone, for a caller that makes its gradient piece by piece and would
** otherwise stage the whole of it: the same values as put_grad writes
** there. Parts of different elements may run on several threads at once.
** Every element must be put before the reduce; the part that ends at
** element n also zeroes the padding. In process only, for a worker in
** host memory: else SQ_ERR_UNSUPPORTED (use put_grad). A NaN or an Inf
** gives SQ_ERR_NONFINITE, an fp16 overflow (grad.dtype=fp16) SQ_ERR_RANGE,
** without a message: put_grad of the whole gradient names the element.
** A part of no elements writes nothing and says whether parts are taken. */
int sq_world_put_grad_part(sq_world *w, int r, uint64_t first, uint64_t len, const float *x);

int sq_world_get_grad_shard(sq_world *w, int r, float *host_out);

/* What each worker sent and received since the last reset (r < N). */
const sq_traffic *sq_world_traffic(const sq_world *w, int r);
/* Adds every worker's traffic to *sum (the world's total, or many worlds'). */
void sq_world_add_traffic(const sq_world *w, sq_traffic *sum);
void sq_world_reset_traffic(sq_world *w);

/* Ranks. holds: 1 when worker r's buffers are in this process (every r in
** process; r == the transport's rank otherwise). local_rank: -1 in process,
** else this process's worker. */
int sq_world_holds(const sq_world *w, int r);
int sq_world_local_rank(const sq_world *w);
/* Collective with a transport: afterwards buf (bytes) on every process holds
** what the process of worker `owner` passed. In process: nothing to do. */
int sq_world_share(sq_world *w, int owner, void *buf, size_t bytes);
/* Whether every replica of w-hat holds the bytes of what0 (n elements):
** *differs = the first worker whose w-hat differs, 0 when all agree (worker
** 0 is compared too; what0 is normally its copy). tmp: n floats. Collective
** with a transport: each process compares its own, and the flags travel. */
int sq_world_replicas_differ(sq_world *w, const float *what0, float *tmp, int *differs);

/* Wall time of the collectives, cumulative since the world opened, as the
** SLOWEST rank saw it: seconds from a collective's first op to its last,
** and link_seconds[l], the part spent inside the transport's send and recv
** on link level l (moving bytes and waiting for the peer). In process the
** ranks run one after another, so seconds is the emulation's time; with a
** transport it is the real collective's, timed from a meeting of the
** ranks (an untimed gather_all), so that a rank's wait for another still
** busy with earlier work is not counted. calls: collectives run. */
typedef struct sq_coll_time {
    uint64_t calls;
    double seconds;
    double link_seconds[SQ_NLINK];
} sq_coll_time;
sq_coll_time sq_world_times(const sq_world *w, int coll);
/* Adds the world's sq_world_times of both collectives to sum[] (many worlds'). */
void sq_world_add_times(const sq_world *w, sq_coll_time sum[SQ_NCOLL]);
/* FNV-1a (sq_fnv1a64) over every byte worker r sent since the world opened,
** message after message (codes, scales, offsets), when opened with
** digest = 1; 0 otherwise. Equal digests: the same bytes on the wire. */
uint64_t sq_world_wire_digest(const sq_world *w, int r);

/* ------------------------------------------------------------------------ */
/* Error feedback                                                           */
/* ------------------------------------------------------------------------ */

/*
** A gradient hop whose wire has ef = 1 (the knobs grad.intra.ef,
** grad.inter.ef, grad.ef) feeds its encoding error back (docs/schemes.md,
** error feedback): the worker that encodes at that hop keeps a residual e, fp32,
** as long as what it encodes there -- hop 0, the worker's own padded
** gradient (the first hop of the two-level path, the single level of a2a),
** P elements; hop 1, the node-local sum it requantizes on the two-level
** path, P / G elements, laid out as that sum: on worker (node, l), slice y
** of partition j G + l at (y K + j) S / pipe (S = P / N). Instead of x it
** encodes x' = x + e, and keeps e = x' - D(E(x')) for the next reduce,
** D(E(.)) its own decoding of the bytes it sent. The residuals start at
** zero when the world opens and persist from reduce to reduce; only
** sq_world_reset_residuals zeroes them again.
*/
/* Elements of one worker's residual at hop 0 or 1; 0 when that hop keeps
** none (error feedback off there, or a path without that hop). */
uint64_t sq_world_residual_len(const sq_world *w, int hop);
/* Bytes one worker keeps for its residuals (both hops): what error feedback
** adds to each worker's memory. */
uint64_t sq_world_residual_bytes(const sq_world *w);
/* Worker r's residual of hop 0 or 1 (sq_world_residual_len elements).
** SQ_ERR_ARG when the hop keeps none. Collective with a transport, as the
** other gets. */
int sq_world_get_residual(sq_world *w, int r, int hop, float *host_out);
/* Every residual := 0 (a new run on an open world). */
int sq_world_reset_residuals(sq_world *w);
/* After the last reduce: worker r's squared L2 norm of its residuals (both
** hops) in *e2, of the gradient it put (as put: divided by N in a mean) in
** *x2, in fp64, element by element in order. Returns 1, or 0 (and zeros)
** when the world keeps no residual (or is dry). Every rank's with a
** transport (exchanged after each reduce). */
int sq_world_residual_norms(const sq_world *w, int r, double *e2, double *x2);
/* sqrt(e2 / x2): 0 when e2 is 0, +Inf when only x2 is. */
double sq_world_residual_ratio(double e2, double x2);
/* The residual's norm relative to the gradient's after the last reduce,
** the mean over workers of sq_world_residual_ratio (0 before the first
** reduce: the residuals start at zero); NaN when the world keeps no
** residual. */
double sq_world_residual_rel(const sq_world *w);

/* The collective the gradient path really runs on this topology (the
** degenerate fallbacks of SDP4Bit: K = 1 or G = 1 turn twolevel into a2a,
** N = 1 into no communication), and the wire of that single level. */
sq_grad_mode sq_world_grad_path(const sq_world *w);
const sq_wire *sq_world_single_wire(const sq_world *w);

/* One collective's traffic at one link level, summed over the workers
** (src/world/traffic.c): bytes of codes and metadata sent, bytes received,
** elements carried (padding included) and the model's parameters among
** them, messages, and the most one worker sent. */
typedef struct sq_level_traffic {
    uint64_t codes, meta, recv, elems, max_sent, messages, params;
} sq_level_traffic;

sq_level_traffic sq_world_level_traffic(const sq_world *w, int coll, int link);

/* 8 x bytes / n: the bits per element carried or per parameter; NaN for
** n = 0. */
double sq_bits_per(uint64_t bytes, uint64_t n);
/* A level's bits per element carried, 0 on a link that carried nothing. */
double sq_level_bits_per_elem(const sq_level_traffic *s);
/* Its bits per real parameter: 0 on a link that carried nothing, NaN on
** one that carried padding alone. */
double sq_level_bits_per_param(const sq_level_traffic *s);
/* Elements carried per parameter, with the conventions of bits_per_param. */
double sq_level_padding_overhead(const sq_level_traffic *s);

/* The FNV-1a digests of each worker's reduced partition and gathered
** weights (w not dry): d holds sq_world_workers(w) entries. SQ_OK, or
** the world's failure (its sq_world_error) or SQ_ERR_NOMEM. */
typedef struct sq_output_digest {
    uint64_t grad, weight;
} sq_output_digest;
int sq_world_output_digests(sq_world *w, sq_output_digest *d, sq_error *err);

SQ_END_DECLS
/* ------------------------------------------------------------------------ */
/* Writers of the results (print.c): what `shardq world` and `shardq       */
/* schemes` print.                                                          */
/* ------------------------------------------------------------------------ */

#include <stdio.h>

/* The world's topology, scheme (preset: the name it was given), sizes and
** seed: lines of text, or the opening members of a JSON object. */
void sq_world_print(FILE *f, const sq_world *w, const sq_world_config *cfg,
                    const char *preset, int json);

/* The iteration's bytes by collective and link: a table, or JSON members
** "traffic" and "per_worker" (with dg, each worker's output digests). */
void sq_world_print_traffic(FILE *f, const sq_world *w, const sq_output_digest *dg, int json);

/* The collectives' calls and wall time: lines, or JSON members. */
void sq_world_print_times(FILE *f, const sq_world *w, int json);

/* The scheme presets, their knob values and the knobs (text or JSON). */
void sq_scheme_print(FILE *f, int json);

#endif /* SHARDQ_WORLD_H */
