/*
** check_model.c -- the cost model (src/cost/cost.c) against numbers
** worked out by hand: Megatron's parameter count and FLOP formula, the
** alpha-beta time of a ring and of the two-step all-to-all on a small
** platform with round figures, how k groups share a node's cards and the
** per-communicator cap, overlap, the pipeline bubble, and the refusals.
*/
#include "shardq/cost.h"

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

START_TEST(test_overlap_and_bubble)
{
    sq_cost_platform p = round_platform();
    sq_cost_model_shape m = gpt(4, 256, 4, 256, 256);
    sq_cost_parallel par = {.gpus = 4, .tp = 1, .pp = 1, .micro_batch = 1, .accum = 1};
    sq_cost_result off = predict(&p, &m, par, "baseline");
    par.overlap = 1;
    sq_cost_result on = predict(&p, &m, par, "baseline");
    close_rel(on.weight, fmax(0, off.weight_comm - off.compute / 3), 1e-9);
    close_rel(on.grad, fmax(0, off.grad_comm - 2 * off.compute / 3), 1e-9);
    ck_assert(on.iteration < off.iteration);
    /* a tiny collective hides completely */
    p.nic_bw = 1e15, p.intra_bw = 1e15;
    sq_cost_result hidden = predict(&p, &m, par, "baseline");
    ck_assert(hidden.weight == 0 && hidden.grad == 0);
    /* pipeline: 2 stages, 3 micro-batches -> 4 slots, 1 of them bubble */
    par = (sq_cost_parallel){.gpus = 8, .tp = 1, .pp = 2, .micro_batch = 1, .accum = 3};
    p.nodes = 4;
    sq_cost_result pp = predict(&p, &m, par, "baseline");
    close_rel(pp.bubble, pp.compute / 3, 1e-12);
    close_rel(pp.compute, 3 * sq_cost_model_flops_per_seq(&m) / 2 / 100e12, 1e-12);
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

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("costmodel");
    tcase_add_test(tc, test_params_megatron);
    tcase_add_test(tc, test_flops_formula);
    tcase_add_test(tc, test_ring_time);
    tcase_add_test(tc, test_two_level_time);
    tcase_add_test(tc, test_groups_share_cards);
    tcase_add_test(tc, test_overlap_and_bubble);
    tcase_add_test(tc, test_monotone);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
