"""Trace capture from PyTorch (shardq.trace, shardq.capture): a small MLP
captured as micro-batches in one process and as a 2-rank gloo DDP job;
`shardq trace info` and `shardq replay` take the results, the files hold
bit for bit what each worker computed (read back with a parser of the
safetensors format written here, not the library's), capturing leaves the
training's arithmetic alone, and bad input is refused by name."""
import json
import os
import socket
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import shardq

HERE = os.path.dirname(os.path.abspath(__file__))


# -- a model, its data, and an independent reader of the files -----------

def mlp(seed=1):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def data(seed, *lead):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*lead, 5, 6, generator=g), torch.randn(*lead, 5, 3, generator=g)


def loss(model, x, y):
    return ((model(x) - y) ** 2).mean()


def read_st(path):
    """{name: float32 array} and the metadata of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = blob[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        raw = body[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(raw, "<f4")
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] == "F64":
            a = np.frombuffer(raw, "<f8")
        else:
            raise AssertionError("%s: unexpected dtype %s" % (name, e["dtype"]))
        out[name] = a.reshape(e["shape"])
    return out, meta


def st_file(d, step, worker):
    name = "weights" if worker < 0 else "grads-w%02d" % worker
    return os.path.join(str(d), "step-%06d" % step, name + ".safetensors")


def same(a, b):
    """Bit for bit (as float32)."""
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else a
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else b
    return a.shape == b.shape and np.array_equal(np.asarray(a, np.float32).view(np.uint32),
                                                 np.asarray(b, np.float32).view(np.uint32))


def info(cli, d):
    return json.loads(cli("trace", "info", "--json", d).stdout)


def replay(cli, d, scheme):
    return json.loads(cli("replay", d, "--scheme", scheme, "--no-db", "--json").stdout)


def check_info(doc, model, steps, workers):
    assert doc["kind"] == "directory"
    assert doc["steps"] == steps
    assert doc["workers"] == workers
    assert doc["weights"] is True
    assert doc["dtypes"] == "F32"
    names = [(n, list(p.shape)) for n, p in model.named_parameters()]
    assert [(t["name"], t["shape"]) for t in doc["tensors"]] == names


# -- micro-batches in one process ------------------------------------------

def test_microbatch_capture_round_trip(tmp_path, shardq_cli):
    W, steps, every = 4, 6, 2
    d = str(tmp_path / "run")
    model, twin = mlp(), mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    topt = torch.optim.SGD(twin.parameters(), lr=0.1)
    want_g, want_w = {}, {}
    with shardq.MicroBatchCapture(model, d, workers=W, every=every, owner="test") as cap:
        for t in range(steps):
            x, y = data(100 + t, W)
            if cap.captures(t):
                want_w[t] = [p.detach().clone() for p in model.parameters()]
            with cap.step(t):
                for w in range(W):
                    with cap.worker(w):
                        loss(model, x[w], y[w]).backward()
            # the twin: each micro-batch's gradient alone, summed as
            # plain accumulation sums it
            acc = None
            for w in range(W):
                g = torch.autograd.grad(loss(twin, x[w], y[w]), list(twin.parameters()))
                if cap.captures(t):
                    want_g[t, w] = g
                acc = [gi.clone() for gi in g] if acc is None else [a.add_(gi) for a, gi in
                                                                    zip(acc, g)]
            for p, a in zip(model.parameters(), acc):
                assert same(p.grad, a)  # capturing left the sum as it was
            for p, a in zip(twin.parameters(), acc):
                p.grad = a
            opt.step(), topt.step()
            opt.zero_grad(), topt.zero_grad()
    for p, q in zip(model.parameters(), twin.parameters()):
        assert same(p, q)
    assert not os.path.exists(os.path.join(d, "step-000001"))  # not a captured step

    doc = info(shardq_cli, d)
    check_info(doc, model, [0, 2, 4], W)
    assert doc["id"] == cap.id and doc["model"] == {"class": "Sequential"}
    names = [n for n, _ in model.named_parameters()]
    for t in (0, 2, 4):
        for w in range(-1, W):
            got, meta = read_st(st_file(d, t, w))
            assert meta == {"format": "shardq-trace", "step": str(t), "trace_id": cap.id}
            assert list(got) == names  # in param order
            want = want_w[t] if w < 0 else want_g[t, w]
            for n, a in zip(names, want):
                assert same(got[n], a), (t, w, n)

    # baseline: fp32 sums against the exact mean, nothing else
    base = replay(shardq_cli, d, "baseline")
    elements = sum(p.numel() for p in model.parameters())
    assert base["steps"] == 3 and base["workers"] == "1x4"
    assert base["grad"]["n"] == 3 * elements
    assert base["grad"]["rel_l2"] < 1e-6
    assert base["weight"]["n"] == 2 * elements
    # a quantized scheme over the same trace: runs clean, and loses more
    q = replay(shardq_cli, d, "sdp4bit")
    assert base["grad"]["rel_l2"] < q["grad"]["rel_l2"] < 1


def test_microbatch_weights_every(tmp_path, shardq_cli):
    """Weights at a cadence of their own: every 4th step of a capture of
    every 2nd; the gradients at every captured step, the weight path of the
    replay from one weight step to the next."""
    W = 2
    d = str(tmp_path / "cad")
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    want_w = {}
    with shardq.MicroBatchCapture(model, d, workers=W, every=2, weights_every=4) as cap:
        for t in range(10):
            x, y = data(200 + t, W)
            if cap.captures_weights(t):
                want_w[t] = [p.detach().clone() for p in model.parameters()]
            with cap.step(t):
                for w in range(W):
                    with cap.worker(w):
                        loss(model, x[w], y[w]).backward()
            opt.step(), opt.zero_grad()
    assert sorted(want_w) == [0, 4, 8]
    doc = info(shardq_cli, d)
    check_info(doc, model, [0, 2, 4, 6, 8], W)
    assert doc["weight_steps"] == [0, 4, 8]
    with open(os.path.join(d, "manifest.json")) as f:
        assert json.load(f)["weights"] == [0, 4, 8]
    names = [n for n, _ in model.named_parameters()]
    for t in (0, 2, 4, 6, 8):
        assert os.path.exists(st_file(d, t, -1)) == (t % 4 == 0)
        for w in range(W):
            assert os.path.exists(st_file(d, t, w))
    for t in (0, 4, 8):
        got, _ = read_st(st_file(d, t, -1))
        for n, a in zip(names, want_w[t]):
            assert same(got[n], a), (t, n)
    base = replay(shardq_cli, d, "baseline")
    elements = sum(p.numel() for p in model.parameters())
    assert base["steps"] == 5 and base["weight_steps"] == 3
    assert base["grad"]["n"] == 5 * elements
    assert base["weight"]["n"] == 2 * elements  # steps 4 and 8; step 0 initialises

    # the cadence is one of the captured steps', or nothing
    with pytest.raises(shardq.ArgumentError, match="weights_every: 3 is not a positive "
                                                   "multiple of every"):
        shardq.MicroBatchCapture(model, str(tmp_path / "x"), workers=1, every=2, weights_every=3)
    with pytest.raises(shardq.ArgumentError, match="weights=False writes none"):
        shardq.MicroBatchCapture(model, str(tmp_path / "x"), workers=1, weights=False,
                                 weights_every=2)
    assert not os.path.exists(str(tmp_path / "x"))


def test_writer_dtypes_and_inputs(tmp_path, shardq_cli):
    """Mappings, sequences and modules; numpy and torch; bf16 and f64
    files; topology and model in the manifest."""
    params = [("a", (2, 3)), ("s", ())]
    rng = np.random.default_rng(5)
    d = str(tmp_path / "bf16")
    with shardq.TraceWriter(d, params, workers=2, dtype="bf16", topo="1x2",
                            model={"layers": 1}) as tw:
        vals = {}
        for t in (3, 7):
            for w in (-1, 0, 1):
                a = rng.standard_normal((2, 3)).astype(np.float32)
                s = np.float32(rng.standard_normal())
                vals[t, w] = (a, s)
                if w < 0:
                    tw.write_weights(t, {"a": torch.from_numpy(a), "s": torch.tensor(s)})
                else:
                    tw.write_grads(t, w, [a, s])
    doc = info(shardq_cli, d)
    assert doc["steps"] == [3, 7] and doc["topology"] == "1x2" and doc["dtypes"] == "BF16"
    assert doc["model"] == {"layers": 1}
    for (t, w), (a, s) in vals.items():
        got, _ = read_st(st_file(d, t, w))
        assert same(got["a"], torch.from_numpy(a).bfloat16().float())
        assert same(got["s"], torch.tensor(s).bfloat16().float().reshape(()))

    # f64 from a float64 array: values pass through fp32 (the writer's input)
    d = str(tmp_path / "f64")
    x = rng.standard_normal((2, 3))
    with shardq.TraceWriter(d, {"a": [2, 3], "s": []}, workers=1, dtype="f64") as tw:
        tw.write_grads(0, 0, {"a": x, "s": 1.5})
    got, _ = read_st(st_file(d, 0, 0))
    assert got["a"].dtype == np.float64
    assert np.array_equal(got["a"], x.astype(np.float32).astype(np.float64))
    assert info(shardq_cli, d)["weights"] is False


# -- a DDP job of two ranks --------------------------------------------------

def _ddp_rank(rank, world, port, d, out):
    """One rank of the DDP test (run in its own process)."""
    import datetime
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            init_method="tcp://127.0.0.1:%d" % port,
                            timeout=datetime.timedelta(seconds=60))
    model, ref = mlp(), mlp()
    ddp = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    cap = shardq.DDPCapture(ddp, d, every=1, weights_every=2, owner="ddp-test")
    saved = {}
    for t in range(3):
        x, y = data(1000 * rank + t, 2)  # this rank's two micro-batches
        saved["w%d" % t] = [p.detach().clone() for p in model.parameters()]
        with cap.step(t):
            with ddp.no_sync():
                loss(ddp, x[0], y[0]).backward()
            loss(ddp, x[1], y[1]).backward()
        # the rank's own gradient, without DDP
        ref.load_state_dict(model.state_dict())
        ref.zero_grad()
        loss(ref, x[0], y[0]).backward()
        loss(ref, x[1], y[1]).backward()
        saved["local%d" % t] = [p.grad.clone() for p in ref.parameters()]
        saved["mean%d" % t] = [p.grad.clone() for p in model.parameters()]
        opt.step()
        opt.zero_grad()
    cap.close()
    assert os.path.exists(os.path.join(d, "manifest.json"))  # on every rank, after close
    # a rank that fails inside a captured step stops the capture everywhere
    ddp2 = DDP(mlp())
    cap = shardq.DDPCapture(ddp2, d + "-failed")
    try:
        with cap.step(0):
            loss(ddp2, x[0], y[0]).backward()
            if rank == 1:
                raise RuntimeError("boom")
    except Exception as e:
        saved["failed"] = (type(e).__name__, str(e))
    # rank 0 cannot open the trace: every rank raises its error
    try:
        shardq.DDPCapture(ddp2, d, owner="another")
    except Exception as e:
        saved["refused"] = (type(e).__name__, str(e))
    torch.save(saved, os.path.join(out, "rank%d.pt" % rank))
    del ddp, ddp2  # before their process group (DDPCapture's docstring: PyTorch 1.13, gloo)
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_capture_round_trip(tmp_path, shardq_cli):
    d, out, world = str(tmp_path / "ddp"), str(tmp_path), 2
    port = _free_port()
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    # a rank that hangs prints where, and stops, before the test gives up
    code = textwrap.dedent("""
        import faulthandler, sys
        faulthandler.dump_traceback_later(60, exit=True)
        sys.path.insert(0, %r)
        import test_capture
        test_capture._ddp_rank(int(sys.argv[1]), %d, %d, %r, %r)
    """) % (HERE, world, port, d, out)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(r)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=90)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                logs.append(p.communicate()[0])
    for r, p in enumerate(procs):
        assert p.returncode == 0, "rank %d: exit %s\n%s" % (r, p.returncode, logs[r])

    model = mlp()
    doc = info(shardq_cli, d)
    check_info(doc, model, [0, 1, 2], world)
    assert doc["weight_steps"] == [0, 2]  # weights_every=2: rank 0 skips step 1's
    with open(os.path.join(d, "manifest.json")) as f:
        assert json.load(f)["owner"] == "ddp-test"
    names = [n for n, _ in model.named_parameters()]
    ranks = [torch.load(os.path.join(out, "rank%d.pt" % r)) for r in range(world)]
    assert not os.path.exists(st_file(d, 1, -1))
    for t in (0, 2):
        got_w, _ = read_st(st_file(d, t, -1))
        for n, a in zip(names, ranks[0]["w%d" % t]):
            assert same(got_w[n], a)
    for t in range(3):
        files = [read_st(st_file(d, t, r)) for r in range(world)]
        for r in range(world):
            got, meta = files[r]
            assert meta["trace_id"] == doc["id"] and meta["step"] == str(t)
            for i, n in enumerate(names):
                # what rank r computed, before DDP averaged it ...
                assert same(got[n], ranks[r]["local%d" % t][i]), (t, r, n)
                # ... and what DDP then applied: the mean
                assert same(ranks[r]["mean%d" % t][i], (files[0][0][n] + files[1][0][n]) / 2)
    base = replay(shardq_cli, d, "baseline")
    assert base["workers"] == "1x2" and base["steps"] == 3
    assert base["grad"]["rel_l2"] < 1e-6

    assert ranks[1]["failed"] == ("RuntimeError", "boom")
    assert ranks[0]["failed"][1] == "rank 1: RuntimeError: boom"
    assert not os.path.exists(os.path.join(d + "-failed", "manifest.json"))
    for r in range(world):
        kind, msg = ranks[r]["refused"]
        assert kind == "ConflictError", msg
        assert msg.startswith(("rank 0: " if r else "") + d + ": "), msg
        assert msg.endswith("it exists and is not empty"), msg


# -- errors ------------------------------------------------------------------

def test_errors(tmp_path, shardq_cli):
    params = [("a", (2, 2)), ("b", (3,))]
    ok = {"a": np.ones((2, 2), np.float32), "b": np.ones(3, np.float32)}

    # a directory that holds something else
    busy = tmp_path / "other"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(shardq.ConflictError, match="not empty"):
        shardq.TraceWriter(str(busy), params, workers=1)

    d = str(tmp_path / "t")
    tw = shardq.TraceWriter(d, params, workers=2, owner="me")
    # a second writer while the first holds the directory
    with pytest.raises(shardq.BusyError, match="pid %d" % os.getpid()):
        shardq.TraceWriter(d, params, workers=2, owner="me")
    # refused values name the file and the tensor, and write nothing
    with pytest.raises(shardq.ArgumentError,
                       match=r"step-000001/grads-w00: tensor 'a': shape \[4\], but the "
                             r"trace's param is \[2, 2\]"):
        tw.write_grads(1, 0, {"a": np.ones(4, np.float32), "b": ok["b"]})
    bad = np.ones(3, np.float32)
    bad[2] = np.nan
    with pytest.raises(shardq.NonFiniteError, match="tensor 'b': element 2 is NaN"):
        tw.write_grads(1, 0, {"a": ok["a"], "b": bad})
    with pytest.raises(shardq.ArgumentError, match="tensor 'b': missing"):
        tw.write_grads(1, 0, {"a": ok["a"]})
    with pytest.raises(shardq.ArgumentError, match="tensor 'c': not a param"):
        tw.write_grads(1, 0, dict(ok, c=ok["b"]))
    assert not os.path.exists(st_file(d, 1, 0))
    # the C writer's order rules, in its words
    with pytest.raises(shardq.ArgumentError, match="files must come as weights, then grads-w00"):
        tw.write_grads(1, 1, ok)
    tw.write_grads(1, 0, ok)
    tw.write_grads(1, 1, ok)
    with pytest.raises(shardq.ArgumentError, match="steps must increase"):
        tw.write_grads(0, 0, ok)
    tw.write_weights(2, ok)  # step 1 had none: weights have a cadence of their own
    tw.write_grads(2, 0, ok)
    tw.write_grads(2, 1, ok)
    tw.close()
    with pytest.raises(shardq.ArgumentError, match="closed"):
        tw.write_grads(3, 0, ok)
    doc = info(shardq_cli, d)
    assert doc["steps"] == [1, 2] and doc["weight_steps"] == [2]
    # the same owner takes its unfinished trace up again; an exception
    # inside the block leaves no manifest
    with pytest.raises(RuntimeError, match="boom"):
        with shardq.TraceWriter(d, params, workers=2, owner="me") as tw:
            tw.write_grads(1, 0, ok)
            raise RuntimeError("boom")
    assert not os.path.exists(os.path.join(d, "manifest.json"))
    with pytest.raises(shardq.ConflictError, match="unfinished trace of another writer"):
        shardq.TraceWriter(d, params, workers=2, owner="you")

    # arguments refused before anything is created
    with pytest.raises(shardq.ArgumentError, match="dtype 'int8'"):
        shardq.TraceWriter(str(tmp_path / "x"), params, workers=1, dtype="int8")
    with pytest.raises(shardq.ArgumentError, match="param 'a' given twice"):
        shardq.TraceWriter(str(tmp_path / "x"), params + [("a", (1,))], workers=1)
    with pytest.raises(shardq.ArgumentError, match="topology"):
        shardq.TraceWriter(str(tmp_path / "x"), params, workers=4, topo="3x1")
    # joining a directory nobody writes
    with pytest.raises(shardq.NotFoundError, match="no such directory"):
        shardq.TraceWriter.join(str(tmp_path / "x"), "0" * 32, 1, params, workers=2)

    # micro-batches: a module without a gradient, a step short of workers
    model = mlp()
    cap = shardq.MicroBatchCapture(model, str(tmp_path / "mb"), workers=2)
    x, y = data(1)
    with pytest.raises(shardq.ArgumentError, match="step 0, worker 0: no gradient"):
        with cap.step(0):
            with cap.worker(0):
                pass
    assert cap.writer.closed  # the capture stopped with the step
    cap = shardq.MicroBatchCapture(model, str(tmp_path / "mb2"), workers=2)
    with pytest.raises(shardq.ArgumentError, match="1 of 2 micro-batch gradients captured"):
        with cap.step(0):
            with cap.worker():
                loss(model, x, y).backward()
    assert cap.writer.closed
    with pytest.raises(shardq.ArgumentError, match="outside capture.step"):
        cap.add_grads(0)
