/*
** netbench_print.c -- netbench's results as text (nccl-tests' table, a
** block per collective and level, and a summary per level) and as one JSON
** object, written to a stream (shardq/mpi.h, "netbench: printing"). What
** `shardq netbench` prints; kept beside the measuring so that a caller
** other than the command prints the same.
*/
#include "shardq/mpi.h"
#include "sq_json.h"

#include <stdio.h>

void sq_netbench_print_block_end(sq_netbench_printer *p)
{
    if (p->rows)
        fprintf(p->out, "# Avg bus bandwidth    : %.4f GB/s\n#\n", p->busbw_sum / p->rows / 1e9);
    p->rows = 0;
    p->busbw_sum = 0;
}

void sq_netbench_print_result(void *user, const sq_netbench_result *r)
{
    sq_netbench_printer *p = user;
    FILE *f = p->out;
    if (p->json || !p->leader) return;
    if (r->op != p->op || r->level != p->level) {
        sq_netbench_print_block_end(p);
        p->op = r->op, p->level = r->level;
        fprintf(f, "# %s, %s level: %d communicator%s of %d ranks at once\n",
                sq_netbench_op_name(r->op), sq_netbench_level_name(r->level), r->comms,
                r->comms == 1 ? "" : "s", r->ranks);
        fprintf(f, "#%12s %13s %7s %12s %10s %10s %6s\n", "size", "count", "type", "time",
                "algbw", "busbw", "iters");
        fprintf(f, "#%12s %13s %7s %12s %10s %10s %6s\n", "(B)", "(elements)", "", "(us)",
                "(GB/s)", "(GB/s)", "");
    }
    fprintf(f, " %12llu %13llu %7s %12.2f %10.4f %10.4f %6d\n", (unsigned long long)r->bytes,
            (unsigned long long)r->count, "float", r->seconds * 1e6, r->algbw / 1e9,
            r->busbw / 1e9, r->iters);
    p->busbw_sum += r->busbw;
    p->rows++;
    fflush(f);
}

void sq_netbench_print_header(FILE *f, const sq_mpi *m, const sq_netbench_config *cfg,
                              int ranks, const sq_topo *topo, const char *hosts)
{
    fprintf(f, "# shardq netbench: %d ranks, %d node%s x %d per node, hosts %s; %s\n", ranks,
            topo->nodes, topo->nodes == 1 ? "" : "s", topo->per_node, hosts, sq_mpi_library());
    fprintf(f, "# sizes %llu B .. %llu B (x2), warmup %d, iters <= %d, budget %g s per size\n"
            "# time: the mean of one call, the slowest rank's; busbw = algbw x (n-1)/n\n#\n",
            (unsigned long long)cfg->min_bytes, (unsigned long long)cfg->max_bytes, cfg->warmup,
            cfg->iters, cfg->seconds);
    for (int level = 0; level < SQ_NETBENCH_NLEVELS; level++)
        if ((cfg->levels & 1u << level) && sq_netbench_skip_reason(m, level))
            fprintf(f, "# %s level: skipped (%s)\n#\n", sq_netbench_level_name(level),
                    sq_netbench_skip_reason(m, level));
    fflush(f);
}

/* One level's fit as a JSON object's members after "measured". */
static void json_fit(FILE *f, const sq_netbench_fit *fit, const char *why)
{
    if (!fit->measured) {
        fprintf(f, ",\"skipped\":");
        sq_json_str(f, why ? why : "no results");
        return;
    }
    fprintf(f, ",\"busbw_gb_s\":");
    sq_json_num(f, fit->busbw / 1e9);
    fprintf(f, ",\"latency_us\":");
    sq_json_num(f, fit->latency * 1e6);
    fprintf(f, ",\"plateau_from_bytes\":%llu,\"op_busbw_gb_s\":{",
            (unsigned long long)fit->plateau_bytes);
    int k = 0;
    for (int op = 0; op < SQ_NETBENCH_NOPS; op++)
        if (fit->op_busbw[op] > 0) {
            fprintf(f, "%s\"%s\":", k++ ? "," : "", sq_netbench_op_name(op));
            sq_json_num(f, fit->op_busbw[op] / 1e9);
        }
    fprintf(f, "}");
}

void sq_netbench_print_summary(FILE *f, const sq_mpi *m, const sq_netbench_config *cfg,
                               const sq_netbench_result *r, size_t n, int json)
{
    int first = 1;
    if (json) fprintf(f, ",\"levels\":[");
    else
        fprintf(f, "# plateau busbw: the mean over the collectives of the mean busbw of their two\n"
                "# largest sizes; latency: the shortest time at the smallest size, per ring\n"
                "# step (over n - 1 steps), as the cost model's latency_us\n"
                "#%-6s %6s %6s %14s %18s   per collective (GB/s)\n", "level", "ranks", "comms",
                "busbw (GB/s)", "latency (us/step)");
    for (int level = 0; level < SQ_NETBENCH_NLEVELS; level++) {
        if (!(cfg->levels & 1u << level)) continue;
        int ranks, comms;
        sq_netbench_level_shape(m, level, &ranks, &comms);
        const char *why = sq_netbench_skip_reason(m, level);
        sq_netbench_fit fit;
        sq_netbench_fit_level(r, n, level, &fit);
        if (json) {
            fprintf(f, "%s{\"level\":\"%s\",\"ranks\":%d,\"comms\":%d,\"measured\":%s",
                    first ? "" : ",", sq_netbench_level_name(level), ranks, comms,
                    fit.measured ? "true" : "false");
            json_fit(f, &fit, why);
            fprintf(f, "}");
        } else if (!fit.measured) {
            fprintf(f, "#%-6s %6d %6d   skipped: %s\n", sq_netbench_level_name(level), ranks,
                    comms, why ? why : "no results");
        } else {
            fprintf(f, "#%-6s %6d %6d %14.4f %18.2f  ", sq_netbench_level_name(level), ranks,
                    comms, fit.busbw / 1e9, fit.latency * 1e6);
            for (int op = 0; op < SQ_NETBENCH_NOPS; op++)
                if (fit.op_busbw[op] > 0)
                    fprintf(f, " %s %.4f", sq_netbench_op_name(op), fit.op_busbw[op] / 1e9);
            fprintf(f, "\n");
        }
        first = 0;
    }
    if (json) fprintf(f, "]");
}

void sq_netbench_print_nothing(FILE *f, const sq_mpi *m, const sq_netbench_config *cfg,
                               int ranks, const sq_topo *topo, int json)
{
    char why[512] = "";
    size_t used = 0;
    for (int level = 0; level < SQ_NETBENCH_NLEVELS; level++)
        if (cfg->levels & 1u << level)
            used += (size_t)snprintf(why + used, sizeof why - used, "%s%s: %s",
                                     used ? "; " : "", sq_netbench_level_name(level),
                                     sq_netbench_skip_reason(m, level));
    if (json) {
        fprintf(f, "{\"ranks\":%d,\"nodes\":%d,\"per_node\":%d,\"results\":[],"
                "\"nothing_measured\":", ranks, topo->nodes, topo->per_node);
        sq_json_str(f, why);
        fprintf(f, ",\"run\":null,\"platform_file\":null}\n");
    } else {
        fprintf(f, "shardq netbench: %d rank%s (%dx%d): nothing to measure between ranks "
                "(%s).\nRun it under an MPI launcher, one rank per worker, e.g.\n"
                "  mpirun -np 4 shardq netbench --workers 2x2\n", ranks,
                ranks == 1 ? "" : "s", topo->nodes, topo->per_node, why);
    }
}

/* A string member's value, or null. */
static void json_str_or_null(FILE *f, const char *s)
{
    if (s) sq_json_str(f, s);
    else fprintf(f, "null");
}

void sq_netbench_print_json(FILE *f, const sq_mpi *m, const sq_netbench_config *cfg, int ranks,
                            const sq_topo *topo, const char *hosts, const sq_netbench_result *res,
                            size_t n, const char *db, int64_t run, const char *platform_file)
{
    fprintf(f, "{\"ranks\":%d,\"nodes\":%d,\"per_node\":%d,\"hosts\":", ranks, topo->nodes,
            topo->per_node);
    sq_json_str(f, hosts);
    fprintf(f, ",\"mpi_library\":");
    sq_json_str(f, sq_mpi_library());
    fprintf(f, ",\"min_bytes\":%llu,\"max_bytes\":%llu,\"warmup\":%d,\"iters\":%d,"
            "\"seconds\":", (unsigned long long)cfg->min_bytes,
            (unsigned long long)cfg->max_bytes, cfg->warmup, cfg->iters);
    sq_json_num(f, cfg->seconds);
    fprintf(f, ",\"results\":[");
    for (size_t i = 0; i < n; i++) {
        const sq_netbench_result *x = &res[i];
        fprintf(f, "%s{\"op\":\"%s\",\"level\":\"%s\",\"ranks\":%d,\"comms\":%d,"
                "\"bytes\":%llu,\"count\":%llu,\"iters\":%d,\"time_us\":",
                i ? "," : "", sq_netbench_op_name(x->op), sq_netbench_level_name(x->level),
                x->ranks, x->comms, (unsigned long long)x->bytes,
                (unsigned long long)x->count, x->iters);
        sq_json_num(f, x->seconds * 1e6);
        fprintf(f, ",\"algbw_gb_s\":");
        sq_json_num(f, x->algbw / 1e9);
        fprintf(f, ",\"busbw_gb_s\":");
        sq_json_num(f, x->busbw / 1e9);
        fprintf(f, "}");
    }
    fprintf(f, "]");
    sq_netbench_print_summary(f, m, cfg, res, n, 1);
    fprintf(f, ",\"db\":");
    json_str_or_null(f, db);
    if (run >= 0) fprintf(f, ",\"run\":%lld", (long long)run);
    else fprintf(f, ",\"run\":null");
    fprintf(f, ",\"platform_file\":");
    json_str_or_null(f, platform_file);
    fprintf(f, "}\n");
}
