/*
** cost.c -- the iteration time of sharded data-parallel training under a
** quantization scheme (cost.h; docs/cost-model.md).
**
** The collectives are priced with the alpha-beta model NCCL's own tuner uses:
** a latency per step plus bytes over the bottleneck link's bandwidth. The
** bytes are not a formula of ours: a dry world of the data-parallel group's
** topology runs the scheme's collectives and counts what each worker sends
** on each link level, metadata included, exactly as the harness does.
*/
#include "shardq/cost.h"

#include "shardq/codec.h"
#include "shardq/layout.h"
#include "shardq/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Megatron pads the vocabulary so that every tensor-parallel rank holds a
** multiple of 128 rows of the embedding. */
static uint64_t padded_vocab(const sq_cost_model_shape *m, int tp)
{
    uint64_t unit = 128u * (uint64_t)tp;
    return ((uint64_t)m->vocab + unit - 1) / unit * unit;
}

/* One transformer layer's parameters on one tensor-parallel rank: the four
** matrices and their column-split biases are divided by tp; the two
** LayerNorms and the row-split biases (attention and MLP output) are not. */
static uint64_t layer_params(const sq_cost_model_shape *m, int tp)
{
    uint64_t h = (uint64_t)m->hidden;
    return 12 * h * h / (uint64_t)tp + 7 * h / (uint64_t)tp + 6 * h;
}

uint64_t sq_cost_model_params(const sq_cost_model_shape *m, int tp)
{
    uint64_t h = (uint64_t)m->hidden;
    return (uint64_t)m->layers * layer_params(m, 1) + padded_vocab(m, tp) * h +
           (uint64_t)m->seq * h + 2 * h;
}

uint64_t sq_cost_model_params_per_rank(const sq_cost_model_shape *m, int tp, int pp)
{
    uint64_t h = (uint64_t)m->hidden;
    uint64_t layers = (uint64_t)(m->layers / pp) * layer_params(m, tp);
    uint64_t words = padded_vocab(m, tp) * h / (uint64_t)tp;
    /* The first stage holds the embeddings (the position table whole on every
    ** TP rank); with one stage it also holds the final LayerNorm; with more,
    ** the last stage holds that and its own copy of the tied word embedding,
    ** which is never larger than the first stage's share. */
    uint64_t first = layers + words + (uint64_t)m->seq * h;
    return pp == 1 ? first + 2 * h : first;
}

double sq_cost_model_flops_per_seq(const sq_cost_model_shape *m)
{
    /* Megatron's count for one sequence, forward and backward, without
    ** recomputation: 72 s L h^2 (1 + s/6h + V/12Lh), that is the matrix
    ** products (24 s h^2 per layer forward), the attention scores (4 s^2 h)
    ** and the logits (2 s h V), times 3 for the backward pass. */
    double s = m->seq, L = m->layers, h = m->hidden, V = (double)padded_vocab(m, 1);
    return 72.0 * s * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h));
}

static int positive(double x) { return isfinite(x) && x > 0; }

int sq_cost_platform_validate(const sq_cost_platform *p, sq_error *err)
{
    const char *bad = NULL;
    if (p->nodes < 1) bad = "nodes";
    else if (p->gpus_per_node < 1) bad = "gpus_per_node";
    else if (!positive(p->achieved_flops)) bad = "achieved_tflops";
    else if (!positive(p->hbm_bw)) bad = "hbm_gb_s";
    else if (!positive(p->quant_bw)) bad = "quant_gb_s";
    else if (!positive(p->intra_bw)) bad = "intra bandwidth_gb_s";
    else if (!(p->intra_latency >= 0) || !isfinite(p->intra_latency)) bad = "intra latency_us";
    else if (p->nics_per_node < 1) bad = "inter nics_per_node";
    else if (!positive(p->nic_bw)) bad = "inter nic_gb_s";
    else if (!positive(p->net_efficiency) || p->net_efficiency > 1) bad = "inter efficiency";
    else if (!(p->communicator_bw >= 0) || !isfinite(p->communicator_bw))
        bad = "inter communicator_gb_s";
    else if (!(p->inter_latency >= 0) || !isfinite(p->inter_latency)) bad = "inter latency_us";
    if (!bad) return SQ_OK;
    return sq_error_set(err, SQ_ERR_ARG, "platform %s: %s must be a positive number%s", p->name,
                        bad, strcmp(bad, "inter efficiency") == 0 ? " no larger than 1" : "");
}

int sq_cost_model_shape_validate(const sq_cost_model_shape *m, sq_error *err)
{
    const char *bad = m->layers < 1 ? "layers" : m->hidden < 1 ? "hidden" : m->heads < 1 ? "heads"
                      : m->vocab < 1 ? "vocab" : m->seq < 1 ? "seq" : NULL;
    if (bad)
        return sq_error_set(err, SQ_ERR_ARG, "model %s: %s must be a positive integer", m->name,
                            bad);
    if (m->hidden % m->heads)
        return sq_error_set(err, SQ_ERR_ARG, "model %s: hidden %d is not a multiple of heads %d",
                            m->name, m->hidden, m->heads);
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Quantization kernels, as a GPU runs them                                  */
/* ------------------------------------------------------------------------ */
/*
** A kernel reads and writes memory and does little else, so its time is its
** bytes over quant_gb_s. Values are fp32 (4 bytes), the world's arithmetic;
** a quantized chunk is its codes and metadata. Per kernel over n elements:
**   encode         reads 4n, writes c(n)
**   encode a diff  reads 8n (master and w-hat), writes c(n)
**   decode         reads c(n), writes 4n
**   decode-add     reads c(n) + 4n (w-hat), writes 4n
**   sum of k       reads k c(n), writes 4n (dequantized and summed in registers)
**   sum-requant    reads k c_in(n), writes c_out(n)
** The swizzle of the two-level path is fused into its quantization (ZeRO++
** and SDP4Bit fuse it), so it moves no byte of its own; the Hadamard
** transform is fused too (SDP4Bit, Table 5).
*/
static double wire_bytes(const sq_wire *w, uint64_t n)
{
    return (double)(sq_wire_code_bytes(w, n) + sq_wire_meta_bytes(w, n));
}

static void kernel_encode(sq_cost_kernels *k, int c, const sq_wire *w, uint64_t n, int diff)
{
    if (sq_wire_raw(w)) return;
    k->encoded[c] += n;
    k->bytes[c] += (diff ? 8.0 : 4.0) * (double)n + wire_bytes(w, n);
}

static void kernel_decode(sq_cost_kernels *k, int c, const sq_wire *w, uint64_t n, int chunks,
                          int add)
{
    if (sq_wire_raw(w)) return;
    k->decoded[c] += (uint64_t)chunks * n;
    k->bytes[c] += chunks * wire_bytes(w, n) + (add ? 8.0 : 4.0) * (double)n;
}

int sq_cost_quant_kernels(const sq_topo *topo, const sq_scheme *s, uint64_t elements,
                          sq_cost_kernels *out, sq_error *err)
{
    memset(out, 0, sizeof *out);
    sq_world_config cfg = {.topo = *topo, .scheme = *s, .elements = elements, .seed = 1, .dry = 1};
    sq_plan_layout L;
    int rc = sq_plan_layout_init(&cfg, &L, err);
    if (rc != SQ_OK) return rc;
    const uint64_t N = (uint64_t)L.N, P = L.padded, S = L.shard, Q = L.quarter;
    const int W = SQ_COLL_WEIGHT, C = SQ_COLL_GRAD;
    if (N == 1) return SQ_OK; /* a local copy, no wire */
    /* Weights: the own shard encoded once, the whole gathered buffer decoded
    ** once; a ring's forwarded chunks are only moved. */
    const sq_wire *ww = &L.wires[SQ_PLAN_WIRE_WEIGHT];
    int diff = s->weight_mode == SQ_WEIGHT_DIFF;
    kernel_encode(out, W, ww, S, diff);
    kernel_decode(out, W, ww, P, 1, diff);
    /* Gradients */
    const sq_wire *wi = &L.wires[SQ_PLAN_WIRE_INTRA], *wo = &L.wires[SQ_PLAN_WIRE_INTER];
    const sq_wire *single = L.single_wire == SQ_PLAN_WIRE_INTER ? wo : wi;
    switch (L.grad_path) {
    case SQ_GRAD_A2A: /* encode all of it, sum the N chunks of the own partition */
        kernel_encode(out, C, single, P, 0);
        kernel_decode(out, C, single, S, (int)N, 0);
        break;
    case SQ_GRAD_TWOLEVEL: {
        /* encode all of it; sum the G chunks of the node's quarter and
        ** requantize it for the second hop; sum the K chunks of the partition */
        int G = L.G, K = L.K;
        kernel_encode(out, C, wi, P, 0);
        if (!sq_wire_raw(wi) || !sq_wire_raw(wo)) {
            if (!sq_wire_raw(wi)) out->decoded[C] += (uint64_t)G * Q;
            if (!sq_wire_raw(wo)) out->encoded[C] += Q;
            out->bytes[C] += G * wire_bytes(wi, Q) + wire_bytes(wo, Q);
        }
        kernel_decode(out, C, wo, S, K, 0);
        break;
    }
    case SQ_GRAD_POWERSGD: {
        /* PowerSGD's passes over the matrix (docs/schemes.md): M = grad
        ** (+ residual) written and read for P = M Q, read for Q = M^T P;
        ** the own partition of P Q^T written, and with error feedback the
        ** residual M - P Q^T / N read and written over the whole tensor.
        ** The factors, (rows + cols) rank values, are not counted. */
        const uint64_t n = L.n, mc = L.psgd_rows * L.psgd_cols;
        const int ef = s->psgd_ef;
        out->encoded[C] += n;
        out->decoded[C] += S + (ef ? n : 0);
        out->bytes[C] += 4.0 * (double)n * (ef ? 2 : 1) + 12.0 * (double)mc + 4.0 * (double)S +
                         (ef ? 8.0 * (double)n : 0);
        break;
    }
    default: break; /* the ring's partial sums are unquantized; none, no work */
    }
    return SQ_OK;
}

/* Bytes one DP group moves, from a dry world of its topology, and the
** kernels its GPUs run. */
typedef struct group_bytes {
    double intra_per_gpu[SQ_NCOLL]; /* the busiest GPU's NVLink sends */
    double inter_per_node[SQ_NCOLL]; /* the busiest node's network sends */
    sq_cost_kernels kernels;         /* one GPU's quantization kernels */
    sq_grad_mode grad_path;
    int passes;                      /* PowerSGD: ring passes of latency of the gradients */
} group_bytes;

/* One kind of tensor of a rank: `count` tensors of shape rows x cols
** (cols 0: a vector of rows elements). */
typedef struct tensor_kind {
    uint64_t rows, cols, count;
} tensor_kind;
#define MAX_TENSOR_KINDS 10

/* The tensors of one rank in Megatron's layout, as sq_cost_model_params_per_rank
** counts them: per layer QKV (3h/tp x h), the attention's output (h x h/tp),
** the MLP's (4h/tp x h, h x 4h/tp), their column-split biases and six vectors
** of h (two LayerNorms, two row biases); the word embedding (V'/tp x h) and
** the positions (s x h) on the first stage; the final LayerNorm for one
** stage. Returns the number of kinds, 0 if the shapes do not divide. */
static size_t rank_tensors(const sq_cost_model_shape *m, int tp, int pp, tensor_kind *t)
{
    const uint64_t h = (uint64_t)m->hidden, T = (uint64_t)tp, L = (uint64_t)(m->layers / pp);
    if (h % T) return 0;
    size_t k = 0;
    t[k++] = (tensor_kind){3 * h / T, h, L};
    t[k++] = (tensor_kind){h, h / T, L};
    t[k++] = (tensor_kind){4 * h / T, h, L};
    t[k++] = (tensor_kind){h, 4 * h / T, L};
    t[k++] = (tensor_kind){3 * h / T, 0, L};
    t[k++] = (tensor_kind){4 * h / T, 0, L};
    t[k++] = (tensor_kind){h, 0, 6 * L};
    t[k++] = (tensor_kind){padded_vocab(m, tp) / T, h, 1};
    t[k++] = (tensor_kind){(uint64_t)m->seq, h, 1};
    if (pp == 1) t[k++] = (tensor_kind){h, 0, 2};
    uint64_t sum = 0;
    for (size_t i = 0; i < k; i++) sum += t[i].rows * (t[i].cols ? t[i].cols : 1) * t[i].count;
    return sum == sq_cost_model_params_per_rank(m, tp, pp) ? k : 0;
}

/* The step whose bytes count: PowerSGD's first compressed one. */
static uint32_t counted_step(const sq_scheme *s)
{
    return s->grad_mode == SQ_GRAD_POWERSGD && s->psgd_start > 1 ? s->psgd_start : 1;
}

/* The busiest GPU's NVLink sends and the busiest node's network sends of
** collective c, from per-worker sends sent[r * SQ_NLINK + link]. */
static void busiest(const sq_topo *topo, const double *sent, int c, group_bytes *gb)
{
    gb->intra_per_gpu[c] = gb->inter_per_node[c] = 0;
    for (int node = 0; node < topo->nodes; node++) {
        double inter = 0;
        for (int l = 0; l < topo->per_node; l++) {
            const double *x = sent + (size_t)(node * topo->per_node + l) * SQ_NLINK;
            if (x[SQ_LINK_INTRA] > gb->intra_per_gpu[c]) gb->intra_per_gpu[c] = x[SQ_LINK_INTRA];
            inter += x[SQ_LINK_INTER];
        }
        if (inter > gb->inter_per_node[c]) gb->inter_per_node[c] = inter;
    }
}

static void add_sent(const sq_world *w, int c, double times, double *sent)
{
    for (int r = 0; r < sq_world_workers(w); r++)
        for (int l = 0; l < SQ_NLINK; l++) {
            const sq_link_traffic *x = &sq_world_traffic(w, r)->t[c][l];
            sent[(size_t)r * SQ_NLINK + l] += times * (double)(x->sent_codes + x->sent_meta);
        }
}

/* PowerSGD per tensor (layout=param): the gradient bytes and kernels of a
** dry world of each kind of tensor, times their count. */
static int powersgd_tensors(const sq_topo *topo, const sq_scheme *s, const tensor_kind *t,
                            size_t nk, group_bytes *gb, sq_error *err)
{
    const int N = sq_topo_workers(topo);
    double *sent = calloc((size_t)N * SQ_NLINK, sizeof *sent);
    if (!sent) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    gb->kernels.encoded[SQ_COLL_GRAD] = gb->kernels.decoded[SQ_COLL_GRAD] = 0;
    gb->kernels.bytes[SQ_COLL_GRAD] = 0;
    int rc = SQ_OK, compressed = 0, plain = 0;
    for (size_t i = 0; i < nk && rc == SQ_OK; i++) {
        const uint64_t shape[2] = {t[i].rows, t[i].cols};
        sq_world_config cfg = {.topo = *topo, .elements = t[i].rows * (t[i].cols ? t[i].cols : 1),
                               .seed = 1, .dry = 1};
        sq_error werr;
        sq_cost_kernels k;
        sq_world *w = NULL;
        if ((rc = sq_scheme_for_tensor(s, topo, shape, t[i].cols ? 2 : 1, &cfg.scheme, &werr)) ||
            (rc = sq_cost_quant_kernels(topo, &cfg.scheme, cfg.elements, &k, &werr)) ||
            (rc = sq_world_open(&cfg, &w, &werr))) {
            sq_error_set(err, rc, "%s", sq_error_message(&werr));
            break;
        }
        if ((rc = sq_world_reduce_grads(w, counted_step(s)))) {
            sq_error_set(err, rc, "%s", sq_world_error(w));
        } else {
            add_sent(w, SQ_COLL_GRAD, (double)t[i].count, sent);
            gb->kernels.encoded[SQ_COLL_GRAD] += t[i].count * k.encoded[SQ_COLL_GRAD];
            gb->kernels.decoded[SQ_COLL_GRAD] += t[i].count * k.decoded[SQ_COLL_GRAD];
            gb->kernels.bytes[SQ_COLL_GRAD] += (double)t[i].count * k.bytes[SQ_COLL_GRAD];
            if (sq_world_grad_path(w) == SQ_GRAD_POWERSGD) compressed = 1;
            else plain = 1;
        }
        sq_world_close(w);
    }
    if (rc == SQ_OK) {
        busiest(topo, sent, SQ_COLL_GRAD, gb);
        gb->grad_path = compressed ? SQ_GRAD_POWERSGD : N > 1 ? SQ_GRAD_RING : SQ_GRAD_NONE;
        gb->passes = (compressed ? 4 : 0) + (plain ? 1 : 0);
    }
    free(sent);
    return rc;
}

static int count_group_bytes(const sq_topo *topo, const sq_scheme *s, uint64_t elements,
                             uint64_t hidden, const tensor_kind *tensors, size_t nk,
                             group_bytes *gb, sq_error *err)
{
    sq_world_config cfg = {.topo = *topo, .scheme = *s, .elements = elements, .seed = 1, .dry = 1};
    sq_world *w;
    sq_error werr;
    int rc;
    if (sq_scheme_per_tensor(s)) {
        /* Per-tensor rules (DeepSpeed's qgZ, qwZ): the rank's parameters as
        ** one matrix of `hidden` columns, rows rounded up to a multiple of
        ** 2N, so that qgZ's groups are `hidden` elements, as for every
        ** weight matrix of a transformer (numel / max(rows, cols) is the
        ** smaller side), and its one-node fallback still applies. */
        const uint64_t N2 = 2 * (uint64_t)sq_topo_workers(topo);
        uint64_t rows = (elements + hidden - 1) / hidden;
        rows = (rows + N2 - 1) / N2 * N2;
        const uint64_t shape[2] = {rows, hidden};
        if ((rc = sq_scheme_for_tensor(s, topo, shape, 2, &cfg.scheme, &werr)))
            return sq_error_set(err, rc, "%s", sq_error_message(&werr));
    }
    memset(gb, 0, sizeof *gb);
    if ((rc = sq_cost_quant_kernels(topo, &cfg.scheme, elements, &gb->kernels, &werr)))
        return sq_error_set(err, rc < 0 ? rc : SQ_ERR_ARG, "%s", sq_error_message(&werr));
    rc = sq_world_open(&cfg, &w, &werr);
    if (rc != SQ_OK) return sq_error_set(err, rc, "%s", sq_error_message(&werr));
    rc = sq_world_reduce_grads(w, counted_step(s));
    if (rc == SQ_OK) rc = sq_world_gather_weights(w, 1);
    if (rc != SQ_OK) {
        sq_error_set(err, rc < 0 ? rc : SQ_ERR_ARG, "%s", sq_world_error(w));
        sq_world_close(w);
        return rc < 0 ? rc : SQ_ERR_ARG;
    }
    gb->grad_path = sq_world_grad_path(w);
    gb->passes = gb->grad_path == SQ_GRAD_POWERSGD ? 4 : 1;
    const int N = sq_topo_workers(topo);
    double *sent = calloc((size_t)N * SQ_NLINK, sizeof *sent);
    if (!sent) {
        sq_world_close(w);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    }
    for (int c = 0; c < SQ_NCOLL; c++) {
        memset(sent, 0, (size_t)N * SQ_NLINK * sizeof *sent);
        add_sent(w, c, 1.0, sent);
        busiest(topo, sent, c, gb);
    }
    free(sent);
    sq_world_close(w);
    /* PowerSGD in a world per tensor: its bytes are the tensors' own */
    if (nk && s->grad_mode == SQ_GRAD_POWERSGD && s->layout == SQ_LAYOUT_PARAM)
        return powersgd_tensors(topo, s, tensors, nk, gb, err);
    return SQ_OK;
}

/* Seconds of one collective of a DP group spanning `nodes` nodes with g GPUs
** on each, k groups per node sharing its cards. */
typedef struct layout {
    int nodes, g, k;
} layout;

/* The network bandwidth one group's traffic gets through a node's cards when
** it runs as `comms` communicators at once: the cards' share of this group,
** and no more than its communicators can drive. */
static double group_net_bw(const sq_cost_platform *p, const layout *lay, int comms)
{
    double share = p->net_efficiency * p->nics_per_node * p->nic_bw / lay->k;
    if (p->communicator_bw > 0 && comms * p->communicator_bw < share)
        return comms * p->communicator_bw;
    return share;
}

/* The latency of one ring pass over all p = nodes x g GPUs. */
static double ring_latency(const sq_cost_platform *p, const layout *lay)
{
    int ranks = lay->nodes * lay->g;
    return ranks == 1 ? 0 : (ranks - lay->nodes) * p->intra_latency + (lay->nodes - 1) * p->inter_latency;
}

/* A ring (or a one-level all-to-all) over all p = nodes x g GPUs: p - 1
** steps, nodes - 1 of which cross the network; the transfer is limited by the
** slower of the busiest GPU's NVLink and the node's share of the network. */
static double single_level_time(const sq_cost_platform *p, const layout *lay, double intra_bytes,
                                double inter_bytes)
{
    int ranks = lay->nodes * lay->g;
    if (ranks == 1) return 0;
    double lat = (ranks - lay->nodes) * p->intra_latency + (lay->nodes - 1) * p->inter_latency;
    double t_intra = intra_bytes / p->intra_bw;
    double t_inter = inter_bytes / group_net_bw(p, lay, 1);
    return lat + (t_intra > t_inter ? t_intra : t_inter);
}

/* SDP4Bit's two-step all-to-all (ZeRO++ qgZ): an all-to-all inside the node,
** then one across nodes on each of the g rails (g communicators at once);
** with `pipe` slices the two overlap but for one slice of the shorter. */
static double two_level_time(const sq_cost_platform *p, const layout *lay, double intra_bytes,
                             double inter_bytes, int pipe)
{
    double t_intra = (lay->g - 1) * p->intra_latency + intra_bytes / p->intra_bw;
    double t_inter = (lay->nodes - 1) * p->inter_latency + inter_bytes / group_net_bw(p, lay, lay->g);
    if (pipe <= 1) return t_intra + t_inter;
    double hi = t_intra > t_inter ? t_intra : t_inter, lo = t_intra + t_inter - hi;
    return hi + lo / pipe;
}

/* A ring all-reduce of S bytes among n GPUs of one node (tensor parallelism). */
static double intra_allreduce(const sq_cost_platform *p, int n, double bytes)
{
    if (n <= 1) return 0;
    return 2.0 * (n - 1) * p->intra_latency + 2.0 * (n - 1) / n * bytes / p->intra_bw;
}

/* What stays exposed of `work` seconds with `window` seconds of compute to
** hide behind, when a fraction `first` of it can never hide: never more
** than the work itself, so hiding never slows a step. */
static double exposed(double work, double window, double first)
{
    double e = fmax(work - window, work * fmin(first, 1.0));
    return fmin(fmax(e, 0.0), work);
}

/* Splits an exposed time between a collective and its kernels in
** proportion to their work. */
static void split(double exp, double comm, double kern, double *comm_out, double *kern_out)
{
    double total = comm + kern;
    *comm_out = total > 0 ? exp * comm / total : 0;
    *kern_out = total > 0 ? exp * kern / total : 0;
}

int sq_cost_iteration(const sq_cost_platform *p, const sq_cost_model_shape *m,
                      const sq_cost_parallel *par, const sq_scheme *s, sq_cost_result *out,
                      sq_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = sq_cost_platform_validate(p, err);
    if (rc == SQ_OK) rc = sq_cost_model_shape_validate(m, err);
    if (rc != SQ_OK) return rc;
    int G = p->gpus_per_node;
    if (par->tp < 1 || par->pp < 1 || par->micro_batch < 1 || par->accum < 1 || par->gpus < 1)
        return sq_error_set(err, SQ_ERR_ARG,
                            "gpus, tp, pp, micro-batch and accumulation must be at least 1");
    if (par->gpus % (par->tp * par->pp))
        return sq_error_set(err, SQ_ERR_ARG,
                            "%d GPUs do not divide into tensor x pipeline groups of %d x %d",
                            par->gpus, par->tp, par->pp);
    if (par->tp > G || G % par->tp)
        return sq_error_set(err, SQ_ERR_ARG, "tensor parallelism %d does not divide the %d GPUs "
                            "of a node of %s (tensor parallelism across nodes is not modelled)",
                            par->tp, G, p->name);
    if (m->layers % par->pp)
        return sq_error_set(err, SQ_ERR_ARG,
                            "model %s: %d layers do not divide into %d pipeline stages", m->name,
                            m->layers, par->pp);
    if (m->heads % par->tp)
        return sq_error_set(err, SQ_ERR_ARG,
                            "model %s: %d heads do not divide among %d tensor-parallel ranks",
                            m->name, m->heads, par->tp);
    int gpus_node = par->gpus < G ? par->gpus : G;
    if (par->gpus % gpus_node)
        return sq_error_set(err, SQ_ERR_ARG, "%d GPUs are not whole nodes of %d GPUs", par->gpus,
                            G);
    int dp = par->gpus / (par->tp * par->pp);
    int g = gpus_node / par->tp < dp ? gpus_node / par->tp : dp;
    if (dp % g)
        return sq_error_set(err, SQ_ERR_ARG, "data-parallel degree %d does not divide into nodes "
                            "of %d GPUs of one group", dp, g);
    layout lay = {.nodes = dp / g, .g = g, .k = gpus_node / g};
    out->dp = dp, out->dp_nodes = lay.nodes, out->dp_per_node = g, out->groups_per_node = lay.k;
    out->params = sq_cost_model_params(m, par->tp);
    out->params_per_rank = sq_cost_model_params_per_rank(m, par->tp, par->pp);

    /* Forward and backward: the matrix products of one stage's share at the
    ** achieved FLOP/s, four tensor-parallel all-reduces of the activations
    ** per layer (two forward, two backward), and the pipeline's fill and
    ** drain: m micro-batches take m + pp - 1 slots. */
    double seq_flops = sq_cost_model_flops_per_seq(m);
    double slot_compute = seq_flops * par->micro_batch / ((double)par->tp * par->pp) /
                          p->achieved_flops;
    double act_bytes = 2.0 * par->micro_batch * m->seq * m->hidden; /* bf16 */
    double slot_tp = 4.0 * (m->layers / par->pp) * intra_allreduce(p, par->tp, act_bytes);
    double slot = slot_compute + slot_tp;
    out->compute = par->accum * slot_compute;
    out->tp = par->accum * slot_tp;
    out->bubble = (par->pp - 1) * slot;

    if (par->system != SQ_COST_MEGATRON && par->system != SQ_COST_ZERO3)
        return sq_error_set(err, SQ_ERR_ARG, "unknown training system %d", par->system);
    if (par->hpz && par->system != SQ_COST_ZERO3)
        return sq_error_set(err, SQ_ERR_ARG, "hpZ is a ZeRO-3 partition: it needs the zero3 "
                            "system");
    const int zero3 = par->system == SQ_COST_ZERO3;
    /* Collectives of one step: Megatron gathers the weights once (after the
    ** optimizer step) and reduce-scatters the gradients once; ZeRO-3 frees
    ** the gathered weights after each use, so every micro-batch gathers them
    ** for its forward and again for its backward, and reduce-scatters its
    ** gradients in its backward. */
    double ag_fwd = 0, ag_bwd = 0, rs = 0, k_fwd = 0, k_bwd = 0, k_rs = 0;
    if (dp > 1) {
        group_bytes gb;
        sq_topo topo = {.nodes = lay.nodes, .per_node = g};
        tensor_kind tensors[MAX_TENSOR_KINDS];
        size_t nk = rank_tensors(m, par->tp, par->pp, tensors);
        rc = count_group_bytes(&topo, s, out->params_per_rank, (uint64_t)m->hidden, tensors, nk,
                               &gb, err);
        if (rc != SQ_OK) return rc;
        out->grad_path = gb.grad_path;
        ag_fwd = single_level_time(p, &lay, gb.intra_per_gpu[SQ_COLL_WEIGHT],
                                   gb.inter_per_node[SQ_COLL_WEIGHT]);
        if (gb.grad_path == SQ_GRAD_TWOLEVEL)
            rs = two_level_time(p, &lay, gb.intra_per_gpu[SQ_COLL_GRAD],
                                gb.inter_per_node[SQ_COLL_GRAD], s->pipe);
        else
            rs = single_level_time(p, &lay, gb.intra_per_gpu[SQ_COLL_GRAD],
                                   gb.inter_per_node[SQ_COLL_GRAD]) +
                 (gb.passes - 1) * ring_latency(p, &lay);
        k_fwd = gb.kernels.bytes[SQ_COLL_WEIGHT] / p->quant_bw;
        k_rs = gb.kernels.bytes[SQ_COLL_GRAD] / p->quant_bw;
        double w_inter = gb.inter_per_node[SQ_COLL_WEIGHT], w_intra = gb.intra_per_gpu[SQ_COLL_WEIGHT];
        double bwd_inter = w_inter, bwd_intra = w_intra;
        ag_bwd = ag_fwd, k_bwd = k_fwd;
        if (par->hpz && lay.g > 1) {
            /* hpZ: the backward gathers the bf16 secondary partition of the
            ** node's g GPUs over NVLink (ZeRO++, section hpZ): a dry world
            ** of one node under the baseline's bf16 weight wire; no kernels */
            sq_scheme bf16;
            if ((rc = sq_scheme_preset("baseline", &bf16, err))) return rc;
            group_bytes node;
            sq_topo one = {.nodes = 1, .per_node = g};
            layout lone = {.nodes = 1, .g = g, .k = lay.k};
            rc = count_group_bytes(&one, &bf16, out->params_per_rank, (uint64_t)m->hidden, NULL, 0,
                                   &node, err);
            if (rc != SQ_OK) return rc;
            ag_bwd = single_level_time(p, &lone, node.intra_per_gpu[SQ_COLL_WEIGHT], 0);
            k_bwd = 0, bwd_inter = 0, bwd_intra = node.intra_per_gpu[SQ_COLL_WEIGHT];
        } else if (par->hpz) {
            /* one GPU of the group per node: its secondary partition is the whole
            ** stage, nothing to gather */
            ag_bwd = 0, k_bwd = 0, bwd_inter = 0, bwd_intra = 0;
        }
        int gathers = zero3 ? par->accum : 1; /* forward gathers per step */
        int reduces = zero3 ? par->accum : 1;
        double wi = gathers * w_inter, wa = gathers * w_intra;
        if (zero3) wi += gathers * bwd_inter, wa += gathers * bwd_intra;
        out->weight_inter_bytes_per_node = (uint64_t)wi;
        out->weight_intra_bytes_per_gpu = (uint64_t)wa;
        /* the k groups of a node send side by side */
        out->inter_bytes_per_node =
            (uint64_t)(lay.k * (wi + reduces * gb.inter_per_node[SQ_COLL_GRAD]));
        out->intra_bytes_per_gpu = (uint64_t)(wa + reduces * gb.intra_per_gpu[SQ_COLL_GRAD]);
        out->weight_comm = gathers * (ag_fwd + (zero3 ? ag_bwd : 0));
        out->grad_comm = reduces * rs;
        out->quant_weight = gathers * (k_fwd + (zero3 ? k_bwd : 0));
        out->quant_grad = reduces * k_rs;
        double kb = gathers * (gb.kernels.bytes[SQ_COLL_WEIGHT] * (zero3 && !par->hpz ? 2 : 1)) +
                    reduces * gb.kernels.bytes[SQ_COLL_GRAD];
        out->quant_bytes_per_gpu = (uint64_t)kb;
    } else {
        out->grad_path = SQ_GRAD_NONE;
    }
    /* Exposed time (docs/cost-model.md). A collective and its quantization
    ** kernels run together on the communication stream, bucket after
    ** bucket, so they hide together behind the compute that runs meanwhile;
    ** what cannot hide is the work beyond that window, and never less than
    ** the first bucket (the first layer, under ZeRO-3), which the compute
    ** waits for. Without overlap everything is exposed. Each exposed time
    ** is split between the collective and the kernels in proportion. */
    double fwd = slot / 3.0, bwd = 2.0 * slot / 3.0;
    double w_exp = out->weight_comm + out->quant_weight, g_exp = out->grad_comm + out->quant_grad;
    if (par->overlap && dp > 1) {
        if (!zero3) {
            /* Megatron: the next step's all-gather behind the first micro-
            ** batch's forward (overlap-param-gather), the reduce-scatter
            ** behind the last one's backward (overlap-grad-reduce) */
            double first = s->bucket && s->bucket < out->params_per_rank
                               ? (double)s->bucket / (double)out->params_per_rank : 1.0;
            w_exp = exposed(w_exp, fwd, first);
            g_exp = exposed(g_exp, bwd, first);
        } else {
            /* ZeRO-3: per micro-batch, the forward gathers behind its forward
            ** (prefetch one layer ahead), the backward gathers and the
            ** reduce-scatter behind its backward, sharing the window */
            double first = 1.0 / (m->layers / par->pp);
            double f = ag_fwd + k_fwd, b_ag = ag_bwd + k_bwd, b_rs = rs + k_rs;
            double ef = exposed(f, fwd, first);
            double eb = exposed(b_ag + b_rs, bwd, first);
            double share = b_ag + b_rs > 0 ? b_ag / (b_ag + b_rs) : 0;
            w_exp = par->accum * (ef + share * eb);
            g_exp = par->accum * (1 - share) * eb;
        }
    }
    split(w_exp, out->weight_comm, out->quant_weight, &out->weight, &out->quant);
    double qg;
    split(g_exp, out->grad_comm, out->quant_grad, &out->grad, &qg);
    out->quant += qg;
    /* The distributed optimizer's Adam step on the shard: reads the fp32
    ** gradient, master weight and two moments (16 bytes), writes those three
    ** (12) and the bf16 weight (2). */
    double shard = ceil((double)out->params_per_rank / dp);
    out->optimizer = 30.0 * shard / p->hbm_bw;
    out->iteration = out->compute + out->tp + out->bubble + out->weight + out->grad + out->quant +
                     out->optimizer;
    out->model_flops = seq_flops * dp * par->micro_batch * par->accum;
    out->tflops = out->model_flops / (out->iteration * par->gpus) / 1e12;
    return SQ_OK;
}
