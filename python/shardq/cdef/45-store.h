/* shardq/store.h: the rows a replay stores -- statistics, bytes per
** collective and link level, timings. */
typedef struct sq_stat_row {
    uint64_t step;
    const char *path;
    const char *tensor;
    sq_errstats st;
    double frac_clipped;
    double seconds;
    double ef_residual;
} sq_stat_row;
typedef struct sq_bytes_row {
    const char *collective;
    const char *link;
    uint64_t sent_codes, sent_meta, recv_codes, recv_meta, sent_elems, messages;
    uint64_t sent_params;
} sq_bytes_row;
void sq_bytes_rows(const struct sq_traffic *sum, sq_bytes_row *rows);
typedef struct sq_timing_row {
    const char *op;
    uint64_t calls;
    double seconds;
    uint64_t bytes;
} sq_timing_row;
