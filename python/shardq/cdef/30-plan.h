/* shardq/plan.h: the transport interface (one rank per process). The
** extern "Python" callbacks of shardq.transport implement it. */
typedef struct sq_plan_msg {
    int coll, link, phase, round;
    int src, dst;
    const sq_wire *wr;
    uint64_t n;
    uint64_t code_bytes, scale_bytes, offset_bytes;
    int dst_buf;
    uint64_t dst_off;
} sq_plan_msg;
typedef struct sq_transport {
    void *ctx;
    int (*send)(void *ctx, const sq_plan_msg *m, const sq_qbuf *from, sq_error *err);
    int (*recv)(void *ctx, const sq_plan_msg *m, sq_qbuf *to, sq_error *err);
    int (*phase_end)(void *ctx, int coll, int phase, sq_error *err);
    int (*share)(void *ctx, int owner, void *buf, size_t bytes, sq_error *err);
    int (*gather_all)(void *ctx, const void *mine, void *all, size_t bytes, sq_error *err);
    int nranks, rank;
} sq_transport;
