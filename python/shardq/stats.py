"""Error statistics and byte accounting, as `shardq replay` computes and
stores them.

Every figure comes from the library's own functions (sq_erracc_*,
sq_step_frac, sq_bytes_rows), so a statistic computed here equals the one
replay stores to the bit: a Stats keeps its fp64 accumulator, and
Stats.combine merges accumulators exactly as replay merges a step's params
into the step's row.
"""
from ._lib import ffi, lib

STAT_FIELDS = ("n", "rel_l2", "mse", "max_abs", "snr_db", "cosine", "mean_signed",
               "frac_zeroed", "frac_clipped")

COLLECTIVES = ("weight_allgather", "grad_reducescatter")
LINKS = ("intra", "inter")
TRAFFIC_FIELDS = ("sent_codes", "sent_meta", "recv_codes", "recv_meta", "sent_elems",
                  "messages", "sent_params")


class Stats:
    """How far a result is from the exact fp64 one (metrics.h): n elements,
    rel_l2 (sqrt of the NMSE), mse, max_abs, snr_db, cosine, mean_signed
    (bias), frac_zeroed, and frac_clipped (the fraction of the elements that
    the path's first quantization clipped, NaN when not measured) -- the
    columns of the store's step_metrics and tensor_stats."""

    __slots__ = ("_acc", "clipped", "clipped_of") + STAT_FIELDS

    def __init__(self, acc, clipped=0, clipped_of=0):
        self._acc = ffi.new("sq_erracc *")
        ffi.memmove(self._acc, acc, ffi.sizeof("sq_erracc"))
        self.clipped, self.clipped_of = int(clipped), int(clipped_of)
        s = lib.sq_erracc_finish(self._acc)
        self.n = s.n
        for f in STAT_FIELDS[1:-1]:
            setattr(self, f, getattr(s, f))
        self.frac_clipped = lib.sq_step_frac(self.clipped, self.clipped_of)

    @classmethod
    def combine(cls, stats):
        """The statistics of several pieces together (params of one step,
        steps of a run): their accumulators merged in the order given and
        their clipped counts summed, as replay builds a step's row and the
        run's totals."""
        acc = ffi.new("sq_erracc *")
        lib.sq_erracc_init(acc)
        clipped = of = 0
        for s in stats:
            lib.sq_erracc_merge(acc, s._acc)
            clipped += s.clipped
            of += s.clipped_of
        return cls(acc, clipped, of)

    def as_dict(self):
        return {f: getattr(self, f) for f in STAT_FIELDS}

    def __eq__(self, other):
        # as stored: NaN (not measured) equals NaN
        if not isinstance(other, Stats):
            return NotImplemented
        return all(_same(getattr(self, f), getattr(other, f)) for f in STAT_FIELDS)

    __hash__ = None

    def __repr__(self):
        return "Stats(%s)" % ", ".join("%s=%r" % (f, getattr(self, f)) for f in STAT_FIELDS)


def _same(a, b):
    return a == b or (a != a and b != b)


def traffic_dict(t):
    """{collective: {link: {field: int}}} of an sq_traffic."""
    return {c: {l: {f: int(getattr(t.t[ci][li], f)) for f in TRAFFIC_FIELDS}
                for li, l in enumerate(LINKS)}
            for ci, c in enumerate(COLLECTIVES)}


def bits(sent_codes, sent_meta, of):
    """8 (codes + meta) / of, in fp64 as the store computes bits_per_elem and
    bits_per_param; None (NULL) when of is 0."""
    if not of:
        return None
    return 8.0 * (float(sent_codes) + float(sent_meta)) / float(of)


def bytes_row_dict(r):
    """One sq_bytes_row as the store's bytes table holds it."""
    d = {"collective": ffi.string(r.collective).decode(), "link": ffi.string(r.link).decode()}
    for f in TRAFFIC_FIELDS:
        d[f] = int(getattr(r, f))
    d["bits_per_elem"] = bits(r.sent_codes, r.sent_meta, r.sent_elems)
    d["bits_per_param"] = bits(r.sent_codes, r.sent_meta, r.sent_params)
    return d


def bytes_rows_of(traffic):
    """The four rows of an sq_traffic * total (sq_bytes_rows), collective
    by collective, link by link."""
    rows = ffi.new("sq_bytes_row[]", lib.SQ_NCOLL * lib.SQ_NLINK)
    lib.sq_bytes_rows(traffic, rows)
    return [bytes_row_dict(rows[i]) for i in range(len(rows))]
