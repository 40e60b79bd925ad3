"""shardq from Python: the codecs, the sharded world, trace capture and a
DDP communication hook, over the C library libshardq (no copies on the CPU:
NumPy arrays and PyTorch tensors are passed by pointer).

    import shardq
    c = shardq.Codec("bits=4,group=128,round=sr")
    q = shardq.quantize(x, c, shardq.Key(seed=1))
    y = shardq.dequantize(q)

Plug-in codecs: shardq.codec.register (a codec written in Python) and
shardq.load_plugin (a shared object) make kind=plugin:NAME codecs.
"""
from ._lib import (ShardqError, SpecError, ArgumentError, NonFiniteError, RangeError,
                   FileFormatError, NotFoundError, BusyError, UnsupportedError,
                   OutOfMemoryError, IOFailure, ConflictError, DeviceError)
from .scheme import Scheme, Topo
from .stats import Stats
from .world import World, bytes_rows
from .replay import replay, ReplayResult
from .codec import (Codec, Key, Quantized, quantize, dequantize, quantize_diff,
                    dequantize_add, dequant_sum, dequant_sum_requant, hadamard,
                    to_bf16, from_bf16, load_plugin, plugins)
from .trace import TraceWriter
from .capture import MicroBatchCapture, DDPCapture

from . import _lib

# The library's version (sq_version): defined once, in shardq/codec.h.
__version__ = _lib.ffi.string(_lib.lib.sq_version()).decode()

__all__ = ["ShardqError", "SpecError", "ArgumentError", "NonFiniteError", "RangeError",
           "FileFormatError", "NotFoundError", "BusyError", "UnsupportedError",
           "OutOfMemoryError", "IOFailure", "ConflictError", "DeviceError", "__version__",
           "Scheme", "Topo", "Stats", "World", "bytes_rows", "replay", "ReplayResult",
           "Codec", "Key", "Quantized", "quantize", "dequantize", "quantize_diff",
           "dequantize_add", "dequant_sum", "dequant_sum_requant", "hadamard",
           "to_bf16", "from_bf16", "load_plugin", "plugins",
           "TraceWriter", "MicroBatchCapture", "DDPCapture"]
