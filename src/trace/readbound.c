/*
** readbound.c -- the reader alone: what reading a trace costs when nothing
** else is done with the values, the bound a replay's GB/s is measured
** against (sq_trace_time_reader, trace.h).
**
** It reads the way the replay's tiled staging reads (readtiles.h): each
** tensor in tiles spread over the library's threads, converted to fp32
** into a buffer of the thread, the file's pages dropped behind. So the
** figure is the best the replay's own reading could reach, not a plain
** copy of the files.
*/
#include "shardq/trace.h"
#include "sq_clock.h"
#include "trace/readtiles.h"

#include <stdlib.h>

/* Reads param p of one file of an opened step tile by tile; nonzero when a
** tile could not be converted (a value the whole load would name). */
static int read_tiles(sq_trace_step *ts, int worker, size_t p, uint64_t n)
{
    const uint64_t ntiles = (n + SQ_READ_TILE - 1) / SQ_READ_TILE;
    int failed = 0;
#pragma omp parallel num_threads(sq_get_threads()) reduction(| : failed) if (ntiles > 1)
    {
        float *x = malloc(SQ_READ_TILE * sizeof *x);
        uint64_t kept = UINT64_MAX; /* the first element read and not yet dropped */
        if (!x) failed = 1;
#pragma omp for schedule(static)
        for (uint64_t k = 0; k < ntiles; k++) {
            if (failed) continue;
            const uint64_t a = k * SQ_READ_TILE;
            const uint64_t len = n - a < SQ_READ_TILE ? n - a : SQ_READ_TILE;
            if (kept == UINT64_MAX) kept = a;
            if (a + len - kept >= SQ_READ_RELEASE) {
                sq_trace_release_part(ts, worker, p, kept, a - kept);
                kept = a;
            }
            if (sq_trace_load_part(ts, worker, p, a, len, x) != SQ_OK) failed = 1;
        }
        free(x);
    }
    sq_trace_release(ts, worker, p);
    return failed;
}

/* Reads param p of one file: in tiles, or whole where tiles cannot be read
** (an .npy trace) or one failed (then sq_trace_load names the value). */
static int read_tensor(sq_trace_step *ts, int worker, size_t p, float **buf, uint64_t *cap,
                       sq_error *err)
{
    const uint64_t n = ts->trace->params[p].n;
    if (!ts->npy && read_tiles(ts, worker, p, n) == 0) return SQ_OK;
    if (*cap < n) {
        float *b = realloc(*buf, (size_t)n * sizeof *b);
        if (!b)
            return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory for %llu values",
                                sq_trace_file_name(ts, worker), (unsigned long long)n);
        *buf = b, *cap = n;
    }
    return sq_trace_load(ts, worker, p, *buf, NULL, err);
}

int sq_trace_time_reader(const sq_trace *t, size_t nsteps, int weights, int ngrads,
                         double *seconds, uint64_t *bytes, sq_error *err)
{
    *seconds = 0, *bytes = 0;
    if (nsteps > t->nsteps) nsteps = t->nsteps;
    const int K = ngrads < t->workers ? ngrads : t->workers;
    float *buf = NULL;
    uint64_t cap = 0, total = 0;
    int rc = SQ_OK;
    const double t0 = sq_clock_s();
    for (size_t s = 0; s < nsteps && !rc; s++) {
        sq_trace_step ts;
        const int wstep = weights && sq_trace_step_has_weights(t, s);
        if ((rc = sq_trace_step_open(t, s, wstep, K, &ts, err))) break;
        for (size_t p = 0; p < t->nparams && !rc; p++) {
            if (wstep && !(rc = read_tensor(&ts, -1, p, &buf, &cap, err)))
                total += sq_trace_tensor_bytes(&ts, -1, p);
            for (int w = 0; w < K && !rc; w++)
                if (!(rc = read_tensor(&ts, w, p, &buf, &cap, err)))
                    total += sq_trace_tensor_bytes(&ts, w, p);
        }
        sq_trace_step_close(&ts);
    }
    free(buf);
    if (rc) return rc;
    *seconds = sq_clock_s() - t0;
    *bytes = total;
    return SQ_OK;
}
