/*
** pertensor.c -- the per-tensor rules of the reference systems: group sizes
** that depend on a tensor's shape and the tensors a reference does not
** quantize at all.
**
** DeepSpeed's ZeRO++ decides per parameter: qgZ sizes its gradient groups
** from the gradient's shape and sends some gradients unquantized; qwZ sizes
** its weight blocks from the partition's length. A scheme with such rules
** names the rule; sq_scheme_for_tensor turns it into the concrete scheme of
** one tensor that is its own world. The rules are transcribed from the
** reference (docs/schemes.md, the source column). PowerSGD's matrix view
** of a tensor (shape[0] x numel / shape[0], as PyTorch's hook) is set here
** too.
*/
#include "shardq/world.h"

#include <string.h>

int sq_scheme_per_tensor(const sq_scheme *s)
{
    if (!s) return 0;
    if (!sq_wire_raw(&s->weight) && s->weight.rule != SQ_GROUP_FIXED) return 1;
    if (!sq_wire_raw(&s->grad_intra) && s->grad_intra.rule != SQ_GROUP_FIXED) return 1;
    if (!sq_wire_raw(&s->grad_inter) && s->grad_inter.rule != SQ_GROUP_FIXED) return 1;
    return s->grad_fallback != SQ_FALLBACK_NONE;
}

/* qgZ (all_to_all_quant_reduce): max(shape[0], shape[1], N) groups of
** floor(numel / groups) elements; the reduced chunk keeps that element
** count on the inter-node hop. 0 when the tensor has fewer elements than
** groups. */
static uint64_t qgz_group(const uint64_t *shape, uint64_t numel, uint64_t N)
{
    uint64_t groups = shape[0] > shape[1] ? shape[0] : shape[1];
    if (N > groups) groups = N;
    return numel / groups;
}

/* qwZ (CUDAQuantizer.quantize): start from ceil(len / 8000) blocks, take
** the first count whose blocks hold a multiple of 8 elements, then double
** it while the doubled count still divides into multiples of 8 and blocks
** would stay above 8000 elements. The reference asserts when len is not a
** multiple of 8; here len is rounded up to one first (the shard's padding). */
static uint64_t qwz_group(uint64_t len)
{
    const uint64_t target = 8000;
    len = (len + 7) / 8 * 8;
    uint64_t groups = (len + target - 1) / target;
    while (groups < len) {
        if (len % (8 * groups) == 0) break;
        groups++;
    }
    while (len % (8 * groups * 2) == 0 && len / groups > target) groups *= 2;
    return len / groups;
}

int sq_scheme_for_tensor(const sq_scheme *s, const sq_topo *topo, const uint64_t *shape, int ndim,
                         sq_scheme *out, sq_error *err)
{
    if (!s || !topo || !out || (ndim > 0 && !shape))
        return sq_error_set(err, SQ_ERR_ARG, "sq_scheme_for_tensor: NULL argument");
    *out = *s;
    if (s->grad_mode == SQ_GRAD_POWERSGD && ndim >= 1 && shape[0] > 0) {
        /* PyTorch's powerSGD_hook: tensor.view(shape[0], -1) */
        uint64_t numel = 1;
        for (int d = 0; d < ndim; d++)
            if (__builtin_mul_overflow(numel, shape[d], &numel))
                return sq_error_set(err, SQ_ERR_ARG, "tensor shape: too many elements");
        out->psgd_view_cols = numel / shape[0];
    }
    if (!sq_scheme_per_tensor(s)) return SQ_OK;
    if (ndim < 1) return sq_error_set(err, SQ_ERR_ARG, "tensor shape: no dimensions");
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(numel, shape[d], &numel))
            return sq_error_set(err, SQ_ERR_ARG, "tensor shape: too many elements");
    if (numel == 0) return sq_error_set(err, SQ_ERR_ARG, "tensor shape: no elements");
    const uint64_t N = (uint64_t)sq_topo_workers(topo);
    if (N < 1 || topo->nodes < 1)
        return sq_error_set(err, SQ_ERR_ARG, "topology %dx%d: no workers", topo->nodes,
                            topo->per_node);

    /* qgZ's fallbacks (stage3.py __avg_scatter_grads, all_to_all_quant_reduce):
    ** one node, a 1-D tensor, or numel not a multiple of 2N. */
    if (s->grad_fallback == SQ_FALLBACK_QGZ &&
        (topo->nodes == 1 || ndim == 1 || numel % (2 * N) != 0)) {
        out->grad_mode = SQ_GRAD_RING;
        memset(&out->grad_intra, 0, sizeof out->grad_intra);
        out->grad_intra.bits = 32;
        out->grad_intra.codec = sq_codec_default();
        out->grad_inter = out->grad_intra;
        out->grad_dtype = SQ_GRAD_FP32;
    }
    out->grad_fallback = SQ_FALLBACK_NONE;

    sq_wire *hops[2] = {&out->grad_intra, &out->grad_inter};
    for (int h = 0; h < 2; h++) {
        sq_wire *w = hops[h];
        if (w->rule == SQ_GROUP_FIXED) continue;
        if (!sq_wire_raw(w)) {
            uint64_t g = ndim >= 2 ? qgz_group(shape, numel, N) : 0;
            if (g == 0)
                return sq_error_set(err, SQ_ERR_SPEC,
                                    "grad.group=qgz: a tensor of %d dimension%s and %llu "
                                    "elements on %llu workers has no qgZ group (DeepSpeed sends "
                                    "it unquantized: set grad.fallback=qgz)",
                                    ndim, ndim == 1 ? "" : "s", (unsigned long long)numel,
                                    (unsigned long long)N);
            w->codec.group = g;
        }
        w->rule = SQ_GROUP_FIXED;
    }
    if (out->weight.rule != SQ_GROUP_FIXED) {
        /* DeepSpeed partitions a parameter into N slices of ceil(numel / N) */
        if (!sq_wire_raw(&out->weight)) out->weight.codec.group = qwz_group((numel + N - 1) / N);
        out->weight.rule = SQ_GROUP_FIXED;
    }
    return SQ_OK;
}
