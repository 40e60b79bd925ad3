/*
** step.c -- the measured step (step.h).
**
** The sums stay plain fp64 in worker order and element order, so that
** replay, world and train give the same figures whatever the threads.
*/
#include "shardq/metrics.h"
#include "metrics_internal.h"
#include "sq_hd.h"

#include <math.h>
#include <string.h>

void sq_step_exact_zero(const sq_world *w, double *exact)
{
    memset(exact, 0, (size_t)sq_world_padded(w) * sizeof *exact);
}

/* The wire of the gradient path's first quantization. */
static const sq_wire *first_grad_wire(const sq_world *w)
{
    return sq_world_grad_path(w) == SQ_GRAD_TWOLEVEL ? &sq_world_scheme(w)->grad_intra
                                                      : sq_world_single_wire(w);
}

uint64_t sq_step_add_grad(const sq_world *w, double *exact, const float *x32,
                          const double *x64, uint32_t copies, float *tmp)
{
    const uint64_t n = sq_world_elements(w);
    const double c = copies;
    /* element by element: the threads never change a sum's order */
    if (x64) {
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (n > 65536)
        for (uint64_t i = 0; i < n; i++) exact[i] += c * x64[i];
    } else {
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (n > 65536)
        for (uint64_t i = 0; i < n; i++) exact[i] += c * (double)x32[i];
    }
    return (uint64_t)copies * sq_step_grad_clipped(w, x32, n, tmp);
}

/* The codec of the gradient path's first quantization, or NULL where the
** gradients go unquantized (nothing clips). */
static const sq_codec *first_grad_codec(const sq_world *w)
{
    const sq_wire *gw = first_grad_wire(w);
    return sq_world_grad_path(w) == SQ_GRAD_NONE || sq_wire_raw(gw) ? NULL : &gw->codec;
}

uint64_t sq_step_grad_clipped(const sq_world *w, const float *x32, uint64_t len, float *tmp)
{
    const sq_scheme *sc = sq_world_scheme(w);
    const sq_codec *c = first_grad_codec(w);
    if (!c) return 0;
    float div = sc->grad_mean ? (float)sq_world_workers(w) : 1.0f;
    if (sc->grad_dtype != SQ_GRAD_FP16) return sq_count_clipped_div(c, x32, len, div);
    /* grad.dtype=fp16: the quantizer sees the input rounded to fp16 */
    for (uint64_t i = 0; i < len; i++) tmp[i] = sq_hd_round_f16(x32[i] / div);
    return sq_count_clipped(c, tmp, len);
}

uint64_t sq_step_grad_group(const sq_world *w)
{
    const sq_codec *c = first_grad_codec(w);
    return c && c->group ? c->group : 1;
}

void sq_step_exact_mean(const sq_world *w, double *exact)
{
    if (!sq_world_scheme(w)->grad_mean) return;
    const int N = sq_world_workers(w);
    const uint64_t n = sq_world_elements(w);
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (n > 65536)
    for (uint64_t i = 0; i < n; i++) exact[i] /= (double)N;
}

int sq_step_grad_error(sq_world *w, const double *exact, float *whole, float *shard,
                       sq_erracc *e)
{
    const int N = sq_world_workers(w);
    const uint64_t S = sq_world_shard(w);
    for (int r = 0; r < N; r++) {
        uint64_t first = (uint64_t)r * S;
        float *out = whole ? whole + first : shard;
        int rc = sq_world_get_grad_shard(w, r, out);
        if (rc) return rc;
        if (e && exact) sq_erracc_add(e, out, exact + first, sq_world_shard_len(w, r));
    }
    return SQ_OK;
}

uint64_t sq_step_weight_clipped(const sq_world *w, const float *master, const float *what,
                                uint64_t len, float *tmp)
{
    const sq_scheme *sc = sq_world_scheme(w);
    if (sq_wire_raw(&sc->weight) || sq_world_workers(w) < 2) return 0;
    /* what the sender quantizes (sq_quantize_diff_bf16 ... under weight.recon=bf16) */
    const int bf16 = sc->weight_recon == SQ_RECON_BF16;
    if (sc->weight_mode == SQ_WEIGHT_DIFF) {
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (len > 65536)
        for (uint64_t i = 0; i < len; i++)
            tmp[i] = bf16 ? sq_hd_bf16_diff(master[i], what[i]) : master[i] - what[i];
    } else if (bf16) {
#pragma omp parallel for simd num_threads(sq_get_threads()) schedule(static) if (len > 65536)
        for (uint64_t i = 0; i < len; i++) tmp[i] = sq_hd_bf16_round(master[i]);
    } else
        memcpy(tmp, master, (size_t)len * sizeof *tmp);
    return sq_count_clipped(&sc->weight.codec, tmp, len);
}

int sq_step_replicas_of(int workers, uint64_t n, sq_step_replica_fn get, void *ctx, float *what,
                        float *tmp, int *differs)
{
    *differs = 0;
    int rc = get(ctx, 0, what);
    if (rc) return rc;
    for (int r = 1; r < workers; r++) {
        if ((rc = get(ctx, r, tmp))) return rc;
        /* bytes, not values: -0 against +0 or two NaNs are a divergence too */
        if (memcmp(tmp, what, (size_t)n * sizeof *tmp) != 0) {
            *differs = r;
            return SQ_OK;
        }
    }
    return SQ_OK;
}

static int world_replica(void *ctx, int r, float *out)
{
    return sq_world_get_weights(ctx, r, out);
}

int sq_step_replicas(sq_world *w, float *what, float *tmp, int *differs)
{
    /* worker 0's copy to every process, then each replica against it where
    ** it lives (one rank per process: only the verdicts travel) */
    int rc = world_replica(w, 0, what);
    return rc ? rc : sq_world_replicas_differ(w, what, tmp, differs);
}

int sq_step_replicas_view(sq_world *w, float *what, float *tmp, const float **w0, int *differs)
{
    const float *held = sq_world_local_rank(w) < 0 ? sq_world_weights_in_place(w, 0) : NULL;
    *w0 = held ? held : what;
    return held ? sq_world_replicas_differ(w, held, tmp, differs)
                : sq_step_replicas(w, what, tmp, differs);
}

double sq_step_frac(uint64_t count, uint64_t of)
{
    return of ? (double)count / (double)of : NAN;
}
