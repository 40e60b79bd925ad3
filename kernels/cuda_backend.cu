/*
** cuda_backend.cu -- one CUDA device as a shardq backend: its memory, its
** stream (its own, or one the caller lends it), and the codec and
** elementwise kernels enqueued on it (src/backend/cuda.h).
**
** Every CUDA call is checked; a failure becomes a status and a sentence
** that names the call, the device and CUDA's reason, never an abort. An
** operation zeroes the device's flags word (once per batch in deferred
** mode), enqueues its kernels, and, unless deferred, copies the flags back
** and waits: the status is then what the C reference would return.
*/
#include "backend/cuda.h"
#include "sq_kernels.h"

#include <cuda_runtime_api.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sq_cuda {
    int dev;
    int sms;
    cudaStream_t stream;  /* where everything is enqueued: own, or the caller's */
    cudaStream_t own;     /* the backend's own stream */
    cudaEvent_t handoff;  /* orders a new stream after the one before */
    uint32_t *flags;      /* device word the kernels report into */
    int pending;          /* flags hold findings not yet read back */
    int deferred;
    void *scratch;
    size_t scratch_bytes;
    cudaEvent_t t0, t1;
    char name[32];
    char description[256];
    char error[512];
};

namespace {

/* Formats "WHAT on cuda:N: CUDA's reason" into d->error and maps the CUDA
** error to a status. Clears the runtime's last error, so that a non-sticky
** failure does not resurface in the next check. */
__attribute__((format(printf, 3, 4))) int fail(sq_cuda *d, cudaError_t e, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(d->error, sizeof d->error, "%s on %s: %s", what, d->name, cudaGetErrorString(e));
    (void)cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? SQ_ERR_NOMEM : SQ_ERR_DEVICE;
}

#define CHECK(d, call, ...)                                      \
    do {                                                         \
        cudaError_t check_err_ = (call);                         \
        if (check_err_ != cudaSuccess) return fail((d), check_err_, __VA_ARGS__); \
    } while (0)

/* "2.00 GiB", "512.0 MiB", "96 bytes" */
const char *human_bytes(size_t b, char *buf, size_t len)
{
    if (b >= ((size_t)1 << 30))
        snprintf(buf, len, "%.2f GiB", (double)b / (double)((size_t)1 << 30));
    else if (b >= ((size_t)1 << 20))
        snprintf(buf, len, "%.1f MiB", (double)b / (double)((size_t)1 << 20));
    else
        snprintf(buf, len, "%zu bytes", b);
    return buf;
}

int use(sq_cuda *d)
{
    CHECK(d, cudaSetDevice(d->dev), "cudaSetDevice(%d)", d->dev);
    return SQ_OK;
}

/* Scratch of at least bytes. Growing it waits for the kernels that may
** still use the old one. */
int ensure_scratch(sq_cuda *d, uint64_t bytes)
{
    if (bytes <= d->scratch_bytes) return SQ_OK;
    char hb[32];
    CHECK(d, cudaStreamSynchronize(d->stream), "cudaStreamSynchronize (before growing scratch)");
    if (d->scratch) CHECK(d, cudaFree(d->scratch), "cudaFree(scratch)");
    d->scratch = nullptr;
    d->scratch_bytes = 0;
    CHECK(d, cudaMalloc(&d->scratch, (size_t)bytes), "cudaMalloc(%s of scratch)",
          human_bytes((size_t)bytes, hb, sizeof hb));
    d->scratch_bytes = (size_t)bytes;
    return SQ_OK;
}

/* Before an operation: the device current, the flags zeroed if no earlier
** deferred operation's findings are waiting in them, scratch in place. */
int begin(sq_cuda *d, uint64_t scratch, sqk_env *env)
{
    int rc = use(d);
    if (rc == SQ_OK) rc = ensure_scratch(d, scratch);
    if (rc != SQ_OK) return rc;
    if (!d->pending) {
        CHECK(d, cudaMemsetAsync(d->flags, 0, sizeof(uint32_t), d->stream),
              "cudaMemsetAsync(flags)");
        d->pending = 1;
    }
    memset(env, 0, sizeof *env);
    env->stream = d->stream;
    env->sms = d->sms;
    env->flags = d->flags;
    env->scratch = d->scratch;
    return SQ_OK;
}

int end(sq_cuda *d, const sqk_env *env, int rc)
{
    if (rc == SQ_ERR_DEVICE && env->failed)
        return fail(d, (cudaError_t)env->error, "launch of %s", env->failed);
    if (rc != SQ_OK) return rc;
    return d->deferred ? SQ_OK : sq_cuda_sync(d);
}

} /* namespace */

/* ------------------------------------------------------------------------ */
/* Opening                                                                  */
/* ------------------------------------------------------------------------ */

extern "C" int sq_cuda_open(int device, sq_cuda **out, sq_error *err)
{
    *out = nullptr;
    sq_cuda *d = static_cast<sq_cuda *>(calloc(1, sizeof *d));
    if (!d) return sq_error_set(err, SQ_ERR_NOMEM, "cuda:%d: out of host memory", device);
    d->dev = device;
    snprintf(d->name, sizeof d->name, "cuda:%d", device);
    cudaDeviceProp prop;
    int rc = use(d);
    if (rc == SQ_OK) {
        cudaError_t e = cudaGetDeviceProperties(&prop, device);
        if (e != cudaSuccess) rc = fail(d, e, "cudaGetDeviceProperties(%d)", device);
    }
    if (rc == SQ_OK) {
        cudaError_t e = cudaStreamCreateWithFlags(&d->own, cudaStreamNonBlocking);
        if (e != cudaSuccess) rc = fail(d, e, "cudaStreamCreateWithFlags");
        d->stream = d->own;
    }
    if (rc == SQ_OK) {
        cudaError_t e = cudaMalloc(&d->flags, sizeof(uint32_t));
        if (e != cudaSuccess) rc = fail(d, e, "cudaMalloc(flags word)");
    }
    if (rc == SQ_OK) {
        cudaError_t e = cudaEventCreate(&d->t0);
        if (e == cudaSuccess) e = cudaEventCreate(&d->t1);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d->handoff, cudaEventDisableTiming);
        if (e != cudaSuccess) rc = fail(d, e, "cudaEventCreate");
    }
    if (rc != SQ_OK) {
        sq_error_set(err, rc, "%s", d->error);
        sq_cuda_close(d);
        return rc;
    }
    d->sms = prop.multiProcessorCount;
    snprintf(d->description, sizeof d->description, "%s (%.120s, sm_%d%d, %d SMs, %.1f GiB)",
             d->name, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (double)(1u << 30));
    *out = d;
    return SQ_OK;
}

extern "C" void sq_cuda_close(sq_cuda *d)
{
    if (!d) return;
    (void)cudaSetDevice(d->dev);
    if (d->stream) (void)cudaStreamSynchronize(d->stream);
    if (d->scratch) (void)cudaFree(d->scratch);
    if (d->flags) (void)cudaFree(d->flags);
    if (d->t0) (void)cudaEventDestroy(d->t0);
    if (d->t1) (void)cudaEventDestroy(d->t1);
    if (d->handoff) (void)cudaEventDestroy(d->handoff);
    /* a caller's stream stays the caller's */
    if (d->own) (void)cudaStreamDestroy(d->own);
    (void)cudaGetLastError();
    free(d);
}

extern "C" const char *sq_cuda_description(const sq_cuda *d) { return d->description; }
extern "C" const char *sq_cuda_error(const sq_cuda *d) { return d->error; }

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

extern "C" int sq_cuda_alloc(sq_cuda *d, size_t bytes, void **p)
{
    char hb[32];
    *p = nullptr;
    int rc = use(d);
    if (rc != SQ_OK) return rc;
    CHECK(d, cudaMalloc(p, bytes ? bytes : 1), "cudaMalloc(%s)", human_bytes(bytes, hb, sizeof hb));
    return SQ_OK;
}

extern "C" void sq_cuda_free(sq_cuda *d, void *p)
{
    if (!p) return;
    /* wait for kernels that may still read it; a failure here has nowhere to
    ** go but the error string */
    if (use(d) != SQ_OK) return;
    cudaError_t e = cudaStreamSynchronize(d->stream);
    if (e == cudaSuccess) e = cudaFree(p);
    if (e != cudaSuccess) fail(d, e, "cudaFree");
}

extern "C" int sq_cuda_put(sq_cuda *d, void *dst, const void *src, size_t bytes)
{
    char hb[32];
    int rc = use(d);
    if (rc != SQ_OK || bytes == 0) return rc;
    CHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->stream),
          "cudaMemcpyAsync(host to device, %s)", human_bytes(bytes, hb, sizeof hb));
    CHECK(d, cudaStreamSynchronize(d->stream), "cudaStreamSynchronize (after a host to device copy)");
    return SQ_OK;
}

extern "C" int sq_cuda_get(sq_cuda *d, void *dst, const void *src, size_t bytes)
{
    char hb[32];
    int rc = use(d);
    if (rc != SQ_OK || bytes == 0) return rc;
    CHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, d->stream),
          "cudaMemcpyAsync(device to host, %s)", human_bytes(bytes, hb, sizeof hb));
    CHECK(d, cudaStreamSynchronize(d->stream), "cudaStreamSynchronize (after a device to host copy)");
    return SQ_OK;
}

extern "C" int sq_cuda_fill(sq_cuda *d, void *dst, int byte, size_t bytes)
{
    char hb[32];
    int rc = use(d);
    if (rc != SQ_OK || bytes == 0) return rc;
    CHECK(d, cudaMemsetAsync(dst, byte, bytes, d->stream), "cudaMemsetAsync(%s)",
          human_bytes(bytes, hb, sizeof hb));
    if (!d->deferred) CHECK(d, cudaStreamSynchronize(d->stream), "cudaStreamSynchronize (after a fill)");
    return SQ_OK;
}

extern "C" int sq_cuda_copy(sq_cuda *dd, void *dst, sq_cuda *sd, const void *src, size_t bytes)
{
    char hb[32];
    if (bytes == 0) return SQ_OK;
    if (dd == sd) {
        int rc = use(dd);
        if (rc != SQ_OK) return rc;
        CHECK(dd, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, dd->stream),
              "cudaMemcpyAsync(device to device, %s)", human_bytes(bytes, hb, sizeof hb));
        if (!dd->deferred)
            CHECK(dd, cudaStreamSynchronize(dd->stream), "cudaStreamSynchronize (after a copy)");
        return SQ_OK;
    }
    /* between GPUs: the source's kernels first, then a peer copy on the
    ** destination's stream (direct when the GPUs can reach each other, else
    ** staged by the driver) */
    int rc = use(sd);
    if (rc != SQ_OK) return rc;
    CHECK(sd, cudaStreamSynchronize(sd->stream), "cudaStreamSynchronize (before a peer copy)");
    if ((rc = use(dd)) != SQ_OK) return rc;
    int can = 0;
    CHECK(dd, cudaDeviceCanAccessPeer(&can, dd->dev, sd->dev), "cudaDeviceCanAccessPeer(%d, %d)",
          dd->dev, sd->dev);
    if (can) {
        cudaError_t e = cudaDeviceEnablePeerAccess(sd->dev, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
            (void)cudaGetLastError();
        else if (e != cudaSuccess)
            return fail(dd, e, "cudaDeviceEnablePeerAccess(%d)", sd->dev);
    }
    CHECK(dd, cudaMemcpyPeerAsync(dst, dd->dev, src, sd->dev, bytes, dd->stream),
          "cudaMemcpyPeerAsync(cuda:%d to cuda:%d, %s)", sd->dev, dd->dev,
          human_bytes(bytes, hb, sizeof hb));
    CHECK(dd, cudaStreamSynchronize(dd->stream), "cudaStreamSynchronize (after a peer copy)");
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Operations                                                               */
/* ------------------------------------------------------------------------ */

extern "C" int sq_cuda_quantize(sq_cuda *d, const sq_codec *c, const float *x, const float *ref,
                                uint64_t n, const sq_rng_key *key, const sq_qbuf *q, int bf16)
{
    sqk_env env;
    int rc = begin(d, sqk_quantize_scratch(c, n), &env);
    if (rc != SQ_OK) return rc;
    return end(d, &env, sqk_quantize(&env, c, x, ref, n, key, q, bf16));
}

extern "C" int sq_cuda_dequantize(sq_cuda *d, const sq_codec *c, const sq_qbuf *q,
                                  const float *ref, uint64_t n, float *out, int bf16)
{
    sqk_env env;
    int rc = begin(d, sqk_decode_scratch(c, n), &env);
    if (rc != SQ_OK) return rc;
    return end(d, &env, sqk_dequantize(&env, c, q, ref, n, out, bf16));
}

extern "C" int sq_cuda_sum_requant(sq_cuda *d, const sq_codec *c_in, const sq_qbuf *chunks,
                                   int k, uint64_t n, const sq_codec *c_out,
                                   const sq_rng_key *key, const sq_qbuf *out, int f16)
{
    sqk_env env;
    int rc = begin(d, sqk_sum_requant_scratch(c_in, k, n, c_out), &env);
    if (rc != SQ_OK) return rc;
    return end(d, &env,
               f16 ? sqk_sum_requant_f16(&env, c_in, chunks, k, n, c_out, key, out)
                   : sqk_sum_requant(&env, c_in, chunks, k, n, c_out, key, out));
}

extern "C" int sq_cuda_sum(sq_cuda *d, const sq_codec *c, const sq_qbuf *chunks, int k,
                           uint64_t n, float *out, int f16)
{
    sqk_env env;
    int rc = begin(d, f16 ? 0 : sqk_decode_scratch(c, n), &env);
    if (rc != SQ_OK) return rc;
    return end(d, &env, f16 ? sqk_sum_f16(&env, c, chunks, k, n, out)
                            : sqk_sum(&env, c, chunks, k, n, out));
}

/* The elementwise operations: n > 0 (backend.c returns before for n = 0). */
extern "C" int sq_cuda_add(sq_cuda *d, const float *a, const float *b, uint64_t n, float *out)
{
    sqk_env env;
    int rc = begin(d, 0, &env);
    if (rc != SQ_OK) return rc;
    return end(d, &env, sqk_add(&env, a, b, n, out));
}

extern "C" int sq_cuda_sub(sq_cuda *d, const float *a, const float *b, uint64_t n, float *out)
{
    sqk_env env;
    int rc = begin(d, 0, &env);
    if (rc != SQ_OK) return rc;
    return end(d, &env, sqk_sub(&env, a, b, n, out));
}

extern "C" int sq_cuda_to_bf16(sq_cuda *d, const float *x, uint64_t n, uint16_t *out)
{
    sqk_env env;
    int rc = begin(d, 0, &env);
    if (rc != SQ_OK) return rc;
    return end(d, &env, sqk_to_bf16(&env, x, n, out));
}

extern "C" int sq_cuda_from_bf16(sq_cuda *d, const uint16_t *h, uint64_t n, float *out)
{
    sqk_env env;
    int rc = begin(d, 0, &env);
    if (rc != SQ_OK) return rc;
    return end(d, &env, sqk_from_bf16(&env, h, n, out));
}

/* ------------------------------------------------------------------------ */
/* Synchronisation and timing                                               */
/* ------------------------------------------------------------------------ */

extern "C" int sq_cuda_sync(sq_cuda *d)
{
    int rc = use(d);
    if (rc != SQ_OK) return rc;
    uint32_t flags = 0;
    if (d->pending)
        CHECK(d, cudaMemcpyAsync(&flags, d->flags, sizeof flags, cudaMemcpyDeviceToHost, d->stream),
              "cudaMemcpyAsync(flags)");
    /* errors of kernels that ran (an illegal address) surface here */
    CHECK(d, cudaStreamSynchronize(d->stream), "cudaStreamSynchronize (after the codec kernels)");
    d->pending = 0;
    return sqk_status(flags);
}

/* Switches streams without waiting on the host: the new stream waits for
** an event recorded on the old one, so what was enqueued before (kernels
** still reading the scratch, a deferred batch's flags) comes first. The
** flags stay pending: the next sync reads them on the new stream. */
extern "C" int sq_cuda_set_stream(sq_cuda *d, void *stream)
{
    cudaStream_t to = stream ? static_cast<cudaStream_t>(stream) : d->own;
    if (to == d->stream) return SQ_OK;
    int rc = use(d);
    if (rc != SQ_OK) return rc;
    CHECK(d, cudaEventRecord(d->handoff, d->stream), "cudaEventRecord(stream handoff)");
    CHECK(d, cudaStreamWaitEvent(to, d->handoff, 0),
          "cudaStreamWaitEvent(stream handoff to %s)", stream ? "the caller's stream" : "own stream");
    d->stream = to;
    return SQ_OK;
}

extern "C" int sq_cuda_set_deferred(sq_cuda *d, int on)
{
    if (!on && d->deferred) {
        d->deferred = 0;
        return sq_cuda_sync(d);
    }
    d->deferred = on != 0;
    return SQ_OK;
}

extern "C" int sq_cuda_timer_start(sq_cuda *d)
{
    int rc = use(d);
    if (rc != SQ_OK) return rc;
    CHECK(d, cudaEventRecord(d->t0, d->stream), "cudaEventRecord(start)");
    return SQ_OK;
}

extern "C" int sq_cuda_timer_stop(sq_cuda *d, double *seconds)
{
    int rc = use(d);
    if (rc != SQ_OK) return rc;
    float ms = 0.0f;
    CHECK(d, cudaEventRecord(d->t1, d->stream), "cudaEventRecord(stop)");
    CHECK(d, cudaEventSynchronize(d->t1), "cudaEventSynchronize(stop)");
    CHECK(d, cudaEventElapsedTime(&ms, d->t0, d->t1), "cudaEventElapsedTime");
    *seconds = (double)ms * 1e-3;
    return SQ_OK;
}
