/*
** protect.c -- the open databases that no output may replace. See
** sq_protect.h.
*/
#define _DEFAULT_SOURCE /* realpath */
#include "sq_protect.h"
#include "shardq/codec.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

typedef struct entry {
    char *given; /* as the store was given it: what a message names */
    char *canon; /* its canonical name when it was added */
} entry;

static entry *entries;
static size_t nentries, capacity;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The files of a database in SQLite's naming: the file itself, its
** write-ahead log and shared memory (WAL mode), its rollback journal. */
static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
#define NSUFFIXES (sizeof suffixes / sizeof suffixes[0])

/* The name path has once symbolic links are followed, into out[PATH_MAX]:
** realpath of the file when it exists; for a dangling link, that of what
** the link names (a write through it creates that file); otherwise realpath
** of its directory and its last component. SQ_ERR_IO when there is none
** (a missing directory, a name that ends in '/', a loop of links). */
static int canonical(const char *path, char *out)
{
    char cur[PATH_MAX], link[PATH_MAX];
    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur) return SQ_ERR_IO;
    for (int hops = 0;; hops++) {
        if (realpath(cur, out)) return SQ_OK;
        struct stat lst;
        if (lstat(cur, &lst) != 0 || !S_ISLNK(lst.st_mode)) break;
        if (hops == 40) return SQ_ERR_IO; /* the kernel's own limit of links in a row */
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) return SQ_ERR_IO;
        link[n] = '\0';
        const char *slash = strrchr(cur, '/');
        if (link[0] != '/' && slash) { /* relative to the directory of the link */
            char joined[PATH_MAX];
            if (snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - cur), cur, link) >=
                (int)sizeof joined)
                return SQ_ERR_IO;
            memcpy(cur, joined, sizeof cur);
        } else {
            memcpy(cur, link, (size_t)n + 1);
        }
    }
    const char *slash = strrchr(cur, '/');
    const char *base = slash ? slash + 1 : cur;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) return SQ_ERR_IO;
    char dir[PATH_MAX], rdir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == cur)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - cur), cur);
    if (!realpath(dir, rdir)) return SQ_ERR_IO;
    int w = snprintf(out, PATH_MAX, "%s/%s", strcmp(rdir, "/") ? rdir : "", base);
    return w < 0 || w >= PATH_MAX ? SQ_ERR_IO : SQ_OK;
}

int sq_protect_path(const char *db)
{
    if (!db || !*db) return SQ_ERR_ARG;
    char canon[PATH_MAX];
    entry e = {strdup(db), strdup(canonical(db, canon) == 0 ? canon : db)};
    int rc = SQ_ERR_NOMEM;
    pthread_mutex_lock(&lock);
    if (e.given && e.canon && nentries == capacity) {
        size_t cap = capacity ? 2 * capacity : 4;
        entry *grown = realloc(entries, cap * sizeof *grown);
        if (grown) entries = grown, capacity = cap;
    }
    if (e.given && e.canon && nentries < capacity) {
        entries[nentries++] = e;
        rc = SQ_OK;
    }
    pthread_mutex_unlock(&lock);
    if (rc) free(e.given), free(e.canon);
    return rc;
}

void sq_unprotect_path(const char *db)
{
    if (!db) return;
    pthread_mutex_lock(&lock);
    for (size_t i = nentries; i-- > 0;)
        if (strcmp(entries[i].given, db) == 0) {
            free(entries[i].given);
            free(entries[i].canon);
            memmove(entries + i, entries + i + 1, (nentries - i - 1) * sizeof *entries);
            nentries--;
            break;
        }
    pthread_mutex_unlock(&lock);
}

/* Whether the existing file st is name plus one of the suffixes, *k
** which. */
static int same_file(const struct stat *st, const char *name, size_t *k)
{
    char f[PATH_MAX + 16];
    struct stat fs;
    for (*k = 0; *k < NSUFFIXES; ++*k) {
        snprintf(f, sizeof f, "%s%s", name, suffixes[*k]);
        if (stat(f, &fs) == 0 && fs.st_dev == st->st_dev && fs.st_ino == st->st_ino) return 1;
    }
    return 0;
}

/* Whether the path that is not there yet, whose canonical name is name,
** would be entry e's database or one of its files, *k which. */
static int same_name(const entry *e, const char *name, size_t *k)
{
    char f[PATH_MAX + 16];
    for (*k = 0; *k < NSUFFIXES; ++*k) {
        snprintf(f, sizeof f, "%s%s", e->canon, suffixes[*k]);
        if (strcmp(f, name) == 0) return 1;
    }
    return 0;
}

int sq_path_is_protected(const char *path, char *which, size_t len)
{
    if (which && len) which[0] = '\0';
    if (!path || !*path) return 0;
    pthread_mutex_lock(&lock);
    int found = 0;
    if (nentries) {
        struct stat st;
        char name[PATH_MAX];
        int exists = stat(path, &st) == 0;
        int named = !exists && canonical(path, name) == 0;
        size_t k = 0;
        for (size_t i = 0; i < nentries && !found; i++) {
            /* by either name of the database: SQLite names its -wal and
            ** -shm after the canonical one */
            if (exists)
                found = same_file(&st, entries[i].canon, &k) ||
                        same_file(&st, entries[i].given, &k);
            else
                found = named && same_name(&entries[i], name, &k);
            if (found && which) snprintf(which, len, "%s%s", entries[i].given, suffixes[k]);
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}
