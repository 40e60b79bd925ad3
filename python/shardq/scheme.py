"""Schemes and topologies: what the sharded world runs, and on how many
workers.

A scheme is a preset of `shardq schemes` with knobs set on top, exactly as
`shardq replay --scheme P --set KEY=VALUE ...` builds it: the preset, each
assignment in order, then the library's validation, so a scheme that the
command refuses is refused here with the same sentence (SpecError).
"""
from ._lib import ffi, lib, check, new_error, cstr


def _text(buf):
    return ffi.string(buf).decode()


def _knob_key(name):
    # Python names cannot hold dots, and no knob has an underscore
    return name.replace("_", ".")


def _assignments(set, knobs):
    """The "key=value" texts of set (a "k=v" string, a list of them, or a
    dict) and of the keyword knobs, in that order."""
    out = []
    if set is None:
        pass
    elif isinstance(set, str):
        out.append(set)
    elif isinstance(set, dict):
        out.extend("%s=%s" % (k, _value(v)) for k, v in set.items())
    else:
        for a in set:
            if not isinstance(a, str):
                raise TypeError("set: expected \"key=value\" strings, got %r" % (a,))
            out.append(a)
    out.extend("%s=%s" % (_knob_key(k), _value(v)) for k, v in knobs.items())
    return out


def _value(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


class Scheme:
    """A quantization scheme: Scheme("sdp4bit", set=["grad.inter.bits=2"]),
    or with knobs as keywords, dots written as underscores:
    Scheme("sdp4bit", grad_inter_bits=2). `set` also takes one "key=value"
    string or a dict. Assignments apply in order (`set` first), then the
    whole is validated; an unknown preset or key, a value out of range or a
    combination the world cannot run raises SpecError with the library's
    sentence.

    A Scheme is immutable: `with_(...)` gives a new one with more knobs."""

    __slots__ = ("_s",)

    def __init__(self, preset="sdp4bit", set=None, **knobs):
        if isinstance(preset, Scheme):
            self._s = preset._copy()
        else:
            if not isinstance(preset, str):
                raise TypeError("preset: expected a preset name, got %s" % type(preset).__name__)
            self._s = ffi.new("sq_scheme *")
            err = new_error()
            check(lib.sq_scheme_preset(cstr(preset), self._s, err), err)
        err = new_error()
        for a in _assignments(set, knobs):
            check(lib.sq_scheme_set(self._s, cstr(a), err), err)
        check(lib.sq_scheme_validate(self._s, err), err)

    @classmethod
    def _wrap(cls, cdata):
        s = cls.__new__(cls)
        s._s = ffi.new("sq_scheme *")
        ffi.memmove(s._s, cdata, ffi.sizeof("sq_scheme"))
        return s

    def _copy(self):
        c = ffi.new("sq_scheme *")
        ffi.memmove(c, self._s, ffi.sizeof("sq_scheme"))
        return c

    def with_(self, set=None, **knobs):
        """A copy with more knobs set (same rules as the constructor)."""
        return Scheme(self, set=set, **knobs)

    @property
    def preset(self):
        """The preset it started from."""
        return _text(self._s.preset)

    @property
    def text(self):
        """The canonical "key=value,..." text of every knob (sq_scheme_format),
        as the store's runs.scheme holds it."""
        buf = ffi.new("char[]", lib.SQ_SCHEME_STRLEN)
        n = lib.sq_scheme_format(self._s, buf, lib.SQ_SCHEME_STRLEN)
        if n >= lib.SQ_SCHEME_STRLEN:
            buf = ffi.new("char[]", n + 1)
            lib.sq_scheme_format(self._s, buf, n + 1)
        return _text(buf)

    def get(self, key):
        """The value of knob key as text ("4", "sr", "twolevel"); KeyError
        for a key that is not a knob (Scheme.knobs())."""
        if key not in _knob_keys():
            raise KeyError("%s: not a scheme knob (known: %s)" % (key, ", ".join(_knob_keys())))
        buf = ffi.new("char[]", 256)
        lib.sq_scheme_get(self._s, cstr(key), buf, 256)
        return _text(buf)

    def as_dict(self):
        """Every knob and its value, in the library's order."""
        return {k: self.get(k) for k in _knob_keys()}

    @property
    def per_tensor(self):
        """True when a knob sizes something per tensor (DeepSpeed's qgZ or
        qwZ rules, fallbacks): a world then needs the tensor's shape."""
        return bool(lib.sq_scheme_per_tensor(self._s))

    def for_tensor(self, topo, shape):
        """The concrete scheme one tensor of this shape runs under in a world
        of its own on topo (sq_scheme_for_tensor): per-tensor rules resolved,
        the reference's fallbacks applied; itself when there are none."""
        t = as_topo(topo)
        dims = [int(d) for d in shape]
        c_shape = ffi.new("uint64_t[]", dims or [0])
        out = ffi.new("sq_scheme *")
        err = new_error()
        check(lib.sq_scheme_for_tensor(self._s, t, c_shape, len(dims), out, err), err)
        return Scheme._wrap(out)

    @staticmethod
    def presets():
        """The preset names, in the order `shardq schemes` lists them."""
        return [_text(lib.sq_scheme_presets[i]) for i in range(lib.sq_scheme_npresets)]

    @staticmethod
    def knobs():
        """[(key, values it accepts, help)] of every knob."""
        return [(_text(k.key), _text(k.values), _text(k.help))
                for k in (lib.sq_scheme_knobs[i] for i in range(lib.sq_scheme_nknobs))]

    def __eq__(self, other):
        return isinstance(other, Scheme) and self.preset == other.preset and \
            self.text == other.text

    def __hash__(self):
        return hash((self.preset, self.text))

    def __repr__(self):
        return "Scheme(%r, set=%r)" % (self.preset, self.text)


_KNOB_KEYS = []


def _knob_keys():
    if not _KNOB_KEYS:
        _KNOB_KEYS.extend(k for k, _, _ in Scheme.knobs())
    return _KNOB_KEYS


def as_scheme(s):
    """A Scheme from a Scheme or a preset name."""
    if isinstance(s, Scheme):
        return s
    if isinstance(s, str):
        return Scheme(s)
    raise TypeError("scheme: expected a Scheme or a preset name, got %s" % type(s).__name__)


def as_topo(topo):
    """An sq_topo * from "KxG", (K, G) or a Topo."""
    t = ffi.new("sq_topo *")
    if isinstance(topo, Topo):
        topo = (topo.nodes, topo.per_node)
    if isinstance(topo, str):
        err = new_error()
        check(lib.sq_topo_parse(cstr(topo), t, err), err)
        return t
    try:
        k, g = topo
    except (TypeError, ValueError):
        raise TypeError("topo: expected \"KxG\" or (K, G), got %r" % (topo,)) from None
    # through the parser, so that the limits are the library's
    return as_topo("%dx%d" % (int(k), int(g)))


class Topo(tuple):
    """K nodes x G workers per node: Topo("2x4"), Topo(2, 4) or Topo((2, 4))."""

    def __new__(cls, nodes, per_node=None):
        t = as_topo(nodes if per_node is None else (nodes, per_node))
        return tuple.__new__(cls, (t.nodes, t.per_node))

    nodes = property(lambda self: self[0])
    per_node = property(lambda self: self[1])
    workers = property(lambda self: self[0] * self[1])

    def __str__(self):
        return "%dx%d" % self

    def __repr__(self):
        return "Topo(%r)" % str(self)


def cstring(s):
    """A char[] cdata holding s, for a char * field of a struct (None stays
    NULL); the caller keeps it alive while the struct points to it."""
    if s is None:
        return ffi.NULL
    return ffi.new("char[]", cstr(s))
