"""The sharded world from Python: K x G workers under a scheme, and the two
collectives of sharded data-parallel training between them (world.h).

    with shardq.World("2x4", "sdp4bit", elements=n, seed=1) as w:
        shards, st = w.reduce_scatter(grads, step=0, stats=True)
        what = w.all_gather(w.shards(weights), step=1)

Data goes in and out per worker, as NumPy arrays or PyTorch tensors (CPU
ones by pointer, without copies where the dtype is float32 and the memory
contiguous; CUDA tensors through host memory). The collectives run in the
library, as `shardq replay` runs them, and the statistics are the
library's own (metrics.h), computed in the same order: a scheme, topology
and seed given here and to replay give the same bytes and the same figures
to the bit (replay's world for unit u draws from seed ^ (u << 40): for a
one-param trace, the seed itself).
"""
import numpy as np

from . import _arrays
from ._lib import ffi, lib, check, new_error, ArgumentError, ConflictError, ShardqError
from .scheme import cstring as _cstring
from .scheme import Scheme, Topo, as_scheme, as_topo
from .stats import Stats, traffic_dict, bytes_rows_of, COLLECTIVES, LINKS

_GRAD_PATHS = {lib.SQ_GRAD_RING: "ring", lib.SQ_GRAD_A2A: "a2a",
               lib.SQ_GRAD_TWOLEVEL: "twolevel", lib.SQ_GRAD_NONE: "none",
               lib.SQ_GRAD_POWERSGD: "powersgd"}


class _Family:
    """What kind of array a caller handed in, so that results come back of
    the same kind: numpy, or torch on the caller's device."""

    def __init__(self, x):
        self.device = x.device if _arrays.is_tensor(x) else None

    def empty(self, n):
        if self.device is None:
            return np.empty(n, dtype=np.float32)
        return _arrays.torch.empty(n, dtype=_arrays.torch.float32)

    def finish(self, x):
        # CUDA inputs were staged through host memory: back to their device
        if self.device is not None and self.device.type != "cpu":
            return x.to(self.device)
        return x


def _host(x):
    """x readable by pointer: a CUDA tensor is copied to the host once."""
    if _arrays.is_cuda(x):
        return x.detach().cpu()
    return x


def _is_f64(x):
    if _arrays.is_tensor(x):
        return x.dtype == _arrays.torch.float64
    return isinstance(x, np.ndarray) and x.dtype == np.float64


class World:
    """K x G workers (topo: "KxG", (K, G) or a Topo) under scheme (a Scheme
    or a preset name), each with its own buffers of `elements` values on
    `device` ("cpu", "cuda", "cuda:0,1"). seed is the Philox key of every
    stochastic rounding; digest=True hashes every message (wire_digest);
    dry=True counts bytes without buffers. shape: the tensor the world
    carries, which resolves a scheme's per-tensor rules (zeropp8, qgz, qwz)
    as replay does for a one-param unit (without it, such a scheme takes
    the world as a 1-D tensor); elements defaults to its product.

    transport: an object whose `c_transport` is an `sq_transport *` (the
    ddp helpers' shardq.transport builds them); the process then holds one
    worker and every process must make the same calls in the same order
    (world.h): puts of another worker's data are checked and dropped, gets
    are collective. The transport is kept alive as long as the world.

    A context manager: close() releases the buffers; so does garbage
    collection. Errors raise the ShardqError of the library's kind with its
    sentence (NonFiniteError "worker 1: gradient, element 3: infinite").
    When a transport callback failed and the transport offers take_error()
    (shardq.transport's does), the exception it caught is the error's
    __cause__, and a KeyboardInterrupt is raised as itself."""

    def __init__(self, topo="2x4", scheme="sdp4bit", elements=None, seed=0, device="cpu",
                 digest=False, transport=None, shape=None, dry=False):
        self._w = None
        scheme = as_scheme(scheme)
        if shape is not None:
            shape = tuple(int(d) for d in shape)
            size = int(np.prod(shape, dtype=np.uint64)) if shape else 1
            if elements is None:
                elements = size
            elif int(elements) != size:
                raise ArgumentError(lib.SQ_ERR_ARG, "elements %d but shape %s holds %d" % (
                    int(elements), list(shape), size))
        if elements is None:
            raise TypeError("World: give elements (or shape)")
        if shape is not None or scheme.per_tensor:
            scheme = scheme.for_tensor(topo, shape if shape is not None else (int(elements),))
        cfg = ffi.new("sq_world_config *")
        cfg.topo = as_topo(topo)[0]
        cfg.scheme = scheme._s[0]
        if int(elements) < 0 or int(seed) < 0:
            raise ArgumentError(lib.SQ_ERR_ARG, "elements and seed must be >= 0, got %d and %d"
                                % (int(elements), int(seed)))
        cfg.elements = int(elements)
        cfg.seed = int(seed)
        self._device = _cstring(device)  # the config points into it while the world opens
        cfg.device = self._device
        cfg.dry = 1 if dry else 0
        cfg.digest = 1 if digest else 0
        self._transport = transport
        if transport is not None:
            ct = getattr(transport, "c_transport", None)
            if not isinstance(ct, ffi.CData) or ffi.typeof(ct) not in (
                    ffi.typeof("sq_transport *"), ffi.typeof("const sq_transport *")):
                raise TypeError("transport: needs a c_transport that is an sq_transport *, "
                                "got %r" % (ct,))
            cfg.transport = ct
        out = ffi.new("sq_world **")
        err = new_error()
        check(lib.sq_world_open(cfg, out, err), err)
        self._w = out[0]
        self._n = int(lib.sq_world_elements(self._w))
        self._N = int(lib.sq_world_workers(self._w))
        self._S = int(lib.sq_world_shard(self._w))
        self._padded = int(lib.sq_world_padded(self._w))
        self._dry = bool(dry)

    # -- lifetime -----------------------------------------------------------

    def close(self):
        """Releases the world (idempotent)."""
        if self._w is not None:
            lib.sq_world_close(self._w)
            self._w = None
        self._transport = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    @property
    def closed(self):
        return self._w is None

    def _h(self):
        if self._w is None:
            raise ValueError("the world is closed")
        return self._w

    def _check(self, rc):
        if rc >= 0:
            return rc
        w = self._w
        # a transport callback that failed keeps its exception (take_error):
        # an interrupt stays one, anything else is the cause of the world's error
        take = getattr(self._transport, "take_error", None)
        cause = take() if take is not None else None
        if isinstance(cause, KeyboardInterrupt):
            raise cause
        try:
            return check(rc, context=lambda: ffi.string(lib.sq_world_error(w)).decode())
        except ShardqError as e:
            if cause is None:
                raise
            raise e from cause

    def _worker(self, r):
        r = int(r)
        if not 0 <= r < self._N:
            raise IndexError("worker %d: no such worker (0 to %d)" % (r, self._N - 1))
        return r

    # -- what it is ---------------------------------------------------------

    @property
    def topo(self):
        t = lib.sq_world_topo(self._h())
        return Topo(t.nodes, t.per_node)

    @property
    def scheme(self):
        """The scheme it runs (per-tensor rules resolved)."""
        return Scheme._wrap(lib.sq_world_scheme(self._h()))

    @property
    def workers(self):
        return self._N

    @property
    def elements(self):
        """n: the elements of the model (of each gradient, of w-hat)."""
        return self._n

    @property
    def padded(self):
        """n rounded up so that every shard holds whole groups."""
        return self._padded

    @property
    def shard(self):
        """Elements of every shard buffer: padded / workers."""
        return self._S

    @property
    def pad_unit(self):
        return int(lib.sq_world_pad_unit(self._h()))

    def shard_len(self, r):
        """The model's elements in worker r's shard (the rest is padding)."""
        return int(lib.sq_world_shard_len(self._h(), self._worker(r)))

    @property
    def grad_path(self):
        """The collective the gradients really take here: "ring", "a2a",
        "twolevel", "powersgd", or "none" (one worker)."""
        return _GRAD_PATHS[int(lib.sq_world_grad_path(self._h()))]

    @property
    def local_rank(self):
        """This process's worker with a transport, None in process."""
        r = int(lib.sq_world_local_rank(self._h()))
        return None if r < 0 else r

    def holds(self, r):
        """Whether worker r's buffers are in this process."""
        return bool(lib.sq_world_holds(self._h(), self._worker(r)))

    # -- arrays in and out --------------------------------------------------

    def _input(self, x, want, name, pad_to=None):
        """(pointer, keep-alive) of x as float32, of `want` elements. With
        pad_to, an x of exactly pad_to elements is accepted too and padded
        with zeros to `want` (a copy)."""
        x = _host(x)
        n = _arrays.numel(x)
        if pad_to is not None and n == pad_to and pad_to != want:
            a = np.zeros(want, dtype=np.float32)
            if n:
                a[:n] = _np(x).ravel()
            return ffi.cast("float *", a.ctypes.data), a
        if n != want:
            raise ArgumentError(lib.SQ_ERR_ARG, "%s: %d elements, expected %d" % (name, n, want))
        p, keep, _ = _arrays.as_input(x, "float", name)
        if p == ffi.NULL:  # an empty array: the library wants a pointer
            keep = np.zeros(1, dtype=np.float32)
            p = ffi.cast("float *", keep.ctypes.data)
        return p, keep

    def _output(self, out, n, name):
        """(pointer, the array to return) for writing n floats: out itself
        (a float32 array or CPU tensor of n elements), or a new array."""
        if out is None:
            out = np.empty(n, dtype=np.float32)
        p, _, m = _arrays.as_output(out, "float", name)
        if m != n:
            raise ArgumentError(lib.SQ_ERR_ARG, "%s: %d elements, expected %d" % (name, m, n))
        if p == ffi.NULL:
            p = ffi.new("float[1]")
        return p, out

    # -- gradients ------------------------------------------------------------

    def put_grad(self, r, x):
        """Worker r's gradient: n values, finite (divided by N on the way in
        when the scheme averages). float32 memory is read in place."""
        w = self._h()
        p, keep = self._input(x, self._n, "gradient of worker %d" % int(r))
        self._check(lib.sq_world_put_grad(w, self._worker(r), p))
        del keep

    def reduce_grads(self, step):
        """The gradient reduce-scatter of training step `step` (the step is
        part of every stochastic rounding's key)."""
        self._check(lib.sq_world_reduce_grads(self._h(), _step(step)))

    def get_grad_shard(self, r, out=None):
        """Worker r's partition of the reduced gradient: `shard` elements
        (the part past shard_len(r) is padding). out: a float32 array or CPU
        tensor of that size to write into (returned), else a new array."""
        w = self._h()
        p, res = self._output(out, self._S, "out")
        self._check(lib.sq_world_get_grad_shard(w, self._worker(r), p))
        return res

    def reduce_scatter(self, grads, step, stats=False):
        """Every worker's gradient in (a list of N arrays or tensors of n
        values), the reduce-scatter of step `step`, every worker's partition
        out: a list of N arrays of `shard` elements of the input's kind
        (views into one padded buffer, worker r's at r * shard).

        stats=True returns (partitions, Stats): each partition against the
        exact fp64 mean (or sum) of the inputs, as replay measures it. The
        exact sum takes float64 inputs as they are (the world gets them
        rounded to float32); the same object given for several workers
        counts as that many copies of it, in order of first appearance, as
        replay adds a trace file that several workers read (r mod W)."""
        w = self._h()
        grads = list(grads)
        if len(grads) != self._N:
            raise ArgumentError(lib.SQ_ERR_ARG, "reduce_scatter: %d gradients for %d workers"
                                % (len(grads), self._N))
        groups = {}
        for r, g in enumerate(grads):
            groups.setdefault(id(g), (g, []))[1].append(r)
        if stats:
            exact = np.empty(self._padded, dtype=np.float64)
            lib.sq_step_exact_zero(w, _dptr(exact))
            tmp = np.empty(max(self._n, 1), dtype=np.float32)
        clipped = 0
        for g, rs in groups.values():
            p, keep = self._input(g, self._n, "gradient of worker %d" % rs[0])
            for r in rs:
                self._check(lib.sq_world_put_grad(w, r, p))
            if stats:
                x64 = None
                if _is_f64(g):
                    x64 = np.ascontiguousarray(_np(_host(g)), dtype=np.float64).ravel()
                clipped += lib.sq_step_add_grad(w, _dptr(exact), p,
                                                _dptr(x64) if x64 is not None else ffi.NULL,
                                                len(rs), _fptr(tmp))
            del keep
        if stats:
            lib.sq_step_exact_mean(w, _dptr(exact))
        self.reduce_grads(step)
        fam = _Family(grads[0])
        whole = fam.empty(self._padded)
        wp, _, _ = _arrays.as_output(whole, "float", "whole")
        acc = ffi.new("sq_erracc *")
        lib.sq_erracc_init(acc)
        self._check(lib.sq_step_grad_error(w, _dptr(exact) if stats else ffi.NULL, wp,
                                           ffi.NULL, acc if stats else ffi.NULL))
        whole = fam.finish(whole)
        parts = [whole[r * self._S:(r + 1) * self._S] for r in range(self._N)]
        if not stats:
            return parts
        return parts, Stats(acc, clipped, self._n * self._N)

    # -- error feedback -------------------------------------------------------

    def residual_len(self, hop=0):
        """Elements of one worker's error-feedback residual at hop 0 (the
        worker's own gradient) or 1 (the requantized node-local sum of the
        two-level path); 0 when that hop keeps none."""
        return int(lib.sq_world_residual_len(self._h(), int(hop)))

    @property
    def residual_bytes(self):
        """Bytes one worker keeps for its residuals (both hops)."""
        return int(lib.sq_world_residual_bytes(self._h()))

    def get_residual(self, r, hop=0, out=None):
        """Worker r's residual at hop 0 or 1 (residual_len(hop) elements;
        an ArgumentError_ when the hop keeps none)."""
        w = self._h()
        p, res = self._output(out, self.residual_len(hop), "out")
        self._check(lib.sq_world_get_residual(w, self._worker(r), int(hop), p))
        return res

    def reset_residuals(self):
        """Every residual back to zero (a new run on this world)."""
        self._check(lib.sq_world_reset_residuals(self._h()))

    @property
    def ef_residual(self):
        """After the last reduce: the residual's L2 norm relative to the
        gradient's, the mean over workers (the store's ef_residual); NaN
        when the world keeps no residual."""
        return lib.sq_world_residual_rel(self._h())

    # -- weights --------------------------------------------------------------

    def init_weights(self, w0):
        """Every replica's w-hat := w0 (n values; bf16(w0) under a quantized
        weight wire with weight.recon=bf16) and every master shard := its
        slice of w0: the full-precision broadcast that starts training."""
        p, keep = self._input(w0, self._n, "w0")
        self._check(lib.sq_world_init_weights(self._h(), p))
        del keep

    def put_master(self, r, shard):
        """Worker r's fp32 master shard: `shard` values whose part past
        shard_len(r) is zero, or just its shard_len(r) values (then padded
        here, a copy)."""
        w = self._h()
        r = self._worker(r)
        p, keep = self._input(shard, self._S, "master shard of worker %d" % r,
                              pad_to=self.shard_len(r))
        self._check(lib.sq_world_put_master(w, r, p))
        del keep

    def get_master(self, r, out=None):
        """Worker r's master shard (`shard` elements)."""
        w = self._h()
        p, res = self._output(out, self._S, "out")
        self._check(lib.sq_world_get_master(w, self._worker(r), p))
        return res

    def gather_weights(self, step):
        """The weight all-gather of training step `step`."""
        self._check(lib.sq_world_gather_weights(self._h(), _step(step)))

    def get_weights(self, r, out=None):
        """Worker r's w-hat: n elements."""
        w = self._h()
        p, res = self._output(out, self._n, "out")
        self._check(lib.sq_world_get_weights(w, self._worker(r), p))
        return res

    def shards(self, weights):
        """The N master shards of a whole weight vector (n values): worker r
        gets weights[r * shard : r * shard + shard_len(r)], zero-padded to
        `shard` elements, in the input's kind and dtype (float64 stays
        float64, the exact reference of all_gather)."""
        x = _host(weights)
        if _arrays.numel(x) != self._n:
            raise ArgumentError(lib.SQ_ERR_ARG, "weights: %d elements, expected %d"
                                % (_arrays.numel(x), self._n))
        fam = _Family(weights)
        a = _np(x).ravel()
        out = []
        for r in range(self._N):
            s = np.zeros(self._S, dtype=np.float64 if a.dtype == np.float64 else np.float32)
            first, m = r * self._S, self.shard_len(r)
            s[:m] = a[first:first + m]
            out.append(fam.finish(_arrays.torch.from_numpy(s)) if fam.device is not None else s)
        return out

    def all_gather(self, masters, step, stats=False, exact=None):
        """Every worker's master shard in (a list of N, as put_master takes
        them), the all-gather of step `step`, every worker's w-hat out (a
        list of N arrays of n elements, of the first master's kind).

        stats=True returns (w-hats, Stats): the replicas checked to hold the
        same bytes (ConflictError otherwise), and worker 0's w-hat against
        the weights it stands for -- exact (n values, fp64 as given) or the
        masters' own values -- with the fraction of them that the first
        quantization clips, measured against the w-hat before this step, as
        replay measures the weight path."""
        w = self._h()
        masters = list(masters)
        if len(masters) != self._N:
            raise ArgumentError(lib.SQ_ERR_ARG, "all_gather: %d master shards for %d workers"
                                % (len(masters), self._N))
        if stats:
            full64 = self._whole(masters, exact)
            full32 = full64.astype(np.float32)
            prev = np.empty(max(self._n, 1), dtype=np.float32)
            self.get_weights(0, out=prev[:self._n])
            tmp = np.empty(max(self._n, 1), dtype=np.float32)
            clipped = lib.sq_step_weight_clipped(w, _fptr(full32), _fptr(prev), self._n,
                                                 _fptr(tmp))
        for r, m in enumerate(masters):
            self.put_master(r, m)
        self.gather_weights(step)
        fam = _Family(masters[0])
        out = [self.get_weights(r, out=fam.empty(self._n) if fam.device is not None else None)
               for r in range(self._N)]
        out = [fam.finish(x) for x in out]
        if not stats:
            return out
        what0 = np.empty(max(self._n, 1), dtype=np.float32)
        differs = self._replicas(what0)
        if differs:
            raise ConflictError(lib.SQ_ERR_CONFLICT, "step %d: the replicas of the weights "
                                "differ (worker %d against worker 0): a bug in the world"
                                % (int(step), differs))
        acc = ffi.new("sq_erracc *")
        lib.sq_erracc_init(acc)
        lib.sq_erracc_add(acc, _fptr(what0), _dptr(full64), self._n)
        return out, Stats(acc, clipped, self._n)

    def _whole(self, masters, exact):
        """The n weights the masters stand for, in fp64."""
        if exact is not None:
            e = np.ascontiguousarray(_np(_host(exact)), dtype=np.float64).ravel()
            if e.size != self._n:
                raise ArgumentError(lib.SQ_ERR_ARG, "exact: %d elements, expected %d"
                                    % (e.size, self._n))
            return e
        full = np.zeros(self._n, dtype=np.float64)
        for r, m in enumerate(masters):
            a = _np(_host(m)).ravel()
            first, k = r * self._S, self.shard_len(r)
            if a.size not in (self._S, k):
                raise ArgumentError(lib.SQ_ERR_ARG, "master shard of worker %d: %d elements, "
                                    "expected %d" % (r, a.size, self._S))
            full[first:first + k] = a[:k]
        return full

    def _replicas(self, what0):
        tmp = np.empty(max(self._n, 1), dtype=np.float32)
        differs = ffi.new("int *")
        self._check(lib.sq_step_replicas(self._h(), _fptr(what0), _fptr(tmp), differs))
        return int(differs[0])

    def replicas_differ(self):
        """0 when every worker's w-hat holds the bytes of worker 0's, else
        the first worker whose copy differs."""
        return self._replicas(np.empty(max(self._n, 1), dtype=np.float32))

    # -- what it cost -----------------------------------------------------------

    def traffic(self, r=None):
        """{collective: {link: {sent_codes, sent_meta, recv_codes, recv_meta,
        sent_elems, messages, sent_params}}} of worker r since the last
        reset, or summed over every worker when r is None."""
        return traffic_dict(self._traffic(r)[0])

    def _traffic(self, r=None):
        w = self._h()
        if r is not None:
            return lib.sq_world_traffic(w, self._worker(r))
        t = ffi.new("sq_traffic *")
        lib.sq_world_add_traffic(w, t)
        return t

    def bytes_rows(self):
        """The store's bytes rows of this world since the last reset: one per
        collective and link level, with bits_per_elem and bits_per_param as
        replay stores them (None where the store has NULL)."""
        return bytes_rows_of(self._traffic())

    def reset_traffic(self):
        lib.sq_world_reset_traffic(self._h())

    def times(self):
        """{collective: {calls, seconds, link_seconds: {intra, inter}}}: wall
        time of the collectives since the world opened (the slowest rank's)."""
        w = self._h()
        out = {}
        for c, name in enumerate(COLLECTIVES):
            t = lib.sq_world_times(w, c)
            out[name] = {"calls": int(t.calls), "seconds": t.seconds,
                         "link_seconds": {l: t.link_seconds[i] for i, l in enumerate(LINKS)}}
        return out

    def wire_digest(self, r):
        """FNV-1a of every byte worker r sent (digest=True), 0 otherwise."""
        return int(lib.sq_world_wire_digest(self._h(), self._worker(r)))

    def __repr__(self):
        if self._w is None:
            return "<shardq.World closed>"
        return "<shardq.World %s %s, %d elements (%d padded)>" % (
            self.topo, self.scheme.preset, self._n, self._padded)


def bytes_rows(worlds):
    """The store's bytes rows of several worlds together (one per bucket or
    param, as replay sums them)."""
    if isinstance(worlds, World):
        worlds = [worlds]
    t = ffi.new("sq_traffic *")
    for w in worlds:
        lib.sq_world_add_traffic(w._h(), t)
    return bytes_rows_of(t)


def _step(step):
    s = int(step)
    if not 0 <= s < 2 ** 32:
        raise ArgumentError(lib.SQ_ERR_ARG, "step %d: outside 0 .. 2^32 - 1" % s)
    return s


def _np(x):
    """A host array of x's values (a tensor of a dtype numpy lacks, bf16,
    as float32: exact)."""
    if not _arrays.is_tensor(x):
        return np.asarray(x)
    t = x.detach().cpu()
    if t.dtype == _arrays.torch.bfloat16:
        t = t.float()
    return t.numpy()


def _dptr(a):
    return ffi.cast("double *", a.ctypes.data)


def _fptr(a):
    return ffi.cast("float *", a.ctypes.data)
