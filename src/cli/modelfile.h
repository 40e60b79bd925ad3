/*
** modelfile.h -- the cost model's INI files: platforms (experiments/
** platforms/NAME.ini), model shapes (experiments/models/NAME.ini) and
** validation tables (published results to compare against). A file is
** named by a path, or by a bare name for one built into the binary.
**
** Errors name the file, the line and the key: "a.ini:7: intra
** bandwidth_gb_s: 'fast' is not a number".
*/
#ifndef SQ_CLI_MODELFILE_H
#define SQ_CLI_MODELFILE_H

#include "model/costmodel.h"

#include <stddef.h>

/* Reads the platform or model `what`: a path (it contains '/' or ends in
** .ini), else the name of a built-in file. 0, or -1 with err set. */
int modelfile_platform(const char *what, sq_platform *p, char *err, size_t errlen);
int modelfile_model(const char *what, sq_model_shape *m, char *err, size_t errlen);

/* A validation table: the common settings and one row per published
** result. */
#define MODELFILE_MAX_ROWS 64
typedef struct modelfile_row {
    char label[64];
    char model[256];
    int tp, pp;
    double baseline_tflops, scheme_tflops, speedup; /* published; NaN when absent */
} modelfile_row;

typedef struct modelfile_validation {
    char platform[256];
    char scheme[32];   /* the quantized preset the rows report */
    int gpus, micro_batch, accum, overlap;
    double tolerance;  /* the largest relative speedup error accepted */
    modelfile_row rows[MODELFILE_MAX_ROWS];
    int nrows;
} modelfile_validation;

int modelfile_validation_read(const char *path, modelfile_validation *v, char *err,
                              size_t errlen);

/* Prints the built-in platforms and models, one line each. */
void modelfile_list(void);

#endif
