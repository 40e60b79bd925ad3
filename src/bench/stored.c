/*
** stored.c -- what a stored bench run says about this machine's
** quantization kernels (bench.h), for a cost model to use instead of a
** datasheet's figure.
*/
#include "shardq/bench.h"

#include "shardq/store_rows.h"

#include <stdio.h>
#include <string.h>

int sq_bench_stored_quant(sq_store *s, sq_bench_quant *out, sq_error *err)
{
    if (!s || !out) return sq_error_set(err, SQ_ERR_ARG, "no store or no result");
    memset(out, 0, sizeof *out);
    sq_store_quant_figure f;
    int rc = sq_store_bench_quant_figure(s, &f, err);
    if (rc) return rc;
    out->run = f.run;
    out->gb_per_s = f.gb_per_s;
    out->elements = f.elements;
    out->threads = f.threads;
    snprintf(out->device, sizeof out->device, "%s", f.device);
    if (out->gb_per_s <= 0)
        return sq_error_set(err, SQ_ERR_FORMAT, "bench run has no positive throughput");
    return SQ_OK;
}
