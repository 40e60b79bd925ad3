/*
** trainer.c -- the training loop under emulated sharded data parallelism
** (trainer.h).
*/
#include "shardq/train.h"
#include "shardq/layout.h"
#include "shardq/metrics.h"
#include "metrics/metrics_internal.h"
#include "sq_clock.h"
#include "shardq/trace.h"
#include "trace/wfile.h"
#include "train/gpt_layers.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

const char *const sq_train_time_names[SQ_TT_N] = {
    "compute", "grad_reducescatter", "optimizer", "weight_allgather", "eval", "capture"};

void sq_train_defaults(sq_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->model = (sq_gpt_config){.layers = 4, .channels = 128, .heads = 4, .context = 128};
    c->batch = 2;
    c->seq = 128;
    c->steps = 300;
    c->lr = (sq_lr_schedule){.lr = 1e-3f, .min_lr = 1e-4f, .warmup = 30};
    c->adamw = (sq_adamw){.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    c->clip = 1.0f;
    c->eval_every = 50;
    c->eval_seqs = 64;
    c->topo = (sq_topo){2, 4};
    c->seed = 1;
    c->capture_every = 1;
}

const char *sq_train_field_name(sq_train_field f)
{
    switch (f) {
    case SQ_TRAIN_FIELD_MODEL: return "model";
    case SQ_TRAIN_FIELD_BATCH: return "batch size";
    case SQ_TRAIN_FIELD_SEQ: return "sequence length";
    case SQ_TRAIN_FIELD_STEPS: return "training steps";
    case SQ_TRAIN_FIELD_LR: return "learning rate";
    case SQ_TRAIN_FIELD_ADAMW: return "AdamW";
    case SQ_TRAIN_FIELD_CLIP: return "gradient clipping norm";
    case SQ_TRAIN_FIELD_EVAL_SEQS: return "validation sequences";
    case SQ_TRAIN_FIELD_CAPTURE_EVERY: return "capture interval";
    case SQ_TRAIN_FIELD_CORPUS: return "corpus";
    case SQ_TRAIN_FIELD_CAPTURE_WEIGHTS_EVERY: return "weight capture interval";
    default: return "";
    }
}

/* The failed check: its field and a sentence that begins with the
** field's name (sq_train_field_name). */
static int invalid(sq_train_field f, sq_train_field *bad, sq_error *err, const char *fmt, ...)
{
    if (bad) *bad = f;
    char what[SQ_ERROR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sq_error_set(err, SQ_ERR_SPEC, "%s %s", sq_train_field_name(f), what);
}

int sq_train_validate(const sq_train_config *c, const sq_corpus *corpus, sq_train_field *bad,
                      sq_error *err)
{
    if (bad) *bad = SQ_TRAIN_FIELD_NONE;
    int rc = sq_gpt_validate(&c->model, err);
    if (rc) {
        if (bad) *bad = SQ_TRAIN_FIELD_MODEL;
        return rc;
    }
    if (c->batch < 1 || c->batch > 1 << 16)
        return invalid(SQ_TRAIN_FIELD_BATCH, bad, err,
                       "%d: expected 1 .. 65536 sequences per worker", c->batch);
    if (c->seq < 1 || c->seq > c->model.context)
        return invalid(SQ_TRAIN_FIELD_SEQ, bad, err, "%d: expected 1 .. the context (%d)",
                       c->seq, c->model.context);
    if (c->steps < 1)
        return invalid(SQ_TRAIN_FIELD_STEPS, bad, err, "0: train at least one step");
    if (!(c->lr.lr > 0) || !(c->lr.min_lr >= 0) || c->lr.min_lr > c->lr.lr ||
        !isfinite(c->lr.lr))
        return invalid(SQ_TRAIN_FIELD_LR, bad, err,
                       "%g with minimum %g: expected 0 < min <= lr, finite", (double)c->lr.lr,
                       (double)c->lr.min_lr);
    if (!(c->adamw.beta1 >= 0 && c->adamw.beta1 < 1) ||
        !(c->adamw.beta2 >= 0 && c->adamw.beta2 < 1) || !(c->adamw.eps > 0) ||
        !(c->adamw.weight_decay >= 0) || !isfinite(c->adamw.weight_decay))
        return invalid(SQ_TRAIN_FIELD_ADAMW, bad, err,
                       "beta1 %g, beta2 %g, eps %g, weight decay %g: expected betas in "
                       "[0, 1), eps > 0, decay >= 0", (double)c->adamw.beta1,
                       (double)c->adamw.beta2, (double)c->adamw.eps,
                       (double)c->adamw.weight_decay);
    if (!(c->clip >= 0) || !isfinite(c->clip))
        return invalid(SQ_TRAIN_FIELD_CLIP, bad, err, "%g: expected >= 0 (0: off)",
                       (double)c->clip);
    if (c->eval_seqs < 1)
        return invalid(SQ_TRAIN_FIELD_EVAL_SEQS, bad, err, "%d: expected >= 1", c->eval_seqs);
    if (c->capture && c->capture_every < 1)
        return invalid(SQ_TRAIN_FIELD_CAPTURE_EVERY, bad, err, "0: expected >= 1");
    /* weights come at captured steps: a step that is not captured has no
    ** gradients, and a trace's every step has its gradients */
    if (c->capture && c->capture_weights_every % c->capture_every != 0)
        return invalid(SQ_TRAIN_FIELD_CAPTURE_WEIGHTS_EVERY, bad, err,
                       "%u: expected a multiple of the capture interval %u",
                       (unsigned)c->capture_weights_every, (unsigned)c->capture_every);
    if (corpus && (corpus->ntrain <= (size_t)c->seq || corpus->nval <= (size_t)c->seq))
        return invalid(SQ_TRAIN_FIELD_CORPUS, bad, err,
                       "%s: %zu training and %zu validation bytes: each must exceed the "
                       "sequence length %d (give a larger corpus or a shorter sequence)",
                       corpus->path, corpus->ntrain, corpus->nval, c->seq);
    return SQ_OK;
}

double sq_train_sgemm_gflops(const sq_gpt_config *m, int rows, double seconds)
{
    const int M = rows, N = 4 * m->channels, K = m->channels;
    float *a = calloc((size_t)M * K, sizeof *a), *b = calloc((size_t)N * K, sizeof *b);
    float *c = calloc((size_t)M * N, sizeof *c);
    double rate = 0;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.125f;
        for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)(i % 5) * 0.25f;
        /* once to warm the threads and caches, then timed */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c,
                    N);
        long reps = 0;
        double t0 = sq_clock_s(), t;
        do {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f,
                        c, N);
            reps++;
        } while ((t = sq_clock_s() - t0) < seconds);
        rate = 2.0 * M * (double)N * K * (double)reps / t / 1e9;
    }
    free(a), free(b), free(c);
    return rate;
}

/* ------------------------------------------------------------------------ */
/* The state of a run                                                       */
/* ------------------------------------------------------------------------ */

/* Unit u of the layout (a bucket, or one param): its world and the
** workers' optimizer state. master, m, v and red are padded arrays in which
** worker r's shard is [r S, (r + 1) S), so their first n elements are the
** unit's flat buffer; the GPT's per-param pointers point into them. */
typedef struct unit_state {
    sq_world *w;
    const sq_layout_slot *slot;
    size_t count;
    uint64_t n, S, padded;
    float *master, *m, *v, *red;
    float *what, *tmp;   /* w-hat of worker 0, and of the worker being compared */
    float *grad;         /* the current worker's gradient */
} unit_state;

/* A lane computes one worker's forward and backward at a time: lanes run
** side by side, one thread each, on different workers of the step. Lane 0
** uses the state's own workspace, batch and gradient buffers. */
typedef struct lane {
    sq_gpt_workspace *ws;
    uint8_t *inputs, *targets;
    float *gbuf;  /* lanes 1..: its gradient buffers, one block for every unit */
    float **ugrad; /* per unit: where this lane's gradient of the unit lies */
    float **gptr;  /* per param: the same, for the model */
    double loss;
} lane;

typedef struct train_state {
    const sq_train_config *c;
    const sq_corpus *corpus;
    const sq_train_sink *sink;
    sq_train_result *res;
    size_t np;
    int N;
    sq_gpt_param *meta;
    sq_layout layout;
    unit_state *us;
    const float **wptr;                /* per param: w-hat (read-only: it may be the world's) */
    float **gptr, **mptr, **rptr;      /* per param: gradient, master, reduced */
    sq_gpt_workspace *ws;
    uint8_t *inputs, *targets;
    sq_trace_writer *tw;
    int nlanes;
    lane *lanes;
} train_state;

static void free_lanes(train_state *s)
{
    for (int k = 0; s->lanes && k < s->nlanes; k++) {
        lane *l = &s->lanes[k];
        if (k > 0) {
            sq_gpt_workspace_free(l->ws);
            free(l->inputs), free(l->targets), free(l->gbuf), free(l->gptr);
        }
        free(l->ugrad);
    }
    free(s->lanes);
    s->lanes = NULL;
}

static void free_state(train_state *s)
{
    free_lanes(s);
    if (s->us)
        for (size_t u = 0; u < s->layout.nunits; u++) {
            unit_state *q = &s->us[u];
            sq_world_close(q->w);
            free(q->master), free(q->m), free(q->v), free(q->red);
            free(q->what), free(q->tmp), free(q->grad);
        }
    sq_layout_free(&s->layout);
    free(s->us), free(s->meta), free(s->wptr), free(s->gptr), free(s->mptr), free(s->rptr);
    free(s->inputs), free(s->targets);
    sq_gpt_workspace_free(s->ws);
    if (s->tw) sq_trace_writer_abort(s->tw);
}

/* A unit's name in messages. */
static void unit_name(const train_state *s, const unit_state *q, char *buf, size_t len)
{
    sq_layout_unit_label(&s->layout, (size_t)(q - s->us), s->meta[q->slot[0].param].name, buf,
                         len);
}

/* A failed call of unit u's world: the world's kind and sentence. */
static int world_fail(train_state *s, size_t u, int rc, sq_error *err)
{
    char name[SQ_GPT_NAMELEN + 64];
    unit_name(s, &s->us[u], name, sizeof name);
    return sq_error_set(err, rc, "%s: %s", name, sq_world_error(s->us[u].w));
}

/* Workers' passes side by side when they all run here: a pass of the
** default model is a few hundred small products and elementwise loops, which
** two threads split with less gain (1.14x measured on 2 cores) than two
** passes running whole on a thread each. On real ranks a process computes
** its own worker alone: one lane. */
static int lanes_wanted(const train_state *s)
{
    int n = s->c->transport ? 1 : sq_get_threads();
    return n < 1 ? 1 : n > s->N ? s->N : n;
}

static int open_lanes(train_state *s, sq_error *err)
{
    const sq_train_config *c = s->c;
    const size_t nu = s->layout.nunits, tokens = (size_t)c->batch * (size_t)c->seq;
    s->nlanes = lanes_wanted(s);
    s->lanes = calloc((size_t)s->nlanes, sizeof *s->lanes);
    if (!s->lanes) goto oom;
    uint64_t total = 0;
    for (size_t u = 0; u < nu; u++) total += s->us[u].n;
    for (int k = 0; k < s->nlanes; k++) {
        lane *l = &s->lanes[k];
        if (!(l->ugrad = calloc(nu, sizeof *l->ugrad))) goto oom;
        if (k == 0) {
            l->ws = s->ws, l->inputs = s->inputs, l->targets = s->targets, l->gptr = s->gptr;
            for (size_t u = 0; u < nu; u++) l->ugrad[u] = s->us[u].grad;
            continue;
        }
        int rc = sq_gpt_workspace_new(&c->model, c->batch, c->seq, &l->ws, err);
        if (rc) return rc;
        l->inputs = malloc(tokens);
        l->targets = malloc(tokens);
        l->gbuf = calloc((size_t)total, sizeof *l->gbuf);
        l->gptr = calloc(s->np, sizeof *l->gptr);
        if (!l->inputs || !l->targets || !l->gbuf || !l->gptr) goto oom;
        float *g = l->gbuf;
        for (size_t u = 0; u < nu; u++) {
            const unit_state *q = &s->us[u];
            l->ugrad[u] = g;
            for (size_t j = 0; j < q->count; j++)
                l->gptr[q->slot[j].param] = g + q->slot[j].offset;
            g += q->n;
        }
    }
    return SQ_OK;
oom:
    return sq_error_set(err, SQ_ERR_NOMEM, "out of memory for %d workers' passes side by side",
                        s->nlanes);
}

static int open_state(train_state *s, sq_error *err)
{
    const sq_train_config *c = s->c;
    s->np = sq_gpt_nparams(&c->model);
    s->N = sq_topo_workers(&c->topo);
    s->meta = calloc(s->np, sizeof *s->meta);
    s->wptr = calloc(s->np, sizeof *s->wptr);
    s->gptr = calloc(s->np, sizeof *s->gptr);
    s->mptr = calloc(s->np, sizeof *s->mptr);
    s->rptr = calloc(s->np, sizeof *s->rptr);
    uint64_t *sizes = calloc(s->np, sizeof *sizes);
    size_t tokens = (size_t)c->batch * (size_t)c->seq;
    s->inputs = malloc(tokens);
    s->targets = malloc(tokens);
    if (!s->meta || !s->wptr || !s->gptr || !s->mptr || !s->rptr || !sizes || !s->inputs ||
        !s->targets) {
        free(sizes);
        goto oom;
    }
    sq_gpt_params(&c->model, s->meta);
    for (size_t p = 0; p < s->np; p++) sizes[p] = s->meta[p].n;
    int rc = sq_layout_for_scheme(&c->scheme, sizes, s->np, &s->layout, err);
    free(sizes);
    if (rc) return rc;
    s->us = calloc(s->layout.nunits, sizeof *s->us);
    if (!s->us) goto oom;
    s->res->layout = s->layout.kind;
    s->res->units = s->layout.nunits;
    sq_world_config base = {.topo = c->topo, .scheme = c->scheme, .seed = c->seed,
                            .device = c->device, .transport = c->transport};
    for (size_t u = 0; u < s->layout.nunits; u++) {
        unit_state *q = &s->us[u];
        q->slot = s->layout.slots + s->layout.units[u].first;
        q->count = s->layout.units[u].count;
        q->n = s->layout.units[u].n;
        sq_error werr = {0};
        const sq_gpt_param *mp = &s->meta[q->slot[0].param];
        const uint64_t shape[2] = {mp->shape[0], mp->shape[1]};
        rc = sq_layout_open_world(&s->layout, u, &base, shape, mp->ndim, &q->w, &werr);
        if (rc) {
            char name[SQ_GPT_NAMELEN + 64];
            unit_name(s, q, name, sizeof name);
            return sq_error_set(err, rc, "%s (%llu elements): %s", name,
                                (unsigned long long)q->n, sq_error_message(&werr));
        }
        q->S = sq_world_shard(q->w);
        q->padded = sq_world_padded(q->w);
        size_t P = (size_t)q->padded, n = (size_t)q->n;
        q->master = calloc(P, sizeof *q->master);
        q->m = calloc(P, sizeof *q->m);
        q->v = calloc(P, sizeof *q->v);
        q->red = calloc(P, sizeof *q->red);
        q->what = malloc(n * sizeof *q->what);
        q->tmp = malloc(n * sizeof *q->tmp);
        q->grad = calloc(n, sizeof *q->grad);
        if (!q->master || !q->m || !q->v || !q->red || !q->what || !q->tmp || !q->grad)
            goto oom;
        for (size_t k = 0; k < q->count; k++) {
            size_t p = q->slot[k].param, off = (size_t)q->slot[k].offset;
            s->wptr[p] = q->what + off;
            s->gptr[p] = q->grad + off;
            s->mptr[p] = q->master + off;
            s->rptr[p] = q->red + off;
        }
        s->res->elements += q->n;
        s->res->padded += q->padded;
        s->res->residual_bytes += sq_world_residual_bytes(q->w);
    }
    if ((rc = sq_gpt_workspace_new(&c->model, c->batch, c->seq, &s->ws, err))) return rc;
    return open_lanes(s, err);
oom:
    return sq_error_set(err, SQ_ERR_NOMEM, "out of memory for the model's state (%d workers)",
                        s->N);
}

/* The bf16 initialisation on every worker; the masters are its copy. */
static int init_weights(train_state *s, sq_error *err)
{
    sq_gpt_init(&s->c->model, s->c->seed, s->mptr);
    for (size_t u = 0; u < s->layout.nunits; u++) {
        int rc = sq_world_init_weights(s->us[u].w, s->us[u].master);
        if (rc) return world_fail(s, u, rc, err);
    }
    return SQ_OK;
}

/* Every worker's w-hat compared with worker 0's (the replicas of a sharded
** model must hold the same bytes), and wptr pointed at worker 0's: in
** process, where the world holds it in host memory, in place; otherwise a
** copy in what. */
static int read_weights(train_state *s, sq_error *err)
{
    for (size_t u = 0; u < s->layout.nunits; u++) {
        unit_state *q = &s->us[u];
        const float *base;
        int differs, rc = sq_step_replicas_view(q->w, q->what, q->tmp, &base, &differs);
        if (rc) return world_fail(s, u, rc, err);
        for (size_t k = 0; k < q->count; k++)
            s->wptr[q->slot[k].param] = base + q->slot[k].offset;
        if (differs) {
            char name[SQ_GPT_NAMELEN + 64];
            unit_name(s, q, name, sizeof name);
            return sq_error_set(err, SQ_ERR_CONFLICT, "%s: the replicas of the weights "
                                "differ (worker %d against worker 0): a bug in the world",
                                name, differs);
        }
    }
    return SQ_OK;
}

static int capture_file(train_state *s, uint32_t step, int worker, float *const *x,
                        sq_error *err)
{
    int rc = sq_trace_file_begin(s->tw, step, worker, err);
    for (size_t p = 0; p < s->np && !rc; p++) rc = sq_trace_file_put(s->tw, x[p], err);
    return rc ? rc : sq_trace_file_end(s->tw, err);
}

/* The lanes' forward passes over the validation batches [b0, b0 + m), one
** per lane, lane k's batch's summed loss into its loss. */
static void evaluate_batches(train_state *s, int b0, int m)
{
    const sq_train_config *c = s->c;
#pragma omp parallel for num_threads(m) schedule(static, 1) if (m > 1)
    for (int k = 0; k < m; k++) {
        lane *l = &s->lanes[k];
        const int done = (b0 + k) * c->batch;
        const int b = c->eval_seqs - done < c->batch ? c->eval_seqs - done : c->batch;
        for (int j = 0; j < b; j++)
            sq_corpus_val_seq(s->corpus, done + j, c->eval_seqs, c->seq,
                              l->inputs + (size_t)j * c->seq, l->targets + (size_t)j * c->seq);
        l->loss = sq_gpt_forward(l->ws, (const float *const *)s->wptr, l->inputs, l->targets, b,
                                 c->seq) * b;
    }
}

/* Mean loss over the validation sequences at the current w-hat, the
** batches' losses summed in batch order whatever the lanes. */
static double evaluate(train_state *s)
{
    const sq_train_config *c = s->c;
    const int nb = (c->eval_seqs + c->batch - 1) / c->batch;
    double sum = 0;
    const int blas = gl_blas_serial_begin();
    for (int b0 = 0; b0 < nb; b0 += s->nlanes) {
        const int m = nb - b0 < s->nlanes ? nb - b0 : s->nlanes;
        evaluate_batches(s, b0, m);
        for (int k = 0; k < m; k++) sum += s->lanes[k].loss;
    }
    gl_blas_serial_end(blas);
    return sum / c->eval_seqs;
}

/* ------------------------------------------------------------------------ */
/* One step                                                                 */
/* ------------------------------------------------------------------------ */

/* Workers r0 .. r0 + m - 1, the ones this process holds, through the
** forward and backward passes, one lane each, side by side: each lane's
** loss and gradient, with the bytes a single pass gives (gpt_layers.h:
** they depend on no thread count). OpenBLAS's own threads stay off. */
static void compute_workers(train_state *s, uint32_t t, int r0, int m)
{
    const sq_train_config *c = s->c;
    const int blas = gl_blas_serial_begin();
#pragma omp parallel for num_threads(m) schedule(static, 1) if (m > 1)
    for (int k = 0; k < m; k++) {
        lane *l = &s->lanes[k];
        const int r = r0 + k;
        l->loss = 0;
        /* on real ranks each process computes its own worker's micro-batch */
        if (!sq_world_holds(s->us[0].w, r)) continue;
        sq_corpus_train_batch(s->corpus, c->seed, t, (uint64_t)r * (uint64_t)c->batch, c->batch,
                              c->seq, l->inputs, l->targets);
        l->loss = sq_gpt_forward(l->ws, (const float *const *)s->wptr, l->inputs, l->targets,
                                 c->batch, c->seq);
        sq_gpt_backward(l->ws, (const float *const *)s->wptr, l->gptr);
    }
    gl_blas_serial_end(blas);
}

/* Steps 1 and 2: every worker's gradient, then the reduce-scatter. Returns
** the mean training loss in *loss. */
static int gradients(train_state *s, uint32_t t, int capture, double *loss, sq_error *err)
{
    sq_train_result *res = s->res;
    double sum = 0;
    for (int r0 = 0; r0 < s->N; r0 += s->nlanes) {
        const int m = s->N - r0 < s->nlanes ? s->N - r0 : s->nlanes;
        double t0 = sq_clock_s();
        compute_workers(s, t, r0, m);
        res->time[SQ_TT_COMPUTE] += sq_clock_s() - t0;
        for (int k = 0; k < m; k++) {
            const int r = r0 + k;
            const lane *l = &s->lanes[k];
            double wloss = l->loss;
            /* the losses travel so that every process sums them in worker order */
            int src = sq_world_share(s->us[0].w, r, &wloss, sizeof wloss);
            if (src) return world_fail(s, 0, src, err);
            sum += wloss;
            if (!sq_world_holds(s->us[0].w, r)) continue; /* its own rank puts and checks it */
            t0 = sq_clock_s();
            /* the world refuses a gradient that is not finite, naming the element */
            for (size_t u = 0; u < s->layout.nunits; u++) {
                int rc = sq_world_put_grad(s->us[u].w, r, l->ugrad[u]);
                if (rc == SQ_ERR_NONFINITE) {
                    char name[SQ_GPT_NAMELEN + 64];
                    unit_name(s, &s->us[u], name, sizeof name);
                    return sq_error_set(err, rc, "step %u: %s: %s (the loss diverged: a "
                                        "lower learning rate?)", (unsigned)t, name,
                                        sq_world_error(s->us[u].w));
                }
                if (rc) return world_fail(s, u, rc, err);
            }
            res->time[SQ_TT_GRAD] += sq_clock_s() - t0;
            /* captured once the world took it: a trace holds finite gradients only */
            if (capture) {
                t0 = sq_clock_s();
                int rc = capture_file(s, t, r, l->gptr, err);
                if (rc) return rc;
                res->time[SQ_TT_CAPTURE] += sq_clock_s() - t0;
            }
        }
    }
    *loss = sum / s->N;
    const double t0 = sq_clock_s();
    for (size_t u = 0; u < s->layout.nunits; u++) {
        unit_state *q = &s->us[u];
        int rc = sq_world_reduce_grads(q->w, t);
        if (!rc) rc = sq_step_grad_error(q->w, NULL, q->red, NULL, NULL);
        if (rc) return world_fail(s, u, rc, err);
    }
    res->time[SQ_TT_GRAD] += sq_clock_s() - t0;
    if (s->sink && s->sink->tensor)
        for (size_t p = 0; p < s->np; p++)
            if (s->sink->tensor(s->sink->ctx, t, p, SQ_TRAIN_REDUCED, s->rptr[p], s->meta[p].n))
                return sq_error_set(err, SQ_ERR_INTERRUPTED, "step %u: stopped by the caller",
                                    (unsigned)t);
    return SQ_OK;
}

/* Error feedback's figure after the step's reduce: the mean over workers
** of |e_r| / |x_r|, both over every unit that keeps a residual (the whole
** model's); NaN when none does. */
static double residual_of(const train_state *s)
{
    double sum = 0;
    int any = 0;
    for (int r = 0; r < s->N; r++) {
        double e2 = 0, x2 = 0, a, b;
        for (size_t u = 0; u < s->layout.nunits; u++)
            if (sq_world_residual_norms(s->us[u].w, r, &a, &b)) e2 += a, x2 += b, any = 1;
        sum += sq_world_residual_ratio(e2, x2);
    }
    return any ? sum / s->N : NAN;
}

/* Step 3: clipping and every worker's AdamW on its shard. */
static void optimize(train_state *s, uint32_t t, float lr, double *norm)
{
    const sq_train_config *c = s->c;
    double sq = 0;
    for (size_t p = 0; p < s->np; p++) {
        const float *g = s->rptr[p];
        for (uint64_t i = 0; i < s->meta[p].n; i++) sq += (double)g[i] * (double)g[i];
    }
    *norm = sqrt(sq);
    float scale = c->clip > 0 && *norm > c->clip ? (float)(c->clip / *norm) : 1.0f;
    /* worker r updates its shard; where a bucket's shard crosses params,
    ** each piece takes its own param's weight decay. The workers' shards
    ** are disjoint and AdamW is elementwise: they update side by side, one
    ** worker per thread (a shard's pieces are too small to split: the
    ** update of the default model took 4% of its step on one thread). */
    const int nth = sq_get_threads() < s->N ? sq_get_threads() : s->N;
#pragma omp parallel for num_threads(nth) schedule(dynamic, 1) if (nth > 1)
    for (int r = 0; r < s->N; r++) {
        for (size_t u = 0; u < s->layout.nunits; u++) {
            unit_state *q = &s->us[u];
            uint64_t first = (uint64_t)r * q->S, end = first + sq_world_shard_len(q->w, r);
            if (end == first) continue;
            /* on real ranks a process updates its own shard alone, as in
            ** the real systems: the others' masters never reach it */
            if (!sq_world_holds(q->w, r)) continue;
            for (size_t k = 0; k < q->count; k++) {
                uint64_t lo = q->slot[k].offset, hi = lo + q->slot[k].n;
                if (lo < first) lo = first;
                if (hi > end) hi = end;
                if (lo >= hi) continue;
                sq_adamw_step(&c->adamw, lr, t + 1, s->meta[q->slot[k].param].decay, scale,
                              q->red + lo, q->master + lo, q->m + lo, q->v + lo,
                              (size_t)(hi - lo));
            }
        }
    }
}

/* Step 4: the masters out, the all-gather of step t + 1, the new w-hat in. */
static int gather(train_state *s, uint32_t t, sq_error *err)
{
    for (size_t u = 0; u < s->layout.nunits; u++) {
        unit_state *q = &s->us[u];
        int rc = SQ_OK;
        for (int r = 0; r < s->N && !rc; r++)
            rc = sq_world_put_master(q->w, r, q->master + (size_t)r * q->S);
        if (!rc) rc = sq_world_gather_weights(q->w, t + 1);
        if (rc) return world_fail(s, u, rc, err);
    }
    return read_weights(s, err);
}

static int train_loop(train_state *s, sq_error *err)
{
    const sq_train_config *c = s->c;
    sq_train_result *res = s->res;
    sq_lr_schedule sched = c->lr;
    sched.total = c->steps;
    /* the forward and backward passes this process runs: every worker's in
    ** process, its own worker's on real ranks */
    const int computed = c->transport ? 1 : s->N;
    const double step_flops = computed * sq_gpt_flops(&c->model, c->batch, c->seq);
    const uint64_t step_tokens = (uint64_t)s->N * (uint64_t)c->batch * (uint64_t)c->seq;
    double t_start = sq_clock_s();
    int rc = init_weights(s, err);
    if (!rc) rc = read_weights(s, err);
    if (rc) return rc;
    for (uint32_t t = 0; t < c->steps; t++) {
        int capture = s->tw && t % c->capture_every == 0;
        if (capture) res->captured++;
        if (capture && (!c->capture_weights_every || t % c->capture_weights_every == 0)) {
            /* the masters at the start of the step: what replay gathers */
            double t0 = sq_clock_s();
            if ((rc = capture_file(s, t, -1, s->mptr, err))) return rc;
            res->time[SQ_TT_CAPTURE] += sq_clock_s() - t0;
        }
        if (s->sink && s->sink->tensor)
            for (size_t p = 0; p < s->np; p++)
                if (s->sink->tensor(s->sink->ctx, t, p, SQ_TRAIN_MODEL, s->wptr[p],
                                    s->meta[p].n))
                    return sq_error_set(err, SQ_ERR_INTERRUPTED, "step %u: stopped by the "
                                        "caller", (unsigned)t);
        double loss = 0;
        if ((rc = gradients(s, t, capture, &loss, err))) return rc;
        const double ef_residual = residual_of(s);
        float lr = sq_lr_at(&sched, t);
        double norm, t0 = sq_clock_s();
        optimize(s, t, lr, &norm);
        res->time[SQ_TT_OPTIM] += sq_clock_s() - t0;
        t0 = sq_clock_s();
        if ((rc = gather(s, t, err))) return rc;
        res->time[SQ_TT_WEIGHT] += sq_clock_s() - t0;
        sq_train_row row = {.step = t, .loss = loss, .val_loss = NAN, .lr = lr,
                            .grad_norm = norm, .ef_residual = ef_residual};
        res->ef_residual = ef_residual;
        if ((c->eval_every && (t + 1) % c->eval_every == 0) || t + 1 == c->steps) {
            t0 = sq_clock_s();
            row.val_loss = evaluate(s);
            res->time[SQ_TT_EVAL] += sq_clock_s() - t0;
            res->final_val = row.val_loss;
        }
        res->steps = t + 1;
        res->tokens += step_tokens;
        res->flops += step_flops;
        if (t == 0) res->first_loss = loss;
        res->final_loss = loss;
        row.tokens = res->tokens;
        row.seconds = sq_clock_s() - t_start;
        if (s->sink && s->sink->step && (rc = s->sink->step(s->sink->ctx, &row, err)))
            return rc < 0 ? rc : SQ_ERR_INTERRUPTED;
        if (s->sink && s->sink->progress) s->sink->progress(s->sink->ctx, t + 1, c->steps, loss);
    }
    return SQ_OK;
}

int sq_train_run(const sq_train_config *c, const sq_corpus *corpus, const sq_train_sink *sink,
                 sq_train_result *out, sq_error *err)
{
    memset(out, 0, sizeof *out);
    out->final_val = NAN;
    out->ef_residual = NAN;
    int rc = sq_train_validate(c, corpus, NULL, err);
    if (rc) return rc;
    train_state s = {.c = c, .corpus = corpus, .sink = sink, .res = out};
    double t0 = sq_clock_s();
    rc = open_state(&s, err);
    if (!rc && c->capture && c->transport)
        /* a worker's gradient exists on its own rank alone: the trace writer
        ** of one process cannot see it */
        rc = sq_error_set(err, SQ_ERR_UNSUPPORTED, "capture runs with every worker in one "
                          "process, not on real ranks (no transport)");
    if (!rc && c->capture) {
        sq_trace_param *tp = calloc(s.np, sizeof *tp);
        if (!tp) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
        } else {
            for (size_t p = 0; p < s.np; p++) {
                tp[p].name = s.meta[p].name;
                tp[p].ndim = s.meta[p].ndim;
                tp[p].shape[0] = s.meta[p].shape[0];
                tp[p].shape[1] = s.meta[p].shape[1];
                tp[p].n = s.meta[p].n;
            }
            char topo[32];
            snprintf(topo, sizeof topo, "%dx%d", c->topo.nodes, c->topo.per_node);
            rc = sq_trace_writer_open_as(&s.tw, c->capture, c->capture_owner, s.N, tp, s.np,
                                           SQ_ST_F32, topo, c->capture_model, err);
            if (rc) s.tw = NULL;
            free(tp);
        }
    }
    if (!rc) rc = train_loop(&s, err);
    if (!rc && s.tw) {
        double tc = sq_clock_s();
        rc = sq_trace_writer_close(s.tw, err);
        s.tw = NULL;
        out->time[SQ_TT_CAPTURE] += sq_clock_s() - tc;
    }
    if (s.us) {
        sq_traffic sum;
        memset(&sum, 0, sizeof sum);
        for (size_t u = 0; u < s.layout.nunits && s.us[u].w; u++) {
            sq_world_add_traffic(s.us[u].w, &sum);
            sq_world_add_times(s.us[u].w, out->coll);
        }
        sq_bytes_rows(&sum, out->bytes);
    }
    free_state(&s);
    out->seconds = sq_clock_s() - t0;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) out->peak_rss = (uint64_t)ru.ru_maxrss * 1024;
    return rc;
}
