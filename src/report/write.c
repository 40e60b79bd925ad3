/*
** write.c -- `shardq report`: the figures and tables of a store, as a
** directory that stands on its own: one PNG and one SVG per figure, drawn by
** gnuplot from the database, the scripts that drew them, report.md and a
** static index.html.
**
** Every figure is a script of analysis/ built into the binary (embedded.h)
** and its queries (src/report/fig_NAME.c). The report runs the queries on
** its own read-only connection and writes their rows and values into
** OUT/data/ (figdata.h), writes the script to OUT/scripts/ and runs gnuplot
** on that copy, which reads only those files: no value of the database, no
** path and no filter ever becomes gnuplot text, and gnuplot runs no
** program. `cd OUT && gnuplot scripts/NAME.gp` draws the same figure again.
**
** The --runs filter is a user's SQL. It is evaluated here, on shardq's own
** connection (read-only, extension loading off), and the figures' queries
** get only the ids it selected, as a bound parameter. gnuplot draws into a directory of its own
** inside OUT; a figure is renamed into place only once both its files are
** complete, so a full disk or a kill leaves no truncated image behind. A
** script without data for its figure says why on one line and draws
** nothing; the report then names the reason in place of the figure. The
** tables are queried here, on a read-only connection, with the same labels
** as the figures.
*/
#include "cli/cli.h"
#include "report/report.h"
#include "report/figdata.h"
#include "shardq/codec.h"
#include "shardq/store.h"
#include "cli/where.h"

#include <sqlite3.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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
                    struct sigaction *old)
{
    if (snprintf(tmp_dir, sizeof tmp_dir, "%s/" TMP_PREFIX "%ld.XXXXXX", out,
                 (long)getpid()) >= (int)sizeof tmp_dir ||
        !mkdtemp(tmp_dir)) {
        fprintf(stderr, "shardq report: %s: cannot create a directory to draw in: %s\n", out,
                strerror(errno ? errno : ENAMETOOLONG));
        return -1;
    }
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
    return 0;
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

/* Creates dir and its missing parents; prints why not (naming the path). */
static int make_dirs(const char *dir)
{
    char *p = strdup(dir);
    if (!p) {
        fprintf(stderr, "shardq report: out of memory\n");
        return -1;
    }
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "shardq report: %s: cannot create the directory: %s\n", p,
                    strerror(errno));
            free(p);
            return -1;
        }
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "shardq report: %s: not a directory\n", p);
            free(p);
            return -1;
        }
        if (!c) break;
        *s = c;
    }
    free(p);
    return 0;
}

/* The most bytes of a --style file: a few settings, not a program. */
#define MAX_STYLE_BYTES (256 * 1024)

/* Reads the --style file whole into *text (*n bytes): the scripts load a
** copy of it in OUT/scripts/, so a device, a FIFO or a file that grows
** cannot hold gnuplot, and the report directory keeps the style it was
** drawn with. Returns 0, or -1 (said). */
static char *join(const char *dir, const char *name);

static int read_style(const char *path, char **out, size_t *nout)
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
        fprintf(stderr, "shardq report: --style: %s: cannot read: %s\n", path, why);
        free(text);
        return -1;
    }
    *out = text;
    *nout = n;
    return 0;
}

/* dir/name, or NULL (said) when out of memory. */
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", dir, name);
    else fprintf(stderr, "shardq report: out of memory\n");
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

/* Writes OUT/scripts/NAME.gp and runs it into OUT/NAME.png and .svg. ids:
** the runs the filter selected (NULL: no filter). */
/* What every figure is drawn with. */
typedef struct drawing {
    const char *db, *out, *filter;
    const char *ids;   /* the runs the filter selected, a JSON array (NULL: no filter) */
    const char *data;  /* OUT/data */
    struct sqlite3 *sdb;
    int fmt[NFORMATS]; /* png, svg, pdf wanted */
    const char *style; /* a gnuplot file the scripts load after their own style */
    int quiet;
} drawing;

/* The --format list "png,svg" into fmt; 0, or -1 (said) for a name that is
** none of png, svg, pdf, or no name at all. */
static int parse_formats(const char *text, int *fmt)
{
    memset(fmt, 0, NFORMATS * sizeof *fmt);
    int any = 0;
    for (const char *p = text; *p;) {
        size_t k = strcspn(p, ", ");
        int found = 0;
        for (int i = 0; i < NFORMATS; i++)
            if (k == strlen(format_names[i]) && !strncmp(p, format_names[i], k)) fmt[i] = found = 1;
        if (k && !found) {
            fprintf(stderr, "shardq report: --format: '%.*s': expected png, svg or pdf (a "
                    "comma-separated list)\n", (int)k, p);
            return -1;
        }
        any |= found;
        p += k;
        p += strspn(p, ", ");
    }
    if (!any) {
        fprintf(stderr, "shardq report: --format: '%s': name one of png, svg, pdf\n", text);
        return -1;
    }
    return 0;
}

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
    fig_data fd = {.db = g->sdb, .ids = g->ids, .dir = g->data, .name = f->name};
    const char *text = report_script(f->name);
    if (!script || !text) {
        if (!text) fprintf(stderr, "shardq report: %s: no such script built in\n", f->name);
        goto done;
    }
    if (cli_write_file("report", script, text, strlen(text))) goto done;
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

static void fn_sqrt(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
    double v = sqlite3_value_double(argv[0]);
    if (v >= 0) sqlite3_result_double(cx, sqrt(v));
}

/* "WITH r AS (the done runs of kinds within the filter), " */
static void runs_cte(report_buf *b, const char *kinds, const char *filter, const char *extra)
{
    report_printf(b, "WITH r AS (SELECT id FROM runs WHERE status = 'done' AND kind IN (%s) AND (%s)%s), ",
                  kinds, filter ? filter : "1", extra ? extra : "");
}

typedef struct tables {
    report_doc *doc;
    sqlite3 *db;
    const char *filter;
    int bad; /* a query failed (said on stderr) */
} tables;

static void table(tables *t, report_buf *sql, const char *caption, const char *none)
{
    char err[1024];
    if (sql->oom) {
        fprintf(stderr, "shardq report: out of memory\n");
        t->bad = 1;
    } else if (report_table(t->doc, t->db, sql->p, caption, none, err, sizeof err) < 0) {
        fprintf(stderr, "shardq report: table '%s': %s\n", caption, err);
        t->bad = 1;
    }
    report_buf_free(sql);
}

static void table_runs(tables *t)
{
    report_buf s = {0};
    report_printf(&s, "SELECT kind, count(*) AS \"done runs\", group_concat(id) AS runs FROM runs "
                      "WHERE status = 'done' AND (%s) GROUP BY kind ORDER BY min(id)",
                  t->filter ? t->filter : "1");
    table(t, &s, "The runs this report draws on", "no run is done");
}

static void table_errors(tables *t)
{
    report_buf s = {0};
    runs_cte(&s, "'replay'", t->filter, NULL);
    report_labels_sql(&s, "p.key LIKE 'grad.%' OR p.key LIKE 'weight.%'");
    report_printf(
        &s,
        ", e AS (SELECT run_id AS id, path, avg(rel_l2) AS err, avg(snr_db) AS snr, "
        "avg(mean_signed) / report_sqrt(avg(mse)) AS bias FROM step_metrics WHERE run_id IN r "
        "GROUP BY run_id, path), x AS (SELECT lab.id, lab.preset, lab.label, u.seed, "
        "max(CASE WHEN e.path = 'grad' THEN e.err END) AS ge, "
        "max(CASE WHEN e.path = 'grad' THEN e.snr END) AS gs, "
        "max(CASE WHEN e.path = 'grad' THEN e.bias END) AS gb, "
        "max(CASE WHEN e.path = 'weight' THEN e.err END) AS we, "
        "max(CASE WHEN e.path = 'weight' THEN e.snr END) AS ws, "
        "max(CASE WHEN e.path = 'weight' THEN e.bias END) AS wb "
        "FROM lab JOIN runs u ON u.id = lab.id JOIN e ON e.id = lab.id GROUP BY lab.id) "
        "SELECT label AS scheme, group_concat(id) AS runs, count(DISTINCT seed) AS seeds, "
        "avg(ge) AS \"grad rel. L2\", avg(gs) AS \"grad SNR dB\", "
        "100 * avg(gb) AS \"grad bias %% of RMS\", avg(we) AS \"weight rel. L2\", "
        "avg(ws) AS \"weight SNR dB\", 100 * avg(wb) AS \"weight bias %% of RMS\" "
        "FROM x GROUP BY label ORDER BY min(" REPORT_ORDER("preset") "), min(id)");
    table(t, &s,
          "Quantization error per scheme: each run's mean over its steps, then the mean over "
          "the runs of the scheme (bias: mean signed error as a percentage of the RMS error)",
          "no replay runs");
}

static void table_bits(tables *t)
{
    report_buf s = {0};
    runs_cte(&s, "'replay', 'train'", t->filter, " AND id IN (SELECT run_id FROM bytes)");
    report_labels_sql(&s, "p.key LIKE 'grad.%' OR p.key LIKE 'weight.%'");
    report_printf(
        &s,
        ", b AS (SELECT run_id AS id, "
        "avg(CASE WHEN collective = 'weight_allgather' AND link = 'intra' THEN bits_per_elem END) AS wi, "
        "avg(CASE WHEN collective = 'weight_allgather' AND link = 'inter' THEN bits_per_elem END) AS wx, "
        "avg(CASE WHEN collective = 'grad_reducescatter' AND link = 'intra' THEN bits_per_elem END) AS gi, "
        "avg(CASE WHEN collective = 'grad_reducescatter' AND link = 'inter' THEN bits_per_elem END) AS gx, "
        "avg(CASE WHEN collective = 'weight_allgather' AND link = 'intra' THEN bits_per_param END) AS pwi, "
        "avg(CASE WHEN collective = 'weight_allgather' AND link = 'inter' THEN bits_per_param END) AS pwx, "
        "avg(CASE WHEN collective = 'grad_reducescatter' AND link = 'intra' THEN bits_per_param END) AS pgi, "
        "avg(CASE WHEN collective = 'grad_reducescatter' AND link = 'inter' THEN bits_per_param END) AS pgx "
        "FROM bytes WHERE run_id IN r GROUP BY run_id) "
        "SELECT lab.label AS scheme, u.kind AS kind, coalesce(pa.value, 'grad,weight') AS paths, "
        "group_concat(lab.id) AS runs, avg(b.wi) AS \"weight intra\", avg(b.wx) AS \"weight inter\", "
        "avg(b.gi) AS \"grad intra\", avg(b.gx) AS \"grad inter\", "
        "avg(b.pwi) AS \"weight intra /param\", avg(b.pwx) AS \"weight inter /param\", "
        "avg(b.pgi) AS \"grad intra /param\", avg(b.pgx) AS \"grad inter /param\" "
        "FROM lab JOIN runs u ON u.id = lab.id JOIN b ON b.id = lab.id LEFT JOIN params pa ON "
        "pa.run_id = lab.id AND pa.key = 'paths' GROUP BY u.kind, lab.label, pa.value "
        "ORDER BY u.kind, min(" REPORT_ORDER("lab.preset") "), min(lab.id)");
    table(t, &s,
          "Bits sent on each link level: per element sent (codes and scales over the elements "
          "sent, padding included), then per real parameter (/param: over the model's own "
          "elements, the cost once the padding is paid for; '-': the link carried nothing, the "
          "path was not replayed (paths), or the runs were stored before that count)",
          "no replay or training runs with bytes");
}

static void table_losses(tables *t)
{
    report_buf s = {0};
    runs_cte(&s, "'train'", t->filter, " AND id IN (SELECT run_id FROM train_steps)");
    report_labels_sql(&s, "p.key LIKE 'grad.%' OR p.key LIKE 'weight.%' OR p.key LIKE 'model.%' "
                          "OR p.key LIKE 'train.%'");
    report_printf(
        &s,
        ", f AS (SELECT run_id AS id, max(step) + 1 AS steps, "
        "(SELECT loss FROM train_steps l WHERE l.run_id = t.run_id ORDER BY step DESC LIMIT 1) AS loss, "
        "(SELECT val_loss FROM train_steps v WHERE v.run_id = t.run_id AND val_loss IS NOT NULL "
        "ORDER BY step DESC LIMIT 1) AS val FROM train_steps t WHERE run_id IN r GROUP BY run_id) "
        "SELECT lab.label AS scheme, group_concat(lab.id) AS runs, max(f.steps) AS steps, "
        "avg(f.loss) AS \"final training loss\", avg(f.val) AS \"final validation loss\", "
        "min(f.val) AS \"best seed\", max(f.val) AS \"worst seed\" "
        "FROM lab JOIN f ON f.id = lab.id GROUP BY lab.label "
        "ORDER BY min(" REPORT_ORDER("lab.preset") "), min(lab.id)");
    table(t, &s,
          "Final losses of the training runs in nats per byte: mean over the runs of a scheme, "
          "and the lowest and highest final validation loss among them",
          "no training runs");
}

static void table_bench(tables *t)
{
    report_buf s = {0};
    runs_cte(&s, "'bench'", t->filter, " AND id IN (SELECT run_id FROM bench_results)");
    report_printf(
        &s,
        "b AS (SELECT max(id) AS id FROM r), th AS (SELECT max(threads) AS n FROM bench_results "
        "WHERE run_id = (SELECT id FROM b)), sz AS (SELECT max(elements) AS n FROM bench_results "
        "WHERE run_id = (SELECT id FROM b) AND threads = (SELECT n FROM th)) "
        "SELECT op, run_id AS run, threads, elements * 4 / 1048576 AS \"size MB\", "
        "gb_per_s AS \"GB/s\", gb_per_s_std AS \"std GB/s\", copy_gb_per_s AS \"copy GB/s\", "
        "100 * gb_per_s / copy_gb_per_s AS \"%% of copy\" FROM bench_results "
        "WHERE run_id = (SELECT id FROM b) AND threads = (SELECT n FROM th) AND "
        "elements = (SELECT n FROM sz) ORDER BY op = 'copy' DESC, gb_per_s DESC");
    table(t, &s,
          "Kernel throughput beside the copy bandwidth of the same run, at the largest size and "
          "thread count of the latest bench run (threads 0: a GPU)",
          "no bench runs");
}

static void table_model(tables *t)
{
    report_buf s = {0};
    runs_cte(&s, "'model'", t->filter, " AND id IN (SELECT run_id FROM model_results)");
    report_printf(
        &s,
        "m AS (SELECT max(id) AS id FROM r), g AS (SELECT scheme, max(gpus) AS gpus FROM "
        "model_results WHERE run_id = (SELECT id FROM m) GROUP BY scheme) "
        "SELECT x.scheme AS scheme, x.run_id AS run, x.gpus AS GPUs, x.iteration_s AS "
        "\"iteration s\", x.tflops AS \"TFLOP/s per GPU\", x.speedup AS speedup, "
        "x.inter_bytes_per_node / 1e9 AS \"inter-node GB per node\" FROM model_results x "
        "JOIN g ON g.scheme = x.scheme AND g.gpus = x.gpus WHERE x.run_id = (SELECT id FROM m) "
        "ORDER BY " REPORT_ORDER("x.scheme") ", x.scheme");
    table(t, &s,
          "Predicted iteration at the largest GPU count of each scheme, from the latest model "
          "run (speedup: over the baseline preset)",
          "no model runs");
}

/* ------------------------------------------------------------------------ */
/* The report                                                               */
/* ------------------------------------------------------------------------ */

/* The ids of the runs the filter selects, as a JSON array "[3,4,17]" into
** ids, which every figure's query is bound to. */
static int select_ids(sqlite3 *db, const char *filter, report_buf *ids, double limit)
{
    report_buf sql = {0};
    report_printf(&sql, "SELECT id FROM runs WHERE (%s\n) ORDER BY id", filter);
    sqlite3_stmt *st = NULL;
    int rc = sql.oom ? SQLITE_NOMEM : sqlite3_prepare_v2(db, sql.p, -1, &st, NULL);
    report_buf_free(&sql);
    report_printf(ids, "[");
    for (long long n = 0; rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW; n++) {
        report_printf(ids, "%s%lld", n ? "," : "", (long long)sqlite3_column_int64(st, 0));
        rc = SQLITE_OK;
    }
    report_printf(ids, "]");
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    if (rc != SQLITE_OK || ids->oom) {
        if ((rc & 0xff) == SQLITE_INTERRUPT)
            fprintf(stderr, "shardq report: --runs: '%s': stopped after %g s (--query-timeout "
                    "raises the limit)\n", filter, limit);
        else
            fprintf(stderr, "shardq report: --runs: '%s': %s\n", filter,
                    ids->oom || rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return (rc & 0xff) == SQLITE_INTERRUPT ? CLI_RUNTIME : CLI_USAGE;
    }
    sqlite3_finalize(st);
    return CLI_OK;
}

/* Checks the filter: one condition that SQLite compiles against runs.
** Prints why not and returns CLI_USAGE, else CLI_OK. */
static int check_filter(sqlite3 *db, const char *filter)
{
    const char *why = report_filter_problem(filter);
    if (why) {
        fprintf(stderr, "shardq report: --runs: '%s': %s\n", filter, why);
        return CLI_USAGE;
    }
    report_buf sql = {0};
    report_printf(&sql, "SELECT count(*) FROM runs WHERE (%s\n)", filter);
    sqlite3_stmt *st = NULL;
    int rc = sql.oom ? SQLITE_NOMEM : sqlite3_prepare_v2(db, sql.p, -1, &st, NULL);
    report_buf_free(&sql);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "shardq report: --runs: '%s': %s\n", filter,
                rc == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(db));
        return CLI_USAGE;
    }
    sqlite3_finalize(st);
    return CLI_OK;
}

int report_write(const char *db, const char *out, const char *filter, int quiet)
{
    report_options o = {.filter = filter, .quiet = quiet};
    return report_write_opts(db, out, &o);
}

int report_write_opts(const char *db, const char *out, const report_options *opt)
{
    const char *filter = opt->filter;
    int quiet = opt->quiet;
    drawing g = {.db = db, .out = out, .quiet = quiet};
    if (parse_formats(opt->formats ? opt->formats : "png,svg", g.fmt)) return CLI_USAGE;
    char *style_text = NULL;
    size_t style_len = 0;
    if (opt->style && read_style(opt->style, &style_text, &style_len)) return CLI_USAGE;
    if (filter && strspn(filter, " \t\r\n") == strlen(filter)) filter = NULL; /* none */
    sq_store *store;
    sq_error err = {0};
    if (sq_store_open(db, 0, 1, &store, &err)) {
        fprintf(stderr, "shardq report: %s\n", sq_error_message(&err));
        free(style_text);
        return CLI_RUNTIME;
    }
    if (sq_store_version(store) < SQ_STORE_VERSION) {
        fprintf(stderr, "shardq report: %s: %s (schema version %d; 'shardq db init' %s it)\n", db,
                sq_store_version(store) ? "an older store" : "not a shardq store",
                sq_store_version(store), sq_store_version(store) ? "migrates" : "creates");
        sq_store_close(store);
        free(style_text);
        return CLI_RUNTIME;
    }
    sqlite3 *sdb = sq_store_db(store);
    report_buf ids = {0};
    /* the user's SQL (--runs, --where) runs under the time limit; the
    ** figures' own queries, which can take a while on a large store, do not */
    sq_store_limit_queries(store, opt->query_timeout);
    int rc = filter ? check_filter(sdb, filter) : CLI_OK;
    /* --where: one more condition, ANDed with --runs, shown as KEY=VALUE */
    char *wsql = NULL;
    report_buf shown = {0};
    if (rc == CLI_OK && opt->nwhere) {
        int usage = 0;
        wsql = cli_where_sql(sdb, "report", opt->where, opt->nwhere, "", &usage);
        if (!wsql) rc = usage ? CLI_USAGE : CLI_RUNTIME;
    }
    report_buf both = {0};
    if (rc == CLI_OK && wsql) {
        report_printf(&both, "(%s) AND %s", filter ? filter : "1", wsql);
        if (filter) report_printf(&shown, "%s", filter);
        for (int i = 0; i < opt->nwhere; i++)
            report_printf(&shown, "%s%s", shown.n ? " and " : "", opt->where[i]);
        filter = both.p;
    }
    const char *filter_shown = shown.p ? shown.p : filter;
    if (rc == CLI_OK && filter) rc = select_ids(sdb, filter, &ids, opt->query_timeout);
    sq_store_limit_queries(store, 0);
    if (rc == CLI_OK && !on_path("gnuplot")) {
        fprintf(stderr, "shardq report: gnuplot is not installed: it draws the figures "
                        "(apt-get install gnuplot-nox, or ./bootstrap --deps)\n");
        rc = CLI_RUNTIME;
    }
    char *scripts = rc == CLI_OK ? join(out, "scripts") : NULL;
    char *data = rc == CLI_OK ? join(out, "data") : NULL;
    if (rc == CLI_OK && (!scripts || !data || make_dirs(out))) rc = CLI_RUNTIME;
    if (rc == CLI_OK && access(out, W_OK | X_OK) != 0) {
        fprintf(stderr, "shardq report: %s: cannot write into the directory: %s\n", out,
                strerror(errno));
        rc = CLI_RUNTIME;
    }
    if (rc == CLI_OK && (make_dirs(scripts) || make_dirs(data))) rc = CLI_RUNTIME;
    /* the style the scripts load is a copy in OUT/scripts/, read whole here */
    char *style = NULL;
    if (rc == CLI_OK && style_text &&
        (!(style = join(scripts, "style.gp")) ||
         cli_write_file("report", style, style_text, style_len)))
        rc = CLI_RUNTIME;
    free(style_text);
    g.style = style;
    g.data = data;
    free(scripts);
    free(wsql);
    const figure *const order[] = {&fig_error_bits, &fig_error_group, &fig_hadamard, &fig_bias,
                                   &fig_bytes,      &fig_loss,        &fig_bench,    &fig_speedup};
    enum { NFIG = sizeof order / sizeof order[0] };
    const char *names[NFIG];
    for (int i = 0; i < NFIG; i++) names[i] = order[i]->name;
    struct sigaction old[NCAUGHT];
    if (rc == CLI_OK) remove_stale_tmp(out);
    if (rc == CLI_OK && make_tmp(out, names, NFIG, g.fmt, old)) rc = CLI_RUNTIME;
    if (rc != CLI_OK) {
        report_buf_free(&both);
        report_buf_free(&shown);
        report_buf_free(&ids);
        free(style);
        free(data);
        sq_store_close(store);
        return rc;
    }
    sqlite3_create_function(sdb, "report_sqrt", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                            fn_sqrt, NULL, NULL);
    if (!quiet) {
        printf("shardq report: %s%s%s -> %s/\n", db, filter ? ", runs matching " : "",
               filter ? filter_shown : "", out);
        fflush(stdout);
    }

    drawn d[NFIG];
    int ndrawn = 0, nfailed = 0;
    g.sdb = sdb;
    for (int i = 0; i < NFIG; i++) {
        g.filter = filter_shown;
        g.ids = filter ? ids.p : NULL;
        draw(order[i], &g, &d[i]);
        ndrawn += d[i].ok;
        nfailed += d[i].failed;
    }
    drop_tmp(old);
    report_buf_free(&ids);
    free(style);
    free(data);

    report_doc doc;
    report_begin(&doc, "shardq report");
    doc.formats = (unsigned)(g.fmt[0] | g.fmt[1] << 1 | g.fmt[2] << 2);
    char when[64] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    report_buf intro = {0};
    report_printf(&intro, "From %s, %s%s; written by shardq %s on %s. Every figure is drawn by "
                  "its gnuplot script in scripts/ from the values shardq wrote for it in "
                  "data/; in this directory, gnuplot scripts/NAME.gp draws it again.", db,
                  filter ? "the done runs matching " : "every done run",
                  filter ? filter_shown : "", SHARDQ_VERSION_STRING, when);
    if (opt->nsummary > 0) {
        report_heading(&doc, "Summary");
        report_list(&doc, opt->summary, opt->nsummary);
    }
    if (opt->nsetup > 0) {
        report_heading(&doc, "Setup");
        report_list(&doc, opt->setup, opt->nsetup);
    }
    report_para(&doc, intro.p ? intro.p : "");
    report_buf_free(&intro);

    tables t = {.doc = &doc, .db = sdb, .filter = filter};
    /* one read transaction: every table sees the same state of the file */
    sqlite3_exec(sdb, "BEGIN", NULL, NULL, NULL);
    table_runs(&t);
    report_heading(&doc, "Quantization error (replay runs)");
    put_figure(&doc, &fig_error_bits, &d[0]);
    put_figure(&doc, &fig_error_group, &d[1]);
    put_figure(&doc, &fig_hadamard, &d[2]);
    put_figure(&doc, &fig_bias, &d[3]);
    table_errors(&t);
    report_heading(&doc, "Traffic");
    put_figure(&doc, &fig_bytes, &d[4]);
    table_bits(&t);
    report_heading(&doc, "Training");
    put_figure(&doc, &fig_loss, &d[5]);
    table_losses(&t);
    report_heading(&doc, "Kernels");
    put_figure(&doc, &fig_bench, &d[6]);
    table_bench(&t);
    report_heading(&doc, "Cost model");
    put_figure(&doc, &fig_speedup, &d[7]);
    table_model(&t);
    sqlite3_exec(sdb, "COMMIT", NULL, NULL, NULL);
    report_end(&doc);

    rc = t.bad || nfailed ? CLI_RUNTIME : CLI_OK;
    char *md = join(out, "report.md"), *html = join(out, "index.html");
    if (doc.md.oom || doc.html.oom) {
        fprintf(stderr, "shardq report: out of memory\n");
        rc = CLI_RUNTIME;
    } else if (!md || !html || cli_write_file("report", md, doc.md.p, doc.md.n) ||
               cli_write_file("report", html, doc.html.p, doc.html.n)) {
        rc = CLI_RUNTIME;
    } else if (!quiet) {
        printf("wrote %s and %s: %d figure%s drawn, %d not\n", md, html, ndrawn,
               ndrawn == 1 ? "" : "s", NFIG - ndrawn);
    }
    /* closed only now: while it is open, no file written above may
    ** replace the database (--out the directory that holds it) */
    sq_store_close(store);
    free(md);
    free(html);
    report_doc_free(&doc);
    report_buf_free(&both);
    report_buf_free(&shown);
    return rc;
}
