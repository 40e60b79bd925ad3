/*
** corpus.h -- the text a model trains on, as bytes, split once into a
** training and a validation part (README, "Training").
**
** A corpus is a text file or a directory of them. A directory is walked in
** name order (subdirectories too); symbolic links inside it and files that
** hold a NUL byte (binary, such as the .dat indexes of fortune files) are
** left out, so the bytes -- and so every batch -- depend only on the files'
** contents, never on the order the file system lists them.
**
** The split is fixed by the bytes alone, whatever the seed: the corpus is cut
** into blocks of SQ_CORPUS_BLOCK bytes and every tenth block (index % 10 ==
** 9) is validation. Blocks, not a tail, so that the validation text comes
** from every file of a directory.
**
** Batches: sequence j of training step t starts at a position drawn by
** Philox from (seed, t, j) alone, so a worker that takes sequences
** [r B, (r + 1) B) of a step sees the same bytes as one worker that takes all
** N B of them, and every scheme of a seed sees the same data in the same
** order.
*/
#ifndef SQ_TRAIN_CORPUS_H
#define SQ_TRAIN_CORPUS_H

#include "shardq.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SQ_CORPUS_BLOCK 4096
/* The default corpus: the text of Debian's `fortunes` package. */
#define SQ_CORPUS_DEFAULT "/usr/share/games/fortunes"
#define SQ_CORPUS_DATA_SITE 0xf1 /* Philox site of batch positions */

typedef struct sq_corpus {
    char *path;
    uint8_t *train, *val;
    size_t ntrain, nval;
    size_t files;   /* text files read */
    size_t skipped; /* binary files and links left out */
} sq_corpus;

/* Reads path: SQ_OK, or SQ_ERR_NOTFOUND (no such file), SQ_ERR_IO (a
** refused open or read), SQ_ERR_FORMAT (not a file or directory, or too
** little text) or SQ_ERR_NOMEM, with a sentence naming the path. */
int sq_corpus_load(const char *path, sq_corpus *c, sq_error *err);
void sq_corpus_free(sq_corpus *c);

/* The bytes of sequences first .. first + count - 1 of training step
** `step`: inputs[k T + t] and targets[k T + t] = the next byte. */
void sq_corpus_train_batch(const sq_corpus *c, uint64_t seed, uint32_t step, uint64_t first,
                           int count, int T, uint8_t *inputs, uint8_t *targets);

/* Validation sequence k of `total` (k < total): windows of T + 1 bytes spread
** evenly over the validation text, the same for every run. */
void sq_corpus_val_seq(const sq_corpus *c, int k, int total, int T, uint8_t *inputs,
                       uint8_t *targets);

#ifdef __cplusplus
}
#endif
#endif /* SQ_TRAIN_CORPUS_H */
