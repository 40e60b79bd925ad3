/*
** check_scheme.c -- the schemes of the sharded world: every preset loads,
** validates and holds the knobs of the DESIGN table; single knobs change
** exactly what they name and refuse bad values with the key in the
** message; validation refuses the combinations the world cannot run; the
** canonical text lists every knob in order (error feedback's only when
** set) and round-trips between every pair of presets; the error-feedback
** knobs; KxG topologies parse and bad ones are refused.
*/
#include "shardq/codec.h"
#include "shardq/world.h"
#include "check_util.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

static sq_scheme preset_ok(const char *name)
{
    sq_scheme s;
    sq_error err = {0};
    int rc = sq_scheme_preset(name, &s, &err);
    ck_assert_msg(rc == SQ_OK, "preset %s rejected (%d): %s", name, rc, err.msg);
    return s;
}

static void set_ok(sq_scheme *s, const char *assignment)
{
    sq_error err = {0};
    int rc = sq_scheme_set(s, assignment, &err);
    ck_assert_msg(rc == SQ_OK, "'%s' rejected (%d): %s", assignment, rc, err.msg);
}

static void format_ok(const sq_scheme *s, char *buf)
{
    int n = sq_scheme_format(s, buf, SQ_SCHEME_STRLEN);
    ck_assert_msg(n > 0 && n < SQ_SCHEME_STRLEN, "format returned %d", n);
    ck_assert_int_eq((int)strlen(buf), n);
}

/* A quantized wire with every codec field as given (scale fp32). */
static void expect_codec_wire(const sq_wire *w, const char *what, int bits, sq_kind kind,
                              uint64_t group, sq_round round, int hadamard, sq_levels levels)
{
    ck_assert_msg(!sq_wire_raw(w), "%s: raw wire (bits %d)", what, w->bits);
    ck_assert_msg(w->bits == bits, "%s: bits %d, want %d", what, w->bits, bits);
    ck_assert_msg(w->codec.bits == bits, "%s: codec.bits %d, want %d", what, w->codec.bits, bits);
    ck_assert_msg(w->codec.kind == kind, "%s: kind %d, want %d", what, w->codec.kind, kind);
    ck_assert_msg(w->codec.group == group, "%s: group %llu, want %llu", what,
                  (unsigned long long)w->codec.group, (unsigned long long)group);
    ck_assert_msg(w->codec.round == round, "%s: round %d, want %d", what, w->codec.round, round);
    ck_assert_msg(w->codec.hadamard == hadamard, "%s: hadamard %d, want %d", what,
                  w->codec.hadamard, hadamard);
    ck_assert_msg(w->codec.levels == levels, "%s: levels %d, want %d", what, w->codec.levels,
                  levels);
    ck_assert_msg(w->codec.scale == SQ_SCALE_FP32, "%s: scale %d", what, w->codec.scale);
    ck_assert_int_eq(sq_codec_validate(&w->codec), SQ_OK);
}

static void expect_raw_wire(const sq_wire *w, const char *what, int bits)
{
    ck_assert_msg(w->bits == bits, "%s: bits %d, want %d", what, w->bits, bits);
    ck_assert_msg(sq_wire_raw(w), "%s: not raw", what);
    ck_assert_uint_eq(sq_wire_group(w), 1);
    ck_assert_uint_eq(sq_wire_meta_bytes(w, 1000), 0);
    ck_assert_uint_eq(sq_wire_code_bytes(w, 1000), 1000u * (uint64_t)(bits / 8));
}

/* The baseline's weight side: bf16 all-gather of the weights themselves. */
static void expect_baseline_weights(const sq_scheme *s)
{
    ck_assert_int_eq(s->weight_mode, SQ_WEIGHT_DIRECT);
    expect_raw_wire(&s->weight, "weight", 16);
}

/* The baseline's gradient side: fp32 ring. */
static void expect_baseline_grads(const sq_scheme *s)
{
    ck_assert_int_eq(s->grad_mode, SQ_GRAD_RING);
    expect_raw_wire(&s->grad_intra, "grad.intra", 32);
    expect_raw_wire(&s->grad_inter, "grad.inter", 32);
}

static void expect_common(const sq_scheme *s, const char *name)
{
    ck_assert_str_eq(s->preset, name);
    ck_assert_int_eq(s->pipe, 1);
    ck_assert_int_eq(s->grad_mean, 1);
}

static void expect_int4_weights(const sq_scheme *s, sq_weight_mode mode)
{
    ck_assert_int_eq(s->weight_mode, mode);
    expect_codec_wire(&s->weight, "weight", 4, SQ_KIND_SYM, 2048, SQ_ROUND_SR, 0, SQ_LEVELS_SDP4BIT);
}

static void expect_ulq_grads(const sq_scheme *s)
{
    ck_assert_int_eq(s->grad_mode, SQ_GRAD_TWOLEVEL);
    /* SDP4Bit's public ULq: SR, 15 levels, groups of 128, no transform */
    expect_codec_wire(&s->grad_intra, "grad.intra", 4, SQ_KIND_SYM, 128, SQ_ROUND_SR, 0,
                      SQ_LEVELS_SDP4BIT);
    expect_codec_wire(&s->grad_inter, "grad.inter", 4, SQ_KIND_SYM, 128, SQ_ROUND_SR, 0,
                      SQ_LEVELS_SDP4BIT);
    ck_assert_int_eq(s->grad_dtype, SQ_GRAD_FP32);
    ck_assert_int_eq(s->grad_fallback, SQ_FALLBACK_NONE);
    ck_assert_int_eq(s->grad_intra.rule, SQ_GROUP_FIXED);
}

/* DeepSpeed's qgZ: RTN, DeepSpeed levels, the per-tensor group rule, fp16
** arithmetic, its fallbacks. */
static void expect_qgz_grads(const sq_scheme *s)
{
    ck_assert_int_eq(s->grad_mode, SQ_GRAD_TWOLEVEL);
    expect_codec_wire(&s->grad_intra, "grad.intra", 4, SQ_KIND_SYM, 128, SQ_ROUND_RTN, 0,
                      SQ_LEVELS_DEEPSPEED);
    expect_codec_wire(&s->grad_inter, "grad.inter", 4, SQ_KIND_SYM, 128, SQ_ROUND_RTN, 0,
                      SQ_LEVELS_DEEPSPEED);
    ck_assert_int_eq(s->grad_intra.rule, SQ_GROUP_QGZ);
    ck_assert_int_eq(s->grad_inter.rule, SQ_GROUP_QGZ);
    ck_assert_int_eq(s->grad_dtype, SQ_GRAD_FP16);
    ck_assert_int_eq(s->grad_fallback, SQ_FALLBACK_QGZ);
}

static void expect_tlq_grads(const sq_scheme *s, int hadamard)
{
    ck_assert_int_eq(s->grad_mode, SQ_GRAD_TWOLEVEL);
    expect_codec_wire(&s->grad_intra, "grad.intra", 8, SQ_KIND_SYM, 128, SQ_ROUND_SR, hadamard,
                      SQ_LEVELS_SDP4BIT);
    expect_codec_wire(&s->grad_inter, "grad.inter", 4, SQ_KIND_SYM, 128, SQ_ROUND_SR, hadamard,
                      SQ_LEVELS_SDP4BIT);
}

/* The keys whose value differs between the canonical texts of a and b,
** comma-separated in knob order, into out. */
static void changed_keys(const sq_scheme *a, const sq_scheme *b, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t k = 0; k < sq_scheme_nknobs; k++) {
        char va[128], vb[128];
        sq_scheme_get(a, sq_scheme_knobs[k].key, va, sizeof va);
        sq_scheme_get(b, sq_scheme_knobs[k].key, vb, sizeof vb);
        if (strcmp(va, vb) != 0 && used < len)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? "," : "",
                                     sq_scheme_knobs[k].key);
    }
}

/* Sets `assignment` on a copy of preset `from` and checks that exactly the
** keys `want` (comma-separated, knob order) changed. Returns the result. */
static sq_scheme set_changes(const char *from, const char *assignment, const char *want)
{
    sq_scheme before = preset_ok(from), after = before;
    set_ok(&after, assignment);
    char got[512];
    changed_keys(&before, &after, got, sizeof got);
    ck_assert_msg(strcmp(got, want) == 0, "%s on %s changed {%s}, want {%s}", assignment, from,
                  got, want);
    ck_assert_str_eq(after.preset, from);
    return after;
}

/* ------------------------------------------------------------------------ */
/* Presets                                                                  */
/* ------------------------------------------------------------------------ */

START_TEST(test_preset_list)
{
    static const char *const want[] = {"baseline", "qw",     "qwd",     "ulq",  "tlq",
                                       "tlqhs",    "sdp4bit", "zeropp", "zeropp8", "qsdp",
                                       "qgz",      "qwz",     "powersgd", "powersgd4",
                                       "qsgd",     "efsignsgd", "topk"};
    ck_assert_uint_eq(sq_scheme_npresets, 17);
    for (size_t i = 0; i < 17; i++) ck_assert_str_eq(sq_scheme_presets[i], want[i]);
}
END_TEST

START_TEST(test_presets_validate)
{
    for (size_t i = 0; i < sq_scheme_npresets; i++) {
        const char *name = sq_scheme_presets[i];
        sq_scheme s = preset_ok(name);
        sq_error err = {0};
        int rc = sq_scheme_validate(&s, &err);
        ck_assert_msg(rc == SQ_OK, "preset %s does not validate (%d): %s", name, rc, err.msg);
        expect_common(&s, name);
    }
}
END_TEST

START_TEST(test_preset_baseline)
{
    sq_scheme s = preset_ok("baseline");
    expect_common(&s, "baseline");
    expect_baseline_weights(&s);
    expect_baseline_grads(&s);
}
END_TEST

START_TEST(test_preset_qw_qwd)
{
    sq_scheme s = preset_ok("qw");
    expect_int4_weights(&s, SQ_WEIGHT_DIRECT);
    expect_baseline_grads(&s);
    s = preset_ok("qwd");
    expect_int4_weights(&s, SQ_WEIGHT_DIFF);
    expect_baseline_grads(&s);
}
END_TEST

START_TEST(test_preset_ulq_tlq)
{
    sq_scheme s = preset_ok("ulq");
    expect_baseline_weights(&s);
    expect_ulq_grads(&s);
    s = preset_ok("tlq");
    expect_baseline_weights(&s);
    expect_tlq_grads(&s, 0);
    s = preset_ok("tlqhs");
    expect_baseline_weights(&s);
    expect_tlq_grads(&s, 32);
}
END_TEST

START_TEST(test_preset_combined)
{
    sq_scheme s = preset_ok("sdp4bit");
    expect_int4_weights(&s, SQ_WEIGHT_DIFF);
    expect_tlq_grads(&s, 32);

    s = preset_ok("zeropp");
    expect_int4_weights(&s, SQ_WEIGHT_DIRECT);
    expect_ulq_grads(&s);

    s = preset_ok("zeropp8");
    ck_assert_int_eq(s.weight_mode, SQ_WEIGHT_DIRECT);
    expect_codec_wire(&s.weight, "weight", 8, SQ_KIND_SYM, 4096, SQ_ROUND_RTN, 0,
                      SQ_LEVELS_DEEPSPEED);
    ck_assert_int_eq(s.weight.rule, SQ_GROUP_QWZ);
    expect_qgz_grads(&s);

    s = preset_ok("qgz");
    expect_baseline_weights(&s);
    expect_qgz_grads(&s);

    s = preset_ok("qwz");
    expect_codec_wire(&s.weight, "weight", 8, SQ_KIND_SYM, 4096, SQ_ROUND_RTN, 0,
                      SQ_LEVELS_DEEPSPEED);
    ck_assert_int_eq(s.weight.rule, SQ_GROUP_QWZ);
    expect_baseline_grads(&s);

    s = preset_ok("qsdp");
    ck_assert_int_eq(s.weight_mode, SQ_WEIGHT_DIRECT);
    expect_codec_wire(&s.weight, "weight", 8, SQ_KIND_MINMAX, 1024, SQ_ROUND_SR, 0,
                      SQ_LEVELS_SDP4BIT);
    ck_assert_int_eq(s.grad_mode, SQ_GRAD_A2A);
    expect_codec_wire(&s.grad_intra, "grad.intra", 8, SQ_KIND_MINMAX, 1024, SQ_ROUND_SR, 0,
                      SQ_LEVELS_SDP4BIT);
    expect_codec_wire(&s.grad_inter, "grad.inter", 8, SQ_KIND_MINMAX, 1024, SQ_ROUND_SR, 0,
                      SQ_LEVELS_SDP4BIT);
}
END_TEST

START_TEST(test_preset_unknown)
{
    static const char *const bad[] = {"nope", "", "SDP4BIT", "sdp4bit ", "base"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sq_scheme s;
        sq_error err = {0};
        ck_assert_int_eq(sq_scheme_preset(bad[i], &s, &err), SQ_ERR_SPEC);
        char want[64];
        snprintf(want, sizeof want, "'%s'", bad[i]);
        ck_assert_msg(strstr(err.msg, want), "'%s': message lacks the name: %s", bad[i], err.msg);
        for (size_t p = 0; p < sq_scheme_npresets; p++)
            ck_assert_msg(strstr(err.msg, sq_scheme_presets[p]), "message lacks preset %s: %s",
                          sq_scheme_presets[p], err.msg);
    }
    sq_scheme s;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_preset(NULL, &s, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "baseline"), "%s", err.msg);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Knobs                                                                    */
/* ------------------------------------------------------------------------ */

START_TEST(test_set_one_hop)
{
    sq_scheme s = set_changes("sdp4bit", "grad.inter.bits=3", "grad.inter.bits");
    ck_assert_int_eq(s.grad_inter.bits, 3);
    ck_assert_int_eq(s.grad_inter.codec.bits, 3);
    ck_assert_int_eq(s.grad_intra.bits, 8);
    ck_assert_int_eq(s.grad_intra.codec.bits, 8);

    s = set_changes("sdp4bit", "grad.intra.round=rtn", "grad.intra.round");
    ck_assert_int_eq(s.grad_intra.codec.round, SQ_ROUND_RTN);
    ck_assert_int_eq(s.grad_inter.codec.round, SQ_ROUND_SR);

    s = set_changes("tlq", "grad.inter.scale=bf16", "grad.inter.scale");
    ck_assert_int_eq(s.grad_inter.codec.scale, SQ_SCALE_BF16);
}
END_TEST

START_TEST(test_set_both_hops)
{
    sq_scheme s = set_changes("sdp4bit", "grad.group=512", "grad.intra.group,grad.inter.group");
    ck_assert_uint_eq(s.grad_intra.codec.group, 512);
    ck_assert_uint_eq(s.grad_inter.codec.group, 512);
    ck_assert_uint_eq(s.weight.codec.group, 2048);

    s = set_changes("tlq", "grad.hadamard=64", "grad.intra.hadamard,grad.inter.hadamard");
    ck_assert_int_eq(s.grad_intra.codec.hadamard, 64);
    ck_assert_int_eq(s.grad_inter.codec.hadamard, 64);

    s = set_changes("zeropp", "grad.bits=2", "grad.intra.bits,grad.inter.bits");
    ck_assert_int_eq(s.grad_intra.bits, 2);
    ck_assert_int_eq(s.grad_inter.bits, 2);
}
END_TEST

START_TEST(test_set_scheme_knobs)
{
    sq_scheme s = set_changes("sdp4bit", "weight.group=512", "weight.group");
    ck_assert_uint_eq(s.weight.codec.group, 512);
    ck_assert_uint_eq(s.grad_intra.codec.group, 128);

    s = set_changes("sdp4bit", "grad.pipe=4", "grad.pipe");
    ck_assert_int_eq(s.pipe, 4);
    s = set_changes("sdp4bit", "grad.pipe=1024", "grad.pipe");
    ck_assert_int_eq(s.pipe, 1024);

    s = set_changes("sdp4bit", "grad.mean=0", "grad.mean");
    ck_assert_int_eq(s.grad_mean, 0);
    set_ok(&s, "grad.mean=1");
    ck_assert_int_eq(s.grad_mean, 1);

    s = set_changes("sdp4bit", "weight.mode=direct", "weight.mode");
    ck_assert_int_eq(s.weight_mode, SQ_WEIGHT_DIRECT);
    s = set_changes("qw", "weight.mode=diff", "weight.mode");
    ck_assert_int_eq(s.weight_mode, SQ_WEIGHT_DIFF);

    s = set_changes("sdp4bit", "grad.mode=a2a", "grad.mode");
    ck_assert_int_eq(s.grad_mode, SQ_GRAD_A2A);
    s = set_changes("qsdp", "grad.mode=twolevel", "grad.mode");
    ck_assert_int_eq(s.grad_mode, SQ_GRAD_TWOLEVEL);
    s = set_changes("qsdp", "grad.mode=ring", "grad.mode");
    ck_assert_int_eq(s.grad_mode, SQ_GRAD_RING);

    s = set_changes("qsdp", "weight.kind=sym", "weight.kind");
    ck_assert_int_eq(s.weight.codec.kind, SQ_KIND_SYM);
    s = set_changes("zeropp8", "weight.levels=sdp4bit", "weight.levels");
    ck_assert_int_eq(s.weight.codec.levels, SQ_LEVELS_SDP4BIT);
    s = set_changes("qw", "weight.round=rtn", "weight.round");
    ck_assert_int_eq(s.weight.codec.round, SQ_ROUND_RTN);
    s = set_changes("qw", "weight.scale=fp16", "weight.scale");
    ck_assert_int_eq(s.weight.codec.scale, SQ_SCALE_FP16);
    s = set_changes("qw", "weight.bits=8", "weight.bits");
    ck_assert_int_eq(s.weight.bits, 8);
    ck_assert_int_eq(s.weight.codec.bits, 8);
    /* setting a knob to the value it has changes nothing */
    set_changes("sdp4bit", "grad.inter.bits=4", "");
}
END_TEST

START_TEST(test_set_raw)
{
    /* an unquantized wire prints the default codec (group 128, not qw's 2048),
    ** so that schemes that behave alike print alike */
    sq_scheme s = set_changes("qw", "weight.bits=16", "weight.bits,weight.group");
    expect_raw_wire(&s.weight, "weight", 16);
    char a[SQ_SCHEME_STRLEN], b[SQ_SCHEME_STRLEN];
    sq_scheme base = preset_ok("baseline");
    sq_scheme_format(&s, a, sizeof a);
    sq_scheme_format(&base, b, sizeof b);
    ck_assert_str_eq(a, b);
    s = set_changes("qw", "weight.bits=32", "weight.bits,weight.group");
    expect_raw_wire(&s.weight, "weight", 32);
    s = set_changes("tlq", "grad.bits=32", "grad.intra.bits,grad.inter.bits");
    expect_raw_wire(&s.grad_intra, "grad.intra", 32);
    expect_raw_wire(&s.grad_inter, "grad.inter", 32);
    s = set_changes("tlq", "grad.inter.bits=16", "grad.inter.bits");
    expect_raw_wire(&s.grad_inter, "grad.inter", 16);
    ck_assert(!sq_wire_raw(&s.grad_intra));
    /* and back to a codec */
    s = preset_ok("baseline");
    set_ok(&s, "weight.bits=8");
    ck_assert(!sq_wire_raw(&s.weight));
    ck_assert_int_eq(s.weight.bits, 8);
    ck_assert_int_eq(s.weight.codec.bits, 8);
}
END_TEST

/* Rejected assignments: SQ_ERR_SPEC, a message naming the key (or the
** whole assignment when there is no key), and the scheme untouched. */
static const struct {
    const char *assignment, *named;
} bad_sets[] = {
    {"grad.foo=1", "grad.foo"},
    {"weight.foo=1", "weight.foo"},
    {"grad.intra.pipe=2", "grad.intra.pipe"},
    {"model.bits=4", "model.bits"},
    {"weight.bits=9", "weight.bits"},
    {"weight.bits=0", "weight.bits"},
    {"weight.bits=12", "weight.bits"},
    {"weight.bits=-4", "weight.bits"},
    {"grad.bits=9", "grad.bits"},
    {"grad.inter.bits=x", "grad.inter.bits"},
    {"weight.group=0", "weight.group"},
    {"weight.group=1099511627777", "weight.group"},
    {"grad.pipe=0", "grad.pipe"},
    {"grad.pipe=1025", "grad.pipe"},
    {"grad.pipe=two", "grad.pipe"},
    {"grad.mean=2", "grad.mean"},
    {"grad.mean=yes", "grad.mean"},
    {"weight.round=up", "weight.round"},
    {"weight.kind=asym", "weight.kind"},
    {"grad.levels=nvidia", "grad.levels"},
    {"grad.inter.scale=fp8", "grad.inter.scale"},
    {"weight.mode=both", "weight.mode"},
    {"grad.mode=tree", "grad.mode"},
    {"grad.mode=none", "grad.mode"},
    {"weight.hadamard=3", "weight.hadamard"},
    {"weight.hadamard=1", "weight.hadamard"},
    {"weight.hadamard=2048", "weight.hadamard"},
    {"nokey", "nokey"},
    {"=1", "=1"},
    {"weight.bits=", "weight.bits"},
    {"grad.ef=2", "grad.ef"},
    {"grad.inter.ef=yes", "grad.inter.ef"},
    {"weight.ef=1", "weight.ef"},
};

START_TEST(test_set_rejects)
{
    const char *a = bad_sets[_i].assignment;
    sq_scheme s = preset_ok("sdp4bit"), before = s;
    sq_error err = {0};
    int rc = sq_scheme_set(&s, a, &err);
    ck_assert_msg(rc == SQ_ERR_SPEC, "'%s' gave %d, want SQ_ERR_SPEC", a, rc);
    ck_assert_msg(strstr(err.msg, bad_sets[_i].named), "'%s': message lacks '%s': %s", a,
                  bad_sets[_i].named, err.msg);
    char t0[SQ_SCHEME_STRLEN], t1[SQ_SCHEME_STRLEN];
    format_ok(&before, t0);
    format_ok(&s, t1);
    ck_assert_msg(strcmp(t0, t1) == 0, "'%s' rejected but changed the scheme: %s", a, t1);
}
END_TEST

START_TEST(test_set_null)
{
    sq_scheme s = preset_ok("baseline");
    ck_assert_int_eq(sq_scheme_set(&s, NULL, NULL), SQ_ERR_ARG);
    ck_assert_int_eq(sq_scheme_set(NULL, "grad.pipe=2", NULL), SQ_ERR_ARG);
    /* no error buffer: still refused */
    ck_assert_int_eq(sq_scheme_set(&s, "grad.foo=1", NULL), SQ_ERR_SPEC);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Validation                                                               */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *preset, *set1, *set2, *msg;
} bad_schemes[] = {
    {"baseline", "grad.bits=4", NULL, "grad.mode=ring"},
    {"baseline", "grad.inter.bits=8", NULL, "grad.mode=ring"},
    {"qsdp", "grad.mode=ring", NULL, "grad.mode=ring"},
    {"qwd", "weight.bits=16", NULL, "weight.mode=diff"},
    {"qwd", "weight.bits=32", NULL, "weight.mode=diff"},
    {"tlq", "grad.intra.hadamard=32", NULL, "hadamard"},
    {"tlqhs", "grad.inter.bits=16", NULL, "hadamard"},
    {"qw", "weight.group=48", "weight.hadamard=32", "weight.hadamard=32"},
    {"tlqhs", "grad.group=48", NULL, "hadamard"},
    {"qsdp", "weight.levels=deepspeed", NULL, "levels=deepspeed"},
    {"qsdp", "grad.inter.levels=deepspeed", NULL, "grad.inter"},
    {"qw", "weight.bits=1", NULL, "bits=1"},
    {"tlq", "grad.intra.bits=1", NULL, "grad.intra"},
    {"baseline", "grad.ef=1", NULL, "grad.mode=ring"},
    {"qsdp", "grad.intra.ef=1", "grad.mode=ring", "grad.mode=ring"},
    {"zeropp8", "grad.ef=1", "grad.group=128", "grad.dtype=fp16"},
};

START_TEST(test_validate_rejects)
{
    sq_scheme s = preset_ok(bad_schemes[_i].preset);
    set_ok(&s, bad_schemes[_i].set1);
    if (bad_schemes[_i].set2) set_ok(&s, bad_schemes[_i].set2);
    sq_error err = {0};
    int rc = sq_scheme_validate(&s, &err);
    ck_assert_msg(rc == SQ_ERR_SPEC, "%s + %s: validate gave %d", bad_schemes[_i].preset,
                  bad_schemes[_i].set1, rc);
    ck_assert_msg(strstr(err.msg, bad_schemes[_i].msg), "%s + %s: message lacks '%s': %s",
                  bad_schemes[_i].preset, bad_schemes[_i].set1, bad_schemes[_i].msg, err.msg);
}
END_TEST

/* Their near neighbours pass: the rule is what is checked, not the knob. */
START_TEST(test_validate_accepts)
{
    static const struct {
        const char *preset, *set1, *set2;
    } good[] = {
        {"baseline", "grad.bits=16", NULL},          /* bf16 ring */
        {"baseline", "grad.mode=a2a", "grad.bits=4"}, /* quantized a2a */
        {"qwd", "weight.bits=8", NULL},
        {"tlq", "grad.hadamard=32", NULL},
        {"qw", "weight.group=64", "weight.hadamard=32"},
        {"qsdp", "weight.bits=1", NULL},             /* minmax at 1 bit */
        {"zeropp8", "grad.bits=1", NULL},            /* deepspeed levels at 1 bit */
        {"ulq", "grad.bits=32", NULL},               /* unquantized two-level, no transform */
        {"baseline", "weight.hadamard=64", "weight.group=48"}, /* ignored on a raw wire */
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        sq_scheme s = preset_ok(good[i].preset);
        set_ok(&s, good[i].set1);
        if (good[i].set2) set_ok(&s, good[i].set2);
        sq_error err = {0};
        int rc = sq_scheme_validate(&s, &err);
        ck_assert_msg(rc == SQ_OK, "%s + %s: rejected (%d): %s", good[i].preset, good[i].set1, rc,
                      err.msg);
    }
}
END_TEST

/* The compressors as wire kinds: the knobs take them, validation applies
** their codec rules (naming the wire) and the scheme rules alike, and the
** text round-trips. */
START_TEST(test_compressor_kinds)
{
    sq_scheme s = set_changes("tlq", "grad.kind=qsgd", "grad.intra.kind,grad.inter.kind");
    ck_assert_int_eq(s.grad_intra.codec.kind, SQ_KIND_QSGD);
    ck_assert_int_eq(s.grad_inter.codec.kind, SQ_KIND_QSGD);
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_OK);
    char v[64];
    sq_scheme_get(&s, "grad.inter.kind", v, sizeof v);
    ck_assert_str_eq(v, "qsgd");

    /* the sign needs one bit and RTN: the message names the wire */
    set_ok(&s, "grad.intra.kind=sign");
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "grad.intra") && strstr(err.msg, "bits=8"), "%s", err.msg);
    set_ok(&s, "grad.intra.bits=1");
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "round=sr"), "%s", err.msg);
    set_ok(&s, "grad.intra.round=rtn");
    ck_assert_msg(sq_scheme_validate(&s, &err) == SQ_OK, "%s", err.msg);

    /* the text round-trips onto another preset */
    char ta[SQ_SCHEME_STRLEN], tb[SQ_SCHEME_STRLEN], work[SQ_SCHEME_STRLEN];
    set_ok(&s, "weight.kind=fp8e5m2");
    set_ok(&s, "weight.bits=8");
    ck_assert_msg(sq_scheme_validate(&s, &err) == SQ_OK, "%s", err.msg);
    format_ok(&s, ta);
    ck_assert_ptr_nonnull(strstr(ta, "weight.kind=fp8e5m2"));
    ck_assert_ptr_nonnull(strstr(ta, "grad.intra.kind=sign"));
    sq_scheme b = preset_ok("baseline");
    memcpy(work, ta, sizeof work);
    char *save = NULL;
    for (char *item = strtok_r(work, ",", &save); item; item = strtok_r(NULL, ",", &save))
        set_ok(&b, item);
    format_ok(&b, tb);
    ck_assert_str_eq(tb, ta);

    /* FP8 needs eight bits; the ring still takes unquantized wires only */
    s = preset_ok("qw");
    set_ok(&s, "weight.kind=fp8e4m3");
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "weight") && strstr(err.msg, "bits=4"), "%s", err.msg);
    s = preset_ok("baseline");
    set_ok(&s, "grad.kind=qsgd"); /* ignored on the fp32 ring's raw wires */
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_OK);
    set_ok(&s, "grad.bits=4");
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_ptr_nonnull(strstr(err.msg, "grad.mode=ring"));
    set_ok(&s, "grad.mode=a2a");
    ck_assert_msg(sq_scheme_validate(&s, &err) == SQ_OK, "%s", err.msg);

    /* an unknown kind lists the ones there are */
    s = preset_ok("qw");
    ck_assert_int_eq(sq_scheme_set(&s, "weight.kind=fp8", &err), SQ_ERR_SPEC);
    ck_assert_msg(strstr(err.msg, "weight.kind") && strstr(err.msg, "fp8e4m3"), "%s", err.msg);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Canonical text                                                           */
/* ------------------------------------------------------------------------ */

/* Whether the canonical text prints knob k: PowerSGD's knobs only under
** grad.mode=powersgd, each hop's error feedback only when it is on, a
** wire's keep only for a topk or randk wire (which no preset has), so the
** other schemes' texts are those of before. */
static int printed(const sq_scheme *s, size_t k)
{
    const char *key = sq_scheme_knobs[k].key;
    size_t kl = strlen(key);
    char v[64];
    if (!strncmp(key, "grad.powersgd.", 14)) return s->grad_mode == SQ_GRAD_POWERSGD;
    if (!strcmp(key, "grad.intra.ef") || !strcmp(key, "grad.inter.ef")) {
        sq_scheme_get(s, key, v, sizeof v);
        return strcmp(v, "0") != 0;
    }
    if (kl >= 5 && !strcmp(key + kl - 5, ".keep")) {
        char kind[64];
        snprintf(kind, sizeof kind, "%.*skind", (int)(kl - 4), key);
        sq_scheme_get(s, kind, v, sizeof v);
        return !strcmp(v, "topk") || !strcmp(v, "randk");
    }
    return 1;
}

static int nprinted(const sq_scheme *s)
{
    int n = 0;
    for (size_t k = 0; k < sq_scheme_nknobs; k++) n += printed(s, k);
    return n;
}

START_TEST(test_format_lists_every_knob)
{
    for (size_t p = 0; p < 2 * sq_scheme_npresets; p++) {
        sq_scheme s = preset_ok(sq_scheme_presets[p / 2]);
        /* each preset as it is (error feedback off: not printed) and with it on */
        const int ef = p % 2 && s.grad_mode != SQ_GRAD_RING && s.grad_mode != SQ_GRAD_POWERSGD &&
                       s.grad_dtype == SQ_GRAD_FP32;
        if (ef) set_ok(&s, "grad.ef=1");
        char buf[SQ_SCHEME_STRLEN];
        format_ok(&s, buf);
        char *save = NULL, *item = strtok_r(buf, ",", &save);
        size_t k = 0;
        for (; item; item = strtok_r(NULL, ",", &save), k++) {
            while (k < sq_scheme_nknobs && !printed(&s, k)) k++;
            ck_assert_msg(k < sq_scheme_nknobs, "%s: more items than knobs", sq_scheme_presets[p / 2]);
            const char *key = sq_scheme_knobs[k].key;
            size_t kl = strlen(key);
            ck_assert_msg(strncmp(item, key, kl) == 0 && item[kl] == '=',
                          "%s: item %zu is '%s', want key %s", sq_scheme_presets[p / 2], k, item,
                          key);
            char v[128];
            sq_scheme_get(&s, key, v, sizeof v);
            ck_assert_str_eq(item + kl + 1, v);
            ck_assert_msg(strcmp(v, "?") != 0 && v[0], "%s: no value for %s",
                          sq_scheme_presets[p / 2], key);
        }
        while (k < sq_scheme_nknobs && !printed(&s, k)) k++;
        ck_assert_uint_eq(k, sq_scheme_nknobs);
        /* 30 always; PowerSGD's 7; each hop's ef when on; keep on a sparse wire */
        int want = s.grad_mode == SQ_GRAD_POWERSGD ? 37 : 30;
        want += s.grad_intra.ef + s.grad_inter.ef;
        const sq_wire *wires[3] = {&s.weight, &s.grad_intra, &s.grad_inter};
        for (int i = 0; i < 3; i++)
            want += wires[i]->codec.kind == SQ_KIND_TOPK || wires[i]->codec.kind == SQ_KIND_RANDK;
        ck_assert_int_eq(nprinted(&s), want);
    }
    /* 1 + 8 + 1 (weight.recon) + 1 + 9 + 9 (each hop's codec knobs and ef) + 2 + 2
    ** (grad.dtype, fallback) + 7 (grad.powersgd) + 2 (layout) knobs */
    ck_assert_uint_eq(sq_scheme_nknobs, 42);
    ck_assert_str_eq(sq_scheme_knobs[0].key, "weight.mode");
    ck_assert_str_eq(sq_scheme_knobs[sq_scheme_nknobs - 12].key, "grad.mean");
    ck_assert_str_eq(sq_scheme_knobs[sq_scheme_nknobs - 11].key, "grad.dtype");
    ck_assert_str_eq(sq_scheme_knobs[sq_scheme_nknobs - 10].key, "grad.fallback");
    ck_assert_str_eq(sq_scheme_knobs[sq_scheme_nknobs - 9].key, "grad.powersgd.rank");
    ck_assert_str_eq(sq_scheme_knobs[sq_scheme_nknobs - 3].key, "grad.powersgd.cols");
    ck_assert_str_eq(sq_scheme_knobs[sq_scheme_nknobs - 1].key, "layout.bucket");
}
END_TEST

START_TEST(test_format_text)
{
    sq_scheme s = preset_ok("sdp4bit");
    char buf[SQ_SCHEME_STRLEN];
    format_ok(&s, buf);
    ck_assert_str_eq(buf,
                     "weight.mode=diff,weight.bits=4,weight.kind=sym,weight.group=2048,"
                     "weight.round=sr,weight.hadamard=0,weight.levels=sdp4bit,weight.scale=fp32,"
                     "weight.recon=bf16,"
                     "grad.mode=twolevel,grad.intra.bits=8,grad.intra.kind=sym,"
                     "grad.intra.group=128,grad.intra.round=sr,grad.intra.hadamard=32,"
                     "grad.intra.levels=sdp4bit,grad.intra.scale=fp32,grad.inter.bits=4,"
                     "grad.inter.kind=sym,grad.inter.group=128,grad.inter.round=sr,"
                     "grad.inter.hadamard=32,grad.inter.levels=sdp4bit,grad.inter.scale=fp32,"
                     "grad.pipe=1,grad.mean=1,grad.dtype=fp32,grad.fallback=none,"
                     "layout=bucket,layout.bucket=40000000");
    /* truncation: the length it would need, a terminated prefix */
    char small[16];
    int n = sq_scheme_format(&s, small, sizeof small);
    ck_assert_int_eq(n, (int)strlen(buf));
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert(strncmp(small, buf, sizeof small - 1) == 0);
}
END_TEST

START_TEST(test_format_equal_schemes)
{
    char a[SQ_SCHEME_STRLEN], b[SQ_SCHEME_STRLEN];
    /* distinct presets print distinct texts, the same preset the same */
    for (size_t i = 0; i < sq_scheme_npresets; i++)
        for (size_t j = 0; j < sq_scheme_npresets; j++) {
            sq_scheme x = preset_ok(sq_scheme_presets[i]), y = preset_ok(sq_scheme_presets[j]);
            format_ok(&x, a);
            format_ok(&y, b);
            ck_assert_msg((strcmp(a, b) == 0) == (i == j), "%s vs %s: %s / %s",
                          sq_scheme_presets[i], sq_scheme_presets[j], a, b);
        }
    /* tlq + the transform is tlqhs */
    sq_scheme x = preset_ok("tlq"), y = preset_ok("tlqhs");
    set_ok(&x, "grad.hadamard=32");
    format_ok(&x, a);
    format_ok(&y, b);
    ck_assert_str_eq(a, b);
    /* qw + ulq's gradient knobs is zeropp */
    x = preset_ok("qw");
    y = preset_ok("zeropp");
    set_ok(&x, "grad.mode=twolevel");
    set_ok(&x, "grad.bits=4");
    set_ok(&x, "grad.group=128");
    set_ok(&x, "grad.round=sr");
    set_ok(&x, "grad.levels=sdp4bit");
    format_ok(&x, a);
    format_ok(&y, b);
    ck_assert_str_eq(a, b);
}
END_TEST

/* The text of A, applied knob by knob onto B, gives A's text back. */
START_TEST(test_format_roundtrip)
{
    const char *na = sq_scheme_presets[_i / (int)sq_scheme_npresets];
    const char *nb = sq_scheme_presets[_i % (int)sq_scheme_npresets];
    sq_scheme a = preset_ok(na), b = preset_ok(nb);
    /* knobs that the text prints only when they are not at their defaults
    ** (each hop's ef, a sparse wire's keep) are not reset by a text that
    ** leaves them out: start B from their defaults (efsignsgd and topk set
    ** them) */
    b.grad_intra.ef = b.grad_inter.ef = 0;
    b.grad_intra.codec.keep = b.grad_inter.codec.keep = b.weight.codec.keep = 0;
    char ta[SQ_SCHEME_STRLEN], work[SQ_SCHEME_STRLEN], tb[SQ_SCHEME_STRLEN];
    format_ok(&a, ta);
    memcpy(work, ta, sizeof work);
    int items = 0;
    char *save = NULL;
    for (char *item = strtok_r(work, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        sq_error err = {0};
        int rc = sq_scheme_set(&b, item, &err);
        ck_assert_msg(rc == SQ_OK, "%s onto %s: '%s' rejected: %s", na, nb, item, err.msg);
        items++;
    }
    ck_assert_int_eq(items, nprinted(&a));
    format_ok(&b, tb);
    ck_assert_msg(strcmp(ta, tb) == 0, "%s onto %s:\n got %s\nwant %s", na, nb, tb, ta);
    sq_error err = {0};
    ck_assert_msg(sq_scheme_validate(&b, &err) == SQ_OK, "%s onto %s: %s", na, nb, err.msg);
    ck_assert_int_eq(b.weight_mode, a.weight_mode);
    ck_assert_int_eq(b.grad_mode, a.grad_mode);
    ck_assert_int_eq(b.weight.bits, a.weight.bits);
    ck_assert_int_eq(b.grad_intra.bits, a.grad_intra.bits);
    ck_assert_int_eq(b.grad_inter.bits, a.grad_inter.bits);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Error feedback                                                           */
/* ------------------------------------------------------------------------ */

START_TEST(test_ef_knobs)
{
    sq_scheme s = preset_ok("tlqhs");
    ck_assert_int_eq(s.grad_intra.ef, 0);
    ck_assert_int_eq(s.grad_inter.ef, 0);
    char v[16], t0[SQ_SCHEME_STRLEN], t1[SQ_SCHEME_STRLEN];
    format_ok(&s, t0);
    ck_assert_ptr_null(strstr(t0, ".ef="));
    /* one hop, then both; the text names exactly the hops that are on, in knob order */
    set_ok(&s, "grad.inter.ef=1");
    ck_assert_int_eq(s.grad_intra.ef, 0);
    ck_assert_int_eq(s.grad_inter.ef, 1);
    sq_scheme_get(&s, "grad.inter.ef", v, sizeof v);
    ck_assert_str_eq(v, "1");
    sq_scheme_get(&s, "grad.intra.ef", v, sizeof v);
    ck_assert_str_eq(v, "0");
    format_ok(&s, t1);
    ck_assert_ptr_nonnull(strstr(t1, "grad.inter.scale=fp32,grad.inter.ef=1,grad.pipe=1"));
    ck_assert_ptr_null(strstr(t1, "grad.intra.ef"));
    set_ok(&s, "grad.ef=1");
    ck_assert_int_eq(s.grad_intra.ef, 1);
    format_ok(&s, t1);
    ck_assert_msg(strstr(t1, "grad.intra.scale=fp32,grad.intra.ef=1,grad.inter.bits=8") ||
                      strstr(t1, "grad.intra.scale=fp32,grad.intra.ef=1,grad.inter.bits=4"),
                  "%s", t1);
    sq_error err = {0};
    ck_assert_msg(sq_scheme_validate(&s, &err) == SQ_OK, "%s", err.msg);
    /* the codec is untouched, and off again is the preset's text */
    expect_codec_wire(&s.grad_intra, "intra", 8, SQ_KIND_SYM, 128, SQ_ROUND_SR, 32, SQ_LEVELS_SDP4BIT);
    set_ok(&s, "grad.ef=0");
    format_ok(&s, t1);
    ck_assert_str_eq(t0, t1);
    /* the text of a scheme with it on, applied onto a preset, gives it back */
    sq_scheme a = preset_ok("qsdp"), b = preset_ok("baseline");
    set_ok(&a, "grad.intra.ef=1");
    format_ok(&a, t0);
    char *save = NULL;
    for (char *item = strtok_r(t0, ",", &save); item; item = strtok_r(NULL, ",", &save))
        set_ok(&b, item);
    format_ok(&a, t0);
    format_ok(&b, t1);
    ck_assert_str_eq(t0, t1);
    ck_assert_int_eq(b.grad_intra.ef, 1);
    ck_assert_int_eq(b.grad_inter.ef, 0);
}
END_TEST

START_TEST(test_ef_validate)
{
    /* unquantized wires keep the residual of their cast: allowed */
    static const struct {
        const char *preset, *set1, *set2;
    } good[] = {
        {"qsdp", "grad.ef=1", NULL},
        {"ulq", "grad.ef=1", "grad.pipe=2"},
        {"tlqhs", "grad.intra.ef=1", NULL},
        {"baseline", "grad.mode=a2a", "grad.ef=1"},          /* fp32: the residual stays 0 */
        {"baseline", "grad.mode=twolevel", "grad.ef=1"},      /* bf16 both hops */
        {"zeropp8", "grad.dtype=fp32", "grad.ef=1"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        sq_scheme s = preset_ok(good[i].preset);
        if (!strcmp(good[i].preset, "baseline") && strstr(good[i].set1, "twolevel"))
            set_ok(&s, "grad.bits=16");
        set_ok(&s, good[i].set1);
        if (good[i].set2) set_ok(&s, good[i].set2);
        sq_error err = {0};
        ck_assert_msg(sq_scheme_validate(&s, &err) == SQ_OK, "%s + %s: %s", good[i].preset,
                      good[i].set1, err.msg);
    }
    /* the weight wire has no such knob, and a caller's struct is checked too */
    sq_scheme s = preset_ok("qw");
    s.weight.ef = 1;
    sq_error err = {0};
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_ptr_nonnull(strstr(err.msg, "weight"));
    s = preset_ok("qsdp");
    s.grad_inter.ef = 7;
    ck_assert_int_eq(sq_scheme_validate(&s, &err), SQ_ERR_SPEC);
    ck_assert_ptr_nonnull(strstr(err.msg, "grad.inter.ef=7"));
}
END_TEST

/* qgZ's per-tensor fallback to the fp32 ring drops error feedback with the
** codec; a tensor that keeps the all-to-all keeps it. */
START_TEST(test_ef_per_tensor)
{
    sq_scheme s = preset_ok("zeropp8"), one;
    set_ok(&s, "grad.dtype=fp32");
    set_ok(&s, "grad.ef=1");
    sq_topo t = {2, 4};
    sq_error err = {0};
    const uint64_t vec[1] = {4096}, mat[2] = {64, 64};
    ck_assert_int_eq(sq_scheme_for_tensor(&s, &t, vec, 1, &one, &err), SQ_OK);
    ck_assert_int_eq(one.grad_mode, SQ_GRAD_RING);
    ck_assert_int_eq(one.grad_intra.ef + one.grad_inter.ef, 0);
    ck_assert_msg(sq_scheme_validate(&one, &err) == SQ_OK, "%s", err.msg);
    ck_assert_int_eq(sq_scheme_for_tensor(&s, &t, mat, 2, &one, &err), SQ_OK);
    ck_assert_int_eq(one.grad_mode, SQ_GRAD_TWOLEVEL);
    ck_assert_int_eq(one.grad_intra.ef, 1);
    ck_assert_int_eq(one.grad_inter.ef, 1);
    ck_assert_msg(sq_scheme_validate(&one, &err) == SQ_OK, "%s", err.msg);
}
END_TEST

START_TEST(test_get)
{
    sq_scheme s = preset_ok("zeropp8");
    char v[64];
    sq_scheme_get(&s, "weight.bits", v, sizeof v);
    ck_assert_str_eq(v, "8");
    sq_scheme_get(&s, "weight.group", v, sizeof v);
    ck_assert_str_eq(v, "qwz");
    sq_scheme_get(&s, "grad.intra.group", v, sizeof v);
    ck_assert_str_eq(v, "qgz");
    sq_scheme_get(&s, "grad.dtype", v, sizeof v);
    ck_assert_str_eq(v, "fp16");
    sq_scheme_get(&s, "grad.fallback", v, sizeof v);
    ck_assert_str_eq(v, "qgz");
    sq_scheme_get(&s, "weight.levels", v, sizeof v);
    ck_assert_str_eq(v, "deepspeed");
    sq_scheme_get(&s, "grad.mode", v, sizeof v);
    ck_assert_str_eq(v, "twolevel");
    sq_scheme_get(&s, "grad.inter.round", v, sizeof v);
    ck_assert_str_eq(v, "rtn");
    s = preset_ok("qsdp");
    sq_scheme_get(&s, "grad.intra.kind", v, sizeof v);
    ck_assert_str_eq(v, "minmax");
    sq_scheme_get(&s, "grad.mode", v, sizeof v);
    ck_assert_str_eq(v, "a2a");
    s = preset_ok("baseline");
    sq_scheme_get(&s, "grad.mode", v, sizeof v);
    ck_assert_str_eq(v, "ring");
    sq_scheme_get(&s, "grad.inter.bits", v, sizeof v);
    ck_assert_str_eq(v, "32");
    sq_scheme_get(&s, "weight.mode", v, sizeof v);
    ck_assert_str_eq(v, "direct");
    /* every knob has a description */
    for (size_t k = 0; k < sq_scheme_nknobs; k++) {
        ck_assert_msg(sq_scheme_knobs[k].values && sq_scheme_knobs[k].values[0], "%zu", k);
        ck_assert_msg(sq_scheme_knobs[k].help && sq_scheme_knobs[k].help[0], "%zu", k);
    }
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Topologies                                                               */
/* ------------------------------------------------------------------------ */

START_TEST(test_topo_ok)
{
    static const struct {
        const char *text;
        int k, g;
    } good[] = {{"16x4", 16, 4}, {"1x1", 1, 1}, {"2x4", 2, 4},     {"1x4", 1, 4},
                {"4x1", 4, 1},   {"64x64", 64, 64}, {"1x4096", 1, 4096}, {"4096x1", 4096, 1}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        sq_topo t = {-1, -1};
        sq_error err = {0};
        int rc = sq_topo_parse(good[i].text, &t, &err);
        ck_assert_msg(rc == SQ_OK, "'%s' rejected (%d): %s", good[i].text, rc, err.msg);
        ck_assert_int_eq(t.nodes, good[i].k);
        ck_assert_int_eq(t.per_node, good[i].g);
        ck_assert_int_eq(sq_topo_workers(&t), good[i].k * good[i].g);
    }
}
END_TEST

static const char *const bad_topos[] = {"",     "4",    "x4",   "4x",     "0x4",  "4x0",
                                        "4x4x4", "-1x4", "4096x2", "4 x4", "4x 4", "4x4 ",
                                        "65x64", "4097x1", "1x4097", "4X4",  "4*4",  "ax4",
                                        "99999999999999999999x1", "4x+4"};

START_TEST(test_topo_rejects)
{
    const char *text = bad_topos[_i];
    sq_topo t = {7, 9};
    sq_error err = {0};
    int rc = sq_topo_parse(text, &t, &err);
    ck_assert_msg(rc != SQ_OK, "'%s' accepted as %dx%d", text, t.nodes, t.per_node);
    ck_assert_msg(rc == SQ_ERR_ARG || rc == SQ_ERR_SPEC, "'%s': status %d", text, rc);
    ck_assert_msg(err.msg[0] != '\0', "'%s': no message", text);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", text);
    ck_assert_msg(strstr(err.msg, quoted), "'%s': message does not name it: %s", text, err.msg);
    ck_assert_int_eq(t.nodes, 7);
    ck_assert_int_eq(t.per_node, 9);
}
END_TEST

START_TEST(test_topo_limit_message)
{
    sq_topo t;
    sq_error err = {0};
    ck_assert_int_ne(sq_topo_parse("4096x2", &t, &err), SQ_OK);
    ck_assert_msg(strstr(err.msg, "4096"), "%s", err.msg);
    ck_assert_int_ne(sq_topo_parse(NULL, &t, &err), SQ_OK);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scheme");
    TCase *tp = tcase_create("presets");
    tcase_add_test(tp, test_preset_list);
    tcase_add_test(tp, test_presets_validate);
    tcase_add_test(tp, test_preset_baseline);
    tcase_add_test(tp, test_preset_qw_qwd);
    tcase_add_test(tp, test_preset_ulq_tlq);
    tcase_add_test(tp, test_preset_combined);
    tcase_add_test(tp, test_preset_unknown);
    suite_add_tcase(s, tp);

    TCase *tk = tcase_create("knobs");
    tcase_add_test(tk, test_set_one_hop);
    tcase_add_test(tk, test_set_both_hops);
    tcase_add_test(tk, test_set_scheme_knobs);
    tcase_add_test(tk, test_set_raw);
    tcase_add_loop_test(tk, test_set_rejects, 0, (int)(sizeof bad_sets / sizeof bad_sets[0]));
    tcase_add_test(tk, test_set_null);
    suite_add_tcase(s, tk);

    TCase *tv = tcase_create("validate");
    tcase_add_loop_test(tv, test_validate_rejects, 0,
                        (int)(sizeof bad_schemes / sizeof bad_schemes[0]));
    tcase_add_test(tv, test_validate_accepts);
    tcase_add_test(tv, test_compressor_kinds);
    suite_add_tcase(s, tv);

    TCase *tf = tcase_create("format");
    tcase_add_test(tf, test_format_lists_every_knob);
    tcase_add_test(tf, test_format_text);
    tcase_add_test(tf, test_format_equal_schemes);
    tcase_add_loop_test(tf, test_format_roundtrip, 0,
                        (int)(sq_scheme_npresets * sq_scheme_npresets));
    tcase_add_test(tf, test_get);
    TCase *te = tcase_create("ef");
    tcase_add_test(te, test_ef_knobs);
    tcase_add_test(te, test_ef_validate);
    tcase_add_test(te, test_ef_per_tensor);
    suite_add_tcase(s, te);
    suite_add_tcase(s, tf);

    TCase *tt = tcase_create("topology");
    tcase_add_test(tt, test_topo_ok);
    tcase_add_loop_test(tt, test_topo_rejects, 0, (int)(sizeof bad_topos / sizeof bad_topos[0]));
    tcase_add_test(tt, test_topo_limit_message);
    suite_add_tcase(s, tt);
    return sqt_run(s);
}
