/*
** collectives.c -- the weight all-gather and the gradient reduce-scatter,
** step by step, between the emulated workers.
**
** Every step is written as the real implementation does it (SDP4Bit's
** Megatron fork, DeepSpeed's ZeRO++, NCCL's ring), one worker at a time:
** encode on the sender, copy (sq_world_xfer counts it), decode and sum on
** the receiver. The emulation runs the workers one after another, so each
** phase finishes for all workers before the next begins; that changes no
** byte, because no worker reads what another writes in the same phase.
**
** Summation orders (fixed, documented in README "The sharded world"):
**   ring reduce-scatter: partition c is summed along the ring, starting
**     at worker c+1: ((x[c+1] + x[c+2]) + ...) + x[c];
**   all-to-all: in worker order 0, 1, ..., N-1;
**   two-level: local index 0..G-1 inside the node, then node 0..K-1.
*/
#include "world/world_internal.h"

#include <stdlib.h>
#include <string.h>

static sq_rng_key key_of(const sq_world *w, uint32_t step, int r, int site)
{
    sq_rng_key k = {w->seed, step, (uint32_t)r, (uint32_t)site};
    return k;
}

/* A local copy of n floats on worker r. */
static int copy_floats(sq_world *w, int r, float *dst, const float *src, uint64_t n)
{
    sq_backend *be = w->workers[r].be;
    int rc = sq_backend_copy(be, dst, be, src, (size_t)n * sizeof(float));
    return rc ? sq_world_fail(w, r, rc, "copying locally") : SQ_OK;
}

#define TRY(r, what, call)                                   \
    do {                                                     \
        int rc_ = (call);                                    \
        if (rc_ != SQ_OK) return sq_world_fail(w, (r), rc_, (what)); \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Weight all-gather                                                        */
/* ------------------------------------------------------------------------ */

/* Each worker encodes its master shard (or its difference to w-hat) into
** its own slot of the receive buffer; a ring forwards every slot around;
** every worker, the owner of a slot included, rebuilds w-hat from the
** encoded bytes alone, so all replicas stay bit for bit identical. */
int sq_world_gather_weights(sq_world *w, uint32_t step)
{
    const int N = w->N;
    const uint64_t S = w->shard, P = w->padded;
    const sq_wire *wr = &w->scheme.weight;
    const int diff = w->scheme.weight_mode == SQ_WEIGHT_DIFF;
    if (N == 1) return w->dry ? SQ_OK : copy_floats(w, 0, w->workers[0].what, w->workers[0].master, P);

    for (int r = 0; r < N && !w->dry; r++) {
        sq_worker *k = &w->workers[r];
        sq_qbuf slot = sq_wire_at(wr, &k->wrecv, (uint64_t)r * S);
        sq_rng_key key = key_of(w, step, r, SQ_SITE_WEIGHT);
        if (diff)
            TRY(r, "quantizing the weight difference",
                sq_backend_quantize_diff(k->be, &wr->codec, k->master, k->what + (uint64_t)r * S, S,
                                         &key, &slot));
        else
            TRY(r, "encoding the master shard", sq_wire_encode(k->be, wr, k->master, S, &key, &slot));
    }
    /* ring: at step s worker r passes slot r - s to worker r + 1 */
    for (int s = 0; s < N - 1; s++)
        for (int r = 0; r < N; r++) {
            int c = ((r - s) % N + N) % N, next = (r + 1) % N;
            sq_qbuf from = sq_wire_at(wr, &w->workers[r].wrecv, (uint64_t)c * S);
            sq_qbuf to = sq_wire_at(wr, &w->workers[next].wrecv, (uint64_t)c * S);
            int rc = sq_world_xfer(w, SQ_COLL_WEIGHT, wr, r, &from, next, &to, S);
            if (rc) return rc;
        }
    for (int r = 0; r < N && !w->dry; r++) {
        sq_worker *k = &w->workers[r];
        if (diff)
            TRY(r, "adding the gathered differences",
                sq_backend_dequantize_add(k->be, &wr->codec, &k->wrecv, k->what, P, k->what));
        else
            TRY(r, "decoding the gathered weights", sq_wire_decode(k->be, wr, &k->wrecv, P, k->what));
    }
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Ring reduce-scatter                                                      */
/* ------------------------------------------------------------------------ */

/* gout holds the partial sum a worker is carrying: at step s, worker r
** carries partition r - 1 - s, so after N - 1 steps it holds its own. */
static int ring_reduce(sq_world *w)
{
    const int N = w->N;
    const uint64_t S = w->shard;
    const sq_wire *wr = w->single_wire;
    for (int r = 0; r < N && !w->dry; r++) {
        int c = ((r - 1) % N + N) % N;
        int rc = copy_floats(w, r, w->workers[r].gout, w->workers[r].grad + (uint64_t)c * S, S);
        if (rc) return rc;
    }
    for (int s = 0; s < N - 1; s++) {
        for (int r = 0; r < N && !w->dry; r++) {
            sq_worker *k = &w->workers[r];
            TRY(r, "encoding a partial sum", sq_wire_encode(k->be, wr, k->gout, S, NULL, &k->rsend));
        }
        for (int r = 0; r < N; r++) {
            int next = (r + 1) % N;
            int rc = sq_world_xfer(w, SQ_COLL_GRAD, wr, r, &w->workers[r].rsend, next,
                                   &w->workers[next].rrecv, S);
            if (rc) return rc;
        }
        for (int r = 0; r < N && !w->dry; r++) {
            sq_worker *k = &w->workers[r];
            int c = ((r - s - 2) % N + N) % N;
            const float *partial = (const float *)k->rrecv.codes;
            if (wr->bits == 16) {
                TRY(r, "decoding a partial sum",
                    sq_backend_from_bf16(k->be, (const uint16_t *)k->rrecv.codes, S, k->tmp));
                partial = k->tmp;
            }
            TRY(r, "adding to a partial sum",
                sq_backend_add(k->be, partial, k->grad + (uint64_t)c * S, S, k->gout));
        }
    }
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Single-level all-to-all reduce-scatter                                   */
/* ------------------------------------------------------------------------ */

/* Quantize the whole gradient once, send partition z to worker z, and let
** every worker dequantize and sum what it received, in worker order. */
static int a2a_reduce(sq_world *w, uint32_t step, sq_qbuf *chunks)
{
    const int N = w->N;
    const uint64_t S = w->shard, P = w->padded;
    const sq_wire *wr = w->single_wire;
    for (int r = 0; r < N && !w->dry; r++) {
        sq_worker *k = &w->workers[r];
        sq_rng_key key = key_of(w, step, r, SQ_SITE_GRAD_SINGLE);
        TRY(r, "encoding the gradient", sq_wire_encode(k->be, wr, k->grad, P, &key, &k->genc));
    }
    for (int r = 0; r < N; r++)
        for (int z = 0; z < N; z++) {
            sq_qbuf from = sq_wire_at(wr, &w->workers[r].genc, (uint64_t)z * S);
            sq_qbuf to = sq_wire_at(wr, &w->workers[z].grecv, (uint64_t)r * S);
            int rc = sq_world_xfer(w, SQ_COLL_GRAD, wr, r, &from, z, &to, S);
            if (rc) return rc;
        }
    for (int z = 0; z < N && !w->dry; z++) {
        sq_worker *k = &w->workers[z];
        for (int r = 0; r < N; r++) chunks[r] = sq_wire_at(wr, &k->grecv, (uint64_t)r * S);
        TRY(z, "summing the received chunks", sq_wire_sum(k->be, wr, chunks, N, S, k->gout, k->tmp));
    }
    return SQ_OK;
}

/* ------------------------------------------------------------------------ */
/* Two-level all-to-all reduce-scatter                                      */
/* ------------------------------------------------------------------------ */

/* SDP4Bit's quantized_reduce_scatter_intra_and_inter (spec section 2.3).
** With X groups of g per (partition, slice), P = X * g elements: input
** block (z, y) -- partition z, pipeline slice y -- moves to block
** y * (G * K) + (z mod G) * K + z / G, so that each slice is contiguous,
** inside it one sub-chunk per destination local index, inside that one
** piece per destination node. Then per slice: the intra-node all-to-all
** of sub-chunks, the dequantize-sum-requantize over the G local peers, the
** inter-node all-to-all of pieces, and the dequantize-sum over the K nodes
** with the inverse Hadamard.
**
** The arithmetic of every slice is done by one call per hop over the
** slices laid end to end (their groups never mix, so the bytes equal those
** of one call per slice); the copies are made slice by slice, as the
** pipelined implementation sends them. The stochastic rounding of the
** requantization numbers elements by their place in that slice-major
** buffer of padded / G elements. */
static int twolevel_reduce(sq_world *w, uint32_t step, sq_qbuf *chunks)
{
    const int G = w->topo.per_node, K = w->topo.nodes, N = w->N, pipe = w->scheme.pipe;
    const uint64_t Pad = w->padded, S = w->shard, Q = Pad / (uint64_t)G;
    const uint64_t P = S / (uint64_t)pipe;
    const sq_wire *wi = &w->scheme.grad_intra, *wo = &w->scheme.grad_inter;
    int rc;

    for (int r = 0; r < N && !w->dry; r++) {
        sq_worker *k = &w->workers[r];
        sq_rng_key key = key_of(w, step, r, SQ_SITE_GRAD_INTRA);
        TRY(r, "quantizing the gradient (first hop)",
            sq_wire_encode(k->be, wi, k->grad, Pad, &key, &k->genc));
        for (int z = 0; z < N; z++)
            for (int y = 0; y < pipe; y++) {
                uint64_t src = ((uint64_t)z * (uint64_t)pipe + (uint64_t)y) * P;
                uint64_t dst = ((uint64_t)y * (uint64_t)(G * K) + (uint64_t)(z % G) * (uint64_t)K +
                                (uint64_t)(z / G)) * P;
                sq_qbuf from = sq_wire_at(wi, &k->genc, src), to = sq_wire_at(wi, &k->gswz, dst);
                if ((rc = sq_world_xfer(w, SQ_COLL_GRAD, wi, r, &from, r, &to, P))) return rc;
            }
    }
    /* intra-node hop: worker (k, l) sends sub-chunk l2 of each slice to (k, l2) */
    for (int y = 0; y < pipe; y++)
        for (int r = 0; r < N; r++) {
            int node = r / G, l = r % G;
            for (int l2 = 0; l2 < G; l2++) {
                int dst = node * G + l2;
                sq_qbuf from = sq_wire_at(wi, &w->workers[r].gswz,
                                          ((uint64_t)y * (uint64_t)(G * K) + (uint64_t)l2 * (uint64_t)K) * P);
                sq_qbuf to = sq_wire_at(wi, &w->workers[dst].grecv,
                                        (uint64_t)l * Q + (uint64_t)y * (uint64_t)K * P);
                if ((rc = sq_world_xfer(w, SQ_COLL_GRAD, wi, r, &from, dst, &to, (uint64_t)K * P)))
                    return rc;
            }
        }
    for (int r = 0; r < N && !w->dry; r++) {
        sq_worker *k = &w->workers[r];
        for (int j = 0; j < G; j++) chunks[j] = sq_wire_at(wi, &k->grecv, (uint64_t)j * Q);
        sq_rng_key key = key_of(w, step, r, SQ_SITE_GRAD_INTER);
        TRY(r, "summing and requantizing the intra-node chunks",
            sq_wire_sum_requant(k->be, wi, chunks, G, Q, wo, &key, &k->greq, k->tmp, k->tmp2));
    }
    /* inter-node hop: worker (k, l) sends piece k2 of each slice to (k2, l) */
    for (int y = 0; y < pipe; y++)
        for (int r = 0; r < N; r++) {
            int node = r / G, l = r % G;
            for (int k2 = 0; k2 < K; k2++) {
                int dst = k2 * G + l;
                sq_qbuf from = sq_wire_at(wo, &w->workers[r].greq,
                                          ((uint64_t)y * (uint64_t)K + (uint64_t)k2) * P);
                sq_qbuf to = sq_wire_at(wo, &w->workers[dst].grecv2,
                                        (uint64_t)node * S + (uint64_t)y * P);
                if ((rc = sq_world_xfer(w, SQ_COLL_GRAD, wo, r, &from, dst, &to, P))) return rc;
            }
        }
    for (int r = 0; r < N && !w->dry; r++) {
        sq_worker *k = &w->workers[r];
        for (int j = 0; j < K; j++) chunks[j] = sq_wire_at(wo, &k->grecv2, (uint64_t)j * S);
        TRY(r, "summing the inter-node chunks",
            sq_wire_sum(k->be, wo, chunks, K, S, k->gout, k->tmp));
    }
    return SQ_OK;
}

int sq_world_reduce_grads(sq_world *w, uint32_t step)
{
    if (w->grad_path == SQ_GRAD_NONE)
        return w->dry ? SQ_OK : copy_floats(w, 0, w->workers[0].gout, w->workers[0].grad, w->padded);
    if (w->grad_path == SQ_GRAD_RING) return ring_reduce(w);
    sq_qbuf *chunks = malloc((size_t)w->N * sizeof *chunks);
    if (!chunks) {
        sq_world_set_error(w, "out of memory");
        return SQ_ERR_NOMEM;
    }
    int rc = w->grad_path == SQ_GRAD_A2A ? a2a_reduce(w, step, chunks)
                                         : twolevel_reduce(w, step, chunks);
    free(chunks);
    return rc;
}
