/*
** load.c -- plug-in codecs from shared objects (shardq/plugin.h).
**
** A plug-in file exports shardq_plugin_abi and shardq_plugin_init; the
** loader checks the first before it calls the second with a host table
** (register_codec and the library's uniforms), so that the file links
** nothing of libshardq and the codecs land in the registry of whichever
** copy of the library loaded it (the shardq program's own, or the shared
** library of a program or of the Python package).
**
** A loaded file is never closed: its codecs stay registered, and their
** callbacks live in it. A file is known by its device and inode, so that a
** second load (the same file on the command line and in SHARDQ_PLUGINS)
** registers nothing twice.
*/
#define _DEFAULT_SOURCE /* realpath */
#include "shardq/plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct loaded_file {
    dev_t dev;
    ino_t ino;
} loaded_file;

static loaded_file loaded[SQ_PLUGIN_MAX];
static int nloaded;
static atomic_flag loading = ATOMIC_FLAG_INIT;

/* What one load collects through the host table. */
typedef struct load_state {
    const char *source; /* the file's real path, recorded with each codec */
    int registered;
    sq_error first;     /* the first registration refused */
} load_state;

static int host_register(const sq_plugin_host *host, const sq_plugin_codec *codec,
                         sq_error *err)
{
    load_state *ls = host->loader;
    sq_error e;
    int rc = sq_plugin_register_from(codec, ls->source, &e);
    if (rc > 0) {
        ls->registered++;
    } else {
        if (ls->first.status == SQ_OK) ls->first = e;
        if (err) *err = e;
    }
    return rc;
}

/* The same for a file of version 1 (deprecated): the sentence into a
** buffer. */
static int host_register_v1(const sq_plugin_host *host, const sq_plugin_codec *codec, char *err,
                            size_t errlen)
{
    sq_error e;
    int rc = host_register(host, codec, &e);
    if (rc <= 0 && err && errlen) snprintf(err, errlen, "%s", sq_error_message(&e));
    return rc;
}

/* Calls the file's shardq_plugin_init the way its version says, the
** sentence of a failure into msg. */
static int call_init(uint32_t version, void *init_sym, sq_plugin_host *host, sq_error *msg)
{
    sq_error_clear(msg);
    if (version == SQ_PLUGIN_ABI_V1) {
        int (*init)(const sq_plugin_host *, char *, size_t);
        memcpy(&init, &init_sym, sizeof init); /* POSIX: a data pointer to a function's */
        host->register_codec_v1 = host_register_v1;
        int rc = init(host, msg->msg, sizeof msg->msg);
        msg->msg[sizeof msg->msg - 1] = '\0';
        return rc;
    }
    int (*init)(const sq_plugin_host *, sq_error *);
    memcpy(&init, &init_sym, sizeof init);
    host->register_codec = host_register;
    return init(host, msg);
}

static int is_loaded(const struct stat *st)
{
    for (int i = 0; i < nloaded; i++)
        if (loaded[i].dev == st->st_dev && loaded[i].ino == st->st_ino) return 1;
    return 0;
}

/* Under the lock: the whole load of one file. */
static int load_file(const char *path, sq_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return sq_error_set(err, errno == ENOENT ? SQ_ERR_NOTFOUND : SQ_ERR_IO,
                            "plug-in %s: %s", path, strerror(errno));
    /* dlopen opens what it is given: a FIFO would block it until a writer
    ** came, a device or a directory fails with a loader's riddle */
    if (S_ISDIR(st.st_mode))
        return sq_error_set(err, SQ_ERR_IO, "plug-in %s: is a directory", path);
    if (!S_ISREG(st.st_mode))
        return sq_error_set(err, SQ_ERR_IO, "plug-in %s: not a regular file (%s)", path,
                            S_ISFIFO(st.st_mode)   ? "a FIFO"
                            : S_ISCHR(st.st_mode)  ? "a character device"
                            : S_ISBLK(st.st_mode)  ? "a block device"
                            : S_ISSOCK(st.st_mode) ? "a socket"
                                                   : "not a file");
    if (is_loaded(&st)) return 0;
    if (nloaded == SQ_PLUGIN_MAX)
        return sq_error_set(err, SQ_ERR_NOMEM, "plug-in %s: %d files are loaded already", path,
                            SQ_PLUGIN_MAX);
    char *real = realpath(path, NULL);
    if (!real) return sq_error_set(err, SQ_ERR_IO, "plug-in %s: %s", path, strerror(errno));
    /* a name without a slash would be looked for in the library path, not
    ** here: dlopen the file that was just looked at */
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    int rc;
    if (!h) {
        const char *why = dlerror();
        rc = sq_error_set(err, SQ_ERR_IO, "plug-in %s: cannot load it: %s", path,
                          why ? why : "dlopen failed");
        goto done;
    }
    const void *abi = dlsym(h, "shardq_plugin_abi");
    void *init_sym = dlsym(h, "shardq_plugin_init");
    if (!abi || !init_sym) {
        rc = sq_error_set(err, SQ_ERR_FORMAT,
                          "plug-in %s: not a shardq plug-in: no symbol %s (a plug-in exports "
                          "shardq_plugin_abi and shardq_plugin_init, docs/plugins.md)",
                          path, !abi ? "shardq_plugin_abi" : "shardq_plugin_init");
        dlclose(h);
        goto done;
    }
    uint32_t version;
    memcpy(&version, abi, sizeof version);
    if (version != SQ_PLUGIN_ABI && version != SQ_PLUGIN_ABI_V1) {
        rc = sq_error_set(err, SQ_ERR_SPEC,
                          "plug-in %s: built for plug-in interface version %u, this shardq speaks "
                          "version %d (rebuild it against this shardq/plugin.h)",
                          path, (unsigned)version, SQ_PLUGIN_ABI);
        dlclose(h);
        goto done;
    }
    load_state ls = {.source = real};
    sq_plugin_host host = {.abi = version, .path = path, .uniform = sq_uniform,
                           .uniform_n = sq_uniform_n, .loader = &ls};
    sq_error msg;
    rc = call_init(version, init_sym, &host, &msg);
    /* from here the file stays: codecs it registered point into it */
    loaded[nloaded++] = (loaded_file){st.st_dev, st.st_ino};
    if (rc < 0) {
        if (rc < SQ_ERR_INTERRUPTED) rc = SQ_ERR_SPEC;
        const char *why = msg.msg[0] ? msg.msg : ls.first.status ? ls.first.msg : sq_strerror(rc);
        rc = sq_error_set(err, rc, "plug-in %s: shardq_plugin_init failed: %s", path, why);
    } else if (ls.first.status != SQ_OK) {
        /* init went on past a refusal: the refusal is the answer */
        rc = sq_error_set(err, ls.first.status, "plug-in %s: %s", path, ls.first.msg);
    } else {
        rc = ls.registered;
    }
done:
    free(real);
    return rc;
}

int sq_plugin_load(const char *path, sq_error *err)
{
    sq_error_clear(err);
    if (!path || !*path) return sq_error_set(err, SQ_ERR_ARG, "no plug-in file given");
    while (atomic_flag_test_and_set_explicit(&loading, memory_order_acquire)) {
    }
    int rc = load_file(path, err);
    atomic_flag_clear_explicit(&loading, memory_order_release);
    return rc;
}

int sq_plugin_load_list(const char *list, sq_error *err)
{
    sq_error_clear(err);
    int total = 0;
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ":");
        if (len) {
            char path[PATH_MAX];
            if (len >= sizeof path)
                return sq_error_set(err, SQ_ERR_ARG, "plug-in %.64s...: path too long", p);
            memcpy(path, p, len);
            path[len] = '\0';
            int rc = sq_plugin_load(path, err);
            if (rc < 0) return rc;
            total += rc;
        }
        p += len;
        if (*p == ':') p++;
    }
    return total;
}
