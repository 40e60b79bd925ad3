/*
** write.c -- `shardq report`: the figures and tables of a store, as a
** directory that stands on its own: one PNG and one SVG per figure, drawn by
** gnuplot from the database, the scripts that drew them, report.md and a
** static index.html.
**
** Every figure is a script of analysis/ built into the binary (embedded.h)
** and its data (src/report/fig_NAME.c: which of the store's queries fills
** which variable). The report opens the store read-only, writes the rows
** and values of those queries into OUT/data/ (figdata.h), writes the script to OUT/scripts/ and runs gnuplot
** on that copy, which reads only those files: no value of the database, no
** path and no filter ever becomes gnuplot text, and gnuplot runs no
** program. `cd OUT && gnuplot scripts/NAME.gp` draws the same figure again.
**
** The runs come from the store: it evaluates the --runs filter (a user's
** SQL) and the --where filters on its read-only connection
** (sq_store_select_runs), and every figure's query and table
** (store_query.h) gets only the ids they selected, as a bound parameter.
** gnuplot draws into a directory of its own inside OUT; a figure is
** renamed into place only once both its files are complete, so a full disk
** or a kill leaves no truncated image behind. A script without data for its
** figure says why on one line and draws nothing; the report then names the
** reason in place of the figure. The tables are the store's too, read in
** one transaction, with the same labels as the figures.
*/
#include "report/report.h"
#include "report/figdata.h"
#include "shardq/codec.h"
#include "shardq/store.h"
#include "store/store_query.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ------------------------------------------------------------------------ */
/* The figures                                                              */
/* ------------------------------------------------------------------------ */

typedef struct figure {
    const char *name;  /* analysis/NAME.gp */
    const char *title;
    const char *what;  /* the caption, before the runs it was drawn from */
    const char *kinds; /* of those runs */
    int (*data)(fig_data *); /* its queries, into OUT/data/ (src/report/fig_NAME.c) */
} figure;

static const figure fig_error_bits = {
    "error-bits", "Quantization error against bits per parameter",
    "Relative L2 error of the replayed gradients (reduce-scatter) and weights (all-gather), mean "
    "over steps and seeds, against the bits per real parameter each collective sent on its "
    "inter-node link (codes and scales over the model's own elements: the padding that whole "
    "groups per shard add is paid for; runs stored before that count are drawn at their bits "
    "per element sent). What to see: how much error each scheme adds for the bits it pays, and "
    "which scheme is lowest at a given cost. Every configuration of a scheme is a point with the "
    "95% interval of its mean over every step and seed behind it where there is more than one: "
    "open where another configuration of the scheme is as cheap and better, filled and joined by "
    "the scheme's line where none is; schemes at the same cost are set side by side (at most 5% "
    "of the axis) so that none hides another; 16- and 32-bit wires are left out",
    "replay runs", figdata_error_bits};
static const figure fig_error_group = {
    "error-group", "Quantization error against group size",
    "Relative L2 error against the group size (elements per scale) of the gradients' "
    "inter-node hop and of the weights, one line per scheme and bit width, each point labelled "
    "with the bits per real parameter that hop cost (the padding paid for; only each line's last "
    "point when a panel has over 8 lines); only schemes run at two group sizes or more. What to "
    "see: how much error a larger group (fewer scales, fewer bits) costs at each bit width. "
    "Bars: the 95% interval (Student's t) of a point's mean over every step and seed behind it, "
    "where there is more than one",
    "replay runs", figdata_error_group};
static const figure fig_hadamard = {
    "hadamard", "Hadamard transform on and off",
    "Relative L2 error of the reduced gradients of every configuration replayed both without "
    "and with a Hadamard transform (grad.*.hadamard = 0 and > 0), and the change (over 16 "
    "configurations: the change alone, one line per bit width against the group size). Bars: "
    "the 95% interval (Student's t) of each mean over every step and run behind it, where there "
    "is more than one (of the change, from those of its two means)",
    "replay runs", figdata_hadamard};
static const figure fig_bias = {
    "bias", "Bias of the rounding",
    "Mean signed error as a percentage of the RMS error (each run's mean over its steps), mean "
    "over the runs of a scheme with a 95% confidence interval (Student's t); 0 is unbiased",
    "replay runs", figdata_bias};
static const figure fig_loss = {
    "loss", "Training and validation loss",
    "Training loss (moving mean) and validation loss of every training run; colour is the "
    "preset, dash the seed",
    "training runs", figdata_loss};
static const figure fig_bytes = {
    "bytes", "Traffic per link level",
    "Bits each worker sent per parameter per iteration on the intra-node and the inter-node "
    "links, stacked by collective, mean over the runs of a scheme (a replay counts the "
    "broadcast that starts training)",
    "runs", figdata_bytes};
static const figure fig_bench = {
    "bench", "Kernel throughput",
    "Throughput of each codec operation (GB/s of bytes read and written) against the input "
    "size, beside a plain copy of the same size in the same run; the latest bench run, at its "
    "largest thread count. What to see: how close each kernel comes to the copy, the memory "
    "bound. A ringed point stayed noisy (its batches spread over 25% of their median, or it "
    "stayed under half of the same figure on 1 thread, after three tries: a busy machine), and shardq demo measures such a run again",
    "bench run", figdata_bench};
static const figure fig_speedup = {
    "speedup", "Predicted speedup",
    "Speedup of one training iteration over the baseline preset predicted by the cost model "
    "against the number of GPUs; the latest model run. What to see: which schemes pay off at "
    "scale and from how many GPUs (one node has no inter-node link to save on); where the "
    "platform and model are SDP4Bit's, its measured speedup (open diamond) beside the "
    "prediction. Schemes predicted alike are set a little apart sideways so that each shows",
    "model run", figdata_speedup};

/* The outcome of one figure's script. */
typedef struct drawn {
    int ok;           /* drawn */
    int failed;       /* gnuplot failed (said on stderr) */
    char runs[4096];  /* "3-17, 20" when drawn */
    char why[1024];   /* why not, when skipped */
} drawn;

/* ------------------------------------------------------------------------ */
/* Drawing into a directory of its own                                      */
/* ------------------------------------------------------------------------ */

/* gnuplot writes into OUT/.shardq-report-PID.XXXXXX; what is complete there
** is renamed into OUT. A signal that ends the report removes the directory
** on its way out (its paths are made up front, for the handler); one left
** by SIGKILL is removed by the next report into OUT, once its process is
** gone. */
#define TMP_PREFIX ".shardq-report-"
#define MAX_TMP_FILES 32
#define NFORMATS 3
static const char *const format_names[NFORMATS] = {"png", "svg", "pdf"};

static char tmp_dir[4096];
static char tmp_files[MAX_TMP_FILES][4200];
static int ntmp_files;
static volatile sig_atomic_t tmp_live;
static volatile pid_t gnuplot_pid; /* the gnuplot drawing now, 0: none */

static void remove_tmp(void)
{
    for (int i = 0; i < ntmp_files; i++) unlink(tmp_files[i]);
    rmdir(tmp_dir);
}

/* gnuplot goes first: it could write a file after the directory was emptied */
static void on_signal(int sig)
{
    pid_t g = gnuplot_pid;
    if (g > 0) {
        kill(g, SIGKILL);
        waitpid(g, NULL, 0);
    }
    if (tmp_live) remove_tmp();
    signal(sig, SIG_DFL);
    raise(sig);
}

static const int caught[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
#define NCAUGHT (sizeof caught / sizeof caught[0])

/* Removes what reports killed before left in out: a directory
** TMP_PREFIX PID.XXXXXX whose process is gone, and the files in it. */
static void remove_stale_tmp(const char *out)
{
    DIR *d = opendir(out);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, TMP_PREFIX, sizeof TMP_PREFIX - 1)) continue;
        char *end;
        long pid = strtol(e->d_name + sizeof TMP_PREFIX - 1, &end, 10);
        if (*end != '.' || pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", out, e->d_name);
        DIR *sub = opendir(path);
        struct dirent *f;
        while (sub && (f = readdir(sub))) {
            char file[8192 + 300];
            if (strcmp(f->d_name, ".") && strcmp(f->d_name, "..")) {
                snprintf(file, sizeof file, "%s/%s", path, f->d_name);
                unlink(file);
            }
        }
        if (sub) closedir(sub);
        rmdir(path);
    }
    closedir(d);
}

/* Makes the drawing directory in out, with the paths of every figure's
** files in it, and the handlers that remove it. */
static int make_tmp(const char *out, const char *const *names, int n, const int *fmt,
                    struct sigaction *old, sq_error *err)
{
    if (snprintf(tmp_dir, sizeof tmp_dir, "%s/" TMP_PREFIX "%ld.XXXXXX", out,
                 (long)getpid()) >= (int)sizeof tmp_dir ||
        !mkdtemp(tmp_dir))
        return sq_error_set(err, SQ_ERR_IO, "%s: cannot create a directory to draw in: %s", out,
                            strerror(errno ? errno : ENAMETOOLONG));
    ntmp_files = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < NFORMATS && ntmp_files < MAX_TMP_FILES; k++)
            if (fmt[k])
                snprintf(tmp_files[ntmp_files++], sizeof tmp_files[0], "%s/%s.%s", tmp_dir,
                         names[i], format_names[k]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NCAUGHT; i++) sigaction(caught[i], &sa, &old[i]);
    tmp_live = 1;
    return SQ_OK;
}

static void drop_tmp(const struct sigaction *old)
{
    tmp_live = 0;
    remove_tmp();
    for (size_t i = 0; i < NCAUGHT; i++) sigaction(caught[i], &old[i], NULL);
}

/* Whether path holds a whole image: a PNG that ends with its IEND chunk,
** an SVG that ends with </svg>, a PDF with %%EOF. A write cut short by a
** full disk or a file size limit ends anywhere else. kind: 0 png, 1 svg,
** 2 pdf. */
static int complete(const char *path, int kind)
{
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    struct stat st;
    unsigned char tail[64];
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof tail;
    if (ok)
        ok = pread(fd, tail, sizeof tail, st.st_size - (off_t)sizeof tail) == (ssize_t)sizeof tail;
    if (ok && kind) {
        const char *end = kind == 1 ? "</svg>" : "%%EOF";
        size_t k = sizeof tail, e = strlen(end);
        while (k && (tail[k - 1] == '\n' || tail[k - 1] == '\r' || tail[k - 1] == ' ')) k--;
        ok = k >= e && memcmp(tail + k - e, end, e) == 0;
    } else if (ok) {
        ok = memcmp(tail + sizeof tail - 12, iend, 12) == 0;
    }
    /* on disk before it takes the name: a crash must not leave half a file there */
    if (ok) ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Files and programs                                                       */
/* ------------------------------------------------------------------------ */

/* Creates dir and its missing parents; err names the path that failed. */
static int make_dirs(const char *dir, sq_error *err)
{
    char *p = strdup(dir);
    if (!p) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    int rc = SQ_OK;
    for (char *s = p + 1; rc == SQ_OK; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot create the directory: %s", p,
                              strerror(errno));
        else if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
            rc = sq_error_set(err, SQ_ERR_IO, "%s: not a directory", p);
        if (!c) break;
        *s = c;
    }
    free(p);
    return rc;
}

/* The most bytes of a --style file: a few settings, not a program. */
#define MAX_STYLE_BYTES (256 * 1024)

/* Reads the --style file whole into *text (*n bytes): the scripts load a
** copy of it in OUT/scripts/, so a device, a FIFO or a file that grows
** cannot hold gnuplot, and the report directory keeps the style it was
** drawn with. SQ_ERR_SPEC when it cannot be: an option that cannot be
** used. */
static int read_style(const char *path, char **out, size_t *nout, sq_error *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    const char *why = NULL;
    if (fd < 0) why = strerror(errno);
    else if (fstat(fd, &st) != 0) why = strerror(errno);
    else if (!S_ISREG(st.st_mode)) why = "not a regular file";
    else if (st.st_size > MAX_STYLE_BYTES) why = "larger than 256 KiB (a style is a few settings)";
    char *text = why ? NULL : malloc((size_t)st.st_size + 1);
    size_t n = 0;
    if (!why && !text) why = "out of memory";
    while (!why && n < (size_t)st.st_size) {
        ssize_t k = read(fd, text + n, (size_t)st.st_size - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) why = strerror(errno);
        if (k <= 0) break;
        n += (size_t)k;
    }
    if (fd >= 0) close(fd);
    if (why) {
        free(text);
        return sq_error_set(err, SQ_ERR_SPEC, "--style: %s: cannot read: %s", path, why);
    }
    *out = text;
    *nout = n;
    return SQ_OK;
}

/* dir/name, or NULL when out of memory. */
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", dir, name);
    return s;
}

/* Whether an executable name is on the PATH. */
static int on_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t k = strcspn(path, ":");
        char buf[4096];
        if (k && k + strlen(name) + 2 < sizeof buf) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)k, path, name);
            if (access(buf, X_OK) == 0) return 1;
        }
        path += k + (path[k] == ':');
    }
    return 0;
}

/* The environment of gnuplot: ours, in a UTF-8 locale whatever ours is.
** The scripts write UTF-8 (set encoding utf8), which gnuplot cannot convert
** in the POSIX locale of a bare system and warns about on every run; C.UTF-8
** is built into the C library. NULL: out of memory. */
static char **gnuplot_environment(void)
{
    size_t n = 0;
    while (environ[n]) n++;
    char **env = malloc((n + 2) * sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LC_ALL=", 7) != 0) env[k++] = environ[i];
    env[k++] = "LC_ALL=C.UTF-8";
    env[k] = NULL;
    return env;
}

/* Runs gnuplot -c script with the arguments args (ARG1, ...: strings the
** script reads as they are, which no quote or line break can turn into
** gnuplot text); its standard output and error go to *output. Returns its
** exit status (127: not started). */
static int run_gnuplot(const char *script, const char *const *args, report_buf *output)
{
    char **env = gnuplot_environment();
    if (!env) {
        report_printf(output, "cannot run gnuplot: out of memory\n");
        return 127;
    }
    int fd[2];
    if (pipe(fd) != 0) {
        free(env);
        return 127;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    /* -d: no ~/.gnuplot, so a user's settings do not change the figures */
    char *argv[9] = {"gnuplot", "-d", "-c", (char *)script};
    for (int i = 0; i < 4 && args[i]; i++) argv[4 + i] = (char *)args[i];
    pid_t pid;
    int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        report_printf(output, "cannot run gnuplot: %s\n", strerror(rc));
        return 127;
    }
    gnuplot_pid = pid;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd[0], buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        report_printf(output, "%.*s", (int)n, buf);
    }
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            gnuplot_pid = 0;
            return 127;
        }
    gnuplot_pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The text after "NAME: WHAT" on a line of output, up to stop (or the end
** of the line), into buf; 0 when no line has it. */
static int find_line(const char *output, const char *name, const char *what, const char *stop,
                     char *buf, size_t len)
{
    size_t nl = strlen(name), wl = strlen(what);
    for (const char *p = output; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, nl) || p[nl] != ':' || p[nl + 1] != ' ' || strncmp(p + nl + 2, what, wl))
            continue;
        const char *s = p + nl + 2 + wl, *e = strchr(s, '\n');
        size_t k = e ? (size_t)(e - s) : strlen(s);
        const char *x = stop ? strstr(s, stop) : NULL;
        if (x && x < s + k) k = (size_t)(x - s);
        snprintf(buf, len, "%.*s", (int)k, s);
        return 1;
    }
    return 0;
}

/* Moves the figure's files (one per format in fmt) from the drawing
** directory into out, when every one is complete; otherwise says which is
** not. */
static int put_in_place(const figure *f, const char *out, const int *fmt)
{
    char from[NFORMATS][4200], to[NFORMATS][4200];
    for (int k = 0; k < NFORMATS; k++) {
        if (!fmt[k]) continue;
        snprintf(from[k], sizeof from[k], "%s/%s.%s", tmp_dir, f->name, format_names[k]);
        snprintf(to[k], sizeof to[k], "%s/%s.%s", out, f->name, format_names[k]);
        if (!complete(from[k], k)) {
            fprintf(stderr, "shardq report: %s: gnuplot did not write all of %s.%s (a full "
                    "disk?): the figure is left out\n", f->name, f->name, format_names[k]);
            return -1;
        }
    }
    for (int k = 0; k < NFORMATS; k++)
        if (fmt[k] && rename(from[k], to[k]) != 0) {
            fprintf(stderr, "shardq report: %s: cannot put the figure in place: %s\n", f->name,
                    strerror(errno));
            return -1;
        }
    return 0;
}

/* What every figure is drawn with. */
typedef struct drawing {
    const char *db, *out, *filter;
    const char *ids;   /* the runs the filter selected, a JSON array (NULL: no filter) */
    char *data;        /* OUT/data */
    sq_store *store;
    int fmt[NFORMATS]; /* png, svg, pdf wanted */
    char *style;       /* a gnuplot file the scripts load after their own style */
    int quiet;
} drawing;

/* The --format list "png,svg" into fmt; SQ_ERR_SPEC for a name that is
** none of png, svg, pdf, or no name at all. */
static int parse_formats(const char *text, int *fmt, sq_error *err)
{
    memset(fmt, 0, NFORMATS * sizeof *fmt);
    int any = 0;
    for (const char *p = text; *p;) {
        size_t k = strcspn(p, ", ");
        int found = 0;
        for (int i = 0; i < NFORMATS; i++)
            if (k == strlen(format_names[i]) && !strncmp(p, format_names[i], k)) fmt[i] = found = 1;
        if (k && !found)
            return sq_error_set(err, SQ_ERR_SPEC, "--format: '%.*s': expected png, svg or pdf "
                                "(a comma-separated list)", (int)k, p);
        any |= found;
        p += k;
        p += strspn(p, ", ");
    }
    if (!any)
        return sq_error_set(err, SQ_ERR_SPEC, "--format: '%s': name one of png, svg, pdf", text);
    return SQ_OK;
}

/* Writes the file whole (trace/wfile.h: a full disk leaves no half file);
** a failure is said on stderr. */
static int write_said(const char *path, const char *text, size_t n)
{
    sq_error err = {0};
    if (report_write_file(path, text, n, &err) == SQ_OK) return 0;
    fprintf(stderr, "shardq report: %s\n", sq_error_message(&err));
    return -1;
}

/* Writes OUT/scripts/NAME.gp and the figure's data into OUT/data/, and runs
** the script into OUT/NAME.png and .svg (the formats of g->fmt); d says how
** it went, what failed said on stderr. */
static void draw(const figure *f, const drawing *g, drawn *d)
{
    const char *db = g->db, *out = g->out, *filter = g->filter;
    int quiet = g->quiet;
    memset(d, 0, sizeof *d);
    d->failed = 1;
    char rel[128];
    snprintf(rel, sizeof rel, "scripts/%s.gp", f->name);
    char *script = join(out, rel);
    report_buf output = {0};
    fig_data fd = {.store = g->store, .ids = g->ids, .dir = g->data, .name = f->name};
    const char *text = report_script(f->name);
    if (!script || !text) {
        if (!text) fprintf(stderr, "shardq report: %s: no such script built in\n", f->name);
        else fprintf(stderr, "shardq report: out of memory\n");
        goto done;
    }
    if (write_said(script, text, strlen(text))) goto done;
    /* a figure of an earlier report must not pass for this one's, in any format */
    for (int k = 0; k < NFORMATS; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.%s", out, f->name, format_names[k]);
        unlink(path);
    }
    /* the filter's text is only shown; the queries select by ids */
    report_buf within = {0};
    report_printf(&within, "%s%s%s", db, filter ? " matching " : "", filter ? filter : "");
    fig_set(&fd, "within", within.p ? within.p : "");
    report_buf_free(&within);
    int bad = f->data(&fd) || fig_write_vars(&fd);
    report_buf_free(&fd.vars);
    report_buf_free(&fd.text);
    if (bad) {
        snprintf(d->why, sizeof d->why, "its data could not be queried or written (see the "
                 "messages of shardq report)");
        goto done;
    }
    report_buf formats = {0};
    for (int k = 0, n = 0; k < NFORMATS; k++)
        if (g->fmt[k]) report_printf(&formats, "%s%s", n++ ? " " : "", format_names[k]);
    if (formats.oom) {
        fprintf(stderr, "shardq report: out of memory\n");
        goto done;
    }
    /* DATA OUT FORMATS STYLE, as the scripts' common block reads them */
    const char *args[] = {g->data, tmp_dir, formats.p, g->style ? g->style : "", NULL};
    int st = run_gnuplot(script, args, &output);
    report_buf_free(&formats);
    const char *o = output.p ? output.p : "";
    if (st == 0 && find_line(o, f->name, "skipped: ", NULL, d->why, sizeof d->why)) {
        d->failed = 0;
        if (!quiet) printf("  %-12s skipped: %s\n", f->name, d->why);
    } else if (st == 0 && find_line(o, f->name, "runs ", " -> ", d->runs, sizeof d->runs) &&
               put_in_place(f, out, g->fmt) == 0) {
        d->failed = 0;
        d->ok = 1;
        if (!quiet) printf("  %-12s runs %s\n", f->name, d->runs);
    } else if (st == 0 && d->runs[0]) {
        /* drawn, but not all written: said by put_in_place */
        snprintf(d->why, sizeof d->why, "its files could not be written whole (see the "
                 "messages of shardq report)");
    } else {
        fprintf(stderr, "shardq report: %s: gnuplot %s (exit status %d)%s\n", f->name,
                st == 127 ? "did not run" : "failed", st, *o ? ":" : "");
        for (const char *p = o; *p;) {
            size_t k = strcspn(p, "\n");
            fprintf(stderr, "  %.*s\n", (int)k, p);
            p += k + (p[k] == '\n');
        }
        snprintf(d->why, sizeof d->why, "gnuplot failed on scripts/%s.gp (see the messages of "
                 "shardq report)", f->name);
    }
    fflush(stdout);
done:
    free(script);
    report_buf_free(&output);
}

static void put_figure(report_doc *doc, const figure *f, const drawn *d)
{
    if (!d->ok) {
        report_skipped(doc, f->title, d->why);
        return;
    }
    report_buf c = {0};
    report_printf(&c, "%s. Drawn from %s %s.", f->what, f->kinds, d->runs);
    report_figure(doc, f->name, f->title, c.p ? c.p : f->what);
    if (c.oom) doc->md.oom = 1;
    report_buf_free(&c);
}

/* ------------------------------------------------------------------------ */
/* The tables                                                               */
/* ------------------------------------------------------------------------ */

/* The store's table `which` over the selected runs into the document; a
** failure is said on stderr and counted in *bad. */
static void table(report_doc *doc, const drawing *g, sq_report_table which, const char *caption,
                  const char *none, int *bad)
{
    sq_store_cursor *c;
    sq_error err = {0};
    int rc = sq_store_report_table(g->store, which, g->ids, &c, &err);
    if (rc == SQ_OK) {
        rc = report_table(doc, c, caption, none, &err);
        sq_store_cursor_close(c);
    }
    if (rc < 0) {
        fprintf(stderr, "shardq report: table '%s': %s\n", caption, sq_error_message(&err));
        (*bad)++;
    }
}

/* The page: the summary and setup of the options, what it was drawn from,
** then each section's figures and table; *bad counts the tables that
** failed (said). */
static void write_document(report_doc *doc, const drawing *g, const report_options *opt,
                           const figure *const *order, const drawn *d, int *bad)
{
    report_begin(doc, "shardq report");
    doc->formats = (unsigned)(g->fmt[0] | g->fmt[1] << 1 | g->fmt[2] << 2);
    char when[64] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    report_buf intro = {0};
    report_printf(&intro, "From %s, %s%s; written by shardq %s on %s. Every figure is drawn by "
                  "its gnuplot script in scripts/ from the values shardq wrote for it in "
                  "data/; in this directory, gnuplot scripts/NAME.gp draws it again.", g->db,
                  g->filter ? "the done runs matching " : "every done run",
                  g->filter ? g->filter : "", SHARDQ_VERSION_STRING, when);
    if (opt->nsummary > 0) {
        report_heading(doc, "Summary");
        report_list(doc, opt->summary, opt->nsummary);
    }
    if (opt->nsetup > 0) {
        report_heading(doc, "Setup");
        report_list(doc, opt->setup, opt->nsetup);
    }
    report_para(doc, intro.p ? intro.p : "");
    if (intro.oom) doc->md.oom = 1;
    report_buf_free(&intro);

    /* one read transaction: every table sees the same state of the file */
    sq_store_report_begin(g->store, NULL);
    table(doc, g, SQ_REPORT_RUNS, "The runs this report draws on", "no run is done", bad);
    report_heading(doc, "Quantization error (replay runs)");
    for (int i = 0; i < 4; i++) put_figure(doc, order[i], &d[i]);
    table(doc, g, SQ_REPORT_ERRORS,
          "Quantization error per scheme: each run's mean over its steps, then the mean over "
          "the runs of the scheme (bias: mean signed error as a percentage of the RMS error)",
          "no replay runs", bad);
    report_heading(doc, "Traffic");
    put_figure(doc, order[4], &d[4]);
    table(doc, g, SQ_REPORT_BITS,
          "Bits sent on each link level: per element sent (codes and scales over the elements "
          "sent, padding included), then per real parameter (/param: over the model's own "
          "elements, the cost once the padding is paid for; '-': the link carried nothing, the "
          "path was not replayed (paths), or the runs were stored before that count)",
          "no replay or training runs with bytes", bad);
    report_heading(doc, "Training");
    put_figure(doc, order[5], &d[5]);
    table(doc, g, SQ_REPORT_LOSSES,
          "Final losses of the training runs in nats per byte: mean over the runs of a scheme, "
          "and the lowest and highest final validation loss among them",
          "no training runs", bad);
    report_heading(doc, "Kernels");
    put_figure(doc, order[6], &d[6]);
    table(doc, g, SQ_REPORT_BENCH,
          "Kernel throughput beside the copy bandwidth of the same run, at the largest size and "
          "thread count of the latest bench run (threads 0: a GPU)",
          "no bench runs", bad);
    report_heading(doc, "Cost model");
    put_figure(doc, order[7], &d[7]);
    table(doc, g, SQ_REPORT_MODEL,
          "Predicted iteration at the largest GPU count of each scheme, from the latest model "
          "run (speedup: over the baseline preset)",
          "no model runs", bad);
    sq_store_report_end(g->store, NULL);
    report_end(doc);
}

/* ------------------------------------------------------------------------ */
/* The report                                                               */
/* ------------------------------------------------------------------------ */

/* The store at db, read-only, of this build's schema. */
static int open_store(const char *db, sq_store **store, sq_error *err)
{
    int rc = sq_store_open(db, 0, 1, store, err);
    if (rc) return rc;
    int v = sq_store_version(*store);
    if (v >= SQ_STORE_VERSION) return SQ_OK;
    sq_store_close(*store);
    *store = NULL;
    return sq_error_set(err, SQ_ERR_FORMAT, "%s: %s (schema version %d; 'shardq db init' %s it)",
                        db, v ? "an older store" : "not a shardq store", v,
                        v ? "migrates" : "creates");
}

/* The ids of the runs --runs (filter) and --where select, a JSON array
** into *ids that every query is bound to (NULL: neither given, every
** run), and the two as the page shows them ("id > 3 and grad.bits=4")
** into shown. */
static int select_runs(sq_store *s, const char *filter, const report_options *o, char **ids,
                       report_buf *shown, sq_error *err)
{
    *ids = NULL;
    if (!filter && !o->nwhere) return SQ_OK;
    /* the user's SQL (--runs, --where) runs under the time limit; the
    ** figures' own queries, which can take a while on a large store, do not */
    sq_store_limit_queries(s, o->query_timeout);
    int rc = sq_store_select_runs(s, filter, o->where, o->nwhere, ids, err);
    sq_store_limit_queries(s, 0);
    if (filter) report_printf(shown, "%s", filter);
    for (int i = 0; i < o->nwhere; i++)
        report_printf(shown, "%s%s", shown->n ? " and " : "", o->where[i]);
    if (rc == SQ_OK && shown->oom) rc = sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    return rc;
}

/* OUT, OUT/scripts and OUT/data made, OUT writable, and the style copied
** to OUT/scripts/style.gp: into g (data, style). */
static int make_out(drawing *g, const char *style_text, size_t style_len, sq_error *err)
{
    const char *out = g->out;
    char *scripts = join(out, "scripts");
    char *data = join(out, "data");
    int rc = !scripts || !data ? sq_error_set(err, SQ_ERR_NOMEM, "out of memory")
                               : make_dirs(out, err);
    if (rc == SQ_OK && access(out, W_OK | X_OK) != 0)
        rc = sq_error_set(err, SQ_ERR_IO, "%s: cannot write into the directory: %s", out,
                          strerror(errno));
    if (rc == SQ_OK) rc = make_dirs(scripts, err);
    if (rc == SQ_OK) rc = make_dirs(data, err);
    /* the style the scripts load is a copy in OUT/scripts/, read whole before */
    char *style = NULL;
    if (rc == SQ_OK && style_text) {
        style = join(scripts, "style.gp");
        rc = style ? report_write_file(style, style_text, style_len, err)
                   : sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    }
    free(scripts);
    g->data = data;
    g->style = style;
    return rc;
}

/* report.md and index.html into OUT. */
static int write_pages(const drawing *g, const report_doc *doc, int ndrawn, int nfig,
                       sq_error *err)
{
    if (doc->md.oom || doc->html.oom) return sq_error_set(err, SQ_ERR_NOMEM, "out of memory");
    char *md = join(g->out, "report.md"), *html = join(g->out, "index.html");
    int rc = !md || !html ? sq_error_set(err, SQ_ERR_NOMEM, "out of memory")
                          : report_write_file(md, doc->md.p, doc->md.n, err);
    if (rc == SQ_OK) rc = report_write_file(html, doc->html.p, doc->html.n, err);
    if (rc == SQ_OK && !g->quiet)
        printf("wrote %s and %s: %d figure%s drawn, %d not\n", md, html, ndrawn,
               ndrawn == 1 ? "" : "s", nfig - ndrawn);
    free(md);
    free(html);
    return rc;
}

int report_write_opts(const char *db, const char *out, const report_options *opt, sq_error *err)
{
    sq_error mine = {0};
    if (!err) err = &mine;
    const char *filter = opt->filter;
    drawing g = {.db = db, .out = out, .quiet = opt->quiet};
    char *style_text = NULL;
    size_t style_len = 0;
    int rc = parse_formats(opt->formats ? opt->formats : "png,svg", g.fmt, err);
    if (rc == SQ_OK && opt->style) rc = read_style(opt->style, &style_text, &style_len, err);
    if (filter && strspn(filter, " \t\r\n") == strlen(filter)) filter = NULL; /* none */
    sq_store *store = NULL;
    if (rc == SQ_OK) rc = open_store(db, &store, err);
    char *ids = NULL;
    report_buf shown = {0};
    if (rc == SQ_OK) rc = select_runs(store, filter, opt, &ids, &shown, err);
    if (rc == SQ_OK && !on_path("gnuplot"))
        rc = sq_error_set(err, SQ_ERR_NOTFOUND, "gnuplot is not installed: it draws the figures "
                          "(apt-get install gnuplot-nox, or ./bootstrap --deps)");
    if (rc == SQ_OK) rc = make_out(&g, style_text, style_len, err);
    free(style_text);
    const figure *const order[] = {&fig_error_bits, &fig_error_group, &fig_hadamard, &fig_bias,
                                   &fig_bytes,      &fig_loss,        &fig_bench,    &fig_speedup};
    enum { NFIG = sizeof order / sizeof order[0] };
    const char *names[NFIG];
    for (int i = 0; i < NFIG; i++) names[i] = order[i]->name;
    struct sigaction old[NCAUGHT];
    if (rc == SQ_OK) remove_stale_tmp(out);
    if (rc == SQ_OK) rc = make_tmp(out, names, NFIG, g.fmt, old, err);
    if (rc != SQ_OK) {
        report_buf_free(&shown);
        free(ids);
        free(g.style);
        free(g.data);
        sq_store_close(store);
        return rc;
    }
    g.store = store;
    g.ids = ids;
    g.filter = ids ? shown.p : NULL; /* the filter's text is only shown */
    if (!g.quiet) {
        printf("shardq report: %s%s%s -> %s/\n", db, g.filter ? ", runs matching " : "",
               g.filter ? g.filter : "", out);
        fflush(stdout);
    }

    drawn d[NFIG];
    int ndrawn = 0, nfailed = 0;
    for (int i = 0; i < NFIG; i++) {
        draw(order[i], &g, &d[i]);
        ndrawn += d[i].ok;
        nfailed += d[i].failed;
    }
    drop_tmp(old);

    report_doc doc;
    write_document(&doc, &g, opt, order, d, &nfailed);
    /* what failed was said as it happened: nothing more to say */
    rc = nfailed ? sq_error_set(err, SQ_ERR_IO, "%s", "") : SQ_OK;
    int written = write_pages(&g, &doc, ndrawn, NFIG, err);
    if (written) rc = written;
    /* closed only now: while it is open, no file written above may
    ** replace the database (--out the directory that holds it) */
    sq_store_close(store);
    report_doc_free(&doc);
    report_buf_free(&shown);
    free(ids);
    free(g.style);
    free(g.data);
    return rc;
}
