/*
** plan.c -- the layout of a sharded world (padding rule, fallbacks, shard
** lengths, swizzle, keys) and the per-rank plans of its two collectives.
**
** Each collective is written once here, as the ops of one rank in one
** phase (phase_ops); a whole plan is those phases laid end to end, and the
** in-process world asks for the same ops phase by phase. The algorithms
** and summation orders are those of docs/schemes.md:
**   weight all-gather: encode the own slot, N - 1 ring steps forwarding
**     slot r - s to r + 1, decode all of w-hat from the encoded bytes;
**   ring reduce-scatter: partition c is summed along the ring starting at
**     worker c + 1: ((x[c+1] + x[c+2]) + ...) + x[c];
**   all-to-all: dequantize-sum in worker order 0, 1, ..., N-1;
**   two-level: local index 0..G-1 inside the node, then node 0..K-1;
**   PowerSGD: two ring all-reduces (the ring reduce-scatter's order, then
**     an all-gather of the sums) of the factors P and Q (powersgd.c).
*/
#include "shardq/plan.h"
#include "world/world_internal.h"
#include "world/powersgd.h"
#include "sq_hd.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Layout                                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t mul(uint64_t a, uint64_t b, int *overflow)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) *overflow = 1;
    return r;
}

/* Elements one unit of a wire needs: whole groups, whole transform blocks,
** and whole bytes of codes whatever the bit width (8 elements). */
static uint64_t wire_unit(const sq_wire *wr, int *ov)
{
    uint64_t u = sq_hd_lcm_u64(8, sq_wire_group(wr), ov);
    if (!sq_wire_raw(wr) && wr->codec.hadamard) u = sq_hd_lcm_u64(u, (uint64_t)wr->codec.hadamard, ov);
    return u;
}

sq_grad_mode sq_plan_grad_path(const sq_topo *topo, const sq_scheme *s)
{
    /* SDP4Bit's fallbacks: one node or one worker per node leaves one
    ** level, quantized as that level would be; one worker, nothing. */
    if (sq_topo_workers(topo) == 1) return SQ_GRAD_NONE;
    if (s->grad_mode == SQ_GRAD_TWOLEVEL && (topo->nodes == 1 || topo->per_node == 1))
        return SQ_GRAD_A2A;
    return s->grad_mode;
}

static const sq_wire *single_wire(const sq_topo *topo, const sq_scheme *s)
{
    return topo->nodes > 1 ? &s->grad_inter : &s->grad_intra;
}

/* The padding rule (docs/conventions.md): every weight shard holds whole
** weight groups; every gradient partition -- and, on the two-level path,
** every pipeline slice of it -- holds whole groups of both hops. */
int sq_plan_pad_unit(const sq_topo *topo, const sq_scheme *s, uint64_t *unit, sq_error *err)
{
    int ov = 0;
    uint64_t N = (uint64_t)sq_topo_workers(topo);
    sq_grad_mode path = sq_plan_grad_path(topo, s);
    if (N == 1) {
        *unit = 1;
        return SQ_OK;
    }
    uint64_t uw = mul(wire_unit(&s->weight, &ov), N, &ov);
    uint64_t ug;
    if (path == SQ_GRAD_TWOLEVEL) {
        ug = sq_hd_lcm_u64(wire_unit(&s->grad_intra, &ov), wire_unit(&s->grad_inter, &ov), &ov);
        ug = mul(mul(ug, N, &ov), (uint64_t)s->pipe, &ov);
    } else if (path == SQ_GRAD_A2A) {
        ug = mul(wire_unit(single_wire(topo, s), &ov), N, &ov);
    } else {
        ug = 8 * N;
    }
    uint64_t u = sq_hd_lcm_u64(uw, ug, &ov);
    if (ov || u > ((uint64_t)1 << 50))
        return sq_error_set(err, SQ_ERR_SPEC,
                            "the padding unit (lcm of the groups, Hadamard sizes, pipe and N) "
                            "overflows: choose smaller or rounder group sizes");
    *unit = u;
    return SQ_OK;
}

uint64_t sq_plan_padded(uint64_t n, uint64_t unit)
{
    uint64_t P = (n + unit - 1) / unit * unit;
    return (P < n || P > ((uint64_t)1 << 52)) ? 0 : P;
}

int sq_plan_layout_init(const sq_world_config *cfg, sq_plan_layout *L, sq_error *err)
{
    memset(L, 0, sizeof *L);
    int N = sq_topo_workers(&cfg->topo);
    if (cfg->topo.nodes < 1 || cfg->topo.per_node < 1 || N > SQ_WORLD_MAX_WORKERS)
        return sq_error_set(err, SQ_ERR_ARG,
                            "topology %dx%d: need at least one node and worker, at most %d workers",
                            cfg->topo.nodes, cfg->topo.per_node, SQ_WORLD_MAX_WORKERS);
    int rc = sq_scheme_validate(&cfg->scheme, err);
    if (rc) return rc;
    if (sq_scheme_per_tensor(&cfg->scheme)) {
        const sq_scheme *s = &cfg->scheme;
        const char *rule = !sq_wire_raw(&s->weight) && s->weight.rule ? "weight.group=qwz"
                           : s->grad_fallback                         ? "grad.fallback=qgz"
                                                                      : "grad.group=qgz";
        return sq_error_set(err, SQ_ERR_SPEC,
                            "scheme %s: %s is a per-tensor rule and needs a tensor shape: run "
                            "it in the per-param layout, where each tensor is its own world "
                            "(sq_scheme_for_tensor resolves it), or set a fixed size",
                            s->preset[0] ? s->preset : "(custom)", rule);
    }
    if (cfg->elements == 0)
        return sq_error_set(err, SQ_ERR_ARG, "elements: the model has no elements (0)");
    L->topo = cfg->topo;
    L->N = N, L->K = cfg->topo.nodes, L->G = cfg->topo.per_node;
    L->scheme = cfg->scheme;
    L->wires[SQ_PLAN_WIRE_WEIGHT] = cfg->scheme.weight;
    L->wires[SQ_PLAN_WIRE_INTRA] = cfg->scheme.grad_intra;
    L->wires[SQ_PLAN_WIRE_INTER] = cfg->scheme.grad_inter;
    L->n = cfg->elements;
    L->seed = cfg->seed;
    L->grad_path = sq_plan_grad_path(&cfg->topo, &cfg->scheme);
    L->single_wire = L->K > 1 ? SQ_PLAN_WIRE_INTER : SQ_PLAN_WIRE_INTRA;
    if ((rc = sq_plan_pad_unit(&cfg->topo, &cfg->scheme, &L->unit, err))) return rc;
    L->padded = sq_plan_padded(L->n, L->unit);
    if (!L->padded)
        return sq_error_set(err, SQ_ERR_ARG, "elements %llu: too many once padded",
                            (unsigned long long)L->n);
    L->shard = L->padded / (uint64_t)N;
    L->quarter = L->padded / (uint64_t)L->G;
    L->slice = L->shard / (uint64_t)cfg->scheme.pipe;
    if (L->grad_path == SQ_GRAD_POWERSGD &&
        !sq_psgd_view(&cfg->scheme, L->n, &L->psgd_rows, &L->psgd_cols, &L->psgd_rank))
        L->grad_path = SQ_GRAD_RING; /* PyTorch all-reduces such a tensor uncompressed */
    return SQ_OK;
}

uint64_t sq_plan_shard_len(const sq_plan_layout *L, int r)
{
    if (r < 0 || r >= L->N) return 0;
    uint64_t first = (uint64_t)r * L->shard;
    return first >= L->n ? 0 : L->n - first < L->shard ? L->n - first : L->shard;
}

uint64_t sq_plan_swizzle_index(const sq_plan_layout *L, uint64_t b)
{
    uint64_t pipe = (uint64_t)L->scheme.pipe, z = b / pipe, y = b % pipe;
    return y * (uint64_t)L->N + (z % (uint64_t)L->G) * (uint64_t)L->K + z / (uint64_t)L->G;
}

sq_rng_key sq_plan_rng_key(const sq_plan_layout *L, uint32_t step, int r, int site)
{
    sq_rng_key k = {L->seed, step, (uint32_t)r, (uint32_t)site};
    return k;
}

/* ------------------------------------------------------------------------ */
/* Buffers                                                                  */
/* ------------------------------------------------------------------------ */

static int first_wire(const sq_plan_layout *L)
{
    return L->grad_path == SQ_GRAD_TWOLEVEL ? SQ_PLAN_WIRE_INTRA : L->single_wire;
}

/* Keep in step with alloc_worker in world.c. */
uint64_t sq_plan_buffer_len(const sq_plan_layout *L, int b)
{
    const uint64_t P = L->padded, S = L->shard, Q = L->quarter;
    const sq_grad_mode g = L->grad_path;
    switch (b) {
    case SQ_PLAN_GRAD: case SQ_PLAN_WHAT: return P;
    case SQ_PLAN_GOUT: case SQ_PLAN_MASTER: return S;
    case SQ_PLAN_TMP: return g == SQ_GRAD_TWOLEVEL ? Q : (g == SQ_GRAD_RING || g == SQ_GRAD_A2A) ? S : 0;
    case SQ_PLAN_TMP2: return g == SQ_GRAD_TWOLEVEL ? Q : 0;
    case SQ_PLAN_WRECV: return L->N > 1 ? P : 0;
    case SQ_PLAN_GENC: case SQ_PLAN_GRECV: return (g == SQ_GRAD_A2A || g == SQ_GRAD_TWOLEVEL) ? P : 0;
    case SQ_PLAN_GSWZ: return g == SQ_GRAD_TWOLEVEL ? P : 0;
    case SQ_PLAN_GREQ: case SQ_PLAN_GRECV2: return g == SQ_GRAD_TWOLEVEL ? Q : 0;
    case SQ_PLAN_RSEND: case SQ_PLAN_RRECV: return g == SQ_GRAD_RING ? S : 0;
    case SQ_PLAN_EF: /* error feedback's residuals: the hop's wire says */
        return (g == SQ_GRAD_A2A || g == SQ_GRAD_TWOLEVEL) && L->wires[first_wire(L)].ef ? P : 0;
    case SQ_PLAN_EF2: return g == SQ_GRAD_TWOLEVEL && L->wires[SQ_PLAN_WIRE_INTER].ef ? Q : 0;
    default: break;
    }
    if (g != SQ_GRAD_POWERSGD) return 0;
    const uint64_t m = L->psgd_rows, c = L->psgd_cols, r = (uint64_t)L->psgd_rank;
    const uint64_t N = (uint64_t)L->N;
    switch (b) {
    case SQ_PLAN_PSGD_M: return m * c;
    case SQ_PLAN_PSGD_P: return m * r;
    case SQ_PLAN_PSGD_Q: return c * r;
    case SQ_PLAN_PSGD_RECV: return ((m > c ? m : c) * r + N - 1) / N;
    case SQ_PLAN_PSGD_WARM: return 1;
    default: return 0;
    }
}

int sq_plan_buffer_wire(const sq_plan_layout *L, int b)
{
    switch (b) {
    case SQ_PLAN_WRECV: return SQ_PLAN_WIRE_WEIGHT;
    case SQ_PLAN_GENC: case SQ_PLAN_GRECV: return first_wire(L);
    case SQ_PLAN_GSWZ: return SQ_PLAN_WIRE_INTRA;
    case SQ_PLAN_GREQ: case SQ_PLAN_GRECV2: return SQ_PLAN_WIRE_INTER;
    case SQ_PLAN_RSEND: case SQ_PLAN_RRECV: return L->single_wire;
    case SQ_PLAN_PSGD_P: case SQ_PLAN_PSGD_Q: case SQ_PLAN_PSGD_RECV: return L->single_wire;
    default: return -1;
    }
}

const char *sq_plan_buffer_name(int b)
{
    static const char *const names[SQ_PLAN_NBUF] = {
        "grad", "gout", "what", "master", "tmp", "tmp2", "wrecv",
        "genc", "gswz", "grecv", "greq", "grecv2", "rsend", "rrecv",
        "psgd_m", "psgd_p", "psgd_q", "psgd_recv", "psgd_warm", "ef", "ef2"};
    return b >= 0 && b < SQ_PLAN_NBUF ? names[b] : "?";
}

/* ------------------------------------------------------------------------ */
/* Ops of one rank in one phase                                             */
/* ------------------------------------------------------------------------ */

static sq_plan_op blank(int kind, int phase, int coll, int wire, const char *what)
{
    sq_plan_op o;
    memset(&o, 0, sizeof o);
    o.kind = (sq_plan_kind)kind;
    o.phase = phase;
    o.round = -1;
    o.coll = coll;
    o.peer = -1;
    o.wire = wire;
    o.wire_out = -1;
    o.site = -1;
    o.src = o.dst = o.ref = -1;
    o.what = what;
    return o;
}

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b, b = t;
    }
    return a;
}

/* The exchange of one round: rank `me` (index i of a group of m) sends
** `n` elements from src@src_off to `to`, which keeps them in dst@to_off,
** and receives n elements from `from` into dst@from_off. The first rank of
** each cycle of the shift d sends first, the others receive first. */
typedef struct xchg {
    int i, m, d, round;
    int to, from;
    int src, dst;
    uint64_t src_off, to_off, from_off, n;
    uint64_t codes, meta; /* bytes of n elements of the wire */
    int lo;               /* the first rank of the sender's node */
    uint64_t model_out, model_in; /* the model's elements in what is sent, received */
} xchg;

/* (a - b) mod m for a, b in [0, m): the world asks for these ops at every
** collective of every rank, so no division where a comparison does. */
static int minus_mod(int a, int b, int m) { return a >= b ? a - b : a - b + m; }

/* Written in place: the world asks for these ops at every collective. */
static size_t emit_round(const sq_plan_layout *L, int me, int phase, int coll, int wire,
                         const xchg *x, sq_plan_op *ops)
{
    int send_first = x->i < (x->d == 1 ? 1 : gcd(x->m, x->d)), lo = x->lo, hi = x->lo + L->G;
    (void)me;
    ops[send_first ? 0 : 1] = (sq_plan_op){
        .kind = SQ_PLAN_SEND, .phase = phase, .round = x->round, .coll = coll, .peer = x->to,
        .link = x->to >= lo && x->to < hi ? SQ_LINK_INTRA : SQ_LINK_INTER, .wire = wire, .wire_out = -1, .site = -1,
        .src = x->src, .dst = x->dst, .ref = -1, .src_off = x->src_off, .dst_off = x->to_off,
        .n = x->n, .code_bytes = x->codes, .meta_bytes = x->meta, .model_n = x->model_out,
        .what = "sending"};
    ops[send_first ? 1 : 0] = (sq_plan_op){
        .kind = SQ_PLAN_RECV, .phase = phase, .round = x->round, .coll = coll, .peer = x->from,
        .link = x->from >= lo && x->from < hi ? SQ_LINK_INTRA : SQ_LINK_INTER, .wire = wire, .wire_out = -1, .site = -1,
        .src = -1, .dst = x->dst, .ref = -1, .dst_off = x->from_off,
        .n = x->n, .code_bytes = x->codes, .meta_bytes = x->meta, .model_n = x->model_in,
        .what = "receiving"};
    return 2;
}

/* The model's elements in `count` blocks of `len` elements of the padded
** buffer, blocks first, first + step, first + 2 step, ... (block b holds
** elements [b len, (b + 1) len)): the blocks below n / len are whole,
** block n / len holds n mod len, the rest is padding. O(1): the world
** asks for these ops at every collective of every rank. */
static uint64_t model_in_blocks(const sq_plan_layout *L, uint64_t first, uint64_t step,
                                uint64_t count, uint64_t len)
{
    const uint64_t whole = L->n / len, part = L->n % len;
    if (count == 0 || first > whole) return 0;
    uint64_t below = (whole - first + step - 1) / step; /* j with first + j step < whole */
    uint64_t full = below < count ? below : count, m = full * len;
    if (part && (whole - first) % step == 0 && (whole - first) / step < count) m += part;
    return m;
}

/* The packed sizes of n elements of wire wi. */
static void sizes(const sq_plan_layout *L, int wi, uint64_t n, uint64_t *codes, uint64_t *meta)
{
    *codes = sq_wire_code_bytes(&L->wires[wi], n);
    *meta = sq_wire_meta_bytes(&L->wires[wi], n);
}

static void local_sizes(const sq_plan_layout *L, sq_plan_op *o)
{
    sizes(L, o->wire, o->n, &o->code_bytes, &o->meta_bytes);
}

static size_t weight_ops(const sq_plan_layout *L, int r, int phase, sq_plan_op *ops)
{
    const int N = L->N, C = SQ_COLL_WEIGHT, W = SQ_PLAN_WIRE_WEIGHT;
    const uint64_t S = L->shard, P = L->padded;
    const int diff = L->scheme.weight_mode == SQ_WEIGHT_DIFF;
    if (N == 1) {
        ops[0] = blank(SQ_PLAN_COPY, 0, C, -1, "copying locally");
        ops[0].src = SQ_PLAN_MASTER, ops[0].dst = SQ_PLAN_WHAT, ops[0].n = P;
        return 1;
    }
    if (phase == 0) {
        /* the own slot, from the master shard (or its difference to w-hat) */
        sq_plan_op o = blank(diff ? SQ_PLAN_ENCODE_DIFF : SQ_PLAN_ENCODE, 0, C, W,
                             diff ? "quantizing the weight difference" : "encoding the master shard");
        o.site = SQ_SITE_WEIGHT;
        o.src = SQ_PLAN_MASTER, o.n = S;
        o.dst = SQ_PLAN_WRECV, o.dst_off = (uint64_t)r * S;
        if (diff) o.ref = SQ_PLAN_WHAT, o.ref_off = (uint64_t)r * S;
        ops[0] = o;
        return 1;
    }
    if (phase < N) {
        /* ring step s: pass slot r - s to r + 1, take slot r - 1 - s from r - 1 */
        int s = phase - 1, c = minus_mod(r, s, N), cin = minus_mod(c, 1, N);
        xchg x = {r, N, 1, 0, r + 1 < N ? r + 1 : 0, minus_mod(r, 1, N), SQ_PLAN_WRECV,
                  SQ_PLAN_WRECV, (uint64_t)c * S, (uint64_t)c * S, (uint64_t)cin * S, S, 0, 0,
                  r - r % L->G, sq_plan_shard_len(L, c), sq_plan_shard_len(L, cin)};
        sizes(L, W, S, &x.codes, &x.meta);
        return emit_round(L, r, phase, C, W, &x, ops);
    }
    sq_plan_op o = blank(diff ? SQ_PLAN_DECODE_ADD : SQ_PLAN_DECODE, N, C, W,
                         diff ? "adding the gathered differences" : "decoding the gathered weights");
    o.src = SQ_PLAN_WRECV, o.dst = SQ_PLAN_WHAT, o.n = P;
    if (diff) o.ref = SQ_PLAN_WHAT;
    ops[0] = o;
    return 1;
}

/* gout holds the partial sum a rank is carrying: at step s, rank r
** carries partition r - 1 - s, so after N - 1 steps it holds its own. */
static size_t ring_ops(const sq_plan_layout *L, int r, int phase, sq_plan_op *ops)
{
    const int N = L->N, C = SQ_COLL_GRAD, W = L->single_wire;
    const uint64_t S = L->shard;
    if (phase == 0) {
        ops[0] = blank(SQ_PLAN_COPY, 0, C, -1, "copying locally");
        ops[0].src = SQ_PLAN_GRAD, ops[0].src_off = (uint64_t)(((r - 1) % N + N) % N) * S;
        ops[0].dst = SQ_PLAN_GOUT, ops[0].n = S;
        return 1;
    }
    int s = (phase - 1) / 3, part = (phase - 1) % 3;
    if (part == 0) {
        ops[0] = blank(SQ_PLAN_ENCODE, phase, C, W, "encoding a partial sum");
        ops[0].src = SQ_PLAN_GOUT, ops[0].dst = SQ_PLAN_RSEND, ops[0].n = S;
        return 1;
    }
    if (part == 1) {
        /* at step s rank r carries partition r - 1 - s and receives r - 2 - s */
        int c = ((r - 1 - s) % N + N) % N, cin = minus_mod(c, 1, N);
        xchg x = {r, N, 1, 0, r + 1 < N ? r + 1 : 0, minus_mod(r, 1, N), SQ_PLAN_RSEND,
                  SQ_PLAN_RRECV, 0, 0, 0, S, 0, 0, r - r % L->G,
                  sq_plan_shard_len(L, c), sq_plan_shard_len(L, cin)};
        sizes(L, W, S, &x.codes, &x.meta);
        return emit_round(L, r, phase, C, W, &x, ops);
    }
    ops[0] = blank(SQ_PLAN_ADD, phase, C, W, "adding to a partial sum");
    ops[0].src = SQ_PLAN_RRECV, ops[0].ref = SQ_PLAN_GRAD;
    ops[0].ref_off = (uint64_t)(((r - s - 2) % N + N) % N) * S;
    ops[0].dst = SQ_PLAN_GOUT, ops[0].n = S;
    return 1;
}

/* An ENCODE of the gradient with error feedback (plan.h): residual buf,
** updated in k chunks of `stride` elements through TMP. */
static void feedback(sq_plan_op *o, int buf, int k, uint64_t stride)
{
    o->ref = buf, o->ref_off = 0;
    o->k = k, o->stride = stride;
    o->what = "encoding the gradient with error feedback";
}

/* Quantize the whole gradient once, send partition z to rank z, and let
** every rank dequantize and sum what it received, in rank order. */
static size_t a2a_ops(const sq_plan_layout *L, int r, int phase, sq_plan_op *ops)
{
    const int N = L->N, C = SQ_COLL_GRAD, W = L->single_wire;
    const uint64_t S = L->shard, P = L->padded;
    if (phase == 0) {
        ops[0] = blank(SQ_PLAN_ENCODE, 0, C, W, "encoding the gradient");
        ops[0].site = SQ_SITE_GRAD_SINGLE;
        ops[0].src = SQ_PLAN_GRAD, ops[0].dst = SQ_PLAN_GENC, ops[0].n = P;
        /* error feedback: the residual's update decodes a partition at a time */
        if (L->wires[W].ef) feedback(&ops[0], SQ_PLAN_EF, N, S);
        return 1;
    }
    if (phase == 1) {
        size_t k = 0;
        ops[k] = blank(SQ_PLAN_LOCAL, 1, C, W, "keeping the own chunk");
        ops[k].src = SQ_PLAN_GENC, ops[k].src_off = (uint64_t)r * S;
        ops[k].dst = SQ_PLAN_GRECV, ops[k].dst_off = (uint64_t)r * S, ops[k].n = S;
        local_sizes(L, &ops[k]);
        k++;
        const int lo = r - r % L->G;
        for (int d = 1; d < N; d++) {
            int to = r + d < N ? r + d : r + d - N, from = minus_mod(r, d, N);
            xchg x = {r, N, d, d - 1, to, from, SQ_PLAN_GENC, SQ_PLAN_GRECV,
                      (uint64_t)to * S, (uint64_t)r * S, (uint64_t)from * S, S,
                      ops[0].code_bytes, ops[0].meta_bytes, lo, sq_plan_shard_len(L, to),
                      sq_plan_shard_len(L, r)};
            k += emit_round(L, r, 1, C, W, &x, ops + k);
        }
        return k;
    }
    ops[0] = blank(SQ_PLAN_SUM, 2, C, W, "summing the received chunks");
    ops[0].src = SQ_PLAN_GRECV, ops[0].k = N, ops[0].stride = S;
    ops[0].dst = SQ_PLAN_GOUT, ops[0].n = S;
    return 1;
}

/* SDP4Bit's quantized_reduce_scatter_intra_and_inter (spec section 2.3):
** quantize and swizzle, per slice the intra-node all-to-all of sub-chunks,
** the dequantize-sum-requantize over the G local peers, per slice the
** inter-node all-to-all of pieces, and the dequantize-sum over the K nodes.
** The arithmetic of every hop is one op over the slices laid end to end
** (their groups never mix, so the bytes equal those of one op per slice);
** the messages go slice by slice, as the pipelined implementation sends
** them. The requantization's stochastic rounding numbers elements by
** their place in that slice-major buffer of P / G elements. */
static size_t twolevel_ops(const sq_plan_layout *L, int r, int phase, sq_plan_op *ops)
{
    const int G = L->G, K = L->K, N = L->N, pipe = L->scheme.pipe, C = SQ_COLL_GRAD;
    const int WI = SQ_PLAN_WIRE_INTRA, WO = SQ_PLAN_WIRE_INTER;
    const uint64_t Pad = L->padded, S = L->shard, Q = L->quarter, P = L->slice;
    const int node = r / G, l = r % G;
    const uint64_t up = (uint64_t)pipe;
    size_t k = 0;
    switch (phase) {
    case 0:
        ops[0] = blank(SQ_PLAN_ENCODE, 0, C, WI, "quantizing the gradient (first hop)");
        ops[0].site = SQ_SITE_GRAD_INTRA;
        ops[0].src = SQ_PLAN_GRAD, ops[0].dst = SQ_PLAN_GENC, ops[0].n = Pad;
        if (L->wires[WI].ef) feedback(&ops[0], SQ_PLAN_EF, G, Q);
        ops[1] = blank(SQ_PLAN_SWIZZLE, 0, C, WI, "swizzling the gradient");
        ops[1].src = SQ_PLAN_GENC, ops[1].dst = SQ_PLAN_GSWZ, ops[1].n = P;
        ops[1].k = N * pipe;
        return 2;
    case 1:
        /* intra-node hop: rank (node, l) sends sub-chunk l2 of each slice to (node, l2) */
        for (int y = 0; y < pipe; y++) {
            const uint64_t uy = (uint64_t)y;
            uint64_t base = (uint64_t)y * (uint64_t)N * P, at = (uint64_t)y * (uint64_t)K * P;
            ops[k] = blank(SQ_PLAN_LOCAL, 1, C, WI, "keeping the own sub-chunk");
            ops[k].src = SQ_PLAN_GSWZ, ops[k].src_off = base + (uint64_t)l * (uint64_t)K * P;
            ops[k].dst = SQ_PLAN_GRECV, ops[k].dst_off = (uint64_t)l * Q + at;
            ops[k].n = (uint64_t)K * P;
            local_sizes(L, &ops[k]);
            const uint64_t cb = ops[k].code_bytes, mb = ops[k].meta_bytes;
            k++;
            for (int d = 1; d < G; d++) {
                int l2 = (l + d) % G, lf = (l - d + G) % G;
                xchg x = {l, G, d, y * (G - 1) + d - 1, node * G + l2, node * G + lf,
                          SQ_PLAN_GSWZ, SQ_PLAN_GRECV,
                          base + (uint64_t)l2 * (uint64_t)K * P, (uint64_t)l * Q + at,
                          (uint64_t)lf * Q + at, (uint64_t)K * P, cb, mb, node * G,
                          /* sub-chunk l2 of slice y: partitions z = j G + l2, j < K,
                          ** input blocks z pipe + y (the swizzle, read backwards) */
                          model_in_blocks(L, (uint64_t)l2 * up + uy, (uint64_t)G * up, (uint64_t)K, P),
                          model_in_blocks(L, (uint64_t)l * up + uy, (uint64_t)G * up, (uint64_t)K, P)};
                k += emit_round(L, r, 1, C, WI, &x, ops + k);
            }
        }
        return k;
    case 2:
        ops[0] = blank(SQ_PLAN_SUM_REQUANT, 2, C, WI, "summing and requantizing the intra-node chunks");
        ops[0].wire_out = WO, ops[0].site = SQ_SITE_GRAD_INTER;
        ops[0].src = SQ_PLAN_GRECV, ops[0].k = G, ops[0].stride = Q;
        ops[0].dst = SQ_PLAN_GREQ, ops[0].n = Q;
        if (L->wires[WO].ef) { /* error feedback: the residual of the requantization */
            ops[0].ref = SQ_PLAN_EF2;
            ops[0].what = "summing, feeding back and requantizing the intra-node chunks";
        }
        return 1;
    case 3:
        /* inter-node hop: rank (node, l) sends piece k2 of each slice to (k2, l) */
        for (int y = 0; y < pipe; y++) {
            const uint64_t uy = (uint64_t)y;
            uint64_t base = (uint64_t)y * (uint64_t)K * P, at = (uint64_t)y * P;
            ops[k] = blank(SQ_PLAN_LOCAL, 3, C, WO, "keeping the own piece");
            ops[k].src = SQ_PLAN_GREQ, ops[k].src_off = base + (uint64_t)node * P;
            ops[k].dst = SQ_PLAN_GRECV2, ops[k].dst_off = (uint64_t)node * S + at, ops[k].n = P;
            local_sizes(L, &ops[k]);
            const uint64_t cb = ops[k].code_bytes, mb = ops[k].meta_bytes;
            k++;
            for (int d = 1; d < K; d++) {
                int k2 = (node + d) % K, kf = (node - d + K) % K;
                xchg x = {node, K, d, y * (K - 1) + d - 1, k2 * G + l, kf * G + l,
                          SQ_PLAN_GREQ, SQ_PLAN_GRECV2, base + (uint64_t)k2 * P,
                          (uint64_t)node * S + at, (uint64_t)kf * S + at, P, cb, mb, node * G,
                          /* piece k2 of slice y: partition k2 G + l, input block z pipe + y */
                          model_in_blocks(L, (uint64_t)(k2 * G + l) * up + uy, 1, 1, P),
                          model_in_blocks(L, (uint64_t)r * up + uy, 1, 1, P)};
                k += emit_round(L, r, 3, C, WO, &x, ops + k);
            }
        }
        return k;
    default:
        ops[0] = blank(SQ_PLAN_SUM, 4, C, WO, "summing the inter-node chunks");
        ops[0].src = SQ_PLAN_GRECV2, ops[0].k = K, ops[0].stride = S;
        ops[0].dst = SQ_PLAN_GOUT, ops[0].n = S;
        return 1;
    }
}

/* One phase of a ring all-reduce of buffer X (len elements, N chunks of
** sq_psgd_chunk), phase t of its 3 (N - 1): reduce-scatter step s moves
** at phase 2s and adds at 2s + 1 -- at step s rank r sends its partial sum
** of chunk r - 1 - s and adds the one of chunk r - 2 - s it receives to
** its own, so chunk z is summed ((x[z+1] + x[z+2]) + ...) + x[z] as in the
** ring reduce-scatter -- and all-gather step s (phase 2 (N - 1) + s) passes
** the sum of chunk r - s on, where the receiver keeps it in place. With
** model, the reduce-scatter's messages count the model's elements of the
** world partitions the ring reduce-scatter would send at those steps. */
static size_t allreduce_ops(const sq_plan_layout *L, int r, int t, int phase, int X,
                            uint64_t len, int model, sq_plan_op *ops)
{
    const int N = L->N, C = SQ_COLL_GRAD, W = L->single_wire;
    const int next = r + 1 < N ? r + 1 : 0, prev = minus_mod(r, 1, N);
    uint64_t off, n, off_in, n_in;
    if (t < 2 * (N - 1)) {
        const int s = t / 2, c = minus_mod(minus_mod(r, 1, N), s % N, N), cin = minus_mod(c, 1, N);
        sq_psgd_chunk(len, N, cin, &off_in, &n_in);
        if (t % 2) {
            ops[0] = blank(SQ_PLAN_ACCUM, phase, C, W, "PowerSGD: adding to a partial sum");
            ops[0].src = SQ_PLAN_PSGD_RECV, ops[0].dst = X, ops[0].dst_off = off_in;
            ops[0].n = n_in;
            return 1;
        }
        sq_psgd_chunk(len, N, c, &off, &n);
        xchg x = {r, N, 1, 0, next, prev, X, SQ_PLAN_PSGD_RECV, off, 0, 0, n, 0, 0,
                  r - r % L->G, model ? sq_plan_shard_len(L, c) : 0,
                  model ? sq_plan_shard_len(L, cin) : 0};
        emit_round(L, r, phase, C, W, &x, ops);
        /* the two lengths differ when len is not a multiple of N */
        ops[0].n = ops[0].kind == SQ_PLAN_SEND ? n : n_in;
        ops[1].n = ops[1].kind == SQ_PLAN_SEND ? n : n_in;
        for (int i = 0; i < 2; i++) sizes(L, W, ops[i].n, &ops[i].code_bytes, &ops[i].meta_bytes);
        return 2;
    }
    const int s = t - 2 * (N - 1), c = minus_mod(r, s % N, N), cin = minus_mod(c, 1, N);
    sq_psgd_chunk(len, N, c, &off, &n);
    sq_psgd_chunk(len, N, cin, &off_in, &n_in);
    xchg x = {r, N, 1, 0, next, prev, X, X, off, off, off_in, n, 0, 0, r - r % L->G, 0, 0};
    emit_round(L, r, phase, C, W, &x, ops);
    ops[0].n = ops[0].kind == SQ_PLAN_SEND ? n : n_in;
    ops[1].n = ops[1].kind == SQ_PLAN_SEND ? n : n_in;
    for (int i = 0; i < 2; i++) sizes(L, W, ops[i].n, &ops[i].code_bytes, &ops[i].meta_bytes);
    return 2;
}

/* PowerSGD (powersgd.c): project, all-reduce P, orthonormalize and project
** back, all-reduce Q, take the approximation. Phases: 0 project, 1 ..
** 3 (N - 1) P's all-reduce, 3N - 2 back, then Q's all-reduce, and 6N - 4
** the approximation. */
static size_t powersgd_ops(const sq_plan_layout *L, int r, int phase, sq_plan_op *ops)
{
    const int N = L->N, C = SQ_COLL_GRAD, A = 3 * (N - 1);
    const uint64_t rk = (uint64_t)L->psgd_rank;
    if (phase == 0 || phase == A + 1 || phase == 2 * A + 2) {
        int kind = phase == 0 ? SQ_PLAN_PSGD_PROJECT
                   : phase == A + 1 ? SQ_PLAN_PSGD_BACK : SQ_PLAN_PSGD_OUT;
        ops[0] = blank(kind, phase, C, -1,
                       phase == 0       ? "PowerSGD: P = M Q"
                       : phase == A + 1 ? "PowerSGD: Q = M^T orthonormal(P)"
                                        : "PowerSGD: the approximation P Q^T");
        if (kind == SQ_PLAN_PSGD_PROJECT) ops[0].site = SQ_SITE_POWERSGD_Q;
        ops[0].n = L->n;
        return 1;
    }
    if (phase <= A)
        return allreduce_ops(L, r, phase - 1, phase, SQ_PLAN_PSGD_P, L->psgd_rows * rk, 1, ops);
    return allreduce_ops(L, r, phase - A - 2, phase, SQ_PLAN_PSGD_Q, L->psgd_cols * rk, 0, ops);
}

static int nphases(const sq_plan_layout *L, int coll)
{
    if (coll == SQ_COLL_WEIGHT) return L->N == 1 ? 1 : L->N + 1;
    switch (L->grad_path) {
    case SQ_GRAD_RING: return 1 + 3 * (L->N - 1);
    case SQ_GRAD_A2A: return 3;
    case SQ_GRAD_TWOLEVEL: return 5;
    case SQ_GRAD_POWERSGD: return 6 * L->N - 3;
    default: return 1;
    }
}

int sq_plan_nphases(const sq_plan_layout *L, int coll) { return nphases(L, coll); }

int sq_plan_phase_moves(const sq_plan_layout *L, int coll, int phase)
{
    if (phase < 0 || phase >= nphases(L, coll)) return 0;
    if (coll == SQ_COLL_WEIGHT) return L->N > 1 && phase >= 1 && phase < L->N;
    switch (L->grad_path) {
    case SQ_GRAD_RING: return phase >= 1 && (phase - 1) % 3 == 1;
    case SQ_GRAD_A2A: return phase == 1;
    case SQ_GRAD_TWOLEVEL: return phase == 1 || phase == 3;
    case SQ_GRAD_POWERSGD: {
        const int A = 3 * (L->N - 1), t = phase <= A ? phase - 1 : phase - A - 2;
        if (phase == 0 || phase == A + 1 || phase == 2 * A + 2) return 0;
        return t >= 2 * (L->N - 1) || t % 2 == 0;
    }
    default: return 0;
    }
}

size_t sq_plan_max_phase_ops(const sq_plan_layout *L)
{
    size_t a = 2 * (size_t)L->N + 1;
    size_t t = (size_t)L->scheme.pipe * (2 * (size_t)(L->G > L->K ? L->G : L->K) + 1);
    return a > t ? a : t;
}

size_t sq_plan_phase_ops(const sq_plan_layout *L, int r, int coll, int phase, sq_plan_op *ops)
{
    if (phase < 0 || phase >= nphases(L, coll)) return 0;
    if (coll == SQ_COLL_WEIGHT) return weight_ops(L, r, phase, ops);
    switch (L->grad_path) {
    case SQ_GRAD_RING: return ring_ops(L, r, phase, ops);
    case SQ_GRAD_A2A: return a2a_ops(L, r, phase, ops);
    case SQ_GRAD_TWOLEVEL: return twolevel_ops(L, r, phase, ops);
    case SQ_GRAD_POWERSGD: return powersgd_ops(L, r, phase, ops);
    default:
        ops[0] = blank(SQ_PLAN_COPY, 0, coll, -1, "copying locally");
        ops[0].src = SQ_PLAN_GRAD, ops[0].dst = SQ_PLAN_GOUT, ops[0].n = L->padded;
        return 1;
    }
}

/* ------------------------------------------------------------------------ */
/* Whole plans                                                              */
/* ------------------------------------------------------------------------ */

struct sq_plan {
    sq_plan_layout L;
    int rank, coll;
    size_t nops;
    sq_plan_op *ops;
};

int sq_plan_build_layout(const sq_plan_layout *L, int rank, int coll, sq_plan **out,
                         sq_error *err)
{
    *out = NULL;
    if (rank < 0 || rank >= L->N)
        return sq_error_set(err, SQ_ERR_ARG, "rank %d: no such rank (0 to %d)", rank, L->N - 1);
    if (coll != SQ_COLL_WEIGHT && coll != SQ_COLL_GRAD)
        return sq_error_set(err, SQ_ERR_ARG, "collective %d: no such collective", coll);
    int np = sq_plan_nphases(L, coll);
    size_t cap = sq_plan_max_phase_ops(L), total = 0;
    sq_plan *p = calloc(1, sizeof *p);
    sq_plan_op *scratch = malloc(cap * sizeof *scratch);
    /* two passes: the ops of a rank are O(N), a phase's capacity is too */
    for (int ph = 0; scratch && ph < np; ph++) total += sq_plan_phase_ops(L, rank, coll, ph, scratch);
    if (p && scratch) p->ops = malloc((total ? total : 1) * sizeof *p->ops);
    if (!p || !scratch || !p->ops) {
        free(scratch);
        sq_plan_free(p);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory: a plan of %zu ops", total);
    }
    p->L = *L;
    p->rank = rank, p->coll = coll;
    for (int ph = 0; ph < np; ph++) {
        size_t k = sq_plan_phase_ops(L, rank, coll, ph, scratch);
        memcpy(p->ops + p->nops, scratch, k * sizeof *scratch);
        p->nops += k;
    }
    free(scratch);
    *out = p;
    return SQ_OK;
}

int sq_plan_build(const sq_world_config *cfg, int rank, int coll, sq_plan **out, sq_error *err)
{
    sq_plan_layout L;
    *out = NULL;
    int rc = sq_plan_layout_init(cfg, &L, err);
    return rc ? rc : sq_plan_build_layout(&L, rank, coll, out, err);
}

void sq_plan_free(sq_plan *p)
{
    if (!p) return;
    free(p->ops);
    free(p);
}

size_t sq_plan_nops(const sq_plan *p) { return p->nops; }
const sq_plan_op *sq_plan_op_at(const sq_plan *p, size_t i) { return i < p->nops ? &p->ops[i] : NULL; }
const sq_plan_layout *sq_plan_layout_of(const sq_plan *p) { return &p->L; }
int sq_plan_rank(const sq_plan *p) { return p->rank; }
int sq_plan_coll(const sq_plan *p) { return p->coll; }

/* ------------------------------------------------------------------------ */
/* Running one op                                                           */
/* ------------------------------------------------------------------------ */

sq_plan_msg sq_plan_message(const sq_plan_layout *L, int r, const sq_plan_op *op)
{
    sq_plan_msg m;
    memset(&m, 0, sizeof m);
    const sq_wire *wr = &L->wires[op->wire];
    int send = op->kind == SQ_PLAN_SEND;
    m.coll = op->coll, m.link = op->link, m.phase = op->phase, m.round = op->round;
    m.src = send ? r : op->peer;
    m.dst = send ? op->peer : r;
    m.wr = wr;
    m.n = op->n;
    m.code_bytes = sq_wire_code_bytes(wr, op->n);
    if (!sq_wire_raw(wr)) {
        m.scale_bytes = sq_codec_scale_bytes(&wr->codec, op->n);
        m.offset_bytes = sq_codec_offset_bytes(&wr->codec, op->n);
    }
    m.dst_buf = op->dst, m.dst_off = op->dst_off;
    return m;
}

/* A packed region's three parts copied on one backend. */
static int copy_region(sq_backend *be, const sq_wire *wr, sq_qbuf *to, const sq_qbuf *from,
                       uint64_t n)
{
    int rc = sq_backend_copy(be, to->codes, be, from->codes, (size_t)sq_wire_code_bytes(wr, n));
    if (rc == SQ_OK && !sq_wire_raw(wr)) {
        uint64_t sc = sq_codec_scale_bytes(&wr->codec, n), of = sq_codec_offset_bytes(&wr->codec, n);
        rc = sq_backend_copy(be, to->scales, be, from->scales, (size_t)sc);
        if (rc == SQ_OK && of) rc = sq_backend_copy(be, to->offsets, be, from->offsets, (size_t)of);
    }
    return rc;
}

void sq_plan_count(const sq_plan_op *op, sq_traffic *t)
{
    if (op->kind != SQ_PLAN_SEND && op->kind != SQ_PLAN_RECV) return;
    const uint64_t codes = op->code_bytes, meta = op->meta_bytes;
    sq_link_traffic *x = &t->t[op->coll][op->link];
    if (op->kind == SQ_PLAN_SEND) {
        x->sent_codes += codes;
        x->sent_meta += meta;
        x->sent_elems += op->n;
        x->sent_params += op->model_n;
        x->messages++;
    } else {
        x->recv_codes += codes;
        x->recv_meta += meta;
    }
}

static int backend_fail(int r, const sq_plan_op *op, sq_backend *be, int rc, sq_error *err)
{
    const char *why = sq_backend_error(be);
    return sq_error_set(err, rc, "rank %d (%s): %s: %s%s%s", r, sq_backend_name(be), op->what,
                        sq_strerror(rc), *why ? ": " : "", why);
}

/* Whether op rebuilds bf16 weights (weight.recon=bf16): the weight
** all-gather over a quantized wire. The sender quantizes its master
** rounded to bf16 (or the bf16 difference to w-hat), the receivers keep
** bf16(D(q)) (or bf16(bf16(D(q)) + w-hat)): docs/schemes.md. */
static int bf16_weights(const sq_plan_layout *L, const sq_plan_op *op, const sq_wire *wr)
{
    return op->coll == SQ_COLL_WEIGHT && wr && !sq_wire_raw(wr) &&
           L->scheme.weight_recon == SQ_RECON_BF16;
}

/* Error feedback's ENCODE (plan.h): e := x + e, q = E(e), e := e - D(q),
** the decoding a chunk at a time through TMP. */
static int encode_feedback(sq_backend *be, const sq_wire *wr, const sq_plan_op *op,
                           const sq_rng_key *key, sq_plan_mem *mem, sq_qbuf *q)
{
    float *e = mem->f[op->ref] + op->ref_off, *tmp = mem->f[SQ_PLAN_TMP];
    int rc = sq_backend_add(be, mem->f[op->src] + op->src_off, e, op->n, e);
    if (rc == SQ_OK) rc = sq_wire_encode(be, wr, e, op->n, key, q);
    for (int j = 0; j < op->k && rc == SQ_OK; j++) {
        const uint64_t at = (uint64_t)j * op->stride;
        sq_qbuf part = sq_wire_at(wr, q, at);
        rc = sq_wire_decode(be, wr, &part, op->stride, tmp);
        if (rc == SQ_OK) rc = sq_backend_sub(be, e + at, tmp, op->stride, e + at);
    }
    return rc;
}

/* Error feedback's SUM_REQUANT (plan.h): TMP := the fp32 sum of the
** chunks, e := TMP + e, q = E_out(e), e := e - D_out(q). */
static int requant_feedback(sq_backend *be, const sq_wire *in, const sq_qbuf *chunks,
                            const sq_plan_op *op, const sq_wire *wout, const sq_rng_key *key,
                            sq_plan_mem *mem)
{
    float *e = mem->f[op->ref] + op->ref_off, *tmp = mem->f[SQ_PLAN_TMP];
    int rc = sq_wire_sum(be, in, chunks, op->k, op->n, 0, tmp, mem->f[SQ_PLAN_TMP2]);
    if (rc == SQ_OK) rc = sq_backend_add(be, tmp, e, op->n, e);
    if (rc == SQ_OK) rc = sq_wire_encode(be, wout, e, op->n, key, &mem->q[op->dst]);
    if (rc == SQ_OK) rc = sq_wire_decode(be, wout, &mem->q[op->dst], op->n, tmp);
    return rc == SQ_OK ? sq_backend_sub(be, e, tmp, op->n, e) : rc;
}

int sq_plan_exec_op(const sq_plan_layout *L, int r, const sq_plan_op *op, uint32_t step,
                    sq_plan_mem *mem, const sq_transport *tr, sq_traffic *traffic, sq_error *err)
{
    int rc = SQ_OK;
    if (op->kind == SQ_PLAN_SEND || op->kind == SQ_PLAN_RECV) {
        if (traffic) sq_plan_count(op, traffic);
        if (!tr) return SQ_OK;
        sq_plan_msg m = sq_plan_message(L, r, op);
        if (op->kind == SQ_PLAN_SEND) {
            sq_qbuf from = mem ? sq_wire_at(m.wr, &mem->q[op->src], op->src_off) : (sq_qbuf){0};
            return tr->send(tr->ctx, &m, mem ? &from : NULL, err);
        }
        sq_qbuf to = mem ? sq_wire_at(m.wr, &mem->q[op->dst], op->dst_off) : (sq_qbuf){0};
        return tr->recv(tr->ctx, &m, mem ? &to : NULL, err);
    }
    if (!mem) return SQ_OK;
    sq_backend *be = mem->be;
    const sq_wire *wr = op->wire >= 0 ? &L->wires[op->wire] : NULL;
    sq_rng_key key = sq_plan_rng_key(L, step, r, op->site);
    const sq_rng_key *kp = op->site >= 0 ? &key : NULL;
    switch (op->kind) {
    case SQ_PLAN_COPY:
        rc = sq_backend_copy(be, mem->f[op->dst] + op->dst_off, be, mem->f[op->src] + op->src_off,
                             (size_t)op->n * sizeof(float));
        break;
    case SQ_PLAN_ENCODE: {
        sq_qbuf q = sq_wire_at(wr, &mem->q[op->dst], op->dst_off);
        if (op->ref >= 0)
            rc = encode_feedback(be, wr, op, kp, mem, &q);
        else if (bf16_weights(L, op, wr))
            rc = sq_backend_quantize_bf16(be, &wr->codec, mem->f[op->src] + op->src_off, op->n,
                                          kp, &q);
        else
            rc = sq_wire_encode(be, wr, mem->f[op->src] + op->src_off, op->n, kp, &q);
        break;
    }
    case SQ_PLAN_ENCODE_DIFF: {
        sq_qbuf q = sq_wire_at(wr, &mem->q[op->dst], op->dst_off);
        rc = (bf16_weights(L, op, wr) ? sq_backend_quantize_diff_bf16 : sq_backend_quantize_diff)(
            be, &wr->codec, mem->f[op->src] + op->src_off, mem->f[op->ref] + op->ref_off, op->n,
            kp, &q);
        break;
    }
    case SQ_PLAN_SWIZZLE:
        for (uint64_t b = 0; b < (uint64_t)op->k && rc == SQ_OK; b++) {
            sq_qbuf from = sq_wire_at(wr, &mem->q[op->src], b * op->n);
            sq_qbuf to = sq_wire_at(wr, &mem->q[op->dst], sq_plan_swizzle_index(L, b) * op->n);
            rc = copy_region(be, wr, &to, &from, op->n);
        }
        break;
    case SQ_PLAN_LOCAL: {
        sq_qbuf from = sq_wire_at(wr, &mem->q[op->src], op->src_off);
        sq_qbuf to = sq_wire_at(wr, &mem->q[op->dst], op->dst_off);
        rc = copy_region(be, wr, &to, &from, op->n);
        break;
    }
    case SQ_PLAN_DECODE:
        if (bf16_weights(L, op, wr))
            rc = sq_backend_dequantize_bf16(be, &wr->codec, &mem->q[op->src], op->n,
                                            mem->f[op->dst]);
        else
            rc = sq_wire_decode(be, wr, &mem->q[op->src], op->n, mem->f[op->dst]);
        break;
    case SQ_PLAN_DECODE_ADD:
        rc = (bf16_weights(L, op, wr) ? sq_backend_dequantize_add_bf16 : sq_backend_dequantize_add)(
            be, &wr->codec, &mem->q[op->src], mem->f[op->ref], op->n, mem->f[op->dst]);
        break;
    case SQ_PLAN_ADD: {
        sq_qbuf q = sq_wire_at(wr, &mem->q[op->src], op->src_off);
        const float *partial = (const float *)q.codes;
        if (sq_wire_raw(wr) && wr->bits == 16) {
            rc = sq_backend_from_bf16(be, (const uint16_t *)q.codes, op->n, mem->f[SQ_PLAN_TMP]);
            if (rc) return backend_fail(r, op, be, rc, err);
            partial = mem->f[SQ_PLAN_TMP];
        }
        rc = sq_backend_add(be, partial, mem->f[op->ref] + op->ref_off, op->n, mem->f[op->dst]);
        break;
    }
    case SQ_PLAN_SUM:
    case SQ_PLAN_SUM_REQUANT: {
        sq_qbuf one[16], *chunks = op->k <= 16 ? one : malloc((size_t)op->k * sizeof *chunks);
        if (!chunks) return sq_error_set(err, SQ_ERR_NOMEM, "rank %d: %s: out of memory", r, op->what);
        for (int j = 0; j < op->k; j++)
            chunks[j] = sq_wire_at(wr, &mem->q[op->src], op->src_off + (uint64_t)j * op->stride);
        /* grad.dtype=fp16: decoded chunks and partial sums in fp16 (qgZ) */
        const int f16 = op->coll == SQ_COLL_GRAD && L->scheme.grad_dtype == SQ_GRAD_FP16;
        if (op->kind == SQ_PLAN_SUM)
            rc = sq_wire_sum(be, wr, chunks, op->k, op->n, f16, mem->f[op->dst],
                             mem->f[SQ_PLAN_TMP]);
        else if (op->ref >= 0)
            rc = requant_feedback(be, wr, chunks, op, &L->wires[op->wire_out], kp, mem);
        else
            rc = sq_wire_sum_requant(be, wr, chunks, op->k, op->n, f16, &L->wires[op->wire_out],
                                     kp, &mem->q[op->dst], mem->f[SQ_PLAN_TMP],
                                     mem->f[SQ_PLAN_TMP2]);
        if (chunks != one) free(chunks);
        break;
    }
    case SQ_PLAN_ACCUM: {
        sq_qbuf a = sq_wire_at(wr, &mem->q[op->src], op->src_off);
        sq_qbuf x = sq_wire_at(wr, &mem->q[op->dst], op->dst_off);
        rc = sq_backend_add(be, (const float *)a.codes, (const float *)x.codes, op->n,
                            (float *)x.codes);
        break;
    }
    case SQ_PLAN_PSGD_PROJECT:
    case SQ_PLAN_PSGD_BACK:
    case SQ_PLAN_PSGD_OUT:
        return sq_psgd_exec(L, r, op, step, mem, err);
    default:
        return sq_error_set(err, SQ_ERR_ARG, "rank %d: op kind %d: no such op", r, (int)op->kind);
    }
    return rc ? backend_fail(r, op, be, rc, err) : SQ_OK;
}
