/*
** cost.c -- the iteration time of sharded data-parallel training under a
** quantization scheme (cost.h; README, "The cost model").
**
** The collectives are priced with the alpha-beta model NCCL's own tuner uses:
** a latency per step plus bytes over the bottleneck link's bandwidth. The
** bytes are not a formula of ours: a dry world of the data-parallel group's
** topology runs the scheme's collectives and counts what each worker sends
** on each link level, metadata included, exactly as the harness does.
*/
#include "shardq/cost.h"

#include "shardq/codec.h"

#include <math.h>
#include <stdio.h>
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

/* Bytes one DP group moves, from a dry world of its topology. */
typedef struct group_bytes {
    double intra_per_gpu[SQ_NCOLL]; /* the busiest GPU's NVLink sends */
    double inter_per_node[SQ_NCOLL]; /* the busiest node's network sends */
    double quant_per_gpu;            /* the busiest GPU's quantization traffic */
    sq_grad_mode grad_path;
} group_bytes;

static int link_quantized(const sq_world *w, int coll, int link)
{
    const sq_scheme *s = sq_world_scheme(w);
    if (coll == SQ_COLL_WEIGHT) return !sq_wire_raw(&s->weight);
    switch (sq_world_grad_path(w)) {
    case SQ_GRAD_TWOLEVEL:
        return !sq_wire_raw(link == SQ_LINK_INTRA ? &s->grad_intra : &s->grad_inter);
    case SQ_GRAD_A2A: return !sq_wire_raw(sq_world_single_wire(w));
    default: return 0;
    }
}

static int count_group_bytes(const sq_topo *topo, const sq_scheme *s, uint64_t elements,
                             uint64_t hidden, group_bytes *gb, sq_error *err)
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
    rc = sq_world_open(&cfg, &w, &werr);
    if (rc != SQ_OK) return sq_error_set(err, rc, "%s", sq_error_message(&werr));
    rc = sq_world_reduce_grads(w, 1);
    if (rc == SQ_OK) rc = sq_world_gather_weights(w, 1);
    if (rc != SQ_OK) {
        sq_error_set(err, rc < 0 ? rc : SQ_ERR_ARG, "%s", sq_world_error(w));
        sq_world_close(w);
        return rc < 0 ? rc : SQ_ERR_ARG;
    }
    memset(gb, 0, sizeof *gb);
    gb->grad_path = sq_world_grad_path(w);
    for (int node = 0; node < topo->nodes; node++) {
        double inter[SQ_NCOLL] = {0, 0};
        for (int l = 0; l < topo->per_node; l++) {
            const sq_traffic *t = sq_world_traffic(w, node * topo->per_node + l);
            double quant = 0;
            for (int c = 0; c < SQ_NCOLL; c++) {
                const sq_link_traffic *in = &t->t[c][SQ_LINK_INTRA], *ex = &t->t[c][SQ_LINK_INTER];
                double sent_intra = (double)(in->sent_codes + in->sent_meta);
                if (sent_intra > gb->intra_per_gpu[c]) gb->intra_per_gpu[c] = sent_intra;
                inter[c] += (double)(ex->sent_codes + ex->sent_meta);
                /* a quantized element is read in fp32 and written as codes
                ** by the sender, read as codes and written in fp32 by the
                ** receiver (the Hadamard transform is fused: no pass of its own) */
                for (int k = 0; k < SQ_NLINK; k++) {
                    const sq_link_traffic *x = &t->t[c][k];
                    if (!link_quantized(w, c, k)) continue;
                    quant += 8.0 * (double)x->sent_elems + (double)(x->sent_codes + x->sent_meta) +
                             (double)(x->recv_codes + x->recv_meta);
                }
            }
            if (quant > gb->quant_per_gpu) gb->quant_per_gpu = quant;
        }
        for (int c = 0; c < SQ_NCOLL; c++)
            if (inter[c] > gb->inter_per_node[c]) gb->inter_per_node[c] = inter[c];
    }
    sq_world_close(w);
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

    if (dp > 1) {
        group_bytes gb;
        sq_topo topo = {.nodes = lay.nodes, .per_node = g};
        rc = count_group_bytes(&topo, s, out->params_per_rank, (uint64_t)m->hidden, &gb, err);
        if (rc != SQ_OK) return rc;
        out->grad_path = gb.grad_path;
        out->weight_comm = single_level_time(p, &lay, gb.intra_per_gpu[SQ_COLL_WEIGHT],
                                             gb.inter_per_node[SQ_COLL_WEIGHT]);
        if (gb.grad_path == SQ_GRAD_TWOLEVEL)
            out->grad_comm = two_level_time(p, &lay, gb.intra_per_gpu[SQ_COLL_GRAD],
                                            gb.inter_per_node[SQ_COLL_GRAD], s->pipe);
        else
            out->grad_comm = single_level_time(p, &lay, gb.intra_per_gpu[SQ_COLL_GRAD],
                                               gb.inter_per_node[SQ_COLL_GRAD]);
        out->quant_bytes_per_gpu = (uint64_t)gb.quant_per_gpu;
        out->quant = gb.quant_per_gpu / p->quant_bw;
        /* the k groups of a node send side by side */
        out->inter_bytes_per_node =
            (uint64_t)(lay.k * (gb.inter_per_node[SQ_COLL_WEIGHT] + gb.inter_per_node[SQ_COLL_GRAD]));
        out->intra_bytes_per_gpu =
            (uint64_t)(gb.intra_per_gpu[SQ_COLL_WEIGHT] + gb.intra_per_gpu[SQ_COLL_GRAD]);
    } else {
        out->grad_path = SQ_GRAD_NONE;
    }
    /* With overlap, the all-gather hides behind the first micro-batch's
    ** forward pass and the reduce-scatter behind the last one's backward
    ** (a third and two thirds of a slot); without, both are exposed. */
    out->weight = out->weight_comm, out->grad = out->grad_comm;
    if (par->overlap) {
        out->weight = fmax(0.0, out->weight_comm - slot / 3.0);
        out->grad = fmax(0.0, out->grad_comm - 2.0 * slot / 3.0);
    }
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
