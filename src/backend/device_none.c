/*
** device_none.c -- the device layer of a build without CUDA: no devices,
** and a CUDA backend that never opens (backend.c refuses "cuda" first, with
** the reason below, so the other stubs are never reached).
*/
#include "backend/cuda.h"
#include "backend/device.h"

#include <stdio.h>

static const char reason[] = "built without CUDA";

int sq_device_count(void)
{
    return 0;
}

int sq_device_name(int dev, char *buf, size_t len)
{
    (void)dev;
    if (buf && len) buf[0] = '\0';
    return SQ_ERR_ARG; /* no device has that ordinal */
}

const char *sq_device_unavailable_reason(void)
{
    return reason;
}

int sq_device_selftest(int dev)
{
    (void)dev;
    return SQ_ERR_ARG; /* no device has that ordinal */
}

int sq_cuda_open(int device, sq_cuda **out, sq_error *err)
{
    *out = NULL;
    return sq_error_set(err, SQ_ERR_UNSUPPORTED, "cuda:%d: %s", device, reason);
}

void sq_cuda_close(sq_cuda *d) { (void)d; }
const char *sq_cuda_description(const sq_cuda *d) { (void)d; return reason; }
const char *sq_cuda_error(const sq_cuda *d) { (void)d; return reason; }

int sq_cuda_alloc(sq_cuda *d, size_t bytes, void **p)
{
    (void)d; (void)bytes;
    *p = NULL;
    return SQ_ERR_UNSUPPORTED;
}

void sq_cuda_free(sq_cuda *d, void *p) { (void)d; (void)p; }

int sq_cuda_put(sq_cuda *d, void *dst, const void *src, size_t bytes)
{
    (void)d; (void)dst; (void)src; (void)bytes;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_get(sq_cuda *d, void *dst, const void *src, size_t bytes)
{
    (void)d; (void)dst; (void)src; (void)bytes;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_fill(sq_cuda *d, void *dst, int byte, size_t bytes)
{
    (void)d; (void)dst; (void)byte; (void)bytes;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_copy(sq_cuda *dd, void *dst, sq_cuda *sd, const void *src, size_t bytes)
{
    (void)dd; (void)dst; (void)sd; (void)src; (void)bytes;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_quantize(sq_cuda *d, const sq_codec *c, const float *x, const float *ref,
                     uint64_t n, const sq_rng_key *key, const sq_qbuf *q, int bf16)
{
    (void)d; (void)c; (void)x; (void)ref; (void)n; (void)key; (void)q; (void)bf16;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_dequantize(sq_cuda *d, const sq_codec *c, const sq_qbuf *q, const float *ref,
                       uint64_t n, float *out, int bf16)
{
    (void)d; (void)c; (void)q; (void)ref; (void)n; (void)out; (void)bf16;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_sum_requant(sq_cuda *d, const sq_codec *c_in, const sq_qbuf *chunks, int k,
                        uint64_t n, const sq_codec *c_out, const sq_rng_key *key,
                        const sq_qbuf *out, int f16)
{
    (void)d; (void)c_in; (void)chunks; (void)k; (void)n; (void)c_out; (void)key; (void)out;
    (void)f16;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_sum(sq_cuda *d, const sq_codec *c, const sq_qbuf *chunks, int k, uint64_t n,
                float *out, int f16)
{
    (void)d; (void)c; (void)chunks; (void)k; (void)n; (void)out; (void)f16;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_add(sq_cuda *d, const float *a, const float *b, uint64_t n, float *out)
{
    (void)d; (void)a; (void)b; (void)n; (void)out;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_sub(sq_cuda *d, const float *a, const float *b, uint64_t n, float *out)
{
    (void)d; (void)a; (void)b; (void)n; (void)out;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_to_bf16(sq_cuda *d, const float *x, uint64_t n, uint16_t *out)
{
    (void)d; (void)x; (void)n; (void)out;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_from_bf16(sq_cuda *d, const uint16_t *h, uint64_t n, float *out)
{
    (void)d; (void)h; (void)n; (void)out;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_set_stream(sq_cuda *d, void *stream)
{
    (void)d; (void)stream;
    return SQ_ERR_UNSUPPORTED;
}

int sq_cuda_set_deferred(sq_cuda *d, int on) { (void)d; (void)on; return SQ_ERR_UNSUPPORTED; }
int sq_cuda_sync(sq_cuda *d) { (void)d; return SQ_ERR_UNSUPPORTED; }
int sq_cuda_timer_start(sq_cuda *d) { (void)d; return SQ_ERR_UNSUPPORTED; }

int sq_cuda_timer_stop(sq_cuda *d, double *seconds)
{
    (void)d;
    *seconds = 0.0;
    return SQ_ERR_UNSUPPORTED;
}
