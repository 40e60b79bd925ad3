"""NumPy arrays and PyTorch tensors as C pointers, without copies.

A C-contiguous float32 array or CPU tensor is passed by its address: the
library reads (or writes) the caller's memory. An input of another dtype or
layout is converted once (a copy, made here and said so in the docstrings
that accept it); an output (`out=`) must already be float32, contiguous and
writable, or it is refused, since writing into a copy would lose the result.
CUDA tensors are the business of the callers that take them (their memory
is not the host's).
"""
import numpy as np

from ._lib import ffi

try:  # PyTorch is optional: NumPy alone runs the CPU paths
    import torch
except ImportError:  # pragma: no cover - the tests always have it
    torch = None


def is_tensor(x):
    return torch is not None and isinstance(x, torch.Tensor)


def is_cuda(x):
    return is_tensor(x) and x.is_cuda


def _torch_dtype(ctype):
    return {"float": torch.float32, "double": torch.float64, "uint8_t": torch.uint8,
            "uint16_t": torch.int16, "int8_t": torch.int8}[ctype]


def _np_dtype(ctype):
    return {"float": np.float32, "double": np.float64, "uint8_t": np.uint8,
            "uint16_t": np.uint16, "int8_t": np.int8}[ctype]


def numel(x):
    return x.numel() if is_tensor(x) else np.asarray(x).size


def as_input(x, ctype="float", name="x"):
    """(pointer, keep-alive, n) for reading x as a flat C array of ctype."""
    if is_tensor(x):
        if x.is_cuda:
            raise TypeError("%s: a CUDA tensor where host memory is needed" % name)
        t = x.detach()
        if t.dtype != _torch_dtype(ctype) or not t.is_contiguous():
            t = t.to(_torch_dtype(ctype)).contiguous()
        return ffi.cast(ctype + " *", t.data_ptr()), t, t.numel()
    a = np.ascontiguousarray(x, dtype=_np_dtype(ctype))
    if a.size == 0:
        return ffi.NULL, a, 0
    return ffi.cast(ctype + " *", a.ctypes.data), a, a.size


def as_output(x, ctype="float", name="out"):
    """(pointer, keep-alive, n) for writing into x in place: it must be
    a contiguous, writable array or CPU tensor of ctype already."""
    if is_tensor(x):
        if x.is_cuda:
            raise TypeError("%s: a CUDA tensor where host memory is needed" % name)
        if x.dtype != _torch_dtype(ctype) or not x.is_contiguous():
            raise TypeError("%s: needs a contiguous %s tensor, got %s%s" % (
                name, _torch_dtype(ctype), x.dtype,
                "" if x.is_contiguous() else " (not contiguous)"))
        if x.requires_grad:
            raise TypeError("%s: a tensor that requires grad cannot be written in place" % name)
        return ffi.cast(ctype + " *", x.data_ptr()), x, x.numel()
    if not isinstance(x, np.ndarray):
        raise TypeError("%s: needs a numpy array or a tensor, got %s" % (name, type(x).__name__))
    want = _np_dtype(ctype)
    if x.dtype != want or not x.flags.c_contiguous or not x.flags.writeable:
        raise TypeError("%s: needs a C-contiguous, writable %s array, got %s%s%s" % (
            name, np.dtype(want).name, x.dtype,
            "" if x.flags.c_contiguous else " (not contiguous)",
            "" if x.flags.writeable else " (read-only)"))
    if x.size == 0:
        return ffi.NULL, x, 0
    return ffi.cast(ctype + " *", x.ctypes.data), x, x.size


def empty_like_input(x, n, ctype="float"):
    """A new output of n elements of the input's family (a tensor for a
    tensor, else a numpy array)."""
    if is_tensor(x):
        return torch.empty(n, dtype=_torch_dtype(ctype))
    return np.empty(n, dtype=_np_dtype(ctype))
