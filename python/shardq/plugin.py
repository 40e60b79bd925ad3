"""Plug-in codecs from Python (shardq/plugin.h): a codec written in Python,
registered with the library so that every codec consumer takes it, and the
codecs of shared objects.

    def encode(x, key):          # x: n float32 values (finite), read-only;
        ...                      # key: a shardq.Key when stochastic, else None
        return codes, scales, offsets   # bytes-like, sizes(n) bytes each
    def decode(codes, scales, offsets, n):  # uint8 arrays
        return values                       # n float32 values
    def sizes(n):
        return code_bytes, scale_bytes, offset_bytes

    c = shardq.codec.register("mine", encode=encode, decode=decode, sizes=sizes,
                              group=32, stochastic=True)
    q = shardq.quantize(x, c, shardq.Key(1))           # Codec("kind=plugin:mine")
    s = shardq.Scheme("sdp4bit", set=["grad.inter.kind=plugin:mine", "grad.hadamard=0"])
    w = shardq.World("2x2", s, elements=n)

The library does what it does for a C plug-in around these
(docs/plugins.md): NaN and Inf never reach encode, a decoded value that is
not finite is RangeError, sums are decoded and added in fp32 in chunk order,
and a stochastic codec's uniforms are key.uniform(0, len(x)) (the ones the
built-in kinds' stochastic rounding draws). An exception raised in a
callback stops the library's call, which then raises that exception (its
cause is the library's sentence). Codecs stay registered for the life of
the process; the registry holds 64 at most.

SHARDQ_PLUGINS (colon-separated shared objects) is loaded when the package
is imported, as the shardq command loads it.
"""
import operator
import os
import warnings

import numpy as np

from ._lib import ffi, lib, check, new_error, error, ConflictError, callback_failed, take_pending
from ._key import Key

__all__ = ["register", "load_plugin", "plugins"]

_codecs = {}  # name -> _PyCodec, alive as long as the library may call it


class _PyCodec:
    def __init__(self, name, encode, decode, sizes):
        self.name, self.encode, self.decode, self.sizes = name, encode, decode, sizes
        self.codec = None  # the sq_codec, once registered
        self.handle = ffi.new_handle(self)

    def part_sizes(self, n):
        c = self.codec
        return (lib.sq_codec_code_bytes(c, n), lib.sq_codec_scale_bytes(c, n),
                lib.sq_codec_offset_bytes(c, n))


def _to_bytes(part, name, n, want, codec):
    """A part encode returned, as bytes of exactly want."""
    if part is None:
        b = b""
    elif isinstance(part, (bytes, bytearray, memoryview)):
        b = bytes(part)
    else:
        b = np.ascontiguousarray(part).view(np.uint8).reshape(-1).tobytes()
    if len(b) != want:
        raise ValueError("plug-in codec %s: encode returned %d bytes of %s for n=%d; its sizes "
                         "say %d" % (codec, len(b), name, n, want))
    return b


@ffi.def_extern()
def _sq_py_sizes(ctx, n, out):
    c = ffi.from_handle(ctx)
    try:
        s = c.sizes(int(n))
        if len(s) != 3:
            raise ValueError("plug-in codec %s: sizes(%d) returned %d values, not 3"
                             % (c.name, n, len(s)))
        for i in range(3):
            v = operator.index(s[i])
            if v < 0:
                raise ValueError("plug-in codec %s: sizes(%d) gave %d bytes" % (c.name, n, v))
            out[i] = v
    except BaseException as e:  # noqa: B902  (raised by the call that needed the sizes)
        callback_failed(e)
        for i in range(3):
            out[i] = 0


@ffi.def_extern()
def _sq_py_encode(ctx, x, n, key, u, codes, scales, offsets):
    c = ffi.from_handle(ctx)
    try:
        n = int(n)
        xs = np.frombuffer(ffi.buffer(x, 4 * n), dtype=np.float32).copy()
        xs.flags.writeable = False
        k = None
        if key != ffi.NULL:
            k = Key(key.seed, key.step, key.worker, key.site)
        parts = c.encode(xs, k)
        if not isinstance(parts, (tuple, list)) or len(parts) != 3:
            raise TypeError("plug-in codec %s: encode must return (codes, scales, offsets)"
                            % c.name)
        for part, ptr, size, name in zip(parts, (codes, scales, offsets), c.part_sizes(n),
                                         ("codes", "scales", "offsets")):
            b = _to_bytes(part, name, n, size, c.name)
            if size:
                ffi.memmove(ptr, b, size)
        return 0
    except BaseException as e:  # noqa: B902
        callback_failed(e)
        return lib.SQ_ERR_INTERRUPTED


@ffi.def_extern()
def _sq_py_decode(ctx, codes, scales, offsets, n, out):
    c = ffi.from_handle(ctx)
    try:
        n = int(n)

        def grab(ptr, size):
            if not size:
                return np.empty(0, np.uint8)
            a = np.frombuffer(ffi.buffer(ptr, size), dtype=np.uint8).copy()
            a.flags.writeable = False
            return a
        cb, sb, ob = c.part_sizes(n)
        y = c.decode(grab(codes, cb), grab(scales, sb), grab(offsets, ob), n)
        y = np.ascontiguousarray(np.asarray(y, dtype=np.float32).reshape(-1))
        if y.size != n:
            raise ValueError("plug-in codec %s: decode returned %d values for n=%d"
                             % (c.name, y.size, n))
        if n:
            ffi.memmove(out, ffi.from_buffer(y), 4 * n)
        return 0
    except BaseException as e:  # noqa: B902
        callback_failed(e)
        return lib.SQ_ERR_INTERRUPTED


def register(name, encode, decode, sizes, group=1, stochastic=False, about=None):
    """Registers a codec written in Python as kind=plugin:NAME and returns
    its shardq.Codec (shardq.codec.register; shardq.plugin.register, below
    shardq.codec, returns the spec "kind=plugin:NAME").

    name: 1 to 31 of a-z, 0-9 and _, starting with a letter, not taken.
    encode(x, key) -> (codes, scales, offsets): x the n float32 values to
    encode (read-only), key a shardq.Key when stochastic (its
    key.uniform(0, n) are the uniforms of docs/conventions.md), else None;
    each part bytes-like (bytes, or a NumPy array of any dtype, read as its
    bytes; None for an empty one) of exactly the size sizes(n) gives.
    decode(codes, scales, offsets, n) -> n float32 values (any array-like),
    the parts as read-only uint8 arrays.
    sizes(n) -> (code bytes, scale bytes, offset bytes) of n elements:
    additive over whole units of lcm(group, 8) elements (checked now).
    group: elements per group, 1 to 2^40, the unit worlds align shards to.
    stochastic: encode needs a key (a key is then required by quantize).
    A refused codec raises the library's error (SpecError, ConflictError)."""
    if not isinstance(name, str):
        raise TypeError("register: name needs a string, got %s" % type(name).__name__)
    for what, f in (("encode", encode), ("decode", decode), ("sizes", sizes)):
        if not callable(f):
            raise TypeError("register: %s needs a callable, got %s" % (what, type(f).__name__))
    group = operator.index(group)
    if not 1 <= group <= 1 << 40:
        raise error(lib.SQ_ERR_SPEC, "register: group=%d: must be 1 to 2^40" % group)
    if name in _codecs:
        raise ConflictError(lib.SQ_ERR_CONFLICT, "plug-in codec %s: a codec of that name is "
                            "already registered (from python)" % name)
    pc = _PyCodec(name, encode, decode, sizes)
    d = ffi.new("sq_plugin_codec *")
    keep = [ffi.new("char[]", name.encode())]
    d.abi = lib.SQ_PLUGIN_ABI
    d.name = keep[0]
    if about is not None:
        keep.append(ffi.new("char[]", str(about).encode()))
        d.about = keep[-1]
    d.group = group
    d.stochastic = 1 if stochastic else 0
    d.ctx = pc.handle
    d.sizes = lib._sq_py_sizes
    d.encode = lib._sq_py_encode
    d.decode = lib._sq_py_decode
    err = new_error()
    take_pending()
    rc = lib.sq_plugin_register_from(d, b"python", err)
    raised = take_pending()
    if raised is not None:
        raise raised
    check(rc, err)
    pc.codec = ffi.new("sq_codec *")
    check(lib.sq_codec_from_plugin(rc, pc.codec))
    _codecs[name] = pc
    return "kind=plugin:%s" % name


def load_plugin(path):
    """Loads the plug-in codecs of the shared object at path
    (sq_plugin_load): returns how many it registered (0 for a file loaded
    before). A missing file is NotFoundError, one dlopen refuses IOFailure,
    one without the entry points FileFormatError, another interface version
    SpecError -- each naming the file."""
    err = new_error()
    return check(lib.sq_plugin_load(os.fsencode(path), err), err)


def plugins():
    """The registered plug-in codecs, in id order: dicts of id, name, group,
    stochastic, sum_composes, about and source (a file, "python" or None)."""
    out = []
    for i in range(1, lib.sq_plugin_count() + 1):
        d = lib.sq_plugin_get(i)
        src = lib.sq_plugin_source(i)
        out.append({"id": i, "name": ffi.string(d.name).decode(), "group": int(d.group),
                    "stochastic": bool(d.stochastic), "sum_composes": bool(d.sum_composes),
                    "about": ffi.string(d.about).decode() if d.about else None,
                    "source": ffi.string(src).decode(errors="replace") if src else None})
    return out


def _load_env():
    env = os.environ.get("SHARDQ_PLUGINS")
    if not env:
        return
    err = new_error()
    if lib.sq_plugin_load_list(os.fsencode(env), err) < 0:
        warnings.warn("SHARDQ_PLUGINS: %s" % ffi.string(lib.sq_error_message(err)).decode(
            errors="replace"), RuntimeWarning)


_load_env()
