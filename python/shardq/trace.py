"""Writing traces (docs/traces.md): the C trace writer of libshardq, so a
trace written from Python is byte for byte what `shardq train --capture`
and `shardq trace synth` write, and `shardq trace info` and `shardq replay`
read it as theirs.

A trace is a directory: manifest.json, and per captured step
step-NNNNNN/weights.safetensors (the model's weights) and
grads-wWW.safetensors (worker WW's gradient). The writer streams each file
tensor by tensor and writes the manifest last, on close: a writer that
stops early (an exception, a kill) leaves no manifest, and what it wrote is
no trace. The helpers of capture.py (micro-batches, DDP) are built on it.
"""
import json

from . import _arrays
from ._lib import ffi, lib, check, new_error, cstr, error

__all__ = ["TraceWriter", "trace_params"]

_DTYPES = {"f32": "F32", "float32": "F32", "float": "F32",
           "f16": "F16", "float16": "F16", "half": "F16",
           "bf16": "BF16", "bfloat16": "BF16",
           "f64": "F64", "float64": "F64", "double": "F64"}


def _arg_error(message):
    return error(lib.SQ_ERR_ARG, message)


def _dtype(dtype):
    """The sq_st_dtype of "f32", "bf16", ..., "F32" or a torch dtype."""
    key = str(dtype).lower()
    key = key[len("torch."):] if key.startswith("torch.") else key
    name = _DTYPES.get(key)
    if name is None:
        raise _arg_error("dtype %r: a trace holds f32, f16, bf16 or f64" % (dtype,))
    return lib.sq_st_dtype_parse(name.encode())


def _is_module(x):
    return _arrays.torch is not None and isinstance(x, _arrays.torch.nn.Module)


def trace_params(params):
    """[(name, shape), ...] of params: a torch.nn.Module (its
    named_parameters() that require grad, in that order: what its optimizer
    updates and its backward fills), a mapping name -> shape, or pairs
    (name, shape)."""
    if _is_module(params):
        pairs = [(n, tuple(p.shape)) for n, p in params.named_parameters() if p.requires_grad]
    elif hasattr(params, "items"):
        pairs = list(params.items())
    else:
        pairs = list(params)
    out = []
    for i, pair in enumerate(pairs):
        try:
            name, shape = pair
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise _arg_error("param %d: %r is not (name, shape)" % (i, pair)) from None
        if not isinstance(name, str) or not name:
            raise _arg_error("param %d: the name %r is not a non-empty string" % (i, name))
        if any(d < 0 for d in shape):
            raise _arg_error("param '%s': shape %s has a negative size" % (name, list(shape)))
        out.append((name, shape))
    if not out:
        raise _arg_error("no params to write (a module without trainable parameters?)")
    return out


def _c_params(pairs):
    """The sq_trace_param array of pairs, and what keeps its names alive."""
    arr = ffi.new("sq_trace_param[]", len(pairs))
    keep = []
    for i, (name, shape) in enumerate(pairs):
        if len(shape) > 64:
            raise _arg_error("param '%s': %d dimensions, at most 64" % (name, len(shape)))
        keep.append(ffi.new("char[]", name.encode()))
        arr[i].name = keep[-1]
        arr[i].ndim = len(shape)
        for d, size in enumerate(shape):
            arr[i].shape[d] = size
    return arr, keep


def _file_name(step, worker):
    return "step-%06d/%s" % (step, "weights" if worker < 0 else "grads-w%02d" % worker)


class TraceWriter:
    """A trace being written into the directory `dir`.

    dir must not exist, or be empty (missing parents are created), or hold
    a trace of the same `owner`, finished or cut short, which is written
    afresh (how a rerun resumes a capture that was killed); another
    writer's directory is refused (ConflictError), as is one another live
    process writes into (BusyError, naming its pid).

    params: a torch.nn.Module (its named_parameters() that require grad,
    in order), a mapping name -> shape or pairs (name, shape): every file
    holds exactly these tensors. workers: gradient files per step (1 to
    4096). dtype: what the files store, "f32" (default), "bf16", "f16" or
    "f64"; values arrive as fp32 (anything else is converted once) and are
    rounded to it. topo: "KxG" the trace was captured on (K * G = workers),
    the replay's default. model: JSON text or any JSON-serialisable value
    describing the model (informative). owner: what determines the trace's
    bytes (a run's key); it fixes the trace's id, else the id is random.

    Files come in order: steps strictly increase; in a step, the weights
    first (at any subset of the steps: weights have a cadence of their
    own, which the manifest records), then workers 0, 1, ..., W-1. Out of order is an ArgumentError with the library's
    sentence. Values are checked before a file starts: a missing or extra
    tensor, a wrong shape, NaN or Inf (NonFiniteError) is refused, naming
    the step, the file and the tensor, and nothing of that file is written.

    close() writes manifest.json, listing every step whose files were all
    written. As a context manager, the writer closes when the block ends
    and aborts on an exception: no manifest, as the C writer does for a
    killed capture. A writer dropped without close() aborts too.

    A trace of several processes (a DDP job, capture.DDPCapture): one
    process opens the writer, the others join it with TraceWriter.join(dir,
    writer.id, rank, ...) and write their own worker's gradient files; the
    owner adopt()s those, after every process ended the step's files.
    """

    def __init__(self, dir, params, workers, dtype="f32", topo=None, model=None, owner=None):
        self._init(dir, params, workers, dtype)
        if model is not None and not isinstance(model, str):
            model = json.dumps(model, sort_keys=True)
        if not isinstance(workers, int) or isinstance(workers, bool):
            raise _arg_error("%s: workers: %r is not an integer" % (dir, workers))
        arr, keep = _c_params(self.params)
        out, err = ffi.new("sq_trace_writer **"), new_error()
        check(lib.sq_trace_writer_open_as(out, cstr(self.dir), cstr(owner), workers, arr,
                                          len(self.params), self._dtype, cstr(topo),
                                          cstr(model), err), err)
        self._w = out[0]
        self.id = ffi.string(lib.sq_trace_writer_id(self._w)).decode()
        self.worker = None

    @classmethod
    def join(cls, dir, trace_id, worker, params, workers, dtype="f32"):
        """A writer of worker `worker`'s gradient files alone, into the
        trace of id trace_id that another process opened (and holds) in dir
        with the same params, workers and dtype; that process adopts them.
        No weights, no manifest: its close() only checks that its last file
        was ended. NotFoundError while nobody holds dir (the owner opens
        first; every process must see the same directory)."""
        self = cls.__new__(cls)
        self._init(dir, params, workers, dtype)
        arr, keep = _c_params(self.params)
        out, err = ffi.new("sq_trace_writer **"), new_error()
        check(lib.sq_trace_writer_join(out, cstr(self.dir), cstr(trace_id), worker, workers,
                                       arr, len(self.params), self._dtype, err), err)
        self._w = out[0]
        self.id = trace_id
        self.worker = worker
        return self

    def _init(self, dir, params, workers, dtype):
        self._w = None
        self.dir = str(dir)
        self.params = trace_params(params)
        self.workers = workers
        self._dtype = _dtype(dtype)
        self.dtype = ffi.string(lib.sq_st_dtype_name(self._dtype)).decode()
        self._shapes = dict(self.params)
        if len(self._shapes) != len(self.params):
            seen = set()
            dup = next(n for n, _ in self.params if n in seen or seen.add(n))
            raise _arg_error("%s: param '%s' given twice" % (self.dir, dup))

    # -- files -------------------------------------------------------------

    def write_weights(self, step, weights):
        """Writes step-NNNNNN/weights.safetensors: weights is a mapping
        name -> tensor or array, a module (its parameters), or a sequence
        in param order. A step's weights come before its gradient files."""
        self._write(step, -1, weights)

    def write_grads(self, step, worker, grads):
        """Writes step-NNNNNN/grads-wWW.safetensors, worker WW's gradient:
        a mapping name -> tensor or array, a module (the .grad of its
        params: every one must have a gradient), or a sequence in param
        order."""
        if not isinstance(worker, int) or worker < 0:
            raise _arg_error("%s: worker %r: a gradient file's worker is 0 .. %d" % (
                self.dir, worker, self.workers - 1))
        self._write(step, worker, grads)

    def adopt(self, step, worker):
        """Records worker's gradient file of step, written by a process
        that joined this trace, as if this writer had written it (in the
        same order as its own files); its header is checked as the reader
        will: missing (NotFoundError), of another trace (ConflictError), of
        another step, param, shape or dtype (FileFormatError)."""
        w = self._handle()
        err = new_error()
        check(lib.sq_trace_file_adopt(w, self._step(step), worker, err), err)

    def close(self):
        """Writes manifest.json (a joined writer: nothing) and releases the
        directory. The writer is gone afterwards, whatever the outcome."""
        w, self._w = self._handle(), None
        err = new_error()
        check(lib.sq_trace_writer_close(w, err), err)

    def abort(self):
        """Stops without a manifest: what was written is no trace (a rerun
        of the same owner starts it afresh). Safe to call twice."""
        w, self._w = getattr(self, "_w", None), None
        if w is not None:
            lib.sq_trace_writer_abort(w)

    @property
    def closed(self):
        return self._w is None

    def __enter__(self):
        return self

    def __exit__(self, etype, value, tb):
        if self._w is None:
            return False
        if etype is None:
            self.close()
        else:
            self.abort()
        return False

    def __del__(self):
        try:
            self.abort()
        except Exception:  # the interpreter is shutting down: the process frees it
            pass

    def __repr__(self):
        return "TraceWriter(%r, %d params, workers=%d, dtype=%s%s%s)" % (
            self.dir, len(self.params), self.workers, self.dtype,
            "" if self.worker is None else ", joined as worker %d" % self.worker,
            ", closed" if self._w is None else "")

    # -- internals ---------------------------------------------------------

    def _handle(self):
        if self._w is None:
            raise _arg_error("%s: the trace writer is closed" % self.dir)
        return self._w

    def _step(self, step):
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 2 ** 32:
            raise _arg_error("%s: step %r: a step is an integer from 0 to 2^32 - 1" % (
                self.dir, step))
        return step

    def _write(self, step, worker, values):
        w = self._handle()
        step = self._step(step)
        where = "%s: %s" % (self.dir, _file_name(step, worker))
        inputs = self._inputs(values, worker < 0, where)
        err = new_error()
        check(lib.sq_trace_file_begin(w, step, worker, err), err)
        try:
            for ptr, _keep in inputs:
                check(lib.sq_trace_file_put(w, ptr, err), err)
            check(lib.sq_trace_file_end(w, err), err)
        except BaseException:
            # a file that failed half-way (a full disk) cannot be finished:
            # the trace stops here, without a manifest
            self.abort()
            raise

    def _inputs(self, values, weights, where):
        """(pointer, keep-alive) per param, in order, after every check."""
        if _is_module(values):
            named = dict(values.named_parameters())
            values = {}
            for name, _ in self.params:
                p = named.get(name)
                if p is None:
                    raise _arg_error("%s: tensor '%s': the module has no such parameter" % (
                        where, name))
                if not weights and p.grad is None:
                    raise _arg_error("%s: tensor '%s': no gradient (.grad is None): did "
                                     "backward run?" % (where, name))
                values[name] = p if weights else p.grad
        elif not hasattr(values, "items"):
            seq = list(values)
            if len(seq) != len(self.params):
                raise _arg_error("%s: %d tensors for the trace's %d params" % (
                    where, len(seq), len(self.params)))
            values = {name: x for (name, _), x in zip(self.params, seq)}
        extra = [k for k in values if k not in self._shapes]
        if extra:
            raise _arg_error("%s: tensor '%s': not a param of the trace" % (where, extra[0]))
        out = []
        for name, shape in self.params:
            if name not in values:
                raise _arg_error("%s: tensor '%s': missing" % (where, name))
            out.append(_flat(values[name], shape, "%s: tensor '%s'" % (where, name)))
        return out


def _flat(x, shape, what):
    """(float *, keep-alive) of x as C-order fp32: a CPU float32 contiguous
    tensor or array by its address, anything else converted once."""
    if _arrays.is_tensor(x):
        got = tuple(x.shape)
        if x.is_complex():
            raise _arg_error("%s: dtype %s is not real" % (what, x.dtype))
        if x.is_cuda:  # one copy to the host, converted on the way
            x = x.detach().to("cpu", _arrays.torch.float32)
    else:
        import numpy as np
        x = np.asarray(x)
        got = x.shape
        if x.dtype.kind not in "fiub":
            raise _arg_error("%s: dtype %s is not a number" % (what, x.dtype))
    if got != tuple(shape):
        raise _arg_error("%s: shape %s, but the trace's param is %s" % (
            what, list(got), list(shape)))
    ptr, keep, n = _arrays.as_input(x, "float", what)
    if n:
        i = lib.sq_find_nonfinite(ptr, n)
        if i < n:
            v = float(keep.reshape(-1)[i])
            kind = "NaN" if v != v else ("+Inf" if v > 0 else "-Inf")
            raise error(lib.SQ_ERR_NONFINITE, "%s: element %d is %s (a trace holds finite "
                        "values only)" % (what, i, kind))
    return ptr, keep
