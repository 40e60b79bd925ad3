/*
** corpus.c -- text into training and validation bytes (corpus.h).
*/
#include "shardq/train.h"
#include "shardq/codec.h"
#include "trace/input.h"
#include "trace/wfile.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The bytes read so far, growing. */
typedef struct text_buf {
    uint8_t *data;
    size_t len, cap;
} text_buf;

static int buf_reserve(text_buf *b, size_t more)
{
    if (b->len + more <= b->cap) return SQ_OK;
    size_t cap = b->cap ? b->cap : 1 << 20;
    while (cap < b->len + more) cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) return SQ_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return SQ_OK;
}

/* Appends the file at path unless it holds a NUL byte: 1 if appended, 0 if
** left out as binary, a negative sq_status on error. */
static int read_text_file(const char *path, off_t size, text_buf *b, sq_error *err)
{
    /* opened without blocking: a FIFO put in its place since stat() is refused */
    sq_input in;
    sq_error oerr = {0};
    FILE *f = sq_input_fopen(path, 0, &in, &oerr);
    if (!f) return sq_error_set(err, oerr.status, "%s", sq_error_message(&oerr));
    if (buf_reserve(b, (size_t)size + 1)) {
        fclose(f);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory for %lld bytes of text", path,
                            (long long)size);
    }
    /* straight into the buffer; a file that grew since stat() grows it */
    size_t start = b->len, got;
    while ((got = fread(b->data + b->len, 1, b->cap - b->len, f)) > 0) {
        b->len += got;
        if (b->len == b->cap && buf_reserve(b, 1 << 16)) {
            fclose(f);
            return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) return sq_error_set(err, SQ_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (memchr(b->data + start, 0, b->len - start)) {
        b->len = start;
        return 0;
    }
    return 1;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The kind of a failed stat or open: a missing file, or another refusal. */
static int errno_kind(int e)
{
    return e == ENOENT ? SQ_ERR_NOTFOUND : SQ_ERR_IO;
}

static int walk(const char *path, int top, sq_corpus *c, text_buf *b, sq_error *err)
{
    struct stat st;
    if ((top ? stat(path, &st) : lstat(path, &st)) != 0)
        return sq_error_set(err, errno_kind(errno), "%s: %s", path, strerror(errno));
    if (S_ISLNK(st.st_mode)) {
        c->skipped++;
        return SQ_OK;
    }
    if (S_ISREG(st.st_mode)) {
        int rc = read_text_file(path, st.st_size, b, err);
        if (rc < 0) return rc;
        if (rc) c->files++;
        else c->skipped++;
        return SQ_OK;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (top)
            return sq_error_set(err, SQ_ERR_FORMAT, "%s: not a regular file or a directory (a "
                                "FIFO or a device cannot be a corpus)", path);
        c->skipped++;
        return SQ_OK;
    }
    DIR *d = opendir(path);
    if (!d)
        return sq_error_set(err, errno_kind(errno), "%s: cannot open the directory: %s", path,
                            strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = SQ_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue; /* ., .. and hidden files */
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) {
                rc = SQ_ERR_NOMEM;
                break;
            }
            names = p;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = SQ_ERR_NOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc) sq_error_set(err, rc, "%s: out of memory", path);
    if (!rc) qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; !rc && i < n; i++) {
        size_t len = strlen(path) + strlen(names[i]) + 2;
        char *child = malloc(len);
        if (!child) {
            rc = sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        snprintf(child, len, "%s/%s", path, names[i]);
        rc = walk(child, 0, c, b, err);
        free(child);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

int sq_corpus_load(const char *path, sq_corpus *c, sq_error *err)
{
    memset(c, 0, sizeof *c);
    struct stat st;
    if (stat(path, &st) != 0)
        return sq_error_set(err, errno_kind(errno), "%s: %s", path, strerror(errno));
    text_buf b = {0};
    int rc = (c->path = strdup(path)) ? walk(path, 1, c, &b, err)
                                      : sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory", path);
    if (!rc && b.len < 20)
        rc = sq_error_set(err, SQ_ERR_FORMAT, "%s: %zu bytes of text in %zu file%s (%zu left out "
                          "as binary or links): too little to train on", path, b.len, c->files,
                          c->files == 1 ? "" : "s", c->skipped);
    if (rc) {
        free(b.data);
        sq_corpus_free(c);
        return rc;
    }
    /* every tenth block is validation; a corpus under ten blocks gets ten
    ** smaller ones, so it still has both parts */
    size_t block = b.len >= 10 * (size_t)SQ_CORPUS_BLOCK ? SQ_CORPUS_BLOCK : b.len / 10;
    size_t nblocks = (b.len + block - 1) / block;
    size_t nval = 0;
    for (size_t k = 9; k < nblocks; k += 10)
        nval += (k + 1) * block <= b.len ? block : b.len - k * block;
    c->val = malloc(nval);
    c->train = malloc(b.len - nval);
    if (!c->val || !c->train) {
        free(b.data);
        sq_corpus_free(c);
        return sq_error_set(err, SQ_ERR_NOMEM, "%s: out of memory for %zu bytes", path, b.len);
    }
    for (size_t k = 0; k < nblocks; k++) {
        size_t len = (k + 1) * block <= b.len ? block : b.len - k * block;
        if (k % 10 == 9) {
            memcpy(c->val + c->nval, b.data + k * block, len);
            c->nval += len;
        } else {
            memcpy(c->train + c->ntrain, b.data + k * block, len);
            c->ntrain += len;
        }
    }
    free(b.data);
    return SQ_OK;
}

void sq_corpus_free(sq_corpus *c)
{
    if (!c) return;
    free(c->path);
    free(c->train);
    free(c->val);
    memset(c, 0, sizeof *c);
}

void sq_corpus_train_batch(const sq_corpus *c, uint64_t seed, uint32_t step, uint64_t first,
                           int count, int T, uint8_t *inputs, uint8_t *targets)
{
    const uint64_t range = c->ntrain - (uint64_t)T; /* starts 0 .. ntrain - T - 1 */
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int k = 0; k < count; k++) {
        uint64_t j = first + (uint64_t)k;
        uint32_t ctr[4] = {(uint32_t)j, (uint32_t)(j >> 32), step, SQ_CORPUS_DATA_SITE};
        uint32_t out[4];
        sq_philox4x32_10(ctr, key, out);
        uint64_t pos = (((uint64_t)out[0] << 32) | out[1]) % range;
        memcpy(inputs + (size_t)k * T, c->train + pos, (size_t)T);
        memcpy(targets + (size_t)k * T, c->train + pos + 1, (size_t)T);
    }
}

void sq_corpus_val_seq(const sq_corpus *c, int k, int total, int T, uint8_t *inputs,
                       uint8_t *targets)
{
    uint64_t span = c->nval - (uint64_t)T - 1; /* last start */
    uint64_t pos = total > 1 ? span * (uint64_t)k / (uint64_t)(total - 1) : 0;
    memcpy(inputs, c->val + pos, (size_t)T);
    memcpy(targets, c->val + pos + 1, (size_t)T);
}
