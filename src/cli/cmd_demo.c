/*
** cmd_demo.c -- `shardq demo`: the main job on its built-in defaults, a tour
** of the whole harness in a few minutes on a laptop:
**
**   1. train the byte-level GPT under the baseline while capturing a trace
**      of its weights and per-worker gradients;
**   2. sweep bits x group sizes x Hadamard, and every preset over three
**      seeds, on that trace (replays);
**   3. train the same model under the main presets (same data, same seed);
**   4. measure the codec kernels beside the copy bandwidth;
**   5. run the cost model for the speedup at cluster scale;
**   6. write the report, and print the lines that matter most.
**
** Every step does in this process what the ordinary command does (train,
** sweep and report run as those commands; bench and model as the library
** calls behind them, sq_bench_record and sq_cost_record), every result goes
** to one database in the output directory, and each run carries a key: a
** demo interrupted at any point completes by running it again, and a
** finished one reruns in seconds.
**
** A configuration (the options and the corpus's bytes) is named by the
** capture run's key, which holds all of them: another --steps, --tiny or
** corpus is another capture into its own trace directory, so the keys of
** the sweeps after it (which hold the trace's and the corpus's paths) are
** new too, and the lines printed and the report read that configuration's
** runs only. The corpus is read from a copy named by its hash in the output
** directory, which the recipes can name safely (libinih cannot quote). One
** demo at a time holds the directory (a lock file).
*/
#define _GNU_SOURCE /* realpath, PR_SET_PDEATHSIG */
#include "cli.h"
#include "report/report.h"
#include "shardq/bench.h"
#include "shardq/cost.h"
#include "shardq/sweep.h"
#include "sq_clock.h"
#include "shardq/store.h"
#include "shardq/trace.h"
#include "shardq/train.h"
#include "trace/input.h"

#include <sqlite3.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char demo_usage[] =
    "usage: shardq demo [options]\n"
    "\n"
    "The main job, on built-in defaults: trains the byte-level GPT on the default\n"
    "corpus under the baseline while capturing a trace; sweeps bits, group sizes,\n"
    "the Hadamard transform and every preset over that trace; trains the main\n"
    "presets for comparison, and the baseline and sdp4bit under two more seeds;\n"
    "measures the codec kernels; predicts the speedup on the SDP4Bit A100\n"
    "cluster with the cost model; and writes a report that opens with the\n"
    "summary and the setup (ten training runs: most of its time, which README\n"
    "says as measured). Everything lands in DIR: shardq.db, the trace\n"
    "(trace-ID, and the link trace), the copy of the corpus it trains on\n"
    "(corpus-HASH.txt), the recipes it ran, and report/index.html. Run it again\n"
    "to resume: it says what it reuses. Other options or another corpus in the\n"
    "same DIR are another configuration, run afresh beside the first.\n"
    "\n"
    "options:\n"
    "  --out DIR        where everything goes (default shardq-demo)\n"
    "  --corpus PATH    training text (default $SHARDQ_CORPUS, else Debian's\n"
    "                   fortunes)\n"
    "  --steps N        training steps of each run (default 200)\n"
    "  --tiny           a 1-layer, 32-wide model on 1x2 workers and a short\n"
    "                   sweep: the whole tour in seconds (a smoke test)\n"
    "  -h, --help       this text\n"
    "\n"
    "Exit status: 0 done, 1 error, 2 usage, 75 another demo is writing into DIR.\n";

/* The presets compared by training: the baseline, the paper's weight and
** gradient halves, SDP4Bit itself and ZeRO++ at 4 bits. */
static const char demo_presets[] = "qw, qwd, tlqhs, sdp4bit, zeropp";

/* Run ids, for the queries and the report of one configuration. */
typedef struct idset {
    int64_t *v;
    size_t n, cap;
} idset;

typedef struct demo {
    char out[PATH_MAX];
    char db[PATH_MAX + 16];
    char report[PATH_MAX + 16];
    const char *corpus_src;   /* the text the user gave, or the default */
    char corpus[PATH_MAX + 64]; /* OUT/corpus-HASH.txt: what every run trains on */
    char corpus_name[64];     /* corpus-HASH.txt */
    char corpus_id[64];       /* fnv1a64:HASH:BYTES */
    char trace[PATH_MAX + 64]; /* OUT/trace-ID, one per capture key */
    char trace_name[64];      /* trace-ID */
    char key[2048];           /* the capture run's key */
    int steps, tiny;
    char every[32]; /* a quarter of the steps: evaluations and captured steps */
    double t0;
    /* the done runs of this configuration, found as each phase ends */
    int64_t capture_run, bench_run, model_run;
    idset replays, trains, all;
    /* the three lines that matter and the setup: printed at the end, and
    ** the report's page opens with them */
    char lines[3][1536];
    char setup[8][768];
    int nsetup;
} demo;

static void phase(const demo *d, int k, const char *what)
{
    printf("\n[%d/6 %5.0f s] %s\n", k, sq_clock_s() - d->t0, what);
    fflush(stdout);
}

/* Runs one subcommand in this process with a NULL-terminated argument list. */
static int run(int (*cmd)(int, char **), const char *const *args)
{
    char *argv[64];
    int argc = 0;
    while (args[argc] && argc < 63) {
        argv[argc] = (char *)args[argc];
        argc++;
    }
    argv[argc] = NULL;
    fflush(stdout);
    int rc = cmd(argc, argv);
    fflush(stdout);
    return rc;
}

static int idset_add(idset *s, int64_t id)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        int64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = id;
    return 0;
}

/* "1,2,3" (malloc'd; "0" for none, which matches no run). */
static char *idset_sql(const idset *s)
{
    char *p = malloc(s->n * 21 + 2);
    if (!p) return NULL;
    size_t len = 0;
    p[0] = '0', p[1] = '\0';
    for (size_t i = 0; i < s->n; i++)
        len += (size_t)sprintf(p + len, "%s%lld", i ? "," : "", (long long)s->v[i]);
    return p;
}

/* ------------------------------------------------------------------------ */
/* One writer per output directory                                          */
/* ------------------------------------------------------------------------ */

/* Locks OUT/.shardq-demo.lock for the life of this demo: two demos in one
** directory would delete each other's figures and mix their runs. Returns
** the descriptor, or -1 (said on stderr; *busy when another demo holds it). */
static int lock_out(const demo *d, int *busy)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/.shardq-demo.lock", d->out);
    *busy = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "shardq demo: %s: cannot create: %s\n", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char buf[64] = "";
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        long pid = 0;
        if (n > 0) buf[n] = '\0', sscanf(buf, "pid %ld", &pid);
        close(fd);
        if (e != EWOULDBLOCK) {
            fprintf(stderr, "shardq demo: %s: cannot lock: %s\n", path, strerror(e));
            return -1;
        }
        *busy = 1;
        fprintf(stderr, "shardq demo: --out %s: another demo", d->out);
        if (pid > 0) fprintf(stderr, " (pid %ld)", pid);
        fprintf(stderr, " is writing into this directory; wait for it to finish, or give "
                "another --out\n");
        return -1;
    }
    char text[32];
    int len = snprintf(text, sizeof text, "pid %ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
        fprintf(stderr, "shardq demo: %s: cannot write: %s\n", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* ------------------------------------------------------------------------ */
/* The corpus                                                               */
/* ------------------------------------------------------------------------ */

/* The corpus's bytes in the order it was read: the loader deals them into
** training and validation blocks (corpus.h), and this deals them back. */
static void join_blocks(const sq_corpus *c, uint8_t *all)
{
    size_t len = c->ntrain + c->nval, at = 0, ti = 0, vi = 0;
    size_t block = len >= 10 * (size_t)SQ_CORPUS_BLOCK ? SQ_CORPUS_BLOCK : len / 10;
    for (size_t k = 0; at < len; k++) {
        size_t n = len - at < block ? len - at : block;
        if (k % 10 == 9) memcpy(all + at, c->val + vi, n), vi += n;
        else memcpy(all + at, c->train + ti, n), ti += n;
        at += n;
    }
}

/* Whether the file at path holds exactly data[0..len). */
static int holds(const char *path, const uint8_t *data, size_t len)
{
    /* a regular file, opened without blocking (a FIFO put there would hang
    ** fopen); anything else is not the copy, and writing it says why */
    sq_input in;
    FILE *f = sq_input_fopen(path, 0, &in, NULL);
    if (!f) return 0;
    uint8_t buf[65536];
    size_t at = 0, n;
    int same = 1;
    while (same && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        same = at + n <= len && memcmp(buf, data + at, n) == 0;
        at += n;
    }
    fclose(f);
    return same && at == len;
}

/* Every run trains on OUT/corpus-HASH.txt, a copy of the corpus's bytes
** named by their hash: the recipes refer to it by that name (a path as
** written by the user could hold what the recipe reader takes for a
** comment, or be longer than its lines), and the keys of the runs, which
** hold its real path, change when the text does. */
static int take_corpus(demo *d)
{
    sq_error err = {0};
    sq_corpus c, copy;
    if (sq_corpus_load(d->corpus_src, &c, &err)) {
        fprintf(stderr, "shardq demo: --corpus: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    size_t len = c.ntrain + c.nval;
    uint8_t *all = malloc(len);
    if (!all) {
        fprintf(stderr, "shardq demo: --corpus %s: out of memory for %zu bytes\n",
                d->corpus_src, len);
        sq_corpus_free(&c);
        return CLI_RUNTIME;
    }
    join_blocks(&c, all);
    uint64_t h = sq_fnv1a64(all, len, SQ_FNV1A64_BASIS);
    snprintf(d->corpus_name, sizeof d->corpus_name, "corpus-%016llx.txt", (unsigned long long)h);
    snprintf(d->corpus_id, sizeof d->corpus_id, "fnv1a64:%016llx:%zu", (unsigned long long)h,
             len);
    snprintf(d->corpus, sizeof d->corpus, "%s/%s", d->out, d->corpus_name);
    int rc = CLI_OK;
    if (!holds(d->corpus, all, len) && cli_write_file("demo", d->corpus, all, len))
        rc = CLI_RUNTIME;
    /* the copy must train exactly like the original */
    if (rc == CLI_OK) {
        if (sq_corpus_load(d->corpus, &copy, &err)) {
            fprintf(stderr, "shardq demo: %s\n", sq_error_message(&err));
            rc = CLI_RUNTIME;
        } else {
            if (copy.ntrain != c.ntrain || copy.nval != c.nval ||
                memcmp(copy.train, c.train, c.ntrain) || memcmp(copy.val, c.val, c.nval)) {
                fprintf(stderr, "shardq demo: %s: the copy of --corpus %s does not read as the "
                        "same text\n", d->corpus, d->corpus_src);
                rc = CLI_RUNTIME;
            }
            sq_corpus_free(&copy);
        }
    }
    if (rc == CLI_OK)
        printf("corpus: %s, %zu bytes in %zu file%s, trained on as %s\n", d->corpus_src, len,
               c.files, c.files == 1 ? "" : "s", d->corpus_name);
    free(all);
    sq_corpus_free(&c);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Recipes                                                                  */
/* ------------------------------------------------------------------------ */

/* A recipe being written. The recipe reader (libinih) has no quoting: a
** value with ';' or '#' is cut at the comment, spaces around it are
** dropped, a newline ends it, and a line is at most 200 bytes. A value it
** would not read back as written is refused, by name. */
typedef struct ini {
    const char *path;
    char text[8192];
    size_t len;
    int bad;
} ini;

static void ini_raw(ini *b, const char *text)
{
    size_t n = strlen(text);
    if (b->len + n >= sizeof b->text) {
        fprintf(stderr, "shardq demo: %s: the recipe is too long\n", b->path);
        b->bad = 1;
        return;
    }
    memcpy(b->text + b->len, text, n + 1);
    b->len += n;
}

static void ini_kv(ini *b, const char *key, const char *value)
{
    const char *why = NULL;
    size_t n = strlen(value);
    if (strpbrk(value, ";#"))
        why = "it holds ';' or '#', which the recipe reader takes for a comment";
    else if (strpbrk(value, "\n\r"))
        why = "it holds a line break";
    else if (n && (isspace((unsigned char)value[0]) || isspace((unsigned char)value[n - 1])))
        why = "it starts or ends with a space, which the recipe reader drops";
    else if (strlen(key) + n + 4 > 190)
        why = "the line would be longer than the recipe reader's 200 bytes";
    if (why) {
        fprintf(stderr, "shardq demo: %s: cannot write %s = '%s': %s\n", b->path, key, value,
                why);
        b->bad = 1;
        return;
    }
    ini_raw(b, key);
    ini_raw(b, " = ");
    ini_raw(b, value);
    ini_raw(b, "\n");
}

static int ini_write(ini *b)
{
    if (b->bad) return CLI_RUNTIME;
    return cli_write_file("demo", b->path, b->text, b->len) ? CLI_RUNTIME : CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* The database                                                             */
/* ------------------------------------------------------------------------ */

static int open_db(const demo *d, sq_store **s)
{
    sq_error err = {0};
    if (sq_store_open(d->db, SQ_STORE_BUSY_MS, 0, s, &err)) {
        fprintf(stderr, "shardq demo: %s\n", sq_error_message(&err));
        return -1;
    }
    return 0;
}

/* The done run with this key: its id, 0 when there is none. */
static int64_t run_by_key(sqlite3 *db, const char *key)
{
    sqlite3_stmt *st;
    int64_t id = 0;
    if (sqlite3_prepare_v2(db, "SELECT id FROM runs WHERE key = ?1 AND status = 'done'", -1, &st,
                           NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return id;
}

/* The done runs of every configuration of the recipe at path, into *ids
** (and d->all): a phase is done only when all of them are. */
static int recipe_runs(demo *d, const char *path, idset *ids)
{
    sq_sweep r;
    sq_error err = {0};
    sq_store *s;
    if (sq_sweep_load(path, NULL, &r, &err)) {
        fprintf(stderr, "shardq demo: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    if (open_db(d, &s)) {
        sq_sweep_free(&r);
        return CLI_RUNTIME;
    }
    size_t missing = 0;
    int oom = 0;
    for (size_t i = 0; i < r.nruns; i++) {
        int64_t id = run_by_key(sq_store_db(s), r.runs[i].key);
        if (id <= 0) missing++;
        else oom |= idset_add(ids, id) || idset_add(&d->all, id);
    }
    sq_store_close(s);
    size_t n = r.nruns;
    sq_sweep_free(&r);
    if (oom) {
        fprintf(stderr, "shardq demo: out of memory\n");
        return CLI_RUNTIME;
    }
    if (missing) {
        fprintf(stderr, "shardq demo: %s: %zu of its %zu runs are not done in %s\n", path,
                missing, n, d->db);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* The phases                                                               */
/* ------------------------------------------------------------------------ */

/* The model options of every training run. */
static void model_args(const demo *d, const char **a, int *n)
{
    static char steps[32];
    snprintf(steps, sizeof steps, "%d", d->steps);
    a[(*n)++] = "--steps", a[(*n)++] = steps;
    a[(*n)++] = "--eval-every", a[(*n)++] = d->every;
    if (d->tiny) {
        static const char *const tiny[] = {"--layers", "1", "--channels", "32", "--heads", "2",
                                           "--context", "32", "--seq", "32", "--eval-seqs", "8",
                                           "--workers", "1x2"};
        for (size_t i = 0; i < sizeof tiny / sizeof *tiny; i++) a[(*n)++] = tiny[i];
    } else {
        a[(*n)++] = "--workers", a[(*n)++] = "2x4";
    }
    a[(*n)++] = "--corpus", a[(*n)++] = d->corpus;
}

/* The capture run's key: every option of the run and the corpus's hash,
** so that another --steps, --tiny or text is another run, with its own
** trace directory (named by the key's hash), never the old one reused. */
static void capture_key(demo *d)
{
    const char *a[64];
    int n = 0;
    model_args(d, a, &n);
    size_t len = (size_t)snprintf(d->key, sizeof d->key, "demo/capture;scheme=baseline;"
                                  "capture-every=%s", d->every);
    for (int i = 0; i + 1 < n; i += 2)
        if (strcmp(a[i], "--corpus"))
            len += (size_t)snprintf(d->key + len, sizeof d->key - len, ";%s=%s", a[i] + 2,
                                    a[i + 1]);
    snprintf(d->key + len, sizeof d->key - len, ";corpus=%s", d->corpus_id);
    snprintf(d->trace_name, sizeof d->trace_name, "trace-%016llx",
             (unsigned long long)sq_fnv1a64(d->key, strlen(d->key), SQ_FNV1A64_BASIS));
    snprintf(d->trace, sizeof d->trace, "%s/%s", d->out, d->trace_name);
}

/* OUT/trace: a link to the trace of the configuration run last. A trace
** directory of that name (from an older demo) is left alone. */
static void link_trace(const demo *d)
{
    char link[PATH_MAX + 16], tmp[PATH_MAX + 48];
    struct stat st;
    snprintf(link, sizeof link, "%s/trace", d->out);
    if (lstat(link, &st) == 0 && !S_ISLNK(st.st_mode)) {
        printf("%s is not a link: left as it is (this trace is %s)\n", link, d->trace);
        return;
    }
    snprintf(tmp, sizeof tmp, "%s/.trace.%ld", d->out, (long)getpid());
    unlink(tmp);
    if (symlink(d->trace_name, tmp) != 0 || rename(tmp, link) != 0) {
        fprintf(stderr, "shardq demo: %s: cannot link it to %s: %s\n", link, d->trace_name,
                strerror(errno));
        unlink(tmp);
    }
}

/* The capture run: the options of model_args as a training configuration
** (the same as `shardq train` makes of them), under the baseline. */
static int capture_config(const demo *d, sq_sweep_config *c)
{
    sq_sweep_config_defaults(c, SQ_SWEEP_TRAIN);
    sq_train_config *t = &c->train;
    t->steps = (uint32_t)d->steps;
    t->eval_every = (uint32_t)strtoul(d->every, NULL, 10);
    const char *workers = "2x4";
    if (d->tiny) {
        t->model.layers = 1, t->model.channels = 32, t->model.heads = 2, t->model.context = 32;
        t->seq = 32, t->eval_seqs = 8;
        workers = "1x2";
    }
    t->lr.min_lr = t->lr.lr / 10;
    t->lr.warmup = t->steps / 10;
    sq_error err;
    if (sq_scheme_preset("baseline", &c->scheme, &err) ||
        sq_topo_parse(workers, &c->topo, &err)) {
        fprintf(stderr, "shardq demo: %s\n", sq_error_message(&err));
        return -1;
    }
    c->has_topo = 1;
    c->preset = (char *)"baseline";
    c->device = (char *)"cpu";
    c->corpus = (char *)d->corpus;
    t->scheme = c->scheme;
    t->topo = c->topo;
    t->seed = c->seed;
    t->device = c->device;
    c->steps = t->steps;
    return 0;
}

/* Trains the capture run c in a child process, which prints what `shardq
** train` prints. A child, because libgomp is not fork-safe: the sweeps
** that follow fork their jobs, and this process must not have run an
** OpenMP parallel region (the training's) before they do. */
static int run_capture(const demo *d, const sq_sweep_config *c)
{
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        fprintf(stderr, "shardq demo: fork: %s\n", strerror(errno));
        return CLI_RUNTIME;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed demo leaves no training behind */
        if (getppid() != parent) _exit(CLI_RUNTIME);
        sq_sweep_child_close_fds(-1); /* the lock of --out stays the demo's */
        int rc = cli_train_job(c, d->db, d->key, "demo-train", SQ_STORE_BUSY_MS, d->trace,
                               c->train.eval_every, 0, 0, NULL);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "shardq demo: wait: %s\n", strerror(errno));
            return CLI_RUNTIME;
        }
    return WIFEXITED(status) ? WEXITSTATUS(status) : CLI_RUNTIME;
}

static int step_capture(demo *d)
{
    phase(d, 1, "training the GPT under the baseline, capturing a trace of its weights and "
                "gradients");
    sq_store *s;
    if (open_db(d, &s)) return CLI_RUNTIME;
    int64_t id = run_by_key(sq_store_db(s), d->key);
    sq_store_close(s);
    if (id > 0)
        printf("reusing capture run %lld (same options, same corpus) and its trace %s\n",
               (long long)id, d->trace_name);
    /* a trace cut short by a kill carries this key: the training takes it up */
    sq_sweep_config c;
    if (capture_config(d, &c)) return CLI_RUNTIME;
    int rc = run_capture(d, &c);
    if (rc != CLI_OK) return rc;
    if (open_db(d, &s)) return CLI_RUNTIME;
    d->capture_run = run_by_key(sq_store_db(s), d->key);
    sq_store_close(s);
    if (d->capture_run <= 0) {
        fprintf(stderr, "shardq demo: the capture run is not done in %s\n", d->db);
        return CLI_RUNTIME;
    }
    if (idset_add(&d->trains, d->capture_run) || idset_add(&d->all, d->capture_run)) {
        fprintf(stderr, "shardq demo: out of memory\n");
        return CLI_RUNTIME;
    }
    link_trace(d);
    return CLI_OK;
}

static int step_replays(demo *d)
{
    phase(d, 2, "sweeping bits x group sizes x Hadamard, and every preset over 3 seeds, on the "
                "trace");
    ini b = {.path = NULL};
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/demo-replay.ini", d->out);
    b.path = path;
    ini_raw(&b, "; demo-replay.ini -- written by `shardq demo`: the quantization ablation on\n"
                "; the trace the demo's baseline training captured.\n\n[sweep]\n");
    ini_kv(&b, "name", "demo-replay");
    ini_kv(&b, "trace", d->trace_name);
    ini_kv(&b, "workers", d->tiny ? "1x2" : "2x4");
    ini_kv(&b, "seeds", "1");
    ini_raw(&b, "\n[grid gradients]\n");
    ini_kv(&b, "presets", "sdp4bit");
    ini_kv(&b, "paths", "grad");
    ini_kv(&b, "grad.bits", d->tiny ? "2, 4, 8" : "2, 3, 4, 6, 8");
    ini_kv(&b, "grad.group", d->tiny ? "32, 128" : "32, 128, 512, 2048");
    ini_kv(&b, "grad.hadamard", "0, 32");
    ini_raw(&b, "\n[grid presets]\n");
    ini_kv(&b, "presets", "baseline, qw, qwd, ulq, tlq, tlqhs, sdp4bit, zeropp, zeropp8, qsdp");
    ini_kv(&b, "seeds", "1, 2, 3");
    int rc = ini_write(&b);
    if (rc != CLI_OK) return rc;
    /* inproc: the demo's sweeps are its own, even under an MPI launcher */
    const char *a[] = {"sweep", "--transport", "inproc", "--db", d->db, path, NULL};
    rc = run(cmd_sweep, a);
    return rc != CLI_OK ? rc : recipe_runs(d, path, &d->replays);
}

/* A training sweep of the demo: recipe FILE (its header comment, sweep
** NAME, SEEDS, a grid GRID of PRESETS, and the model's options as keys but
** the workers and corpus), run in process, its runs added to d->trains. */
static int train_sweep(demo *d, const char *file, const char *header, const char *name,
                       const char *seeds, const char *grid, const char *presets)
{
    ini b = {.path = NULL};
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", d->out, file);
    b.path = path;
    ini_raw(&b, header);
    ini_raw(&b, "\n[sweep]\n");
    ini_kv(&b, "name", name);
    ini_kv(&b, "command", "train");
    ini_kv(&b, "workers", d->tiny ? "1x2" : "2x4");
    ini_kv(&b, "seeds", seeds);
    ini_kv(&b, "corpus", d->corpus_name);
    char g[64];
    snprintf(g, sizeof g, "\n[grid %s]\n", grid);
    ini_raw(&b, g);
    ini_kv(&b, "presets", presets);
    const char *a[64];
    int n = 0;
    model_args(d, a, &n);
    for (int i = 0; i + 1 < n; i += 2)
        if (strcmp(a[i], "--workers") && strcmp(a[i], "--corpus")) ini_kv(&b, a[i] + 2, a[i + 1]);
    int rc = ini_write(&b);
    if (rc != CLI_OK) return rc;
    const char *s[] = {"sweep", "--transport", "inproc", "--db", d->db, path, NULL};
    rc = run(cmd_sweep, s);
    return rc != CLI_OK ? rc : recipe_runs(d, path, &d->trains);
}

/* The baseline and sdp4bit again under seeds 2 and 3, so that the
** convergence line compares their difference with the spread of seeds
** (seed 1 is the capture run and the main sweep's). Two presets, not all:
** each run is a whole training, the demo's largest cost. */
static int step_seeds(demo *d)
{
    printf("\nthe baseline and sdp4bit under seeds 2 and 3, for the seeds' spread:\n");
    return train_sweep(d, "demo-seeds.ini",
                       "; demo-seeds.ini -- written by `shardq demo`: the baseline and sdp4bit\n"
                       "; trained like the others under two more seeds, for the seeds' spread.\n",
                       "demo-seeds", "2, 3", "seeds", "baseline, sdp4bit");
}

static int step_training(demo *d)
{
    phase(d, 3, "training the same model under the main presets (same data, same seed)");
    int rc = train_sweep(d, "demo-train.ini",
                         "; demo-train.ini -- written by `shardq demo`: the main presets trained like\n"
                         "; the demo's baseline (its run is the capture, in the same sweep).\n",
                         "demo-train", "1", "presets", demo_presets);
    return rc == CLI_OK ? step_seeds(d) : rc;
}

/* The newest done run that sql (one '?1' .. '?3' parameters at most, as
** text) selects: bench and model runs carry no key, so the demo looks for
** one with its own options. */
static int64_t find_run(const demo *d, const char *sql, const char *p1, const char *p2,
                        double p3)
{
    sq_store *s;
    if (open_db(d, &s)) return -1;
    sqlite3_stmt *st;
    int64_t id = 0;
    if (sqlite3_prepare_v2(sq_store_db(s), sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "shardq demo: %s: %s\n", d->db, sqlite3_errmsg(sq_store_db(s)));
        id = -1;
    } else {
        if (p1) sqlite3_bind_text(st, 1, p1, -1, SQLITE_STATIC);
        if (p2) sqlite3_bind_text(st, 2, p2, -1, SQLITE_STATIC);
        if (p3 > 0) sqlite3_bind_double(st, 3, p3);
        if (sqlite3_step(st) == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sq_store_close(s);
    return id;
}

static const char bench_ops[] = "quantize,quantize-nh,dequantize,quantize-8,sum-requant";
static const char bench_ops_json[] =
    "[\"quantize\",\"quantize-nh\",\"dequantize\",\"quantize-8\",\"sum-requant\"]";
#define BENCH_SQL                                                                          \
    "SELECT max(id) FROM runs WHERE kind = 'bench' AND status = 'done' AND "                    \
    "json_extract(config, '$.device') = 'cpu' AND json_extract(config, '$.codec') IS NULL AND " \
    "json_extract(config, '$.sizes_mb') = ?1 AND json_extract(config, '$.ops') = ?2 AND "       \
    "json_extract(config, '$.min_time') = ?3 AND id IN (SELECT run_id FROM bench_results)"
static const char bench_sql[] = BENCH_SQL;
/* a bench run none of whose figures stayed noisy, the only kind the demo
** reuses: SQ_BENCH_NOISY (the stored spread over a quarter of the median) or
** SQ_BENCH_SLOW (more than 1 thread under half of the same op and size on 1
** thread); b is the bench_results row */
#define BENCH_NOISY_ROW                                                                    \
    "(b.gb_per_s_std > 0.25 * b.gb_per_s OR (b.threads > 1 AND b.gb_per_s < 0.5 * "        \
    "(SELECT o.gb_per_s FROM bench_results o WHERE o.run_id = b.run_id AND o.op = b.op AND " \
    "o.elements = b.elements AND o.threads = 1)))"
static const char bench_steady_sql[] =
    BENCH_SQL " AND NOT EXISTS (SELECT 1 FROM bench_results b WHERE b.run_id = runs.id AND "
    BENCH_NOISY_ROW ")";

/* The figures as they come, one line each (the table is `shardq bench`'s). */
static int bench_line(void *user, const sq_bench_event *ev)
{
    (void)user;
    if (ev->kind != SQ_BENCH_ROW) return 0;
    const sq_bench_result *r = ev->row;
    char th[32];
    snprintf(th, sizeof th, "%d thread%s:", r->threads, r->threads == 1 ? "" : "s");
    printf("  %-12s %3d MB, %-12s %8.2f GB/s, %5.1f%% of the copy%s\n", r->op->name, r->size_mb,
           th, r->gbs, 100.0 * r->gbs / r->copy_gbs,
           !(r->noisy | r->copy_noisy)                 ? ""
           : (r->noisy | r->copy_noisy) & SQ_BENCH_NOISY_SPREAD ? "  NOISY: spread > 25% after 3 tries"
                                                      : "  NOISY: under half of 1 thread's after 3 tries");
    fflush(stdout);
    return 0;
}

/* What `shardq bench --db DB --sizes SIZES --min-time MIN --ops OPS` runs
** and stores: the C reference, on one thread and on every core. */
static int bench_record(const demo *d, const char *sizes, double min_time, int64_t *run)
{
    int sz[8], nsizes = 0, all = sq_get_threads();
    int threads[2] = {1, all}, nthreads = all > 1 ? 2 : 1;
    size_t ops[8];
    int nops = 0;
    char list[128];
    snprintf(list, sizeof list, "%s", sizes);
    for (char *save, *t = strtok_r(list, ",", &save); t && nsizes < 8;
         t = strtok_r(NULL, ",", &save))
        sz[nsizes++] = atoi(t);
    snprintf(list, sizeof list, "%s", bench_ops);
    for (char *save, *t = strtok_r(list, ",", &save); t && nops < 8;
         t = strtok_r(NULL, ",", &save))
        if (sq_bench_find_op(t, &ops[nops]) == SQ_OK) nops++;
    sq_bench_config cfg = {.sizes_mb = sz, .nsizes = nsizes, .threads = threads,
                           .nthreads = nthreads, .ops = ops, .nops = nops, .codec = NULL,
                           .min_time = min_time};
    sq_backend *be = NULL;
    sq_error err = {0};
    int rc = sq_backend_open("cpu", &be, &err);
    if (rc == SQ_OK) {
        rc = sq_bench_record(d->db, SQ_STORE_BUSY_MS, be, &cfg, bench_line, NULL, run, &err);
        sq_backend_close(be);
    }
    if (rc != SQ_OK) {
        fprintf(stderr, "shardq demo: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    printf("stored as run %lld in %s\n", (long long)*run, d->db);
    return CLI_OK;
}

static int step_bench(demo *d)
{
    phase(d, 4, "measuring the codec kernels beside the copy bandwidth");
    const char *sizes = d->tiny ? "1,4" : "1,4,16,64", *min = d->tiny ? "0.01" : "0.05";
    char sizes_json[32];
    snprintf(sizes_json, sizeof sizes_json, "[%s]", sizes);
    int64_t id = find_run(d, bench_steady_sql, sizes_json, bench_ops_json, atof(min));
    if (id < 0) return CLI_RUNTIME;
    if (id > 0) {
        printf("reusing bench run %lld (same sizes, operations and time)\n", (long long)id);
    } else {
        int64_t noisy = find_run(d, bench_sql, sizes_json, bench_ops_json, atof(min));
        if (noisy > 0)
            printf("bench run %lld has figures that stayed noisy (a busy machine): measuring "
                   "again\n", (long long)noisy);
        int64_t run = 0;
        int rc = bench_record(d, sizes, atof(min), &run);
        if (rc != CLI_OK) return rc;
        if ((id = find_run(d, bench_sql, sizes_json, bench_ops_json, atof(min))) <= 0) {
            fprintf(stderr, "shardq demo: the bench run is not in %s\n", d->db);
            return CLI_RUNTIME;
        }
        if (find_run(d, bench_steady_sql, sizes_json, bench_ops_json, atof(min)) != id)
            printf("some figures of bench run %lld stayed noisy after %d tries: the report "
                   "marks them, and the next demo measures again\n", (long long)id,
                   SQ_BENCH_TRIES);
    }
    d->bench_run = id;
    return idset_add(&d->all, id) ? CLI_RUNTIME : CLI_OK;
}

static const char model_sql[] =
    "SELECT max(id) FROM runs WHERE kind = 'model' AND status = 'done' AND "
    "json_extract(config, '$.platform') = 'a100-slingshot10' AND "
    "json_extract(config, '$.model') = 'GPT-1.3B' AND "
    "(SELECT count(DISTINCT gpus) FROM model_results WHERE run_id = runs.id) > 1 AND "
    "(SELECT count(DISTINCT scheme) FROM model_results WHERE run_id = runs.id AND scheme IN "
    "('qw', 'qwd', 'ulq', 'tlq', 'tlqhs', 'sdp4bit', 'zeropp')) = 7";

/* What `shardq model --sweep-gpus --scheme qw,qwd,ulq,tlq,tlqhs,sdp4bit,zeropp
** --db DB` predicts
** and stores: GPT-1.3B on the SDP4Bit A100 cluster from one node up to 1024
** GPUs; printed as a table of speedups. */
static int model_record(const demo *d)
{
    static const char *const names[] = {"qw", "qwd", "ulq", "tlq", "tlqhs", "sdp4bit", "zeropp"};
    enum { N = sizeof names / sizeof *names };
    sq_cost_platform plat;
    sq_cost_model_shape model;
    sq_scheme base, schemes[N];
    sq_error err = {0};
    if (sq_cost_platform_read("a100-slingshot10", &plat, &err) ||
        sq_cost_model_read("gpt-1.3b", &model, &err)) {
        fprintf(stderr, "shardq demo: %s\n", sq_error_message(&err));
        return CLI_RUNTIME;
    }
    if (cli_scheme("demo", "baseline", NULL, 0, &base)) return CLI_RUNTIME;
    for (int i = 0; i < N; i++)
        if (cli_scheme("demo", names[i], NULL, 0, &schemes[i])) return CLI_RUNTIME;
    sq_cost_study st = {.plat = &plat, .model = &model,
                        .par = {.tp = 1, .pp = 1, .micro_batch = 1, .accum = 1},
                        .max_gpus = 1024, .baseline = &base, .schemes = schemes, .names = names,
                        .nschemes = N};
    sq_cost_point *pts = calloc(SQ_COST_MAX_POINTS, sizeof *pts);
    int n = 0;
    int64_t run = 0;
    int rc = pts ? sq_cost_record(d->db, SQ_STORE_BUSY_MS, &st, pts, &n, &run, &err)
                 : sq_error_set(&err, SQ_ERR_NOMEM, "out of memory");
    if (rc != SQ_OK) {
        fprintf(stderr, "shardq demo: %s\n", sq_error_message(&err));
        free(pts);
        return CLI_RUNTIME;
    }
    printf("%s on %s, speedup over the baseline by GPU count:\n  %6s", model.name, plat.name,
           "GPUs");
    for (int i = 0; i < N; i++) printf(" %8s", names[i]);
    printf("\n");
    for (int k = 0; k < n; k++) {
        printf("  %6d", pts[k].gpus);
        for (int i = 0; i < N; i++)
            printf(" %7.2fx", sq_cost_speedup(&pts[k].base, &pts[k].cost[i]));
        printf("\n");
    }
    printf("stored as run %lld in %s\n", (long long)run, d->db);
    fflush(stdout);
    free(pts);
    return CLI_OK;
}

static int step_model(demo *d)
{
    phase(d, 5, "predicting the speedup on the SDP4Bit A100 cluster (cost model)");
    int64_t id = find_run(d, model_sql, NULL, NULL, 0);
    if (id < 0) return CLI_RUNTIME;
    if (id > 0) {
        printf("reusing model run %lld (same platform, model and schemes)\n", (long long)id);
    } else {
        int rc = model_record(d);
        if (rc != CLI_OK) return rc;
        if ((id = find_run(d, model_sql, NULL, NULL, 0)) <= 0) {
            fprintf(stderr, "shardq demo: the model run is not in %s\n", d->db);
            return CLI_RUNTIME;
        }
    }
    d->model_run = id;
    return idset_add(&d->all, id) ? CLI_RUNTIME : CLI_OK;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "id BETWEEN 1 AND 43 OR id IN (45, 49)": the runs of s as a condition
** that reads well in the report (malloc'd). */
static char *id_condition(idset *s)
{
    char *p = malloc(s->n * 48 + 16);
    if (!p) return NULL;
    qsort(s->v, s->n, sizeof *s->v, cmp_id);
    size_t len = 0, nsingle = 0;
    p[0] = '\0';
    for (size_t i = 0, j; i < s->n; i = j) {
        for (j = i + 1; j < s->n && s->v[j] == s->v[j - 1] + 1;) j++;
        if (j - i >= 3)
            len += (size_t)sprintf(p + len, "%sid BETWEEN %lld AND %lld", len ? " OR " : "",
                                   (long long)s->v[i], (long long)s->v[j - 1]);
        else
            nsingle += j - i;
    }
    if (nsingle) {
        len += (size_t)sprintf(p + len, "%sid IN (", len ? " OR " : "");
        size_t k = 0;
        for (size_t i = 0, j; i < s->n; i = j) {
            for (j = i + 1; j < s->n && s->v[j] == s->v[j - 1] + 1;) j++;
            if (j - i < 3)
                for (size_t m = i; m < j; m++)
                    len += (size_t)sprintf(p + len, "%s%lld", k++ ? ", " : "", (long long)s->v[m]);
        }
        sprintf(p + len, ")");
    }
    if (!s->n) sprintf(p, "id IN (0)");
    return p;
}

/* The report of this configuration's runs only: one database may hold
** several (another --steps, --tiny or corpus). */
static void key_compute(demo *d);
static void setup_compute(demo *d);

static int step_report(demo *d)
{
    phase(d, 6, "writing the report");
    char *filter = id_condition(&d->all);
    if (!filter) {
        fprintf(stderr, "shardq demo: out of memory\n");
        return CLI_RUNTIME;
    }
    key_compute(d);
    setup_compute(d);
    const char *summary[3] = {d->lines[0], d->lines[1], d->lines[2]};
    const char *setup[8];
    for (int i = 0; i < d->nsetup; i++) setup[i] = d->setup[i];
    report_options o = {.filter = filter, .summary = summary, .nsummary = d->lines[0][0] ? 3 : 0,
                        .setup = setup, .nsetup = d->nsetup};
    sq_error err = {0};
    int rc = report_write_opts(d->db, d->report, &o, &err);
    free(filter);
    if (rc == SQ_OK) return CLI_OK;
    if (err.msg[0]) fprintf(stderr, "shardq report: %s\n", err.msg); /* empty: said */
    return rc == SQ_ERR_SPEC ? CLI_USAGE : CLI_RUNTIME;
}

/* ------------------------------------------------------------------------ */
/* The lines that matter                                                    */
/* ------------------------------------------------------------------------ */

static double q1(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    double v = NAN;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return NAN;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The queries below read this configuration's runs only (ids). */
static double replay_err(sqlite3 *db, const char *ids, const char *preset, const char *path)
{
    size_t len = strlen(ids) + 512;
    char *sql = malloc(len);
    if (!sql) return NAN;
    snprintf(sql, len, "SELECT avg(m.rel_l2) FROM runs r JOIN step_metrics m ON m.run_id = r.id "
             "WHERE r.id IN (%s) AND r.preset = '%s' AND m.path = '%s' AND r.key LIKE "
             "'%%paths=grad,weight%%'", ids, preset, path);
    double v = q1(db, sql);
    free(sql);
    return v;
}

/* What a collective of the same replays cost per real parameter (the
** padding paid for: bits_per_param of the bytes table) on the inter-node
** hop, or on the intra-node one when the world has a single node; *link
** says which. NaN when the runs predate the column. */
static double replay_bits(sqlite3 *db, const char *ids, const char *preset, const char *coll,
                          const char **link)
{
    static const char *const links[2] = {"inter", "intra"};
    size_t len = strlen(ids) + 512;
    char *sql = malloc(len);
    double v = NAN;
    if (!sql) return NAN;
    for (int k = 0; k < 2 && !isfinite(v); k++) {
        snprintf(sql, len, "SELECT 8.0 * sum(b.sent_codes + b.sent_meta) / sum(b.sent_params) "
                 "FROM runs r JOIN bytes b ON b.run_id = r.id WHERE r.id IN (%s) AND "
                 "r.preset = '%s' AND r.key LIKE '%%paths=grad,weight%%' AND b.collective = "
                 "'%s' AND b.link = '%s' AND b.sent_elems > 0", ids, preset, coll, links[k]);
        v = q1(db, sql);
        *link = links[k];
    }
    free(sql);
    return v;
}

static double final_val(sqlite3 *db, const char *ids, const char *preset)
{
    size_t len = strlen(ids) + 512;
    char *sql = malloc(len);
    if (!sql) return NAN;
    snprintf(sql, len, "SELECT t.val_loss FROM runs r JOIN train_steps t ON t.run_id = r.id "
             "WHERE r.id IN (%s) AND r.preset = '%s' AND t.val_loss IS NOT NULL ORDER BY "
             "t.step DESC LIMIT 1", ids, preset);
    double v = q1(db, sql);
    free(sql);
    return v;
}

/* The last validation loss of every run of preset among ids: their mean,
** variance (0 for one run) and number. */
static int final_vals(sqlite3 *db, const char *ids, const char *preset, double *mean,
                      double *var)
{
    size_t len = strlen(ids) + 512;
    char *sql = malloc(len);
    int n = 0;
    double sum = 0, sum2 = 0;
    *mean = NAN, *var = 0;
    if (!sql) return 0;
    snprintf(sql, len, "SELECT t.val_loss FROM runs r JOIN train_steps t ON t.run_id = r.id "
             "WHERE r.id IN (%s) AND r.preset = '%s' AND t.step = (SELECT max(step) FROM "
             "train_steps WHERE run_id = r.id AND val_loss IS NOT NULL)", ids, preset);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            double v = sqlite3_column_double(st, 0);
            sum += v, sum2 += v * v, n++;
        }
        sqlite3_finalize(st);
    }
    free(sql);
    if (n > 0) *mean = sum / n;
    if (n > 1) *var = fmax(sum2 - sum * sum / n, 0) / (n - 1);
    return n;
}

/* Student's t at 97.5% for df degrees of freedom (df >= 1). */
static double t975(int df)
{
    static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262};
    return df <= 9 ? t[df - 1] : 1.96 + 2.5 / df;
}

static double speedup(sqlite3 *db, int64_t run, const char *scheme, int gpus)
{
    char sql[512], at[128] = "= 64";
    if (!gpus)
        snprintf(at, sizeof at, "= (SELECT max(gpus) FROM model_results WHERE run_id = %lld)",
                 (long long)run);
    snprintf(sql, sizeof sql, "SELECT speedup FROM model_results WHERE run_id = %lld AND scheme "
             "= '%s' AND gpus %s", (long long)run, scheme, at);
    return q1(db, sql);
}

/* The three lines that matter into d->lines (empty when the database
** cannot be read). */
static void key_compute(demo *d)
{
    sq_store *s;
    char *reps = idset_sql(&d->replays), *trains = idset_sql(&d->trains);
    if (!reps || !trains || open_db(d, &s)) {
        free(reps), free(trains);
        return;
    }
    sqlite3 *db = sq_store_db(s);
    double g_sdp = replay_err(db, reps, "sdp4bit", "grad");
    double g_ulq = replay_err(db, reps, "ulq", "grad");
    double w_qw = replay_err(db, reps, "qw", "weight");
    double w_qwd = replay_err(db, reps, "qwd", "weight");
    const char *lg = "inter", *lw = "inter", *l2;
    double b_sdp = replay_bits(db, reps, "sdp4bit", "grad_reducescatter", &lg);
    double b_ulq = replay_bits(db, reps, "ulq", "grad_reducescatter", &l2);
    double b_qw = replay_bits(db, reps, "qw", "weight_allgather", &lw);
    double b_qwd = replay_bits(db, reps, "qwd", "weight_allgather", &l2);
    double v_base, v_sdp, var_base, var_sdp;
    int n_base = final_vals(db, trains, "baseline", &v_base, &var_base);
    int n_sdp = final_vals(db, trains, "sdp4bit", &v_sdp, &var_sdp);
    double v_qw = final_val(db, trains, "qw");
    double s64 = speedup(db, d->model_run, "sdp4bit", 64);
    double smax = speedup(db, d->model_run, "sdp4bit", 0);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT max(gpus) FROM model_results WHERE run_id = %lld",
             (long long)d->model_run);
    int gmax = (int)q1(db, sql);
    sq_store_close(s);
    free(reps), free(trains);

    /* bits per real parameter: the padding of every tensor paid for */
    snprintf(d->lines[0], sizeof d->lines[0],
             "error:       on the captured gradients sdp4bit (8/4-bit, Hadamard) adds %.3g "
           "relative L2 error at %.3f bits/param on the %s-node hop, ulq (4/4-bit) %.3g at "
           "%.3f; 4-bit weight differences (qwd) %.3g at %.3f bits/param on the %s-node hop "
           "against 4-bit weights (qw) %.3g at %.3f", g_sdp, b_sdp, lg, g_ulq, b_ulq, w_qwd,
           b_qwd, lw, w_qw, b_qw);
    /* the difference of the means and its 95% interval (Welch, with the
    ** smaller df: a cautious width); qw against the same interval */
    double diff = v_sdp - v_base, half = NAN;
    if (n_base > 1 && n_sdp > 1)
        half = t975((n_base < n_sdp ? n_base : n_sdp) - 1) *
               sqrt(var_base / n_base + var_sdp / n_sdp);
    char verdict[256] = "one seed each: no spread to compare with";
    if (isfinite(half))
        snprintf(verdict, sizeof verdict, "%s the 95%% interval of seeds (+/-%.4f)",
                 fabs(diff) <= half ? "within" : "beyond", half);
    snprintf(d->lines[1], sizeof d->lines[1],
             "convergence: after %d steps the validation loss is %.4f under the baseline and "
             "%.4f under sdp4bit (means of %d and %d seeds), a difference of %+.4f (%+.2f%%), "
             "%s; %.4f (%+.2f%%, seed 1) under qw", d->steps, v_base, v_sdp, n_base, n_sdp, diff,
             100 * (v_sdp / v_base - 1), verdict, v_qw, 100 * (v_qw / v_base - 1));
    snprintf(d->lines[2], sizeof d->lines[2],
             "scale:       sdp4bit is predicted %.2fx faster than the baseline for GPT-1.3B on "
           "64 A100 (SDP4Bit measured 2.39x), %.2fx on %d", s64, smax, gmax);
}

/* A text value of the capture run's params (key), or "?" */
static void param_text(sqlite3 *db, int64_t run, const char *key, char *v, size_t n)
{
    sqlite3_stmt *st;
    snprintf(v, n, "?");
    if (sqlite3_prepare_v2(db, "SELECT value FROM params WHERE run_id = ?1 AND key = ?2", -1,
                           &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(v, n, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

/* The processor's name from /proc/cpuinfo ("model name"), else "". */
static void cpu_name(char *v, size_t n)
{
    char line[512];
    v[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            const char *p = strchr(line, ':') + 1;
            p += strspn(p, " \t");
            snprintf(v, n, "%.*s", (int)strcspn(p, "\n"), p);
            break;
        }
    fclose(f);
}

/* What was run, for the report's Setup: model, corpus, topology, steps,
** seeds, version, machine, date; from the capture run's stored params. */
static void setup_compute(demo *d)
{
    sq_store *s;
    d->nsetup = 0;
    if (open_db(d, &s)) return;
    sqlite3 *db = sq_store_db(s);
    char layers[32], ch[32], heads[32], params[32], seq[32], batch[32], lr[32], host[256] = "?";
    param_text(db, d->capture_run, "model.layers", layers, sizeof layers);
    param_text(db, d->capture_run, "model.channels", ch, sizeof ch);
    param_text(db, d->capture_run, "model.heads", heads, sizeof heads);
    param_text(db, d->capture_run, "model.params", params, sizeof params);
    param_text(db, d->capture_run, "train.seq", seq, sizeof seq);
    param_text(db, d->capture_run, "train.batch", batch, sizeof batch);
    param_text(db, d->capture_run, "train.lr", lr, sizeof lr);
    char sql[256], seeds[128] = "?";
    snprintf(sql, sizeof sql, "SELECT host FROM runs WHERE id = %lld", (long long)d->capture_run);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            snprintf(host, sizeof host, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    char *trains = idset_sql(&d->trains);
    if (trains) {
        size_t len = strlen(trains) + 256;
        char *q = malloc(len);
        if (q) {
            snprintf(q, len, "SELECT group_concat(seed, ', ') FROM (SELECT DISTINCT seed FROM "
                     "runs WHERE id IN (%s) ORDER BY seed)", trains);
            if (sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
                    snprintf(seeds, sizeof seeds, "%s", (const char *)sqlite3_column_text(st, 0));
                sqlite3_finalize(st);
            }
            free(q);
        }
        free(trains);
    }
    sq_store_close(s);
    const char *bytes = strrchr(d->corpus_id, ':');
    char cpu[256], when[64] = "?";
    cpu_name(cpu, sizeof cpu);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double np = strtod(params, NULL);
    char (*u)[768] = d->setup;
    int n = 0;
    snprintf(u[n++], sizeof *u, "model: a byte-level GPT, %s layer%s, %s channels, %s heads, "
             "context %s bytes (%.3g M parameters), batch %s sequences per worker, learning "
             "rate %.3g", layers, strcmp(layers, "1") ? "s" : "", ch, heads, seq, np / 1e6,
             batch, strtod(lr, NULL));
    snprintf(u[n++], sizeof *u, "corpus: %s (%s bytes, copied as %s)", d->corpus_src,
             bytes ? bytes + 1 : "?", d->corpus_name);
    snprintf(u[n++], sizeof *u, "topology: %s workers (nodes x workers per node), sharded data "
             "parallel, collectives emulated in one process", d->tiny ? "1 x 2" : "2 x 4");
    snprintf(u[n++], sizeof *u, "steps: %d per training run, every %s-th evaluated on held-out "
             "text and its weights and gradients captured for the replays", d->steps, d->every);
    snprintf(u[n++], sizeof *u, "seeds: %s (training); the replays as their recipe says", seeds);
    snprintf(u[n++], sizeof *u, "version: shardq %s", SHARDQ_VERSION_STRING);
    snprintf(u[n++], sizeof *u, "machine: %s, %s%s%ld cores", host, cpu, cpu[0] ? ", " : "",
             cores);
    snprintf(u[n++], sizeof *u, "date: %s", when);
    d->nsetup = n;
}

static void key_lines(const demo *d)
{
    printf("\nThe three lines that matter:\n");
    for (int i = 0; i < 3; i++) printf("  %s\n", d->lines[i]);
}

/* ------------------------------------------------------------------------ */

static int make_dir(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
        fprintf(stderr, "shardq demo: --out %s: not a directory\n", path);
        return -1;
    }
    fprintf(stderr, "shardq demo: --out %s: cannot create: %s\n", path, strerror(errno));
    return -1;
}

/* The corpus of every run: --corpus, else $SHARDQ_CORPUS, else the
** default, as `shardq train` takes it. */
static int find_corpus(demo *d, const char *given)
{
    if (given) {
        if (access(given, R_OK) != 0) {
            fprintf(stderr, "shardq demo: --corpus %s: %s\n", given, strerror(errno));
            return -1;
        }
        d->corpus_src = given;
        return 0;
    }
    const char *env = getenv("SHARDQ_CORPUS");
    d->corpus_src = env && *env ? env : SQ_CORPUS_DEFAULT;
    if (access(d->corpus_src, R_OK) != 0) {
        fprintf(stderr, "shardq demo: the default corpus %s is missing: install the Debian "
                "package fortunes (./bootstrap --deps does), or give a text file or directory "
                "with --corpus PATH\n", d->corpus_src);
        return -1;
    }
    return 0;
}

static int demo_run(demo *d)
{
    int rc = take_corpus(d);
    if (rc != CLI_OK) return rc;
    capture_key(d);
    printf("configuration: %s\n", d->key);
    rc = step_capture(d);
    if (rc == CLI_OK) rc = step_replays(d);
    if (rc == CLI_OK) rc = step_training(d);
    if (rc == CLI_OK) rc = step_bench(d);
    if (rc == CLI_OK) rc = step_model(d);
    if (rc == CLI_OK) rc = step_report(d);
    return rc;
}

int cmd_demo(int argc, char **argv)
{
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'},
                                         {"corpus", required_argument, NULL, 'c'},
                                         {"steps", required_argument, NULL, 's'},
                                         {"tiny", no_argument, NULL, 't'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    static const char *const longnames[] = {"out", "corpus", "steps", "tiny", "help", NULL};
    demo d = {.steps = 200};
    const char *out = "shardq-demo", *corpus = NULL;
    uint64_t u;
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (ch) {
        case 'o': out = optarg; break;
        case 'c': corpus = optarg; break;
        case 's':
            if (cli_parse_u64("demo", "--steps", optarg, 1000000, &u)) return CLI_USAGE;
            if (u < 4) {
                fprintf(stderr, "shardq demo: --steps %llu: at least 4 (the trace captures "
                        "four steps)\n", (unsigned long long)u);
                return CLI_USAGE;
            }
            d.steps = (int)u;
            break;
        case 't': d.tiny = 1; break;
        case 'h': fputs(demo_usage, stdout); return CLI_OK;
        default: return cli_option_error("demo", ch, argv, longnames);
        }
    }
    if (cli_check_positional("demo", argv + optind, argc - optind, 0, 0, "no arguments"))
        return CLI_USAGE;
    if (find_corpus(&d, corpus)) return CLI_RUNTIME;
    if (make_dir(out)) return CLI_RUNTIME;
    /* absolute, so that the recipes written into it are read from anywhere */
    if (!realpath(out, d.out)) {
        fprintf(stderr, "shardq demo: --out %s: %s\n", out, strerror(errno));
        return CLI_RUNTIME;
    }
    int busy, lock = lock_out(&d, &busy);
    if (lock < 0) return busy ? CLI_BUSY : CLI_RUNTIME;
    snprintf(d.db, sizeof d.db, "%s/shardq.db", d.out);
    snprintf(d.report, sizeof d.report, "%s/report", d.out);
    snprintf(d.every, sizeof d.every, "%d", d.steps / 4);
    d.t0 = sq_clock_s();
    printf("shardq demo: everything goes to %s (database %s)\n", d.out, d.db);

    int rc = demo_run(&d);
    if (rc == CLI_OK) {
        key_lines(&d);
        printf("\nreport: %s/index.html (and report.md), written in %.0f s\n", d.report,
               sq_clock_s() - d.t0);
    } else {
        fprintf(stderr, "shardq demo: stopped (exit %d); run it again to resume\n", rc);
    }
    free(d.replays.v), free(d.trains.v), free(d.all.v);
    close(lock);
    return rc;
}
