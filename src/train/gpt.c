/*
** gpt.c -- the byte-level GPT-2-style model: its params, their
** initialisation, the workspace of activations, and the forward and backward
** of the whole model, built from the layers of gpt_layers.c.
*/
#include "shardq/train.h"

#include "shardq/codec.h"
#include "train/gpt_layers.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Params per layer and their offsets from the layer's first. */
enum {
    P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_APW, P_APB,
    P_LN2W, P_LN2B, P_FCW, P_FCB, P_MPW, P_MPB, P_PER_LAYER
};
#define P_WTE 0
#define P_WPE 1
#define P_LAYER(l) (2 + (size_t)P_PER_LAYER * (size_t)(l))

/* ------------------------------------------------------------------------ */
/* Shapes                                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t mul_chk(uint64_t a, uint64_t b, int *overflow)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) *overflow = 1;
    return r;
}

static uint64_t add_chk(uint64_t a, uint64_t b, int *overflow)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) *overflow = 1;
    return r;
}

/* Elements of all params, with an overflow flag. */
static uint64_t elements_chk(const sq_gpt_config *c, int *ov)
{
    const uint64_t C = (uint64_t)c->channels, L = (uint64_t)c->layers;
    /* per layer: 12 C^2 weights + 13 C biases and gains */
    uint64_t layer = add_chk(mul_chk(12, mul_chk(C, C, ov), ov), mul_chk(13, C, ov), ov);
    uint64_t n = mul_chk(SQ_GPT_VOCAB, C, ov);
    n = add_chk(n, mul_chk((uint64_t)c->context, C, ov), ov);
    n = add_chk(n, mul_chk(L, layer, ov), ov);
    return add_chk(n, mul_chk(2, C, ov), ov);
}

int sq_gpt_validate(const sq_gpt_config *c, sq_error *err)
{
    if (c->layers < 1 || c->channels < 1 || c->heads < 1 || c->context < 1)
        return sq_error_set(err, SQ_ERR_SPEC, "layers %d, channels %d, heads %d, context %d: "
                            "each must be at least 1", c->layers, c->channels, c->heads,
                            c->context);
    if (c->channels % c->heads)
        return sq_error_set(err, SQ_ERR_SPEC, "channels %d is not a multiple of heads %d",
                            c->channels, c->heads);
    /* the widest matrix dimension, 4 C, is an int in the BLAS calls */
    if (c->channels > INT_MAX / 4)
        return sq_error_set(err, SQ_ERR_SPEC, "channels %d is too large: 4 x channels must fit "
                            "in an int (at most %d)", c->channels, INT_MAX / 4);
    /* the param index is the Philox step of the initialisation: 32 bits */
    if ((uint64_t)c->layers > (UINT32_MAX - 4) / P_PER_LAYER)
        return sq_error_set(err, SQ_ERR_SPEC, "layers %d is too large: at most %u", c->layers,
                            (unsigned)((UINT32_MAX - 4) / P_PER_LAYER));
    int ov = 0;
    uint64_t n = elements_chk(c, &ov);
    (void)mul_chk(n, sizeof(float), &ov); /* the bytes of the params, and of their grads */
    if (ov || n > SIZE_MAX / sizeof(float))
        return sq_error_set(err, SQ_ERR_SPEC, "layers %d, channels %d, context %d: the number "
                            "of param elements overflows", c->layers, c->channels, c->context);
    return SQ_OK;
}

size_t sq_gpt_nparams(const sq_gpt_config *c)
{
    return 4 + (size_t)P_PER_LAYER * (size_t)c->layers;
}

static void set_param(sq_gpt_param *p, const char *name, uint64_t rows, uint64_t cols, int decay)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = cols ? 2 : 1;
    p->shape[0] = rows;
    p->shape[1] = cols;
    p->n = cols ? rows * cols : rows;
    p->decay = decay;
}

/* The params of a layer: shapes in units of C (cols 0: a vector). */
static const struct {
    const char *suffix;
    uint64_t rows, cols;
    int decay;
} lay[P_PER_LAYER] = {
    [P_LN1W] = {"ln1.w", 1, 0, 0},      [P_LN1B] = {"ln1.b", 1, 0, 0},
    [P_QKVW] = {"attn.qkv.w", 3, 1, 1}, [P_QKVB] = {"attn.qkv.b", 3, 0, 0},
    [P_APW] = {"attn.proj.w", 1, 1, 1}, [P_APB] = {"attn.proj.b", 1, 0, 0},
    [P_LN2W] = {"ln2.w", 1, 0, 0},      [P_LN2B] = {"ln2.b", 1, 0, 0},
    [P_FCW] = {"mlp.fc.w", 4, 1, 1},    [P_FCB] = {"mlp.fc.b", 4, 0, 0},
    [P_MPW] = {"mlp.proj.w", 1, 4, 1},  [P_MPB] = {"mlp.proj.b", 1, 0, 0},
};

void sq_gpt_params(const sq_gpt_config *c, sq_gpt_param *p)
{
    const uint64_t C = (uint64_t)c->channels;
    set_param(&p[P_WTE], "wte", SQ_GPT_VOCAB, C, 1);
    set_param(&p[P_WPE], "wpe", (uint64_t)c->context, C, 1);
    for (int l = 0; l < c->layers; l++)
        for (int k = 0; k < P_PER_LAYER; k++) {
            char name[SQ_GPT_NAMELEN];
            snprintf(name, sizeof name, "h.%d.%s", l, lay[k].suffix);
            set_param(&p[P_LAYER(l) + k], name, lay[k].rows * C, lay[k].cols * C, lay[k].decay);
        }
    set_param(&p[P_LAYER(c->layers)], "lnf.w", C, 0, 0);
    set_param(&p[P_LAYER(c->layers) + 1], "lnf.b", C, 0, 0);
}

uint64_t sq_gpt_elements(const sq_gpt_config *c)
{
    int ov = 0;
    return elements_chk(c, &ov);
}

/* ------------------------------------------------------------------------ */
/* Initialisation                                                           */
/* ------------------------------------------------------------------------ */

static float bf16_round(float x) { return sq_bf16_to_f32(sq_f32_to_bf16(x)); }

/* x[j] = bf16(std * z_j), z_j standard normals by Box-Muller on the uniforms
** u_{2k}, u_{2k+1} (sq_uniform24) of (seed, step): z_{2k} = r cos(2 pi u_{2k+1}),
** z_{2k+1} = r sin(2 pi u_{2k+1}), r = sqrt(-2 ln(1 - u_{2k})). The uniforms
** lie in [0, 1) on a 2^-24 grid, so 1 - u is in (0, 1]: the log is finite
** (r at most sqrt(2 * 24 ln 2) = 5.77). The arithmetic is in double and the
** result is rounded to bf16, so libm's last-bit differences do not reach the
** stored bytes in practice. */
static void init_normal(float *x, uint64_t n, double std, uint64_t seed, uint32_t step)
{
    const sq_rng_key key = {seed, step, 0, SQ_GPT_INIT_SITE};
    enum { CHUNK = 4096 }; /* even */
    float u[CHUNK];
    const double two_pi = 6.283185307179586;
    for (uint64_t j0 = 0; j0 < n; j0 += CHUNK) {
        const uint64_t len = n - j0 < CHUNK ? n - j0 : CHUNK;
        const uint64_t nu = (len + 1) & ~(uint64_t)1; /* whole pairs */
        sq_uniform24_n(&key, j0, nu, u);
        for (uint64_t k = 0; k < nu; k += 2) {
            const double r = sqrt(-2.0 * log(1.0 - (double)u[k]));
            const double th = two_pi * (double)u[k + 1];
            x[j0 + k] = bf16_round((float)(std * r * cos(th)));
            if (k + 1 < len) x[j0 + k + 1] = bf16_round((float)(std * r * sin(th)));
        }
    }
}

void sq_gpt_init(const sq_gpt_config *c, uint64_t seed, float *const *params)
{
    const uint64_t C = (uint64_t)c->channels;
    const double std = 0.02, std_proj = 0.02 / sqrt(2.0 * c->layers);
    /* the param index is the Philox step: every tensor its own stream */
    init_normal(params[P_WTE], SQ_GPT_VOCAB * C, std, seed, P_WTE);
    init_normal(params[P_WPE], (uint64_t)c->context * C, std, seed, P_WPE);
    for (int l = 0; l < c->layers; l++)
        for (int k = 0; k < P_PER_LAYER; k++) {
            const size_t i = P_LAYER(l) + k;
            float *x = params[i];
            const uint64_t n = lay[k].rows * C * (lay[k].cols ? lay[k].cols * C : 1);
            if (lay[k].cols) { /* a matrix */
                const int proj = k == P_APW || k == P_MPW; /* into the residual stream */
                init_normal(x, n, proj ? std_proj : std, seed, (uint32_t)i);
            } else { /* LayerNorm gains 1, biases 0 */
                const float v = k == P_LN1W || k == P_LN2W ? 1.0f : 0.0f;
                for (uint64_t j = 0; j < n; j++) x[j] = v;
            }
        }
    for (uint64_t j = 0; j < C; j++) {
        params[P_LAYER(c->layers)][j] = 1.0f; /* lnf.w */
        params[P_LAYER(c->layers) + 1][j] = 0.0f;
    }
}

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */
/* ------------------------------------------------------------------------ */

/* One layer's activations, kept from the forward for the backward. */
typedef struct layer_acts {
    float *ln1, *ln1_mean, *ln1_rstd; /* [BT, C], [BT], [BT] */
    float *qkv;                       /* [BT, 3C] */
    float *att;                       /* [B, NH, T, T], softmax */
    float *atty;                      /* [BT, C], attention output */
    float *res2;                      /* [BT, C], x + attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;            /* [BT, 4C] */
    float *res3;                      /* [BT, C], the layer's output */
} layer_acts;

struct sq_gpt_workspace {
    sq_gpt_config c;
    int Bmax, Tmax;
    int B, T; /* of the last forward; 0 before the first */
    float *mem;
    uint64_t nfloats;
    uint8_t *inputs, *targets; /* copies of the last forward's tokens */
    layer_acts *layer;
    float *encoded;                      /* [BT, C] */
    float *lnf, *lnf_mean, *lnf_rstd;    /* [BT, C], [BT], [BT] */
    float *probs, *losses;               /* [BT, V], [BT] */
    /* scratch of the backward (dB also of the forward) */
    float *dres, *dA, *dB;               /* [BT, C] each */
    float *dbig;                         /* [BT, 4C] */
    float *dlogits;                      /* [BT, V] */
    float *attn_scratch;                 /* [B, NH, T, T] */
};

/* Carves arrays out of one block, each on a 64-byte boundary; a first pass
** with base NULL only counts. */
typedef struct carver {
    float *base;
    uint64_t used; /* floats */
    int overflow;
} carver;

static float *carve(carver *k, uint64_t n)
{
    float *p = k->base ? k->base + k->used : NULL;
    k->used = add_chk(k->used, mul_chk((n + 15) / 16, 16, &k->overflow), &k->overflow);
    return p;
}

static void layout(sq_gpt_workspace *ws, carver *k)
{
    const uint64_t C = (uint64_t)ws->c.channels, NH = (uint64_t)ws->c.heads;
    const uint64_t B = (uint64_t)ws->Bmax, T = (uint64_t)ws->Tmax, BT = B * T;
    int *ov = &k->overflow;
    const uint64_t bt_c = mul_chk(BT, C, ov);
    const uint64_t att = mul_chk(mul_chk(B * NH, T, ov), T, ov);
    for (int l = 0; l < ws->c.layers; l++) {
        layer_acts a;
        a.ln1 = carve(k, bt_c);
        a.ln1_mean = carve(k, BT);
        a.ln1_rstd = carve(k, BT);
        a.qkv = carve(k, mul_chk(3, bt_c, ov));
        a.att = carve(k, att);
        a.atty = carve(k, bt_c);
        a.res2 = carve(k, bt_c);
        a.ln2 = carve(k, bt_c);
        a.ln2_mean = carve(k, BT);
        a.ln2_rstd = carve(k, BT);
        a.fch = carve(k, mul_chk(4, bt_c, ov));
        a.fch_gelu = carve(k, mul_chk(4, bt_c, ov));
        a.res3 = carve(k, bt_c);
        if (ws->layer) ws->layer[l] = a;
    }
    ws->encoded = carve(k, bt_c);
    ws->lnf = carve(k, bt_c);
    ws->lnf_mean = carve(k, BT);
    ws->lnf_rstd = carve(k, BT);
    ws->probs = carve(k, mul_chk(BT, SQ_GPT_VOCAB, ov));
    ws->losses = carve(k, BT);
    ws->dres = carve(k, bt_c);
    ws->dA = carve(k, bt_c);
    ws->dB = carve(k, bt_c);
    ws->dbig = carve(k, mul_chk(4, bt_c, ov));
    ws->dlogits = carve(k, mul_chk(BT, SQ_GPT_VOCAB, ov));
    ws->attn_scratch = carve(k, att);
}

int sq_gpt_workspace_new(const sq_gpt_config *c, int B, int T, sq_gpt_workspace **out,
                         sq_error *err)
{
    *out = NULL;
    int rc = sq_gpt_validate(c, err);
    if (rc) return rc;
    if (B < 1 || T < 1)
        return sq_error_set(err, SQ_ERR_SPEC, "batch %d x %d tokens: both must be at least 1",
                            B, T);
    if (T > c->context)
        return sq_error_set(err, SQ_ERR_SPEC, "T %d exceeds the context %d of the model", T,
                            c->context);
    /* rows are ints in the BLAS calls, and so is B NH (the attention loop) */
    if ((int64_t)B * T > INT_MAX / 4 || (int64_t)B * c->heads > INT_MAX)
        return sq_error_set(err, SQ_ERR_SPEC, "batch %d x %d tokens is too large (at most %d "
                            "rows)", B, T, INT_MAX / 4);
    sq_gpt_workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory (the workspace header)");
    ws->c = *c;
    ws->Bmax = B;
    ws->Tmax = T;
    carver k = {NULL, 0, 0};
    layout(ws, &k);
    uint64_t bytes = mul_chk(k.used, sizeof(float), &k.overflow);
    if (k.overflow || bytes > SIZE_MAX - 64) {
        free(ws);
        return sq_error_set(err, SQ_ERR_SPEC, "batch %d x %d tokens with %d layers of %d "
                            "channels: the workspace size overflows", B, T, c->layers,
                            c->channels);
    }
    ws->layer = calloc((size_t)c->layers, sizeof *ws->layer);
    ws->inputs = malloc(2 * (size_t)B * (size_t)T);
    ws->mem = aligned_alloc(64, ((size_t)bytes + 63) & ~(size_t)63);
    if (!ws->layer || !ws->inputs || !ws->mem) {
        sq_gpt_workspace_free(ws);
        return sq_error_set(err, SQ_ERR_NOMEM, "out of memory: the workspace needs %.1f MiB",
                            (double)bytes / (1024.0 * 1024.0));
    }
    ws->targets = ws->inputs + (size_t)B * (size_t)T;
    ws->nfloats = k.used;
    carver k2 = {ws->mem, 0, 0};
    layout(ws, &k2);
    *out = ws;
    return SQ_OK;
}

void sq_gpt_workspace_free(sq_gpt_workspace *ws)
{
    if (!ws) return;
    free(ws->mem);
    free(ws->layer);
    free(ws->inputs);
    free(ws);
}

uint64_t sq_gpt_workspace_bytes(const sq_gpt_workspace *ws)
{
    return ws->nfloats * sizeof(float) + (uint64_t)ws->c.layers * sizeof(layer_acts) +
           2 * (uint64_t)ws->Bmax * (uint64_t)ws->Tmax;
}

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                     */
/* ------------------------------------------------------------------------ */

/* B and T must not exceed the workspace's; otherwise the result is NaN and
** the workspace keeps no forward (a later backward writes nothing). */
double sq_gpt_forward(sq_gpt_workspace *ws, const float *const *params, const uint8_t *inputs,
                      const uint8_t *targets, int B, int T)
{
    if (B < 1 || T < 1 || B > ws->Bmax || T > ws->Tmax) {
        ws->B = ws->T = 0;
        return NAN;
    }
    const int C = ws->c.channels, NH = ws->c.heads, L = ws->c.layers, BT = B * T;
    const size_t n = (size_t)BT * (size_t)C;
    ws->B = B;
    ws->T = T;
    memcpy(ws->inputs, inputs, (size_t)BT);
    memcpy(ws->targets, targets, (size_t)BT);
    const int blas = gl_blas_serial_begin(); /* once for all the layers */

    gl_encoder_fwd(ws->encoded, inputs, params[P_WTE], params[P_WPE], B, T, C);
    const float *x = ws->encoded;
    for (int l = 0; l < L; l++) {
        const float *const *p = params + P_LAYER(l);
        layer_acts *a = &ws->layer[l];
        gl_layernorm_fwd(a->ln1, a->ln1_mean, a->ln1_rstd, x, p[P_LN1W], p[P_LN1B], (size_t)BT, C);
        gl_matmul_fwd(a->qkv, a->ln1, p[P_QKVW], p[P_QKVB], BT, C, 3 * C);
        gl_attention_fwd(a->atty, a->att, a->qkv, B, T, C, NH);
        gl_matmul_fwd(ws->dB, a->atty, p[P_APW], p[P_APB], BT, C, C);
        gl_residual_fwd(a->res2, x, ws->dB, n);
        gl_layernorm_fwd(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p[P_LN2W], p[P_LN2B],
                         (size_t)BT, C);
        gl_matmul_fwd(a->fch, a->ln2, p[P_FCW], p[P_FCB], BT, C, 4 * C);
        gl_gelu_fwd(a->fch_gelu, a->fch, 4 * n);
        gl_matmul_fwd(ws->dB, a->fch_gelu, p[P_MPW], p[P_MPB], BT, 4 * C, C);
        gl_residual_fwd(a->res3, a->res2, ws->dB, n);
        x = a->res3;
    }
    const size_t f = P_LAYER(L);
    gl_layernorm_fwd(ws->lnf, ws->lnf_mean, ws->lnf_rstd, x, params[f], params[f + 1], (size_t)BT,
                     C);
    const double loss = gl_head_fwd(ws->probs, ws->losses, ws->lnf, params[P_WTE], targets, BT, C);
    gl_blas_serial_end(blas);
    return loss;
}

void sq_gpt_backward(sq_gpt_workspace *ws, const float *const *params, float *const *grads)
{
    const int B = ws->B, T = ws->T;
    if (!B) return; /* no forward to differentiate */
    const int C = ws->c.channels, NH = ws->c.heads, L = ws->c.layers, BT = B * T;
    const size_t n = (size_t)BT * (size_t)C, f = P_LAYER(L);
    const float *xL = L ? ws->layer[L - 1].res3 : ws->encoded;
    const int blas = gl_blas_serial_begin();

    /* head: dwte gets the head's share here, the embedding's below */
    gl_head_bwd(ws->dA, grads[P_WTE], ws->dlogits, ws->probs, ws->targets, ws->lnf,
                params[P_WTE], BT, C);
    gl_layernorm_bwd(ws->dres, grads[f], grads[f + 1], ws->dA, xL, params[f], ws->lnf_mean,
                     ws->lnf_rstd, (size_t)BT, C);
    /* ws->dres: the gradient of the residual stream, from the top down */
    for (int l = L - 1; l >= 0; l--) {
        const float *const *p = params + P_LAYER(l);
        float *const *g = grads + P_LAYER(l);
        const layer_acts *a = &ws->layer[l];
        const float *xin = l ? ws->layer[l - 1].res3 : ws->encoded;
        /* MLP: res3 = res2 + proj(gelu(fc(ln2(res2)))) */
        gl_matmul_bwd(ws->dbig, g[P_MPW], g[P_MPB], ws->dres, a->fch_gelu, p[P_MPW], BT, 4 * C, C);
        gl_gelu_bwd(ws->dbig, a->fch, ws->dbig, 4 * n);
        gl_matmul_bwd(ws->dA, g[P_FCW], g[P_FCB], ws->dbig, a->ln2, p[P_FCW], BT, C, 4 * C);
        gl_layernorm_bwd(ws->dB, g[P_LN2W], g[P_LN2B], ws->dA, a->res2, p[P_LN2W], a->ln2_mean,
                         a->ln2_rstd, (size_t)BT, C);
        gl_residual_bwd(ws->dres, NULL, ws->dB, n); /* now d res2 */
        /* attention: res2 = x + proj(attention(qkv(ln1(x)))) */
        gl_matmul_bwd(ws->dA, g[P_APW], g[P_APB], ws->dres, a->atty, p[P_APW], BT, C, C);
        gl_attention_bwd(ws->dbig, ws->dA, a->qkv, a->att, ws->attn_scratch, B, T, C, NH);
        gl_matmul_bwd(ws->dA, g[P_QKVW], g[P_QKVB], ws->dbig, a->ln1, p[P_QKVW], BT, C, 3 * C);
        gl_layernorm_bwd(ws->dB, g[P_LN1W], g[P_LN1B], ws->dA, xin, p[P_LN1W], a->ln1_mean,
                         a->ln1_rstd, (size_t)BT, C);
        gl_residual_bwd(ws->dres, NULL, ws->dB, n); /* now d x */
    }
    memset(grads[P_WPE], 0, (size_t)ws->c.context * (size_t)C * sizeof(float));
    gl_encoder_bwd(grads[P_WTE], grads[P_WPE], ws->dres, ws->inputs, B, T, C);
    gl_blas_serial_end(blas);
}

/* ------------------------------------------------------------------------ */
/* Work                                                                     */
/* ------------------------------------------------------------------------ */

/* Forward, 2 flops per multiply-add:
**   per layer  2 BT C (3C + C + 4C + 4C) = 24 BT C^2   the four Linears
**              2 B C T (T + 1)   scores and weighted values: each of the two
**                                hs T (T + 1) / 2 multiply-adds per
**                                (sequence, head), the causal triangle (the
**                                model's work; gpt_layers.c computes the
**                                full T x T squares with sgemm, which is
**                                faster than loops over the triangle)
**   head       2 BT C V
** The backward does each product twice (the input's gradient and the
** weight's; for attention d att and dv, dq and dk), so the total is 3 x the
** forward. Elementwise work (LayerNorm, softmax, GELU) is not counted. */
double sq_gpt_flops(const sq_gpt_config *c, int B, int T)
{
    const double L = c->layers, C = c->channels, b = B, t = T, BT = b * t;
    const double layer = 24.0 * BT * C * C + 2.0 * b * C * t * (t + 1.0);
    const double head = 2.0 * BT * C * SQ_GPT_VOCAB;
    return 3.0 * (L * layer + head);
}
