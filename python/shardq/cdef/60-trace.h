/* shardq/trace.h: the trace writer (docs/traces.md), the dtypes of its
** files, and the writers of a trace that several processes write. */
typedef enum sq_st_dtype {
    SQ_ST_BOOL, SQ_ST_U8, SQ_ST_I8, SQ_ST_F8_E5M2, SQ_ST_F8_E4M3,
    SQ_ST_I16, SQ_ST_U16, SQ_ST_F16, SQ_ST_BF16,
    SQ_ST_I32, SQ_ST_U32, SQ_ST_F32,
    SQ_ST_I64, SQ_ST_U64, SQ_ST_F64,
    SQ_ST_NDTYPES
} sq_st_dtype;
const char *sq_st_dtype_name(sq_st_dtype d);
int sq_st_dtype_parse(const char *name);
int sq_st_dtype_is_float(sq_st_dtype d);

#define SQ_TRACE_MAX_WORKERS 4096
#define SQ_TRACE_ID_MAX 33
typedef struct sq_trace_param {
    char *name;
    int ndim;
    uint64_t shape[64];
    uint64_t n;
} sq_trace_param;

typedef struct sq_trace_writer sq_trace_writer;
int sq_trace_writer_open_as(sq_trace_writer **w, const char *dir, const char *owner, int workers,
                            const sq_trace_param *p, size_t np, sq_st_dtype dtype, const char *topo,
                            const char *model, sq_error *err);
int sq_trace_file_begin(sq_trace_writer *w, uint32_t step, int worker, sq_error *err);
int sq_trace_file_put(sq_trace_writer *w, const float *x, sq_error *err);
int sq_trace_file_end(sq_trace_writer *w, sq_error *err);
int sq_trace_writer_close(sq_trace_writer *w, sq_error *err);
void sq_trace_writer_abort(sq_trace_writer *w);
const char *sq_trace_writer_id(const sq_trace_writer *w);
int sq_trace_writer_join(sq_trace_writer **w, const char *dir, const char *id, int worker,
                         int workers, const sq_trace_param *p, size_t np, sq_st_dtype dtype,
                         sq_error *err);
int sq_trace_file_adopt(sq_trace_writer *w, uint32_t step, int worker, sq_error *err);
