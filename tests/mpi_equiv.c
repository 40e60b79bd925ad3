/*
** mpi_equiv.c -- real ranks against the emulation, byte for byte. Run under
** `mpirun -np K*G tests/mpi_equiv K G` (tests/mpi_ranks.sh): for every
** preset, each rank runs its worker's plan through the MPI transport while
** it also runs the whole in-process world of the same configuration, and
** after every step checks that the two hold the same bytes: every worker's
** reduced partition, every worker's w-hat, the digest of every worker's
** bytes on the wire, and every worker's traffic counters (and, at the end,
** error feedback's residuals, for the presets with grad.ef on top). A plain program
** (Check's forking does not mix with MPI); rank 0 prints one TAP line per
** check, and the exit status is non-zero when any rank saw a difference.
*/
#include "shardq/mpi.h"
#include "shardq/synth.h"
#include "shardq/world.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nchecks, nfailed;

/* One check: passes only when it passed on every rank. */
static void check(int passed_here, const char *fmt, const char *preset, const char *what)
{
    int all = 0;
    MPI_Allreduce(&passed_here, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    nchecks++;
    if (!all) nfailed++;
    if (rank == 0) {
        printf("%sok %d - ", all ? "" : "not ", nchecks);
        printf(fmt, preset, what);
        printf("\n");
        fflush(stdout);
    }
}

static sq_world_config config(int K, int G, const char *preset, uint64_t n, int *ok)
{
    sq_world_config c;
    memset(&c, 0, sizeof c);
    c.topo = (sq_topo){K, G};
    c.elements = n;
    c.seed = 7;
    c.digest = 1;
    sq_error err = {0};
    /* "PRESET+KNOB": a knob on top (error feedback) */
    char name[32];
    const char *plus = strchr(preset, '+');
    snprintf(name, sizeof name, "%.*s", plus ? (int)(plus - preset) : (int)strlen(preset), preset);
    *ok = sq_scheme_preset(name, &c.scheme, &err) == SQ_OK;
    if (*ok && plus) *ok = sq_scheme_set(&c.scheme, plus + 1, &err) == SQ_OK;
    if (*ok && sq_scheme_per_tensor(&c.scheme)) {
        /* per-tensor rules (DeepSpeed's presets) resolved for one matrix */
        const uint64_t shape[2] = {(uint64_t)(n / 97), 97};
        sq_scheme one;
        *ok = sq_scheme_for_tensor(&c.scheme, &c.topo, shape, 2, &one, &err) == SQ_OK;
        c.scheme = one;
    }
    if (!*ok) fprintf(stderr, "%s: %s\n", preset, err.msg);
    return c;
}

/* Both worlds through `steps` steps of synthetic training; 1 if all equal. */
static void compare(int K, int G, const char *preset, const sq_transport *tr)
{
    const uint64_t n = 97 * 211; /* odd sizes: padding on every path */
    const int N = K * G, steps = 3;
    int ok;
    sq_world_config c = config(K, G, preset, n, &ok);
    sq_world *ref = NULL, *mine = NULL;
    sq_error err = {0};
    int opened = ok && sq_world_open(&c, &ref, &err) == SQ_OK;
    sq_world_config cr = c;
    cr.transport = tr;
    opened = opened && sq_world_open(&cr, &mine, &err) == SQ_OK;
    if (!opened) fprintf(stderr, "rank %d: %s: %s\n", rank, preset, err.msg);
    check(opened, "%s: %s", preset, "both worlds open");
    if (!opened) {
        sq_world_close(ref), sq_world_close(mine);
        return;
    }
    const uint64_t S = sq_world_shard(ref);
    float *g = malloc(n * sizeof *g), *tmp = malloc(n * sizeof *tmp), *u = malloc(3 * n * sizeof *u);
    float *a = malloc((S > n ? S : n) * sizeof *a), *b = malloc((S > n ? S : n) * sizeof *b);
    float *m = malloc(S * sizeof *m);
    sq_synth_weights(c.seed, g, n, u);
    int same = sq_world_init_weights(ref, g) == SQ_OK && sq_world_init_weights(mine, g) == SQ_OK;
    int grads = 1, weights = 1, wires = 1, traffic = 1, replicas = 1;
    for (int t = 1; t <= steps && same; t++) {
        for (int r = 0; r < N && same; r++) {
            sq_synth_grad(c.seed, (uint32_t)t, r, SQ_SYNTH_HEAVY, n, g, tmp, u);
            same = sq_world_put_grad(ref, r, g) == SQ_OK && sq_world_put_grad(mine, r, g) == SQ_OK;
        }
        same = same && sq_world_reduce_grads(ref, (uint32_t)t) == SQ_OK &&
               sq_world_reduce_grads(mine, (uint32_t)t) == SQ_OK;
        for (int r = 0; r < N && same; r++) {
            same = sq_world_get_grad_shard(ref, r, a) == SQ_OK &&
                   sq_world_get_grad_shard(mine, r, b) == SQ_OK;
            if (same && memcmp(a, b, S * sizeof *a)) grads = 0;
            /* SGD at the reduced gradient, on the master shards of both */
            same = same && sq_world_get_master(ref, r, m) == SQ_OK;
            for (uint64_t i = 0; same && i < sq_world_shard_len(ref, r); i++) m[i] -= 0.5f * a[i];
            same = same && sq_world_put_master(ref, r, m) == SQ_OK &&
                   sq_world_put_master(mine, r, m) == SQ_OK;
        }
        same = same && sq_world_gather_weights(ref, (uint32_t)t) == SQ_OK &&
               sq_world_gather_weights(mine, (uint32_t)t) == SQ_OK;
        for (int r = 0; r < N && same; r++) {
            same = sq_world_get_weights(ref, r, a) == SQ_OK && sq_world_get_weights(mine, r, b) == SQ_OK;
            if (same && memcmp(a, b, n * sizeof *a)) weights = 0;
            if (sq_world_wire_digest(ref, r) != sq_world_wire_digest(mine, r)) wires = 0;
            if (memcmp(sq_world_traffic(ref, r), sq_world_traffic(mine, r), sizeof(sq_traffic)))
                traffic = 0;
        }
        int differs = 1;
        same = same && sq_world_get_weights(mine, 0, a) == SQ_OK &&
               sq_world_replicas_differ(mine, a, b, &differs) == SQ_OK;
        if (differs) replicas = 0;
    }
    /* error feedback's residuals (every rank's, shared by the gets) and their statistic */
    int resid = sq_world_residual_bytes(ref) == sq_world_residual_bytes(mine);
    float *ea = NULL, *eb = NULL;
    for (int hop = 0; hop < 2 && same; hop++) {
        const uint64_t len = sq_world_residual_len(ref, hop);
        if (!len) continue;
        ea = realloc(ea, len * sizeof *ea), eb = realloc(eb, len * sizeof *eb);
        for (int r = 0; r < N && same; r++) {
            same = sq_world_get_residual(ref, r, hop, ea) == SQ_OK &&
                   sq_world_get_residual(mine, r, hop, eb) == SQ_OK;
            if (same && memcmp(ea, eb, len * sizeof *ea)) resid = 0;
        }
    }
    double ra = sq_world_residual_rel(ref), rb = sq_world_residual_rel(mine);
    if (!(ra == rb || (ra != ra && rb != rb))) resid = 0;
    free(ea), free(eb);
    if (!same) fprintf(stderr, "rank %d: %s: %s / %s\n", rank, preset, sq_world_error(ref),
                       sq_world_error(mine));
    check(same, "%s: %s", preset, "every call succeeds on every rank");
    check(grads, "%s: %s", preset, "reduced gradients byte-equal to the in-process world");
    check(weights, "%s: %s", preset, "reconstructed weights byte-equal");
    check(wires, "%s: %s", preset, "bytes on the wire equal (digests of every worker)");
    check(traffic, "%s: %s", preset, "traffic counters equal, every worker and link");
    check(replicas, "%s: %s", preset, "replicas identical on the ranks");
    check(resid, "%s: %s", preset, "error-feedback residuals and their statistic equal");
    sq_coll_time tg = sq_world_times(mine, SQ_COLL_GRAD), tw = sq_world_times(mine, SQ_COLL_WEIGHT);
    check(tg.calls == (uint64_t)steps && tw.calls == (uint64_t)steps && tg.seconds > 0 &&
              tw.seconds > 0, "%s: %s", preset, "measured times of every collective");
    free(g), free(tmp), free(u), free(a), free(b), free(m);
    sq_world_close(ref);
    sq_world_close(mine);
}

int main(int argc, char **argv)
{
    int size;
    sq_error err = {0};
    if (sq_mpi_init(&argc, &argv, &rank, &size, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 99;
    }
    if (argc != 3) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np K*G %s K G\n", argv[0]);
        sq_mpi_finalize();
        return 99;
    }
    sq_topo topo = {atoi(argv[1]), atoi(argv[2])};
    sq_mpi *m;
    if (sq_mpi_open(NULL, &topo, &m, &err)) {
        if (rank == 0) fprintf(stderr, "%s\n", err.msg);
        sq_mpi_finalize();
        return 99;
    }
    for (size_t p = 0; p < sq_scheme_npresets; p++)
        compare(topo.nodes, topo.per_node, sq_scheme_presets[p], sq_mpi_transport(m));
    /* error feedback: the residual of each rank stays on its rank */
    static const char *const ef[] = {"qsdp+grad.ef=1", "tlqhs+grad.ef=1", "ulq+grad.inter.ef=1"};
    for (size_t p = 0; p < sizeof ef / sizeof ef[0]; p++)
        compare(topo.nodes, topo.per_node, ef[p], sq_mpi_transport(m));
    /* the node level from the hosts: one host, so one node of every rank */
    sq_topo hosts = {0, 0};
    sq_mpi *m2;
    int okh = sq_mpi_open(NULL, &hosts, &m2, &err) == SQ_OK;
    check(okh && hosts.nodes == 1 && hosts.per_node == size, "%s: %s", "hosts",
          "one host: the topology from the hosts is 1 x ranks");
    if (okh) sq_mpi_close(m2);
    sq_mpi_close(m);
    if (rank == 0) printf("# %d checks on %dx%d, %d failed\n", nchecks, topo.nodes, topo.per_node,
                          nfailed);
    sq_mpi_finalize();
    return nfailed ? 1 : 0;
}
