/* shardq/replay.h: a scheme over a captured trace. The extern "Python"
** callbacks are shardq.replay's sink. */
enum { SQ_REPLAY_GRAD = 1, SQ_REPLAY_WEIGHT = 2 };
typedef struct sq_replay_config {
    sq_topo topo;
    sq_scheme scheme;
    uint64_t seed;
    const char *device;
    int paths;
    size_t max_steps;
    int tensor_rows;
    int reuse_workers;
    const struct sq_transport *transport;
} sq_replay_config;
typedef struct sq_replay_sink {
    void *ctx;
    int (*rows)(void *ctx, const sq_stat_row *rows, size_t n, sq_error *err);
    void (*progress)(void *ctx, size_t done, size_t total);
    int (*tensor)(void *ctx, uint32_t step, size_t p, int path, const float *x, uint64_t n);
} sq_replay_sink;
#define SQ_REPLAY_NTIMINGS 4
typedef struct sq_replay_result {
    size_t steps;
    size_t params;
    uint64_t elements;
    uint64_t padded;
    int layout;
    size_t units;
    int reused_workers;
    int dropped_workers;
    uint64_t trace_bytes;
    double seconds;
    uint64_t peak_rss;
    int has_grad, has_weight;
    sq_errstats grad, weight;
    double grad_clipped, weight_clipped;
    int consecutive;
    sq_bytes_row bytes[4];
    sq_timing_row timings[4];
    sq_coll_time coll[2];
    size_t weight_steps;
    uint64_t residual_bytes;
    double ef_residual, ef_residual_mean;
} sq_replay_result;
sq_topo sq_replay_default_topo(const sq_trace *t);
int sq_replay_run(const sq_replay_config *cfg, const sq_trace *t, const sq_replay_sink *sink,
                  sq_replay_result *out, sq_error *err);
extern "Python" int _sq_replay_rows(void *, const sq_stat_row *, size_t, sq_error *);
extern "Python" void _sq_replay_progress(void *, size_t, size_t);
extern "Python" int _sq_replay_tensor(void *, uint32_t, size_t, int, const float *, uint64_t);
