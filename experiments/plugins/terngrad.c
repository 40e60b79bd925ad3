/*
** terngrad.c -- TernGrad as a shardq plug-in codec: the example of docs/plugins.md,
** loaded with `shardq --plugin terngrad.so` and used as
** kind=plugin:terngrad (a codec spec) or grad.inter.kind=plugin:terngrad (a
** scheme knob).
**
** TernGrad (W. Wen et al., "TernGrad: Ternary Gradients to Reduce
** Communication in Distributed Deep Learning", NIPS 2017) sends each
** gradient element as s * sign(x) * b, b ~ Bernoulli(|x| / s), s = max |x|:
** an unbiased ternary {-s, 0, +s}. What this file does, exactly:
**   - s is the absmax of each group of `group` consecutive elements (the
**     paper's s is per layer; its Section 4 scales per layer and clips):
**     one fp32 scale per group, no offsets;
**   - element i is sent as +-1 iff u_i < |x_i| / s (fp32 division), else
**     0, with u_i = sq_uniform(key, i), the uniform of docs/conventions.md
**     that the library hands stochastic plug-ins; a group
**     of zeros has s = 0 and decodes to zeros;
**   - no gradient clipping (the paper's 2.5 sigma clip is left out);
**   - codes are 2-bit two's complement (+1 = 01, -1 = 11, 0 = 00), packed
**     MSB first as the built-in kinds pack theirs (sq_pack): four a byte.
** Sizes for n elements: ceil(n / 4) code bytes, 4 * ceil(n / group) scale
** bytes. Parameters (registration): "group=N", N from 1 to 2^20 (default
** 128). Decoding is s * code, exact. It does not compose with summation
** (a sum of ternaries is not ternary): the world decodes, sums in fp32 and
** encodes again.
**
** Build (what make does, by hand):
**   cc -std=c11 -O2 -fPIC -shared -I$(pkg-config --variable=includedir shardq) \
**      -o terngrad.so terngrad.c
** It links nothing of libshardq: the random numbers come from the host.
*/
#include "shardq/plugin.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_GROUP 128
#define MAX_GROUP ((uint64_t)1 << 20)

/* The codec keeps its group in the descriptor; ctx is unused. */
typedef struct terngrad {
    uint64_t group;
} terngrad;

static terngrad the_codec = {DEFAULT_GROUP};

static void tg_sizes(void *ctx, uint64_t n, uint64_t bytes[3])
{
    const terngrad *t = ctx;
    bytes[0] = n / 4 + (n % 4 != 0);
    bytes[1] = 4 * (n / t->group + (n % t->group != 0));
    bytes[2] = 0;
}

/* 2-bit field j of the stream, as a signed value -1, 0 or +1 */
static int get_code(const uint8_t *codes, uint64_t j)
{
    unsigned f = (codes[j / 4] >> (6 - 2 * (j % 4))) & 3u;
    return f == 1 ? 1 : f == 3 ? -1 : 0;
}

static void put_code(uint8_t *codes, uint64_t j, int q)
{
    unsigned f = q > 0 ? 1u : q < 0 ? 3u : 0u;
    codes[j / 4] |= (uint8_t)(f << (6 - 2 * (j % 4)));
}

static int tg_encode(void *ctx, const float *x, uint64_t n, const sq_rng_key *key, const float *u,
                     uint8_t *codes, void *scales, void *offsets)
{
    const terngrad *t = ctx;
    (void)key, (void)offsets;
    float *s = scales;
    for (uint64_t g0 = 0, gi = 0; g0 < n; g0 += t->group, gi++) {
        uint64_t len = n - g0 < t->group ? n - g0 : t->group;
        float a = 0.0f;
        for (uint64_t j = 0; j < len; j++) {
            float m = x[g0 + j] < 0 ? -x[g0 + j] : x[g0 + j];
            a = m > a ? m : a;
        }
        s[gi] = a;
        if (a == 0.0f) continue; /* all zero: codes stay 0 */
        for (uint64_t j = g0; j < g0 + len; j++) {
            float p = (x[j] < 0 ? -x[j] : x[j]) / a;
            if (u[j] < p) put_code(codes, j, x[j] < 0 ? -1 : 1);
        }
    }
    return 0;
}

static int tg_decode(void *ctx, const uint8_t *codes, const void *scales, const void *offsets,
                     uint64_t n, float *out)
{
    const terngrad *t = ctx;
    (void)offsets;
    const float *s = scales;
    for (uint64_t j = 0; j < n; j++) out[j] = s[j / t->group] * (float)get_code(codes, j);
    return 0;
}

/* "group=N" (or nothing) */
/* sq_error_set, which this file may not link: status and sentence into err. */
static int refuse(sq_error *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

static int tg_configure(sq_plugin_codec *self, const char *params, sq_error *err)
{
    terngrad *t = self->ctx;
    t->group = DEFAULT_GROUP;
    if (params && *params) {
        char *end;
        if (strncmp(params, "group=", 6) != 0 || params[6] < '0' || params[6] > '9')
            return refuse(err, SQ_ERR_SPEC, "expected group=N");
        unsigned long long g = strtoull(params + 6, &end, 10);
        if (*end || g < 1 || g > MAX_GROUP)
            return refuse(err, SQ_ERR_SPEC, "group=%s: must be 1 to 2^20", params + 6);
        t->group = g;
    }
    self->group = t->group;
    return 0;
}

const uint32_t shardq_plugin_abi = SQ_PLUGIN_ABI;

int shardq_plugin_init(const sq_plugin_host *host, sq_error *err)
{
    if (host->abi != SQ_PLUGIN_ABI)
        return refuse(err, SQ_ERR_SPEC,
                      "the host speaks plug-in interface version %u, terngrad version %d",
                      (unsigned)host->abi, SQ_PLUGIN_ABI);
    sq_plugin_codec c = {
        .abi = SQ_PLUGIN_ABI,
        .name = "terngrad",
        .about = "TernGrad (Wen et al. 2017): stochastic {-1, 0, +1} times the group's absmax, "
                 "2-bit codes, fp32 scales",
        .group = DEFAULT_GROUP,
        .stochastic = 1,
        .sum_composes = 0,
        .params = getenv("SHARDQ_TERNGRAD_PARAMS"),
        .ctx = &the_codec,
        .configure = tg_configure,
        .sizes = tg_sizes,
        .encode = tg_encode,
        .decode = tg_decode,
    };
    int id = host->register_codec(host, &c, err);
    return id < 0 ? id : 1;
}
