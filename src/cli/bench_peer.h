/*
** bench_peer.h -- `shardq bench --peer torch`: the PyTorch versions of the
** codec rows, timed by a Python script that the binary carries.
*/
#ifndef BENCH_PEER_H
#define BENCH_PEER_H

#include <stddef.h>
#include <stdint.h>

/* configure's PYTHON (Makefile.am passes it), as --help prints it */
#ifndef SQ_PYTHON
#define SQ_PYTHON "/usr/bin/python3"
#endif
#define SQ_PYTHON_TEXT SQ_PYTHON

/* One embedded file (build-aux/embed.sh): name and text; ends with NULLs. */
typedef struct bench_peer_file {
    const char *name;
    const char *text;
} bench_peer_file;

extern const bench_peer_file bench_peer_scripts[];

/* The Python that runs the peer: $SHARDQ_PYTHON, else configure's PYTHON. */
const char *bench_peer_python(void);

/* Whether the peer measures this bench op (the default codecs only). */
int bench_peer_has_op(const char *op);

/* Whether python imports torch: 0, or -1 with why in err. */
int bench_peer_check(const char *python, char *err, size_t errlen);

/* The median seconds of one call of op on n fp32 elements with `threads`
** threads: as usually written (*plain) and cache-chunked (*chunked). 0, or
** -1 with why in err. */
int bench_peer_time(const char *python, const char *op, uint64_t n, int threads,
                    double min_time, double *plain, double *chunked, char *err, size_t errlen);

#endif
