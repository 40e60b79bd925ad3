/*
** synth.c -- synthetic weights and gradients (synth.h).
*/
#include "shardq/synth.h"

#include <math.h>
#include <string.h>

/* Philox sites of the synthetic data: above every site the codecs use. */
#define SITE_SYNTH_WEIGHTS 200
#define SITE_SYNTH_GRADS 201

int sq_synth_parse_kind(const char *name)
{
    if (!name) return SQ_ERR_SPEC;
    if (!strcmp(name, "normal")) return SQ_SYNTH_NORMAL;
    if (!strcmp(name, "heavy")) return SQ_SYNTH_HEAVY;
    if (!strcmp(name, "outliers")) return SQ_SYNTH_OUTLIERS;
    return SQ_ERR_SPEC;
}

const char *sq_synth_kind_name(int kind)
{
    return kind == SQ_SYNTH_HEAVY ? "heavy" : kind == SQ_SYNTH_OUTLIERS ? "outliers" : "normal";
}

/* n standard normals (Box-Muller over pairs of 24-bit Philox uniforms). */
static void normals(uint64_t seed, uint32_t step, uint32_t worker, uint32_t site, float *out,
                    uint64_t n, float *u)
{
    sq_rng_key key = {seed, step, worker, site};
    sq_uniform24_n(&key, 0, 2 * n, u);
    for (uint64_t i = 0; i < n; i++) {
        double r = sqrt(-2.0 * log(1.0 - (double)u[2 * i]));
        out[i] = (float)(r * cos(6.283185307179586 * (double)u[2 * i + 1]));
    }
}

void sq_synth_weights(uint64_t seed, float *w, uint64_t n, float *u)
{
    normals(seed, 0, 0, SITE_SYNTH_WEIGHTS, w, n, u);
    for (uint64_t i = 0; i < n; i++) w[i] *= 0.02f;
}

void sq_synth_grad_stream(uint64_t seed, uint32_t stream, uint32_t step, int r, int kind,
                          uint64_t n, float *g, float *tmp, float *u)
{
    /* stream s > 0 moves the seed, so tensors of one step differ */
    seed ^= (uint64_t)stream << 40;
    normals(seed, step, 0xffffff, SITE_SYNTH_GRADS, g, n, u);
    normals(seed, step, (uint32_t)r, SITE_SYNTH_GRADS, tmp, n, u);
    for (uint64_t i = 0; i < n; i++) g[i] = 1e-3f * (g[i] + tmp[i]);
    if (kind == SQ_SYNTH_HEAVY) {
        /* Student's t with 6 degrees of freedom: z / sqrt(chi2_6 / 6) */
        sq_rng_key key = {seed, step, (uint32_t)r, SITE_SYNTH_GRADS + 1};
        sq_uniform24_n(&key, 0, 3 * n, u);
        for (uint64_t i = 0; i < n; i++) {
            double chi = 0; /* -2 ln u is chi-squared with 2 dof: three make 6 */
            for (int j = 0; j < 3; j++) chi += -2.0 * log(1.0 - (double)u[3 * i + (uint64_t)j]);
            g[i] = (float)((double)g[i] / sqrt(chi / 6.0 + 1e-12));
        }
    } else if (kind == SQ_SYNTH_OUTLIERS) {
        for (uint64_t i = 0; i < n; i++)
            if (u[2 * i] < 1e-3f) g[i] *= 100.0f;
    }
}

void sq_synth_grad(uint64_t seed, uint32_t step, int r, int kind, uint64_t n, float *g, float *tmp,
                   float *u)
{
    sq_synth_grad_stream(seed, 0, step, r, kind, n, g, tmp, u);
}
