/*
** demo_corpus.c -- the corpus of `shardq demo` (demo_internal.h): its bytes
** copied into the output directory under their hash, which every run
** trains on and the recipes name.
*/
#define _DEFAULT_SOURCE /* PATH_MAX */
#include "app/demo_internal.h"
#include "shardq/train.h"
#include "trace/input.h"
#include "trace/wfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The copy at d->corpus must train exactly like the original c. */
static int check_copy(const sq_app_demo *d, const sq_corpus *c, sq_error *err)
{
    sq_corpus copy;
    int rc = sq_corpus_load(d->corpus, &copy, err);
    if (rc) return rc;
    if (copy.ntrain != c->ntrain || copy.nval != c->nval ||
        memcmp(copy.train, c->train, c->ntrain) || memcmp(copy.val, c->val, c->nval))
        rc = sq_error_set(err, SQ_ERR_CONFLICT, "%s: the copy of --corpus %s does not read as the "
                          "same text", d->corpus, d->corpus_src);
    sq_corpus_free(&copy);
    return rc;
}

/* Every run trains on OUT/corpus-HASH.txt, a copy of the corpus's bytes
** named by their hash: the recipes refer to it by that name (a path as
** written by the user could hold what the recipe reader takes for a
** comment, or be longer than its lines), and the keys of the runs, which
** hold its real path, change when the text does. */
int sq_app_demo_take_corpus(sq_app_demo *d, sq_error *err)
{
    sq_corpus c;
    sq_error e = {0};
    if (sq_corpus_load(d->corpus_src, &c, &e))
        return sq_error_set(err, e.status, "--corpus: %s", sq_error_message(&e));
    size_t len = c.ntrain + c.nval;
    uint8_t *all = malloc(len);
    if (!all) {
        sq_corpus_free(&c);
        return sq_error_set(err, SQ_ERR_NOMEM, "--corpus %s: out of memory for %zu bytes",
                            d->corpus_src, len);
    }
    join_blocks(&c, all);
    uint64_t h = sq_fnv1a64(all, len, SQ_FNV1A64_BASIS);
    snprintf(d->corpus_name, sizeof d->corpus_name, "corpus-%016llx.txt", (unsigned long long)h);
    snprintf(d->corpus_id, sizeof d->corpus_id, "fnv1a64:%016llx:%zu", (unsigned long long)h,
             len);
    snprintf(d->corpus, sizeof d->corpus, "%s/%s", d->out, d->corpus_name);
    int rc = holds(d->corpus, all, len) ? SQ_OK : sq_app_demo_write(d->corpus, all, len, err);
    if (!rc) rc = check_copy(d, &c, err);
    if (!rc)
        sq_app_demo_say(d, SQ_APP_SAY_OUT, "corpus: %s, %zu bytes in %zu file%s, trained on as %s",
                        d->corpus_src, len, c.files, c.files == 1 ? "" : "s", d->corpus_name);
    free(all);
    sq_corpus_free(&c);
    return rc;
}

