/*
** trainer.c -- the training loop under emulated sharded data parallelism
** (trainer.h).
*/
#include "train/trainer.h"
#include "sq_clock.h"
#include "trace/tracedir.h"
#include "trace/wfile.h"

#include <cblas.h>
#include <math.h>
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

int sq_train_validate(const sq_train_config *c, const sq_corpus *corpus, char *err,
                      size_t errlen)
{
    if (sq_gpt_validate(&c->model, err, errlen)) return -1;
    if (c->batch < 1 || c->batch > 1 << 16) {
        sq_set_err(err, errlen, "--batch %d: expected 1 .. 65536 sequences per worker", c->batch);
        return -1;
    }
    if (c->seq < 1 || c->seq > c->model.context) {
        sq_set_err(err, errlen, "--seq %d: expected 1 .. the context (%d)", c->seq,
                   c->model.context);
        return -1;
    }
    if (c->steps < 1) {
        sq_set_err(err, errlen, "--steps 0: train at least one step");
        return -1;
    }
    if (!(c->lr.lr > 0) || !(c->lr.min_lr >= 0) || c->lr.min_lr > c->lr.lr ||
        !isfinite(c->lr.lr)) {
        sq_set_err(err, errlen, "--lr %g with minimum %g: expected 0 < min <= lr, finite",
                   (double)c->lr.lr, (double)c->lr.min_lr);
        return -1;
    }
    if (!(c->adamw.beta1 >= 0 && c->adamw.beta1 < 1) ||
        !(c->adamw.beta2 >= 0 && c->adamw.beta2 < 1) || !(c->adamw.eps > 0) ||
        !(c->adamw.weight_decay >= 0) || !isfinite(c->adamw.weight_decay)) {
        sq_set_err(err, errlen, "AdamW beta1 %g, beta2 %g, eps %g, weight decay %g: expected "
                   "betas in [0, 1), eps > 0, decay >= 0", (double)c->adamw.beta1,
                   (double)c->adamw.beta2, (double)c->adamw.eps, (double)c->adamw.weight_decay);
        return -1;
    }
    if (!(c->clip >= 0) || !isfinite(c->clip)) {
        sq_set_err(err, errlen, "--clip %g: expected >= 0 (0: off)", (double)c->clip);
        return -1;
    }
    if (c->eval_seqs < 1) {
        sq_set_err(err, errlen, "--eval-seqs %d: expected >= 1", c->eval_seqs);
        return -1;
    }
    if (c->capture && c->capture_every < 1) {
        sq_set_err(err, errlen, "--capture-every 0: expected >= 1");
        return -1;
    }
    if (corpus && (corpus->ntrain <= (size_t)c->seq || corpus->nval <= (size_t)c->seq)) {
        sq_set_err(err, errlen, "%s: %zu training and %zu validation bytes: each must exceed "
                   "--seq %d (give a larger --corpus or a smaller --seq)", corpus->path,
                   corpus->ntrain, corpus->nval, c->seq);
        return -1;
    }
    return 0;
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

/* Param p: its world and the workers' optimizer state. master, m, v and red
** are padded arrays in which worker r's shard is [r S, (r + 1) S), so their
** first n elements are the whole param. */
typedef struct param_state {
    sq_world *w;
    uint64_t n, S, padded;
    float *master, *m, *v, *red;
    float *what, *tmp;   /* w-hat of worker 0, and of the worker being compared */
    float *grad;         /* the current worker's gradient */
} param_state;

typedef struct train_state {
    const sq_train_config *c;
    const sq_corpus *corpus;
    const sq_train_sink *sink;
    sq_train_result *res;
    size_t np;
    int N;
    sq_gpt_param *meta;
    param_state *ps;
    float **wptr, **gptr, **mptr; /* per param: w-hat, gradient, master */
    sq_gpt_workspace *ws;
    uint8_t *inputs, *targets;
    sq_trace_writer *tw;
} train_state;

static void free_state(train_state *s)
{
    if (s->ps)
        for (size_t p = 0; p < s->np; p++) {
            param_state *q = &s->ps[p];
            sq_world_close(q->w);
            free(q->master), free(q->m), free(q->v), free(q->red);
            free(q->what), free(q->tmp), free(q->grad);
        }
    free(s->ps), free(s->meta), free(s->wptr), free(s->gptr), free(s->mptr);
    free(s->inputs), free(s->targets);
    sq_gpt_workspace_free(s->ws);
    if (s->tw) sq_trace_writer_abort(s->tw);
}

static int world_fail(train_state *s, size_t p, char *err, size_t errlen)
{
    sq_set_err(err, errlen, "param '%s': %s", s->meta[p].name, sq_world_error(s->ps[p].w));
    return -1;
}

static int open_state(train_state *s, char *err, size_t errlen)
{
    const sq_train_config *c = s->c;
    s->np = sq_gpt_nparams(&c->model);
    s->N = sq_topo_workers(&c->topo);
    s->meta = calloc(s->np, sizeof *s->meta);
    s->ps = calloc(s->np, sizeof *s->ps);
    s->wptr = calloc(s->np, sizeof *s->wptr);
    s->gptr = calloc(s->np, sizeof *s->gptr);
    s->mptr = calloc(s->np, sizeof *s->mptr);
    size_t tokens = (size_t)c->batch * (size_t)c->seq;
    s->inputs = malloc(tokens);
    s->targets = malloc(tokens);
    if (!s->meta || !s->ps || !s->wptr || !s->gptr || !s->mptr || !s->inputs || !s->targets) goto oom;
    sq_gpt_params(&c->model, s->meta);
    for (size_t p = 0; p < s->np; p++) {
        param_state *q = &s->ps[p];
        sq_world_config wc = {.topo = c->topo, .scheme = c->scheme, .elements = s->meta[p].n,
                              .seed = c->seed ^ ((uint64_t)p << 40), .device = c->device};
        sq_error werr;
        if (sq_world_open(&wc, &q->w, &werr)) {
            sq_set_err(err, errlen, "param '%s' (%llu elements): %s", s->meta[p].name,
                       (unsigned long long)s->meta[p].n, sq_error_message(&werr));
            return -1;
        }
        q->n = s->meta[p].n;
        q->S = sq_world_shard(q->w);
        q->padded = sq_world_padded(q->w);
        size_t P = (size_t)q->padded, n = (size_t)q->n;
        q->master = calloc(P, sizeof *q->master);
        q->m = calloc(P, sizeof *q->m);
        q->v = calloc(P, sizeof *q->v);
        q->red = calloc(P, sizeof *q->red);
        q->what = malloc(n * sizeof *q->what);
        q->tmp = malloc(n * sizeof *q->tmp);
        q->grad = malloc(n * sizeof *q->grad);
        if (!q->master || !q->m || !q->v || !q->red || !q->what || !q->tmp || !q->grad)
            goto oom;
        s->wptr[p] = q->what;
        s->gptr[p] = q->grad;
        s->mptr[p] = q->master;
        s->res->elements += q->n;
    }
    if (sq_gpt_workspace_new(&c->model, c->batch, c->seq, &s->ws, err, errlen)) return -1;
    return 0;
oom:
    sq_set_err(err, errlen, "out of memory for the model's state (%d workers)", s->N);
    return -1;
}

/* The bf16 initialisation on every worker; the masters are its copy. */
static int init_weights(train_state *s, char *err, size_t errlen)
{
    sq_gpt_init(&s->c->model, s->c->seed, s->mptr);
    for (size_t p = 0; p < s->np; p++) {
        if (sq_world_init_weights(s->ps[p].w, s->ps[p].master)) return world_fail(s, p, err, errlen);
    }
    return 0;
}

/* Every worker's w-hat into wptr (worker 0's), each compared with worker 0's:
** the replicas of a sharded model must hold the same bytes. */
static int read_weights(train_state *s, char *err, size_t errlen)
{
    for (size_t p = 0; p < s->np; p++) {
        param_state *q = &s->ps[p];
        if (sq_world_get_weights(q->w, 0, q->what)) return world_fail(s, p, err, errlen);
        for (int r = 1; r < s->N; r++) {
            if (sq_world_get_weights(q->w, r, q->tmp)) return world_fail(s, p, err, errlen);
            if (memcmp(q->tmp, q->what, (size_t)q->n * sizeof *q->tmp) != 0) {
                sq_set_err(err, errlen, "param '%s': the replicas of the weights differ "
                           "(worker %d against worker 0): a bug in the world",
                           s->meta[p].name, r);
                return -1;
            }
        }
    }
    return 0;
}

static int capture_file(train_state *s, uint32_t step, int worker, float *const *x, char *err,
                        size_t errlen)
{
    if (sq_trace_file_begin(s->tw, step, worker, err, errlen)) return -1;
    for (size_t p = 0; p < s->np; p++)
        if (sq_trace_file_put(s->tw, x[p], err, errlen)) return -1;
    return sq_trace_file_end(s->tw, err, errlen);
}

/* Mean loss over the validation sequences at the current w-hat. */
static double evaluate(train_state *s)
{
    const sq_train_config *c = s->c;
    double sum = 0;
    int done = 0;
    while (done < c->eval_seqs) {
        int b = c->eval_seqs - done < c->batch ? c->eval_seqs - done : c->batch;
        for (int k = 0; k < b; k++)
            sq_corpus_val_seq(s->corpus, done + k, c->eval_seqs, c->seq,
                              s->inputs + (size_t)k * c->seq, s->targets + (size_t)k * c->seq);
        sum += sq_gpt_forward(s->ws, (const float *const *)s->wptr, s->inputs, s->targets, b,
                              c->seq) * b;
        done += b;
    }
    return sum / c->eval_seqs;
}

/* ------------------------------------------------------------------------ */
/* One step                                                                 */
/* ------------------------------------------------------------------------ */

/* Steps 1 and 2: every worker's gradient, then the reduce-scatter. Returns
** the mean training loss in *loss. */
static int gradients(train_state *s, uint32_t t, int capture, double *loss, char *err,
                     size_t errlen)
{
    const sq_train_config *c = s->c;
    sq_train_result *res = s->res;
    double sum = 0;
    for (int r = 0; r < s->N; r++) {
        double t0 = sq_clock_s();
        sq_corpus_train_batch(s->corpus, c->seed, t, (uint64_t)r * (uint64_t)c->batch, c->batch,
                              c->seq, s->inputs, s->targets);
        sum += sq_gpt_forward(s->ws, (const float *const *)s->wptr, s->inputs, s->targets,
                              c->batch, c->seq);
        sq_gpt_backward(s->ws, (const float *const *)s->wptr, s->gptr);
        res->time[SQ_TT_COMPUTE] += sq_clock_s() - t0;
        t0 = sq_clock_s();
        /* the world refuses a gradient that is not finite, naming the element */
        for (size_t p = 0; p < s->np; p++) {
            int rc = sq_world_put_grad(s->ps[p].w, r, s->gptr[p]);
            if (rc == SQ_ERR_NONFINITE) {
                sq_set_err(err, errlen, "step %u: param '%s': %s (the loss diverged: lower --lr?)",
                           (unsigned)t, s->meta[p].name, sq_world_error(s->ps[p].w));
                return -1;
            }
            if (rc) return world_fail(s, p, err, errlen);
        }
        res->time[SQ_TT_GRAD] += sq_clock_s() - t0;
        /* captured once the world took it: a trace holds finite gradients only */
        if (capture) {
            t0 = sq_clock_s();
            if (capture_file(s, t, r, s->gptr, err, errlen)) return -1;
            res->time[SQ_TT_CAPTURE] += sq_clock_s() - t0;
        }
    }
    *loss = sum / s->N;
    double t0 = sq_clock_s();
    for (size_t p = 0; p < s->np; p++) {
        param_state *q = &s->ps[p];
        if (sq_world_reduce_grads(q->w, t)) return world_fail(s, p, err, errlen);
        for (int r = 0; r < s->N; r++)
            if (sq_world_get_grad_shard(q->w, r, q->red + (size_t)r * q->S))
                return world_fail(s, p, err, errlen);
    }
    res->time[SQ_TT_GRAD] += sq_clock_s() - t0;
    if (s->sink && s->sink->tensor)
        for (size_t p = 0; p < s->np; p++)
            if (s->sink->tensor(s->sink->ctx, t, p, SQ_TRAIN_REDUCED, s->ps[p].red, s->ps[p].n)) {
                sq_set_err(err, errlen, "step %u: stopped by the caller", (unsigned)t);
                return -1;
            }
    return 0;
}

/* Step 3: clipping and every worker's AdamW on its shard. */
static void optimize(train_state *s, uint32_t t, float lr, double *norm)
{
    const sq_train_config *c = s->c;
    double sq = 0;
    for (size_t p = 0; p < s->np; p++) {
        const float *g = s->ps[p].red;
        for (uint64_t i = 0; i < s->ps[p].n; i++) sq += (double)g[i] * (double)g[i];
    }
    *norm = sqrt(sq);
    float scale = c->clip > 0 && *norm > c->clip ? (float)(c->clip / *norm) : 1.0f;
    for (size_t p = 0; p < s->np; p++) {
        param_state *q = &s->ps[p];
        for (int r = 0; r < s->N; r++) {
            uint64_t first = (uint64_t)r * q->S;
            size_t len = (size_t)sq_world_shard_len(q->w, r);
            if (!len) break;
            sq_adamw_step(&c->adamw, lr, t + 1, s->meta[p].decay, scale, q->red + first,
                          q->master + first, q->m + first, q->v + first, len);
        }
    }
}

/* Step 4: the masters out, the all-gather of step t + 1, the new w-hat in. */
static int gather(train_state *s, uint32_t t, char *err, size_t errlen)
{
    for (size_t p = 0; p < s->np; p++) {
        param_state *q = &s->ps[p];
        for (int r = 0; r < s->N; r++)
            if (sq_world_put_master(q->w, r, q->master + (size_t)r * q->S))
                return world_fail(s, p, err, errlen);
        if (sq_world_gather_weights(q->w, t + 1)) return world_fail(s, p, err, errlen);
    }
    return read_weights(s, err, errlen);
}

static int train_loop(train_state *s, char *err, size_t errlen)
{
    const sq_train_config *c = s->c;
    sq_train_result *res = s->res;
    sq_lr_schedule sched = c->lr;
    sched.total = c->steps;
    const double step_flops = s->N * sq_gpt_flops(&c->model, c->batch, c->seq);
    const uint64_t step_tokens = (uint64_t)s->N * (uint64_t)c->batch * (uint64_t)c->seq;
    double t_start = sq_clock_s();
    if (init_weights(s, err, errlen) || read_weights(s, err, errlen)) return -1;
    for (uint32_t t = 0; t < c->steps; t++) {
        int capture = s->tw && t % c->capture_every == 0;
        if (capture) {
            /* the masters at the start of the step: what replay gathers */
            double t0 = sq_clock_s();
            if (capture_file(s, t, -1, s->mptr, err, errlen)) return -1;
            res->time[SQ_TT_CAPTURE] += sq_clock_s() - t0;
            res->captured++;
        }
        if (s->sink && s->sink->tensor)
            for (size_t p = 0; p < s->np; p++)
                if (s->sink->tensor(s->sink->ctx, t, p, SQ_TRAIN_MODEL, s->wptr[p],
                                    s->ps[p].n)) {
                    sq_set_err(err, errlen, "step %u: stopped by the caller", (unsigned)t);
                    return -1;
                }
        double loss;
        if (gradients(s, t, capture, &loss, err, errlen)) return -1;
        float lr = sq_lr_at(&sched, t);
        double norm, t0 = sq_clock_s();
        optimize(s, t, lr, &norm);
        res->time[SQ_TT_OPTIM] += sq_clock_s() - t0;
        t0 = sq_clock_s();
        if (gather(s, t, err, errlen)) return -1;
        res->time[SQ_TT_WEIGHT] += sq_clock_s() - t0;
        sq_train_row row = {.step = t, .loss = loss, .val_loss = NAN, .lr = lr,
                            .grad_norm = norm};
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
        if (s->sink && s->sink->step && s->sink->step(s->sink->ctx, &row, err, errlen)) return -1;
        if (s->sink && s->sink->progress) s->sink->progress(s->sink->ctx, t + 1, c->steps, loss);
    }
    return 0;
}

int sq_train_run(const sq_train_config *c, const sq_corpus *corpus, const sq_train_sink *sink,
                 sq_train_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->final_val = NAN;
    if (sq_train_validate(c, corpus, err, errlen)) return -1;
    train_state s = {.c = c, .corpus = corpus, .sink = sink, .res = out};
    double t0 = sq_clock_s();
    int rc = open_state(&s, err, errlen);
    if (!rc && c->capture) {
        sq_trace_param *tp = calloc(s.np, sizeof *tp);
        if (!tp) {
            sq_set_err(err, errlen, "out of memory");
            rc = -1;
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
                                         SQ_ST_F32, topo, c->capture_model, err, errlen);
            if (rc) s.tw = NULL;
            free(tp);
        }
    }
    if (!rc) rc = train_loop(&s, err, errlen);
    if (!rc && s.tw) {
        double tc = sq_clock_s();
        rc = sq_trace_writer_close(s.tw, err, errlen);
        s.tw = NULL;
        out->time[SQ_TT_CAPTURE] += sq_clock_s() - tc;
    }
    if (s.ps) {
        sq_traffic sum;
        memset(&sum, 0, sizeof sum);
        for (size_t p = 0; p < s.np && s.ps[p].w; p++) sq_world_add_traffic(s.ps[p].w, &sum);
        sq_bytes_rows(&sum, out->bytes);
    }
    free_state(&s);
    out->seconds = sq_clock_s() - t0;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) out->peak_rss = (uint64_t)ru.ru_maxrss * 1024;
    return rc;
}
