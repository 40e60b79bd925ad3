/*
** check_model.c -- the cost model (src/cost/cost.c) against numbers
** worked out by hand: Megatron's parameter count and FLOP formula, the
** alpha-beta time of a ring and of the two-step all-to-all on a small
** platform with round figures, how k groups share a node's cards and the
** per-communicator cap, overlap, the pipeline bubble, and the refusals.
*/
#include "check_util.h"
#include "shardq/cost.h"
#include "shardq/plan.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Round figures, so that every expected time below is arithmetic. */
static sq_cost_platform round_platform(void)
{
    sq_cost_platform p = {
        .nodes = 2, .gpus_per_node = 2, .achieved_flops = 100e12, .hbm_bw = 1e12,
        .quant_bw = 1e12, .intra_bw = 100e9, .intra_latency = 0, .nics_per_node = 1,
        .nic_bw = 10e9, .net_efficiency = 1, .communicator_bw = 0, .inter_latency = 0};
    strcpy(p.name, "round");
    return p;
}

static sq_cost_model_shape gpt(int L, int h, int a, int V, int s)
{
    sq_cost_model_shape m = {.layers = L, .hidden = h, .heads = a, .vocab = V, .seq = s};
    strcpy(m.name, "test");
    return m;
}

static sq_scheme preset(const char *name)
{
    sq_scheme s;
    sq_error err = {0};
    ck_assert_msg(sq_scheme_preset(name, &s, &err) == 0, "%s", err.msg);
    return s;
}

static sq_cost_result predict(const sq_cost_platform *p, const sq_cost_model_shape *m, sq_cost_parallel par,
                       const char *scheme)
{
    sq_scheme s = preset(scheme);
    sq_cost_result c;
    sq_error e = {0};
    const char *err = e.msg;
    ck_assert_msg(sq_cost_iteration(p, m, &par, &s, &c, &e) == 0, "%s", err);
    return c;
}

#define close_rel(a, b, tol) \
    ck_assert_msg(fabs((a) - (b)) <= (tol) * fabs(b), "%s = %.9g, expected %.9g", #a, (double)(a), \
                  (double)(b))

/* Megatron's log of GPT-1.3B: "1315819520 elements" in its one gradient bucket. */
START_TEST(test_params_megatron)
{
    sq_cost_model_shape m = gpt(24, 2048, 16, 50257, 2048);
    ck_assert_uint_eq(sq_cost_model_params(&m, 1), 1315819520ull);
    ck_assert_uint_eq(sq_cost_model_params_per_rank(&m, 1, 1), 1315819520ull);
    /* TP 2: the matrices halve, LayerNorms and row biases stay, the
    ** vocabulary pads to 256 (50432) */
    uint64_t h = 2048, expect = 24 * (12 * h * h / 2 + 7 * h / 2 + 6 * h) + 50432 * h / 2 + 2048 * h +
                                2 * h;
    ck_assert_uint_eq(sq_cost_model_params_per_rank(&m, 2, 1), expect);
    /* PP 2: the first stage holds half the layers and the embeddings */
    ck_assert_uint_eq(sq_cost_model_params_per_rank(&m, 1, 2),
                      12 * (12 * h * h + 13 * h) + 50304 * h + 2048 * h);
}
END_TEST

START_TEST(test_flops_formula)
{
    sq_cost_model_shape m = gpt(24, 2048, 16, 50257, 2048);
    /* 3 x (24 s h^2 L + 4 s^2 h L + 2 s h V) with V padded to 50304 */
    double s = 2048, h = 2048, L = 24, V = 50304;
    double expect = 3 * (24 * s * h * h * L + 4 * s * s * h * L + 2 * s * h * V);
    close_rel(sq_cost_model_flops_per_seq(&m), expect, 1e-12);
    /* the 1.86e13 of SDP4Bit's profile of this model */
    close_rel(sq_cost_model_flops_per_seq(&m), 1.86e13, 0.01);
}
END_TEST

/* Baseline on 2 nodes x 2 GPUs: a ring of 4. Each GPU sends 3/4 of the
** buffer (fp32 gradients, bf16 weights); the node's one ring crossing carries
** 3/4 too, through one 10 GB/s card; NVLink is 10 x faster, so the card
** sets the time. */
START_TEST(test_ring_time)
{
    sq_cost_platform p = round_platform();
    sq_cost_model_shape m = gpt(1, 64, 1, 64, 64); /* 53,504 parameters */
    sq_cost_parallel par = {.gpus = 4, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
    sq_cost_result c = predict(&p, &m, par, "baseline");
    double n = (double)sq_cost_model_params(&m, 1);
    ck_assert_int_eq(c.dp, 4);
    ck_assert_int_eq(c.dp_nodes, 2);
    ck_assert_int_eq(c.groups_per_node, 1);
    ck_assert_int_eq(c.grad_path, SQ_GRAD_RING);
    close_rel(c.grad_comm, 0.75 * 4 * n / 10e9, 1e-3);
    close_rel(c.weight_comm, 0.75 * 2 * n / 10e9, 1e-3);
    ck_assert_uint_eq(c.inter_bytes_per_node, (uint64_t)(0.75 * 6 * n));
    ck_assert(c.quant == 0);
    /* latency: 3 ring steps, 1 across the network */
    p.intra_latency = 1e-3, p.inter_latency = 5e-3;
    sq_cost_result d = predict(&p, &m, par, "baseline");
    close_rel(d.grad_comm - c.grad_comm, 2 * 1e-3 + 5e-3, 1e-6);
    /* compute: the FLOPs of one sequence at 100 TFLOP/s; the sum of phases */
    close_rel(c.compute, sq_cost_model_flops_per_seq(&m) / 100e12, 1e-12);
    close_rel(c.iteration, c.compute + c.tp + c.bubble + c.weight + c.grad + c.quant + c.optimizer,
              1e-12);
    close_rel(c.tflops, 4 * sq_cost_model_flops_per_seq(&m) / (c.iteration * 4) / 1e12, 1e-12);
}
END_TEST

/* PowerSGD on 2 x 2 (a ring of 4, crossing nodes at 1 -> 2 and 3 -> 0), per
** tensor of the rank: each matrix sends its factors in two ring all-reduces
** (every chunk but the own in the reduce-scatter, every chunk but the
** successor's in the all-gather, rows and cols values at rank 1), each
** vector the ring reduce-scatter of its padded length; the latency is that
** of five ring passes (two all-reduces and the vectors' reduce-scatter). */
static double allreduce_sent(uint64_t len, int N, int r)
{
    uint64_t base = len / (uint64_t)N, rem = len % (uint64_t)N;
    uint64_t own = base + ((uint64_t)r < rem), succ = base + ((uint64_t)((r + 1) % N) < rem);
    return 4.0 * (double)(2 * len - own - succ);
}

START_TEST(test_powersgd_bytes)
{
    sq_cost_platform p = round_platform();
    sq_cost_model_shape m = gpt(1, 64, 1, 64, 64);
    sq_cost_parallel par = {.gpus = 4, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
    sq_cost_result c = predict(&p, &m, par, "powersgd");
    ck_assert_int_eq(c.grad_path, SQ_GRAD_POWERSGD);
    /* QKV, attention output, MLP in and out, word embedding (vocabulary
    ** padded to 128), positions; then the vectors */
    static const uint64_t mats[][2] = {{192, 64}, {64, 64}, {256, 64}, {64, 256}, {128, 64}, {64, 64}};
    static const uint64_t vecs[][2] = {{192, 1}, {256, 1}, {64, 6}, {64, 2}};
    double node[2] = {0, 0}; /* the sends of ranks 1 and 3 across nodes */
    for (int k = 0; k < 2; k++) {
        const int r = 2 * k + 1;
        for (size_t i = 0; i < sizeof mats / sizeof *mats; i++)
            node[k] += allreduce_sent(mats[i][0], 4, r) + allreduce_sent(mats[i][1], 4, r);
        for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++)
            node[k] += (double)vecs[i][1] * 3 * 4 * ((vecs[i][0] + 31) / 32 * 32 / 4);
    }
    const double grad_inter = node[0] > node[1] ? node[0] : node[1];
    ck_assert_uint_eq(c.inter_bytes_per_node - c.weight_inter_bytes_per_node, (uint64_t)grad_inter);
    close_rel(c.grad_comm, grad_inter / 10e9, 1e-9);
    /* far below the baseline's fp32 ring */
    sq_cost_result b = predict(&p, &m, par, "baseline");
    ck_assert(c.grad_comm < b.grad_comm / 3);
    p.intra_latency = 1e-3, p.inter_latency = 5e-3;
    sq_cost_result d = predict(&p, &m, par, "powersgd");
    close_rel(d.grad_comm - c.grad_comm, 5 * (2 * 1e-3 + 5e-3), 1e-6);
    /* its kernels: passes over every matrix (docs/cost-model.md, quantization kernels) */
    ck_assert(c.quant_grad > 0);
}
END_TEST

/* TLq on 2 x 2: the intra step moves half of the 8-bit gradient (plus fp32
** scales per 128) over NVLink, then each rail sends half of its half in
** 4 bits across: two rails through the one card. */
START_TEST(test_two_level_time)
{
    sq_cost_platform p = round_platform();
    sq_cost_model_shape m = gpt(2, 256, 2, 256, 256);
    sq_cost_parallel par = {.gpus = 4, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
    sq_cost_result c = predict(&p, &m, par, "tlq");
    ck_assert_int_eq(c.grad_path, SQ_GRAD_TWOLEVEL);
    double n = (double)c.params_per_rank;
    double intra = 0.5 * n * (8 + 32.0 / 128) / 8, inter = 2 * 0.5 * (n / 2) * (4 + 32.0 / 128) / 8;
    close_rel(c.grad_comm, intra / 100e9 + inter / 10e9, 0.01);
    ck_assert(c.quant > 0);
    /* pipelining 4 slices hides all but a quarter of the shorter step */
    sq_scheme s = preset("tlq");
    ck_assert_int_eq(sq_scheme_set(&s, "grad.pipe=4", NULL), 0);
    sq_cost_result piped;
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &piped, NULL), 0);
    close_rel(piped.grad_comm, inter / 10e9 + intra / 100e9 / 4, 0.01);
}
END_TEST

/* TP 2 on nodes of 2: every node holds two DP groups (one per TP rank),
** each with one GPU per node; they share the card. A per-communicator cap
** below the card's rate binds a lone ring but not two rings. */
START_TEST(test_groups_share_cards)
{
    sq_cost_platform p = round_platform();
    sq_cost_model_shape m = gpt(2, 128, 2, 128, 128);
    sq_cost_parallel par = {.gpus = 8, .tp = 2, .pp = 1, .micro_batch = 1, .accum = 1};
    p.nodes = 4;
    sq_cost_result c = predict(&p, &m, par, "baseline");
    ck_assert_int_eq(c.dp, 4);
    ck_assert_int_eq(c.dp_per_node, 1);
    ck_assert_int_eq(c.groups_per_node, 2);
    double n = (double)c.params_per_rank;
    close_rel(c.grad_comm, 0.75 * 4 * n / (10e9 / 2), 1e-3);
    ck_assert(c.tp > 0);
    p.communicator_bw = 4e9; /* binds: a group's share is 5 GB/s */
    sq_cost_result capped = predict(&p, &m, par, "baseline");
    close_rel(capped.grad_comm, 0.75 * 4 * n / 4e9, 1e-3);
    par.tp = 1; /* one group of 2 per node: the cap, not the 10 GB/s card */
    sq_cost_result lone = predict(&p, &m, par, "baseline");
    ck_assert_int_eq(lone.groups_per_node, 1);
    close_rel(lone.grad_comm, 7.0 / 8 * 4 * (double)lone.params_per_rank / 4e9, 1e-3);
}
END_TEST

static sq_cost_result predict_s(const sq_cost_platform *p, const sq_cost_model_shape *m,
                                sq_cost_parallel par, const sq_scheme *s)
{
    sq_cost_result c;
    sq_error e = {0};
    ck_assert_msg(sq_cost_iteration(p, m, &par, s, &c, &e) == 0, "%s", e.msg);
    return c;
}

/* Megatron: the all-gather and its kernels hide behind a third of a slot,
** the reduce-scatter and its kernels behind two thirds, except the first
** bucket, which the compute waits for. */
START_TEST(test_overlap_and_bubble)
{
    sq_cost_platform p = round_platform();
    sq_cost_model_shape m = gpt(4, 256, 4, 256, 256);
    sq_cost_parallel par = {.gpus = 4, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
    sq_scheme s = preset("sdp4bit");
    s.bucket = 1024; /* far below the rank's parameters: a small first bucket */
    p.quant_bw = 1e9; /* kernels that take time, so that their hiding shows */
    sq_cost_result off = predict_s(&p, &m, par, &s);
    par.overlap = 1;
    sq_cost_result on = predict_s(&p, &m, par, &s);
    double first = 1024.0 / (double)off.params_per_rank, slot = off.compute;
    double w = off.weight_comm + off.quant_weight, g = off.grad_comm + off.quant_grad;
    ck_assert(off.quant_weight > 0 && off.quant_grad > 0);
    close_rel(off.weight + off.grad + off.quant, w + g, 1e-12);
    close_rel(on.weight + on.grad + on.quant,
              fmax(w - slot / 3, w * first) + fmax(g - 2 * slot / 3, g * first), 1e-9);
    ck_assert(on.iteration < off.iteration);
    /* one bucket (the preset's 40 M elements hold the whole model): the
    ** compute waits for all of it, nothing hides */
    s = preset("sdp4bit");
    sq_cost_result one = predict_s(&p, &m, par, &s);
    close_rel(one.iteration, off.iteration, 1e-12);
    /* fast links and kernels: only the first bucket shows */
    p.nic_bw = 1e15, p.intra_bw = 1e15, p.quant_bw = 1e15;
    s.bucket = 1024;
    sq_cost_result hidden = predict_s(&p, &m, par, &s);
    ck_assert(hidden.weight <= first * hidden.weight_comm * (1 + 1e-12));
    /* pipeline: 2 stages, 3 micro-batches -> 4 slots, 1 of them bubble */
    par = (sq_cost_parallel){.gpus = 8, .tp = 1, .pp = 2, .micro_batch = 1, .accum = 3};
    p.nodes = 4;
    sq_cost_result pp = predict(&p, &m, par, "baseline");
    close_rel(pp.bubble, pp.compute / 3, 1e-12);
    close_rel(pp.compute, 3 * sq_cost_model_flops_per_seq(&m) / 2 / 100e12, 1e-12);
}
END_TEST

/* Hiding never makes a step slower: every preset, both systems, hpZ,
** accumulation, fast and slow networks and kernels. */
START_TEST(test_overlap_never_slower)
{
    sq_cost_platform p = round_platform();
    p.nodes = 4;
    sq_cost_model_shape m = gpt(4, 512, 4, 512, 512);
    int checked = 0;
    for (size_t i = 0; i < sq_scheme_npresets; i++)
        for (int sys = 0; sys < 3; sys++)
            for (int accum = 1; accum <= 4; accum += 3)
                for (double bw = 1e8; bw <= 1e12; bw *= 100)
                    for (double qbw = 1e9; qbw <= 1e13; qbw *= 100) {
                        p.nic_bw = bw, p.quant_bw = qbw;
                        sq_cost_parallel par = {.gpus = 8, .tp = 1, .pp = 1, .micro_batch = 1,
                                                .accum = accum, .system = sys > 0, .hpz = sys == 2};
                        sq_scheme s = preset(sq_scheme_presets[i]);
                        s.bucket = 4096;
                        sq_cost_result off = predict_s(&p, &m, par, &s);
                        par.overlap = 1;
                        sq_cost_result on = predict_s(&p, &m, par, &s);
                        ck_assert_msg(on.iteration <= off.iteration * (1 + 1e-12),
                                      "%s system %d accum %d: %g s hidden, %g s not",
                                      sq_scheme_presets[i], sys, accum, on.iteration, off.iteration);
                        ck_assert(on.weight >= 0 && on.grad >= 0 && on.quant >= 0);
                        ck_assert(on.weight <= off.weight * (1 + 1e-12) + 1e-15);
                        ck_assert(on.quant <= off.quant * (1 + 1e-12) + 1e-15);
                        checked++;
                    }
    ck_assert_int_eq(checked, (int)sq_scheme_npresets * 3 * 2 * 3 * 3);
}
END_TEST

/* ZeRO-3 gathers the weights for the forward and again for the backward:
** twice the weight bytes of Megatron's distributed optimizer, the same
** gradient bytes; per micro-batch with accumulation. hpZ keeps the
** backward gather inside the node. */
START_TEST(test_zero3_weight_bytes)
{
    sq_cost_platform p = round_platform();
    p.nodes = 4;
    sq_cost_model_shape m = gpt(4, 512, 4, 512, 512);
    const char *schemes[] = {"baseline", "qw", "zeropp8", "sdp4bit"};
    for (size_t i = 0; i < 4; i++) {
        sq_cost_parallel par = {.gpus = 8, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
        sq_cost_result mega = predict(&p, &m, par, schemes[i]);
        par.system = SQ_COST_ZERO3;
        sq_cost_result z3 = predict(&p, &m, par, schemes[i]);
        ck_assert(mega.weight_inter_bytes_per_node > 0);
        ck_assert_uint_eq(z3.weight_inter_bytes_per_node, 2 * mega.weight_inter_bytes_per_node);
        ck_assert_uint_eq(z3.weight_intra_bytes_per_gpu, 2 * mega.weight_intra_bytes_per_gpu);
        close_rel(z3.weight_comm, 2 * mega.weight_comm, 1e-12);
        close_rel(z3.quant_weight, 2 * mega.quant_weight, 1e-12);
        close_rel(z3.grad_comm, mega.grad_comm, 1e-12);
        ck_assert(z3.iteration > mega.iteration);
        par.accum = 3;
        sq_cost_result z3a = predict(&p, &m, par, schemes[i]);
        ck_assert_uint_eq(z3a.weight_inter_bytes_per_node / 3, z3.weight_inter_bytes_per_node);
        close_rel(z3a.grad_comm, 3 * z3.grad_comm, 1e-12);
        par.accum = 1, par.hpz = 1;
        sq_cost_result hpz = predict(&p, &m, par, schemes[i]);
        ck_assert_uint_eq(hpz.weight_inter_bytes_per_node, mega.weight_inter_bytes_per_node);
        ck_assert(hpz.weight_intra_bytes_per_gpu > mega.weight_intra_bytes_per_gpu);
        ck_assert(hpz.iteration < z3.iteration);
    }
    /* hpZ outside ZeRO-3 is refused */
    sq_cost_parallel par = {.gpus = 8, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1, .hpz = 1};
    sq_scheme s = preset("baseline");
    sq_cost_result c;
    sq_error e = {0};
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), SQ_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "zero3") != NULL, "%s", e.msg);
}
END_TEST

/* Slower network, larger speedup; quantization at infinite kernel speed
** costs nothing. */
START_TEST(test_monotone)
{
    sq_cost_platform p = round_platform();
    sq_cost_model_shape m = gpt(4, 512, 4, 512, 512);
    sq_cost_parallel par = {.gpus = 4, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
    double last = 0;
    for (double bw = 100e9; bw >= 1e9; bw /= 10) {
        p.nic_bw = bw;
        double sp = predict(&p, &m, par, "baseline").iteration / predict(&p, &m, par, "sdp4bit").iteration;
        ck_assert_msg(sp > last, "speedup %g at %g B/s not above %g", sp, bw, last);
        last = sp;
    }
    p.quant_bw = 1e300;
    ck_assert(predict(&p, &m, par, "sdp4bit").quant < 1e-200);
}
END_TEST

START_TEST(test_refusals)
{
    sq_cost_platform p = round_platform();
    sq_cost_model_shape m = gpt(3, 64, 2, 64, 64);
    sq_scheme s = preset("baseline");
    sq_cost_result c;
    sq_error e = {0};
    const char *err = e.msg;
    sq_cost_parallel par = {.gpus = 4, .tp = 4, .pp = 1, .micro_batch = 1, .accum = 1};
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), -1);
    ck_assert_msg(strstr(err, "across nodes") != NULL, "%s", err);
    par = (sq_cost_parallel){.gpus = 6, .tp = 1, .pp = 4, .micro_batch = 1, .accum = 1};
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), -1);
    ck_assert_msg(strstr(err, "6 GPUs") != NULL, "%s", err);
    par = (sq_cost_parallel){.gpus = 4, .tp = 1, .pp = 2, .micro_batch = 1, .accum = 1};
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), -1);
    ck_assert_msg(strstr(err, "3 layers") != NULL, "%s", err);
    par = (sq_cost_parallel){.gpus = 6, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
    p.gpus_per_node = 4;
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), -1);
    ck_assert_msg(strstr(err, "whole nodes") != NULL, "%s", err);
    p.gpus_per_node = 2;
    p.net_efficiency = 1.5;
    par.gpus = 4;
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), -1);
    ck_assert_msg(strstr(err, "efficiency") != NULL, "%s", err);
    p = round_platform();
    p.achieved_flops = NAN;
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), -1);
    ck_assert_msg(strstr(err, "achieved_tflops") != NULL, "%s", err);
    p = round_platform();
    m.heads = 3;
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), -1);
    ck_assert_msg(strstr(err, "heads") != NULL, "%s", err);
    /* one GPU: nothing to communicate */
    m.heads = 2;
    par.gpus = 1;
    ck_assert_int_eq(sq_cost_iteration(&p, &m, &par, &s, &c, &e), 0);
    ck_assert(c.weight_comm == 0 && c.grad_comm == 0 && c.grad_path == SQ_GRAD_NONE);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Quantization kernels: the model's per-scheme counts against the world's  */
/* own plans, op by op                                                      */
/* ------------------------------------------------------------------------ */

static double wire_c(const sq_wire *w, uint64_t n)
{
    return (double)(sq_wire_code_bytes(w, n) + sq_wire_meta_bytes(w, n));
}

/* What rank r's plans execute: every ENCODE, DECODE and SUM over a
** quantized wire, and PowerSGD's passes over its matrix, with the bytes
** docs/cost-model.md (quantization kernels) gives each. */
static void count_plan(const sq_world_config *cfg, int r, sq_cost_kernels *k)
{
    memset(k, 0, sizeof *k);
    for (int c = 0; c < SQ_NCOLL; c++) {
        sq_plan *plan;
        sq_error e = {0};
        ck_assert_msg(sq_plan_build(cfg, r, c, &plan, &e) == 0, "%s", e.msg);
        const sq_plan_layout *L = sq_plan_layout_of(plan);
        for (size_t i = 0; i < sq_plan_nops(plan); i++) {
            const sq_plan_op *op = sq_plan_op_at(plan, i);
            const sq_wire *w = op->wire >= 0 ? &L->wires[op->wire] : NULL;
            int q = w && !sq_wire_raw(w);
            double n = (double)op->n;
            switch (op->kind) {
            case SQ_PLAN_ENCODE:
            case SQ_PLAN_ENCODE_DIFF:
                if (!q) break;
                k->encoded[c] += op->n;
                k->bytes[c] += (op->kind == SQ_PLAN_ENCODE_DIFF ? 8 : 4) * n + wire_c(w, op->n);
                break;
            case SQ_PLAN_DECODE:
            case SQ_PLAN_DECODE_ADD:
                if (!q) break;
                k->decoded[c] += op->n;
                k->bytes[c] += wire_c(w, op->n) + (op->kind == SQ_PLAN_DECODE_ADD ? 8 : 4) * n;
                break;
            case SQ_PLAN_SUM:
                if (!q) break;
                k->decoded[c] += (uint64_t)op->k * op->n;
                k->bytes[c] += op->k * wire_c(w, op->n) + 4 * n;
                break;
            case SQ_PLAN_SUM_REQUANT: {
                const sq_wire *wo = &L->wires[op->wire_out];
                if (!q && sq_wire_raw(wo)) break;
                if (q) k->decoded[c] += (uint64_t)op->k * op->n;
                if (!sq_wire_raw(wo)) k->encoded[c] += op->n;
                k->bytes[c] += op->k * wire_c(w, op->n) + wire_c(wo, op->n);
                break;
            }
            case SQ_PLAN_PSGD_PROJECT: /* grad (+ residual) read, M written and read */
                k->encoded[c] += op->n;
                k->bytes[c] += (L->scheme.psgd_ef ? 8 : 4) * n +
                               8.0 * (double)(L->psgd_rows * L->psgd_cols);
                break;
            case SQ_PLAN_PSGD_BACK: /* M read */
                k->bytes[c] += 4.0 * (double)(L->psgd_rows * L->psgd_cols);
                break;
            case SQ_PLAN_PSGD_OUT: /* the partition written; the residual read and written */
                k->decoded[c] += L->shard + (L->scheme.psgd_ef ? op->n : 0);
                k->bytes[c] += 4.0 * (double)L->shard + (L->scheme.psgd_ef ? 8 * n : 0);
                break;
            default: break; /* copies, swizzles (fused), moves, unquantized adds */
            }
        }
        sq_plan_free(plan);
    }
}

START_TEST(test_kernels_match_plans)
{
    static const sq_topo topos[] = {{1, 4}, {2, 1}, {2, 4}, {4, 2}, {3, 4}, {16, 4}};
    const uint64_t elements = (1u << 20) + 12345, hidden = 256;
    int checked = 0, quantized = 0;
    for (size_t t = 0; t < sizeof topos / sizeof *topos; t++)
        for (size_t i = 0; i < sq_scheme_npresets; i++) {
            sq_world_config cfg = {.topo = topos[t], .elements = elements, .seed = 1, .dry = 1};
            cfg.scheme = preset(sq_scheme_presets[i]);
            if (sq_scheme_per_tensor(&cfg.scheme)) { /* as the model resolves them */
                uint64_t N2 = 2 * (uint64_t)sq_topo_workers(&topos[t]);
                uint64_t rows = ((elements + hidden - 1) / hidden + N2 - 1) / N2 * N2;
                const uint64_t shape[2] = {rows, hidden};
                sq_scheme s = cfg.scheme;
                sq_error e = {0};
                ck_assert_msg(sq_scheme_for_tensor(&s, &topos[t], shape, 2, &cfg.scheme, &e) == 0,
                              "%s", e.msg);
            }
            sq_cost_kernels model;
            sq_error e = {0};
            ck_assert_msg(sq_cost_quant_kernels(&topos[t], &cfg.scheme, elements, &model, &e) == 0,
                          "%s", e.msg);
            for (int r = 0; r < sq_topo_workers(&topos[t]); r++) {
                sq_cost_kernels plan;
                count_plan(&cfg, r, &plan);
                for (int c = 0; c < SQ_NCOLL; c++) {
                    ck_assert_msg(plan.encoded[c] == model.encoded[c] &&
                                  plan.decoded[c] == model.decoded[c] &&
                                  fabs(plan.bytes[c] - model.bytes[c]) <= 1e-9 * plan.bytes[c],
                                  "%s on %dx%d rank %d coll %d: plan encodes %llu decodes %llu "
                                  "(%.0f bytes), model %llu %llu (%.0f)", sq_scheme_presets[i],
                                  topos[t].nodes, topos[t].per_node, r, c,
                                  (unsigned long long)plan.encoded[c],
                                  (unsigned long long)plan.decoded[c], plan.bytes[c],
                                  (unsigned long long)model.encoded[c],
                                  (unsigned long long)model.decoded[c], model.bytes[c]);
                    quantized += plan.encoded[c] > 0;
                }
            }
            checked++;
        }
    ck_assert_int_eq(checked, 6 * (int)sq_scheme_npresets);
    ck_assert(quantized > 0);
}
END_TEST

/* The weight all-gather's kernels are one encode of the own shard and one
** decode of everything: about 4.5 bytes a parameter at 4 bits, not the
** 9 of decoding and re-encoding every chunk a ring forwards. */
START_TEST(test_kernels_weight_once)
{
    sq_topo topo = {16, 4};
    sq_scheme s = preset("qw");
    sq_cost_kernels k;
    sq_error e = {0};
    const uint64_t n = 64ull << 20;
    ck_assert_msg(sq_cost_quant_kernels(&topo, &s, n, &k, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(k.decoded[SQ_COLL_WEIGHT], n);
    ck_assert_uint_eq(k.encoded[SQ_COLL_WEIGHT], n / 64);
    double per = k.bytes[SQ_COLL_WEIGHT] / (double)n;
    ck_assert_msg(per > 4.5 && per < 4.6, "%.3f bytes per parameter", per);
    ck_assert(k.bytes[SQ_COLL_GRAD] == 0); /* fp32 ring: no kernels */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("costmodel");
    tcase_add_test(tc, test_params_megatron);
    tcase_add_test(tc, test_flops_formula);
    tcase_add_test(tc, test_ring_time);
    tcase_add_test(tc, test_two_level_time);
    tcase_add_test(tc, test_powersgd_bytes);
    tcase_add_test(tc, test_groups_share_cards);
    tcase_add_test(tc, test_overlap_and_bubble);
    tcase_add_test(tc, test_monotone);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_kernels_match_plans);
    tcase_add_test(tc, test_kernels_weight_once);
    tcase_add_test(tc, test_overlap_never_slower);
    tcase_add_test(tc, test_zero3_weight_bytes);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
