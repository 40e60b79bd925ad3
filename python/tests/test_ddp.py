"""The world on real ranks (shardq.transport) and the DDP/FSDP hooks
(shardq.ddp): four gloo processes on this host run every scenario once
(ddp_worker.py), and each test compares what they saved with the
in-process world of the same seed, byte for byte.

Loss tolerance: after 25 SGD steps of the 212-parameter MLP, the final loss
(the mean of the four ranks' losses) under tlqhs and sdp4bit's gradient
path is within 5 % (relative) of the baseline hook's, and the baseline
hook's within 1e-4 of DDP's own all-reduce (the same fp32 sum in another
order).
"""
import os
import subprocess
import sys
import time

import pytest
import torch

import shardq
from shardq import World
from shardq.ddp import ShardqHook
from shardq.transport import TorchTransport

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_worker as W  # noqa: E402  (the scenarios' constants and inputs)

RANKS = 4
JOB_TIMEOUT_S = 60
LOSS_RTOL = 0.05        # a quantized gradient path against the baseline
NATIVE_RTOL = 1e-4      # the baseline hook against DDP's own all-reduce


def same_bytes(a, b):
    a, b = a.contiguous(), b.contiguous()
    return a.dtype == b.dtype and a.shape == b.shape and \
        a.numpy().tobytes() == b.numpy().tobytes()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """What each of the four ranks saved (a list indexed by rank)."""
    where = str(tmp_path_factory.mktemp("ddp"))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if "GLOO_SOCKET_IFNAME" not in env and os.path.exists("/sys/class/net/lo"):
        env["GLOO_SOCKET_IFNAME"] = "lo"  # 127.0.0.1, whatever the host name resolves to
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_worker.py")
    procs = []
    for r in range(RANKS):
        log = open(os.path.join(where, "rank%d.log" % r), "w")
        procs.append(subprocess.Popen([sys.executable, worker, str(r), str(RANKS), where],
                                      stdout=log, stderr=subprocess.STDOUT, env=env))
        log.close()
    deadline = time.monotonic() + JOB_TIMEOUT_S
    hung = []
    for r, p in enumerate(procs):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung.append(r)
    for r in hung:
        procs[r].kill()
        procs[r].wait()

    def report(r):
        text = ""
        for name in ("rank%d.err" % r, "rank%d.log" % r):
            f = os.path.join(where, name)
            if os.path.exists(f):
                text += "--- %s\n%s" % (name, open(f).read()[-3000:])
        return text
    if hung:
        pytest.fail("ranks %s still ran after %d s:\n%s" % (
            hung, JOB_TIMEOUT_S, "".join(report(r) for r in hung)))
    failed = [r for r, p in enumerate(procs) if p.returncode != 0]
    if failed:
        pytest.fail("ranks %s failed:\n%s" % (failed, "".join(report(r) for r in failed)))
    return [torch.load(os.path.join(where, "rank%d.pt" % r)) for r in range(RANKS)]


# -- the transport alone ---------------------------------------------------

def test_topology_from_hosts(ranks):
    # four processes on one host: one node of four
    assert [d["topology"] for d in ranks] == ["1x4"] * RANKS


@pytest.mark.parametrize("scheme", W.SCHEMES)
def test_grad_reduce_on_ranks_equals_in_process(ranks, scheme):
    ref = World(W.TOPO, scheme, W.N_GRAD, seed=W.SEED, digest=True)
    for r in range(RANKS):
        ref.put_grad(r, W.grad_of(r))
    ref.reduce_grads(3)
    want = [W.grad_shard(ref, q) for q in range(RANKS)]
    digests = [ref.wire_digest(q) for q in range(RANKS)]
    assert all(digests)
    for r, d in enumerate(ranks):
        got = d["grad/" + scheme]
        for q in range(RANKS):
            assert same_bytes(got["shards"][q], want[q]), "rank %d, shard %d" % (r, q)
        assert same_bytes(got["own"], want[r]), "rank %d's own read" % r
        assert got["digests"] == digests, "rank %d's wire digests" % r


def test_qwd_weight_allgather_on_ranks_equals_in_process(ranks):
    ref = World(W.TOPO, "qwd", W.N_GRAD, seed=W.SEED, digest=True)
    ref.init_weights(ranks[0]["weight/qwd"]["w0"])
    for step in range(2):
        for r in range(RANKS):
            ref.put_master(r, ranks[r]["weight/qwd"]["masters"][step])
        ref.gather_weights(step)
        want = [W.weights(ref, q) for q in range(RANKS)]
        for r, d in enumerate(ranks):
            for q in range(RANKS):
                assert same_bytes(d["weight/qwd"]["what"][step][q], want[q]), \
                    "step %d, rank %d's copy of worker %d's w-hat" % (step, r, q)
    digests = [ref.wire_digest(q) for q in range(RANKS)]
    assert all(digests)
    for d in ranks:
        assert d["weight/qwd"]["digests"] == digests


# -- the DDP hook ------------------------------------------------------------

@pytest.mark.parametrize("scheme", W.SCHEMES)
def test_ddp_hook_equals_in_process_world(ranks, scheme):
    runs = [d["ddp"][scheme] for d in ranks]
    assert runs[0]["params"] == 212
    buckets = [run["buckets"] for run in runs]
    assert buckets[0], "no bucket recorded"
    for b in range(len(buckets[0])):
        index, step = buckets[0][b]["index"], buckets[0][b]["step"]
        assert step == W.DDP_RECORD_STEP
        inputs = [buckets[r][b]["input"] for r in range(RANKS)]
        n = inputs[0].numel()
        ref = World(W.TOPO, scheme, n, seed=W.DDP_SEED + index)
        for r in range(RANKS):
            assert buckets[r][b]["index"] == index
            ref.put_grad(r, inputs[r])
        ref.reduce_grads(step)
        full = torch.cat([W.grad_shard(ref, q) for q in range(RANKS)])[:n]
        for r in range(RANKS):
            assert same_bytes(buckets[r][b]["output"], full), "rank %d, bucket %d" % (r, index)
        # and it is the mean of the ranks' gradients, up to the scheme's error
        mean = torch.stack(inputs).mean(0)
        tol = 1e-6 if scheme == "baseline" else 0.2
        assert float((full - mean).norm() / mean.norm()) < tol


def final_loss(ranks, run):
    return sum(d["ddp"][run]["losses"][-1] for d in ranks) / RANKS


def test_ddp_training_under_tlqhs_follows_baseline(ranks):
    base, native = final_loss(ranks, "baseline"), final_loss(ranks, "native")
    first = sum(d["ddp"]["baseline"]["losses"][0] for d in ranks) / RANKS
    assert base < 0.7 * first, "the model did not train: %g -> %g" % (first, base)
    assert abs(base - native) <= NATIVE_RTOL * native, (base, native)
    for scheme in ("tlqhs", "sdp4bit"):
        got = final_loss(ranks, scheme)
        assert abs(got - base) <= LOSS_RTOL * base, (scheme, got, base)
    # every rank saw the same model: its losses differ only by its data
    for d in ranks:
        assert len(d["ddp"]["tlqhs"]["losses"]) == W.DDP_STEPS


# -- the FSDP gradient hook, called as FSDP 1.13 calls it -------------------

def test_fsdp_hook_chunks_equal_in_process_world(ranks):
    n = ranks[0]["fsdp"]["sharded"][0]["grad"].numel()
    c = n // RANKS
    S = World(W.TOPO, "tlqhs", n, dry=True).shard
    for k in range(2):
        ref = World(W.TOPO, "tlqhs", RANKS * S, seed=W.FSDP_SEED)
        for r in range(RANKS):
            x = torch.zeros(RANKS, S)
            x[:, :c] = ranks[r]["fsdp"]["sharded"][k]["grad"].view(RANKS, c)
            ref.put_grad(r, x.view(-1))
        ref.reduce_grads(k)
        for r in range(RANKS):
            got = ranks[r]["fsdp"]["sharded"][k]["output"]
            assert same_bytes(got, W.grad_shard(ref, r)[:c]), "call %d, rank %d" % (k, r)
    # NO_SHARD: the whole mean in place, the hook's third call (step 2)
    g = [d["fsdp"]["noshard"]["grad"] for d in ranks]
    ref = World(W.TOPO, "tlqhs", g[0].numel(), seed=W.FSDP_SEED)
    for r in range(RANKS):
        ref.put_grad(r, g[r])
    ref.reduce_grads(2)
    full = torch.cat([W.grad_shard(ref, q) for q in range(RANKS)])[:g[0].numel()]
    for d in ranks:
        assert same_bytes(d["fsdp"]["noshard"]["output"], full)
        assert d["fsdp"]["steps"] == 3


# -- errors ------------------------------------------------------------------

def test_nonfinite_gradient_raises_on_every_rank(ranks):
    for d in ranks:
        assert d["nonfinite"]["raised"] == "NonFiniteError"
        assert "NaN or Inf in the gradient of rank 2" in d["nonfinite"]["message"]


def test_failing_callback_is_an_exception_with_a_sentence(ranks):
    for r, d in enumerate(ranks):
        f = d["failure"]
        assert f["raised"] == "IOFailure" and f["kind"] == "SQ_ERR_IO", (r, f)
        assert f["message"].startswith("worker %d: " % r), f["message"]
        assert "torch.distributed (gloo)" in f["message"], f["message"]
    assert "injected fault in rank 1's send" in ranks[1]["failure"]["message"]
    assert "RuntimeError" in ranks[1]["failure"]["caught"]


class _FailingDist:
    """torch.distributed as a TorchTransport sees it, rank 0 of 2, whose
    point-to-point calls and all_gather (the ranks' meeting before a timed
    collective) raise `exc`: the world's error path without a process
    group."""

    def __init__(self, exc):
        self.exc = exc

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def get_world_size(self, group=None):
        return 2

    def get_rank(self, group=None):
        return 0

    def get_backend(self, group=None):
        return "gloo"

    def get_global_rank(self, group, r):
        return r

    def send(self, *args, **kwargs):
        raise self.exc

    recv = all_gather = send


def test_world_raises_the_failed_callbacks_exception_as_cause(monkeypatch):
    import shardq.transport
    monkeypatch.setattr(shardq.transport, "dist", _FailingDist(RuntimeError("link down")))
    tr = TorchTransport()
    with World("1x2", "baseline", 64, transport=tr) as w:
        w.put_grad(0, torch.ones(64))
        with pytest.raises(shardq.IOFailure, match="link down") as e:
            w.reduce_grads(0)
        assert isinstance(e.value.__cause__, RuntimeError)
        assert str(e.value.__cause__) == "link down"
        assert tr.error is None  # taken


def test_world_reraises_an_interrupted_callback(monkeypatch):
    import shardq.transport
    monkeypatch.setattr(shardq.transport, "dist", _FailingDist(KeyboardInterrupt()))
    with World("1x2", "baseline", 64, transport=TorchTransport()) as w:
        w.put_grad(0, torch.ones(64))
        with pytest.raises(KeyboardInterrupt):
            w.reduce_grads(0)


def test_hook_refuses_what_ddp_cannot_use():
    # checked before any rank is contacted (no process group needed)
    with pytest.raises(ValueError, match="per-tensor"):
        ShardqHook("zeropp8", topo="2x2")
    with pytest.raises(ValueError, match="grad.mean=1"):
        ShardqHook("tlqhs", topo="2x2", set=["grad.mean=0"])
    with pytest.raises(shardq.SpecError):
        ShardqHook("no-such-scheme")
    with pytest.raises(shardq.SpecError):
        ShardqHook("tlqhs", set=["grad.pipe=0"])


def test_transport_needs_a_process_group():
    assert not torch.distributed.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        TorchTransport()
