/*
** wire.c -- what one hop carries: a codec's codes and metadata, or plain
** bf16 / fp32 values, and the encode, decode and sum operations over it.
**
** An unquantized wire lives in the codes array of an sq_qbuf (2 or 4 bytes
** an element, no metadata), so the collectives treat every wire alike. The
** sums of unquantized chunks run in fp32 in chunk order, as the codec's
** dequantize-sum does, so switching quantization off changes only what the
** values are, never the order they are added in.
*/
#include "world/world_internal.h"
#include "sq_sparse.h"

#include <string.h>

uint64_t sq_wire_group(const sq_wire *w)
{
    return sq_wire_raw(w) || sq_kind_cast(w->codec.kind) ? 1 : w->codec.group;
}

uint64_t sq_wire_code_bytes(const sq_wire *w, uint64_t n)
{
    return sq_wire_raw(w) ? n * (uint64_t)(w->bits / 8) : sq_codec_code_bytes(&w->codec, n);
}

uint64_t sq_wire_meta_bytes(const sq_wire *w, uint64_t n)
{
    return sq_wire_raw(w) ? 0
                          : sq_codec_scale_bytes(&w->codec, n) + sq_codec_offset_bytes(&w->codec, n);
}

int sq_wire_alloc(sq_backend *be, const sq_wire *wr, uint64_t n, sq_qbuf *q)
{
    memset(q, 0, sizeof *q);
    if (!sq_wire_raw(wr)) return sq_backend_qbuf_alloc(be, &wr->codec, n, q);
    void *p = NULL;
    int rc = sq_backend_alloc(be, (size_t)sq_wire_code_bytes(wr, n), &p);
    q->codes = p;
    return rc;
}

void sq_wire_free(sq_backend *be, const sq_wire *wr, sq_qbuf *q)
{
    if (!be) return;
    if (!sq_wire_raw(wr)) {
        sq_backend_qbuf_free(be, q);
    } else {
        sq_backend_free(be, q->codes);
        memset(q, 0, sizeof *q);
    }
}

sq_qbuf sq_wire_at(const sq_wire *wr, const sq_qbuf *q, uint64_t e)
{
    sq_qbuf v = *q;
    if (!q->codes) return v; /* a dry world */
    v.codes = q->codes + sq_wire_code_bytes(wr, e);
    if (!sq_wire_raw(wr)) {
        v.scales = (char *)q->scales + sq_codec_scale_bytes(&wr->codec, e);
        if (q->offsets) v.offsets = (char *)q->offsets + sq_codec_offset_bytes(&wr->codec, e);
    }
    return v;
}

int sq_wire_encode(sq_backend *be, const sq_wire *wr, const float *x, uint64_t n,
                   const sq_rng_key *key, sq_qbuf *out)
{
    if (sq_wire_raw(wr) && wr->bits == 32)
        return sq_backend_copy(be, out->codes, be, x, (size_t)n * 4);
    if (sq_wire_raw(wr)) return sq_backend_to_bf16(be, x, n, (uint16_t *)out->codes);
    return sq_backend_quantize(be, &wr->codec, x, n, key, out);
}

int sq_wire_decode(sq_backend *be, const sq_wire *wr, const sq_qbuf *q, uint64_t n, float *out)
{
    if (sq_wire_raw(wr) && wr->bits == 32)
        return sq_backend_copy(be, out, be, q->codes, (size_t)n * 4);
    if (sq_wire_raw(wr)) return sq_backend_from_bf16(be, (const uint16_t *)q->codes, n, out);
    return sq_backend_dequantize(be, &wr->codec, q, n, out);
}

int sq_wire_sum(sq_backend *be, const sq_wire *wr, const sq_qbuf *chunks, int k, uint64_t n,
                int f16, float *out, float *tmp)
{
    if (!sq_wire_raw(wr))
        return f16 ? sq_backend_dequant_sum_f16(be, &wr->codec, chunks, k, n, out)
                   : sq_backend_dequant_sum(be, &wr->codec, chunks, k, n, out);
    int rc = sq_wire_decode(be, wr, &chunks[0], n, out);
    for (int i = 1; i < k && rc == SQ_OK; i++) {
        const float *term = (const float *)chunks[i].codes;
        if (wr->bits == 16) {
            rc = sq_backend_from_bf16(be, (const uint16_t *)chunks[i].codes, n, tmp);
            term = tmp;
        }
        if (rc == SQ_OK) rc = sq_backend_add(be, out, term, n, out);
    }
    return rc;
}

int sq_wire_sum_requant(sq_backend *be, const sq_wire *in, const sq_qbuf *chunks, int k,
                        uint64_t n, int f16, const sq_wire *wout, const sq_rng_key *key,
                        sq_qbuf *out, float *tmp, float *tmp2)
{
    if (!sq_wire_raw(in) && !sq_wire_raw(wout))
        return f16 ? sq_backend_dequant_sum_requant_f16(be, &in->codec, chunks, k, n,
                                                        &wout->codec, key, out)
                   : sq_backend_dequant_sum_requant(be, &in->codec, chunks, k, n, &wout->codec,
                                                    key, out);
    /* Mixed or unquantized hops carry no transform (sq_scheme_validate),
    ** so the plain sum is already in the right domain. */
    int rc = sq_wire_sum(be, in, chunks, k, n, 0, tmp, tmp2);
    return rc ? rc : sq_wire_encode(be, wout, tmp, n, key, out);
}
