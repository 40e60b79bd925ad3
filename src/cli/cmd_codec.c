/*
** cmd_codec.c -- `shardq codec encode|decode|stats|info`: the codec of the
** C reference applied to files.
**
** encode writes, and decode reads, the shardq.codec/1 container of the
** trace module (trace/container.h): a safetensors file of the codes, scales
** and offsets with everything decode needs in its metadata.
*/
#include "cli.h"
#include "progress.h"
#include "shardq/codec.h"
#include "shardq/metrics.h"
#include "shardq/trace.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_INFO_N ((uint64_t)1 << 20)
#define MAX_INFO_N ((uint64_t)1 << 60)

#define codec_usage cli_help("shardq-codec")
#define encode_usage cli_help("shardq-codec-encode")
#define decode_usage cli_help("shardq-codec-decode")
#define stats_usage cli_help("shardq-codec-stats")
#define info_usage cli_help("shardq-codec-info")

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

enum {
    O_CODEC = 1u << 0,
    O_SEED = 1u << 1,
    O_STEP = 1u << 2,
    O_WORKER = 1u << 3,
    O_SITE = 1u << 4,
    O_RAW = 1u << 5,
    O_JSON = 1u << 6,
    O_N = 1u << 7,
};
#define O_KEY (O_SEED | O_STEP | O_WORKER | O_SITE)

static const struct {
    const char *name;
    int has_arg;
    unsigned flag;
} all_options[] = {
    {"codec", required_argument, O_CODEC}, {"seed", required_argument, O_SEED},
    {"step", required_argument, O_STEP},   {"worker", required_argument, O_WORKER},
    {"site", required_argument, O_SITE},   {"raw", no_argument, O_RAW},
    {"json", no_argument, O_JSON},         {"n", required_argument, O_N},
};
#define NALL (sizeof all_options / sizeof all_options[0])

typedef struct opts {
    sq_codec codec;
    uint64_t seed, step, worker, site, n;
    int raw, json;
    char **pos; /* positional arguments */
    int npos;
} opts;

static const char *const site_names[] = {"weight", "grad-intra", "grad-inter", "grad-single"};

static int parse_site(const char *cmd, const char *text, uint64_t *out)
{
    for (size_t i = 0; i < sizeof site_names / sizeof *site_names; i++)
        if (strcmp(text, site_names[i]) == 0) {
            *out = i;
            return 0;
        }
    if (text[0] >= '0' && text[0] <= '9') return cli_parse_u64(cmd, "--site", text, 255, out);
    const char *s = cli_suggest(text, site_names, sizeof site_names / sizeof *site_names);
    fprintf(stderr,
            "shardq %s: --site: unknown site '%s'%s%s%s (weight, grad-intra, grad-inter, "
            "grad-single or 0..255)\n",
            cmd, text, s ? ", did you mean '" : "", s ? s : "", s ? "'?" : "");
    return -1;
}

/* Parses argv (argv[0] is the subcommand) with the options in `allowed`.
** Returns -1 to go on, or the exit status when done (help, usage error). */
static int parse_opts(const char *cmd, int argc, char **argv, unsigned allowed, const char *usage,
                      int npos, const char *pos_desc, opts *o)
{
    struct option longopts[NALL + 2];
    const char *names[NALL + 2];
    size_t k = 0;
    for (size_t i = 0; i < NALL; i++)
        if (allowed & all_options[i].flag) {
            longopts[k] = (struct option){all_options[i].name, all_options[i].has_arg, NULL,
                                          (int)all_options[i].flag};
            names[k++] = all_options[i].name;
        }
    longopts[k] = (struct option){"help", no_argument, NULL, 'h'};
    names[k++] = "help";
    longopts[k] = (struct option){NULL, 0, NULL, 0};
    names[k] = NULL;

    memset(o, 0, sizeof *o);
    o->codec = sq_codec_default();
    o->n = DEFAULT_INFO_N;
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'h': fputs(usage, stdout); return CLI_OK;
        case ':':
        case '?': return cli_option_error(cmd, ch, argv, names);
        case O_CODEC: {
            char err[256];
            if (sq_codec_parse(optarg, &o->codec, err, sizeof err) != SQ_OK) {
                fprintf(stderr, "shardq %s: --codec: %s\n", cmd, err);
                return CLI_USAGE;
            }
            break;
        }
        case O_SEED:
            if (cli_parse_u64(cmd, "--seed", optarg, UINT64_MAX, &o->seed)) return CLI_USAGE;
            break;
        case O_STEP:
            if (cli_parse_u64(cmd, "--step", optarg, UINT32_MAX, &o->step)) return CLI_USAGE;
            break;
        case O_WORKER:
            if (cli_parse_u64(cmd, "--worker", optarg, (1u << 24) - 1, &o->worker))
                return CLI_USAGE;
            break;
        case O_SITE:
            if (parse_site(cmd, optarg, &o->site)) return CLI_USAGE;
            break;
        case O_N:
            if (cli_parse_u64(cmd, "--n", optarg, MAX_INFO_N, &o->n)) return CLI_USAGE;
            break;
        case O_RAW: o->raw = 1; break;
        case O_JSON: o->json = 1; break;
        default: return CLI_USAGE;
        }
    }
    o->pos = argv + optind;
    o->npos = argc - optind;
    if (cli_check_positional(cmd, o->pos, o->npos, npos, npos, pos_desc)) return CLI_USAGE;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Shared pieces                                                            */
/* ------------------------------------------------------------------------ */

/* "-" is standard input or output. */
static const char *io_path(const char *p, int output)
{
    if (strcmp(p, "-") != 0) return p;
    return output ? "/dev/stdout" : "/dev/stdin";
}

/* Reads IN and refuses non-finite values: CLI_OK, or CLI_RUNTIME (said why). */
static int load_input(const char *cmd, const opts *o, const char *path, sq_npy *a)
{
    sq_error err = {0};
    int rc = o->raw ? sq_npy_read_raw(path, a, &err) : sq_npy_read(path, a, &err);
    if (rc) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        return CLI_RUNTIME;
    }
    size_t bad = sq_find_nonfinite(a->data, (size_t)a->n);
    if (bad < a->n) {
        float v = a->data[bad];
        fprintf(stderr,
                "shardq %s: %s: element %zu is %s%s (non-finite input is not quantized)\n", cmd,
                path, bad, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
                a->dtype == SQ_NPY_F8 && !isnan(v) ? " as float32" : "");
        sq_npy_free(a);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

static int quantize(const char *cmd, const char *path, const opts *o, const sq_npy *a,
                    sq_qbuf *q)
{
    memset(q, 0, sizeof *q);
    sq_rng_key key = {o->seed, (uint32_t)o->step, (uint32_t)o->worker, (uint32_t)o->site};
    int st = sq_qbuf_alloc(&o->codec, a->n, q);
    if (st == SQ_OK) st = sq_quantize(&o->codec, a->data, a->n, &key, q);
    if (st != SQ_OK) {
        fprintf(stderr, "shardq %s: %s: cannot quantize: %s\n", cmd, path, sq_strerror(st));
        sq_qbuf_free(q);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* Reads IN (refusing non-finite values) and quantizes it under the options;
** on failure nothing is left to free. */
static int load_and_quantize(const char *cmd, const opts *o, const char *path, sq_npy *a,
                             sq_qbuf *q)
{
    if (load_input(cmd, o, path, a)) return CLI_RUNTIME;
    if (quantize(cmd, path, o, a, q)) {
        sq_npy_free(a);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* encode                                                                   */
/* ------------------------------------------------------------------------ */

static int codec_encode(int argc, char **argv)
{
    const char *cmd = "codec encode";
    opts o;
    int rc = parse_opts(cmd, argc, argv, O_CODEC | O_KEY | O_RAW, encode_usage, 2,
                        "IN.npy OUT.safetensors", &o);
    if (rc >= 0) return rc;
    const char *in = io_path(o.pos[0], 0), *out = io_path(o.pos[1], 1);

    sq_npy a;
    sq_container ct = {.codec = o.codec};
    if (load_and_quantize(cmd, &o, in, &a, &ct.q)) return CLI_RUNTIME;
    ct.n = a.n;
    ct.ndim = a.ndim;
    memcpy(ct.shape, a.shape, sizeof ct.shape);
    ct.key = (sq_rng_key){o.seed, (uint32_t)o.step, (uint32_t)o.worker, (uint32_t)o.site};
    sq_npy_free(&a);
    sq_error err = {0};
    rc = sq_container_write(out, &ct, &err);
    sq_qbuf_free(&ct.q);
    if (rc) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* decode                                                                   */
/* ------------------------------------------------------------------------ */

static int codec_decode(int argc, char **argv)
{
    const char *cmd = "codec decode";
    opts o;
    int rc = parse_opts(cmd, argc, argv, 0, decode_usage, 2, "IN.safetensors OUT.npy", &o);
    if (rc >= 0) return rc;
    const char *in = io_path(o.pos[0], 0), *out = io_path(o.pos[1], 1);

    sq_error err = {0};
    sq_container ct;
    if (sq_container_read(in, &ct, &err)) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        return CLI_RUNTIME;
    }
    rc = CLI_RUNTIME;
    float *x = NULL;
    if (!(x = malloc(ct.n ? (size_t)ct.n * sizeof(float) : 1))) {
        fprintf(stderr, "shardq %s: %s: out of memory for n=%llu\n", cmd, in,
                (unsigned long long)ct.n);
        goto done;
    }
    int st = sq_dequantize(&ct.codec, &ct.q, ct.n, x);
    if (st != SQ_OK) {
        fprintf(stderr, "shardq %s: %s: cannot dequantize: %s\n", cmd, in, sq_strerror(st));
        goto done;
    }
    if (sq_npy_write_f32(out, x, ct.shape, ct.ndim, &err)) {
        fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
        goto done;
    }
    rc = CLI_OK;
done:
    sq_container_free(&ct);
    free(x);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* stats                                                                    */
/* ------------------------------------------------------------------------ */

/* The progress bar of the round trip's statistics, started at its first
** report, when the number of blocks is known. */
static void stats_progress(void *ctx, uint64_t done, uint64_t total)
{
    sq_progress **bar = ctx;
    if (!*bar) *bar = sq_progress_start("stats", (size_t)total);
    sq_progress_update(*bar, (size_t)done);
}

static int codec_stats(int argc, char **argv)
{
    const char *cmd = "codec stats";
    opts o;
    int rc = parse_opts(cmd, argc, argv, O_CODEC | O_KEY | O_RAW | O_JSON, stats_usage, 1,
                        "IN.npy", &o);
    if (rc >= 0) return rc;
    const char *in = io_path(o.pos[0], 0);
    const sq_codec *c = &o.codec;

    sq_npy a;
    sq_qbuf q;
    if (load_and_quantize(cmd, &o, in, &a, &q)) return CLI_RUNTIME;
    uint64_t n = a.n;
    float *y = malloc(n ? (size_t)n * sizeof(float) : 1);
    if (!y) {
        fprintf(stderr, "shardq %s: out of memory for n=%llu\n", cmd, (unsigned long long)n);
        sq_qbuf_free(&q);
        sq_npy_free(&a);
        return CLI_RUNTIME;
    }
    int st = sq_dequantize(c, &q, n, y);
    sq_qbuf_free(&q);
    if (st != SQ_OK) {
        fprintf(stderr, "shardq %s: %s: cannot dequantize: %s\n", cmd, in, sq_strerror(st));
        free(y);
        sq_npy_free(&a);
        return CLI_RUNTIME;
    }

    sq_roundtrip rt;
    sq_progress *bar = NULL;
    sq_roundtrip_stats(a.data, y, n, stats_progress, &bar, &rt);
    sq_progress_finish(bar);
    free(y);
    char shape[SQ_NPY_MAXDIM * 24 + 8];
    sq_npy_shape_str(a.shape, a.ndim, shape, sizeof shape);
    const char *dtype = sq_npy_dtype_name(a.dtype);
    sq_npy_free(&a);

    sq_rng_key key = {o.seed, (uint32_t)o.step, (uint32_t)o.worker, (uint32_t)o.site};
    sq_roundtrip_print(stdout, in, dtype, shape, c, &key, n, &rt, o.json);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "shardq %s: cannot write the output\n", cmd);
        return CLI_RUNTIME;
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* info                                                                     */
/* ------------------------------------------------------------------------ */

static int codec_info(int argc, char **argv)
{
    const char *cmd = "codec info";
    opts o;
    int rc = parse_opts(cmd, argc, argv, O_CODEC | O_N | O_JSON, info_usage, 0, "no arguments",
                        &o);
    if (rc >= 0) return rc;
    sq_codec_info_print(stdout, &o.codec, o.n, o.json);
    return CLI_OK;
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                 */
/* ------------------------------------------------------------------------ */

int cmd_codec(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } subs[] = {
        {"encode", codec_encode},
        {"decode", codec_decode},
        {"stats", codec_stats},
        {"info", codec_info},
    };
    static const char *const names[] = {"encode", "decode", "stats", "info"};
    if (argc < 2) {
        fputs(codec_usage, stderr);
        return CLI_USAGE;
    }
    const char *s = argv[1];
    if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0 || strcmp(s, "help") == 0) {
        fputs(codec_usage, stdout);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++)
        if (strcmp(s, subs[i].name) == 0) return subs[i].fn(argc - 1, argv + 1);
    if (s[0] == '-') {
        fprintf(stderr, "shardq codec: expected a subcommand before options, found '%s'\n", s);
    } else {
        const char *hint = cli_suggest(s, names, 4);
        if (hint)
            fprintf(stderr, "shardq codec: unknown subcommand '%s' (did you mean '%s'?)\n", s,
                    hint);
        else
            fprintf(stderr,
                    "shardq codec: unknown subcommand '%s' (encode, decode, stats, info)\n", s);
    }
    fputs("Try 'shardq codec --help'.\n", stderr);
    return CLI_USAGE;
}
