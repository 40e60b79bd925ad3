/*
** check_golden.c -- known answers: the exact bytes of the codec for fixed
** inputs, codecs and random keys, from tests/golden/golden.txt.
**
** How the expected bytes were obtained independently of the code under
** test: tests/golden/make_golden.py reimplements the conventions in pure
** Python from their written definition (fp32 emulated by rounding every
** operation to float32, Philox4x32-10 written from the paper, round half to
** even, the MSB-first bit stream, the Hadamard butterfly). It shares no code
** with the C library, and its Philox is validated against the known-answer
** vectors published with Random123 before anything is written.
**
** The file is found through $GOLDEN_DIR (set by `make check`), else
** tests/golden relative to the working directory, else
** $srcdir/tests/golden. Regenerate with
**     python3 tests/golden/make_golden.py > tests/golden/golden.txt
**
** Format (one record per line, hex without separators, floats as their
** little-endian float32 bytes):
**     input NAME n N recipe lcg SEED E   (or: recipe ties)   then   x HEX
**     uniform SEED STEP WORKER SITE I BITS
**     config SPEC input NAME n N seed SEED step S worker W site T
**     codes HEX / scales HEX / offsets HEX|- / decoded HEX / end
*/
#include "shardq/codec.h"
#include "check_util.h"

#include <errno.h>

#define MAX_INPUTS 8
#define MAX_UNIFORMS 256
#define MAX_CONFIGS 64

typedef struct golden_input {
    char name[32];
    uint64_t n, lcg;
    int ties; /* the half-integer recipe instead of the LCG */
    int exp;
    char *x; /* hex */
} golden_input;

typedef struct golden_uniform {
    sq_rng_key key;
    uint64_t i;
    uint32_t bits;
} golden_uniform;

typedef struct golden_config {
    char spec[SQ_CODEC_STRLEN], input[32];
    uint64_t n;
    sq_rng_key key;
    char *codes, *scales, *offsets, *decoded; /* hex; offsets "-" for sym */
    int line;
} golden_config;

static golden_input inputs[MAX_INPUTS];
static golden_uniform uniforms[MAX_UNIFORMS];
static golden_config configs[MAX_CONFIGS];
static int n_inputs, n_uniforms, n_configs;
static char load_error[1400]; /* empty when the file loaded */
static char golden_path[4096];

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */

static FILE *open_golden(void)
{
    const char *dir = getenv("GOLDEN_DIR"), *srcdir = getenv("srcdir");
    char tried[1024] = "";
    size_t o = 0;
    const char *cands[3];
    char buf2[4096];
    int nc = 0;
    if (dir && *dir) cands[nc++] = dir;
    cands[nc++] = "tests/golden";
    if (srcdir && *srcdir) {
        snprintf(buf2, sizeof buf2, "%s/tests/golden", srcdir);
        cands[nc++] = buf2;
    }
    for (int i = 0; i < nc; i++) {
        snprintf(golden_path, sizeof golden_path, "%s/golden.txt", cands[i]);
        FILE *f = fopen(golden_path, "r");
        if (f) return f;
        o += (size_t)snprintf(tried + o, sizeof tried > o ? sizeof tried - o : 0, "%s%s (%s)",
                              i ? ", " : "", golden_path, strerror(errno));
        if (o >= sizeof tried) o = sizeof tried - 1;
    }
    snprintf(load_error, sizeof load_error,
             "cannot open golden.txt; tried %s. Set GOLDEN_DIR to the tests/golden directory.",
             tried);
    return NULL;
}

/* Returns the value after "prefix " if the line starts with it. */
static const char *field(const char *line, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(line, prefix, n) == 0 && line[n] == ' ' ? line + n + 1 : NULL;
}

static char *dup_str(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

static int load_golden(void)
{
    FILE *f = open_golden();
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    golden_config *cur = NULL;
    golden_input *inp = NULL;
#define BAD(...)                                                                       \
    do {                                                                               \
        int k_ = snprintf(load_error, sizeof load_error, "%s:%d: ", golden_path, lineno); \
        snprintf(load_error + k_, sizeof load_error - (size_t)k_, __VA_ARGS__);        \
        goto fail;                                                                     \
    } while (0)
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0 || line[0] == '#') continue;
        const char *v;
        if ((v = field(line, "input"))) {
            if (n_inputs == MAX_INPUTS) BAD("too many inputs");
            inp = &inputs[n_inputs++];
            unsigned long long n, lcg = 0;
            char recipe[16];
            if (sscanf(v, "%31s n %llu recipe %15s", inp->name, &n, recipe) != 3) BAD("bad input line");
            if (strcmp(recipe, "ties") == 0) {
                inp->ties = 1;
            } else if (strcmp(recipe, "lcg") != 0 ||
                       sscanf(v, "%*s n %*u recipe lcg %llx %d", &lcg, &inp->exp) != 2) {
                BAD("bad input recipe");
            }
            inp->n = n;
            inp->lcg = lcg;
        } else if ((v = field(line, "x"))) {
            if (!inp || inp->x) BAD("x without input");
            inp->x = dup_str(v);
        } else if ((v = field(line, "uniform"))) {
            if (n_uniforms == MAX_UNIFORMS) BAD("too many uniform lines");
            golden_uniform *u = &uniforms[n_uniforms++];
            unsigned long long seed, i;
            unsigned step, worker, site, bits;
            if (sscanf(v, "%llx %u %u %u %llu %x", &seed, &step, &worker, &site, &i, &bits) != 6)
                BAD("bad uniform line");
            u->key = (sq_rng_key){seed, step, worker, site};
            u->i = i;
            u->bits = bits;
        } else if ((v = field(line, "config"))) {
            if (n_configs == MAX_CONFIGS) BAD("too many configs");
            cur = &configs[n_configs++];
            memset(cur, 0, sizeof *cur);
            cur->line = lineno;
            unsigned long long n, seed;
            unsigned step, worker, site;
            if (sscanf(v, "%127s input %31s n %llu seed %llx step %u worker %u site %u", cur->spec,
                       cur->input, &n, &seed, &step, &worker, &site) != 7)
                BAD("bad config line");
            cur->n = n;
            cur->key = (sq_rng_key){seed, step, worker, site};
        } else if ((v = field(line, "codes"))) {
            if (!cur || cur->codes) BAD("codes outside a config");
            cur->codes = dup_str(v);
        } else if ((v = field(line, "scales"))) {
            if (!cur || cur->scales) BAD("scales outside a config");
            cur->scales = dup_str(v);
        } else if ((v = field(line, "offsets"))) {
            if (!cur || cur->offsets) BAD("offsets outside a config");
            cur->offsets = dup_str(v);
        } else if ((v = field(line, "decoded"))) {
            if (!cur || cur->decoded) BAD("decoded outside a config");
            cur->decoded = dup_str(v);
        } else if (strcmp(line, "end") == 0) {
            if (!cur || !cur->codes || !cur->scales || !cur->offsets || !cur->decoded)
                BAD("incomplete config record");
            cur = NULL;
        } else {
            BAD("unrecognised line '%.40s'", line);
        }
    }
    if (cur) BAD("last config has no 'end' (truncated file?)");
    free(line);
    fclose(f);
    return 0;
fail:
    free(line);
    fclose(f);
    return -1;
#undef BAD
}

static const golden_input *find_input(const char *name)
{
    for (int i = 0; i < n_inputs; i++)
        if (strcmp(inputs[i].name, name) == 0) return &inputs[i];
    return NULL;
}

static void generate(const golden_input *in, float *x)
{
    if (in->ties) sqt_gen_ties(in->n, x);
    else sqt_gen_input(in->lcg, in->n, in->exp, x);
}

/* Hex to bytes, failing the test on a malformed string. */
static uint8_t *unhex(const char *s, size_t *len, const char *what)
{
    uint8_t *b = sqt_hex_decode(s, len);
    ck_assert_msg(b != NULL, "%s: malformed hex in %s", what, golden_path);
    return b;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

/* The file loaded and holds what this suite promises to check: the inputs,
** the uniforms and at least the eight required families (sym and min-max,
** RTN and SR, without and with a Hadamard transform of 32). */
START_TEST(test_file)
{
    ck_assert_msg(load_error[0] == '\0', "%s", load_error);
    ck_assert_int_ge(n_inputs, 1);
    ck_assert_int_ge(n_uniforms, 10);
    ck_assert_int_ge(n_configs, 8);
    int seen[2][2][2] = {{{0}}};
    for (int i = 0; i < n_configs; i++) {
        sq_codec c;
        char err[128];
        ck_assert_msg(sq_codec_parse(configs[i].spec, &c, err, sizeof err) == SQ_OK,
                      "line %d: %s", configs[i].line, err);
        if (c.hadamard == 0 || c.hadamard == 32) seen[c.kind][c.round][c.hadamard != 0] = 1;
    }
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 2; r++)
            for (int h = 0; h < 2; h++)
                ck_assert_msg(seen[k][r][h], "no golden config for kind %d round %d hadamard %s", k, r,
                              h ? "32" : "0");
}
END_TEST

/* The C input generator reproduces the Python one bit for bit (otherwise
** every config below would fail for the wrong reason). */
START_TEST(test_inputs)
{
    ck_assert_msg(load_error[0] == '\0', "%s", load_error);
    for (int i = 0; i < n_inputs; i++) {
        const golden_input *in = &inputs[i];
        ck_assert_msg(in->x != NULL, "input %s has no x line", in->name);
        size_t len;
        uint8_t *want = unhex(in->x, &len, in->name);
        ck_assert_uint_eq(len, in->n * 4);
        float *x = malloc(in->n * sizeof(float));
        ck_assert_ptr_nonnull(x);
        generate(in, x);
        char what[128];
        snprintf(what, sizeof what, "input %.31s (sqt_gen_input vs make_golden.py)", in->name);
        SQT_ASSERT_BYTES(x, want, len, what);
        free(x);
        free(want);
    }
}
END_TEST

START_TEST(test_uniforms)
{
    ck_assert_msg(load_error[0] == '\0', "%s", load_error);
    for (int i = 0; i < n_uniforms; i++) {
        const golden_uniform *u = &uniforms[i];
        float got = sq_uniform(&u->key, u->i), got_n;
        sq_uniform_n(&u->key, u->i, 1, &got_n);
        ck_assert_msg(sqt_bits(got) == u->bits && sqt_bits(got_n) == u->bits,
                      "uniform seed %016llx step %u worker %u site %u i %llu: got 0x%08x / 0x%08x, "
                      "want 0x%08x",
                      (unsigned long long)u->key.seed, u->key.step, u->key.worker, u->key.site,
                      (unsigned long long)u->i, sqt_bits(got), sqt_bits(got_n), u->bits);
    }
}
END_TEST

/* One config: quantize (with 1 and 3 threads), compare codes, scales and
** offsets; dequantize (and dequant_sum of the single chunk) and compare the
** decoded floats; and the spec string is canonical. */
START_TEST(test_config)
{
    ck_assert_msg(load_error[0] == '\0', "%s", load_error);
    const golden_config *g = &configs[_i];
    sq_codec c;
    char err[128], canon[SQ_CODEC_STRLEN];
    ck_assert_msg(sq_codec_parse(g->spec, &c, err, sizeof err) == SQ_OK, "%s", err);
    sq_codec_format(&c, canon, sizeof canon);
    ck_assert_str_eq(canon, g->spec);
    const golden_input *in = find_input(g->input);
    ck_assert_msg(in != NULL, "line %d: unknown input %s", g->line, g->input);
    ck_assert_uint_eq(in->n, g->n);

    size_t ncodes, nscales, noffsets, ndec;
    uint8_t *codes = unhex(g->codes, &ncodes, "codes"), *scales = unhex(g->scales, &nscales, "scales");
    uint8_t *offsets = unhex(g->offsets, &noffsets, "offsets"), *dec = unhex(g->decoded, &ndec, "decoded");
    ck_assert_uint_eq(ncodes, sq_codec_code_bytes(&c, g->n));
    ck_assert_uint_eq(nscales, sq_codec_scale_bytes(&c, g->n));
    ck_assert_uint_eq(noffsets, sq_codec_offset_bytes(&c, g->n));
    ck_assert_uint_eq(ndec, g->n * 4);

    float *x = malloc(g->n * sizeof(float)), *out = malloc(g->n * sizeof(float));
    ck_assert(x && out);
    generate(in, x);
    static const int threads[] = {1, 3};
    for (int t = 0; t < 2; t++) {
        sq_set_threads(threads[t]);
        sq_qbuf q;
        ck_assert_int_eq(sq_qbuf_alloc(&c, g->n, &q), SQ_OK);
        ck_assert_int_eq(sq_quantize(&c, x, g->n, &g->key, &q), SQ_OK);
        char what[SQ_CODEC_STRLEN + 64];
        snprintf(what, sizeof what, "%s (line %d, %d threads): codes", g->spec, g->line, threads[t]);
        SQT_ASSERT_BYTES(q.codes, codes, ncodes, what);
        snprintf(what, sizeof what, "%s (line %d, %d threads): scales", g->spec, g->line, threads[t]);
        SQT_ASSERT_BYTES(q.scales, scales, nscales, what);
        if (noffsets) {
            snprintf(what, sizeof what, "%s (line %d): offsets", g->spec, g->line);
            SQT_ASSERT_BYTES(q.offsets, offsets, noffsets, what);
        }
        ck_assert_int_eq(sq_dequantize(&c, &q, g->n, out), SQ_OK);
        snprintf(what, sizeof what, "%s (line %d): decoded", g->spec, g->line);
        SQT_ASSERT_BYTES(out, dec, ndec, what);
        ck_assert_int_eq(sq_dequant_sum(&c, &q, 1, g->n, out), SQ_OK);
        snprintf(what, sizeof what, "%s (line %d): dequant_sum of one chunk", g->spec, g->line);
        SQT_ASSERT_BYTES(out, dec, ndec, what);
        sq_qbuf_free(&q);
    }
    sq_set_threads(0);
    free(x);
    free(out);
    free(codes);
    free(scales);
    free(offsets);
    free(dec);
}
END_TEST

int main(void)
{
    if (load_golden() != 0) fprintf(stderr, "check_golden: %s\n", load_error);
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("golden");
    tcase_add_test(tc, test_file);
    tcase_add_test(tc, test_inputs);
    tcase_add_test(tc, test_uniforms);
    if (n_configs > 0 && load_error[0] == '\0')
        tcase_add_loop_test(tc, test_config, 0, n_configs);
    suite_add_tcase(s, tc);
    return sqt_run(s);
}
