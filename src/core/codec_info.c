/*
** codec_info.c -- what a codec makes of n elements (groups, code, scale and
** offset bytes, bits per element, the ratio to fp32), as `shardq codec
** info` prints it: aligned text or one JSON object (shardq/codec.h).
*/
#include "shardq/codec.h"
#include "sq_json.h"

#include <stdio.h>

void sq_codec_info_print(FILE *f, const sq_codec *c, uint64_t n, int json)
{
    char spec[SQ_CODEC_STRLEN];
    sq_codec_format(c, spec, sizeof spec);
    uint64_t groups = sq_codec_groups(c, n), cb = sq_codec_code_bytes(c, n);
    uint64_t sb = sq_codec_scale_bytes(c, n), ob = sq_codec_offset_bytes(c, n);
    uint64_t tb = sq_codec_bytes(c, n);
    double bpe = sq_codec_bits_per_element(c, n);
    double ratio = tb ? 4.0 * (double)n / (double)tb : 0.0;
    if (json) {
        fprintf(f, "{\"codec\":\"%s\",\"n\":%llu,\"groups\":%llu,\"code_bytes\":%llu,"
               "\"scale_bytes\":%llu,\"offset_bytes\":%llu,\"metadata_bytes\":%llu,"
               "\"bytes\":%llu,\"bits_per_element\":",
               spec, (unsigned long long)n, (unsigned long long)groups, (unsigned long long)cb,
               (unsigned long long)sb, (unsigned long long)ob, (unsigned long long)(sb + ob),
               (unsigned long long)tb);
        sq_json_num(f, bpe);
        fputs(",\"ratio_to_fp32\":", f);
        sq_json_num(f, ratio);
        fputs("}\n", f);
    } else {
        fprintf(f, "%-17s %s\n", "codec", spec);
        fprintf(f, "%-17s %llu\n", "n", (unsigned long long)n);
        fprintf(f, "%-17s %llu\n", "groups", (unsigned long long)groups);
        fprintf(f, "%-17s %llu\n", "code bytes", (unsigned long long)cb);
        fprintf(f, "%-17s %llu (scales %llu, offsets %llu)\n", "metadata bytes",
               (unsigned long long)(sb + ob), (unsigned long long)sb, (unsigned long long)ob);
        fprintf(f, "%-17s %llu\n", "total bytes", (unsigned long long)tb);
        fprintf(f, "%-17s %.6g\n", "bits per element", bpe);
        if (tb)
            fprintf(f, "%-17s %.4g x smaller than fp32\n", "ratio", ratio);
        else
            fprintf(f, "%-17s -\n", "ratio");
    }
}
