/*
** peer.c -- the bench's PyTorch peer (bench.h, sq_bench_peer_*): the
** embedded script src/bench/peer_torch.py run in a child Python, and its
** timings read back, so that `shardq bench --peer torch` can set PyTorch's
** throughput beside shardq's on the same machine and in the same run.
*/
#include "shardq/bench.h"

#include "bench/peer_embedded.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const peer_ops[] = {"quantize", "quantize-rtn", "quantize-diff", "dequantize"};

int sq_bench_peer_has_op(const char *op)
{
    for (size_t i = 0; i < sizeof peer_ops / sizeof *peer_ops; i++)
        if (!strcmp(op, peer_ops[i])) return 1;
    return 0;
}

static const char *script(void)
{
    for (const sq_bench_peer_file *f = sq_bench_peer_scripts; f->name; f++)
        if (strstr(f->name, "peer_torch.py")) return f->text;
    return NULL;
}

/* The child's side of run_python: exec, or the errno of the failed exec
** written to report (close-on-exec, so the parent reads nothing when the
** exec succeeds). */
static void child(const char *python, char **argv, int out, int report)
{
    dup2(out, 1);
    execv(python, argv);
    int e = errno;
    ssize_t unused = write(report, &e, sizeof e);
    (void)unused;
    _exit(127);
}

/* Reads fd to its end into out (NUL ended, at most outlen - 1 bytes). */
static void read_all(int fd, char *out, size_t outlen)
{
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd, out + got, outlen - 1 - got)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0) got += (size_t)r;
    out[got] = '\0';
}

/* Runs python -c CODE args... and reads its stdout into out (NUL ended).
** *status is the child's exit status (0..255); SQ_ERR_IO when it could not
** run or died of a signal. */
static int run_python(const char *python, const char *code, char *const *args, int nargs,
                      char *out, size_t outlen, int *status, sq_error *err)
{
    int fd[2], rep[2];
    if (pipe(fd) != 0) return sq_error_set(err, SQ_ERR_IO, "pipe: %s", strerror(errno));
    if (pipe(rep) != 0) {
        close(fd[0]), close(fd[1]);
        return sq_error_set(err, SQ_ERR_IO, "pipe: %s", strerror(errno));
    }
    fcntl(rep[1], F_SETFD, FD_CLOEXEC);
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
        int e = errno;
        close(fd[0]), close(fd[1]), close(rep[0]), close(rep[1]);
        return sq_error_set(err, SQ_ERR_IO, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(fd[0]), close(rep[0]);
        child(python, argv, fd[1], rep[1]);
    }
    close(fd[1]), close(rep[1]);
    read_all(fd[0], out, outlen);
    close(fd[0]);
    int exec_errno = 0;
    ssize_t got = read(rep[0], &exec_errno, sizeof exec_errno);
    close(rep[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return sq_error_set(err, SQ_ERR_IO, "waitpid: %s", strerror(errno));
    if (got == (ssize_t)sizeof exec_errno)
        return sq_error_set(err, SQ_ERR_IO, "cannot run %s: %s", python, strerror(exec_errno));
    if (!WIFEXITED(st))
        return sq_error_set(err, SQ_ERR_IO, "%s died of signal %d", python, WTERMSIG(st));
    *status = WEXITSTATUS(st);
    return SQ_OK;
}

int sq_bench_peer_check(const char *python, sq_error *err)
{
    char out[256];
    int status, rc;
    if (access(python, X_OK) != 0)
        return sq_error_set(err, SQ_ERR_NOTFOUND, "%s: %s (set SHARDQ_PYTHON to a python3 with "
                            "torch)", python, strerror(errno));
    if ((rc = run_python(python, "import torch", NULL, 0, out, sizeof out, &status, err)))
        return rc;
    if (status != 0)
        return sq_error_set(err, SQ_ERR_UNSUPPORTED, "%s cannot import torch (install "
                            "python3-torch, or set SHARDQ_PYTHON to a python3 that has it)",
                            python);
    return SQ_OK;
}

int sq_bench_peer_time(const char *python, const char *op, uint64_t n, int threads,
                       double min_time, double *plain, double *chunked, sq_error *err)
{
    const char *code = script();
    if (!code)
        return sq_error_set(err, SQ_ERR_UNSUPPORTED,
                            "the PyTorch peer script is missing from this build");
    char sn[32], st[16], sm[32], out[512];
    snprintf(sn, sizeof sn, "%llu", (unsigned long long)n);
    snprintf(st, sizeof st, "%d", threads);
    snprintf(sm, sizeof sm, "%.6g", min_time);
    char *args[] = {(char *)op, sn, st, sm};
    int status, rc = run_python(python, code, args, 4, out, sizeof out, &status, err);
    if (rc) return rc;
    if (status != 0)
        return sq_error_set(err, SQ_ERR_IO, "the PyTorch peer of '%s' failed (%s, exit %d)", op,
                            python, status);
    *plain = *chunked = -1;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        double v;
        if (sscanf(line, "plain %lf", &v) == 1) *plain = v;
        else if (sscanf(line, "chunked %lf", &v) == 1) *chunked = v;
    }
    if (!(*plain > 0) || !(*chunked > 0))
        return sq_error_set(err, SQ_ERR_FORMAT, "the PyTorch peer of '%s' printed no timings", op);
    return SQ_OK;
}
