"""shardq.codec: the same bytes as `shardq codec encode/decode`, the
caller's memory used in place, the library's errors, and the CUDA path's
bytes equal to the CPU's (on a machine with a GPU)."""
import itertools
import json
import pickle

import numpy as np
import pytest
import torch

import shardq
from shardq import Codec, Key, Quantized
from shardq._arrays import as_input

# ---------------------------------------------------------------------------
# The grid of specs: every pair of values of any two keys appears in some
# spec (a greedy pairwise cover of the full product), ~20 specs instead of 336
# ---------------------------------------------------------------------------

AXES = {
    "bits": [2, 3, 4, 8],
    "group": [32, 128],
    "round": ["rtn", "sr"],
    "kind": ["sym", "minmax"],
    "hadamard": [0, 32],
    "scale": ["fp32", "bf16", "fp16"],
    "levels": ["sdp4bit", "deepspeed"],
}


def _pairwise_specs():
    names = list(AXES)
    valid = [dict(zip(names, v)) for v in itertools.product(*AXES.values())]
    valid = [c for c in valid if not (c["kind"] == "minmax" and c["levels"] == "deepspeed")]

    def pairs(c):
        return {((a, c[a]), (b, c[b])) for a, b in itertools.combinations(names, 2)}
    todo = set().union(*(pairs(c) for c in valid))
    chosen = []
    while todo:
        best = max(valid, key=lambda c: len(pairs(c) & todo))
        chosen.append(best)
        todo -= pairs(best)
    return [",".join("%s=%s" % (k, c[k]) for k in names) for c in chosen]


SPECS = _pairwise_specs()
# the compressors (docs/conventions.md): QSGD, scaled sign, FP8
COMPRESSOR_SPECS = ["kind=qsgd,bits=3,group=32", "kind=qsgd,bits=8,round=rtn,hadamard=32",
                    "kind=sign,group=100,scale=bf16", "kind=fp8e4m3,round=rtn,hadamard=32",
                    "kind=fp8e5m2,group=32,scale=fp16"]
SIZES = [1000, 4096]  # 1000: a short last group for both group sizes


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    if n > 10:
        x[7] = 40.0  # an outlier, so the Hadamard transform matters
    return x


def _cli_encode(cli, tmp_path, x, spec, name="x", seed=0, step=0, worker=0, site="weight"):
    src, dst = tmp_path / (name + ".npy"), tmp_path / (name + ".safetensors")
    np.save(src, x)
    cli("codec", "encode", "--codec", spec, "--seed", seed, "--step", step, "--worker", worker,
        "--site", site, src, dst)
    return dst.read_bytes(), dst


def test_the_grid_covers_every_value():
    for key, values in AXES.items():
        for v in values:
            assert any("%s=%s" % (key, v) in s.split(",") for s in SPECS), (key, v)


@pytest.mark.parametrize("spec", SPECS + COMPRESSOR_SPECS)
def test_save_and_dequantize_equal_the_command(shardq_cli, tmp_path, spec):
    for n in SIZES:
        x = _data(n, seed=n)
        key = Key(seed=0x1234ABCD5678, step=3, worker=5, site="grad_inter")
        want, st = _cli_encode(shardq_cli, tmp_path, x, spec, "x%d" % n, seed=0x1234ABCD5678,
                               step=3, worker=5, site="grad-inter")
        q = shardq.quantize(x, Codec(spec), key)
        q.save(tmp_path / "py.safetensors")
        assert (tmp_path / "py.safetensors").read_bytes() == want, (spec, n)
        assert q.tobytes() == Quantized.load(st).tobytes()

        decoded = tmp_path / ("y%d.npy" % n)
        shardq_cli("codec", "decode", st, decoded)
        y = shardq.dequantize(q)
        assert y.dtype == np.float32 and y.shape == (n,)
        assert y.tobytes() == np.load(decoded).tobytes(), (spec, n)


def test_shapes_keys_and_empty_input_equal_the_command(shardq_cli, tmp_path):
    spec = "bits=4,group=128,round=sr"
    x = _data(1000).reshape(8, 125)
    for i, (key, site) in enumerate([(Key(7, 2**32 - 1, 2**24 - 1, 200), "200"),
                                     (Key(2**64 - 1, site="grad-single"), "grad-single")]):
        want, st = _cli_encode(shardq_cli, tmp_path, x, spec, "k%d" % i, key.seed, key.step,
                               key.worker, site)
        q = shardq.quantize(x, spec, key)
        assert q.shape == (8, 125)
        q.save(tmp_path / "py.safetensors")
        assert (tmp_path / "py.safetensors").read_bytes() == want
        back = Quantized.load(st)
        assert back.key == key and back.shape == (8, 125) and back.codec == Codec(spec)
        assert shardq.dequantize(back).shape == (8, 125)

    # no values: the library quantizes nothing without complaint, as the command does
    empty = np.zeros(0, np.float32)
    want, st = _cli_encode(shardq_cli, tmp_path, empty, "bits=4,round=rtn", "e")
    q = shardq.quantize(empty, "bits=4,round=rtn")
    q.save(tmp_path / "e2.safetensors")
    assert (tmp_path / "e2.safetensors").read_bytes() == want
    assert shardq.dequantize(Quantized.load(st)).size == 0


# ---------------------------------------------------------------------------
# The sparse kinds and the casts (docs/conventions.md)
# ---------------------------------------------------------------------------

SPARSE = ["kind=topk,keep=5,group=64", "kind=randk,keep=3,group=300,scale=bf16",
          "kind=topk,keep=2,group=70000,scale=fp16", "kind=fp16", "kind=bf16"]


@pytest.mark.parametrize("spec", SPARSE)
def test_sparse_and_cast_kinds_equal_the_command(shardq_cli, tmp_path, spec):
    c = Codec(spec)
    for n in (1000, 4096):
        x = _data(n, seed=n)
        want, st = _cli_encode(shardq_cli, tmp_path, x, spec, "s%d" % n, seed=9, step=1)
        q = shardq.quantize(x, c, Key(seed=9, step=1))
        q.save(tmp_path / "py.safetensors")
        assert (tmp_path / "py.safetensors").read_bytes() == want, (spec, n)
        assert q.scales.size == c.scale_count(n) and q.codes.size == c.code_bytes(n)
        shardq_cli("codec", "decode", st, tmp_path / "y.npy")
        y = shardq.dequantize(Quantized.load(st))
        assert y.tobytes() == np.load(tmp_path / "y.npy").tobytes(), (spec, n)
        info = json.loads(shardq_cli("codec", "info", "--codec", spec, "--n", n, "--json").stdout)
        assert (c.spec, c.code_bytes(n), c.scale_bytes(n)) == \
            (info["codec"], info["code_bytes"], info["scale_bytes"])


def test_sparse_kinds_keep_what_they_say():
    x = _data(1000)
    c = Codec(kind="topk", keep=4, group=100)
    assert (c.kind, c.keep, c.bits, c.round) == ("topk", 4, 8, "rtn")
    assert c.spec.endswith(",keep=4") and Codec().keep == 0
    y = shardq.dequantize(shardq.quantize(x, c))
    for g in range(10):
        part, got = x[100 * g:100 * (g + 1)], y[100 * g:100 * (g + 1)]
        top = np.sort(np.argsort(-np.abs(part), kind="stable")[:4])
        assert list(np.nonzero(got)[0]) == list(top) and (got[top] == part[top]).all()
    # the casts: numpy's round-to-nearest-even fp16, no scales
    f = shardq.quantize(x, "kind=fp16")
    assert f.scales.size == 0 and f.codes.view(np.float16).tobytes() == x.astype(np.float16).tobytes()
    with pytest.raises(shardq.RangeError):
        shardq.quantize(np.array([1.0, 7e4], np.float32), "kind=fp16")
    # random-k needs a key, as stochastic rounding does
    with pytest.raises(shardq.ArgumentError, match="needs a key"):
        shardq.quantize(x, "kind=randk,keep=2")
    with pytest.raises(shardq.SpecError, match="needs keep="):
        Codec(kind="randk")


# ---------------------------------------------------------------------------
# Codec and Key
# ---------------------------------------------------------------------------

def test_compressor_kinds_and_their_defaults():
    assert Codec(kind="sign").spec == \
        "kind=sign,bits=1,group=128,round=rtn,hadamard=0,levels=sdp4bit,scale=fp32"
    assert Codec("kind=fp8e5m2").bits == 8 and Codec("kind=qsgd").round == "sr"
    x = _data(1000)
    y = shardq.dequantize(shardq.quantize(x, "kind=sign,group=1"))
    assert y.tobytes() == x.tobytes()  # groups of one: the scale is |x|
    q = shardq.quantize(x, "kind=fp8e4m3,round=rtn")
    assert q.codes.size == 1000 and q.scales.size == 8 and q.offsets is None


def test_codec_spec_keywords_and_attributes():
    a = Codec("bits=3,group=32,kind=minmax,scale=bf16")
    b = Codec(bits=3, group=32, kind="minmax", scale="bf16")
    assert a == b and hash(a) == hash(b) and a != Codec("bits=3,group=32")
    assert a.spec == "kind=minmax,bits=3,group=32,round=sr,hadamard=0,levels=sdp4bit,scale=bf16"
    assert (a.kind, a.bits, a.group, a.round, a.hadamard, a.levels, a.scale) == \
        ("minmax", 3, 32, "sr", 0, "sdp4bit", "bf16")
    assert repr(a) == "Codec('%s')" % a.spec and eval(repr(a), {"Codec": Codec}) == a
    assert Codec() == Codec("") == Codec(Codec())
    assert Codec("bits=8", round="rtn").spec.startswith("kind=sym,bits=8,group=128,round=rtn")
    assert a.replace(bits=8).bits == 8 and a.bits == 3
    assert pickle.loads(pickle.dumps(a)) == a
    assert Codec(**a.fields()) == a


@pytest.mark.parametrize("spec", ["bits=3,group=32,kind=minmax,scale=bf16",
                                  "bits=1,group=1,kind=minmax", "bits=8,group=4096,scale=fp16",
                                  "bits=4,group=128,hadamard=1024,levels=deepspeed",
                                  "kind=qsgd,bits=5,group=100", "kind=sign,group=7,scale=fp16",
                                  "kind=fp8e5m2,group=1000,scale=bf16"])
def test_codec_sizes_equal_codec_info(shardq_cli, spec):
    c = Codec(spec)
    for n in (0, 1, 1000, 4096, 10**9 + 7):
        info = json.loads(shardq_cli("codec", "info", "--codec", spec, "--n", n, "--json").stdout)
        assert info["codec"] == c.spec
        assert c.groups(n) == info["groups"]
        assert c.code_bytes(n) == info["code_bytes"] == (n * c.bits + 7) // 8
        assert c.scale_bytes(n) == info["scale_bytes"]
        assert c.offset_bytes(n) == info["offset_bytes"]
        assert c.nbytes(n) == info["bytes"]
        assert c.bits_per_element(n) == pytest.approx(info["bits_per_element"], rel=1e-12)
    with pytest.raises(ValueError, match="element count"):
        c.groups(-1)


@pytest.mark.parametrize("spec", ["bits=9", "kind=minmax,levels=deepspeed", "foo=1",
                                  "bits=4,bits=3", "hadamard=3", "group=0", "kind=sign,bits=4",
                                  "kind=sign,round=sr", "kind=qsgd,bits=1", "kind=fp8e4m3,bits=4"])
def test_bad_spec_is_a_spec_error_with_the_librarys_sentence(shardq_cli, tmp_path, spec):
    np.save(tmp_path / "x.npy", np.ones(4, np.float32))
    p = shardq_cli("codec", "encode", "--codec", spec, tmp_path / "x.npy", tmp_path / "o",
                   check=False)
    sentence = p.stderr.strip().split("--codec: ", 1)[1]
    with pytest.raises(shardq.SpecError) as e:
        Codec(spec)
    assert str(e.value) == sentence and e.value.kind == "SQ_ERR_SPEC"


def test_bad_codec_keywords():
    with pytest.raises(shardq.SpecError, match="bits=9: must be an integer from 1 to 8"):
        Codec(bits=9)
    with pytest.raises(TypeError, match="unknown key 'bitz'"):
        Codec(bitz=4)
    with pytest.raises(TypeError, match="bits needs an integer"):
        Codec(bits=4.0)
    with pytest.raises(shardq.SpecError, match="round: 'sr,bits=2' is not a value"):
        Codec(round="sr,bits=2")
    with pytest.raises(shardq.SpecError, match="given twice"):
        Codec("bits=4", bits=3)


def test_key_fields_sites_and_uniforms():
    k = Key(5, step=2, worker=3, site="grad-intra")
    assert (k.seed, k.step, k.worker, k.site, k.site_name) == (5, 2, 3, 1, "grad_intra")
    assert k == Key(5, 2, 3, 1) and k != Key(5, 2, 3, 2) and hash(k) == hash(Key(5, 2, 3, 1))
    assert pickle.loads(pickle.dumps(k)) == k and eval(repr(k), {"Key": Key}) == k
    assert Key(0, site=77).site_name == "77"
    u = k.uniform(10, 1000)
    assert u.dtype == np.float32 and u.shape == (1000,)
    assert (u >= 0).all() and (u < 1).all() and 0.45 < u.mean() < 0.55
    # element i's uniform does not depend on where the range starts
    assert np.array_equal(k.uniform(0, 1010)[10:], u)
    assert not np.array_equal(Key(5, 2, 3, 2).uniform(10, 1000), u)
    buf = np.empty(1000, np.float32)
    assert k.uniform(10, 1000, out=buf) is buf and np.array_equal(buf, u)
    for bad, what in [(dict(worker=2**24), "worker=16777216"), (dict(site=256), "site=256"),
                      (dict(step=-1), "step=-1"), (dict(site="grads"), "unknown site 'grads'")]:
        with pytest.raises(shardq.ArgumentError, match=what):
            Key(1, **bad)
    with pytest.raises(shardq.ArgumentError, match="seed"):
        Key(2**64)


# ---------------------------------------------------------------------------
# The caller's memory, in place
# ---------------------------------------------------------------------------

def test_inputs_are_read_in_place():
    a = _data(1000)
    t = torch.from_numpy(_data(1000, seed=1))
    ptr, keep, n = as_input(a)
    assert int(shardq._lib.ffi.cast("uintptr_t", ptr)) == a.ctypes.data and keep is a
    ptr, keep, n = as_input(t)
    assert int(shardq._lib.ffi.cast("uintptr_t", ptr)) == t.data_ptr() and n == 1000
    # a non-float32 input is converted (a copy) and gives the float32 result
    c = Codec("bits=4,round=rtn")
    assert shardq.quantize(a.astype(np.float64), c).tobytes() == shardq.quantize(a, c).tobytes()
    assert shardq.quantize(t.double(), c).tobytes() == shardq.quantize(t, c).tobytes()
    assert shardq.quantize(a[::-1], c).tobytes() == shardq.quantize(a[::-1].copy(), c).tobytes()


def test_outputs_are_written_in_place():
    c, key = Codec("bits=4,group=128,round=sr,hadamard=32"), Key(9)
    x = _data(1000)
    q = shardq.quantize(x, c, key)
    want = shardq.dequantize(q)

    buf = np.full(1000, 7.0, np.float32)
    got = shardq.dequantize(q, out=buf)
    assert got is buf and np.array_equal(buf, want)
    tbuf = torch.zeros(10, 100)
    assert shardq.dequantize(q, out=tbuf) is tbuf and np.array_equal(tbuf.numpy().ravel(), want)

    # ref + D(q) written over ref itself: numpy and torch
    ref = _data(1000, seed=2)
    expect = ref + want
    ref_before = ref.ctypes.data
    assert shardq.dequantize_add(q, ref, out=ref) is ref
    assert ref.ctypes.data == ref_before and np.array_equal(ref, expect)
    tref = torch.from_numpy(_data(1000, seed=2))
    ptr = tref.data_ptr()
    assert shardq.dequantize_add(q, tref, out=tref) is tref and tref.data_ptr() == ptr
    assert np.array_equal(tref.numpy(), expect)
    # without out=, a new result of ref's family
    r = shardq.dequantize_add(q, torch.from_numpy(_data(1000, seed=2)))
    assert isinstance(r, torch.Tensor) and np.array_equal(r.numpy(), expect)
    assert not np.shares_memory(shardq.dequantize_add(q, ref), ref)

    # a Quantized reused: the same arrays, rewritten
    q2 = shardq.quantize(_data(1000, seed=5), c, key)
    codes = q2.codes
    assert shardq.quantize(x, c, key, out=q2) is q2 and q2.codes is codes
    assert q2.tobytes() == q.tobytes()


def test_outputs_of_the_wrong_kind_are_refused():
    q = shardq.quantize(_data(100), "bits=4,round=rtn")
    for bad, what in [(np.zeros(100, np.float64), "float32"),
                      (torch.zeros(100, dtype=torch.float64), "float32"),
                      (np.zeros(200, np.float32)[::2], "not contiguous"),
                      ([0.0] * 100, "numpy array or a tensor")]:
        with pytest.raises(TypeError, match=what):
            shardq.dequantize(q, out=bad)
    ro = np.zeros(100, np.float32)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="read-only"):
        shardq.dequantize(q, out=ro)
    with pytest.raises(ValueError, match="out holds 99 values, q 100"):
        shardq.dequantize(q, out=np.zeros(99, np.float32))
    ref = np.zeros(100, np.float64)
    with pytest.raises(TypeError, match="float32"):
        shardq.dequantize_add(q, ref, out=ref)
    with pytest.raises(ValueError, match="ref holds 99 values, q 100"):
        shardq.dequantize_add(q, np.zeros(99, np.float32))
    with pytest.raises(ValueError, match="out holds n=100 under .*bits=8"):
        shardq.quantize(_data(100), "bits=8,round=rtn", out=q)


# ---------------------------------------------------------------------------
# The fused operations against their definitions
# ---------------------------------------------------------------------------

def test_fused_operations_match_their_definitions():
    c, key = Codec("bits=4,group=32,round=sr"), Key(3, 1, 2, "grad_intra")
    x, ref = _data(1000), _data(1000, seed=1)
    assert shardq.quantize_diff(x, ref, c, key).tobytes() == \
        shardq.quantize(x - ref, c, key).tobytes()
    q = shardq.quantize(x, c, key)
    assert np.array_equal(shardq.dequantize_add(q, ref), ref + shardq.dequantize(q))

    # bf16 reconstruction: Q(bf16(x)), and bf16 of the decoded values
    xb = shardq.from_bf16(shardq.to_bf16(x))
    assert shardq.quantize(x, c, key, bf16=True).tobytes() == shardq.quantize(xb, c, key).tobytes()
    yb = shardq.dequantize(q, bf16=True)
    assert np.array_equal(yb, shardq.from_bf16(shardq.to_bf16(shardq.dequantize(q))))
    assert np.array_equal(shardq.to_bf16(torch.from_numpy(x)).numpy().view(np.uint16),
                          shardq.to_bf16(x))
    assert shardq.to_bf16(torch.from_numpy(x), out=torch.empty(1000, dtype=torch.bfloat16)) \
        .float().numpy().tobytes() == xb.tobytes()

    chunks = [shardq.quantize(_data(1000, seed=s), c, Key(s)) for s in range(4)]
    total = np.zeros(1000, np.float32)
    for ch in chunks:
        total += shardq.dequantize(ch)
    assert np.array_equal(shardq.dequant_sum(chunks), total)
    c_out = Codec("bits=8,group=128,round=sr")
    assert shardq.dequant_sum_requant(chunks, c_out, key).tobytes() == \
        shardq.quantize(total, c_out, key).tobytes()
    s16 = shardq.dequant_sum(chunks, fp16=True)
    assert np.array_equal(s16, s16.astype(np.float16).astype(np.float32))
    assert np.allclose(s16, total, atol=0.02, rtol=0.01)
    r16 = shardq.dequant_sum_requant(chunks, c_out, key, fp16=True)
    assert r16.tobytes() == shardq.quantize(s16, c_out, key).tobytes()

    with pytest.raises(ValueError, match=r"chunks\[1\] is n=999"):
        shardq.dequant_sum([chunks[0], shardq.quantize(_data(999), c, key)])
    with pytest.raises(ValueError, match="no chunks"):
        shardq.dequant_sum([])
    with pytest.raises(shardq.SpecError):  # the fp16 sums take no Hadamard codec
        shardq.dequant_sum([shardq.quantize(x, "round=rtn,hadamard=32")], fp16=True)


def test_hadamard_in_place():
    x = _data(1000)
    y = x.copy()
    assert shardq.hadamard(y, 32) is y
    assert not np.array_equal(y[:992], x[:992]) and np.array_equal(y[992:], x[992:])
    assert shardq.hadamard(y, 32, inverse=True) is y
    assert np.allclose(y, x, atol=1e-5)
    t = torch.ones(64)
    shardq.hadamard(t, 64)
    assert t[0] == 64 and (t[1:] == 0).all()
    with pytest.raises(shardq.ArgumentError, match="h=3"):
        shardq.hadamard(y, 3)
    with pytest.raises(TypeError, match="float32"):
        shardq.hadamard(x.astype(np.float64), 32)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

def test_nonfinite_input_names_the_element():
    x = _data(1000)
    x[123] = np.nan
    with pytest.raises(shardq.NonFiniteError,
                       match=r"quantize: non-finite input .* cannot be quantized: x\[123\] is NaN"):
        shardq.quantize(x, "bits=4,round=rtn")
    ref = _data(1000)
    ref[5] = -np.inf
    with pytest.raises(shardq.NonFiniteError, match=r"ref\[5\] is -Inf"):
        shardq.quantize_diff(_data(1000), ref, "bits=4,round=rtn")
    t = torch.from_numpy(_data(1000))
    t[999] = float("inf")
    with pytest.raises(shardq.NonFiniteError, match=r"x\[999\] is \+Inf"):
        shardq.quantize(t, "bits=4,round=rtn")
    # the decoding operations write every value, then call a non-finite one
    # a range error (the library's rule), named here
    q = shardq.quantize(_data(1000), "bits=4,round=rtn")
    with pytest.raises(shardq.RangeError, match=r"dequantize_add: a result does not fit fp32 "
                       r".*: out\[5\] is -Inf"):
        shardq.dequantize_add(q, ref)
    with pytest.raises(shardq.NonFiniteError, match=r"x\[123\] is NaN"):
        shardq.to_bf16(x)
    # a finite input whose result leaves fp32
    with pytest.raises(shardq.RangeError, match="quantize_diff: a result does not fit fp32"):
        shardq.quantize_diff(np.full(4, 3e38, np.float32), np.full(4, -3e38, np.float32),
                             "bits=4,round=rtn")


def test_stochastic_rounding_needs_a_key():
    x = _data(100)
    with pytest.raises(shardq.ArgumentError, match="round=sr.* needs a key"):
        shardq.quantize(x, "bits=4,round=sr")
    with pytest.raises(shardq.ArgumentError, match="needs a key"):
        shardq.quantize_diff(x, x, "bits=4,round=sr")
    chunks = [shardq.quantize(x, "bits=4,round=rtn")]
    with pytest.raises(shardq.ArgumentError, match="needs a key"):
        shardq.dequant_sum_requant(chunks, "bits=8,round=sr")
    with pytest.raises(TypeError, match="shardq.Key"):
        shardq.quantize(x, "bits=4,round=sr", key=1)
    shardq.quantize(x, "bits=4,round=rtn")  # RTN needs none


def test_quantized_arrays_are_checked(tmp_path):
    c = Codec("kind=minmax,bits=3,group=32,scale=bf16,round=rtn")
    q = shardq.quantize(_data(1000), c)
    assert q.codes.dtype == np.uint8 and q.scales.dtype == np.uint16
    assert q.offsets.dtype == np.uint16 and q.nbytes == len(q.tobytes()) == c.nbytes(1000)
    Quantized(c, 1000, q.codes, q.scales, q.offsets)  # the same arrays wrap again
    with pytest.raises(ValueError, match="codes holds 374 values, codec .* needs 375"):
        Quantized(c, 1000, q.codes[:374], q.scales, q.offsets)
    with pytest.raises(TypeError, match="scales needs a C-contiguous uint16"):
        Quantized(c, 1000, q.codes, q.scales.astype(np.float32), q.offsets)
    with pytest.raises(ValueError, match="no offsets"):
        Quantized(c, 1000, q.codes, q.scales)
    with pytest.raises(ValueError, match="shape"):
        Quantized(c, 1000, q.codes, q.scales, q.offsets, shape=(3, 3))
    with pytest.raises(TypeError, match="Quantized"):
        shardq.dequantize(q.codes)
    with pytest.raises(TypeError, match="x is a tensor on meta"):
        shardq.quantize(torch.empty(10, device="meta"), c)

    with pytest.raises(shardq.NotFoundError):
        Quantized.load(tmp_path / "none.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"\x10" + b"\x00" * 7 + b"{}")
    with pytest.raises(shardq.FileFormatError, match="bad.safetensors"):
        Quantized.load(tmp_path / "bad.safetensors")


# ---------------------------------------------------------------------------
# CUDA tensors: the bytes of the CPU path, on the caller's stream
# ---------------------------------------------------------------------------

def _need_gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch (torch.cuda.is_available() is False)")


@pytest.mark.parametrize("spec", ["bits=4,group=128,round=sr,hadamard=32",
                                  "kind=minmax,bits=3,group=32,round=sr,scale=bf16",
                                  "bits=8,group=128,round=rtn,scale=fp16,levels=deepspeed",
                                  "kind=qsgd,bits=4,group=128,round=sr,hadamard=32",
                                  "kind=sign,group=64,scale=bf16", "kind=fp8e4m3,group=32,round=sr",
                                  "kind=fp8e5m2,group=1000,round=rtn,scale=fp16"])
def test_cuda_bytes_equal_the_cpu(spec):
    _need_gpu()
    c, key = Codec(spec), Key(11, 4, 2, "grad_intra")
    x, ref = _data(100003), _data(100003, seed=1)
    gx, gref = torch.from_numpy(x).cuda(), torch.from_numpy(ref).cuda()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # the work goes on the caller's current stream
        q = shardq.quantize(x, c, key)
        gq = shardq.quantize(gx, c, key)
        assert gq.device == str(gx.device) and gq.codes.dtype == torch.uint8 and gq.codes.is_cuda
        assert gq.tobytes() == q.tobytes()
        assert shardq.quantize_diff(gx, gref, c, key).tobytes() == \
            shardq.quantize_diff(x, ref, c, key).tobytes()
        assert shardq.quantize(gx, c, key, bf16=True).tobytes() == \
            shardq.quantize(x, c, key, bf16=True).tobytes()
        y = shardq.dequantize(gq)
        assert y.is_cuda and y.cpu().numpy().tobytes() == shardq.dequantize(q).tobytes()
        assert shardq.dequantize(gq, bf16=True).cpu().numpy().tobytes() == \
            shardq.dequantize(q, bf16=True).tobytes()
        ptr = gref.data_ptr()
        assert shardq.dequantize_add(gq, gref, out=gref) is gref and gref.data_ptr() == ptr
        assert gref.cpu().numpy().tobytes() == shardq.dequantize_add(q, ref).tobytes()
        chunks = [shardq.quantize(_data(100003, seed=s), c, Key(s)) for s in range(3)]
        gchunks = [ch.cuda(gx.device) for ch in chunks]
        assert shardq.dequant_sum(gchunks).cpu().numpy().tobytes() == \
            shardq.dequant_sum(chunks).tobytes()
        c_out = Codec("bits=8,group=64,round=sr")
        assert shardq.dequant_sum_requant(gchunks, c_out, key).tobytes() == \
            shardq.dequant_sum_requant(chunks, c_out, key).tobytes()
        assert shardq.to_bf16(gx).cpu().numpy().view(np.uint16).tobytes() == \
            shardq.to_bf16(x).tobytes()
    torch.cuda.synchronize()


def test_cuda_errors_and_mixes():
    _need_gpu()
    gx = torch.from_numpy(_data(1000)).cuda()
    gx[17] = float("nan")
    with pytest.raises(shardq.NonFiniteError, match=r"x\[17\] is NaN"):
        shardq.quantize(gx, "bits=4,round=rtn")
    q = shardq.quantize(_data(1000), "bits=4,round=rtn")
    with pytest.raises(TypeError, match="different devices"):
        shardq.dequantize_add(q, gx)
    gq = q.cuda()
    with pytest.raises(TypeError, match="float32"):
        shardq.dequantize(gq, out=torch.empty(1000, dtype=torch.float64, device=gx.device))
    # the default stream too (CUDA's legacy stream)
    with torch.cuda.stream(torch.cuda.default_stream()):
        assert shardq.dequantize(gq).cpu().numpy().tobytes() == shardq.dequantize(q).tobytes()
