"""The codecs of libshardq from Python: specs, Philox keys, quantized
buffers, the shardq.codec/1 container and the fused codec operations.

Memory. On the CPU every operation reads and writes the caller's memory by
pointer (shardq._arrays): a C-contiguous float32 NumPy array or CPU tensor
is never copied; an input of another dtype or layout is converted once (a
copy); an output (`out=`) must already be a contiguous, writable float32
array or tensor, or TypeError is raised. A result is `out` itself when it
is given; `dequantize_add(q, ref, out=ref)` updates ref in place. New
results on the CPU are NumPy arrays (torch.from_numpy shares them).

CUDA. Given torch CUDA tensors (or a Quantized whose arrays are CUDA
tensors), the same operation runs through the CUDA backend of libshardq on
the tensors' device memory, enqueued on the caller's current torch stream
(sq_backend_set_stream), and returns when it is done, with the status the
CPU would give; the bytes equal the CPU path's. New results are CUDA
tensors allocated by torch on that stream. Every argument of one call must
be on the same device.

Errors are the library's (shardq._lib): a bad spec raises SpecError with
its sentence, NaN or Inf in an input NonFiniteError naming the element,
a result past fp32 (or a scale past its 16-bit dtype) RangeError.
"""
import atexit
import operator
import os
import threading
from contextlib import contextmanager

import numpy as np

from ._arrays import (as_input, as_output, is_tensor, is_cuda, numel, torch,
                      empty_like_input, _torch_dtype)
from ._lib import ffi, lib, check, error, new_error, cstr, take_pending
from ._key import Key, _count  # noqa: F401 (Key is shardq.codec.Key)
from . import plugin as _plugin

__all__ = ["Codec", "Key", "Quantized", "quantize", "dequantize", "quantize_diff",
           "dequantize_add", "dequant_sum", "dequant_sum_requant", "hadamard",
           "to_bf16", "from_bf16", "register", "load_plugin", "plugins"]

def _kind_names():
    """The kinds' names as the library spells them (sq_codec_kind_name, the
    one list): "sym", "minmax", ... "plugin" (written kind=plugin:NAME)."""
    names = []
    while lib.sq_codec_kind_name(len(names)) != ffi.NULL:
        names.append(ffi.string(lib.sq_codec_kind_name(len(names))).decode())
    return tuple(names)


KINDS = _kind_names()
_CODEC_KEYS = ("kind", "bits", "group", "round", "hadamard", "levels", "scale", "keep")
_INT_KEYS = ("bits", "group", "hadamard", "keep")


# ---------------------------------------------------------------------------
# Codec specs
# ---------------------------------------------------------------------------

class Codec:
    """A codec: how a flat float32 buffer becomes codes and metadata.

    Codec("bits=4,group=128,round=sr,hadamard=32") parses a spec as
    sq_codec_parse_v2 does (every key optional, the defaults filling in);
    Codec(bits=4, group=128, round="sr", kind="sym", hadamard=0,
    levels="sdp4bit", scale="fp32") takes the same keys as keywords; both
    together add the keywords to the spec. A bad spec raises SpecError with
    the library's sentence. Codecs are immutable, compare and hash by their
    canonical spec (`.spec`), and have the keys as attributes (kind, bits,
    group, round, hadamard, levels, scale, keep). kind="topk" or "randk"
    (with keep=) sends the indices and values of keep elements per group;
    kind="bf16" or "fp16" is a 16-bit cast without scales
    (docs/conventions.md).

    A plug-in codec (shardq.codec.register, shardq.load_plugin) is
    Codec("kind=plugin:NAME"): its spec is "kind=plugin:NAME,group=G", its
    bits, levels and scale are None, round is "sr" when it is stochastic,
    and its scales and offsets are bytes of its own layout (uint8).
    """

    __slots__ = ("_c", "_spec", "_fields")

    def __init__(self, spec=None, **keys):
        if isinstance(spec, Codec):
            spec = spec.spec
        if spec is not None and not isinstance(spec, str):
            raise TypeError("Codec: a spec is a string such as 'bits=4,group=128', got %s"
                            % type(spec).__name__)
        parts = [spec] if spec else []
        for k, v in keys.items():
            if k not in _CODEC_KEYS:
                raise TypeError("Codec: unknown key '%s' (keys: %s)" % (k, ", ".join(_CODEC_KEYS)))
            if isinstance(v, bool) or not isinstance(v, (int, str)):
                raise TypeError("Codec: %s needs %s, got %s" % (
                    k, "an integer" if k in _INT_KEYS else "a string", type(v).__name__))
            if isinstance(v, str) and ("," in v or "=" in v):
                raise error(lib.SQ_ERR_SPEC, "%s: '%s' is not a value" % (k, v))
            parts.append("%s=%s" % (k, v))
        c = ffi.new("sq_codec *")
        err = new_error()
        check(lib.sq_codec_parse_v2(",".join(parts).encode(), c, err), err)
        self._c = c
        buf = ffi.new("char[]", lib.SQ_CODEC_STRLEN)
        lib.sq_codec_format(c, buf, lib.SQ_CODEC_STRLEN)
        self._spec = ffi.string(buf).decode()
        self._fields = {}
        for kv in self._spec.split(","):
            k, v = kv.split("=", 1)
            self._fields[k] = int(v) if k in _INT_KEYS else v

    spec = property(lambda self: self._spec, doc="the canonical spec (sq_codec_format)")
    kind = property(lambda self: self._fields["kind"],
                    doc="'sym', 'minmax', a compressor ('qsgd', 'sign', 'fp8e4m3', 'fp8e5m2', 'topk', "
                        "'randk'), a cast ('bf16', 'fp16') or 'plugin:NAME'")
    bits = property(lambda self: self._fields.get("bits"),
                    doc="bits per code: 1..8, a sparse kind's index width, 16 for a cast "
                        "(None for a plug-in)")
    keep = property(lambda self: self._fields.get("keep", 0),
                    doc="elements kept per group (topk, randk; else 0)")
    group = property(lambda self: self._fields["group"], doc="elements per scale")
    round = property(lambda self: self._fields.get("round") or
                     ("sr" if self._c.round == lib.SQ_ROUND_SR else "rtn"),
                     doc="'rtn' or 'sr' (a plug-in: 'sr' when stochastic)")
    hadamard = property(lambda self: self._fields.get("hadamard", 0),
                        doc="0 or the transform size")
    levels = property(lambda self: self._fields.get("levels"), doc="'sdp4bit' or 'deepspeed'")
    scale = property(lambda self: self._fields.get("scale"), doc="'fp32', 'bf16' or 'fp16'")
    plugin = property(lambda self: self._fields["kind"][7:] if self.is_plugin else None,
                      doc="a plug-in codec's name, else None")

    @property
    def is_plugin(self):
        """Whether this is a plug-in codec (kind=plugin:NAME)."""
        return self._c.kind == lib.SQ_KIND_PLUGIN

    def _meta_counts(self, n):
        """Values in the scales and offsets arrays of n elements (offsets
        None: the codec has none): groups(n) of the scale dtype, or a
        plug-in's bytes."""
        if self.is_plugin:
            return self.scale_bytes(n), self.offset_bytes(n)
        g = self.scale_count(n)
        return g, (g if self._fields["kind"] == "minmax" else None)

    def fields(self):
        """The keys and values, as Codec(**c.fields()) takes them."""
        return dict(self._fields)

    def replace(self, **keys):
        """A codec with some keys changed."""
        return Codec(**{**self._fields, **keys})

    def __eq__(self, other):
        return isinstance(other, Codec) and other._spec == self._spec

    def __hash__(self):
        return hash(self._spec)

    def __repr__(self):
        return "Codec(%r)" % self._spec

    def __reduce__(self):
        return (Codec, (self._spec,))

    # sizes for n elements (sq_codec_* of codec.h)
    def groups(self, n):
        """Groups (scales) of n elements."""
        return lib.sq_codec_groups(self._c, _count(n))

    def scale_count(self, n):
        """Values of the scales array of n elements: one per group (topk,
        randk: one per kept element; a cast: none; a plug-in: its bytes)."""
        return self.scale_bytes(n) // np.dtype(self._scale_np).itemsize

    def code_bytes(self, n):
        """Bytes of the codes of n elements: ceil(n * bits / 8) (topk,
        randk: one index per kept element; a cast: 2 n)."""
        return lib.sq_codec_code_bytes(self._c, _count(n))

    def scale_bytes(self, n):
        """Bytes of the scales alone."""
        return lib.sq_codec_scale_bytes(self._c, _count(n))

    def offset_bytes(self, n):
        """Bytes of the offsets (0 for sym)."""
        return lib.sq_codec_offset_bytes(self._c, _count(n))

    def nbytes(self, n):
        """Bytes of everything: codes, scales and offsets."""
        return lib.sq_codec_bytes(self._c, _count(n))

    def bits_per_element(self, n):
        """nbytes(n) * 8 / n (0 for n = 0)."""
        return lib.sq_codec_bits_per_element(self._c, _count(n))

    @property
    def _scale_np(self):
        if self.is_plugin:
            return np.uint8
        return np.float32 if self._fields["scale"] == "fp32" else np.uint16

    @property
    def _scale_torch(self):
        # torch has no uint16: 16-bit scales are int16 tensors of the same bits
        if self.is_plugin:
            return torch.uint8
        return torch.float32 if self._fields["scale"] == "fp32" else torch.int16


def _as_codec(c, name="codec"):
    if isinstance(c, Codec):
        return c
    if isinstance(c, str):
        return Codec(c)
    raise TypeError("%s: needs a Codec or a spec string, got %s" % (name, type(c).__name__))


# ---------------------------------------------------------------------------
# Where a call runs: the CPU backend, or the CUDA backend of a tensor's device
# ---------------------------------------------------------------------------

_backends = {}
_backends_lock = threading.Lock()


class _Backend:
    """One libshardq backend, opened on first use and kept for the process.
    The CUDA ones take a lock per call: a backend serves one thread at a
    time, and its stream is lent for the length of one call."""

    def __init__(self, name, device):
        err = new_error()
        pp = ffi.new("sq_backend **")
        check(lib.sq_backend_open(cstr(name), pp, err), err)
        self.be = pp[0]
        self.name = name
        self.device = device  # None for the CPU, else the torch.device
        self.lock = threading.Lock()

    def message(self):
        return ffi.string(lib.sq_backend_error(self.be)).decode(errors="replace")

    def close(self):
        if self.be is not None:
            lib.sq_backend_close(self.be)
            self.be = None


def _backend(device):
    key = "cpu" if device is None else "cuda:%d" % device.index
    with _backends_lock:
        b = _backends.get(key)
        if b is None:
            b = _backends[key] = _Backend(key, device)
    return b


@atexit.register
def _close_backends():
    with _backends_lock:
        for b in _backends.values():
            b.close()
        _backends.clear()


@contextmanager
def _running_on(device):
    """The backend for device (None: the CPU). On a GPU: the device current
    and the caller's current torch stream lent to the backend for the
    duration (0, torch's legacy default stream, is cudaStreamLegacy to
    CUDA's API: the handle 0x1), the backend's own stream back after."""
    b = _backend(device)
    if device is None:
        yield b
        return
    with b.lock, torch.cuda.device(device):
        handle = torch.cuda.current_stream(device).cuda_stream
        rc = lib.sq_backend_set_stream(b.be, ffi.cast("void *", handle or 1))
        check(rc, context=lambda: "%s: cannot use the current stream: %s" % (b.name, b.message()))
        try:
            yield b
        finally:
            lib.sq_backend_set_stream(b.be, ffi.NULL)


def _device_of(op, named):
    """None when every argument is in host memory, else the torch.device of
    the CUDA tensors; TypeError for a mix. named: (name, value) pairs of
    arrays, tensors or Quantized (None values are skipped)."""
    where = {}
    for name, v in named:
        if v is None:
            continue
        if is_tensor(v) and v.device.type not in ("cpu", "cuda"):
            raise TypeError("%s: %s is a tensor on %s (cpu and cuda only)" % (op, name, v.device))
        d = v.device_ if isinstance(v, Quantized) else (v.device if is_cuda(v) else None)
        where[name] = d
    devices = set(where.values())
    if len(devices) > 1:
        raise TypeError("%s: arguments on different devices (%s)" % (op, ", ".join(
            "%s on %s" % (k, "cpu" if d is None else d) for k, d in where.items())))
    return devices.pop() if devices else None


def _cuda_in(t, ctype, name):
    """(pointer, keep-alive, n) of a CUDA tensor read as a flat ctype array,
    converted on the device (a copy) when its dtype or layout differ."""
    if not is_cuda(t):
        raise TypeError("%s: needs a CUDA tensor like the other arguments, got %s"
                        % (name, type(t).__name__))
    t = t.detach()
    if t.dtype != _torch_dtype(ctype) or not t.is_contiguous():
        t = t.to(_torch_dtype(ctype)).contiguous()
    return (ffi.cast(ctype + " *", t.data_ptr()) if t.numel() else ffi.NULL), t, t.numel()


def _cuda_out(t, ctype, name):
    """(pointer, t, n) of a CUDA tensor written in place: a contiguous
    tensor of ctype already."""
    want = _torch_dtype(ctype)
    if not is_cuda(t):
        raise TypeError("%s: needs a CUDA tensor like the other arguments, got %s"
                        % (name, type(t).__name__))
    if t.dtype != want or not t.is_contiguous():
        raise TypeError("%s: needs a contiguous %s tensor, got %s%s" % (
            name, want, t.dtype, "" if t.is_contiguous() else " (not contiguous)"))
    if t.requires_grad:
        raise TypeError("%s: a tensor that requires grad cannot be written in place" % name)
    return (ffi.cast(ctype + " *", t.data_ptr()) if t.numel() else ffi.NULL), t, t.numel()


def _in(x, ctype, name, device):
    return as_input(x, ctype, name) if device is None else _cuda_in(x, ctype, name)


def _out(x, ctype, name, device):
    return as_output(x, ctype, name) if device is None else _cuda_out(x, ctype, name)


def _new_out(like, shape, device):
    """A new float32 result: a CUDA tensor on device, else of like's family
    (a CPU tensor for a tensor, a NumPy array otherwise)."""
    if device is not None:
        return torch.empty(shape, dtype=torch.float32, device=device)
    if is_tensor(like):
        return torch.empty(shape, dtype=torch.float32)
    return np.empty(shape, dtype=np.float32)


def _shape(x):
    return tuple(x.shape) if is_tensor(x) else np.shape(x)


def _nonfinite_at(kept):
    """'x[i] is NaN' for the first non-finite element of the float32 arrays
    kept, as (name, array or tensor) pairs; None if all are finite."""
    for name, a in kept:
        if a is None:
            continue
        if is_tensor(a):
            bad = (~torch.isfinite(a.reshape(-1))).nonzero()
            if bad.numel() == 0:
                continue
            i = int(bad[0, 0])
            v = float(a.reshape(-1)[i])
        else:
            flat = a.reshape(-1)
            i = lib.sq_find_nonfinite(ffi.cast("float *", flat.ctypes.data), flat.size) \
                if flat.size else 0
            if i >= flat.size:
                continue
            v = float(flat[i])
        return "%s[%d] is %s" % (name, i, "NaN" if v != v else ("+Inf" if v > 0 else "-Inf"))
    return None


def _check(rc, op, b, inputs=(), outputs=()):
    """Raises the exception of a failed codec call of op: the library's
    sentence, the device's own for a CUDA failure, for NaN or Inf the
    element at fault among inputs, and for a decoded value past fp32 (the
    decoding operations write every value first) the first among outputs
    ((name, float32 array) pairs)."""
    if rc >= 0:
        return
    msg = ffi.string(lib.sq_strerror(rc)).decode()
    pending = take_pending() if rc == lib.SQ_ERR_INTERRUPTED else None
    if pending is not None:  # a Python plug-in codec's own exception
        raise pending from error(rc, "%s: %s" % (op, msg))
    where = None
    if rc in (lib.SQ_ERR_DEVICE, lib.SQ_ERR_NOMEM) and b.message():
        msg = b.message()
    elif rc == lib.SQ_ERR_NONFINITE:
        where = _nonfinite_at(inputs)
    elif rc == lib.SQ_ERR_RANGE:
        where = _nonfinite_at(outputs)
    if where:
        msg = "%s: %s" % (msg, where)
    raise error(rc, "%s: %s" % (op, msg))


def _need_key(op, codec, key):
    if key is not None and not isinstance(key, Key):
        raise TypeError("%s: key needs a shardq.Key, got %s" % (op, type(key).__name__))
    if key is None and codec.round == "sr":
        raise error(lib.SQ_ERR_ARG, "%s: codec %s rounds stochastically and needs a key "
                    "(key=shardq.Key(seed, step, worker, site))" % (op, codec.spec))
    return key._k if key is not None else ffi.NULL


# ---------------------------------------------------------------------------
# Quantized buffers
# ---------------------------------------------------------------------------

class Quantized:
    """n values quantized under a codec: `codes` (uint8, the packed bit
    stream of code_bytes(n) bytes), `scales` (scale_count(n) scales, or the
    kept values of topk / randk, none for a cast: float32, or
    the uint16 bit patterns of bf16 / fp16 scales) and `offsets` (the group
    minima of a minmax codec, like scales; None for sym). On the CPU they
    are NumPy arrays; on a GPU, torch CUDA tensors (16-bit patterns as
    int16, torch having no uint16). `shape` is the shape of the values
    quantized, `key` the key their stochastic rounding used (or None).

    Quantized(codec, n, codes, scales, offsets=None, shape=None, key=None)
    wraps arrays the caller already holds (checked for dtype, size, layout
    and device; not copied)."""

    __slots__ = ("codec", "n", "codes", "scales", "offsets", "shape", "key")

    def __init__(self, codec, n, codes, scales, offsets=None, shape=None, key=None):
        self.codec = _as_codec(codec)
        self.n = _count(n)
        self.codes, self.scales, self.offsets = codes, scales, offsets
        self.shape = (self.n,) if shape is None else tuple(int(d) for d in shape)
        if int(np.prod(self.shape, dtype=object)) != self.n:
            raise ValueError("Quantized: shape %s does not hold n=%d values" % (self.shape, self.n))
        if key is not None and not isinstance(key, Key):
            raise TypeError("Quantized: key needs a shardq.Key, got %s" % type(key).__name__)
        self.key = key
        self._validate()

    @classmethod
    def empty(cls, codec, n, shape=None, device=None):
        """A Quantized of n values with uninitialised arrays: on the CPU, or
        on device (a torch.device or "cuda:N") as CUDA tensors."""
        codec, n = _as_codec(codec), _count(n)
        nscales, noffsets = codec._meta_counts(n)
        if device is None or torch.device(device).type == "cpu":
            codes = np.empty(codec.code_bytes(n), np.uint8)
            scales = np.empty(nscales, codec._scale_np)
            offsets = np.empty(noffsets, codec._scale_np) if noffsets is not None else None
        else:
            device = torch.device(device)
            codes = torch.empty(codec.code_bytes(n), dtype=torch.uint8, device=device)
            scales = torch.empty(nscales, dtype=codec._scale_torch, device=device)
            offsets = torch.empty(noffsets, dtype=codec._scale_torch, device=device) \
                if noffsets is not None else None
        return cls(codec, n, codes, scales, offsets, shape)

    def _validate(self):
        c, n = self.codec, self.n
        nscales, noffsets = c._meta_counts(n)
        parts = [("codes", self.codes, c.code_bytes(n), np.uint8, torch and torch.uint8),
                 ("scales", self.scales, nscales, c._scale_np, torch and c._scale_torch)]
        if noffsets is not None and (self.offsets is not None or noffsets):
            parts.append(("offsets", self.offsets, noffsets, c._scale_np,
                          torch and c._scale_torch))
        elif self.offsets is not None:
            raise ValueError("Quantized: offsets given for a codec without (%s)" % c.spec)
        devices = set()
        for name, a, size, npt, tt in parts:
            if a is None:
                raise ValueError("Quantized: no %s (codec %s)" % (name, c.spec))
            if is_tensor(a):
                if a.dtype != tt or not a.is_contiguous():
                    raise TypeError("Quantized: %s needs a contiguous %s tensor, got %s"
                                    % (name, tt, a.dtype))
                devices.add(a.device if a.is_cuda else None)
                have = a.numel()
            elif isinstance(a, np.ndarray):
                if a.dtype != npt or not a.flags.c_contiguous:
                    raise TypeError("Quantized: %s needs a C-contiguous %s array, got %s"
                                    % (name, np.dtype(npt).name, a.dtype))
                devices.add(None)
                have = a.size
            else:
                raise TypeError("Quantized: %s needs a NumPy array or a tensor, got %s"
                                % (name, type(a).__name__))
            if have != size:
                raise ValueError("Quantized: %s holds %d values, codec %s needs %d for n=%d"
                                 % (name, have, c.spec, size, n))
        if len(devices) > 1:
            raise TypeError("Quantized: codes, scales and offsets on different devices")

    @property
    def device_(self):
        """None in host memory, else the torch.device of the CUDA tensors."""
        return self.codes.device if is_cuda(self.codes) else None

    @property
    def device(self):
        """'cpu' or 'cuda:N'."""
        d = self.device_
        return "cpu" if d is None else str(d)

    @property
    def nbytes(self):
        return self.codec.nbytes(self.n)

    def __len__(self):
        return self.n

    def __repr__(self):
        return "Quantized(n=%d, codec=%r, device=%r)" % (self.n, self.codec.spec, self.device)

    def _arrays(self):
        return [a for a in (self.codes, self.scales, self.offsets) if a is not None]

    def _qbuf(self, writable, name="q"):
        """An sq_qbuf of pointers into the arrays (and what keeps them)."""
        qb = ffi.new("sq_qbuf *")
        for field in ("codes", "scales", "offsets"):
            a = getattr(self, field)
            if a is None:
                continue
            if is_tensor(a):
                if writable and a.requires_grad:
                    raise TypeError("%s.%s: a tensor that requires grad cannot be written"
                                    % (name, field))
                p = a.data_ptr() if a.numel() else 0
            else:
                if writable and not a.flags.writeable:
                    raise TypeError("%s.%s: a read-only array cannot be written" % (name, field))
                p = a.ctypes.data if a.size else 0
            setattr(qb, field, ffi.cast("uint8_t *" if field == "codes" else "void *", p))
        return qb

    def tobytes(self):
        """codes, then scales, then offsets (minmax), as the arrays hold
        them: nbytes bytes (copied to the host from a GPU)."""
        return b"".join(_host_numpy(a).tobytes() for a in self._arrays())

    def cpu(self):
        """This buffer in host memory (itself when it is there)."""
        if self.device_ is None:
            return self
        return Quantized(self.codec, self.n, *[None if a is None else _host_numpy(a)
                                               for a in (self.codes, self.scales, self.offsets)],
                         shape=self.shape, key=self.key)

    def cuda(self, device=None):
        """This buffer on a GPU (the current one by default) as CUDA tensors."""
        device = torch.device("cuda", torch.cuda.current_device()) if device is None \
            else torch.device(device)
        if self.device_ == device:
            return self

        def move(a):
            if a is None:
                return None
            t = a if is_tensor(a) else torch.from_numpy(a.view(np.int16) if a.dtype == np.uint16
                                                         else a)
            return t.to(device)
        return Quantized(self.codec, self.n, move(self.codes), move(self.scales),
                         move(self.offsets), shape=self.shape, key=self.key)

    def save(self, path):
        """Writes the shardq.codec/1 container (a safetensors file) exactly
        as `shardq codec encode` does: the arrays, and in its metadata the
        codec, n, the shape and the key (all zero without one)."""
        h = self.cpu()
        ct = ffi.new("sq_container *")
        if len(h.shape) > len(ct.shape):
            raise ValueError("save: a shape of %d dimensions (at most %d)"
                             % (len(h.shape), len(ct.shape)))
        ct.codec = h.codec._c[0]
        ct.n = h.n
        ct.ndim = len(h.shape)
        for i, d in enumerate(h.shape):
            ct.shape[i] = d
        if h.key is not None:
            ct.key = h.key._k[0]
        qb = h._qbuf(writable=False)
        ct.q = qb[0]
        err = new_error()
        check(lib.sq_container_write(os.fsencode(path), ct, err), err)

    @classmethod
    def load(cls, path):
        """Reads and validates a shardq.codec/1 container (sq_container_read:
        FileFormatError, NotFoundError, NonFiniteError name the file and the
        field) into host memory."""
        ct = ffi.new("sq_container *")
        err = new_error()
        check(lib.sq_container_read(os.fsencode(path), ct, err), err)
        try:
            codec = Codec(_format(ffi.addressof(ct, "codec")))
            n = int(ct.n)
            g, go = codec._meta_counts(n)

            def grab(ptr, count, dtype):
                if count == 0:
                    return np.empty(0, dtype)
                nb = count * np.dtype(dtype).itemsize
                return np.frombuffer(ffi.buffer(ptr, nb), dtype=dtype).copy()
            codes = grab(ct.q.codes, codec.code_bytes(n), np.uint8)
            scales = grab(ct.q.scales, g, codec._scale_np)
            offsets = grab(ct.q.offsets, go, codec._scale_np) if go is not None else None
            shape = tuple(int(ct.shape[i]) for i in range(ct.ndim))
            key = Key(ct.key.seed, ct.key.step, ct.key.worker, ct.key.site)
        finally:
            lib.sq_container_free(ct)
        return cls(codec, n, codes, scales, offsets, shape=shape, key=key)


def _format(c):
    buf = ffi.new("char[]", lib.SQ_CODEC_STRLEN)
    lib.sq_codec_format(c, buf, lib.SQ_CODEC_STRLEN)
    return ffi.string(buf).decode()


def _host_numpy(a):
    """A host NumPy view (or copy from a GPU) of an array of a Quantized;
    int16 tensors come back as the uint16 bit patterns they hold."""
    if is_tensor(a):
        a = a.detach().cpu().numpy()
        return a.view(np.uint16) if a.dtype == np.int16 else a
    return a


def _as_quantized(q, op, name="q"):
    if not isinstance(q, Quantized):
        raise TypeError("%s: %s needs a shardq.Quantized, got %s" % (op, name, type(q).__name__))
    q._validate()
    return q


def _output_q(op, out, codec, n, shape, device):
    """out (checked to fit) or a new Quantized for n values under codec."""
    if out is None:
        return Quantized.empty(codec, n, shape, device)
    out = _as_quantized(out, op, "out")
    if out.codec != codec or out.n != n:
        raise ValueError("%s: out holds n=%d under %s, the result is n=%d under %s"
                         % (op, out.n, out.codec.spec, n, codec.spec))
    out.shape = tuple(shape)
    return out


# ---------------------------------------------------------------------------
# The fused codec operations
# ---------------------------------------------------------------------------

def quantize(x, codec, key=None, bf16=False, out=None):
    """Q(x): the values of x (any shape, read as a flat C-order buffer)
    quantized under codec; with bf16, Q(bf16(x)) (sq_quantize_bf16). An SR
    codec needs a key. out: a Quantized of the same codec and size to write
    into (and return) instead of a new one."""
    codec = _as_codec(codec)
    device = _device_of("quantize", [("x", x), ("out", out)])
    kp = _need_key("quantize", codec, key)
    n = numel(x)
    q = _output_q("quantize", out, codec, n, _shape(x), device)
    with _running_on(device) as b:
        xp, xk, _ = _in(x, "float", "x", device)
        fn = lib.sq_backend_quantize_bf16 if bf16 else lib.sq_backend_quantize
        rc = fn(b.be, codec._c, xp, n, kp, q._qbuf(True, "out"))
        _check(rc, "quantize", b, [("x", xk)])
    q.key = key
    return q


def quantize_diff(x, ref, codec, key=None, bf16=False, out=None):
    """Q(x - ref), the difference taken in fp32 (the qWD sender); with
    bf16, Q(bf16(bf16(x) - bf16(ref))). x and ref hold the same number of
    values; the result has x's shape."""
    codec = _as_codec(codec)
    device = _device_of("quantize_diff", [("x", x), ("ref", ref), ("out", out)])
    kp = _need_key("quantize_diff", codec, key)
    n = numel(x)
    if numel(ref) != n:
        raise ValueError("quantize_diff: ref holds %d values, x %d" % (numel(ref), n))
    q = _output_q("quantize_diff", out, codec, n, _shape(x), device)
    with _running_on(device) as b:
        xp, xk, _ = _in(x, "float", "x", device)
        rp, rk, _ = _in(ref, "float", "ref", device)
        fn = lib.sq_backend_quantize_diff_bf16 if bf16 else lib.sq_backend_quantize_diff
        rc = fn(b.be, codec._c, xp, rp, n, kp, q._qbuf(True, "out"))
        _check(rc, "quantize_diff", b, [("x", xk), ("ref", rk)])
    q.key = key
    return q


def dequantize(q, out=None, bf16=False):
    """D(q) as float32, with q's shape, or into out (any shape of q.n
    float32 values, written in place and returned); with bf16,
    bf16(D(q)) (sq_dequantize_bf16)."""
    q = _as_quantized(q, "dequantize")
    device = _device_of("dequantize", [("q", q), ("out", out)])
    if out is None:
        out = _new_out(None, q.shape, device)
    with _running_on(device) as b:
        op, _, m = _out(out, "float", "out", device)
        if m != q.n:
            raise ValueError("dequantize: out holds %d values, q %d" % (m, q.n))
        fn = lib.sq_backend_dequantize_bf16 if bf16 else lib.sq_backend_dequantize
        _check(fn(b.be, q.codec._c, q._qbuf(False), q.n, op), "dequantize", b,
               outputs=[("out", out)])
    return out


def dequantize_add(q, ref, out=None, bf16=False):
    """ref + D(q), the sum in fp32 (the qWD receiver); with bf16,
    bf16(bf16(D(q)) + bf16(ref)). The result is a new array of ref's
    family and shape, or out; out=ref updates ref in place (ref must then be
    a contiguous float32 array or tensor itself)."""
    q = _as_quantized(q, "dequantize_add")
    device = _device_of("dequantize_add", [("q", q), ("ref", ref), ("out", out)])
    if numel(ref) != q.n:
        raise ValueError("dequantize_add: ref holds %d values, q %d" % (numel(ref), q.n))
    if out is None:
        out = _new_out(ref, _shape(ref), device)
    with _running_on(device) as b:
        op, _, m = _out(out, "float", "out", device)
        if m != q.n:
            raise ValueError("dequantize_add: out holds %d values, q %d" % (m, q.n))
        rp, rk, _ = _in(ref, "float", "ref", device)
        fn = lib.sq_backend_dequantize_add_bf16 if bf16 else lib.sq_backend_dequantize_add
        _check(fn(b.be, q.codec._c, q._qbuf(False), rp, q.n, op), "dequantize_add", b,
               [("ref", rk)], [("out", out)])
    return out


def _chunk_table(op, chunks):
    """(codec, n, device, sq_qbuf[k], the chunks) of k >= 1 Quantized of
    one codec and size."""
    if isinstance(chunks, Quantized):
        chunks = [chunks]
    chunks = list(chunks)
    if not chunks:
        raise ValueError("%s: no chunks" % op)
    for i, c in enumerate(chunks):
        _as_quantized(c, op, "chunks[%d]" % i)
    c0 = chunks[0]
    for i, c in enumerate(chunks[1:], 1):
        if c.codec != c0.codec or c.n != c0.n:
            raise ValueError("%s: chunks[%d] is n=%d under %s, chunks[0] n=%d under %s"
                             % (op, i, c.n, c.codec.spec, c0.n, c0.codec.spec))
    if len(chunks) >= 1 << 31:
        raise ValueError("%s: %d chunks is too many" % (op, len(chunks)))
    device = _device_of(op, [("chunks[%d]" % i, c) for i, c in enumerate(chunks)])
    table = ffi.new("sq_qbuf[]", len(chunks))
    for i, c in enumerate(chunks):
        table[i] = c._qbuf(False, "chunks[%d]" % i)[0]
    return c0.codec, c0.n, device, table, chunks


def dequant_sum(chunks, out=None, fp16=False):
    """D(chunks[0]) + ... + D(chunks[k-1]) in fp32 in chunk order, then the
    inverse Hadamard when the codec has one (the last hop of a two-level
    reduce-scatter); with fp16, every decoded value and partial sum rounded
    to fp16 (DeepSpeed's qgZ; the codec must have no Hadamard). The chunks
    share one codec and size; the result has chunks[0]'s shape, or is out."""
    codec, n, device, table, chunks = _chunk_table("dequant_sum", chunks)
    device = _device_of("dequant_sum", [("chunks", chunks[0]), ("out", out)])
    if out is None:
        out = _new_out(None, chunks[0].shape, device)
    with _running_on(device) as b:
        op, _, m = _out(out, "float", "out", device)
        if m != n:
            raise ValueError("dequant_sum: out holds %d values, the chunks %d" % (m, n))
        fn = lib.sq_backend_dequant_sum_f16 if fp16 else lib.sq_backend_dequant_sum
        _check(fn(b.be, codec._c, table, len(chunks), n, op), "dequant_sum", b,
               outputs=[("out", out)])
    return out


def dequant_sum_requant(chunks, codec_out, key=None, fp16=False, out=None):
    """Q_out(D(chunks[0]) + ... + D(chunks[k-1])): the middle hop of a
    two-level reduce-scatter, the sum in fp32 (fp16 with fp16) and in the
    transformed domain (the Hadamard fields are ignored). An SR codec_out
    needs a key. out: a Quantized under codec_out to write into."""
    codec_out = _as_codec(codec_out, "codec_out")
    codec, n, device, table, chunks = _chunk_table("dequant_sum_requant", chunks)
    device = _device_of("dequant_sum_requant", [("chunks", chunks[0]), ("out", out)])
    kp = _need_key("dequant_sum_requant", codec_out, key)
    q = _output_q("dequant_sum_requant", out, codec_out, n, chunks[0].shape, device)
    with _running_on(device) as b:
        fn = lib.sq_backend_dequant_sum_requant_f16 if fp16 else lib.sq_backend_dequant_sum_requant
        rc = fn(b.be, codec._c, table, len(chunks), n, codec_out._c, kp, q._qbuf(True, "out"))
        _check(rc, "dequant_sum_requant", b)
    q.key = key
    return q


# ---------------------------------------------------------------------------
# Hadamard transform and bf16
# ---------------------------------------------------------------------------

def hadamard(x, h, inverse=False):
    """The blockwise Sylvester transform of size h (a power of two, 2 to
    1024) over x IN PLACE (a contiguous, writable float32 array or CPU
    tensor; a final partial block stays as it is); inverse: the same
    transform times 1/h. Returns x. CUDA tensors are refused (the
    transform is fused into the codec operations there)."""
    if is_cuda(x):
        raise TypeError("hadamard: a CUDA tensor (the CUDA backend applies the transform "
                        "inside the codec operations only)")
    h = operator.index(h)
    p, _, n = as_output(x, "float", "x")
    fn = lib.sq_hadamard_inverse if inverse else lib.sq_hadamard
    rc = fn(p, n, h) if -(1 << 31) <= h < 1 << 31 else lib.SQ_ERR_ARG
    if rc < 0:
        raise error(rc, "hadamard: h=%d: %s (a power of two from 2 to 1024)"
                    % (h, ffi.string(lib.sq_strerror(rc)).decode()))
    return x


def _bf16_bits(t):
    # a bfloat16 tensor is read and written as the int16 patterns it holds
    return t.view(torch.int16) if is_tensor(t) and t.dtype == torch.bfloat16 else t


def to_bf16(x, out=None):
    """bf16(x), round to nearest even, as uint16 bit patterns (a NumPy
    uint16 array; int16 for a tensor), or into out (which may also be a
    bfloat16 tensor). NaN or Inf in x is NonFiniteError, a finite value
    that rounds past bf16's range RangeError (sq_backend_to_bf16)."""
    device = _device_of("to_bf16", [("x", x), ("out", out)])
    n = numel(x)
    if out is None:
        out = torch.empty(_shape(x), dtype=torch.int16, device=device) if device is not None \
            else empty_like_input(x, n, "uint16_t").reshape(_shape(x))
    with _running_on(device) as b:
        op, _, m = _out(_bf16_bits(out), "uint16_t", "out", device)
        if m != n:
            raise ValueError("to_bf16: out holds %d values, x %d" % (m, n))
        xp, xk, _ = _in(x, "float", "x", device)
        _check(lib.sq_backend_to_bf16(b.be, xp, n, op), "to_bf16", b, [("x", xk)])
    return out


def from_bf16(h, out=None):
    """The float32 values of bf16 bit patterns (uint16 / int16 arrays, or a
    bfloat16 tensor), exactly; a NaN or Inf pattern is NonFiniteError."""
    device = _device_of("from_bf16", [("h", h), ("out", out)])
    h = _bf16_bits(h)
    if not is_tensor(h):
        h = np.asarray(h)
        if h.dtype not in (np.uint16, np.int16):
            raise TypeError("from_bf16: h needs uint16 bit patterns, got %s" % h.dtype)
        h = h.view(np.uint16)
    elif h.dtype != torch.int16:
        raise TypeError("from_bf16: h needs an int16 or bfloat16 tensor, got %s" % h.dtype)
    n = numel(h)
    if out is None:
        out = _new_out(h, _shape(h), device)
    with _running_on(device) as b:
        op, _, m = _out(out, "float", "out", device)
        if m != n:
            raise ValueError("from_bf16: out holds %d values, h %d" % (m, n))
        hp, _, _ = _in(h, "uint16_t", "h", device)
        _check(lib.sq_backend_from_bf16(b.be, hp, n, op), "from_bf16", b)
    return out


# Plug-in codecs (shardq/plugin.h): shardq.codec.register and friends
load_plugin, plugins = _plugin.load_plugin, _plugin.plugins


def register(name, encode, decode, sizes, group=1, stochastic=False, about=None):
    return Codec(_plugin.register(name, encode, decode, sizes, group=group,
                                  stochastic=stochastic, about=about))


register.__doc__ = _plugin.register.__doc__
