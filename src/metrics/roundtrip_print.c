/*
** roundtrip_print.c -- a codec round trip's statistics (sq_roundtrip) with
** the input and codec they came from, as `shardq codec stats` prints them:
** aligned text or one JSON object, written to a stream (shardq/metrics.h).
*/
#include "shardq/metrics.h"
#include "sq_json.h"

#include <stdio.h>

void sq_roundtrip_print(FILE *f, const char *input, const char *dtype, const char *shape,
                        const sq_codec *c, const sq_rng_key *key, uint64_t n,
                        const sq_roundtrip *rt, int json)
{
    double bpe = sq_codec_bits_per_element(c, n);
    uint64_t bytes = sq_codec_bytes(c, n), groups = sq_codec_groups(c, n);
    uint64_t cbytes = sq_codec_code_bytes(c, n);
    char spec[SQ_CODEC_STRLEN];
    sq_codec_format(c, spec, sizeof spec);
    if (json) {
        fputs("{\"input\":", f);
        sq_json_str(f, input);
        fprintf(f, ",\"dtype\":\"%s\",\"shape\":%s,\"codec\":\"%s\",\"seed\":%llu,\"step\":%llu,"
               "\"worker\":%llu,\"site\":%llu,\"n\":%llu,\"groups\":%llu,\"bytes\":%llu,"
               "\"bits_per_element\":",
               dtype, shape, spec, (unsigned long long)key->seed, (unsigned long long)key->step,
               (unsigned long long)key->worker, (unsigned long long)key->site, (unsigned long long)n,
               (unsigned long long)groups, (unsigned long long)bytes);
        sq_json_num(f, bpe);
        fputs(",\"rel_l2\":", f);
        sq_json_num(f, rt->rel_l2);
        fputs(",\"mse\":", f);
        sq_json_num(f, rt->mse);
        fputs(",\"max_abs_error\":", f);
        sq_json_num(f, rt->max_abs);
        fputs(",\"snr_db\":", f);
        sq_json_num(f, rt->snr_db);
        fputs(",\"cosine\":", f);
        sq_json_num(f, rt->cosine);
        fputs(",\"mean_error\":", f);
        sq_json_num(f, rt->mean_error);
        fputs("}\n", f);
    } else {
        fprintf(f, "%-19s %s (%s %s)\n", "input", input, dtype, shape);
        fprintf(f, "%-19s %s\n", "codec", spec);
        fprintf(f, "%-19s %llu\n", "n", (unsigned long long)n);
        fprintf(f, "%-19s %llu\n", "groups", (unsigned long long)groups);
        fprintf(f, "%-19s %llu (codes %llu, metadata %llu)\n", "bytes", (unsigned long long)bytes,
               (unsigned long long)cbytes, (unsigned long long)(bytes - cbytes));
        fprintf(f, "%-19s %.6g\n", "bits per element", bpe);
        fprintf(f, "%-19s %.6g\n", "relative L2 error", rt->rel_l2);
        fprintf(f, "%-19s %.6g\n", "MSE", rt->mse);
        fprintf(f, "%-19s %.6g\n", "max abs error", rt->max_abs);
        fprintf(f, "%-19s %.6g dB\n", "SNR", rt->snr_db);
        fprintf(f, "%-19s %.9g\n", "cosine similarity", rt->cosine);
        fprintf(f, "%-19s %.6g\n", "mean signed error", rt->mean_error);
    }
}
