"""The sharded world from Python: the same statistics and bytes as `shardq
replay` on the same trace (read back from its SQLite store), round trips
through the collectives, traffic against the formulas of world.h, the
errors, and zero-copy outputs."""
import json
import math
import os
import sqlite3
import struct

import numpy as np
import pytest
import torch

import shardq
from shardq._lib import InterruptedError_

SEED = 5
STATS = ("rel_l2", "mse", "max_abs", "snr_db", "cosine", "mean_signed", "frac_zeroed",
         "frac_clipped")
BYTES = ("sent_codes", "sent_meta", "recv_codes", "recv_meta", "sent_elems", "messages",
         "sent_params", "bits_per_elem", "bits_per_param")


# -- a trace, and reading it with numpy alone ---------------------------------

def read_safetensors(path):
    """{name: array} of an F32 or F64 safetensors file (docs/traces.md, formats),
    float32 or float64 as stored."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    data = raw[8 + hlen:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": np.float32, "F64": np.float64}[e["dtype"]]
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[b:end], dtype=np.dtype(dt).newbyteorder("<")).astype(dt)
    return out


def load_trace(path):
    """(steps, workers, [(step, weights, [grad of trace worker w])])."""
    with open(os.path.join(path, "manifest.json")) as f:
        m = json.load(f)
    (param,) = m["params"]
    steps = []
    for s in m["steps"]:
        d = os.path.join(path, "step-%06u" % s)
        w = read_safetensors(os.path.join(d, "weights.safetensors"))[param["name"]]
        g = [read_safetensors(os.path.join(d, "grads-w%02d.safetensors" % k))[param["name"]]
             for k in range(m["workers"])]
        steps.append((s, w, g))
    return m["workers"], steps


@pytest.fixture(scope="module")
def trace(tmp_path_factory, shardq_cli):
    """One param of 64 x 64 (one world: replay's unit 0, seed itself), three
    steps, four gradient files, with outliers so that clipping shows."""
    d = tmp_path_factory.mktemp("world") / "trace"
    shardq_cli("trace", "synth", d, "--params", "w:64x64", "--steps", "3", "--workers", "4",
               "--data", "outliers", "--seed", "3")
    return str(d)


def write_safetensors(path, name, x):
    """One F64 tensor, the JSON padded with spaces to a multiple of 8."""
    head = json.dumps({name: {"dtype": "F64", "shape": list(x.shape),
                              "data_offsets": [0, x.nbytes]}}).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + x.astype("<f8").tobytes())


@pytest.fixture(scope="module")
def trace64(tmp_path_factory, trace):
    """The trace's values moved off float32 (x (1 + 2^-40)), as F64: the
    world sees them rounded, the exact reference keeps every bit."""
    d = tmp_path_factory.mktemp("world64") / "trace"
    W, steps = load_trace(trace)
    for step, w, grads in steps:
        sd = d / ("step-%06u" % step)
        os.makedirs(sd)
        off = lambda x: x.astype(np.float64).reshape(64, 64) * (1 + 2.0 ** -40)  # noqa: E731
        write_safetensors(sd / "weights.safetensors", "w", off(w))
        for k, g in enumerate(grads):
            write_safetensors(sd / ("grads-w%02d.safetensors" % k), "w", off(g))
    with open(d / "manifest.json", "w") as f:
        json.dump({"format": "shardq-trace", "version": 1, "workers": W,
                   "steps": [s for s, _, _ in steps],
                   "params": [{"name": "w", "shape": [64, 64]}]}, f)
    return str(d)


def stored(shardq_cli, trace, db, preset, topo, *extra, sets=()):
    """Replays trace with the command into db; its step rows, tensor rows,
    bytes rows and scheme text as the store holds them."""
    shardq_cli("replay", trace, "--scheme", preset, "--workers", topo, "--seed", SEED,
               "--db", db, "-q", *[a for k in sets for a in ("--set", k)], *extra)
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        (run,) = con.execute("SELECT id, scheme FROM runs").fetchall()
        cols = "step, path, elements, " + ", ".join(STATS) + ", ef_residual"
        steps = [dict(r) for r in con.execute(
            "SELECT %s FROM step_metrics ORDER BY step, path" % cols)]
        tensors = [dict(r) for r in con.execute(
            "SELECT tensor, %s FROM tensor_stats ORDER BY step, path" % cols)]
        nbytes = [dict(r) for r in con.execute(
            "SELECT collective, link, %s FROM bytes ORDER BY collective, link" % ", ".join(BYTES))]
        return steps, tensors, nbytes, run["scheme"]
    finally:
        con.close()


def python_rows(trace, scheme, topo, as_f32=False):
    """The same replay through shardq.World: grad path then weight path of
    each step in one world, as replay drives its unit. Worker r takes trace
    worker r mod W's gradient (the same array: counted as copies)."""
    W, steps = load_trace(trace)
    if as_f32:
        steps = [(s, w.astype(np.float32), [g.astype(np.float32) for g in gs])
                 for s, w, gs in steps]
    n = steps[0][1].size
    rows = []
    with shardq.World(topo, scheme, shape=(64, 64), seed=SEED ^ (0 << 40)) as w:
        assert w.elements == n
        for i, (step, weights, grads) in enumerate(steps):
            parts, g = w.reduce_scatter([grads[r % W] for r in range(w.workers)], step,
                                        stats=True)
            rows.append(dict(step=step, path="grad", elements=g.n, **_stats(g),
                             ef_residual=_null(w.ef_residual)))
            if i == 0:
                w.init_weights(weights)
                assert w.replicas_differ() == 0
            else:
                _, ws = w.all_gather(w.shards(weights), step, stats=True)
                rows.append(dict(step=step, path="weight", elements=ws.n, **_stats(ws),
                                 ef_residual=None))
        return sorted(rows, key=lambda r: (r["step"], r["path"])), w.bytes_rows(), w.scheme.text


def _null(x):
    return None if isinstance(x, float) and math.isnan(x) else x


def _stats(s):
    # the store keeps NaN as NULL
    return {k: (None if isinstance(getattr(s, k), float) and math.isnan(getattr(s, k))
                else getattr(s, k)) for k in STATS}


def _bytes_key(rows):
    return sorted(rows, key=lambda r: (r["collective"], r["link"]))


# DeepSpeed's levels (2^(b-1) / absmax) clip the largest element of a group
DS_LEVELS = ("grad.levels=deepspeed", "weight.levels=deepspeed")


@pytest.mark.parametrize("preset,sets", [("baseline", ()), ("tlqhs", ()), ("qwd", ()),
                                         ("sdp4bit", ()), ("sdp4bit", DS_LEVELS),
                                         ("zeropp8", ()), ("tlqhs", ("grad.ef=1",)),
                                         ("qsdp", ("grad.inter.ef=1",))])
def test_world_equals_replay_store(tmp_path, shardq_cli, trace, preset, sets):
    steps, tensors, nbytes, scheme_text = stored(shardq_cli, trace, str(tmp_path / "r.db"),
                                                 preset, "2x2", sets=sets)
    scheme = shardq.Scheme(preset, set=list(sets))
    mine, mybytes, mytext = python_rows(trace, scheme, "2x2")
    if not scheme.per_tensor:  # else the world's is the resolved one
        assert mytext == scheme_text == scheme.text
    # every statistic, as the double SQLite stores (exact equality)
    assert mine == steps
    assert [dict(r, tensor="w") for r in mine] == [dict(r) for r in tensors]
    assert len(mine) == 5  # grad at 3 steps, weight at the last 2
    assert _bytes_key(mybytes) == [dict(r) for r in nbytes]
    clipped = [r["frac_clipped"] for r in mine]
    # error feedback's state after each step, on the gradient rows alone
    ef = [r["ef_residual"] for r in mine]
    if any("ef=1" in k for k in sets):
        assert all((e is not None and 0 < e < 2) == (r["path"] == "grad") for e, r in zip(ef, mine))
    else:
        assert ef == [None] * 5
    if sets == DS_LEVELS:
        assert all(c > 0 for c in clipped)
    elif preset == "baseline":
        assert clipped == [0.0] * 5  # no quantizer: nothing clipped (0 of n, not NULL)


def test_float64_inputs_are_the_exact_reference(tmp_path, shardq_cli, trace64):
    # an F64 trace: the world gets the values rounded to float32, the exact
    # sums take them as they are -- from float64 arrays, as replay does
    steps, _, nbytes, _ = stored(shardq_cli, trace64, str(tmp_path / "r.db"), "sdp4bit", "2x2")
    mine, mybytes, _ = python_rows(trace64, shardq.Scheme("sdp4bit"), "2x2")
    assert mine == steps
    assert _bytes_key(mybytes) == [dict(r) for r in nbytes]
    # and they differ from what float32 inputs give
    f32, _, _ = python_rows(trace64, shardq.Scheme("sdp4bit"), "2x2", as_f32=True)
    assert f32 != mine


def test_world_reusing_trace_files_equals_replay(tmp_path, shardq_cli, trace):
    # 8 workers on 4 files: workers r and r + 4 read the same file, which
    # the exact sums count as two copies of it
    steps, _, nbytes, _ = stored(shardq_cli, trace, str(tmp_path / "r.db"), "sdp4bit", "2x4",
                                 "--reuse-workers", "--paths", "grad")
    W, tr = load_trace(trace)
    with shardq.World("2x4", "sdp4bit", elements=4096, seed=SEED) as w:
        mine = []
        for step, _, grads in tr:
            _, g = w.reduce_scatter([grads[r % W] for r in range(8)], step, stats=True)
            mine.append(dict(step=step, path="grad", elements=g.n, **_stats(g),
                             ef_residual=None))
        assert mine == steps
        assert _bytes_key(w.bytes_rows()) == [dict(r) for r in nbytes]


def test_replay_wrapper_equals_command(tmp_path, shardq_cli, trace):
    steps, tensors, nbytes, _ = stored(shardq_cli, trace, str(tmp_path / "r.db"), "sdp4bit",
                                       "2x2")
    seen = []
    r = shardq.replay(trace, topo="2x2", scheme="sdp4bit", seed=SEED,
                      on_tensor=lambda step, p, path, x: seen.append((step, path, x.size)))
    strip = [{k: (None if isinstance(v, float) and math.isnan(v) else v)
              for k, v in dict(row, elements=row["n"]).items()
              if k not in ("n", "seconds", "tensor")} for row in r.steps_rows]
    assert sorted(strip, key=lambda x: (x["step"], x["path"])) == steps
    assert len(r.tensor_rows) == len(tensors)
    assert _bytes_key(r.bytes) == [dict(b) for b in nbytes]
    assert (r.steps, r.params, r.elements, r.units, r.layout) == (3, 1, 4096, 1, "bucket")
    assert str(r.topo) == "2x2"
    assert seen[:2] == [(1, "grad", 4096), (1, "weight", 4096)]
    with pytest.raises(InterruptedError_, match="stopped by the caller"):
        shardq.replay(trace, topo="2x2", scheme="sdp4bit", on_tensor=lambda *a: False)
    with pytest.raises(ZeroDivisionError):
        shardq.replay(trace, topo="2x2", on_tensor=lambda *a: 1 / 0)
    with pytest.raises(shardq.NotFoundError, match="nope"):
        shardq.replay(str(tmp_path / "nope"))


# -- round trips, traffic, errors ----------------------------------------------

def test_put_get_round_trips():
    rng = np.random.default_rng(1)
    n = 1000
    with shardq.World("2x2", shardq.Scheme("baseline", weight_bits=32, grad_mean=0),
                      elements=n) as w:
        assert (w.workers, w.elements, w.shard * w.workers) == (4, n, w.padded)
        assert sum(w.shard_len(r) for r in range(4)) == n
        w0 = rng.standard_normal(n).astype(np.float32)
        w.init_weights(w0)
        for r in range(4):
            np.testing.assert_array_equal(w.get_weights(r), w0)
            m = w.get_master(r)
            k = w.shard_len(r)
            np.testing.assert_array_equal(m[:k], w0[r * w.shard:r * w.shard + k])
            assert not m[k:].any()
        # fp32 wires, a sum, one worker's gradient: the shards are its slices
        g = rng.standard_normal(n).astype(np.float32)
        zero = np.zeros(n, np.float32)
        parts = w.reduce_scatter([g, zero, zero, zero], step=0)
        np.testing.assert_array_equal(np.concatenate(parts)[:n], g)
        # masters travel in fp32: every replica gets them back exactly
        w1 = rng.standard_normal(n).astype(np.float32)
        whats = w.all_gather(w.shards(w1), step=1)
        for x in whats:
            np.testing.assert_array_equal(x, w1)
        # a master given as its shard_len values is padded here
        w.put_master(0, w1[:w.shard_len(0)])
        np.testing.assert_array_equal(w.get_master(0)[:w.shard_len(0)], w1[:w.shard_len(0)])


def test_torch_in_torch_out_and_zero_copy():
    n = 512
    with shardq.World("1x2", "tlqhs", elements=n, seed=3) as w:
        g = [torch.randn(n), torch.randn(n)]
        parts = w.reduce_scatter(g, 7)
        assert all(isinstance(p, torch.Tensor) for p in parts)
        out = torch.empty(w.shard)
        got = w.get_grad_shard(1, out=out)
        assert got is out
        torch.testing.assert_close(out, parts[1], rtol=0, atol=0)
        a = np.empty(w.shard, np.float32)
        assert w.get_grad_shard(0, out=a) is a
        np.testing.assert_array_equal(a, parts[0].numpy())
        # numpy in, numpy out
        assert isinstance(w.reduce_scatter([x.numpy() for x in g], 8)[0], np.ndarray)
        with pytest.raises(TypeError, match="contiguous"):
            w.get_grad_shard(0, out=np.empty(2 * w.shard, np.float32)[::2])
        with pytest.raises(TypeError, match="float32"):
            w.get_grad_shard(0, out=np.empty(w.shard, np.float64))
        with pytest.raises(ValueError, match="elements, expected"):
            w.get_grad_shard(0, out=np.empty(w.shard + 1, np.float32))


def test_same_seed_same_wire_bytes():
    x = [np.random.default_rng(r).standard_normal(3000).astype(np.float32) for r in range(4)]
    digests = []
    for seed in (1, 1, 2):
        with shardq.World("2x2", "sdp4bit", elements=3000, seed=seed, digest=True) as w:
            w.reduce_scatter(x, 0)
            digests.append([w.wire_digest(r) for r in range(4)])
    assert digests[0] == digests[1] != digests[2]
    assert all(digests[0])


@pytest.mark.parametrize("preset,topo", [("sdp4bit", "2x4"), ("baseline", "2x2"),
                                         ("qsdp", "4x1")])
def test_traffic_follows_the_formulas(preset, topo):
    n = 50000
    x = np.ones(n, np.float32)
    with shardq.World(topo, preset, elements=n, seed=1) as real, \
            shardq.World(topo, preset, elements=n, seed=1, dry=True) as dry:
        K, G = real.topo
        N, S = K * G, real.shard
        for w in (real, dry):
            if w is real:
                w.init_weights(x)
                w.reduce_scatter([x] * N, 0)
                w.all_gather(w.shards(x), 1)
            else:
                w.reduce_grads(0)
                w.gather_weights(1)
        assert real.traffic() == dry.traffic()
        t = real.traffic()
        g, wt = t["grad_reducescatter"], t["weight_allgather"]
        sc = real.scheme
        # every real element once per hop it makes (world.h)
        if real.grad_path == "twolevel":
            assert (g["intra"]["sent_params"], g["inter"]["sent_params"]) == \
                (K * (G - 1) * n, (K - 1) * n)
            assert g["intra"]["sent_elems"] == K * (G - 1) * real.padded
        else:
            assert g["intra"]["sent_params"] + g["inter"]["sent_params"] == (N - 1) * n
        assert wt["intra"]["sent_params"] + wt["inter"]["sent_params"] == (N - 1) * n
        assert wt["intra"]["sent_elems"] + wt["inter"]["sent_elems"] == (N - 1) * N * S
        wb = int(sc.get("weight.bits"))
        codes = wt["intra"]["sent_codes"] + wt["inter"]["sent_codes"]
        meta = wt["intra"]["sent_meta"] + wt["inter"]["sent_meta"]
        if wb > 8:
            assert (codes, meta) == ((N - 1) * N * S * wb // 8, 0)
        else:
            group = int(sc.get("weight.group"))
            per_group = 4 if sc.get("weight.kind") == "sym" else 8
            assert codes == (N - 1) * N * S * wb // 8
            assert meta == (N - 1) * N * (S // group) * per_group
        # sent equals received, and a worker's share sums to the total
        for c in t.values():
            for link in c.values():
                assert (link["sent_codes"], link["sent_meta"]) == \
                    (link["recv_codes"], link["recv_meta"])
        per = [real.traffic(r) for r in range(N)]
        assert sum(p["grad_reducescatter"]["inter"]["sent_codes"] for p in per) == \
            g["inter"]["sent_codes"]
        for row in real.bytes_rows():
            if row["sent_params"]:
                assert row["bits_per_param"] == \
                    8.0 * (row["sent_codes"] + row["sent_meta"]) / row["sent_params"]
        assert shardq.bytes_rows([real, real])[0]["sent_codes"] == \
            2 * real.bytes_rows()[0]["sent_codes"]
        real.reset_traffic()
        assert all(v == 0 for c in real.traffic().values() for l in c.values()
                   for v in l.values())
        assert real.times()["grad_reducescatter"]["calls"] == 1


def test_powersgd_world():
    # a tensor's shape is PowerSGD's matrix: two ring all-reduces of (rows +
    # cols) fp32 values; a rank-1 sum of gradients comes back to fp32 accuracy
    rows, cols, N = 48, 32, 4
    u = np.linspace(-1, 1, rows, dtype=np.float32)
    grads = [np.outer(u, np.full(cols, k + 1, np.float32)).reshape(-1) for k in range(N)]
    with shardq.World("2x2", "powersgd", shape=(rows, cols), seed=3) as w:
        assert w.grad_path == "powersgd" and w.scheme.get("grad.powersgd.rank") == "1"
        parts = w.reduce_scatter(grads, 0)
        got = np.concatenate(parts)[:rows * cols]
        want = np.mean(np.stack(grads).astype(np.float64), axis=0)
        assert np.max(np.abs(got - want)) < 1e-5 * np.max(np.abs(want))
        g = w.traffic()["grad_reducescatter"]
        sent = g["intra"]["sent_codes"] + g["inter"]["sent_codes"]
        assert sent == 2 * (N - 1) * (rows + cols) * 4
        assert g["intra"]["sent_params"] + g["inter"]["sent_params"] == (N - 1) * rows * cols
    with shardq.World("2x2", "powersgd", shape=(rows * cols,)) as w:
        assert w.grad_path == "ring"  # a 1-D tensor: n x 1, not worth compressing


def test_errors_carry_the_sentence():
    n = 100
    with shardq.World("2x2", "sdp4bit", elements=n) as w:
        bad = np.zeros(n, np.float32)
        bad[17] = np.nan
        with pytest.raises(shardq.NonFiniteError, match="worker 2") as e:
            w.put_grad(2, bad)
        assert "17" in str(e.value)
        with pytest.raises(shardq.NonFiniteError, match="worker 1"):
            w.reduce_scatter([np.zeros(n, np.float32), bad, bad, bad], 0)
        with pytest.raises(shardq.ArgumentError, match="99 elements, expected 100"):
            w.put_grad(0, np.zeros(n - 1, np.float32))
        with pytest.raises(ValueError, match="3 gradients for 4 workers"):
            w.reduce_scatter([bad] * 3, 0)
        with pytest.raises(IndexError, match="worker 4"):
            w.get_weights(4)
        with pytest.raises(shardq.ArgumentError, match="step"):
            w.reduce_grads(-1)
    with pytest.raises(ValueError, match="closed"):
        w.reduce_grads(0)
    with pytest.raises(shardq.SpecError, match="nosuch"):
        shardq.Scheme("nosuch")
    with pytest.raises(shardq.SpecError, match="grad.inter.bits"):
        shardq.Scheme("sdp4bit", set=["grad.inter.bits=99"])
    with pytest.raises(shardq.ArgumentError):
        shardq.World("2y2", "sdp4bit", elements=n)
    with pytest.raises(TypeError, match="c_transport"):
        shardq.World("2x2", "sdp4bit", elements=n, transport=object())


def test_scheme_knobs_and_presets(shardq_cli):
    names = shardq.Scheme.presets()
    assert names[0] == "baseline" and "sdp4bit" in names
    keys = [k for k, _, _ in shardq.Scheme.knobs()]
    assert "grad.inter.bits" in keys and "layout" in keys
    a = shardq.Scheme("sdp4bit", grad_inter_bits=2)
    b = shardq.Scheme("sdp4bit", set={"grad.inter.bits": 2})
    c = shardq.Scheme("sdp4bit", set="grad.inter.bits=2")
    assert a == b == c != shardq.Scheme("sdp4bit")
    assert a.get("grad.inter.bits") == "2" and a.preset == "sdp4bit"
    assert a.as_dict()["grad.mode"] == "twolevel"
    with pytest.raises(KeyError):
        a.get("grad.bogus")
    # the text the command prints for the same knobs
    out = shardq_cli("schemes").stdout
    assert "sdp4bit" in out
    # a per-tensor scheme is resolved for the world's shape
    z = shardq.Scheme("zeropp8")
    assert z.per_tensor
    with shardq.World("2x2", z, shape=(64, 64)) as w:
        assert not w.scheme.per_tensor and w.elements == 4096
    assert shardq.Topo("2x4") == shardq.Topo(2, 4) == (2, 4)
    assert shardq.Topo((2, 4)).workers == 8


def test_error_feedback_state():
    # the residual of each worker persists between reduces: zeros in after a
    # step still send it; the identity sum of results + residuals = sum of
    # inputs holds exactly on the dyadic grid with 2-bit symmetric levels
    scheme = shardq.Scheme("qsdp", set=["grad.kind=sym", "grad.bits=2", "grad.group=64",
                                        "grad.ef=1", "grad.mean=0"])
    assert scheme.get("grad.intra.ef") == scheme.get("grad.inter.ef") == "1"
    assert "grad.intra.ef=1" in scheme.text
    assert "ef=" not in shardq.Scheme("qsdp").text
    rng = np.random.default_rng(3)
    with shardq.World("1x4", scheme, elements=1024, seed=1) as w:
        assert w.residual_len(0) == w.padded and w.residual_len(1) == 0
        assert w.residual_bytes == 4 * w.padded
        assert w.ef_residual == 0.0  # the residuals start at zero
        total_in = np.zeros(w.padded)
        total_out = np.zeros(w.padded)
        for step in range(6):
            grads = [(rng.integers(-4095, 4096, 1024) / 4096.0).astype(np.float32)
                     for _ in range(4)]
            for g in grads:
                total_in[:1024] += g
            total_out += np.concatenate(w.reduce_scatter(grads, step))
        res = [w.get_residual(r) for r in range(4)]
        assert all(np.any(e != 0) for e in res)
        assert np.array_equal(total_out + sum(e.astype(np.float64) for e in res), total_in)
        assert 0.5 < w.ef_residual < 4  # 2 bits, stochastic: a residual near the gradient's size
        zeros = [np.zeros(1024, dtype=np.float32)] * 4
        assert np.any(np.concatenate(w.reduce_scatter(zeros, 6)) != 0)
        w.reset_residuals()
        assert not np.any(w.get_residual(0))
        assert not np.any(np.concatenate(w.reduce_scatter(zeros, 7)))
        with pytest.raises(shardq.ArgumentError, match="residual"):
            w.get_residual(0, hop=1)
    with pytest.raises(shardq.SpecError, match="grad.mode=ring"):
        shardq.World("2x2", shardq.Scheme("baseline", set="grad.ef=1"), elements=100)


class InProcessTransport:
    """A transport of Python callbacks that keeps every worker in this
    process (share and gather_all NULL): send copies a message's bytes,
    recv names where they go, and phase_end delivers them in order -- the
    in-process world runs a phase rank after rank, so a recv may come
    before its send."""

    def __init__(self, nranks):
        from shardq._lib import ffi
        self.ffi = ffi
        self.sent, self.wanted, self.calls = {}, {}, 0
        self._cbs = [
            ffi.callback("int(void *, const sq_plan_msg *, const sq_qbuf *, sq_error *)",
                         self._send),
            ffi.callback("int(void *, const sq_plan_msg *, sq_qbuf *, sq_error *)", self._recv),
            ffi.callback("int(void *, int, int, sq_error *)", self._phase_end)]
        self.c_transport = ffi.new("sq_transport *")
        self.c_transport.send, self.c_transport.recv, self.c_transport.phase_end = self._cbs
        self.c_transport.nranks, self.c_transport.rank = nranks, 0

    def _parts(self, m, q):
        return [(p, size) for p, size in ((q.codes, m.code_bytes), (q.scales, m.scale_bytes),
                                           (q.offsets, m.offset_bytes)) if size]

    def _send(self, ctx, m, q, err):
        self.calls += 1
        data = [bytes(self.ffi.buffer(p, size)) for p, size in self._parts(m, q[0])]
        self.sent.setdefault((m.src, m.dst), []).append(data)
        return 0

    def _recv(self, ctx, m, q, err):
        self.wanted.setdefault((m.src, m.dst), []).append(self._parts(m, q[0]))
        return 0

    def _phase_end(self, ctx, coll, phase, err):
        for key, dests in self.wanted.items():
            for dest, data in zip(dests, self.sent.pop(key)):
                for (p, size), b in zip(dest, data):
                    self.ffi.memmove(p, b, size)
        self.wanted = {}
        return 0


def test_a_transport_carries_the_same_bytes():
    n = 3000
    rng = np.random.default_rng(4)
    g = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    w1 = rng.standard_normal(n).astype(np.float32)
    results = []
    for tr in (None, InProcessTransport(4)):
        with shardq.World("2x2", "sdp4bit", elements=n, seed=9, digest=True, transport=tr) as w:
            assert w.local_rank is None and all(w.holds(r) for r in range(4))
            parts, st = w.reduce_scatter(g, 1, stats=True)
            w.init_weights(np.zeros(n, np.float32))
            whats = w.all_gather(w.shards(w1), 2)
            results.append((np.concatenate(parts), st, whats[3], w.traffic(),
                            [w.wire_digest(r) for r in range(4)]))
        if tr is not None:
            assert tr.calls > 0 and not tr.sent
    (a, sa, wa, ta, da), (b, sb, wb, tb, db) = results
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(wa, wb)
    assert sa == sb and ta == tb and da == db


def test_cuda_world_equals_cpu_world():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    n = 5000
    g = [torch.randn(n, generator=torch.Generator().manual_seed(r)) for r in range(4)]
    out = []
    for device in ("cpu", "cuda"):
        try:
            w = shardq.World("2x2", "sdp4bit", elements=n, seed=2, device=device, digest=True)
        except shardq.UnsupportedError as e:
            pytest.skip("libshardq without CUDA: %s" % e)
        with w:
            # CUDA tensors in, CUDA tensors out (through host memory)
            xs = g if device == "cpu" else [x.cuda() for x in g]
            parts, st = w.reduce_scatter(xs, 3, stats=True)
            assert parts[0].device.type == device
            out.append((torch.cat([p.cpu() for p in parts]), st,
                        [w.wire_digest(r) for r in range(4)]))
    (a, sa, da), (b, sb, db) = out
    assert torch.equal(a, b) and sa == sb and da == db
