"""Philox keys (sq_rng_key) and element counts: what shardq.codec and
shardq.plugin both take, below both so that neither imports the other."""
import operator

import numpy as np

from ._arrays import as_output
from ._lib import ffi, lib, error

__all__ = ["Key"]


def _count(n, name="n"):
    """n as a non-negative int (an element count)."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError("%s: needs an integer, got %s" % (name, type(n).__name__)) from None
    if n < 0 or n >= 1 << 64:
        raise ValueError("%s: %d is not an element count (0 to 2^64-1)" % (name, n))
    return n


_SITES = {"weight": 0, "grad_intra": 1, "grad_inter": 2, "grad_single": 3}


class Key:
    """The key of stochastic rounding, as the C API takes it (sq_rng_key):
    the run's seed (0..2^64-1), the training step (0..2^32-1), the emulated
    worker (0..2^24-1) and the quantization site: "weight", "grad_intra",
    "grad_inter", "grad_single" (or with '-' as the command writes them) or
    a number 0..255. Out-of-range fields raise ArgumentError."""

    __slots__ = ("_k",)

    def __init__(self, seed, step=0, worker=0, site="weight"):
        if isinstance(site, str):
            name = site.replace("-", "_")
            if name not in _SITES:
                raise error(lib.SQ_ERR_ARG, "Key: unknown site '%s' (weight, grad_intra, "
                            "grad_inter, grad_single or 0..255)" % site)
            site = _SITES[name]
        k = ffi.new("sq_rng_key *")
        for field, v, top in (("seed", seed, 1 << 64), ("step", step, 1 << 32),
                              ("worker", worker, 1 << 24), ("site", site, 256)):
            try:
                v = operator.index(v)
            except TypeError:
                raise TypeError("Key: %s needs an integer, got %s"
                                % (field, type(v).__name__)) from None
            if not 0 <= v < top:
                raise error(lib.SQ_ERR_ARG, "Key: %s=%d is out of range (0 to %d)"
                            % (field, v, top - 1))
            setattr(k, field, v)
        self._k = k

    seed = property(lambda self: int(self._k.seed))
    step = property(lambda self: int(self._k.step))
    worker = property(lambda self: int(self._k.worker))
    site = property(lambda self: int(self._k.site), doc="the site as its number")

    @property
    def site_name(self):
        """The site's name, or its number as a string past the named ones."""
        for name, v in _SITES.items():
            if v == self.site:
                return name
        return str(self.site)

    def _tuple(self):
        return (self.seed, self.step, self.worker, self.site)

    def uniform(self, first, n, out=None):
        """The uniforms in [0, 1) that elements first .. first+n-1 use for
        stochastic rounding (sq_uniform_n), as float32; into out when given
        (a float32 array or CPU tensor of n elements)."""
        first, n = _count(first, "first"), _count(n)
        if out is None:
            out = np.empty(n, dtype=np.float32)
        p, _, m = as_output(out, "float", "out")
        if m != n:
            raise ValueError("uniform: out holds %d elements, n is %d" % (m, n))
        if n:
            lib.sq_uniform_n(self._k, first, n, p)
        return out

    def __eq__(self, other):
        return isinstance(other, Key) and other._tuple() == self._tuple()

    def __hash__(self):
        return hash(self._tuple())

    def __repr__(self):
        return "Key(seed=%d, step=%d, worker=%d, site=%r)" % (
            self.seed, self.step, self.worker,
            self.site_name if self.site < len(_SITES) else self.site)

    def __reduce__(self):
        return (Key, self._tuple())
