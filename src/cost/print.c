/*
** print.c -- the cost model's results written to a stream: the table of
** one prediction or of a sweep over GPU counts, their JSON, the rows of a
** validation beside the published figures, a calibration, and the built-in
** files; what `shardq model` prints, kept beside the model it describes.
*/
#include "shardq/cost.h"
#include "sq_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void print_header(FILE *f, const sq_cost_study *st, const char *quant, const sq_cost_point *pt)
{
    const sq_cost_result *b = &pt->base;
    int G = st->plat->gpus_per_node;
    fprintf(f, "%s on %s: %d GPUs (%d node%s x %d), TP %d, PP %d, DP %d; micro-batch %d, "
           "accumulation %d (global batch %d sequences of %d); %s; overlap %s\n",
           st->model->name, st->plat->name, pt->gpus, (pt->gpus + G - 1) / G,
           (pt->gpus + G - 1) / G == 1 ? "" : "s", pt->gpus < G ? pt->gpus : G, st->par.tp,
           st->par.pp, b->dp, st->par.micro_batch, st->par.accum,
           b->dp * st->par.micro_batch * st->par.accum, st->model->seq,
           st->par.system == SQ_COST_ZERO3 ? (st->par.hpz ? "ZeRO-3, hpZ for the schemes" : "ZeRO-3")
                                          : "Megatron distributed optimizer",
           st->par.overlap ? "on" : "off");
    fprintf(f, "  %.4g parameters, %.4g per rank (the largest stage); a data-parallel group spans "
           "%d node%s x %d GPU%s, %d group%s per node\n",
           (double)b->params, (double)b->params_per_rank, b->dp_nodes, b->dp_nodes == 1 ? "" : "s",
           b->dp_per_node, b->dp_per_node == 1 ? "" : "s", b->groups_per_node,
           b->groups_per_node == 1 ? "" : "s");
    fprintf(f, "  %.3g TFLOP/s achieved per GPU; quantization kernels %.4g GB/s (%s)\n",
           st->plat->achieved_flops / 1e12, st->plat->quant_bw / 1e9, quant);
}

static void print_row(FILE *f, const char *name, const sq_cost_result *c, const sq_cost_result *base)
{
    fprintf(f, "  %-10s %8.1f %9.1f %9.1f %8.1f %7.1f %6.1f %10.1f %8.1f %7.2fx %12.3f\n", name,
           1e3 * c->compute, 1e3 * (c->tp + c->bubble), 1e3 * c->weight, 1e3 * c->grad,
           1e3 * c->quant, 1e3 * c->optimizer, 1e3 * c->iteration, c->tflops,
           sq_cost_speedup(base, c), (double)c->inter_bytes_per_node / 1e9);
}

void sq_cost_print_point(FILE *f, const sq_cost_study *st, const char *quant, const sq_cost_point *pt)
{
    print_header(f, st, quant, pt);
    fprintf(f, "\n  %-10s %8s %9s %9s %8s %7s %6s %10s %8s %8s %12s\n", "scheme", "compute",
           "TP+bubble", "weight AG", "grad RS", "quant", "optim", "iteration", "TFLOP/s",
           "speedup", "network/node");
    fprintf(f, "  %-10s %8s %9s %9s %8s %7s %6s %10s %8s %8s %12s\n", "", "ms", "ms", "ms", "ms",
           "ms", "ms", "ms", "per GPU", "", "GB/iter");
    for (int i = 0; i < st->nschemes; i++) print_row(f, st->names[i], &pt->cost[i], &pt->base);
}

void sq_cost_print_sweep(FILE *f, const sq_cost_study *st, const char *quant, const sq_cost_point *pts, int n)
{
    print_header(f, st, quant, &pts[n - 1]);
    fprintf(f, "\n  speedup over baseline by GPU count (baseline TFLOP/s per GPU beside):\n");
    fprintf(f, "  %6s %9s", "GPUs", "baseline");
    for (int i = 0; i < st->nschemes; i++) fprintf(f, " %9s", st->names[i]);
    fprintf(f, "\n");
    for (int k = 0; k < n; k++) {
        fprintf(f, "  %6d %7.1f  ", pts[k].gpus, pts[k].base.tflops);
        for (int i = 0; i < st->nschemes; i++)
            fprintf(f, " %8.2fx", sq_cost_speedup(&pts[k].base, &pts[k].cost[i]));
        fprintf(f, "\n");
    }
}

static void json_cost(FILE *f, const char *name, const sq_cost_result *c, const sq_cost_result *base)
{
    static const char *const paths[] = {"ring", "a2a", "twolevel", "none", "powersgd"};
    fprintf(f, "{\"scheme\":");
    sq_json_str(f, name);
    const char *keys[] = {"compute_s", "tp_s", "bubble_s", "weight_s", "grad_s", "quant_s",
                          "optimizer_s", "iteration_s", "weight_comm_s", "grad_comm_s",
                          "quant_weight_s", "quant_grad_s", "tflops_per_gpu", "speedup"};
    double vals[] = {c->compute, c->tp, c->bubble, c->weight, c->grad, c->quant, c->optimizer,
                     c->iteration, c->weight_comm, c->grad_comm, c->quant_weight, c->quant_grad,
                     c->tflops, sq_cost_speedup(base, c)};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        fprintf(f, ",\"%s\":", keys[i]);
        sq_json_num(f, vals[i]);
    }
    fprintf(f, ",\"grad_path\":\"%s\",\"inter_bytes_per_node\":%llu,\"intra_bytes_per_gpu\":%llu,"
           "\"weight_inter_bytes_per_node\":%llu,\"weight_intra_bytes_per_gpu\":%llu,"
           "\"quant_bytes_per_gpu\":%llu}",
           paths[c->grad_path], (unsigned long long)c->inter_bytes_per_node,
           (unsigned long long)c->intra_bytes_per_gpu,
           (unsigned long long)c->weight_inter_bytes_per_node,
           (unsigned long long)c->weight_intra_bytes_per_gpu,
           (unsigned long long)c->quant_bytes_per_gpu);
}

void sq_cost_print_json(FILE *f, const sq_cost_study *st, const char *quant, const sq_cost_point *pts, int n)
{
    char cfg[2048];
    sq_cost_study c = *st; /* the config of the options, not of one point */
    c.par.gpus = 0;
    c.max_gpus = 0;
    sq_cost_study_config(&c, cfg, sizeof cfg);
    fprintf(f, "{\"config\":%s,\"quant_source\":", cfg);
    sq_json_str(f, quant);
    fprintf(f, ",\"points\":[");
    for (int k = 0; k < n; k++) {
        const sq_cost_result *b = &pts[k].base;
        fprintf(f, "%s{\"gpus\":%d,\"dp\":%d,\"dp_nodes\":%d,\"dp_per_node\":%d,"
               "\"groups_per_node\":%d,\"params\":%llu,\"params_per_rank\":%llu,"
               "\"model_flops\":",
               k ? "," : "", pts[k].gpus, b->dp, b->dp_nodes, b->dp_per_node, b->groups_per_node,
               (unsigned long long)b->params, (unsigned long long)b->params_per_rank);
        sq_json_num(f, b->model_flops);
        fprintf(f, ",\"baseline\":");
        json_cost(f, "baseline", b, b);
        fprintf(f, ",\"schemes\":[");
        for (int i = 0; i < st->nschemes; i++) {
            if (i) fputc(',', f);
            json_cost(f, st->names[i], &pts[k].cost[i], b);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
}

static void print_validated_json(FILE *f, const sq_cost_validation_row *row,
                                 const sq_cost_validated_row *vr, int first)
{
    fprintf(f, "%s{\"label\":", first ? "" : ",");
    sq_json_str(f, row->label);
    fprintf(f, ",\"tp\":%d,\"pp\":%d,\"baseline_tflops\":", row->tp, row->pp);
    sq_json_num(f, vr->base.tflops);
    fprintf(f, ",\"paper_baseline_tflops\":");
    sq_json_num(f, row->baseline_tflops);
    fprintf(f, ",\"scheme_tflops\":");
    sq_json_num(f, vr->scheme.tflops);
    fprintf(f, ",\"paper_scheme_tflops\":");
    sq_json_num(f, row->scheme_tflops);
    fprintf(f, ",\"speedup\":");
    sq_json_num(f, vr->speedup);
    fprintf(f, ",\"paper_speedup\":");
    sq_json_num(f, row->speedup);
    fprintf(f, ",\"error\":");
    sq_json_num(f, vr->error);
    fprintf(f, ",\"within\":%s,\"fitted_to_itself\":%s,\"fitted_figures\":",
           vr->out_of_tolerance ? "false" : "true", vr->fitted[0] ? "true" : "false");
    sq_json_str(f, vr->fitted);
    fprintf(f, "}");
}

void sq_cost_print_validation_head(FILE *f, const char *table, const sq_cost_validation *v,
                                  const sq_cost_platform *p, int json)
{
    if (json) {
        fprintf(f, "{\"table\":\"%s\",\"platform\":\"%s\",\"scheme\":\"%s\",\"rows\":[", table,
               p->name, v->scheme);
        return;
    }
    fprintf(f, "%s: %s against baseline on %s, %d GPUs, micro-batch %d, accumulation %d, overlap "
           "%s (tolerance %.0f%% on the speedup)\n\n  %-10s %5s  %17s  %17s  %17s  %7s\n",
           table, v->scheme, p->name, v->gpus, v->micro_batch, v->accum,
           v->overlap ? "on" : "off", 100 * v->tolerance, "model", "TP/PP",
           "baseline TFLOP/s", "scheme TFLOP/s", "speedup", "error");
    fprintf(f, "  %-10s %5s  %8s %8s  %8s %8s  %8s %8s\n", "", "", "model", "paper", "model",
           "paper", "model", "paper");
}

void sq_cost_print_validation_rows(FILE *f, const sq_cost_validation *v,
                                 const sq_cost_validation_report *rep, int json)
{
    for (int r = 0; r < rep->nrows; r++) {
        const sq_cost_validation_row *row = &v->rows[r];
        const sq_cost_validated_row *vr = &rep->rows[r];
        if (json)
            print_validated_json(f, row, vr, r == 0);
        else
            fprintf(f, "  %-10s %2d/%-2d  %8.1f %8.1f  %8.1f %8.1f  %7.2fx %7.2fx  %+6.1f%%%s%s\n",
                   row->label, row->tp, row->pp, vr->base.tflops, row->baseline_tflops,
                   vr->scheme.tflops, row->scheme_tflops, vr->speedup, row->speedup,
                   100 * vr->error, vr->out_of_tolerance ? "  OUT" : "",
                   vr->fitted[0] ? "  (fitted to itself)" : "");
    }
}

void sq_cost_print_validation_tail(FILE *f, const sq_cost_validation_report *rep,
                                  const sq_cost_platform *p, int json)
{
    const sq_cost_tally *pred = &rep->predicted, *self = &rep->self;
    if (json) {
        fprintf(f, "],\"worst_error\":%.6f,\"out_of_tolerance\":%d,", fmax(pred->worst, self->worst),
               pred->out + self->out);
        fprintf(f, "\"predicted\":{\"rows\":%d,\"out_of_tolerance\":%d,\"worst_error\":%.6f},"
               "\"fitted_to_itself\":{\"rows\":%d,\"out_of_tolerance\":%d,\"worst_error\":%.6f}}\n",
               pred->rows, pred->out, pred->worst, self->rows, self->out, self->worst);
        return;
    }
    fprintf(f, "\n  predicted rows: %d, worst speedup error %.1f%%, %d out of tolerance\n",
           pred->rows, 100 * pred->worst, pred->out);
    if (!self->rows) return;
    fprintf(f, "  rows that used a figure fitted to themselves: %d, worst speedup error %.1f%%, "
           "%d out of tolerance; they match by construction, not by prediction:\n",
           self->rows, 100 * self->worst, self->out);
    for (int k = 0; k < SQ_COST_NFIGURES; k++) {
        const sq_cost_source *src = &p->source[k];
        if (src->kind == SQ_COST_SRC_FITTED && !strcmp(src->fitted_to, rep->table_name))
            fprintf(f, "    %s fitted to %s%s%s%s%s\n", sq_cost_figure_key((sq_cost_figure)k),
                   src->fitted_to, src->rows[0] ? " rows " : " (every row)", src->rows,
                   src->note[0] ? ": " : "", src->note);
    }
}

void sq_cost_print_calibration_json(FILE *f, const sq_cost_calibration *cal,
                                   const sq_cost_measurements *ms, const char *out)
{
    fprintf(f, "{\"platform\":");
    sq_json_str(f, cal->start.name);
    fprintf(f, ",\"file\":");
    sq_json_str(f, out);
    fprintf(f, ",\"fitted\":{\"inter_gb_s\":");
    sq_json_num(f, cal->inter_bw / 1e9);
    fprintf(f, ",\"achieved_tflops\":");
    sq_json_num(f, cal->nparams == 2 ? cal->achieved_flops / 1e12 : NAN);
    fprintf(f, "},\"line_rate_gb_s\":");
    sq_json_num(f, cal->line_rate / 1e9);
    fprintf(f, ",\"iterations\":%d,\"rows\":[", cal->iterations);
    for (int i = 0; i < cal->nrows; i++) {
        fprintf(f, "%s{\"label\":", i ? "," : "");
        sq_json_str(f, ms->rows[i].label);
        fprintf(f, ",\"measured_s\":");
        sq_json_num(f, cal->measured_s[i]);
        fprintf(f, ",\"fitted_s\":");
        sq_json_num(f, cal->fitted_s[i]);
        fprintf(f, ",\"error\":");
        sq_json_num(f, cal->fitted_s[i] / cal->measured_s[i] - 1);
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
}

void sq_cost_print_calibration(FILE *f, const sq_cost_calibration *cal, const sq_cost_measurements *ms,
                              const char *file, const char *out)
{
    const sq_cost_platform *p0 = &cal->start;
    const int n = cal->nrows, iters = cal->iterations;
    const double E = cal->inter_bw, F = cal->achieved_flops, line = cal->line_rate;
    fprintf(f, "%s: %d measured baseline row%s on %s; fitted by least squares (%d Gauss-Newton "
           "step%s):\n", file, n, n == 1 ? "" : "s", p0->name, iters, iters == 1 ? "" : "s");
    fprintf(f, "  inter-node bandwidth %.4g GB/s per node (%.0f%% of the %.4g GB/s line rate of "
           "%d x %.4g GB/s cards)\n", E / 1e9, 100 * E / line, line / 1e9, p0->nics_per_node,
           p0->nic_bw / 1e9);
    if (cal->nparams == 2)
        fprintf(f, "  achieved compute   %.4g TFLOP/s per GPU (the platform said %.4g)\n",
               F / 1e12, p0->achieved_flops / 1e12);
    else
        fprintf(f, "  achieved compute   %.4g TFLOP/s per GPU, the platform's (one row fits the "
               "bandwidth alone)\n", F / 1e12);
    fprintf(f, "\n  %-16s %12s %12s %8s\n", "row", "measured ms", "fitted ms", "error");
    for (int i = 0; i < n; i++)
        fprintf(f, "  %-16s %12.1f %12.1f %+7.1f%%\n", ms->rows[i].label, 1e3 * cal->measured_s[i],
               1e3 * cal->fitted_s[i], 100 * (cal->fitted_s[i] / cal->measured_s[i] - 1));
    fprintf(f, "\nwrote %s (shardq model --platform %s)\n", out, out);
}

/* --list: the built-in platforms and models, one line each. */
void sq_cost_print_builtins(FILE *f)
{
    char name[128];
    fprintf(f, "platforms:\n");
    for (size_t i = 0; !sq_cost_builtin_name(SQ_COST_PLATFORM, i, name, sizeof name); i++) {
        sq_cost_platform p;
        if (sq_cost_platform_read(name, &p, NULL) == SQ_OK)
            fprintf(f, "  %-20s %d GPUs per node, %d nodes; %g TFLOP/s achieved; NVLink "
                   "%g GB/s; %d x %g GB/s network per node\n", name, p.gpus_per_node,
                   p.nodes, p.achieved_flops / 1e12, p.intra_bw / 1e9, p.nics_per_node,
                   p.nic_bw / 1e9);
    }
    fprintf(f, "models:\n");
    for (size_t i = 0; !sq_cost_builtin_name(SQ_COST_MODEL, i, name, sizeof name); i++) {
        sq_cost_model_shape m;
        if (sq_cost_model_read(name, &m, NULL) == SQ_OK)
            fprintf(f, "  %-20s %-9s %d layers, hidden %d, %d heads, vocabulary %d, sequence "
                   "%d (%.3g parameters)\n", name, m.name, m.layers, m.hidden, m.heads,
                   m.vocab, m.seq, (double)sq_cost_model_params(&m, 1));
    }
}
