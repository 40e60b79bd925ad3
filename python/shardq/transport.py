"""The sharded world on real ranks: a transport over torch.distributed.

`TorchTransport` is an `sq_transport` (shardq/plan.h) whose callbacks are
Python functions that move the packed bytes of the world's messages with
torch.distributed, one rank per process: give its `c_transport` to a world
(sq_world_config.transport) opened by every process of the group with the
same topology, scheme, elements and seed, make the same calls in the same
order on every process, and each process runs its own rank's plan; the
bytes equal the in-process world's for the same seed (the plan decides what
moves, the transport only carries it).

What it carries, and how:
  send / recv   one message per plan message: its codes, scales and offsets
                (the sizes in sq_plan_msg) concatenated, with a point-to-point
                torch.distributed.send / recv. Both backends match the
                messages of one (source, destination) pair in the order they
                were sent, as the plan requires; send returns once the bytes
                are copied or delivered.
  share         torch.distributed.broadcast of the owner's bytes.
  gather_all    torch.distributed.all_gather of every rank's bytes.
Both link levels (intra, inter) go through the one group: for gloo and NCCL
the node layout decides the path of a message, not the communicator, and
the world's accounting takes the link from the plan. The topology's node
level comes from the ranks' hosts (`node_topology`) or is given.

Backends: gloo moves host (CPU) uint8 tensors; NCCL moves CUDA uint8
tensors of the current device, so every message is copied host -> device
-> host (the world's buffers must be on the host: open the world on the CPU).
The NCCL path has not been run by the package's tests (they have no GPU).

Errors: a callback never lets a Python exception into C. It writes the
exception's sentence into the world's sq_error and returns a negative kind
(SQ_ERR_IO for a failed communication), the world fails, and the caller's
C call raises a ShardqError carrying the sentence; the exception itself is
kept in `TorchTransport.error`. A rank that fails leaves its peers waiting:
they fail too when the group's timeout passes
(init_process_group(timeout=...)) or their connection to it breaks.
"""
import contextlib
import socket

from ._lib import ShardqError, ffi, lib

try:
    import torch
    import torch.distributed as dist
except ImportError:  # pragma: no cover - the module needs PyTorch
    torch = dist = None


def _require_dist():
    if torch is None:
        raise ImportError("shardq.transport needs PyTorch (torch.distributed)")
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("torch.distributed is not initialised: call "
                           "torch.distributed.init_process_group first")


def node_topology(group=None):
    """The topology "KxG" of the group's ranks by host: K hosts of G ranks
    each, every host's ranks consecutive (node k holds ranks k*G .. k*G+G-1).
    Collective over the group. ValueError when the hosts hold different
    numbers of ranks or interleave them (give the topology instead)."""
    _require_dist()
    n = dist.get_world_size(group)
    hosts = [None] * n
    dist.all_gather_object(hosts, socket.gethostname(), group=group)
    g = 1
    while g < n and hosts[g] == hosts[0]:
        g += 1
    if n % g:
        raise ValueError("the hosts run different numbers of ranks (%d ranks, the first host "
                         "%d): a KxG topology needs G on every host; give it explicitly" % (n, g))
    for r in range(n):
        if hosts[r] != hosts[r - r % g] or (r % g == 0 and r and hosts[r] in hosts[:r]):
            raise ValueError("the ranks of a host are not consecutive (rank %d runs on %s): node "
                             "k must hold ranks k*%d .. k*%d+%d; give the topology explicitly"
                             % (r, hosts[r], g, g, g - 1))
    return "%dx%d" % (n // g, g)


def _write_error(err, status, message):
    """The sentence into a C sq_error (sq_error_set is variadic: filled here)."""
    if err == ffi.NULL:
        return status
    raw = message.encode("utf-8", "replace")[:lib.SQ_ERROR_MSG - 1]
    raw = raw.decode("utf-8", "ignore").encode("utf-8")  # no cut multibyte character
    err.status = status
    ffi.memmove(err.msg, raw + b"\0", len(raw) + 1)
    return status


def _status_of(exc):
    if isinstance(exc, ShardqError):
        return exc.status
    if isinstance(exc, MemoryError):
        return lib.SQ_ERR_NOMEM
    if isinstance(exc, (ValueError, TypeError)):
        return lib.SQ_ERR_ARG
    return lib.SQ_ERR_IO


def _guarded(what, context=None):
    """A callback body run so that no exception reaches C: its sentence goes
    into the sq_error, with `what` and context(*args) naming the operation."""
    def wrap(body):
        def callback(ctx, *args):
            err = args[-1]
            try:
                self = ffi.from_handle(ctx)
            except Exception as e:  # a handle that outlived its transport
                return _write_error(err, lib.SQ_ERR_ARG, "%s: no transport (%s)" % (what, e))
            try:
                body(self, *args[:-1])
                return lib.SQ_OK
            except BaseException as e:  # noqa: B902 - nothing may unwind through C
                self.error = e
                lines = str(e).strip().splitlines()
                text = lines[0] if lines else type(e).__name__
                head = what + (" " + context(*args[:-1]) if context else "")
                return _write_error(err, _status_of(e), "torch.distributed (%s) %s: %s" % (
                    self.backend, head, text))
        callback.__name__ = body.__name__
        return callback
    return wrap


class TorchTransport:
    """An sq_transport over the torch.distributed process group `group`
    (None: the default group), one rank per process: nranks and rank are
    the group's. `c_transport` is the `sq_transport *` to put in a world's
    config; the object must outlive every world that uses it.

    The world's messages travel on the group itself, in the order the plan
    lists them: do not run other work on the group from another thread
    while a world collective runs on it."""

    def __init__(self, group=None):
        _require_dist()
        self.group = group
        self.nranks = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise ValueError("TorchTransport: this process is not a member of the group")
        self.backend = str(dist.get_backend(group))
        if self.backend == "nccl":
            self.device = torch.device("cuda", torch.cuda.current_device())
        elif self.backend == "gloo":
            self.device = None
        else:
            raise ValueError("TorchTransport: backend %r: gloo (CPU) or nccl (CUDA) needed"
                             % self.backend)
        global_rank = getattr(dist, "get_global_rank", None) or \
            dist.distributed_c10d._get_global_rank  # the name before PyTorch 1.13
        self._peer = [r if group is None else global_rank(group, r) for r in range(self.nranks)]
        self._own_reads = False
        self.error = None  # the last exception a callback caught
        self._handle = ffi.new_handle(self)
        tr = ffi.new("sq_transport *")
        tr.ctx = self._handle
        tr.send = lib._sq_torch_send
        tr.recv = lib._sq_torch_recv
        tr.phase_end = ffi.NULL
        tr.share = lib._sq_torch_share
        tr.gather_all = lib._sq_torch_gather_all
        tr.nranks = self.nranks
        tr.rank = self.rank
        self._tr = tr

    @property
    def c_transport(self):
        """The `sq_transport *` (cdata) of this transport."""
        return self._tr

    def topology(self):
        """node_topology(group): "KxG" from the ranks' hosts (collective)."""
        return node_topology(self.group)

    def take_error(self):
        """The exception the last failed callback caught (None if none), cleared."""
        e, self.error = self.error, None
        return e

    @contextlib.contextmanager
    def own_reads(self):
        """Inside, a world's get_*(r) reads worker r's bytes without sharing
        them, so every process may read its OWN worker's data alone (its
        gradient partition, its master shard) with no communication; reading
        another worker's data fails (SQ_ERR_ARG) instead of waiting for a
        broadcast no other process joins. Not collective."""
        old, self._own_reads = self._own_reads, True
        try:
            yield self
        finally:
            self._own_reads = old

    # -- moving bytes ------------------------------------------------------

    def _host(self, n):
        return torch.empty(n, dtype=torch.uint8)

    def _to_wire(self, t):
        return t if self.device is None else t.to(self.device)

    def _from_wire(self, t):
        return t if self.device is None else t.cpu()

    def _sync(self):
        if self.device is not None:  # the NCCL work done before the host reuses memory
            torch.cuda.current_stream(self.device).synchronize()

    def _send(self, m, frm):
        sizes = (m.code_bytes, m.scale_bytes, m.offset_bytes)
        total = sum(sizes)
        if frm == ffi.NULL or total == 0:  # a dry rank: sizes only
            return
        buf = self._host(total)
        p, off = ffi.cast("uint8_t *", buf.data_ptr()), 0
        for src, n in zip((frm.codes, frm.scales, frm.offsets), sizes):
            if n:
                ffi.memmove(p + off, src, n)
                off += n
        dist.send(self._to_wire(buf), self._peer[m.dst], group=self.group)
        self._sync()

    def _recv(self, m, to):
        sizes = (m.code_bytes, m.scale_bytes, m.offset_bytes)
        total = sum(sizes)
        if to == ffi.NULL or total == 0:
            return
        wire = self._to_wire(self._host(total))
        dist.recv(wire, self._peer[m.src], group=self.group)
        buf = self._from_wire(wire)
        p, off = ffi.cast("uint8_t *", buf.data_ptr()), 0
        for dst, n in zip((to.codes, to.scales, to.offsets), sizes):
            if n:
                ffi.memmove(dst, p + off, n)
                off += n

    def _share(self, owner, buf, nbytes):
        if owner < 0 or owner >= self.nranks:
            raise ValueError("a share from rank %d of %d" % (owner, self.nranks))
        if self._own_reads:
            if owner != self.rank:
                raise ValueError("inside own_reads() rank %d reads only its own worker's data, "
                                 "not worker %d's" % (self.rank, owner))
            return
        if nbytes == 0:
            return
        if self.device is None:  # in place, no copy
            dist.broadcast(torch.frombuffer(ffi.buffer(buf, nbytes), dtype=torch.uint8),
                           self._peer[owner], group=self.group)
            return
        t = self._host(nbytes)
        if owner == self.rank:
            ffi.memmove(ffi.cast("uint8_t *", t.data_ptr()), buf, nbytes)
        wire = self._to_wire(t)
        dist.broadcast(wire, self._peer[owner], group=self.group)
        t = self._from_wire(wire)
        ffi.memmove(buf, ffi.cast("uint8_t *", t.data_ptr()), nbytes)

    def _gather_all(self, mine, all_, nbytes):
        if nbytes == 0:
            return
        t = self._host(nbytes)
        ffi.memmove(ffi.cast("uint8_t *", t.data_ptr()), mine, nbytes)
        outs = [self._to_wire(self._host(nbytes)) for _ in range(self.nranks)]
        dist.all_gather(outs, self._to_wire(t), group=self.group)
        dst = ffi.cast("uint8_t *", all_)
        for r, o in enumerate(outs):
            o = self._from_wire(o)
            ffi.memmove(dst + r * nbytes, ffi.cast("uint8_t *", o.data_ptr()), nbytes)


# The C entry points: cffi calls these with the transport's handle as ctx.

def _msg_bytes(m):
    return m.code_bytes + m.scale_bytes + m.offset_bytes


@ffi.def_extern(name="_sq_torch_send")
@_guarded("send", lambda m, frm: "of %d bytes to rank %d" % (_msg_bytes(m), m.dst))
def _c_send(self, m, frm):
    self._send(m, frm)


@ffi.def_extern(name="_sq_torch_recv")
@_guarded("recv", lambda m, to: "of %d bytes from rank %d" % (_msg_bytes(m), m.src))
def _c_recv(self, m, to):
    self._recv(m, to)


@ffi.def_extern(name="_sq_torch_share")
@_guarded("broadcast", lambda owner, buf, n: "of %d bytes from rank %d" % (n, owner))
def _c_share(self, owner, buf, nbytes):
    self._share(owner, buf, nbytes)


@ffi.def_extern(name="_sq_torch_gather_all")
@_guarded("all_gather", lambda mine, all_, n: "of %d bytes per rank" % n)
def _c_gather_all(self, mine, all_, nbytes):
    self._gather_all(mine, all_, nbytes)
