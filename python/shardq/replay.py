"""`shardq replay` from Python: a scheme over a captured trace (replay.h),
with the rows that the command would store handed back instead.

    r = shardq.replay("run1", topo="2x4", scheme="sdp4bit", seed=1)
    r.steps_rows      # [{"step": 3, "path": "grad", "rel_l2": ..., ...}, ...]
    r.bytes           # the store's bytes rows
"""
import numpy as np

from ._lib import ffi, lib, check, new_error, cstr, error
from .scheme import cstring as _cstring
from .scheme import Topo, as_scheme, as_topo
from .stats import STAT_FIELDS, bytes_row_dict

_LAYOUTS = ("bucket", "param")  # sq_layout_kind


class ReplayResult:
    """What a replay measured. rows: every stats row in the order the
    library gave them (tensor None for a step's row), each a dict with
    step, path, tensor and the store's columns (elements as n, the
    statistics, frac_clipped, seconds and ef_residual; NaN where the store
    has NULL); steps_rows and tensor_rows split them. bytes: the store's
    bytes rows. grad, weight: the run's statistics over every step and param
    (dicts, None for a path not replayed). And the run's figures: steps,
    params, elements, padded, layout, units, reused_workers, dropped_workers,
    trace_bytes, seconds, consecutive, timings, topo; with error feedback
    (grad.ef) residual_bytes (per worker, over the units) and ef_residual
    (after the last step), ef_residual_mean (over the steps), 0 and NaN
    without it."""

    def __init__(self, res, rows, topo):
        self.rows = rows
        self.topo = topo
        for f in ("steps", "params", "elements", "padded", "units", "reused_workers",
                  "dropped_workers", "trace_bytes"):
            setattr(self, f, int(getattr(res, f)))
        self.seconds = res.seconds
        self.residual_bytes = int(res.residual_bytes)
        self.ef_residual, self.ef_residual_mean = res.ef_residual, res.ef_residual_mean
        self.consecutive = bool(res.consecutive)
        self.layout = _LAYOUTS[res.layout] if 0 <= res.layout < len(_LAYOUTS) else res.layout
        self.grad = _stats(res.grad, res.grad_clipped) if res.has_grad else None
        self.weight = _stats(res.weight, res.weight_clipped) if res.has_weight else None
        self.bytes = [bytes_row_dict(res.bytes[i]) for i in range(lib.SQ_NCOLL * lib.SQ_NLINK)]
        self.timings = {ffi.string(t.op).decode(): {"calls": int(t.calls), "seconds": t.seconds,
                                                     "bytes": int(t.bytes)}
                        for t in (res.timings[i] for i in range(lib.SQ_REPLAY_NTIMINGS))}

    @property
    def steps_rows(self):
        return [r for r in self.rows if r["tensor"] is None]

    @property
    def tensor_rows(self):
        return [r for r in self.rows if r["tensor"] is not None]

    def __repr__(self):
        return "<shardq.ReplayResult %d steps x %d params on %s, %d rows>" % (
            self.steps, self.params, self.topo, len(self.rows))


def _stats(s, clipped):
    d = {f: getattr(s, f) for f in STAT_FIELDS[:-1]}
    d["n"] = int(s.n)
    d["frac_clipped"] = clipped
    return d


def _row(r):
    d = {"step": int(r.step), "path": ffi.string(r.path).decode(),
         "tensor": ffi.string(r.tensor).decode() if r.tensor != ffi.NULL else None}
    d.update(_stats(r.st, r.frac_clipped))
    d["seconds"] = r.seconds
    d["ef_residual"] = r.ef_residual
    return d


class _Sink:
    def __init__(self, on_tensor, on_progress):
        self.rows = []
        self.on_tensor = on_tensor
        self.on_progress = on_progress
        self.exc = None  # an exception a callback raised, re-raised after the run


@ffi.def_extern()
def _sq_replay_rows(ctx, rows, n, err):
    sink = ffi.from_handle(ctx)
    try:
        sink.rows.extend(_row(rows[i]) for i in range(n))
        return 0
    except BaseException as e:  # noqa: B902  (re-raised once the C run returns)
        sink.exc = e
        return 1


@ffi.def_extern()
def _sq_replay_progress(ctx, done, total):
    sink = ffi.from_handle(ctx)
    if sink.on_progress is None or sink.exc is not None:
        return
    try:
        sink.on_progress(int(done), int(total))
    except BaseException as e:  # noqa: B902
        sink.exc = e


@ffi.def_extern()
def _sq_replay_tensor(ctx, step, p, path, x, n):
    sink = ffi.from_handle(ctx)
    try:
        a = np.frombuffer(ffi.buffer(x, n * 4), dtype=np.float32).copy() if n else \
            np.empty(0, dtype=np.float32)
        r = sink.on_tensor(int(step), int(p), "grad" if path == lib.SQ_REPLAY_GRAD else "weight",
                           a)
        return 1 if r is False else 0
    except BaseException as e:  # noqa: B902
        sink.exc = e
        return 1


def replay(trace, topo=None, scheme="sdp4bit", seed=1, device=None, paths=("grad", "weight"),
           steps=0, tensor_rows=True, reuse_workers=False, transport=None, on_tensor=None,
           on_progress=None):
    """Replays the trace at path `trace` (a trace directory, a .safetensors
    or .npy file) under scheme (a Scheme or preset name) on topo ("KxG", (K,
    G); None: the trace's, as `shardq replay` chooses), with Philox seed
    `seed` -- what `shardq replay TRACE --scheme ... --workers ... --seed ...`
    runs -- and returns a ReplayResult with the rows the command stores.

    paths: "grad", "weight" or both; steps: the first N steps (0: all);
    reuse_workers: accept N != W gradient files per step (worker r takes
    file r mod W); transport: as World takes it (every process replays).
    on_tensor(step, param_index, path, array) receives every reduced
    gradient and reconstructed weight tensor (return False to stop: an
    InterruptedError_); on_progress(done, total) the units done. Errors
    raise the library's kind with its sentence (the file, tensor and
    element at fault); an exception of a callback is raised as it was."""
    if isinstance(paths, str):
        paths = [p.strip() for p in paths.split(",")]
    mask = 0
    for p in paths:
        if p not in ("grad", "weight"):
            raise ValueError("paths: %r: expected grad, weight or both" % (p,))
        mask |= lib.SQ_REPLAY_GRAD if p == "grad" else lib.SQ_REPLAY_WEIGHT
    scheme = as_scheme(scheme)
    t = ffi.new("sq_trace *")
    err = new_error()
    check(lib.sq_trace_open(cstr(str(trace)), t, err), err)
    try:
        cfg = ffi.new("sq_replay_config *")
        cfg.topo = as_topo(topo)[0] if topo is not None else lib.sq_replay_default_topo(t)
        cfg.scheme = scheme._s[0]
        if int(seed) < 0:
            raise ValueError("seed: %d is negative" % int(seed))
        cfg.seed = int(seed)
        dev = _cstring(device)
        cfg.device = dev
        cfg.paths = mask
        cfg.max_steps = int(steps)
        cfg.tensor_rows = 1 if tensor_rows else 0
        cfg.reuse_workers = 1 if reuse_workers else 0
        keep = transport
        if transport is not None:
            cfg.transport = transport.c_transport
        sink = _Sink(on_tensor, on_progress)
        handle = ffi.new_handle(sink)
        csink = ffi.new("sq_replay_sink *")
        csink.ctx = handle
        csink.rows = lib._sq_replay_rows
        csink.progress = lib._sq_replay_progress
        if on_tensor is not None:
            csink.tensor = lib._sq_replay_tensor
        res = ffi.new("sq_replay_result *")
        rc = lib.sq_replay_run(cfg, t, csink, res, err)
        del keep
        if sink.exc is not None:
            raise sink.exc
        if rc:
            msg = ffi.string(lib.sq_error_message(err)).decode() if err.status else None
            raise error(rc, msg)
        return ReplayResult(res, sink.rows, Topo(cfg.topo.nodes, cfg.topo.per_node))
    finally:
        lib.sq_trace_close(t)
