"""The compiled module and the one way errors leave it.

Every C call that can fail returns an sq_status kind (zero is success) and
may describe the failure in an sq_error; `check` turns a failure into the
Python exception of its kind, carrying the library's sentence.
"""
import threading

from ._shardq import ffi, lib  # noqa: F401  (the compiled cffi module)


class ShardqError(Exception):
    """A failure of libshardq: `status` is its sq_status kind (negative),
    `kind` the kind's name, str() the library's sentence."""

    def __init__(self, status, message):
        Exception.__init__(self, message)
        self.status = status
        self.kind = _KIND_NAMES.get(status, "SQ_ERR_%d" % -status)


class SpecError(ShardqError, ValueError):
    """A codec spec, scheme knob or setting out of range (SQ_ERR_SPEC)."""


class ArgumentError(ShardqError, ValueError):
    """A bad argument: a size, a key, a call out of order (SQ_ERR_ARG)."""


class NonFiniteError(ShardqError, ValueError):
    """NaN or Inf in the input (SQ_ERR_NONFINITE)."""


class RangeError(ShardqError, ArithmeticError):
    """A finite input whose result leaves fp32 or bf16 (SQ_ERR_RANGE)."""


class FileFormatError(ShardqError, ValueError):
    """A file that is malformed, truncated or lies about itself (SQ_ERR_FORMAT)."""


class NotFoundError(ShardqError, LookupError):
    """A named file, tensor, run or preset that does not exist (SQ_ERR_NOTFOUND)."""


class BusyError(ShardqError, OSError):
    """Another process holds the database, directory or run (SQ_ERR_BUSY)."""


class UnsupportedError(ShardqError, NotImplementedError):
    """Not available on this backend or build (SQ_ERR_UNSUPPORTED)."""


class OutOfMemoryError(ShardqError, MemoryError):
    """An allocation failed (SQ_ERR_NOMEM)."""


class IOFailure(ShardqError, OSError):
    """The system refused a read, write, open or rename (SQ_ERR_IO)."""


class ConflictError(ShardqError):
    """What is stored disagrees with what is asked (SQ_ERR_CONFLICT)."""


class DeviceError(ShardqError, RuntimeError):
    """A CUDA call failed (SQ_ERR_DEVICE)."""


class InterruptedError_(ShardqError):
    """A signal or a callback asked the work to stop (SQ_ERR_INTERRUPTED)."""


_KIND_NAMES = {
    -1: "SQ_ERR_ARG", -2: "SQ_ERR_SPEC", -3: "SQ_ERR_NONFINITE", -4: "SQ_ERR_RANGE",
    -5: "SQ_ERR_NOMEM", -6: "SQ_ERR_UNSUPPORTED", -7: "SQ_ERR_DEVICE", -8: "SQ_ERR_IO",
    -9: "SQ_ERR_FORMAT", -10: "SQ_ERR_BUSY", -11: "SQ_ERR_NOTFOUND",
    -12: "SQ_ERR_CONFLICT", -13: "SQ_ERR_INTERRUPTED",
}
_CLASSES = {
    -1: ArgumentError, -2: SpecError, -3: NonFiniteError, -4: RangeError,
    -5: OutOfMemoryError, -6: UnsupportedError, -7: DeviceError, -8: IOFailure,
    -9: FileFormatError, -10: BusyError, -11: NotFoundError, -12: ConflictError,
    -13: InterruptedError_,
}


def error(status, message=None):
    """The exception for status, with message or the kind's own sentence."""
    if not message:
        message = ffi.string(lib.sq_strerror(status)).decode()
    return _CLASSES.get(status, ShardqError)(status, message)


_pending = threading.local()


def callback_failed(e):
    """Keeps the exception a Python callback of the library raised (a
    plug-in codec's), for the call that returns SQ_ERR_INTERRUPTED."""
    _pending.exc = e


def take_pending():
    """The exception a Python callback raised on this thread (cleared), or None."""
    e = getattr(_pending, "exc", None)
    _pending.exc = None
    return e


def check(status, err=None, context=None):
    """Raises the exception of a failed call; returns status otherwise.
    err: the sq_error * the call described its failure in, if any; context:
    a callable giving the sentence instead (a handle's error string). A call
    that a Python plug-in codec's exception stopped raises that exception,
    the library's as its cause."""
    if status >= 0:
        return status
    msg = None
    if err is not None and err.status != 0:
        msg = ffi.string(lib.sq_error_message(err)).decode()
    elif context is not None:
        msg = context()
    pending = take_pending() if status == lib.SQ_ERR_INTERRUPTED else None
    if pending is not None:
        raise pending from error(status, msg)
    raise error(status, msg)


def new_error():
    return ffi.new("sq_error *")


def cstr(s):
    """bytes for a char * argument (None stays NULL)."""
    if s is None:
        return ffi.NULL
    return s.encode() if isinstance(s, str) else bytes(s)
