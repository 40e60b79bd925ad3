/*
** common.c -- the helpers the subcommands share (cli.h): option values and
** their errors, the scheme of a command, a file written whole, JSON
** numbers and strings, the bytes tables, and a job's end. main.c
** dispatches to the subcommands; they call these, and nothing here calls
** back into a command.
*/
#include "cli.h"
#include "sq_json.h"
#include "trace/wfile.h"
#include "backend/device.h"
#include "shardq/codec.h"
#include "progress.h"
#include "shardq/store.h"
#include "shardq/sweep.h"
#include "shardq/world.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_option_error(const char *cmd, int ch, char **argv, const char *const *longnames)
{
    if (ch == ':') {
        fprintf(stderr, "shardq %s: option '%s' needs a value\nTry 'shardq %s --help'.\n", cmd,
                argv[optind - 1], cmd);
    } else if (optopt) {
        char s[3] = {'-', (char)optopt, '\0'};
        cli_unknown_option(cmd, s, longnames);
    } else {
        cli_unknown_option(cmd, argv[optind - 1], longnames);
    }
    return CLI_USAGE;
}

int cli_check_positional(const char *cmd, char **pos, int npos, int min, int max,
                         const char *desc)
{
    if (npos >= min && npos <= max) return 0;
    if (npos > max)
        fprintf(stderr, "shardq %s: unexpected argument '%s'", cmd, pos[max]);
    else
        fprintf(stderr, "shardq %s: missing argument", cmd);
    fprintf(stderr, " (expected %s)\nTry 'shardq %s --help'.\n", desc, cmd);
    return -1;
}

int cli_check_device(const char *cmd, const char *text)
{
    const char *p = text + 5;
    int ok = !strcmp(text, "cpu") || !strcmp(text, "cuda");
    if (!ok && !strncmp(text, "cuda:", 5) && *p) {
        ok = 1;
        for (; *p; p++)
            if (!(*p >= '0' && *p <= '9') && !(*p == ',' && p[1] && p[-1] != ',' && p[-1] != ':'))
                ok = 0;
    }
    if (!ok)
        fprintf(stderr, "shardq %s: --device: '%s': expected cpu, cuda or cuda:N[,N...]\n", cmd,
                text);
    return ok ? 0 : -1;
}

int cli_device_present(const char *cmd, const char *text)
{
    if (!text || !strcmp(text, "cpu")) return 0;
    int count = sq_device_count();
    if (count == 0) {
        fprintf(stderr, "shardq %s: --device %s: no CUDA device: %s\n", cmd, text,
                sq_device_unavailable_reason());
        return -1;
    }
    /* "cuda" is every device there is; "cuda:N,M" names them (syntax
    ** checked by cli_check_device) */
    for (const char *p = strchr(text, ':'); p; p = strchr(p + 1, ',')) {
        long d = strtol(p + 1, NULL, 10);
        if (d >= count) {
            fprintf(stderr, "shardq %s: --device %s: no device cuda:%ld, %d visible (cuda:0 to "
                    "cuda:%d)\n", cmd, text, d, count, count - 1);
            return -1;
        }
    }
    return 0;
}

int cli_scheme(const char *cmd, const char *preset, const char *const *sets, int nsets,
               sq_scheme *out)
{
    sq_error err;
    if (sq_scheme_preset(preset, out, &err)) {
        fprintf(stderr, "shardq %s: --scheme: %s\nTry 'shardq schemes'.\n", cmd, sq_error_message(&err));
        return -1;
    }
    for (int i = 0; i < nsets; i++)
        if (sq_scheme_set(out, sets[i], &err)) {
            fprintf(stderr, "shardq %s: --set: %s\n", cmd, sq_error_message(&err));
            return -1;
        }
    if (sq_scheme_validate(out, &err)) {
        fprintf(stderr, "shardq %s: scheme %s: %s\n", cmd, preset, sq_error_message(&err));
        return -1;
    }
    return 0;
}

int cli_write_file(const char *cmd, const char *path, const void *data, size_t len)
{
    sq_wfile w;
    sq_error err = {0};
    if (sq_wfile_open(&w, path, &err) == 0) {
        sq_wfile_write(&w, data, len);
        if (sq_wfile_commit(&w, &err) == 0) return 0;
    }
    fprintf(stderr, "shardq %s: %s\n", cmd, sq_error_message(&err));
    return -1;
}

void cli_json_str(const char *s) { sq_json_str(stdout, s); }

void cli_json_num(double v) { sq_json_num(stdout, v); }

int cli_parse_double(const char *cmd, const char *opt, const char *text, double min, double max,
                     double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno == ERANGE || !isfinite(v)) {
        fprintf(stderr, "shardq %s: %s: '%s' is not a number\n", cmd, opt, text);
        return -1;
    }
    if (v < min || v > max) {
        fprintf(stderr, "shardq %s: %s: '%s' is out of range [%g, %g]\n", cmd, opt, text, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

static void job_start(void *ctx, uint64_t total)
{
    cli_job *j = ctx;
    /* said even when quiet: a run was left behind by a process that died */
    if (j->out && j->out->notice[0]) fprintf(stderr, "shardq %s: %s\n", j->cmd, j->out->notice);
    j->bar = j->quiet ? NULL : sq_progress_start(j->cmd, (size_t)total);
}

static void job_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_job *j = ctx;
    (void)total;
    sq_progress_update(j->bar, (size_t)done);
}

static void job_train_step(void *ctx, const sq_train_row *row)
{
    cli_job *j = ctx;
    if (!j->lines || isnan(row->val_loss)) return;
    sq_progress_pause(j->bar);
    printf("step %6llu  loss %.4f  val %.4f  lr %.3g  norm %.3g  %.0f tokens/s\n",
           (unsigned long long)row->step, row->loss, row->val_loss, row->lr, row->grad_norm,
           row->seconds > 0 ? (double)row->tokens / row->seconds : 0.0);
    fflush(stdout);
}

int cli_exit_status(int status)
{
    switch (status) {
    case SQ_OK: return CLI_OK;
    case SQ_ERR_SPEC: return CLI_USAGE;
    case SQ_ERR_BUSY: return CLI_BUSY;
    default: return CLI_RUNTIME;
    }
}

void cli_job_hooks(cli_job *j, sq_sweep_hooks *h)
{
    *h = (sq_sweep_hooks){.ctx = j, .start = job_start, .progress = job_progress,
                          .train_step = job_train_step};
}

int cli_job_end(cli_job *j, int rc, const sq_error *e, const char *db)
{
    sq_progress_finish(j->bar);
    j->bar = NULL;
    const sq_sweep_outcome *out = j->out;
    if (out->status == SQ_SWEEP_HELD) {
        if (!j->quiet) fprintf(stderr, "shardq %s: %s\n", j->cmd, sq_error_message(e));
        return CLI_BUSY;
    }
    if (out->status == SQ_SWEEP_ALREADY_DONE && !j->quiet)
        printf("already done: run %lld in %s\n", (long long)out->run, db);
    if (rc) {
        fprintf(stderr, "shardq %s: %s\n", j->cmd, sq_error_message(e));
        if (out->end_error[0]) fprintf(stderr, "shardq %s: %s\n", j->cmd, out->end_error);
        return CLI_RUNTIME;
    }
    return out->status == SQ_SWEEP_ALREADY_DONE ? CLI_OK : -1;
}

const char *cli_bits_text(double bits, char *buf, size_t len)
{
    if (isfinite(bits))
        snprintf(buf, len, bits < 10000 ? "%.4f" : "%.0f", bits); /* fits a 10-wide column */
    else
        snprintf(buf, len, "-");
    return buf;
}

void cli_json_padding(uint64_t elements, uint64_t padded)
{
    printf(",\"padded\":%llu,\"padding_overhead\":", (unsigned long long)padded);
    cli_json_num(elements ? (double)padded / (double)elements : NAN);
}

void cli_print_bytes(const sq_bytes_row *rows)
{
    for (int c = 0; c < SQ_NCOLL; c++)
        for (int l = 0; l < SQ_NLINK; l++) {
            const sq_bytes_row *b = &rows[c * SQ_NLINK + l];
            if (!b->sent_elems) continue;
            char bp[32];
            const uint64_t sent = b->sent_codes + b->sent_meta;
            printf("  %-19s %-6s %14llu bytes  %.4f bits/elem  %s bits/param\n", b->collective,
                   b->link, (unsigned long long)sent, sq_bits_per(sent, b->sent_elems),
                   cli_bits_text(sq_bits_per(sent, b->sent_params), bp, sizeof bp));
        }
}

void cli_json_bytes(const sq_bytes_row *rows)
{
    printf("{");
    for (int c = 0; c < SQ_NCOLL; c++) {
        printf("%s\"%s\":{", c ? "," : "", sq_coll_name(c));
        for (int l = 0; l < SQ_NLINK; l++) {
            const sq_bytes_row *b = &rows[c * SQ_NLINK + l];
            printf("%s\"%s\":{\"sent_codes\":%llu,\"sent_meta\":%llu,\"recv_bytes\":%llu,"
                   "\"elements\":%llu,\"messages\":%llu,\"bits_per_element\":",
                   l ? "," : "", sq_link_name(l), (unsigned long long)b->sent_codes,
                   (unsigned long long)b->sent_meta,
                   (unsigned long long)(b->recv_codes + b->recv_meta),
                   (unsigned long long)b->sent_elems, (unsigned long long)b->messages);
            cli_json_num(sq_bits_per(b->sent_codes + b->sent_meta, b->sent_elems));
            /* beside them: the model's elements among those sent, and the cost per one */
            printf(",\"real_elements\":%llu,\"bits_per_param\":",
                   (unsigned long long)b->sent_params);
            cli_json_num(sq_bits_per(b->sent_codes + b->sent_meta, b->sent_params));
            printf(",\"padding_overhead\":");
            cli_json_num(b->sent_params ? (double)b->sent_elems / (double)b->sent_params : NAN);
            printf("}");
        }
        printf("}");
    }
    printf("}");
}

const char *cli_default_db(void)
{
    const char *e = getenv("SHARDQ_DB");
    return e && *e ? e : "shardq.db";
}

int cli_parse_u64(const char *cmd, const char *opt, const char *text, uint64_t max,
                  uint64_t *out)
{
    const char *digits = text;
    int base = 10;
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        digits = text + 2;
        base = 16;
    }
    /* strtoull accepts leading blanks and a sign; we want digits only. */
    int ok = (base == 10 ? (*digits >= '0' && *digits <= '9')
                         : ((*digits >= '0' && *digits <= '9') ||
                            (*digits >= 'a' && *digits <= 'f') ||
                            (*digits >= 'A' && *digits <= 'F')));
    char *end = NULL;
    errno = 0;
    unsigned long long v = ok ? strtoull(digits, &end, base) : 0;
    if (!ok || *end != '\0') {
        fprintf(stderr, "shardq %s: %s: '%s' is not an unsigned integer\n", cmd, opt, text);
        return -1;
    }
    if (errno == ERANGE || v > max) {
        fprintf(stderr, "shardq %s: %s: '%s' is larger than %llu\n", cmd, opt, text,
                (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *cli_suggest(const char *word, const char *const *choices, size_t n)
{
    const char *best = NULL;
    size_t bestd = 3, wl = strlen(word);
    if (wl == 0) return NULL;
    for (size_t i = 0; i < n; i++)
        if (strncmp(choices[i], word, wl) == 0) return choices[i];
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, choices[i]);
        if (d < bestd && d < wl) {
            bestd = d;
            best = choices[i];
        }
    }
    return best;
}

void cli_unknown_option(const char *cmd, const char *opt, const char *const *longnames)
{
    char name[64];
    /* "--sed=5" -> "sed" */
    const char *o = opt;
    while (*o == '-') o++;
    size_t k = strcspn(o, "=");
    if (k >= sizeof name) k = sizeof name - 1;
    memcpy(name, o, k);
    name[k] = '\0';
    size_t n = 0;
    while (longnames && longnames[n]) n++;
    const char *s = opt[0] == '-' && opt[1] == '-' ? cli_suggest(name, longnames, n) : NULL;
    const char *sp = *cmd ? " " : "";
    size_t matches = 0;
    for (size_t i = 0; i < n && opt[0] == '-' && opt[1] == '-' && k; i++)
        matches += strncmp(longnames[i], name, k) == 0;
    if (matches > 1) {
        /* getopt_long accepts unique prefixes; this one is not unique. */
        fprintf(stderr, "shardq%s%s: ambiguous option '--%s' (could be", sp, cmd, name);
        for (size_t i = 0, j = 0; i < n; i++)
            if (strncmp(longnames[i], name, k) == 0)
                fprintf(stderr, "%s --%s", j++ ? "," : "", longnames[i]);
        fprintf(stderr, ")\n");
    } else if (s)
        fprintf(stderr, "shardq%s%s: unknown option '%.*s' (did you mean '--%s'?)\n", sp, cmd,
                (int)strcspn(opt, "="), opt, s);
    else
        fprintf(stderr, "shardq%s%s: unknown option '%.*s'\n", sp, cmd, (int)strcspn(opt, "="),
                opt);
    fprintf(stderr, "Try 'shardq%s%s --help'.\n", sp, cmd);
}

