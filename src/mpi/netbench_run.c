/*
** netbench_run.c -- what a netbench run needs around the measuring of
** src/mpi/netbench.c (mpi.h): why a level gives no rows on this job, the
** job's hosts and default platform name, the run and its rows in the store,
** and the figures netbench cannot measure, taken from an assumed platform.
** `shardq netbench` keeps the ranks in step and prints.
*/
#include "shardq/mpi.h"

#include "shardq/store.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sq_netbench_skip_reason(const sq_mpi *m, int level)
{
    int ranks, comms;
    sq_netbench_level_shape(m, level, &ranks, &comms);
    if (ranks >= 2) return NULL;
    switch (level) {
    case SQ_NETBENCH_INTRA: return "one rank per node: no intra-node link between ranks";
    case SQ_NETBENCH_INTER: return "one node: no inter-node link between ranks";
    case SQ_NETBENCH_RAIL:
        sq_netbench_level_shape(m, SQ_NETBENCH_INTER, &ranks, &comms);
        return ranks >= 2 ? "one rank per node: the rail alone is the inter level"
                          : "one node: no inter-node link between ranks";
    default: return "one rank: no link between ranks";
    }
}

void sq_netbench_hosts(const sq_mpi *m, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 0; r < sq_mpi_size(m); r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = !strcmp(sq_mpi_host(m, q), sq_mpi_host(m, r));
        if (seen) continue;
        int k = snprintf(buf + used, len - used, "%s%s", used ? "," : "", sq_mpi_host(m, r));
        if (k < 0 || (size_t)k >= len - used) break;
        used += (size_t)k;
    }
}

void sq_netbench_default_name(const char *host, char *buf, size_t len)
{
    snprintf(buf, len, "netbench-%s", host);
    for (char *p = buf; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') *p = '-';
}

/* JSON text of s into buf (quotes and escapes), for the stored config. */
static void json_text(char *buf, size_t len, const char *s)
{
    size_t o = 0;
    if (len < 3) return;
    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 8 < len; p++) {
        if (*p == '"' || *p == '\\') buf[o++] = '\\', buf[o++] = (char)*p;
        else if (*p < 0x20) o += (size_t)snprintf(buf + o, len - o, "\\u%04x", *p);
        else buf[o++] = (char)*p;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

static void mask_names(unsigned mask, int n, const char *(*name)(int), char *buf, size_t len,
                       int json)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++)
        if (mask & 1u << i)
            used += (size_t)snprintf(buf + used, len - used, json ? "%s\"%s\"" : "%s%s",
                                     used ? "," : "", name(i));
}

/* The run's config as one JSON object. */
static void config_json(const sq_netbench_config *cfg, const sq_mpi *m, const sq_topo *t,
                        const char *hosts, char *config, size_t len)
{
    char opsj[128], levelsj[64], hostsj[1024], libj[512];
    mask_names(cfg->ops, SQ_NETBENCH_NOPS, sq_netbench_op_name, opsj, sizeof opsj, 1);
    mask_names(cfg->levels, SQ_NETBENCH_NLEVELS, sq_netbench_level_name, levelsj,
               sizeof levelsj, 1);
    json_text(hostsj, sizeof hostsj, hosts);
    json_text(libj, sizeof libj, sq_mpi_library());
    snprintf(config, len,
             "{\"command\":\"netbench\",\"ranks\":%d,\"nodes\":%d,\"per_node\":%d,\"hosts\":%s,"
             "\"mpi_library\":%s,\"min_bytes\":%llu,\"max_bytes\":%llu,\"warmup\":%d,"
             "\"iters\":%d,\"seconds\":%.17g,\"ops\":[%s],\"levels\":[%s]}",
             sq_mpi_size(m), t->nodes, t->per_node, hostsj, libj,
             (unsigned long long)cfg->min_bytes, (unsigned long long)cfg->max_bytes,
             cfg->warmup, cfg->iters, cfg->seconds, opsj, levelsj);
}

int sq_netbench_store_begin(const char *db, int busy_ms, const sq_mpi *m,
                            const sq_netbench_config *cfg, const sq_topo *t, const char *hosts,
                            const char *platform_out, sq_store **s, int64_t *run, sq_error *err)
{
    char ops[128], levels[64], config[4096];
    mask_names(cfg->ops, SQ_NETBENCH_NOPS, sq_netbench_op_name, ops, sizeof ops, 0);
    mask_names(cfg->levels, SQ_NETBENCH_NLEVELS, sq_netbench_level_name, levels, sizeof levels,
               0);
    config_json(cfg, m, t, hosts, config, sizeof config);
    char ranks[16], nodes[16], per[16], minb[32], maxb[32], warm[16], iters[16], secs[32], topo[32];
    snprintf(ranks, sizeof ranks, "%d", sq_mpi_size(m));
    snprintf(nodes, sizeof nodes, "%d", t->nodes);
    snprintf(per, sizeof per, "%d", t->per_node);
    snprintf(minb, sizeof minb, "%llu", (unsigned long long)cfg->min_bytes);
    snprintf(maxb, sizeof maxb, "%llu", (unsigned long long)cfg->max_bytes);
    snprintf(warm, sizeof warm, "%d", cfg->warmup);
    snprintf(iters, sizeof iters, "%d", cfg->iters);
    snprintf(secs, sizeof secs, "%g", cfg->seconds);
    snprintf(topo, sizeof topo, "%dx%d", t->nodes, t->per_node);
    sq_store_kv params[] = {
        {"ranks", ranks}, {"nodes", nodes}, {"per_node", per}, {"hosts", hosts},
        {"mpi_library", sq_mpi_library()}, {"min_bytes", minb}, {"max_bytes", maxb},
        {"warmup", warm}, {"iters", iters}, {"seconds", secs}, {"ops", ops}, {"levels", levels},
        {"platform_out", platform_out}};
    size_t np = sizeof params / sizeof *params - (platform_out ? 0 : 1);
    /* the transport moves host memory: the device is the CPU's */
    sq_run_info info = {.kind = "netbench", .config = config, .topo = topo, .device = "cpu"};
    int rc = sq_store_open(db, busy_ms, 0, s, err);
    if (rc) return rc;
    rc = sq_store_run_begin(*s, &info, params, np, run);
    if (rc != SQ_STORE_STARTED) {
        rc = rc < 0 ? sq_error_set(err, rc, "%s", sq_store_error(*s))
                    : sq_error_set(err, SQ_ERR_CONFLICT,
                                   "a netbench run was found done before it began");
        sq_store_close(*s);
        *s = NULL;
        return rc;
    }
    return SQ_OK;
}

int sq_netbench_store_end(sq_store *s, int64_t run, const sq_netbench_result *r, size_t n,
                          const char *failure, sq_error *err)
{
    sq_netbench_row *rows = calloc(n ? n : 1, sizeof *rows);
    int rc = SQ_OK;
    char why[SQ_ERROR_MSG] = "";
    if (failure) {
        snprintf(why, sizeof why, "%s", failure);
    } else if (!rows) {
        rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        snprintf(why, sizeof why, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++)
            rows[i] = (sq_netbench_row){.op = sq_netbench_op_name(r[i].op),
                                        .level = sq_netbench_level_name(r[i].level),
                                        .bytes = r[i].bytes, .count = r[i].count,
                                        .ranks = r[i].ranks, .comms = r[i].comms,
                                        .iters = r[i].iters, .seconds = r[i].seconds,
                                        .algbw_gb_s = r[i].algbw / 1e9,
                                        .busbw_gb_s = r[i].busbw / 1e9};
        if ((rc = sq_store_add_netbench(s, run, rows, n)) != SQ_OK) {
            snprintf(why, sizeof why, "%s", sq_store_error(s));
            rc = sq_error_set(err, rc, "%s", why);
        }
    }
    free(rows);
    int end = sq_store_run_end(s, run, *why ? "failed" : "done", *why ? why : NULL, NULL, 0,
                               NULL, 0);
    /* the rows' failure first: the run's end only says it could not record it */
    if (end && !rc) rc = sq_error_set(err, end, "%s", sq_store_error(s));
    return rc;
}

int sq_netbench_assumed_read(const char *assume, double tflops, double hbm_gbs, double quant_gbs,
                             sq_netbench_assumed *a, sq_error *err)
{
    int rc = sq_cost_platform_read(assume, &a->p, err);
    if (rc) return rc;
    int builtin = !strchr(assume, '/') &&
                  !(strlen(assume) > 4 && !strcmp(assume + strlen(assume) - 4, ".ini"));
    char from[140];
    snprintf(from, sizeof from, "%s %s (shardq netbench --assume)",
             builtin ? "the built-in platform" : "the platform file", assume);
    snprintf(a->links, sizeof a->links, "%s", from);
    if (isnan(tflops)) snprintf(a->flops, sizeof a->flops, "%s", from);
    else a->p.achieved_flops = tflops * 1e12,
         snprintf(a->flops, sizeof a->flops, "given (shardq netbench --achieved-tflops)");
    if (isnan(hbm_gbs)) snprintf(a->hbm, sizeof a->hbm, "%s", from);
    else a->p.hbm_bw = hbm_gbs * 1e9,
         snprintf(a->hbm, sizeof a->hbm, "given (shardq netbench --hbm-gbs)");
    if (isnan(quant_gbs)) snprintf(a->quant, sizeof a->quant, "%s", from);
    else a->p.quant_bw = quant_gbs * 1e9,
         snprintf(a->quant, sizeof a->quant, "given (shardq netbench --quant-gbs)");
    return SQ_OK;
}

sq_netbench_platform_info sq_netbench_info(const sq_netbench_assumed *a, const sq_topo *t,
                                           const char *hosts, const char *name, const char *date)
{
    return (sq_netbench_platform_info){
        .name = name, .date = date, .hosts = hosts, .library = sq_mpi_library(),
        .nodes = t->nodes, .per_node = t->per_node, .assumed = &a->p,
        .flops_from = a->flops, .hbm_from = a->hbm, .quant_from = a->quant,
        .links_from = a->links};
}
