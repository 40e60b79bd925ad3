/*
** netbench.c -- the bandwidth and latency of MPI's collectives on each link
** level of an sq_mpi, as nccl-tests reports NCCL's, and the platform file
** (cost.h) they make (shardq/mpi.h, "netbench").
**
** The method is nccl-tests': a batch of calls timed together after a few
** untimed ones, algbw = size / time and busbw = algbw (n - 1) / n. Two
** things differ, both for a harness that may run on a slow shaped link: the
** number of calls is cut to fit a time budget per size, so that 64 MiB over
** 100 Mb/s does not take minutes, and the time kept is the slowest rank's
** (nccl-tests averages the ranks by default), the time a collective takes.
*/
#include "mpi/mpi_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[SQ_NETBENCH_NOPS] = {"allgather", "reducescatter", "alltoall"};
static const char *const level_names[SQ_NETBENCH_NLEVELS] = {"intra", "inter", "all", "rail"};

/* The largest size: buffers are 2 x this per rank, and counts stay ints. */
#define MAX_BYTES ((uint64_t)1 << 30)
#define DEFAULT_MAX ((uint64_t)64 << 20)

const char *sq_netbench_op_name(int op)
{
    return op >= 0 && op < SQ_NETBENCH_NOPS ? op_names[op] : NULL;
}

const char *sq_netbench_level_name(int level)
{
    return level >= 0 && level < SQ_NETBENCH_NLEVELS ? level_names[level] : NULL;
}

int sq_netbench_op_parse(const char *name)
{
    for (int i = 0; name && i < SQ_NETBENCH_NOPS; i++)
        if (!strcmp(name, op_names[i])) return i;
    return -1;
}

int sq_netbench_level_parse(const char *name)
{
    for (int i = 0; name && i < SQ_NETBENCH_NLEVELS; i++)
        if (!strcmp(name, level_names[i])) return i;
    return -1;
}

int sq_netbench_config_check(sq_netbench_config *c, sq_error *err)
{
    if (!c) return sq_error_set(err, SQ_ERR_ARG, "no netbench configuration");
    if (!c->min_bytes) c->min_bytes = 8;
    if (!c->max_bytes) c->max_bytes = c->min_bytes > DEFAULT_MAX ? c->min_bytes : DEFAULT_MAX;
    if (!c->warmup) c->warmup = 5;
    if (!c->iters) c->iters = 20;
    if (c->seconds == 0) c->seconds = 1.0;
    if (!c->ops) c->ops = (1u << SQ_NETBENCH_NOPS) - 1;
    if (!c->levels)
        c->levels = 1u << SQ_NETBENCH_INTRA | 1u << SQ_NETBENCH_INTER | 1u << SQ_NETBENCH_RAIL;
    if (c->max_bytes > MAX_BYTES)
        return sq_error_set(err, SQ_ERR_ARG, "max_bytes %llu: at most %llu (1 GiB; every rank "
                            "holds two buffers of it)", (unsigned long long)c->max_bytes,
                            (unsigned long long)MAX_BYTES);
    if (c->min_bytes > c->max_bytes)
        return sq_error_set(err, SQ_ERR_ARG, "min_bytes %llu is larger than max_bytes %llu",
                            (unsigned long long)c->min_bytes, (unsigned long long)c->max_bytes);
    if (c->warmup < 1 || c->warmup > 1000000)
        return sq_error_set(err, SQ_ERR_ARG, "warmup %d: from 1 to 1000000", c->warmup);
    if (c->iters < 1 || c->iters > 1000000)
        return sq_error_set(err, SQ_ERR_ARG, "iters %d: from 1 to 1000000", c->iters);
    if (!(c->seconds > 0) || c->seconds > 86400)
        return sq_error_set(err, SQ_ERR_ARG, "seconds %g: a budget above 0 and at most a day",
                            c->seconds);
    if (c->ops >> SQ_NETBENCH_NOPS)
        return sq_error_set(err, SQ_ERR_ARG, "ops 0x%x: an unknown collective", c->ops);
    if (c->levels >> SQ_NETBENCH_NLEVELS)
        return sq_error_set(err, SQ_ERR_ARG, "levels 0x%x: an unknown link level", c->levels);
    return SQ_OK;
}

void sq_netbench_level_shape(const sq_mpi *m, int level, int *ranks, int *comms)
{
    int size = sq_mpi_size(m), G = sq_mpi_per_node(m), K = size / G;
    switch (level) {
    case SQ_NETBENCH_INTRA: *ranks = G, *comms = K; break;
    case SQ_NETBENCH_INTER: *ranks = K, *comms = G; break;
    /* with one rank per node the rail alone is the inter level itself */
    case SQ_NETBENCH_RAIL: *ranks = G > 1 ? K : 1, *comms = 1; break;
    default: *ranks = size, *comms = 1; break;
    }
}

/* ------------------------------------------------------------------------ */
/* Measuring                                                                */
/* ------------------------------------------------------------------------ */

static int mpi_error(sq_error *err, int code, const char *what, const char *level, int rank,
                     const sq_mpi *m)
{
    char why[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, why, &len);
    return sq_error_set(err, SQ_ERR_IO, "%s on the %s level (rank %d, %s): %s", what, level, rank,
                        sq_mpi_host(m, rank), why);
}

/* One call of op over c, count floats per rank's block. */
static int call(int op, MPI_Comm c, float *snd, float *rcv, int count)
{
    switch (op) {
    case SQ_NETBENCH_ALLGATHER:
        return MPI_Allgather(snd, count, MPI_FLOAT, rcv, count, MPI_FLOAT, c);
    case SQ_NETBENCH_REDUCESCATTER:
        return MPI_Reduce_scatter_block(snd, rcv, count, MPI_FLOAT, MPI_SUM, c);
    default: return MPI_Alltoall(snd, count, MPI_FLOAT, rcv, count, MPI_FLOAT, c);
    }
}

static const char *const call_names[SQ_NETBENCH_NOPS] = {"MPI_Allgather",
                                                         "MPI_Reduce_scatter_block",
                                                         "MPI_Alltoall"};

/* The state of one run: the world (every rank: barriers, maxima) and the
** buffers, which hold the largest size of any level. */
typedef struct bench {
    const sq_mpi *m;
    const sq_netbench_config *cfg;
    MPI_Comm world;
    float *snd, *rcv;
    int rank;
} bench;

/* Times op at count floats per block on c (n ranks, comms of them at once)
** into *r, by the method of mpi.h. */
static int time_size(bench *b, MPI_Comm c, int level, int op, int n, int comms, int count,
                     sq_netbench_result *r, sq_error *err)
{
    /* a rank outside the level's communicators (MPI_COMM_NULL) only
    ** keeps the others company at the barriers and maxima */
    const sq_netbench_config *cfg = b->cfg;
    const char *lv = level_names[level];
    int rc = MPI_Barrier(b->world);
    if (rc != MPI_SUCCESS) return mpi_error(err, rc, "MPI_Barrier", lv, b->rank, b->m);
    double t0 = MPI_Wtime();
    if (c != MPI_COMM_NULL && (rc = call(op, c, b->snd, b->rcv, count)) != MPI_SUCCESS)
        return mpi_error(err, rc, call_names[op], lv, b->rank, b->m);
    double first = MPI_Wtime() - t0, slowest = first;
    /* every rank decides the counts from the same figure, or they would
    ** call different numbers of collectives and hang */
    if ((rc = MPI_Allreduce(&first, &slowest, 1, MPI_DOUBLE, MPI_MAX, b->world)) != MPI_SUCCESS)
        return mpi_error(err, rc, "MPI_Allreduce", lv, b->rank, b->m);
    double fit = slowest > 0 ? cfg->seconds / slowest : 1e9;
    int warm = cfg->warmup - 1, iters = cfg->iters;
    if (warm > 0.5 * fit) warm = (int)(0.5 * fit);
    if (iters > fit) iters = fit >= 1 ? (int)fit : 1;
    for (int i = 0; i < warm && c != MPI_COMM_NULL; i++)
        if ((rc = call(op, c, b->snd, b->rcv, count)) != MPI_SUCCESS)
            return mpi_error(err, rc, call_names[op], lv, b->rank, b->m);
    /* all communicators of the level start together: they share the links */
    if ((rc = MPI_Barrier(b->world)) != MPI_SUCCESS)
        return mpi_error(err, rc, "MPI_Barrier", lv, b->rank, b->m);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters && c != MPI_COMM_NULL; i++)
        if ((rc = call(op, c, b->snd, b->rcv, count)) != MPI_SUCCESS)
            return mpi_error(err, rc, call_names[op], lv, b->rank, b->m);
    double mean = (MPI_Wtime() - t0) / iters, worst = mean;
    if ((rc = MPI_Allreduce(&mean, &worst, 1, MPI_DOUBLE, MPI_MAX, b->world)) != MPI_SUCCESS)
        return mpi_error(err, rc, "MPI_Allreduce", lv, b->rank, b->m);
    /* MPI_Wtime ticks in microseconds or finer: a batch faster than a
    ** tick would say 0 s and an infinite bandwidth */
    if (worst <= 0) worst = MPI_Wtick() / iters;
    uint64_t bytes = (uint64_t)n * (uint64_t)count * sizeof(float);
    *r = (sq_netbench_result){.op = op, .level = level, .ranks = n, .comms = comms,
                              .bytes = bytes, .count = (uint64_t)count, .iters = iters,
                              .seconds = worst, .algbw = (double)bytes / worst};
    r->busbw = r->algbw * (double)(n - 1) / (double)n;
    return SQ_OK;
}

/* The floats per block of the requested size s on n ranks: s rounded down
** to whole floats per rank, at least one. */
static uint64_t block_count(uint64_t s, int n)
{
    uint64_t c = s / ((uint64_t)n * sizeof(float));
    return c ? c : 1;
}

/* Sizes min x 2^k up to max. */
static int nsizes(const sq_netbench_config *cfg)
{
    int k = 0;
    for (uint64_t s = cfg->min_bytes; s <= cfg->max_bytes && k < 64; s *= 2) k++;
    return k;
}

static int run_level(bench *b, MPI_Comm c, int level, sq_netbench_result *out, size_t *n,
                     sq_error *err)
{
    int ranks, comms;
    sq_netbench_level_shape(b->m, level, &ranks, &comms);
    for (int op = 0; op < SQ_NETBENCH_NOPS; op++) {
        if (!(b->cfg->ops & 1u << op)) continue;
        uint64_t last = 0;
        for (uint64_t s = b->cfg->min_bytes, k = 0; s <= b->cfg->max_bytes && k < 64; s *= 2, k++) {
            uint64_t count = block_count(s, ranks);
            if (count == last) continue; /* rounds to the size before */
            last = count;
            sq_netbench_result *r = &out[*n];
            int rc = time_size(b, c, level, op, ranks, comms, (int)count, r, err);
            if (rc) return rc;
            ++*n;
            if (b->cfg->progress) b->cfg->progress(b->cfg->user, r);
        }
    }
    return SQ_OK;
}

int sq_netbench_run(const sq_mpi *m, const sq_netbench_config *config, sq_netbench_result **out,
                    size_t *nout, sq_error *err)
{
    *out = NULL;
    *nout = 0;
    if (!m) return sq_error_set(err, SQ_ERR_ARG, "no MPI transport");
    sq_netbench_config cfg = *config;
    int rc = sq_netbench_config_check(&cfg, err);
    if (rc) return rc;
    const int size = sq_mpi_size(m), G = sq_mpi_per_node(m);
    bench b = {.m = m, .cfg = &cfg, .world = sq_mpi_world_comm(m), .rank = sq_mpi_rank(m)};

    /* the largest buffer: max_bytes, or one float per rank of the whole job */
    uint64_t cap = cfg.max_bytes, least = (uint64_t)size * sizeof(float);
    if (cap < least) cap = least;
    size_t nmax = (size_t)SQ_NETBENCH_NLEVELS * SQ_NETBENCH_NOPS * (size_t)nsizes(&cfg);
    sq_netbench_result *res = calloc(nmax ? nmax : 1, sizeof *res);
    b.snd = malloc(cap);
    b.rcv = malloc(cap);
    /* every rank must agree before the first collective: one short of
    ** memory must not leave the others waiting in it */
    int mine = res && b.snd && b.rcv, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, b.world);
    if (!all) {
        free(res), free(b.snd), free(b.rcv);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory for two buffers of %llu bytes%s",
                            (unsigned long long)cap, mine ? " on another rank" : "");
    }
    /* finite values whose sums stay finite, and every page touched before
    ** the timing starts */
    for (uint64_t i = 0; i < cap / sizeof(float); i++) b.snd[i] = 1.0f + (float)(i & 7) / 8.0f;
    memset(b.rcv, 0, cap);

    size_t n = 0;
    for (int level = 0; level < SQ_NETBENCH_NLEVELS && rc == SQ_OK; level++) {
        if (!(cfg.levels & 1u << level)) continue;
        int ranks, comms;
        sq_netbench_level_shape(m, level, &ranks, &comms);
        if (ranks < 2) continue; /* nothing between ranks: no rows */
        if (level == SQ_NETBENCH_INTRA) {
            rc = run_level(&b, sq_mpi_node_comm(m), level, res, &n, err);
        } else if (level == SQ_NETBENCH_ALL) {
            rc = run_level(&b, b.world, level, res, &n, err);
        } else {
            /* the rails: the ranks of one local index, one per node; for
            ** the rail alone, only local index 0's */
            MPI_Comm rail;
            int color = level == SQ_NETBENCH_RAIL && b.rank % G ? MPI_UNDEFINED : b.rank % G;
            int mrc = MPI_Comm_split(b.world, color, b.rank, &rail);
            if (mrc != MPI_SUCCESS) {
                rc = mpi_error(err, mrc, "MPI_Comm_split", "inter", b.rank, m);
                break;
            }
            if (rail != MPI_COMM_NULL) MPI_Comm_set_errhandler(rail, MPI_ERRORS_RETURN);
            rc = run_level(&b, rail, level, res, &n, err);
            if (rail != MPI_COMM_NULL) MPI_Comm_free(&rail);
        }
    }
    free(b.snd);
    free(b.rcv);
    if (rc) {
        free(res);
        return rc;
    }
    *out = res;
    *nout = n;
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* What the results say about a link                                        */
/* ------------------------------------------------------------------------ */

void sq_netbench_fit_level(const sq_netbench_result *r, size_t n, int level, sq_netbench_fit *f)
{
    memset(f, 0, sizeof *f);
    int nops = 0;
    double sum = 0;
    for (int op = 0; op < SQ_NETBENCH_NOPS; op++) {
        /* the results of one op come in increasing sizes: the two largest
        ** are its last two, the smallest its first */
        const sq_netbench_result *first = NULL, *last = NULL, *before = NULL;
        for (size_t i = 0; i < n; i++) {
            if (r[i].level != level || r[i].op != op) continue;
            if (!first) first = &r[i];
            before = last;
            last = &r[i];
        }
        if (!first) continue;
        f->measured = 1;
        f->ranks = first->ranks, f->comms = first->comms;
        double plateau = before ? 0.5 * (before->busbw + last->busbw) : last->busbw;
        uint64_t from = before ? before->bytes : last->bytes;
        f->op_busbw[op] = plateau;
        sum += plateau;
        nops++;
        if (!f->plateau_bytes || from < f->plateau_bytes) f->plateau_bytes = from;
        double step = first->seconds / (first->ranks - 1);
        if (nops == 1 || step < f->latency) {
            f->latency = step;
            f->small_seconds = first->seconds;
            f->small_bytes = first->bytes;
        }
    }
    if (nops) f->busbw = sum / nops;
}

/* ------------------------------------------------------------------------ */
/* The platform file                                                        */
/* ------------------------------------------------------------------------ */

typedef struct text {
    char *p;
    size_t len, cap;
    int oom;
} text;

static void put(text *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void put(text *t, const char *fmt, ...)
{
    if (t->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            t->oom = 1;
            return;
        }
        if (t->p && t->len + (size_t)k < t->cap) {
            t->len += (size_t)k;
            return;
        }
        size_t cap = (t->cap ? 2 * t->cap : 4096) + (size_t)k;
        char *p = realloc(t->p, cap);
        if (!p) {
            t->oom = 1;
            return;
        }
        t->p = p, t->cap = cap;
    }
}

/* Each collective's plateau, the rest of a comment line "(from N B):". */
static void plateaus(text *t, const sq_netbench_fit *f)
{
    int k = 0;
    for (int op = 0; op < SQ_NETBENCH_NOPS; op++)
        if (f->op_busbw[op] > 0)
            put(t, "%s %s %.4g", k++ ? "," : "", op_names[op], f->op_busbw[op] / 1e9);
    put(t, " GB/s\n");
}

/* A figure as the file holds it (4 significant digits: more than any run
** repeats) and the value that reads back from it, times scale. */
static double figure(char *buf, size_t len, double v, double scale)
{
    snprintf(buf, len, "%.4g", v);
    return strtod(buf, NULL) * scale;
}

/* One [sources] line, and the same source in p: the note is the first
** line of `how`, cut to 120 characters (the reader takes lines of 199). */
static void source(text *t, sq_cost_platform *p, sq_cost_figure f, sq_cost_source_kind kind,
                   const char *how)
{
    static const char *const kinds[] = {"", "datasheet", "measured", "assumed", "fitted"};
    sq_cost_source *src = &p->source[f];
    memset(src, 0, sizeof *src);
    src->kind = kind;
    const char *h = how && *how ? how : "?";
    size_t n = strcspn(h, "\n");
    snprintf(src->note, sizeof src->note, "%.*s", (int)(n < 120 ? n : 120), h);
    put(t, "%s = %s: %s\n", sq_cost_figure_key(f), kinds[kind], src->note);
}

/* A text for a comment line: its first line, "?" when empty. */
static void one_line(char *buf, size_t len, const char *s)
{
    snprintf(buf, len, "%s", s && *s ? s : "?");
    buf[strcspn(buf, "\r\n")] = '\0';
}

static int good_name(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= sizeof(((sq_cost_platform *)0)->name)) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.'))
            return 0;
    return 1;
}

int sq_netbench_platform(const sq_netbench_result *r, size_t n,
                         const sq_netbench_platform_info *info, sq_cost_platform *out,
                         char **text_out, sq_error *err)
{
    if (text_out) *text_out = NULL;
    if (!info || !out || !info->assumed || (n && !r))
        return sq_error_set(err, SQ_ERR_ARG, "no results, platform info or assumed platform");
    if (!good_name(info->name))
        return sq_error_set(err, SQ_ERR_ARG, "platform name '%s': 1 to 63 letters, digits, '.', "
                            "'-' or '_'", info->name ? info->name : "");
    if (info->nodes < 1 || info->per_node < 1)
        return sq_error_set(err, SQ_ERR_ARG, "topology %dx%d: nodes and ranks per node must be "
                            "at least 1", info->nodes, info->per_node);
    const sq_cost_platform *a = info->assumed;
    char when[128], hosts[256], lib[256], b1[32], b2[32], b3[32];
    one_line(when, sizeof when, info->date);
    one_line(hosts, sizeof hosts, info->hosts);
    one_line(lib, sizeof lib, info->library);
    char src[512];
    snprintf(src, sizeof src, "shardq netbench on %s, %s", when, hosts);
    const int K = info->nodes, G = info->per_node;

    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", info->name);
    out->nodes = K, out->gpus_per_node = G;
    text t = {0};
    put(&t, "# %s -- a platform measured by %s\n"
            "# (%d node%s x %d rank%s per node; %s).\n"
            "# The links are what MPI's collectives reached between the job's processes in\n"
            "# host memory (nccl-tests' busbw, docs/real-ranks.md); every figure below\n"
            "# says whether it is measured or assumed, and where it comes from.\n\n",
        info->name, src, K, K == 1 ? "" : "s", G, G == 1 ? "" : "s", lib);

    put(&t, "[platform]\nname = %s\n", info->name);
    put(&t, "# measured (%s): the job's nodes, K\nnodes = %d\n", src, K);
    put(&t, "# measured (%s): the job's ranks per node, G\ngpus_per_node = %d\n", src, G);
    out->achieved_flops = figure(b1, sizeof b1, a->achieved_flops / 1e12, 1e12);
    out->hbm_bw = figure(b2, sizeof b2, a->hbm_bw / 1e9, 1e9);
    out->quant_bw = figure(b3, sizeof b3, a->quant_bw / 1e9, 1e9);
    put(&t, "# assumed, not measured (netbench measures no compute): %s\nachieved_tflops = %s\n",
        info->flops_from ? info->flops_from : "?", b1);
    put(&t, "# assumed, not measured: %s\nhbm_gb_s = %s\n", info->hbm_from ? info->hbm_from : "?",
        b2);
    put(&t, "# assumed, not measured: %s\nquant_gb_s = %s\n",
        info->quant_from ? info->quant_from : "?", b3);

    const char *links_from = info->links_from ? info->links_from : "?";
    sq_netbench_fit in, ex, alone;
    sq_netbench_fit_level(r, n, SQ_NETBENCH_INTRA, &in);
    sq_netbench_fit_level(r, n, SQ_NETBENCH_INTER, &ex);
    sq_netbench_fit_level(r, n, SQ_NETBENCH_RAIL, &alone);

    put(&t, "\n[intra]\n");
    if (in.measured) {
        out->intra_bw = figure(b1, sizeof b1, in.busbw / 1e9, 1e9);
        out->intra_latency = figure(b2, sizeof b2, in.latency * 1e6, 1e-6);
        put(&t, "# measured (%s):\n"
                "# the plateau busbw of the intra level, %d communicator%s of %d ranks at once:\n"
                "# the mean over the collectives of the mean busbw of their two largest sizes\n"
                "# (from %llu B):",
            src, in.comms, in.comms == 1 ? "" : "s", in.ranks,
            (unsigned long long)in.plateau_bytes);
        plateaus(&t, &in);
        put(&t, "bandwidth_gb_s = %s\n", b1);
        put(&t, "# measured (%s):\n"
                "# %llu B took %.4g us at the intra level, over n - 1 = %d ring step%s\n"
                "latency_us = %s\n",
            src, (unsigned long long)in.small_bytes, in.small_seconds * 1e6, in.ranks - 1,
            in.ranks == 2 ? "" : "s", b2);
    } else {
        out->intra_bw = figure(b1, sizeof b1, a->intra_bw / 1e9, 1e9);
        out->intra_latency = figure(b2, sizeof b2, a->intra_latency * 1e6, 1e-6);
        put(&t, "# assumed, not measured (%s): %s\nbandwidth_gb_s = %s\n",
            G == 1 ? "one rank per node, no intra-node link" : "the intra level was not run",
            links_from, b1);
        put(&t, "# assumed, not measured: %s\nlatency_us = %s\n", links_from, b2);
    }

    put(&t, "\n[inter]\n");
    if (ex.measured) {
        /* The model's network rate for c communicators at once is
        ** min(efficiency x nics x nic_gb_s / k, c x communicator_gb_s)
        ** (cost.c, group_net_bw). The rails ran G at once, each reaching B:
        ** so one card of G x B, lost nothing, and a cap of B per
        ** communicator give B to one communicator and G x B to G. */
        double B = ex.busbw / 1e9;
        /* A communicator with the network to itself (the rail alone) may
        ** reach more than its share while all G run: that is its cap. A
        ** flat ring over every rank is one communicator, and gets it. */
        double B1 = alone.measured && alone.busbw / 1e9 > B ? alone.busbw / 1e9 : B;
        if (B1 > B * ex.comms) B1 = B * ex.comms;
        out->nics_per_node = 1;
        out->nic_bw = figure(b1, sizeof b1, B * ex.comms, 1e9);
        out->net_efficiency = 1;
        out->communicator_bw = figure(b2, sizeof b2, B1, 1e9);
        out->inter_latency = figure(b3, sizeof b3, ex.latency * 1e6, 1e-6);
        put(&t, "# assumed: the rate below is all of a node's network, as one card\n"
                "nics_per_node = 1\n");
        put(&t, "# measured (%s):\n"
                "# %d rail%s of %d ranks (one per node) at once, each with a plateau busbw of\n"
                "# %.4g GB/s: the node's rate is %d x that. The plateau: the mean over the\n"
                "# collectives of the mean busbw of their two largest sizes\n"
                "# (from %llu B):",
            src, ex.comms, ex.comms == 1 ? "" : "s", ex.ranks, B, ex.comms,
            (unsigned long long)ex.plateau_bytes);
        plateaus(&t, &ex);
        put(&t, "nic_gb_s = %s\n", b1);
        put(&t, "# assumed: nic_gb_s is a rate reached, not a line rate: nothing more is lost\n"
                "efficiency = 1\n");
        if (alone.measured)
            put(&t, "# measured (%s):\n"
                    "# one rail alone (the others waiting) reached a plateau busbw of %.4g GB/s,\n"
                    "# against %.4g while all %d ran: the most one communicator gets, the model's\n"
                    "# bandwidth for one communicator, min(nic_gb_s, communicator_gb_s)%s\n"
                    "communicator_gb_s = %s\n",
                src, alone.busbw / 1e9, B, ex.comms,
                alone.busbw / 1e9 < B ? " (at least the shared rate)"
                : alone.busbw / 1e9 > B * ex.comms ? " (at most the node's)" : "", b2);
        else
            put(&t, "# measured (%s):\n"
                    "# one rail's plateau busbw while all %d ran (the rail alone was not run);\n"
                    "# the model's bandwidth for one communicator, min(nic_gb_s,\n"
                    "# communicator_gb_s), is this measured busbw\n"
                    "communicator_gb_s = %s\n",
                src, ex.comms, b2);
        put(&t, "# measured (%s):\n"
                "# %llu B took %.4g us at the inter level, over n - 1 = %d ring step%s\n"
                "latency_us = %s\n",
            src, (unsigned long long)ex.small_bytes, ex.small_seconds * 1e6, ex.ranks - 1,
            ex.ranks == 2 ? "" : "s", b3);
    } else {
        const char *why = K == 1 ? "one node, no inter-node link" : "the inter level was not run";
        out->nics_per_node = a->nics_per_node;
        out->nic_bw = figure(b1, sizeof b1, a->nic_bw / 1e9, 1e9);
        out->net_efficiency = figure(b2, sizeof b2, a->net_efficiency, 1);
        out->communicator_bw = figure(b3, sizeof b3, a->communicator_bw / 1e9, 1e9);
        put(&t, "# assumed, not measured (%s): %s\nnics_per_node = %d\n", why, links_from,
            a->nics_per_node);
        put(&t, "# assumed, not measured: %s\nnic_gb_s = %s\n", links_from, b1);
        put(&t, "# assumed, not measured: %s\nefficiency = %s\n", links_from, b2);
        put(&t, "# assumed, not measured: %s\ncommunicator_gb_s = %s\n", links_from, b3);
        out->inter_latency = figure(b1, sizeof b1, a->inter_latency * 1e6, 1e-6);
        put(&t, "# assumed, not measured: %s\nlatency_us = %s\n", links_from, b1);
    }
    /* Every figure's source, as the cost model reads it ([sources],
    ** docs/cost-model.md): what the comments above say, short
    ** enough for the reader's lines. */
    put(&t, "\n[sources]\n");
    source(&t, out, SQ_COST_FIG_ACHIEVED_TFLOPS, SQ_COST_SRC_ASSUMED, info->flops_from);
    source(&t, out, SQ_COST_FIG_HBM, SQ_COST_SRC_ASSUMED, info->hbm_from);
    source(&t, out, SQ_COST_FIG_QUANT, SQ_COST_SRC_ASSUMED, info->quant_from);
    const char *intra_how = "shardq netbench, the intra level's plateau busbw and latency";
    source(&t, out, SQ_COST_FIG_INTRA_BW, in.measured ? SQ_COST_SRC_MEASURED : SQ_COST_SRC_ASSUMED,
           in.measured ? intra_how : links_from);
    source(&t, out, SQ_COST_FIG_INTRA_LATENCY,
           in.measured ? SQ_COST_SRC_MEASURED : SQ_COST_SRC_ASSUMED,
           in.measured ? intra_how : links_from);
    const char *inter_how = "shardq netbench, the inter level's rails";
    source(&t, out, SQ_COST_FIG_NICS, SQ_COST_SRC_ASSUMED,
           ex.measured ? "the measured rate is all of a node's network, as one card" : links_from);
    source(&t, out, SQ_COST_FIG_NIC_BW, ex.measured ? SQ_COST_SRC_MEASURED : SQ_COST_SRC_ASSUMED,
           ex.measured ? inter_how : links_from);
    source(&t, out, SQ_COST_FIG_EFFICIENCY, SQ_COST_SRC_ASSUMED,
           ex.measured ? "the measured rate is a rate reached, nothing more is lost" : links_from);
    source(&t, out, SQ_COST_FIG_COMMUNICATOR,
           ex.measured ? SQ_COST_SRC_MEASURED : SQ_COST_SRC_ASSUMED,
           !ex.measured     ? links_from
           : alone.measured ? "shardq netbench, one rail alone (the rail level)"
                            : inter_how);
    source(&t, out, SQ_COST_FIG_INTER_LATENCY,
           ex.measured ? SQ_COST_SRC_MEASURED : SQ_COST_SRC_ASSUMED,
           ex.measured ? inter_how : links_from);
    if (t.oom) {
        free(t.p);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    }
    int rc = sq_cost_platform_validate(out, err);
    if (rc || !text_out)
        free(t.p);
    else
        *text_out = t.p;
    return rc;
}
