/*
** check_gpu_nccl.c -- the NCCL transport (shardq/mpi.h) gives the bytes of
** the CPU world: in one process over every visible GPU (every preset, on
** topologies with more workers than GPUs too, so that some messages stay
** on one GPU and others cross with ncclSend / ncclRecv; and again with
** SQ_NCCL_SELF, every message through NCCL, so that a machine of one GPU
** runs NCCL's sends and receives too), and as one rank
** of an MPI job (sq_nccl_open on a job of one: the set-up, the device
** choice, the teardown; tests/cli_nccl.sh runs the real ranks under
** mpirun). A world on host memory is refused with a sentence. Skips (exit
** 77) without a GPU, and says why.
*/
#include "backend/device.h"
#include "check_util.h"
#include "shardq/backend.h"
#include "shardq/mpi.h"
#include "shardq/world.h"
#include "world_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct outcome {
    float *x;      /* every step's reduced gradient and every worker's w-hat */
    size_t len;
    sq_traffic *traffic;
    uint64_t *digest;
} outcome;

static void outcome_free(outcome *o) { free(o->x), free(o->traffic), free(o->digest); }

/* Steps of reduce, SGD, gather of one world; tr: its transport (NULL: the world's own copies). */
static outcome run(const char *device, const sq_transport *tr, const char *preset, int K, int G,
                   uint64_t n, int steps)
{
    sq_world_config cfg = sqt_world_config(K, G, preset, K > 1 && G > 1 ? "grad.pipe=2" : NULL, n,
                                           4321);
    cfg.device = device;
    cfg.transport = tr;
    cfg.digest = 1;
    sq_world *w;
    sq_error err = {0};
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%s: %s", device, err.msg);
    const int N = K * G;
    const uint64_t P = sq_world_padded(w);
    outcome out;
    out.len = (size_t)steps * (P + (size_t)N * n);
    out.x = malloc(out.len * sizeof *out.x);
    out.traffic = malloc((size_t)N * sizeof *out.traffic);
    out.digest = malloc((size_t)N * sizeof *out.digest);
    ck_assert(out.x && out.traffic && out.digest);
    char what[128];
    snprintf(what, sizeof what, "%s %dx%d %s", preset, K, G, device);
    sqt_world_steps(w, N, n, steps, out.x, what);
    for (int r = 0; r < N; r++) {
        out.traffic[r] = *sq_world_traffic(w, r);
        out.digest[r] = sq_world_wire_digest(w, r);
    }
    sq_world_close(w);
    return out;
}

static void expect_same(const outcome *a, const outcome *b, int N, const char *what)
{
    char msg[256];
    ck_assert_uint_eq(a->len, b->len);
    ck_assert_msg(sqt_bytes_equal(a->x, b->x, a->len * sizeof(float), msg, sizeof msg), "%s: %s",
                  what, msg);
    for (int r = 0; r < N; r++) {
        ck_assert_msg(a->digest[r] == b->digest[r], "%s: worker %d sent other bytes", what, r);
        ck_assert_msg(memcmp(&a->traffic[r], &b->traffic[r], sizeof a->traffic[r]) == 0,
                      "%s: worker %d counted other traffic", what, r);
    }
}

static int ngpus;
static int gpus[64];

/* Every preset; with SQ_NCCL_SELF every message goes through NCCL, even
** where all workers share the one GPU of the machine. */
static void local_equals_cpu(unsigned flags)
{
    sq_nccl *nc;
    sq_error err = {0};
    ck_assert_msg(sq_nccl_open_local(gpus, ngpus, flags, &nc, &err) == SQ_OK, "%s", err.msg);
    static const int kg[][2] = {{1, 2}, {2, 2}, {2, 4}, {3, 2}, {4, 1}};
    for (size_t p = 0; p < sq_scheme_npresets; p++)
        for (size_t t = 0; t < sizeof kg / sizeof kg[0]; t++) {
            const char *preset = sq_scheme_presets[p];
            const int K = kg[t][0], G = kg[t][1];
            char what[128];
            snprintf(what, sizeof what, "%s %dx%d, NCCL over %d GPU%s%s", preset, K, G, ngpus,
                     ngpus == 1 ? "" : "s", flags & SQ_NCCL_SELF ? " (self sends)" : "");
            outcome a = run("cpu", NULL, preset, K, G, 6144, 3);
            outcome b = run("cuda", sq_nccl_transport(nc), preset, K, G, 6144, 3);
            expect_same(&a, &b, K * G, what);
            outcome_free(&a), outcome_free(&b);
        }
    sq_nccl_close(nc);
}

START_TEST(test_local_equals_cpu) { local_equals_cpu(0); }
END_TEST

START_TEST(test_local_self_equals_cpu) { local_equals_cpu(SQ_NCCL_SELF); }
END_TEST

/* The blocking flag is the ranks' (one process pairs a phase's ends at its
** end whatever the flag), and a second communicator over one GPU alone
** carries nothing but same-GPU copies. */
START_TEST(test_local_flags_and_one_gpu)
{
    sq_nccl *nc;
    sq_error err = {0};
    ck_assert_msg(sq_nccl_open_local(gpus, 1, SQ_NCCL_BLOCKING | SQ_NCCL_SELF, &nc, &err) == SQ_OK,
                  "%s", err.msg);
    ck_assert_int_eq(sq_nccl_device(nc), gpus[0]);
    char dev[16];
    snprintf(dev, sizeof dev, "cuda:%d", gpus[0]);
    outcome a = run("cpu", NULL, "sdp4bit", 2, 2, 6144, 2);
    outcome b = run(dev, sq_nccl_transport(nc), "sdp4bit", 2, 2, 6144, 2);
    expect_same(&a, &b, 4, "sdp4bit 2x2 on one GPU");
    outcome_free(&a), outcome_free(&b);
    sq_nccl_close(nc);
}
END_TEST

START_TEST(test_refusals)
{
    sq_nccl *nc;
    sq_error err = {0};
    /* a GPU twice, a GPU that is not there */
    int twice[2] = {gpus[0], gpus[0]};
    ck_assert_int_eq(sq_nccl_open_local(twice, 2, 0, &nc, &err), SQ_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "named twice"), "%s", err.msg);
    int none[1] = {4096};
    ck_assert_int_eq(sq_nccl_open_local(none, 1, 0, &nc, &err), SQ_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "no such device"), "%s", err.msg);
    ck_assert_ptr_null(nc);
    /* a world in host memory */
    ck_assert_int_eq(sq_nccl_open_local(gpus, 1, 0, &nc, &err), SQ_OK);
    sq_world_config cfg = sqt_world_config(1, 2, "qsdp", NULL, 6144, 1);
    cfg.transport = sq_nccl_transport(nc);
    sq_world *w;
    ck_assert_int_eq(sq_world_open(&cfg, &w, &err), SQ_OK);
    float *g = calloc(6144, sizeof *g);
    ck_assert_ptr_nonnull(g);
    for (int r = 0; r < 2; r++) ck_assert_int_eq(sq_world_put_grad(w, r, g), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_ERR_ARG);
    ck_assert_msg(strstr(sq_world_error(w), "host memory"), "%s", sq_world_error(w));
    free(g);
    sq_world_close(w);
    sq_nccl_close(nc);
    ck_assert_msg(!strncmp(sq_nccl_library(), "NCCL ", 5), "%s", sq_nccl_library());
}
END_TEST

/* A job of one rank (MPI's singleton): the device of local rank 0, a
** communicator of one, a 1x1 world on it, and the close. */
START_TEST(test_ranks_of_one)
{
    sq_error err = {0};
    int rank = -1, size = 0;
    ck_assert_msg(sq_mpi_init(NULL, NULL, &rank, &size, &err) == SQ_OK, "%s", err.msg);
    ck_assert_int_eq(size, 1);
    sq_topo topo = {1, 1};
    sq_mpi *m;
    ck_assert_msg(sq_mpi_open(NULL, &topo, &m, &err) == SQ_OK, "%s", err.msg);
    int dev = -1, local = -1, per_host = 0;
    ck_assert_msg(sq_nccl_pick_device(m, NULL, 0, &dev, &local, &per_host, &err) == SQ_OK, "%s",
                  err.msg);
    ck_assert_int_eq(dev, 0);
    ck_assert_int_eq(local, 0);
    ck_assert_int_eq(per_host, 1);
    int list[1] = {ngpus - 1};
    ck_assert_int_eq(sq_nccl_pick_device(m, list, 1, &dev, NULL, NULL, &err), SQ_OK);
    ck_assert_int_eq(dev, ngpus - 1);
    sq_nccl *nc;
    ck_assert_msg(sq_nccl_open(m, dev, 0, &nc, &err) == SQ_OK, "%s", err.msg);
    const sq_transport *tr = sq_nccl_transport(nc);
    ck_assert_int_eq(tr->nranks, 1);
    ck_assert_int_eq(tr->rank, 0);
    ck_assert_ptr_nonnull(tr->share);
    char name[16];
    snprintf(name, sizeof name, "cuda:%d", dev);
    outcome a = run("cpu", NULL, "sdp4bit", 1, 1, 4096, 2);
    outcome b = run(name, tr, "sdp4bit", 1, 1, 4096, 2);
    expect_same(&a, &b, 1, "sdp4bit 1x1 as one NCCL rank");
    outcome_free(&a), outcome_free(&b);
    sq_nccl_close(nc);
    sq_mpi_close(m);
}
END_TEST

int main(void)
{
    ngpus = sqt_devices_or_skip();
    if (ngpus > 64) ngpus = 64;
    for (int i = 0; i < ngpus; i++) gpus[i] = i;
    printf("%s over %d GPU%s\n", sq_nccl_library(), ngpus, ngpus == 1 ? "" : "s");
    Suite *s = suite_create("gpu_nccl");
    TCase *tc = tcase_create("nccl");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_local_flags_and_one_gpu);
    tcase_add_test(tc, test_local_equals_cpu);
    tcase_add_test(tc, test_local_self_equals_cpu);
    tcase_add_test(tc, test_ranks_of_one);
    suite_add_tcase(s, tc);
    int rc = sqt_run_nofork(s);
    sq_mpi_finalize();
    return rc;
}
