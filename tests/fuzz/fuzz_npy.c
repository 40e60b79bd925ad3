/*
** fuzz_npy.c -- libFuzzer harness of the .npy reader.
**
** Parses the input as a whole .npy image with sq_npy_parse. A failure must
** come with a message that starts with the file name and leave no data; a
** success must hold n = product of the shape values, and the finiteness
** check must agree with a plain scan. Any broken promise aborts, which
** libFuzzer reports as a crash. tests/fuzz/run.sh builds and runs it.
*/
#include "shardq/trace.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "fuzz.npy"

static void require(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_npy: broken promise: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sq_npy a;
    sq_error err_ = {0};
    char *err = err_.msg;
    if (sq_npy_parse(NAME, data, size, &a, &err_) != 0) {
        require(strncmp(err, NAME ": ", strlen(NAME ": ")) == 0,
                "an error message does not start with the file name");
        require(a.data == NULL, "a failed parse left data behind");
        return 0;
    }
    require(a.data != NULL && a.version >= 1 && a.version <= 3, "a parse left no data");
    require(a.ndim >= 0 && a.ndim <= SQ_NPY_MAXDIM, "ndim out of range");
    uint64_t n = 1;
    for (int d = 0; d < a.ndim; d++) n *= a.shape[d];
    require(n == a.n, "n is not the product of the shape");
    uint64_t first = UINT64_MAX;
    for (uint64_t i = 0; i < a.n && first == UINT64_MAX; i++)
        if (!isfinite(a.data[i])) first = i;
    int rc = sq_npy_check_finite(NAME, &a, &err_);
    require((rc != 0) == (first != UINT64_MAX), "check_finite disagrees with a plain scan");
    if (rc) {
        char want[64];
        snprintf(want, sizeof want, NAME ": element %llu is ", (unsigned long long)first);
        require(strncmp(err, want, strlen(want)) == 0, "check_finite names the wrong element");
    }
    sq_npy_free(&a);
    return 0;
}
