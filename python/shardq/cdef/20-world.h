/* shardq/world.h: topology, wires, schemes, traffic and the world. */
#define SQ_WORLD_MAX_WORKERS 4096
typedef struct sq_topo { int nodes; int per_node; } sq_topo;
int sq_topo_parse(const char *text, sq_topo *t, sq_error *err);
typedef enum sq_group_rule { SQ_GROUP_FIXED = 0, SQ_GROUP_QGZ = 1, SQ_GROUP_QWZ = 2 } sq_group_rule;
typedef struct sq_wire { int bits; sq_codec codec; sq_group_rule rule; int ef; } sq_wire;
typedef enum sq_grad_mode { SQ_GRAD_RING = 0, SQ_GRAD_A2A = 1, SQ_GRAD_TWOLEVEL = 2,
                            SQ_GRAD_NONE = 3, SQ_GRAD_POWERSGD = 4 } sq_grad_mode;
typedef struct sq_scheme { char preset[16]; ...; } sq_scheme;
extern const char *const sq_scheme_presets[];
extern const size_t sq_scheme_npresets;
int sq_scheme_preset(const char *name, sq_scheme *s, sq_error *err);
int sq_scheme_set(sq_scheme *s, const char *assignment, sq_error *err);
int sq_scheme_validate(const sq_scheme *s, sq_error *err);
int sq_scheme_per_tensor(const sq_scheme *s);
int sq_scheme_for_tensor(const sq_scheme *s, const sq_topo *topo, const uint64_t *shape, int ndim,
                         sq_scheme *out, sq_error *err);
int sq_scheme_format(const sq_scheme *s, char *buf, size_t len);
#define SQ_SCHEME_STRLEN 1024
typedef struct sq_knob { const char *key; const char *values; const char *help; } sq_knob;
extern const sq_knob sq_scheme_knobs[];
extern const size_t sq_scheme_nknobs;
int sq_scheme_get(const sq_scheme *s, const char *key, char *buf, size_t len);

enum { SQ_COLL_WEIGHT = 0, SQ_COLL_GRAD = 1, SQ_NCOLL = 2 };
enum { SQ_LINK_INTRA = 0, SQ_LINK_INTER = 1, SQ_NLINK = 2 };
typedef struct sq_link_traffic {
    uint64_t sent_codes, sent_meta; uint64_t recv_codes, recv_meta;
    uint64_t sent_elems; uint64_t messages; uint64_t sent_params;
} sq_link_traffic;
typedef struct sq_traffic { sq_link_traffic t[2][2]; } sq_traffic;
const char *sq_coll_name(int coll);
const char *sq_link_name(int link);

typedef struct sq_world sq_world;
struct sq_transport;
typedef struct sq_world_config {
    sq_topo topo; sq_scheme scheme; uint64_t elements; uint64_t seed;
    const char *device; int dry; const struct sq_transport *transport; int digest;
} sq_world_config;
int sq_world_open(const sq_world_config *cfg, sq_world **out, sq_error *err);
void sq_world_close(sq_world *w);
const char *sq_world_error(const sq_world *w);
const sq_topo *sq_world_topo(const sq_world *w);
const sq_scheme *sq_world_scheme(const sq_world *w);
int sq_world_workers(const sq_world *w);
uint64_t sq_world_elements(const sq_world *w);
uint64_t sq_world_padded(const sq_world *w);
uint64_t sq_world_shard(const sq_world *w);
uint64_t sq_world_shard_len(const sq_world *w, int r);
uint64_t sq_world_pad_unit(const sq_world *w);
struct sq_backend *sq_world_backend(const sq_world *w, int r);
int sq_world_init_weights(sq_world *w, const float *host_w0);
int sq_world_put_master(sq_world *w, int r, const float *host_shard);
int sq_world_get_master(sq_world *w, int r, float *host_shard);
int sq_world_gather_weights(sq_world *w, uint32_t step);
int sq_world_get_weights(sq_world *w, int r, float *host_out);
const float *sq_world_weights_in_place(const sq_world *w, int r);
int sq_world_put_grad(sq_world *w, int r, const float *host_grad);
int sq_world_reduce_grads(sq_world *w, uint32_t step);
int sq_world_get_grad_shard(sq_world *w, int r, float *host_out);
const sq_traffic *sq_world_traffic(const sq_world *w, int r);
void sq_world_add_traffic(const sq_world *w, sq_traffic *sum);
void sq_world_reset_traffic(sq_world *w);
int sq_world_holds(const sq_world *w, int r);
int sq_world_local_rank(const sq_world *w);
int sq_world_share(sq_world *w, int owner, void *buf, size_t bytes);
int sq_world_replicas_differ(sq_world *w, const float *what0, float *tmp, int *differs);
typedef struct sq_coll_time { uint64_t calls; double seconds; double link_seconds[2]; } sq_coll_time;
sq_coll_time sq_world_times(const sq_world *w, int coll);
void sq_world_add_times(const sq_world *w, sq_coll_time sum[2]);
uint64_t sq_world_wire_digest(const sq_world *w, int r);
uint64_t sq_world_residual_len(const sq_world *w, int hop);
uint64_t sq_world_residual_bytes(const sq_world *w);
int sq_world_get_residual(sq_world *w, int r, int hop, float *host_out);
int sq_world_reset_residuals(sq_world *w);
int sq_world_residual_norms(const sq_world *w, int r, double *e2, double *x2);
double sq_world_residual_ratio(double e2, double x2);
double sq_world_residual_rel(const sq_world *w);
sq_grad_mode sq_world_grad_path(const sq_world *w);
const sq_wire *sq_world_single_wire(const sq_world *w);
