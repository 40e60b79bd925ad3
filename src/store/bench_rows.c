/*
** bench_rows.c -- what the bench's rows say of this machine's
** quantization kernels (store_rows.h), for bench/stored.c.
*/
#include "cursor_internal.h"

#include <stdio.h>
#include <string.h>

int sq_store_bench_quant_figure(sq_store *s, sq_store_quant_figure *out, sq_error *err)
{
    if (!s || !out) return sq_error_set(err, SQ_ERR_ARG, "no store or no result");
    memset(out, 0, sizeof *out);
    /* the newest finished run with quantize or dequantize rows, at its
    ** largest size and, there, its largest thread count */
    static const char sql[] =
        "WITH last AS (SELECT max(b.run_id) AS id FROM bench_results b JOIN runs r"
        "  ON r.id = b.run_id WHERE r.status = 'done' AND b.op IN ('quantize', 'dequantize')),"
        " big AS (SELECT max(elements) AS n FROM bench_results"
        "  WHERE run_id = (SELECT id FROM last) AND op IN ('quantize', 'dequantize')),"
        " thr AS (SELECT max(threads) AS t FROM bench_results WHERE run_id = (SELECT id FROM last)"
        "  AND elements = (SELECT n FROM big))"
        " SELECT (SELECT id FROM last), avg(gb_per_s), (SELECT n FROM big), (SELECT t FROM thr),"
        "  (SELECT device FROM runs WHERE id = (SELECT id FROM last)) FROM bench_results"
        " WHERE run_id = (SELECT id FROM last) AND op IN ('quantize', 'dequantize')"
        "  AND elements = (SELECT n FROM big) AND threads = (SELECT t FROM thr)";
    if (sq_store_version(s) < 3)
        return sq_error_set(err, SQ_ERR_NOTFOUND, "no bench results (schema version %d)",
                            sq_store_version(s));
    sqlite3_stmt *st = NULL;
    int rc;
    if (sqlite3_prepare_v2(sq_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) {
        rc = sq_error_set(err, SQ_ERR_IO, "%s", sqlite3_errmsg(sq_store_db(s)));
    } else if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_type(st, 0) == SQLITE_NULL) {
        rc = sq_error_set(err, SQ_ERR_NOTFOUND,
                          "no finished bench run with quantize or dequantize rows");
    } else {
        const unsigned char *dev = sqlite3_column_text(st, 4);
        out->run = sqlite3_column_int64(st, 0);
        out->gb_per_s = sqlite3_column_double(st, 1);
        out->elements = (uint64_t)sqlite3_column_int64(st, 2);
        out->threads = sqlite3_column_int(st, 3);
        snprintf(out->device, sizeof out->device, "%s", dev ? (const char *)dev : "?");
        rc = SQ_OK;
    }
    sqlite3_finalize(st);
    return rc;
}
