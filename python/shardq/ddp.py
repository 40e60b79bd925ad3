"""A scheme's gradient path in PyTorch training on real ranks: a DDP
communication hook, and FSDP's gradient hook.

    import torch.distributed as dist, shardq.ddp
    dist.init_process_group("gloo")                    # or "nccl"
    model = torch.nn.parallel.DistributedDataParallel(net)
    hook = shardq.ddp.ShardqHook("tlqhs", seed=1)      # collective (the topology)
    model.register_comm_hook(hook, shardq.ddp.shardq_hook)

DDP (`shardq_hook`). Each gradient bucket goes through the scheme's gradient
reduce-scatter on the real ranks: a sharded world of the bucket's size
(opened once per bucket index and size, on the CPU) whose messages move
between the processes through a `TorchTransport`, so rank r ends with
partition r of the reduced gradient, byte for byte what the emulated world
computes for the four (or N) ranks' buckets with the same seed and step.
DDP then needs the WHOLE averaged gradient on every rank, so the reduced
partitions are all-gathered unquantized (fp32, exact, one
torch.distributed.all_gather). That second hop is DDP's need, not part of
the scheme: a sharded optimizer would keep its partition and all-gather
weights instead (the scheme's weight path). Only the scheme's gradient knobs
matter here; its weight knobs are not used.

  topology   K x G: "KxG" given, or the ranks' hosts (node_topology: every
             host's ranks consecutive), which decides which messages are
             intra-node and which inter-node (the two link levels of
             twolevel paths).
  the mean   DDP averages. The world divides each gradient by N as it takes
             it when grad.mean=1 (every preset's value), so the result is the
             mean; a scheme with grad.mean=0 is refused.
  seeds      bucket i's world has seed `seed + i`, and the Philox step of its
             c-th reduction (from 0) is c: every rank agrees, since DDP runs
             every rank's buckets in the same order.
  dtypes     a bucket of another dtype (fp16, bf16) or on a GPU is copied to
             fp32 on the host for the world, and the result copied back.
  errors     a non-finite gradient on any rank raises NonFiniteError on every
             rank (the ranks first agree that all buckets are finite, so none
             waits for a peer that stopped); a failed transfer raises the
             world's sentence (the transport's, shardq.transport).
Per-tensor schemes (zeropp8, qgz, qwz: group rules or fallbacks per tensor)
need one world per parameter and are refused: a DDP bucket holds many. The
layout knobs (layout, layout.bucket) are not used either: DDP makes the
buckets (bucket_cap_mb).

FSDP in PyTorch 1.13 (what its API allows):
  gradients  FullyShardedDataParallel.register_comm_hook(state, hook) replaces
             the gradient reduce-scatter of every FSDP unit (or its
             all-reduce under NO_SHARD): `fsdp_hook` is such a hook, with the
             same state (`ShardqHook`). FSDP 1.13 runs its backward on CUDA
             streams, so it only runs with NCCL on GPUs; the hook itself is
             tested here by calling it as FSDP does, on CPU ranks.
  weights    FSDP 1.13 has NO hook on the parameter all-gather: it calls
             torch.distributed._all_gather_base from a private method
             (FlatParamHandle._all_gather_flat_param), and MixedPrecision only
             picks the dtype the parameters are gathered in. Quantizing that
             all-gather would mean replacing a private method, which this
             package does not do. What it does allow: a training loop that
             keeps its own master shards (ZeRO-style) runs the scheme's weight
             all-gather on real ranks with a sharded world over a
             TorchTransport -- init_weights, put_master(rank), gather_weights,
             get_weights -- whose w-hat equals the emulation's byte for byte
             (the package's tests check it for qwd on 4 gloo ranks).
"""
from ._lib import NonFiniteError, lib
from .scheme import Scheme
from .transport import TorchTransport, node_topology
from .world import World

try:
    import torch
    import torch.distributed as dist
except ImportError:  # pragma: no cover - the module needs PyTorch
    torch = dist = None

_U32 = 1 << 32
_U64 = 1 << 64


class ShardqHook:
    """The state of `shardq_hook` (DDP) and `fsdp_hook` (FSDP): a scheme's
    gradient path over the ranks of `group` (None: the default group).

    scheme: a Scheme or a preset name; set: knobs applied to it (as
    Scheme's set=: "grad.pipe=2", a list of such, or a dict);
    topo: "KxG" with K * G = the group's size, or None for the ranks' hosts;
    seed: the Philox seed (bucket i's world uses seed + i, mod 2^64);
    transport: a TorchTransport to use (default: one over group).
    The constructor is collective over the group when topo is None (the
    hosts are exchanged). Bad knobs raise SpecError, a per-tensor scheme or
    grad.mean=0 ValueError, before anything is exchanged.

    `scheme` is the resolved Scheme; `steps` maps a bucket index to the
    reductions it has had (the next Philox step, mod 2^32); `fsdp_steps`
    counts fsdp_hook's calls."""

    def __init__(self, scheme="tlqhs", topo=None, seed=0, set=(), group=None, transport=None):
        self.scheme, self.seed = Scheme(scheme, set=set), int(seed)
        name = self.scheme.preset
        if self.scheme.per_tensor:
            raise ValueError("ShardqHook: scheme %r has per-tensor rules (a group rule or a "
                             "fallback): they need one world per parameter, a DDP bucket holds "
                             "many" % name)
        if self.scheme.get("grad.mean") != "1":
            raise ValueError("ShardqHook: scheme %r sums gradients (grad.mean=0); DDP and FSDP "
                             "need the mean (grad.mean=1)" % name)
        self.transport = transport if transport is not None else TorchTransport(group)
        self.group = self.transport.group
        self.topo = topo if topo is not None else node_topology(self.group)
        self.rank, self.nranks = self.transport.rank, self.transport.nranks
        self.steps = {}
        self.fsdp_steps = 0
        self._worlds = {}

    def world(self, key, elements, seed):
        """The real-rank world of one bucket (cached by key)."""
        w = self._worlds.get(key)
        if w is None:
            w = World(self.topo, self.scheme, elements, seed=seed % _U64,
                      transport=self.transport)
            self._worlds[key] = w
        return w

    # -- collectives -------------------------------------------------------

    def _wire(self, t):
        return t.to(self.transport.device) if self.transport.device is not None else t

    def _agree_finite(self, x, what):
        """Every rank learns which ranks hold a non-finite value, and all raise."""
        ok = torch.tensor([1 if bool(torch.isfinite(x).all()) else 0], dtype=torch.int32)
        flags = [self._wire(torch.empty(1, dtype=torch.int32)) for _ in range(self.nranks)]
        dist.all_gather(flags, self._wire(ok), group=self.group)
        bad = [r for r, f in enumerate(flags) if int(f.item()) == 0]
        if bad:
            raise NonFiniteError(lib.SQ_ERR_NONFINITE, "%s: NaN or Inf in the gradient of rank%s %s"
                                 % (what, "s" if len(bad) > 1 else "", ", ".join(map(str, bad))))

    def _reduce_own_shard(self, w, x, step, what):
        """The world's reduce-scatter of x (this rank's gradient); returns this
        rank's partition (w.shard fp32 elements)."""
        self._agree_finite(x, what)
        w.put_grad(self.rank, x)
        w.reduce_grads(step % _U32)
        with self.transport.own_reads():  # each rank reads its own partition, no broadcast
            return w.get_grad_shard(self.rank, out=torch.empty(w.shard))

    def _all_gather_shards(self, shard):
        """Every rank's partition, fp32 and exact: the concatenation."""
        outs = [self._wire(torch.empty_like(shard)) for _ in range(self.nranks)]
        dist.all_gather(outs, self._wire(shard), group=self.group)
        return torch.cat([o.cpu() for o in outs])

    # -- the hooks -----------------------------------------------------------

    def reduce_bucket(self, buffer, index):
        """The averaged gradient of one DDP bucket (flat tensor `buffer`,
        bucket `index`), written into buffer, which is returned."""
        n = buffer.numel()
        i = int(index)
        w = self.world(("ddp", i, n), n, self.seed + i)
        step = self.steps.get(i, 0)
        self.steps[i] = step + 1
        x = buffer.detach().reshape(-1).to("cpu", torch.float32)
        shard = self._reduce_own_shard(w, x, step, "DDP bucket %d" % i)
        full = self._all_gather_shards(shard)
        buffer.copy_(full[:n].view(buffer.shape))
        return buffer

    def reduce_scatter(self, grad, output=None):
        """FSDP's gradient reduction: grad is the flat, padded gradient of
        N equal chunks; rank r's chunk of the mean goes into output. Without
        output (NO_SHARD) the whole mean goes into grad. The world of a chunk
        size c lays chunk r at r * S (S >= c, its partition size), so the
        world's partition r begins with FSDP's chunk r."""
        flat = grad.detach().reshape(-1)
        step = self.fsdp_steps
        self.fsdp_steps += 1
        if output is None:
            n = flat.numel()
            w = self.world(("fsdp-all", n), n, self.seed)
            shard = self._reduce_own_shard(w, flat.to("cpu", torch.float32), step, "FSDP gradient")
            grad.copy_(self._all_gather_shards(shard)[:n].view(grad.shape))
            return None
        N, c = self.nranks, output.numel()
        if flat.numel() != N * c:
            raise ValueError("fsdp_hook: a gradient of %d elements for %d ranks' chunks of %d"
                             % (flat.numel(), N, c))
        w = self._worlds.get(("fsdp", c))
        if w is None:
            # the partition size S of N * c elements under this padding rule
            with World(self.topo, self.scheme, N * c, dry=True) as probe:
                S = probe.shard
            w = self.world(("fsdp", c), N * S, self.seed)
        x = torch.zeros(N, w.shard, dtype=torch.float32)
        x[:, :c] = flat.to("cpu", torch.float32).view(N, c)
        shard = self._reduce_own_shard(w, x.view(-1), step, "FSDP gradient")
        output.copy_(shard[:c].view(output.shape))
        return None


def shardq_hook(state, bucket):
    """The DDP communication hook: `state` is a ShardqHook. Returns a
    completed future holding the bucket's averaged gradient."""
    fut = torch.futures.Future()
    fut.set_result(state.reduce_bucket(bucket.buffer(), bucket.index()))
    return fut


def fsdp_hook(state, grad, output=None):
    """FSDP 1.13's gradient communication hook (register_comm_hook(state,
    fsdp_hook)): `state` is a ShardqHook; the sharded strategies pass
    output (this rank's chunk), NO_SHARD does not."""
    state.reduce_scatter(grad, output)


__all__ = ["ShardqHook", "shardq_hook", "fsdp_hook", "TorchTransport", "node_topology"]
