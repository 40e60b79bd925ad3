"""Capturing a trace from a PyTorch training loop, in the two ways people
train data-parallel (docs/traces.md; the writer is trace.TraceWriter):

  MicroBatchCapture  one process: each step's W micro-batches stand for the
                     W workers of a data-parallel job; worker w's file is
                     the gradient of micro-batch w alone.
  DDPCapture         a torch.distributed DistributedDataParallel job: rank
                     r writes grads-wRR, its own gradient before DDP
                     averages it; rank 0 writes the weights and the manifest.

Steps are captured every `every` training steps (step % every == 0): each
captured step holds every worker's gradient. Weights -- the ones the step's
gradients were computed at, before the optimizer updates them -- come at a
cadence of their own: weights_every=M (a multiple of every) writes them at
the captured steps with step % M == 0 only; the default, weights_every=None,
is every captured step; weights=False writes none. The manifest lists the
steps that have weights, and `shardq replay` runs its weight path from one
of them to the next, as training with an all-gather at that cadence would
(qwd's error grows with it). `shardq trace info DIR` and `shardq replay DIR`
read the result.
"""
import contextlib
import json

from ._lib import ShardqError, lib, error
from .trace import TraceWriter, trace_params

__all__ = ["MicroBatchCapture", "DDPCapture"]


def _arg_error(message):
    return error(lib.SQ_ERR_ARG, message)


def _every(every):
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise _arg_error("every: %r is not a positive integer (capture every N-th step)"
                         % (every,))
    return every


def _weights_every(every, weights, weights_every):
    # None: the weights with every captured step; 0: no weights
    if not weights:
        if weights_every is not None:
            raise _arg_error("weights_every: %r, but weights=False writes none" % (weights_every,))
        return 0
    if weights_every is None:
        return every
    if (isinstance(weights_every, bool) or not isinstance(weights_every, int) or
            weights_every < 1 or weights_every % every):
        raise _arg_error("weights_every: %r is not a positive multiple of every (%d): weights "
                         "come at captured steps" % (weights_every, every))
    return weights_every


def _describe(module, model_info):
    # the manifest's informative "model": what the caller says, else the class
    return model_info if model_info is not None else {"class": type(module).__name__}


class MicroBatchCapture:
    """Captures a one-process training loop whose steps accumulate the
    gradients of `workers` micro-batches: micro-batch w's gradient is worker
    w's file, as if W data-parallel workers had each computed one, and the
    step's weights are written when the step begins (at the captured steps
    with step % weights_every == 0: by default every captured step; none
    with weights=False).

        cap = shardq.MicroBatchCapture(model, "run1", workers=4, every=2)
        with cap:                                  # the manifest on success
            for t in range(steps):
                with cap.step(t):                  # weights of a captured step
                    for w in range(4):
                        with cap.worker(w):        # micro-batch w's gradient
                            loss_fn(model(x[w]), y[w]).backward()
                opt.step(); opt.zero_grad()

    cap.worker(w) captures exactly the gradient its block's backward
    computes (it sets the params' .grad aside and restores them after, to
    the same sum plain accumulation gives), so the loop keeps accumulating
    as it did. A loop that zeroes the gradients between micro-batches calls
    cap.add_grads(w) after each backward instead (or gives a mapping name ->
    tensor). A loss scaled by 1/W scales the captured gradients too.
    Outside captured steps both do nothing. A param without a gradient in a
    micro-batch (unused by it) is captured as zeros.

    Workers come in order 0 .. W-1 (w=None: the next one), all W in every
    captured step. An exception inside a captured step, or a step left with
    missing workers, aborts the capture: no manifest, as for a killed run.
    The writer's other arguments are TraceWriter's; model_info is the
    manifest's "model" (default: the module's class name).
    """

    def __init__(self, model, dir, workers, every=1, weights=True, dtype="f32", topo=None,
                 owner=None, model_info=None, weights_every=None):
        self.model = model
        self.every = _every(every)
        self.weights = bool(weights)
        self.weights_every = _weights_every(self.every, self.weights, weights_every)
        self._named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.writer = TraceWriter(dir, model, workers, dtype, topo, _describe(model, model_info),
                                  owner)
        self._step = None
        self._captured = False
        self._next = 0

    @property
    def dir(self):
        return self.writer.dir

    @property
    def id(self):
        return self.writer.id

    @property
    def workers(self):
        return self.writer.workers

    def captures(self, step):
        """Whether training step `step` is captured."""
        return step % self.every == 0

    def captures_weights(self, step):
        """Whether training step `step` is captured with its weights."""
        return self.weights and step % self.weights_every == 0

    @contextlib.contextmanager
    def step(self, step):
        """The block of training step `step` (its micro-batches' backward
        passes, not the optimizer's update: the weights of a captured step
        are written as the block begins)."""
        if self._step is not None:
            raise _arg_error("%s: step %r begins inside step %r" % (self.dir, step, self._step))
        self._step, self._captured, self._next = step, self.captures(step), 0
        try:
            if self._captured and self.captures_weights(step):
                self.writer.write_weights(step, self.model)
            yield self
            if self._captured and self._next != self.workers:
                raise _arg_error("%s: step %d: %d of %d micro-batch gradients captured "
                                 "(grads-w%02d.safetensors is missing)" % (
                                     self.dir, step, self._next, self.workers, self._next))
        except BaseException:
            if self._captured:
                self.writer.abort()
            raise
        finally:
            self._step = None

    @contextlib.contextmanager
    def worker(self, w=None):
        """The block of micro-batch w's backward pass (w=None: the next
        worker); yields w. The params' .grad, set aside while it runs, end
        as the sum of what they were and the micro-batch's gradient."""
        w = self._worker(w)
        if not self._captured:
            yield w
            return
        saved = [p.grad for _, p in self._named]
        for _, p in self._named:
            p.grad = None
        try:
            yield w
            micro = [p.grad for _, p in self._named]
            self._put(w, micro)
        finally:
            for (_, p), s in zip(self._named, saved):
                m = p.grad
                p.grad = s if m is None else m if s is None else s.add_(m)

    def add_grads(self, w=None, grads=None):
        """Captures worker w's gradient (w=None: the next worker): grads,
        a mapping name -> tensor, or the model's current .grad (of this
        micro-batch alone: the loop zeroed them before its backward)."""
        w = self._worker(w)
        if not self._captured:
            return
        if grads is None:
            self._put(w, [p.grad for _, p in self._named])
        else:
            self.writer.write_grads(self._step, w, grads)
            self._next = w + 1

    def _worker(self, w):
        if self._step is None:
            raise _arg_error("%s: a micro-batch outside capture.step()" % self.dir)
        return self._next if w is None else w

    def _put(self, w, grads):
        if all(g is None for g in grads):
            raise _arg_error("%s: step %d, worker %d: no gradient: backward did not run for "
                             "this micro-batch" % (self.dir, self._step, w))
        import torch
        values = {n: torch.zeros(p.shape) if g is None else g
                  for (n, p), g in zip(self._named, grads)}
        self.writer.write_grads(self._step, w, values)
        self._next = w + 1

    def close(self):
        """Writes the manifest; the trace is complete."""
        self.writer.close()

    def abort(self):
        """Stops without a manifest."""
        self.writer.abort()

    def __enter__(self):
        return self

    def __exit__(self, etype, value, tb):
        if not self.writer.closed:
            self.close() if etype is None else self.abort()
        return False


class _Ranks:
    """What the ranks of a capture tell each other, through the job's c10d
    store (the rendezvous key-value store every rank already reaches): no
    tensor, no collective on the training's process groups, no process
    group of its own. Every rank makes the same calls in the same order."""

    _made = 0  # captures made in this process: the same count on every rank

    def __init__(self, store, rank, world):
        _Ranks._made += 1
        self.store, self.rank, self.world = store, rank, world
        self.prefix = "shardq/capture/%d/" % _Ranks._made
        self.seq = 0
        self._nerr = 0

    def share(self, value):
        """Rank 0's value (a JSON-serialisable one), on every rank."""
        key = self.prefix + "share"
        if self.rank == 0:
            self.store.set(key, json.dumps(value))
        self.store.wait([key])
        return json.loads(self.store.get(key).decode())

    def agree(self, mine):
        """Waits for every rank; mine is None, or this rank's failure
        (status, sentence). Returns None when every rank succeeded, else
        the first failing rank and its failure."""
        self.seq += 1
        key = "%s%d/" % (self.prefix, self.seq)
        if mine is not None:  # before arriving: the last to arrive sees it
            n = self.store.add(key + "nerr", 1)
            self.store.set(key + "err/%d" % n, json.dumps([self.rank] + list(mine)))
        if self.store.add(key + "arrived", 1) == self.world:
            self.store.set(key + "done", "1")
        self.store.wait([key + "done"])
        nerr = self.store.add(key + "nerr", 0)
        bad = None
        if nerr:
            r, status, msg = json.loads(self.store.get(key + "err/1").decode())
            bad = (r, (status, msg))
        if self.rank == 0:
            if self.seq > 1:  # every rank is past the one before: it arrived here
                self._forget(self.seq - 1, self._nerr)
            self._nerr = nerr
        return bad

    def _forget(self, seq, nerr):
        key = "%s%d/" % (self.prefix, seq)
        try:
            for k in ["nerr", "arrived", "done"] + ["err/%d" % i for i in range(1, nerr + 1)]:
                self.store.delete_key(key + k)
        except (AttributeError, RuntimeError):  # a store that cannot delete keeps them
            pass


class DDPCapture:
    """Captures a DistributedDataParallel job: every rank calls it alike
    (it is collective), rank r writes grads-wRR.safetensors of each
    captured step, rank 0 the weights and, on close(), the manifest. The
    trace has one worker per rank; dir must be one directory every rank
    sees (a shared file system across hosts).

        cap = shardq.DDPCapture(ddp_model, "run1", every=10)
        for t in range(steps):
            with cap.step(t):
                loss_fn(ddp_model(x), y).backward()
            opt.step(); opt.zero_grad()
        cap.close()

    The gradient captured is the one DDP communicates, before it is
    averaged: a communication hook (register_comm_hook) copies each bucket
    to host memory and hands it on to the hook that does the averaging
    (`hook`, default PyTorch's allreduce_hook, which divides by the world
    size and all-reduces, as DDP does without a hook, up to rounding;
    `hook_state` its state). A hook, because it sees exactly the local
    gradient that goes on the wire -- the sum over every micro-batch
    accumulated under no_sync(), which a backward hook on the params would
    miss -- and the params' .grad afterwards are already averaged; no_sync()
    on the captured step instead would change the training. DDP takes one
    communication hook, and none can be removed: after close() it only
    passes buckets on. Only captured steps are copied.

    Rank 0 opens the trace and the others join it (TraceWriter.join); at
    the end of each captured step the ranks agree, through the job's c10d
    store (`store`, default the default process group's), that every file
    was written, and rank 0 adopts the others' files before the next one.
    A failure on any rank -- a write, an exception inside a captured step
    -- is raised on every rank at that point (the others' error names the
    rank) and aborts the capture everywhere: no manifest. Errors in the
    weights on rank 0 wait for the agreement too, so that no rank is left
    alone in an all-reduce.

    PyTorch 1.13 with gloo: a DDP module with a Python communication hook
    (this one, or any) can hang the process at exit when the process group
    is destroyed before the module; drop the module first (del ddp_model,
    then dist.destroy_process_group()).
    """

    def __init__(self, ddp_model, dir, every=1, weights=True, dtype="f32", topo=None,
                 owner=None, model_info=None, hook=None, hook_state=None, store=None,
                 weights_every=None):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        if not isinstance(ddp_model, DistributedDataParallel):
            raise _arg_error("%s: %s is not a DistributedDataParallel module" % (
                dir, type(ddp_model).__name__))
        self.every = _every(every)
        self.weights = bool(weights)
        self.weights_every = _weights_every(self.every, self.weights, weights_every)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.module = ddp_model.module
        self._named = [(n, p) for n, p in self.module.named_parameters() if p.requires_grad]
        self._name_of = {id(p): n for n, p in self._named}
        params = trace_params([(n, tuple(p.shape)) for n, p in self._named])
        if store is None:
            from torch.distributed import distributed_c10d
            store = distributed_c10d._get_default_store()
        self._ranks = _Ranks(store, self.rank, self.world)
        self._failed = None
        self._armed = False
        self._stash, self._twice, self._pending = {}, None, None
        self.writer, err, opened = None, None, None
        if self.rank == 0:
            try:
                self.writer = TraceWriter(dir, params, self.world, dtype, topo,
                                          _describe(self.module, model_info), owner)
                opened = {"id": self.writer.id}
            except ShardqError as e:
                err = e
                opened = {"status": e.status, "error": str(e)}
        opened = self._ranks.share(opened)
        if "error" in opened:  # every rank stops here, none waits for another
            if err is not None:
                raise err
            raise error(opened["status"], "rank 0: %s" % opened["error"])
        if self.rank != 0:
            try:
                self.writer = TraceWriter.join(dir, opened["id"], self.rank, params, self.world,
                                               dtype)
            except ShardqError as e:
                err = e
        self._agree(err)
        if hook is None:
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
            hook = allreduce_hook
        self._inner = hook
        ddp_model.register_comm_hook(hook_state, self._hook)

    @property
    def dir(self):
        return self.writer.dir if self.writer else None

    @property
    def id(self):
        return self.writer.id if self.writer else None

    def captures(self, step):
        """Whether training step `step` is captured."""
        return step % self.every == 0

    def captures_weights(self, step):
        """Whether training step `step` is captured with its weights."""
        return self.weights and step % self.weights_every == 0

    def _hook(self, state, bucket):
        if self._armed:
            import torch
            for p, g in zip(bucket.parameters(), bucket.gradients()):
                name = self._name_of.get(id(p))
                if name is None:
                    continue
                if name in self._stash:
                    self._twice = name
                # a copy: the averaging hook divides the bucket in place
                self._stash[name] = g.detach().to("cpu", torch.float32, copy=True).reshape(
                    p.shape)
        return self._inner(state, bucket)

    @contextlib.contextmanager
    def step(self, step):
        """The block of training step `step`: its backward pass (one that
        synchronises; micro-batches before it under no_sync()), not the
        optimizer's update. Collective on a captured step."""
        self._check_open()
        if not self.captures(step):
            yield self
            return
        err = None
        self._stash, self._twice = {}, None
        if self.rank == 0:
            try:
                self._adopt_pending()
                if self.captures_weights(step):
                    self.writer.write_weights(step, self.module)
            except ShardqError as e:
                err = e
        self._armed = True
        try:
            yield self
        except BaseException as e:
            self._armed = False
            try:  # the others must not wait for this rank forever
                self._agree(e)
            except Exception:
                pass
            self._fail("step %s: %s: %s" % (step, type(e).__name__, e))
            raise
        self._armed = False
        if err is None:
            try:
                self._write_own(step)
            except ShardqError as e:
                err = e
        self._stash = {}
        self._agree(err)
        self._pending = step

    def _write_own(self, step):
        where = "%s: step %d, rank %d" % (self.writer.dir, step, self.rank)
        if not self._stash:
            raise _arg_error("%s: no gradient reached DDP's communication hook: did a "
                             "backward pass run inside capture.step() (outside no_sync())?"
                             % where)
        if self._twice:
            raise _arg_error("%s: tensor '%s': DDP communicated it twice in one captured step "
                             "(two backward passes outside no_sync())" % (where, self._twice))
        missing = [n for n, _ in self._named if n not in self._stash]
        if missing:
            raise _arg_error("%s: tensor '%s': no gradient reached DDP's communication hook"
                             % (where, missing[0]))
        self.writer.write_grads(step, self.rank, self._stash)

    def _adopt_pending(self):
        if self._pending is not None:
            for r in range(1, self.world):
                self.writer.adopt(self._pending, r)
            self._pending = None

    def _agree(self, err):
        """Every rank learns whether every rank succeeded; a failure
        anywhere is raised everywhere (this rank's own error as itself)."""
        mine = None
        if err is not None:
            mine = (getattr(err, "status", lib.SQ_ERR_INTERRUPTED),
                    "%s: %s" % (type(err).__name__, err))
        bad = self._ranks.agree(mine)
        if bad is None:
            return
        r, (status, msg) = bad
        self._fail("rank %d: %s" % (r, msg))
        if err is not None:
            raise err
        raise error(status, "rank %d: %s" % (r, msg))

    def _fail(self, why):
        self._failed = self._failed or why
        if self.writer is not None:
            self.writer.abort()

    def _check_open(self):
        if self._failed:
            raise error(lib.SQ_ERR_INTERRUPTED, "the capture stopped: %s" % self._failed)
        if self.writer is None or self.writer.closed:
            raise _arg_error("the capture is closed")

    def close(self):
        """Collective: rank 0 adopts the last step's files and writes the
        manifest; every rank returns once the trace is complete (or raises
        the failure of any rank)."""
        self._check_open()
        err = None
        try:
            if self.rank == 0:
                self._adopt_pending()
            self.writer.close()
        except ShardqError as e:
            err = e
        self._agree(err)

    def abort(self):
        """Stops this rank's writer without a manifest (not collective)."""
        self._fail("aborted")

    def __enter__(self):
        return self

    def __exit__(self, etype, value, tb):
        if self.writer is not None and not self.writer.closed and not self._failed:
            self.close() if etype is None else self.abort()
        return False
