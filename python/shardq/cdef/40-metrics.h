/* shardq/metrics.h: error statistics against exact fp64 values, and the
** measured step that replay, world --run and train share. */
typedef struct sq_erracc {
    uint64_t n, zeroed;
    double sum_e2, sum_x2, sum_y2, sum_xy, sum_e, max_abs;
} sq_erracc;
typedef struct sq_errstats {
    uint64_t n;
    double rel_l2, mse, max_abs, snr_db, cosine, mean_signed, frac_zeroed;
} sq_errstats;
void sq_erracc_init(sq_erracc *a);
void sq_erracc_add(sq_erracc *a, const float *got, const double *exact, uint64_t n);
void sq_erracc_merge(sq_erracc *into, const sq_erracc *from);
sq_errstats sq_erracc_finish(const sq_erracc *a);
uint64_t sq_count_clipped(const sq_codec *c, const float *x, uint64_t n);
void sq_step_exact_zero(const sq_world *w, double *exact);
uint64_t sq_step_add_grad(const sq_world *w, double *exact, const float *x32,
                          const double *x64, uint32_t copies, float *tmp);
void sq_step_exact_mean(const sq_world *w, double *exact);
int sq_step_grad_error(sq_world *w, const double *exact, float *whole, float *shard, sq_erracc *e);
uint64_t sq_step_weight_clipped(const sq_world *w, const float *master, const float *what,
                                uint64_t len, float *tmp);
int sq_step_replicas(sq_world *w, float *what, float *tmp, int *differs);
double sq_step_frac(uint64_t count, uint64_t of);
