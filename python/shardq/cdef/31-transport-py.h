/* shardq.transport: the callbacks of a transport over torch.distributed,
** Python functions that the C world calls (cffi's extern "Python"). */
extern "Python" int _sq_torch_send(void *ctx, const sq_plan_msg *m, const sq_qbuf *from,
                                   sq_error *err);
extern "Python" int _sq_torch_recv(void *ctx, const sq_plan_msg *m, sq_qbuf *to, sq_error *err);
extern "Python" int _sq_torch_share(void *ctx, int owner, void *buf, size_t bytes, sq_error *err);
extern "Python" int _sq_torch_gather_all(void *ctx, const void *mine, void *all, size_t bytes,
                                         sq_error *err);
