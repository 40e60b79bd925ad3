/*
** bench_peer.c -- runs the embedded PyTorch peer (src/bench/peer_torch.py)
** in a child Python and reads its timings.
*/
#include "bench_peer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const peer_ops[] = {"quantize", "quantize-rtn", "quantize-diff", "dequantize"};

const char *bench_peer_python(void)
{
    const char *p = getenv("SHARDQ_PYTHON");
    return p && *p ? p : SQ_PYTHON;
}

int bench_peer_has_op(const char *op)
{
    for (size_t i = 0; i < sizeof peer_ops / sizeof *peer_ops; i++)
        if (!strcmp(op, peer_ops[i])) return 1;
    return 0;
}

static const char *script(void)
{
    for (const bench_peer_file *f = bench_peer_scripts; f->name; f++)
        if (strstr(f->name, "peer_torch.py")) return f->text;
    return NULL;
}

/* Runs python -c SCRIPT args... and reads its stdout into out (NUL ended).
** Returns the child's exit status (0..255), or -1 when it could not run or
** died of a signal; stderr passes through only when the status is not 3. */
static int run_python(const char *python, const char *code, char *const *args, int nargs,
                      char *out, size_t outlen, char *err, size_t errlen)
{
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    char *argv[16];
    int k = 0;
    argv[k++] = (char *)python;
    argv[k++] = "-c";
    argv[k++] = (char *)code;
    for (int i = 0; i < nargs && k < 15; i++) argv[k++] = args[i];
    argv[k] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(fd[0]), close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]), close(fd[1]);
        execv(python, argv);
        fprintf(stderr, "shardq bench: --peer torch: cannot run %s: %s\n", python, strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd[0], out + got, outlen - 1 - got)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0) got += (size_t)r;
    out[got] = '\0';
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(err, errlen, "waitpid: %s", strerror(errno));
            return -1;
        }
    if (!WIFEXITED(st)) {
        snprintf(err, errlen, "%s died of signal %d", python, WTERMSIG(st));
        return -1;
    }
    return WEXITSTATUS(st);
}

int bench_peer_check(const char *python, char *err, size_t errlen)
{
    char out[256];
    if (access(python, X_OK) != 0) {
        snprintf(err, errlen, "%s: %s (set SHARDQ_PYTHON to a python3 with torch)", python,
                 strerror(errno));
        return -1;
    }
    int rc = run_python(python, "import torch", NULL, 0, out, sizeof out, err, errlen);
    if (rc < 0) return -1;
    if (rc != 0) {
        snprintf(err, errlen, "%s cannot import torch (install python3-torch, or set "
                              "SHARDQ_PYTHON to a python3 that has it)", python);
        return -1;
    }
    return 0;
}

int bench_peer_time(const char *python, const char *op, uint64_t n, int threads,
                    double min_time, double *plain, double *chunked, char *err, size_t errlen)
{
    const char *code = script();
    if (!code) {
        snprintf(err, errlen, "the PyTorch peer script is missing from this build");
        return -1;
    }
    char sn[32], st[16], sm[32], out[512];
    snprintf(sn, sizeof sn, "%llu", (unsigned long long)n);
    snprintf(st, sizeof st, "%d", threads);
    snprintf(sm, sizeof sm, "%.6g", min_time);
    char *args[] = {(char *)op, sn, st, sm};
    int rc = run_python(python, code, args, 4, out, sizeof out, err, errlen);
    if (rc < 0) return -1;
    if (rc != 0) {
        snprintf(err, errlen, "the PyTorch peer of '%s' failed (%s, exit %d)", op, python, rc);
        return -1;
    }
    *plain = *chunked = -1;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        double v;
        if (sscanf(line, "plain %lf", &v) == 1) *plain = v;
        else if (sscanf(line, "chunked %lf", &v) == 1) *chunked = v;
    }
    if (!(*plain > 0) || !(*chunked > 0)) {
        snprintf(err, errlen, "the PyTorch peer of '%s' printed no timings", op);
        return -1;
    }
    return 0;
}
