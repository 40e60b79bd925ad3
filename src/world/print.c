/*
** print.c -- a world's results written to a stream: its topology, scheme
** and sizes, the traffic of an iteration by collective and link (a table or
** JSON), the collectives' times; and the scheme presets with their knobs.
** What `shardq world` and `shardq schemes` print, beside what they count.
*/
#include "shardq/world.h"
#include "sq_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const preset_help[] = {
    "bf16 weight all-gather, fp32 ring reduce-scatter (Megatron, FSDP)",
    "4-bit weights (group 2048, SR), baseline gradients (SDP4Bit's qW)",
    "4-bit weight differences (group 2048, SR), baseline gradients (SDP4Bit qWD)",
    "baseline weights, 4/4-bit two-level all-to-all, SR, 15 levels (SDP4Bit's public ULq)",
    "baseline weights, 8-bit intra / 4-bit inter, group 128, SR (SDP4Bit TLq)",
    "as tlq with a 32-point Hadamard (SDP4Bit TLq-HS)",
    "qwd weights and tlqhs gradients (SDP4Bit)",
    "qw weights and ulq gradients (the paper's ZeRO++ baseline)",
    "qwz weights and qgz gradients, per tensor (DeepSpeed's ZeRO++ as shipped)",
    "8-bit stochastic min-max per bucket of 1024, both paths (QSDP)",
    "baseline weights, DeepSpeed qgZ gradients (per tensor: group rule, fp16 sums, fallbacks)",
    "DeepSpeed qwZ weights (int8 RTN, per-partition blocks), baseline gradients",
    "PowerSGD rank 1, warm start, error feedback, per tensor (PyTorch powerSGD_hook defaults)",
    "PowerSGD rank 4 (the paper's LSTM setting), otherwise as powersgd",
    "QSGD 4-bit (7 levels of the L2 norm), buckets of 128, SR, a2a (GRACE's QSGDCompressor)",
    "scaled sign (mean |x| per 128) with error feedback, a2a (EF-SignSGD, GRACE)",
    "top-10 of each 1024 (about 1%) with error feedback, a2a (GRACE's TopKCompressor)",
};

static const char *path_name(sq_grad_mode m)
{
    switch (m) {
    case SQ_GRAD_RING: return "ring";
    case SQ_GRAD_A2A: return "a2a";
    case SQ_GRAD_TWOLEVEL: return "twolevel";
    case SQ_GRAD_POWERSGD: return "powersgd";
    default: return "none";
    }
}

void sq_scheme_print(FILE *f, int json)
{
    sq_scheme s;
    char buf[SQ_SCHEME_STRLEN];
    if (json) {
        fprintf(f, "{\"presets\":[");
        for (size_t p = 0; p < sq_scheme_npresets; p++) {
            sq_scheme_preset(sq_scheme_presets[p], &s, NULL);
            fprintf(f, "%s{\"name\":\"%s\",\"help\":\"%s\",\"knobs\":{", p ? "," : "",
                   sq_scheme_presets[p], preset_help[p]);
            for (size_t k = 0; k < sq_scheme_nknobs; k++) {
                sq_scheme_get(&s, sq_scheme_knobs[k].key, buf, sizeof buf);
                fprintf(f, "%s\"%s\":\"%s\"", k ? "," : "", sq_scheme_knobs[k].key, buf);
            }
            fprintf(f, "}}");
        }
        fprintf(f, "],\"knobs\":[");
        for (size_t k = 0; k < sq_scheme_nknobs; k++)
            fprintf(f, "%s{\"key\":\"%s\",\"values\":\"%s\",\"help\":\"%s\"}", k ? "," : "",
                   sq_scheme_knobs[k].key, sq_scheme_knobs[k].values, sq_scheme_knobs[k].help);
        fprintf(f, "]}\n");
        return;
    }
    fprintf(f, "presets:\n");
    for (size_t p = 0; p < sq_scheme_npresets; p++)
        fprintf(f, "  %-9s %s\n", sq_scheme_presets[p], preset_help[p]);
    int kw = 20; /* the longest key */
    for (size_t k = 0; k < sq_scheme_nknobs; k++)
        if ((int)strlen(sq_scheme_knobs[k].key) > kw) kw = (int)strlen(sq_scheme_knobs[k].key);
    fprintf(f, "\nknob values of each preset (- : the value of baseline):\n%-*s", kw, "");
    for (size_t p = 0; p < sq_scheme_npresets; p++) fprintf(f, " %-9s", sq_scheme_presets[p]);
    fprintf(f, "\n");
    sq_scheme base;
    sq_scheme_preset("baseline", &base, NULL);
    for (size_t k = 0; k < sq_scheme_nknobs; k++) {
        fprintf(f, "%-*s", kw, sq_scheme_knobs[k].key);
        char b0[64];
        sq_scheme_get(&base, sq_scheme_knobs[k].key, b0, sizeof b0);
        for (size_t p = 0; p < sq_scheme_npresets; p++) {
            sq_scheme_preset(sq_scheme_presets[p], &s, NULL);
            sq_scheme_get(&s, sq_scheme_knobs[k].key, buf, sizeof buf);
            fprintf(f, " %-9s", p && !strcmp(buf, b0) ? "-" : buf);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\nknobs (grad.KEY sets grad.intra.KEY and grad.inter.KEY at once):\n");
    for (size_t k = 0; k < sq_scheme_nknobs; k++)
        fprintf(f, "  %-*s %-28s %s\n", kw, sq_scheme_knobs[k].key, sq_scheme_knobs[k].values,
               sq_scheme_knobs[k].help);
    fprintf(f, "\nA wire of 16 or 32 bits is unquantized bf16 or fp32; the other knobs of\n"
           "that wire are then ignored. On one node (K = 1) or one worker per node\n"
           "(G = 1) the two-level path falls back to one all-to-all with the intra\n"
           "(K = 1) or inter (G = 1) wire, as SDP4Bit does; one worker communicates\n"
           "nothing. The grad.powersgd.* knobs act under grad.mode=powersgd only.\n");
}

static const char *human(double bytes, char *buf, size_t len)
{
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int i = 0;
    while (bytes >= 1000 && i < 4) bytes /= 1000, i++;
    snprintf(buf, len, i ? "%.3g %s" : "%.0f %s", bytes, u[i]);
    return buf;
}

/* bits per element in a 10-wide column; "-" when there is no model */
static const char *bits_text(double bits, char *buf, size_t len)
{
    if (!isfinite(bits)) snprintf(buf, len, "-");
    else snprintf(buf, len, bits < 10000 ? "%.4f" : "%.0f", bits);
    return buf;
}

void sq_world_print_times(FILE *f, const sq_world *w, int json)
{
    for (int c = 0; c < SQ_NCOLL; c++) {
        sq_coll_time t = sq_world_times(w, c);
        if (json)
            fprintf(f, "%s\"%s\":{\"calls\":%llu,\"seconds\":%.6f,\"intra_seconds\":%.6f,"
                   "\"inter_seconds\":%.6f}", c ? "," : "", sq_coll_name(c),
                   (unsigned long long)t.calls, t.seconds, t.link_seconds[SQ_LINK_INTRA],
                   t.link_seconds[SQ_LINK_INTER]);
        else if (t.calls)
            fprintf(f, "  %-19s %4llu calls %10.4f s  in the transport: intra %.4f s, inter %.4f s\n",
                   sq_coll_name(c), (unsigned long long)t.calls, t.seconds,
                   t.link_seconds[SQ_LINK_INTRA], t.link_seconds[SQ_LINK_INTER]);
    }
}

static void print_traffic_json(FILE *f, const sq_world *w, const sq_output_digest *dg)
{
    fprintf(f, "\"traffic\":{");
    for (int c = 0; c < SQ_NCOLL; c++) {
        fprintf(f, "%s\"%s\":{", c ? "," : "", sq_coll_name(c));
        for (int l = 0; l < SQ_NLINK; l++) {
            sq_level_traffic s = sq_world_level_traffic(w, c, l);
            fprintf(f, "%s\"%s\":{\"sent_codes\":%llu,\"sent_meta\":%llu,\"sent_bytes\":%llu,"
                   "\"recv_bytes\":%llu,\"max_sent_per_worker\":%llu,\"elements\":%llu,"
                   "\"messages\":%llu,\"bits_per_element\":%.6f",
                   l ? "," : "", sq_link_name(l), (unsigned long long)s.codes,
                   (unsigned long long)s.meta, (unsigned long long)(s.codes + s.meta),
                   (unsigned long long)s.recv, (unsigned long long)s.max_sent,
                   (unsigned long long)s.elems, (unsigned long long)s.messages, sq_level_bits_per_elem(&s));
            fprintf(f, ",\"real_elements\":%llu,\"bits_per_param\":", (unsigned long long)s.params);
            sq_json_num(f, sq_level_bits_per_param(&s));
            fprintf(f, ",\"padding_overhead\":");
            sq_json_num(f, sq_level_padding_overhead(&s));
            fprintf(f, "}");
        }
        fprintf(f, "}");
    }
    fprintf(f, "},\"per_worker\":[");
    for (int r = 0; r < sq_world_workers(w); r++) {
        const sq_traffic *t = sq_world_traffic(w, r);
        fprintf(f, "%s{\"worker\":%d,\"node\":%d", r ? "," : "", r, r / sq_world_topo(w)->per_node);
        if (dg)
            fprintf(f, ",\"wire_digest\":\"%016llx\",\"grad_digest\":\"%016llx\","
                   "\"weight_digest\":\"%016llx\"", (unsigned long long)sq_world_wire_digest(w, r),
                   (unsigned long long)dg[r].grad, (unsigned long long)dg[r].weight);
        for (int c = 0; c < SQ_NCOLL; c++) {
            fprintf(f, ",\"%s\":{", sq_coll_name(c));
            for (int l = 0; l < SQ_NLINK; l++) {
                const sq_link_traffic *x = &t->t[c][l];
                fprintf(f, "%s\"%s\":{\"sent_codes\":%llu,\"sent_meta\":%llu,\"recv_codes\":%llu,"
                       "\"recv_meta\":%llu}",
                       l ? "," : "", sq_link_name(l), (unsigned long long)x->sent_codes,
                       (unsigned long long)x->sent_meta, (unsigned long long)x->recv_codes,
                       (unsigned long long)x->recv_meta);
            }
            fprintf(f, "}");
        }
        fprintf(f, "}");
    }
    fprintf(f, "]");
}

static void print_traffic_table(FILE *f, const sq_world *w)
{
    char a[32], b[32], c[32], d[32];
    fprintf(f, "\nbytes of one iteration, sent, all workers together:\n");
    fprintf(f, "  %-19s %-6s %11s %11s %11s %14s %10s %10s\n", "collective", "link", "codes", "meta",
           "total", "max per worker", "bits/elem", "bits/param");
    for (int col = 0; col < SQ_NCOLL; col++)
        for (int l = 0; l < SQ_NLINK; l++) {
            sq_level_traffic s = sq_world_level_traffic(w, col, l);
            char e[32];
            fprintf(f, "  %-19s %-6s %11s %11s %11s %14s %10.4f %10s\n", sq_coll_name(col),
                   sq_link_name(l), human((double)s.codes, a, sizeof a),
                   human((double)s.meta, b, sizeof b), human((double)(s.codes + s.meta), c, sizeof c),
                   human((double)s.max_sent, d, sizeof d), sq_level_bits_per_elem(&s),
                   bits_text(sq_level_bits_per_param(&s), e, sizeof e));
        }
    sq_level_traffic inter = sq_world_level_traffic(w, 0, SQ_LINK_INTER), ginter = sq_world_level_traffic(w, 1, SQ_LINK_INTER);
    int K = sq_world_topo(w)->nodes;
    fprintf(f, "  inter-node bytes per node: %s\n",
           human((double)(inter.codes + inter.meta + ginter.codes + ginter.meta) / K, a, sizeof a));
}

void sq_world_print_traffic(FILE *f, const sq_world *w, const sq_output_digest *dg, int json)
{
    if (json) print_traffic_json(f, w, dg);
    else print_traffic_table(f, w);
}

void sq_world_print(FILE *f, const sq_world *w, const sq_world_config *cfg,
                    const char *preset, int json)
{
    char canon[SQ_SCHEME_STRLEN];
    sq_scheme_format(&cfg->scheme, canon, sizeof canon);
    const sq_topo *tp = sq_world_topo(w);
    const uint64_t elements = cfg->elements;
    const int run = !cfg->dry;
    if (json) {
        fprintf(f, "{\"topology\":{\"nodes\":%d,\"per_node\":%d,\"workers\":%d},"
               "\"scheme\":{\"preset\":\"%s\",\"canonical\":\"%s\"},\"grad_path\":\"%s\","
               "\"elements\":%llu,\"padded\":%llu,\"pad_unit\":%llu,\"shard\":%llu,"
               "\"data_moved\":%s,\"seed\":%llu,\"device\":\"%s\",\"padding_overhead\":%.6f",
               tp->nodes, tp->per_node, sq_world_workers(w), preset, canon,
               path_name(sq_world_grad_path(w)), (unsigned long long)elements,
               (unsigned long long)sq_world_padded(w), (unsigned long long)sq_world_pad_unit(w),
               (unsigned long long)sq_world_shard(w), run ? "true" : "false",
               (unsigned long long)cfg->seed, run ? cfg->device : "none",
               (double)sq_world_padded(w) / (double)elements);
        if (sq_world_residual_bytes(w)) /* only with error feedback */
            fprintf(f, ",\"residual_bytes_per_worker\":%llu",
                   (unsigned long long)sq_world_residual_bytes(w));
        return;
    }
    fprintf(f, "world %dx%d (%d workers), scheme %s, gradient path %s\n  %s\n"
           "elements %llu, padded to %llu (unit %llu, x%.4f), shard %llu per worker\n",
           tp->nodes, tp->per_node, sq_world_workers(w), preset,
           path_name(sq_world_grad_path(w)), canon, (unsigned long long)elements,
           (unsigned long long)sq_world_padded(w), (unsigned long long)sq_world_pad_unit(w),
           (double)sq_world_padded(w) / (double)elements, (unsigned long long)sq_world_shard(w));
    if (sq_world_residual_bytes(w)) {
        char hb[32];
        fprintf(f, "error feedback: %s of residuals per worker\n",
               human((double)sq_world_residual_bytes(w), hb, sizeof hb));
    }
}
