/*
** print.c -- the figures of `shardq bench` as text rows or JSON lines, the
** SDP4Bit Table 5 form and the torch peer's rows, written to a stream
** (shardq/bench.h, "printing"): the measuring's own layout, beside it.
*/
#include "shardq/bench.h"

#include <stdio.h>
#include <string.h>

void sq_bench_print_header(FILE *f, int gpu, const char *where, int threads)
{
    if (gpu)
        fprintf(f, "shardq bench: CUDA kernels on %s\n", where);
    else
        fprintf(f, "shardq bench: C reference on %s, %d threads available\n", where, threads);
    fprintf(f, "GB/s = (bytes read + bytes written) / time, the median of timed batches.\n"
           "copy: the input size copied %s,\n"
           "measured in the same run. vs no-H: a Hadamard kernel's throughput as a\n"
           "fraction of the same kernel without the transform.\n\n",
           gpu ? "device to device (cudaMemcpyAsync)" : "by memcpy with the same threads");
    fprintf(f, "%-15s %8s %7s %9s %10s %8s %8s  %s\n", "op", "size MB", "threads", "GB/s", "copy",
           "% copy", "vs no-H", "what");
}

/* Why a row stayed noisy, in front of what its op is: the op's own figure
** first, else its copy's; "" when steady. */
static const char *noisy_text(const sq_bench_result *r)
{
    static const char *const op[4] = {
        "", "NOISY (spread > 25% after 3 tries) ",
        "NOISY (under half of 1 thread's after 3 tries) ",
        "NOISY (spread > 25%, under half of 1 thread's after 3 tries) "};
    static const char *const copy[4] = {
        "", "NOISY copy (spread > 25% after 3 tries) ",
        "NOISY copy (under half of 1 thread's after 3 tries) ",
        "NOISY copy (spread > 25%, under half of 1 thread's after 3 tries) "};
    return r->noisy ? op[r->noisy & 3] : copy[r->copy_noisy & 3];
}

void sq_bench_print_row(FILE *f, const sq_bench_result *r, const char *device, int json,
                        int64_t run)
{
    if (json) {
        fprintf(f, "{\"op\":\"%s\",\"codec\":\"%s\",\"bytes_in\":%llu,\"threads\":%d,"
               "\"gbps\":%.4f,\"gbps_std\":%.4f,\"copy_gbps\":%.4f,\"percent_of_copy\":%.2f,",
               r->op->name, r->codec, (unsigned long long)r->size_mb << 20, r->threads, r->gbs,
               r->gbs_std, r->copy_gbs, 100.0 * r->gbs / r->copy_gbs);
        if (r->twin_ratio >= 0)
            fprintf(f, "\"vs_without_hadamard\":%.4f,", r->twin_ratio);
        if (run > 0) fprintf(f, "\"run\":%lld,", (long long)run);
        fprintf(f, "\"noisy\":%s,\"copy_noisy\":%s,", r->noisy ? "true" : "false",
               r->copy_noisy ? "true" : "false");
        /* which of them by the 1-thread rule (SQ_BENCH_SLOW) */
        fprintf(f, "\"slow_vs_1_thread\":%s,\"copy_slow_vs_1_thread\":%s,",
               r->noisy & SQ_BENCH_NOISY_THREADS ? "true" : "false",
               r->copy_noisy & SQ_BENCH_NOISY_THREADS ? "true" : "false");
        fprintf(f, "\"device\":\"%s\"}\n", device);
    } else {
        char twin[16] = "", th[16] = "-";
        if (r->twin_ratio >= 0) snprintf(twin, sizeof twin, "%.1f%%", 100.0 * r->twin_ratio);
        if (r->threads > 0) snprintf(th, sizeof th, "%d", r->threads);
        /* a figure that stayed noisy says so, in front of what the op is */
        fprintf(f, "%-15s %8d %7s %9.2f %10.2f %7.1f%% %8s  %s%s\n", r->op->name, r->size_mb, th, r->gbs,
               r->copy_gbs, 100.0 * r->gbs / r->copy_gbs, twin,
               noisy_text(r), r->op->what);
    }
    fflush(f);
}

/* SDP4Bit's Table 5 form: one line per input size, quantize and dequantize
** without and with the fused Hadamard, GB/s +- std, here beside the copy.
** Printed for each bit width whose four rows ran at every size. */
void sq_bench_print_table5(FILE *f, const sq_bench_result *rows, int nsizes, int nops,
                           const int *sizes)
{
    static const char *const cols[2][4] = {
        {"quantize-nh", "quantize", "dequantize-nh", "dequantize"},
        {"quantize-8-nh", "quantize-8", "dequantize-8-nh", "dequantize-8"}};
    for (int w = 0; w < 2; w++) {
        const sq_bench_result *cell[16][4];
        int complete = 1;
        for (int si = 0; si < nsizes; si++)
            for (int c = 0; c < 4; c++) {
                cell[si][c] = NULL;
                for (int oi = 0; oi < nops; oi++) {
                    const sq_bench_result *r = &rows[si * nops + oi];
                    if (r->op && strcmp(r->op->name, cols[w][c]) == 0) cell[si][c] = r;
                }
                complete &= cell[si][c] != NULL;
            }
        if (!complete) continue;
        fprintf(f, "\nSDP4Bit Table 5 form, %d-bit, group 128, SR, Hadamard 32 (GB/s, median +- std):\n",
               w ? 8 : 4);
        fprintf(f, "%9s %16s %16s %16s %16s %16s\n", "input MB", "copy", "quant w/o HT", "quant w/ HT",
               "dequant w/o HT", "dequant w/ HT");
        for (int si = 0; si < nsizes; si++) {
            char fig[5][32];
            snprintf(fig[0], sizeof fig[0], "%.1f+-%.1f", cell[si][0]->copy_gbs,
                     cell[si][0]->copy_std);
            for (int c = 0; c < 4; c++)
                snprintf(fig[c + 1], sizeof fig[c + 1], "%.1f+-%.1f", cell[si][c]->gbs,
                         cell[si][c]->gbs_std);
            fprintf(f, "%9d %16s %16s %16s %16s %16s\n", sizes[si], fig[0], fig[1], fig[2],
                    fig[3], fig[4]);
        }
    }
}

/* The peer's two rows after shardq's row r: GB/s over the same bytes, so
** that the ratio is shardq's speedup. */
int sq_bench_print_peer(FILE *f, const sq_bench_result *r, const char *python, double min_time,
                        int json, sq_error *err)
{
    double sec[2];
    int rc = sq_bench_peer_time(python, r->op->name, r->elements, r->threads, min_time,
                                &sec[0], &sec[1], err);
    if (rc != SQ_OK) return rc;
    static const char *const style[2] = {"plain", "chunked"};
    static const char *const what[2] = {"PyTorch as usually written", "PyTorch, cache-chunked"};
    for (int k = 0; k < 2; k++) {
        double gbs = r->bytes / sec[k] / 1e9, ratio = r->gbs / gbs;
        if (json)
            fprintf(f, "{\"peer\":\"torch\",\"style\":\"%s\",\"op\":\"%s\",\"bytes_in\":%llu,"
                   "\"threads\":%d,\"gbps\":%.4f,\"shardq_gbps\":%.4f,\"speedup\":%.3f}\n",
                   style[k], r->op->name, (unsigned long long)r->size_mb << 20, r->threads, gbs,
                   r->gbs, ratio);
        else
            fprintf(f, "  torch-%-8s %8d %7d %9.3f %10.2f %7.1f%% %8s  %s: shardq %.1fx\n", style[k],
                   r->size_mb, r->threads, gbs, r->copy_gbs, 100.0 * gbs / r->copy_gbs, "",
                   what[k], ratio);
    }
    fflush(f);
    return SQ_OK;
}
