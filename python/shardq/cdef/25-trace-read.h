/* shardq/trace.h, reading: a trace opened for shardq.replay (the fields a
** caller reads; the rest stays the library's). */
typedef struct sq_trace {
    char *path;
    int workers;
    int has_weights;
    char topo[32];
    size_t nsteps;
    uint32_t *steps;
    size_t nparams;
    uint64_t elements;
    size_t nweights;
    ...;
} sq_trace;
int sq_trace_step_has_weights(const sq_trace *t, size_t index);
int sq_trace_open(const char *path, sq_trace *t, sq_error *err);
void sq_trace_close(sq_trace *t);
