"""One rank of test_ddp.py's gloo job: python3 ddp_worker.py RANK SIZE DIR.

Every rank runs every scenario in the same order (the world and the hook
are collective) and saves what it put in and got out to DIR/rank<R>.pt
after each scenario, so that the tests compare it with the in-process
world; a failure leaves its traceback in DIR/rank<R>.err. The job joins
through a file store in DIR (no port to pick). The last scenario breaks the
group on purpose (a failing callback), so the process ends with os._exit.
"""
import datetime
import os
import sys
import traceback

import torch
import torch.distributed as dist

import shardq
from shardq import World
from shardq.ddp import ShardqHook, fsdp_hook, shardq_hook
from shardq.transport import TorchTransport

SCHEMES = ("baseline", "tlqhs", "sdp4bit")
TOPO = "2x2"
N_GRAD = 1000        # not a multiple of any padding unit: the padding is exercised
SEED = 7
DDP_STEPS = 25
DDP_RECORD_STEP = 2  # the step whose buckets are saved
DDP_SEED = 11
FSDP_SEED = 13
FSDP_NUMEL = 301     # FSDP pads it to 4 chunks of 76


def gen(seed):
    return torch.Generator().manual_seed(seed)


def grad_of(rank):
    return torch.randn(N_GRAD, generator=gen(100 + rank))


def grad_shard(world, r):
    """Worker r's gradient partition, as a tensor."""
    return world.get_grad_shard(r, out=torch.empty(world.shard))


def weights(world, r):
    """Worker r's w-hat, as a tensor."""
    return world.get_weights(r, out=torch.empty(world.elements))


def master_of(world, rank, w0, step):
    """Rank's master shard at a step: its slice of w0 moved a little, +0 past n."""
    s = world.shard
    m = torch.zeros(s)
    lo, hi = rank * s, min((rank + 1) * s, world.elements)
    if hi > lo:
        m[:hi - lo] = w0[lo:hi] + 0.01 * (step + 1) * torch.randn(hi - lo, generator=gen(
            200 + 10 * rank + step))
    return m


def transport_scenario(rank, tr, out):
    for scheme in SCHEMES:
        w = World(TOPO, scheme, N_GRAD, seed=SEED, transport=tr, digest=True)
        w.put_grad(rank, grad_of(rank))
        w.reduce_grads(3)
        shards = [grad_shard(w, r) for r in range(w.workers)]  # collective gets (broadcasts)
        with tr.own_reads():
            own = grad_shard(w, rank)
        out["grad/" + scheme] = dict(shards=shards, own=own,
                                     digests=[w.wire_digest(r) for r in range(w.workers)])
    w = World(TOPO, "qwd", N_GRAD, seed=SEED, transport=tr, digest=True)
    w0 = torch.randn(N_GRAD, generator=gen(5))
    w.init_weights(w0)
    masters, what = [], []
    for step in range(2):
        m = master_of(w, rank, w0, step)
        masters.append(m)
        w.put_master(rank, m)
        w.gather_weights(step)
        what.append([weights(w, r) for r in range(w.workers)])
    out["weight/qwd"] = dict(w0=w0, masters=masters, what=what,
                             digests=[w.wire_digest(r) for r in range(w.workers)])


def make_data(rank):
    g = gen(999)
    w_true = torch.randn(8, 4, generator=g)
    x = torch.randn(32, 8, generator=gen(1000 + rank))
    y = torch.tanh(x @ w_true) + 0.05 * torch.randn(32, 4, generator=gen(2000 + rank))
    return x, y


def train(rank, scheme):
    """DDP training of a 212-parameter MLP; scheme None: DDP's own all-reduce."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model = torch.nn.parallel.DistributedDataParallel(net)
    saved = []
    if scheme is not None:
        hook = ShardqHook(scheme, topo=TOPO, seed=DDP_SEED)

        def recording_hook(state, bucket):
            step = state.steps.get(bucket.index(), 0)
            inp = bucket.buffer().clone()
            fut = shardq_hook(state, bucket)
            if step == DDP_RECORD_STEP:
                saved.append(dict(index=bucket.index(), step=step, input=inp,
                                  output=fut.value().clone()))
            return fut
        model.register_comm_hook(hook, recording_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = make_data(rank)
    losses = []
    for _ in range(DDP_STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return dict(losses=losses, buckets=saved,
                params=sum(p.numel() for p in net.parameters()))


def fsdp_scenario(rank, out):
    hook = ShardqHook("tlqhs", topo=TOPO, seed=FSDP_SEED)
    n = 4 * ((FSDP_NUMEL + 3) // 4)
    calls = []
    for k in range(2):
        g = torch.zeros(n)
        g[:FSDP_NUMEL] = torch.randn(FSDP_NUMEL, generator=gen(300 + 10 * rank + k))
        o = torch.zeros(n // 4)
        fsdp_hook(hook, g.clone(), o)
        calls.append(dict(grad=g, output=o))
    g = torch.randn(FSDP_NUMEL, generator=gen(400 + rank))
    full = g.clone()
    fsdp_hook(hook, full)  # NO_SHARD: the whole mean in place
    out["fsdp"] = dict(sharded=calls, noshard=dict(grad=g, output=full), steps=hook.fsdp_steps)


def nonfinite_scenario(rank, out):
    hook = ShardqHook("tlqhs", topo=TOPO, seed=1)
    g = torch.ones(100)
    if rank == 2:
        g[17] = float("nan")
    try:
        hook.reduce_bucket(g, 0)
        out["nonfinite"] = dict(raised=None)
    except shardq.ShardqError as e:
        out["nonfinite"] = dict(raised=type(e).__name__, message=str(e))


class FaultyTransport(TorchTransport):
    """Rank 1's sends fail: a callback that raises."""

    def _send(self, m, frm):
        if self.rank == 1:
            raise RuntimeError("injected fault in rank 1's send")
        TorchTransport._send(self, m, frm)


def failure_scenario(rank, out):
    group = dist.new_group(timeout=datetime.timedelta(seconds=3))
    tr = FaultyTransport(group)
    w = World(TOPO, "tlqhs", N_GRAD, seed=SEED, transport=tr)
    w.put_grad(rank, grad_of(rank))
    try:
        w.reduce_grads(0)
        out["failure"] = dict(raised=None)
    except shardq.ShardqError as e:
        out["failure"] = dict(raised=type(e).__name__, kind=e.kind, message=str(e),
                              caught=repr(e.__cause__))


def main():
    rank, size, where = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    path = os.path.join(where, "rank%d.pt" % rank)
    out = {}

    def save():
        torch.save(out, path + ".tmp")
        os.replace(path + ".tmp", path)
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method="file://" + os.path.join(where, "store"),
                                rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=30))
        tr = TorchTransport()
        out["topology"] = tr.topology()
        transport_scenario(rank, tr, out)
        save()
        out["ddp"] = {s: train(rank, s) for s in SCHEMES}
        out["ddp"]["native"] = train(rank, None)
        save()
        fsdp_scenario(rank, out)
        nonfinite_scenario(rank, out)
        save()
        failure_scenario(rank, out)
        save()
        rc = 0
    except BaseException:
        with open(os.path.join(where, "rank%d.err" % rank), "w") as f:
            f.write(traceback.format_exc())
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # the broken group of the last scenario must not block the exit


if __name__ == "__main__":
    main()
