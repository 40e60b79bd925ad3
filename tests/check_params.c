/*
** check_params.c -- the count of real parameters beside the elements sent
** (sq_link_traffic.sent_params, sq_plan_op.model_n): a world pads its n
** elements to whole groups per shard, and what a link costs per parameter
** of the model is its bytes over the model's elements it carried.
**
** Checked on dry worlds of every preset (and pipelined two-level variants),
** topologies 2x4, 3x2, 1x4, 4x1 and 1x1, and sizes around the group and
** the padding unit:
**   - over all workers, each collective carries every real element once
**     per hop: (N - 1) n for the ring all-gather, the ring reduce-scatter
**     and the all-to-all; K (G - 1) n intra and (K - 1) n inter for the
**     two-level path (exact integers, no rounding);
**   - per worker, the partitions it sends, from sq_plan_shard_len alone
**     (an all-gather worker forwards every slot but its successor's, a
**     reduce-scatter worker sends every partition but its own, ...);
**   - per message, the overlap of the padded-buffer ranges it carries with
**     [0, n), the two-level sub-chunks through the swizzle read backwards
**     by search (sq_plan_swizzle_index);
**   - the bytes: the closed forms of docs/schemes.md on the padded count;
**   - sent_params <= sent_elems on every link, equal when n is a multiple
**     of the padding unit (bits per parameter = bits per element);
**   - sums over several worlds (one per tensor) add up exactly;
**   - PowerSGD (grad path powersgd) sends factors, not elements: its
**     messages count the model's elements of the partitions the ring
**     reduce-scatter would send instead (so the sums above hold), its
**     elements are the factors' 2 (N - 1) (rows + cols) rank, and its bytes
**     per worker the chunks of two ring all-reduces of fp32 values.
*/
#include "check_util.h"
#include "world_util.h"
#include "shardq/plan.h"
#include "shardq/world.h"
#include "world/powersgd.h"

static sq_world_config config(int K, int G, const char *preset, const char *set, uint64_t n)
{
    sq_world_config cfg = sqt_world_config(K, G, preset, set, n, 1);
    cfg.dry = 1;
    return cfg;
}

/* [a, a + len) within [0, n) */
static uint64_t overlap(uint64_t a, uint64_t len, uint64_t n)
{
    if (a >= n) return 0;
    return n - a < len ? n - a : len;
}

/* The model's elements of partition z (elements [z S, (z + 1) S)), by
** plain arithmetic. */
static uint64_t part(const sq_plan_layout *L, int z) { return overlap((uint64_t)z * L->shard, L->shard, L->n); }

static uint64_t sum_parts(const sq_plan_layout *L, int (*keep)(const sq_plan_layout *, int, int), int r)
{
    uint64_t s = 0;
    for (int z = 0; z < L->N; z++)
        if (keep(L, z, r)) s += part(L, z);
    return s;
}
static int not_succ(const sq_plan_layout *L, int z, int r) { return z != (r + 1) % L->N; }
static int not_own(const sq_plan_layout *L, int z, int r) { (void)L; return z != r; }
static int other_local(const sq_plan_layout *L, int z, int r) { return z % L->G != r % L->G; }
static int same_local_other_node(const sq_plan_layout *L, int z, int r)
{
    return z % L->G == r % L->G && z / L->G != r / L->G;
}

/* What one SEND carries, found without the plan's own arithmetic: the
** weight slots and all-to-all partitions are ranges of the padded buffer;
** a two-level sub-chunk is swizzled blocks, each found back by search. The
** ring's partial sums and the requantized pieces return UINT64_MAX (they
** are checked per worker). */
static uint64_t message_model(const sq_plan_layout *L, const sq_plan_op *o)
{
    if (o->src == SQ_PLAN_WRECV || o->src == SQ_PLAN_GENC) return overlap(o->src_off, o->n, L->n);
    if (o->src != SQ_PLAN_GSWZ) return UINT64_MAX;
    const uint64_t P = L->slice, nb = (uint64_t)L->N * (uint64_t)L->scheme.pipe;
    uint64_t m = 0;
    ck_assert_uint_eq(o->src_off % P, 0);
    ck_assert_uint_eq(o->n % P, 0);
    for (uint64_t q = o->src_off / P; q < (o->src_off + o->n) / P; q++) {
        uint64_t b = 0;
        while (b < nb && sq_plan_swizzle_index(L, b) != q) b++;
        ck_assert_uint_lt(b, nb);
        m += overlap(b * P, P, L->n);
    }
    return m;
}

static void check_world(int K, int G, const char *preset, const char *set, uint64_t n)
{
    sq_world_config cfg = config(K, G, preset, set, n);
    sq_world *w;
    sq_error err = {0};
    ck_assert_msg(sq_world_open(&cfg, &w, &err) == SQ_OK, "%dx%d %s %s n=%llu: %s", K, G, preset,
                  set ? set : "", (unsigned long long)n, err.msg);
    ck_assert_int_eq(sq_world_gather_weights(w, 1), SQ_OK);
    ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
    sq_plan_layout L;
    ck_assert_int_eq(sq_plan_layout_init(&cfg, &L, &err), SQ_OK);
    const int N = L.N;
    const uint64_t S = L.shard, P = L.padded;
    const sq_grad_mode path = sq_world_grad_path(w);
    const int psgd = path == SQ_GRAD_POWERSGD;
    char what[160];
    snprintf(what, sizeof what, "%dx%d %s%s%s n=%llu (padded %llu)", K, G, preset, set ? " " : "",
             set ? set : "", (unsigned long long)n, (unsigned long long)P);

    /* whole world: every real element once per hop */
    sq_traffic sum;
    memset(&sum, 0, sizeof sum);
    sq_world_add_traffic(w, &sum);
    const sq_link_traffic *wi = &sum.t[SQ_COLL_WEIGHT][SQ_LINK_INTRA], *wx = &sum.t[SQ_COLL_WEIGHT][SQ_LINK_INTER];
    const sq_link_traffic *gi = &sum.t[SQ_COLL_GRAD][SQ_LINK_INTRA], *gx = &sum.t[SQ_COLL_GRAD][SQ_LINK_INTER];
    const uint64_t hops = (uint64_t)(N - 1);
    ck_assert_msg(wi->sent_params + wx->sent_params == hops * n, "%s: weight %llu, want %llu", what,
                  (unsigned long long)(wi->sent_params + wx->sent_params),
                  (unsigned long long)(hops * n));
    ck_assert_uint_eq(wi->sent_elems + wx->sent_elems, hops * P);
    if (path == SQ_GRAD_TWOLEVEL) {
        ck_assert_msg(gi->sent_params == (uint64_t)K * (uint64_t)(G - 1) * n, "%s: intra %llu", what,
                      (unsigned long long)gi->sent_params);
        ck_assert_msg(gx->sent_params == (uint64_t)(K - 1) * n, "%s: inter %llu", what,
                      (unsigned long long)gx->sent_params);
    } else {
        ck_assert_msg(gi->sent_params + gx->sent_params == hops * n, "%s: grad %llu", what,
                      (unsigned long long)(gi->sent_params + gx->sent_params));
        if (psgd)
            ck_assert_uint_eq(gi->sent_elems + gx->sent_elems,
                              2 * hops * (L.psgd_rows + L.psgd_cols) * (uint64_t)L.psgd_rank);
        else
            ck_assert_uint_eq(gi->sent_elems + gx->sent_elems, hops * P);
    }
    /* never more than was sent; as much when nothing is padding */
    for (int c = 0; c < SQ_NCOLL; c++)
        for (int l = 0; l < SQ_NLINK; l++) {
            if (psgd && c == SQ_COLL_GRAD) continue; /* factors, fewer than the elements */
            const sq_link_traffic *x = &sum.t[c][l];
            ck_assert_msg(x->sent_params <= x->sent_elems, "%s", what);
            if (n % L.unit == 0) ck_assert_msg(x->sent_params == x->sent_elems, "%s", what);
        }
    if (N > 1 && n % L.unit != 0)
        ck_assert_msg(wi->sent_params + wx->sent_params < wi->sent_elems + wx->sent_elems, "%s", what);

    /* per worker: the partitions it sends, and the bytes of the closed forms (docs/schemes.md) */
    const sq_wire *ww = &L.wires[SQ_PLAN_WIRE_WEIGHT];
    for (int r = 0; r < N; r++) {
        const sq_traffic *t = sq_world_traffic(w, r);
        uint64_t wp = 0, gp = 0, wb = 0, gb = 0;
        for (int l = 0; l < SQ_NLINK; l++) {
            wp += t->t[SQ_COLL_WEIGHT][l].sent_params;
            gp += t->t[SQ_COLL_GRAD][l].sent_params;
            wb += t->t[SQ_COLL_WEIGHT][l].sent_codes + t->t[SQ_COLL_WEIGHT][l].sent_meta;
            gb += t->t[SQ_COLL_GRAD][l].sent_codes + t->t[SQ_COLL_GRAD][l].sent_meta;
        }
        ck_assert_msg(wp == sum_parts(&L, not_succ, r), "%s: worker %d weight %llu", what, r,
                      (unsigned long long)wp);
        ck_assert_uint_eq(wb, hops * (sq_wire_code_bytes(ww, S) + sq_wire_meta_bytes(ww, S)));
        if (path == SQ_GRAD_TWOLEVEL) {
            const sq_wire *a = &L.wires[SQ_PLAN_WIRE_INTRA], *b = &L.wires[SQ_PLAN_WIRE_INTER];
            const uint64_t pipe = (uint64_t)L.scheme.pipe, sub = (uint64_t)K * L.slice;
            const sq_link_traffic *ti = &t->t[SQ_COLL_GRAD][SQ_LINK_INTRA], *tx = &t->t[SQ_COLL_GRAD][SQ_LINK_INTER];
            ck_assert_msg(ti->sent_params == sum_parts(&L, other_local, r), "%s: worker %d intra", what, r);
            ck_assert_msg(tx->sent_params == sum_parts(&L, same_local_other_node, r), "%s: worker %d inter",
                          what, r);
            ck_assert_uint_eq(ti->sent_codes + ti->sent_meta,
                              (uint64_t)(G - 1) * pipe * (sq_wire_code_bytes(a, sub) + sq_wire_meta_bytes(a, sub)));
            ck_assert_uint_eq(tx->sent_codes + tx->sent_meta,
                              (uint64_t)(K - 1) * pipe *
                                  (sq_wire_code_bytes(b, L.slice) + sq_wire_meta_bytes(b, L.slice)));
        } else if (N > 1) {
            const sq_wire *s = &L.wires[L.single_wire];
            ck_assert_msg(gp == sum_parts(&L, not_own, r), "%s: worker %d grad %llu", what, r,
                          (unsigned long long)gp);
            if (psgd) {
                /* each all-reduce: every chunk but r's in the reduce-scatter, every
                ** chunk but r + 1's in the all-gather, 4 bytes an element */
                const uint64_t rk = (uint64_t)L.psgd_rank;
                const uint64_t lens[2] = {L.psgd_rows * rk, L.psgd_cols * rk};
                uint64_t want = 0;
                for (int f = 0; f < 2; f++) {
                    uint64_t o, a, b;
                    sq_psgd_chunk(lens[f], N, r, &o, &a);
                    sq_psgd_chunk(lens[f], N, (r + 1) % N, &o, &b);
                    want += 4 * (2 * lens[f] - a - b);
                }
                ck_assert_uint_eq(gb, want);
            } else {
                ck_assert_uint_eq(gb, hops * (sq_wire_code_bytes(s, S) + sq_wire_meta_bytes(s, S)));
            }
        } else {
            ck_assert_uint_eq(gp + gb, 0);
        }
    }

    /* per message */
    for (int coll = 0; coll < SQ_NCOLL; coll++)
        for (int r = 0; r < N; r++) {
            sq_plan *p;
            ck_assert_int_eq(sq_plan_build(&cfg, r, coll, &p, &err), SQ_OK);
            for (size_t i = 0; i < sq_plan_nops(p); i++) {
                const sq_plan_op *o = sq_plan_op_at(p, i);
                if (o->kind != SQ_PLAN_SEND) continue;
                uint64_t m = message_model(&L, o);
                if (psgd && coll == SQ_COLL_GRAD) continue; /* checked per worker */
                ck_assert_uint_le(o->model_n, o->n);
                if (m != UINT64_MAX)
                    ck_assert_msg(o->model_n == m, "%s: rank %d op %zu: %llu, want %llu", what, r,
                                  i, (unsigned long long)o->model_n, (unsigned long long)m);
            }
            sq_plan_free(p);
        }
    sq_world_close(w);
}

static const int topos[][2] = {{2, 4}, {3, 2}, {1, 4}, {4, 1}, {1, 1}};
#define NTOPOS (sizeof topos / sizeof topos[0])

static void check_sizes(const char *preset, const char *set)
{
    for (size_t t = 0; t < NTOPOS; t++) {
        sq_world_config cfg = config(topos[t][0], topos[t][1], preset, set, 1);
        sq_plan_layout L;
        sq_error err = {0};
        ck_assert_int_eq(sq_plan_layout_init(&cfg, &L, &err), SQ_OK);
        const uint64_t g = sq_wire_group(&cfg.scheme.weight), u = L.unit;
        const uint64_t sizes[] = {1, 7, g > 1 ? g - 1 : 2, g + 1, 1000, 100003,
                                  u > 1 ? u - 1 : 3, u, u + 1, 3 * u + 12345};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            check_world(topos[t][0], topos[t][1], preset, set, sizes[i]);
    }
}

START_TEST(test_presets)
{
    check_sizes(sq_scheme_presets[_i], NULL);
}
END_TEST

START_TEST(test_pipelined)
{
    static const char *const cases[][2] = {{"sdp4bit", "grad.pipe=2"}, {"sdp4bit", "grad.pipe=3"},
                                           {"zeropp", "grad.pipe=2"}, {"ulq", "grad.mode=a2a"}};
    check_sizes(cases[_i][0], cases[_i][1]);
}
END_TEST

/* One world per tensor: the counts add up over the worlds, exactly. */
START_TEST(test_many_worlds)
{
    static const uint64_t ns[] = {1, 768, 50257 * 64, 3 * 768, 7};
    sq_traffic sum;
    memset(&sum, 0, sizeof sum);
    uint64_t total = 0, padded = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        sq_world_config cfg = config(2, 4, "sdp4bit", NULL, ns[i]);
        sq_world *w;
        sq_error err = {0};
        ck_assert_int_eq(sq_world_open(&cfg, &w, &err), SQ_OK);
        ck_assert_int_eq(sq_world_gather_weights(w, 1), SQ_OK);
        ck_assert_int_eq(sq_world_reduce_grads(w, 1), SQ_OK);
        sq_world_add_traffic(w, &sum);
        total += ns[i];
        padded += sq_world_padded(w);
        sq_world_close(w);
    }
    const sq_link_traffic *x = sum.t[SQ_COLL_WEIGHT];
    ck_assert_uint_eq(x[0].sent_params + x[1].sent_params, 7 * total);
    ck_assert_uint_eq(x[0].sent_elems + x[1].sent_elems, 7 * padded);
    x = sum.t[SQ_COLL_GRAD];
    ck_assert_uint_eq(x[SQ_LINK_INTRA].sent_params, 2 * 3 * total);
    ck_assert_uint_eq(x[SQ_LINK_INTER].sent_params, total);
    /* the cost per parameter exceeds the cost per element by the padding */
    double bpe = 8.0 * (double)(x[1].sent_codes + x[1].sent_meta) / (double)x[1].sent_elems;
    double bpp = 8.0 * (double)(x[1].sent_codes + x[1].sent_meta) / (double)x[1].sent_params;
    ck_assert(bpp > bpe);
    ck_assert_double_eq_tol(bpp / bpe, (double)x[1].sent_elems / (double)x[1].sent_params, 1e-12);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("closed forms");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_presets, 0, (int)sq_scheme_npresets);
    tcase_add_loop_test(tc, test_pipelined, 0, 4);
    tcase_add_test(tc, test_many_worlds);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
