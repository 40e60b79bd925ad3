/*
** fuzz_safetensors.c -- libFuzzer harness of the safetensors reader.
**
** Parses the input as a whole file image with sq_st_parse. A failure must
** come with a message that starts with the file name. A success must hold
** what the reader promises: tensors that tile the data section in offset
** order, each span equal to nelem * itemsize, names findable; every float
** tensor is then converted to fp32 and to fp64, which must agree (both
** fail with one message, or (float) of the fp64 value is the fp32 value).
** Any broken promise aborts, which libFuzzer reports as a crash.
** tests/fuzz/run.sh builds and runs it.
*/
#include "shardq/trace.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "fuzz.safetensors"

static void require(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_safetensors: broken promise: %s\n", what);
        abort();
    }
}

static void convert_both(const sq_st_file *f, const sq_st_entry *e)
{
    size_t n = (size_t)e->nelem; /* at most the input size */
    float *o32 = malloc(n ? n * sizeof *o32 : 1);
    double *o64 = malloc(n ? n * sizeof *o64 : 1);
    require(o32 && o64, "out of memory");
    sq_error e32 = {0}, e64 = {0};
    char *err32 = e32.msg, *err64 = e64.msg;
    int r32 = sq_st_to_f32(f, e, o32, &e32);
    int r64 = sq_st_to_f64(f, e, o64, &e64);
    require((r32 != 0) == (r64 != 0), "to_f32 and to_f64 disagree on success");
    if (r32) {
        require(strcmp(err32, err64) == 0, "to_f32 and to_f64 give different messages");
        require(strncmp(err32, NAME ": tensor '", strlen(NAME ": tensor '")) == 0,
                "a conversion error does not name the file and the tensor");
    } else {
        for (size_t i = 0; i < n; i++) {
            float back = (float)o64[i];
            require(memcmp(&back, &o32[i], 4) == 0, "fp32 differs from fp64 rounded");
        }
    }
    free(o32);
    free(o64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sq_st_file f;
    sq_error err_ = {0};
    char *err = err_.msg;
    if (sq_st_parse(NAME, data, size, &f, &err_) != 0) {
        require(strncmp(err, NAME ": ", strlen(NAME ": ")) == 0,
                "an error message does not start with the file name");
        require(f.tensors == NULL && f.ntensors == 0, "a failed parse left tensors behind");
        return 0;
    }
    require(size >= 8 + f.header_len && f.data == data + 8 + f.header_len &&
            f.data_len == size - 8 - f.header_len, "the data section is not the file's tail");
    uint64_t pos = 0;
    for (size_t i = 0; i < f.ntensors; i++) {
        const sq_st_entry *e = &f.tensors[i];
        require(e->begin == pos && e->end >= e->begin && e->end <= f.data_len,
                "tensors do not tile the data section");
        require(e->nelem * sq_st_dtype_size(e->dtype) == e->end - e->begin,
                "a span is not nelem * itemsize");
        require(e->data == f.data + e->begin, "a tensor's data pointer is off");
        require(sq_st_find(&f, e->name) != NULL, "a tensor cannot be found by name");
        pos = e->end;
        if (sq_st_dtype_is_float(e->dtype)) convert_both(&f, e);
        sq_st_release(&f, e);
    }
    require(pos == f.data_len, "the tensors leave bytes at the end");
    for (size_t i = 0; i < f.nmeta; i++)
        require(sq_st_meta_get(&f, f.meta[i].key) != NULL, "a metadata key cannot be found");
    sq_st_free(&f);
    return 0;
}
