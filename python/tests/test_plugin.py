"""shardq.codec.register and shardq.load_plugin: a codec written in Python
used by the codec operations, the container and the World, with the
library's contracts around it (non-finite input, non-finite output, keys,
sizes), its errors, and the example module (experiments/plugins/terngrad.c)
loaded from its shared object."""
import os

import numpy as np
import pytest

import shardq
from shardq import Codec, Key

G = 16


# ---------------------------------------------------------------------------
# Codecs written here: straight-line references
# ---------------------------------------------------------------------------

def _sym8_encode(x, key):
    """kind=sym,bits=8,round=rtn,scale=fp32 written out: a = max |x| per
    group, m = 127 / a, codes rint(x * m) in -127..127, scale a / 127 (a
    group of zeros: scale 1, codes 0). fp32 throughout, as the library."""
    assert key is None
    n = x.size
    ng = (n + G - 1) // G
    codes = np.zeros(n, np.int8)
    scales = np.ones(ng, np.float32)
    for g in range(ng):
        v = x[g * G:(g + 1) * G]
        a = np.max(np.abs(v))
        if a == 0:
            continue
        m = np.float32(127) / a
        q = np.clip(np.rint(np.clip(v * m, -128, 128)), -127, 127)
        codes[g * G:g * G + v.size] = q.astype(np.int8)
        scales[g] = a / np.float32(127)
    return codes, scales, None


def _sym8_decode(codes, scales, offsets, n):
    assert offsets.size == 0
    c = codes.view(np.int8).astype(np.float32)
    s = np.repeat(scales.view(np.float32), G)[:n]
    return c * s


def _sym8_sizes(n):
    return n, 4 * ((n + G - 1) // G), 0


def _sign_encode(x, key):
    """A stochastic 1-bit codec with an offset: per group lo = min, scale
    = max - min; bit i = u_i < (x_i - lo) / scale, u = key.uniform(0, n)."""
    n = x.size
    u = key.uniform(0, n)
    ng = (n + G - 1) // G
    lo = np.zeros(ng, np.float32)
    sc = np.zeros(ng, np.float32)
    bits = np.zeros(n, np.uint8)
    for g in range(ng):
        v = x[g * G:(g + 1) * G]
        lo[g], sc[g] = v.min(), v.max() - v.min()
        if sc[g] > 0:
            bits[g * G:g * G + v.size] = u[g * G:g * G + v.size] < (v - lo[g]) / sc[g]
    return np.packbits(bits), sc, lo


def _sign_decode(codes, scales, offsets, n):
    bits = np.unpackbits(codes)[:n].astype(np.float32)
    sc = np.repeat(scales.view(np.float32), G)[:n]
    lo = np.repeat(offsets.view(np.float32), G)[:n]
    return lo + bits * sc


def _sign_sizes(n):
    ng = (n + G - 1) // G
    return (n + 7) // 8, 4 * ng, 4 * ng


def _codec(name, **kw):
    """The codec registered under name, registered on first use (the
    registry lives as long as the process)."""
    if name not in {p["name"] for p in shardq.plugins()}:
        return shardq.codec.register(name, **kw)
    return Codec("kind=plugin:%s" % name)


def sym8():
    return _codec("py_sym8", encode=_sym8_encode, decode=_sym8_decode, sizes=_sym8_sizes,
                  group=G, about="sym 8-bit RTN, written in Python")


def sign1():
    return _codec("py_sign1", encode=_sign_encode, decode=_sign_decode, sizes=_sign_sizes,
                  group=G, stochastic=True)


def _x(n, seed=0):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    x[32:48] = 0  # a group of zeros
    return x


# ---------------------------------------------------------------------------
# Registering
# ---------------------------------------------------------------------------

def test_register_gives_a_codec():
    c = sym8()
    assert c.spec == "kind=plugin:py_sym8,group=16"
    assert c.is_plugin and c.plugin == "py_sym8" and c.kind == "plugin:py_sym8"
    assert c.group == G and c.bits is None and c.round == "rtn" and c.hadamard == 0
    assert Codec("kind=plugin:py_sym8") == c
    assert (c.code_bytes(100), c.scale_bytes(100), c.offset_bytes(100)) == (100, 28, 0)
    assert c.nbytes(1000) == 1000 + 4 * 63
    info = {p["name"]: p for p in shardq.plugins()}["py_sym8"]
    assert info["source"] == "python" and info["group"] == G and not info["stochastic"]
    assert info["about"] == "sym 8-bit RTN, written in Python"
    assert sign1().round == "sr"


def test_register_refusals():
    sym8()
    with pytest.raises(shardq.ConflictError, match="py_sym8"):
        shardq.codec.register("py_sym8", encode=_sym8_encode, decode=_sym8_decode,
                              sizes=_sym8_sizes, group=G)
    with pytest.raises(shardq.SpecError, match="a name is 1 to 31"):
        shardq.codec.register("Bad-Name", encode=_sym8_encode, decode=_sym8_decode,
                              sizes=_sym8_sizes)
    with pytest.raises(shardq.SpecError, match="not additive"):
        shardq.codec.register("py_header", encode=_sym8_encode, decode=_sym8_decode,
                              sizes=lambda n: (n + 4 if n else 0, 0, 0))
    with pytest.raises(ZeroDivisionError):  # sizes raising: its own exception
        shardq.codec.register("py_raises", encode=_sym8_encode, decode=_sym8_decode,
                              sizes=lambda n: (1 // 0, 0, 0))
    with pytest.raises(TypeError, match="decode needs a callable"):
        shardq.codec.register("py_nodecode", encode=_sym8_encode, decode=None, sizes=_sym8_sizes)
    with pytest.raises(shardq.SpecError, match="group=0"):
        shardq.codec.register("py_group0", encode=_sym8_encode, decode=_sym8_decode,
                              sizes=_sym8_sizes, group=0)
    names = {p["name"] for p in shardq.plugins()}
    assert not names & {"py_header", "py_raises", "py_nodecode", "py_group0"}
    with pytest.raises(shardq.SpecError, match="kind=plugin:py_nosuch"):
        Codec("kind=plugin:py_nosuch")
    with pytest.raises(shardq.SpecError, match="takes no bits"):
        Codec("kind=plugin:py_sym8,bits=4")


# ---------------------------------------------------------------------------
# The codec operations
# ---------------------------------------------------------------------------

BUILTIN = "kind=sym,bits=8,group=16,round=rtn"


def test_equals_the_builtin_codec():
    """The Python sym8 through the library gives the built-in codec's bytes
    and values, for every operation."""
    c, b = sym8(), Codec(BUILTIN)
    x, ref = _x(1000, 1), _x(1000, 2)
    for qp, qb in [(shardq.quantize(x, c), shardq.quantize(x, b)),
                   (shardq.quantize_diff(x, ref, c), shardq.quantize_diff(x, ref, b)),
                   (shardq.quantize(x, c, bf16=True), shardq.quantize(x, b, bf16=True))]:
        assert qp.codes.dtype == np.uint8 and qp.scales.dtype == np.uint8
        assert qp.codes.tobytes() == qb.codes.tobytes()
        assert qp.scales.tobytes() == qb.scales.tobytes()
        assert np.array_equal(shardq.dequantize(qp), shardq.dequantize(qb))
        assert np.array_equal(shardq.dequantize_add(qp, ref), shardq.dequantize_add(qb, ref))
        assert np.array_equal(shardq.dequantize(qp, bf16=True), shardq.dequantize(qb, bf16=True))
    chunks = [shardq.quantize(_x(1000, s), c) for s in range(3)]
    want = sum(_sym8_decode(q.codes, q.scales, q.offsets, 1000) for q in chunks[1:]) + \
        _sym8_decode(chunks[0].codes, chunks[0].scales, chunks[0].offsets, 1000)
    total = shardq.dequant_sum(chunks)
    acc = _sym8_decode(chunks[0].codes, chunks[0].scales, chunks[0].offsets, 1000)
    for q in chunks[1:]:
        acc = acc + _sym8_decode(q.codes, q.scales, q.offsets, 1000)  # chunk order
    assert np.array_equal(total, acc)
    assert np.allclose(total, want)
    out = shardq.dequant_sum_requant(chunks, c)
    assert out.codes.tobytes() == shardq.quantize(acc, c).codes.tobytes()
    out_b = shardq.dequant_sum_requant(chunks, b)  # into a built-in codec
    assert out_b.codes.tobytes() == out.codes.tobytes()


def test_stochastic_uses_the_key():
    c = sign1()
    x = _x(500, 3)
    with pytest.raises(shardq.ArgumentError, match="needs a key"):
        shardq.quantize(x, c)
    k = Key(9, step=2, worker=1, site="grad_inter")
    q1, q2 = shardq.quantize(x, c, k), shardq.quantize(x, c, k)
    assert q1.tobytes() == q2.tobytes()
    assert q1.offsets is not None and q1.offsets.size == 4 * 32
    assert shardq.quantize(x, c, Key(10)).tobytes() != q1.tobytes()
    # the bits against the uniforms drawn here
    u = k.uniform(0, 500)
    bits = np.unpackbits(q1.codes)[:500]
    for g in range(0, 500, G):
        v = x[g:g + G]
        lo, sc = v.min(), v.max() - v.min()
        want = (u[g:g + G] < (v - lo) / sc) if sc > 0 else np.zeros(v.size, bool)
        assert np.array_equal(bits[g:g + G].astype(bool), want)
    # unbiased: the mean over many keys approaches x
    mean = np.mean([shardq.dequantize(shardq.quantize(x, c, Key(s))) for s in range(300)], axis=0)
    assert np.linalg.norm(mean - x) / np.linalg.norm(x) < 0.15


def test_contracts_around_a_python_codec():
    calls = []

    def enc(x, key):
        calls.append(x.size)
        assert not x.flags.writeable
        return _sym8_encode(x, key)

    def dec_nan(codes, scales, offsets, n):
        y = _sym8_decode(codes, scales, offsets, n)
        y[5] = np.inf
        return y
    c = _codec("py_contract", encode=enc, decode=_sym8_decode, sizes=_sym8_sizes, group=G)
    x = _x(64)
    x[7] = np.nan
    with pytest.raises(shardq.NonFiniteError):
        shardq.quantize(x, c)
    assert calls == []  # NaN never reached encode
    x[7] = 1.0
    shardq.quantize(x, c)
    assert calls == [64]
    bad = _codec("py_inf", encode=_sym8_encode, decode=dec_nan, sizes=_sym8_sizes, group=G)
    with pytest.raises(shardq.RangeError):
        shardq.dequantize(shardq.quantize(x, bad))


def test_callback_exceptions_surface():
    def enc(x, key):
        raise KeyError("the encoder's own failure")

    def enc_short(x, key):
        codes, scales, offsets = _sym8_encode(x, key)
        return codes[:-1], scales, offsets
    c = _codec("py_raising", encode=enc, decode=_sym8_decode, sizes=_sym8_sizes, group=G)
    with pytest.raises(KeyError, match="own failure") as ei:
        shardq.quantize(_x(40), c)
    assert isinstance(ei.value.__cause__, shardq.ShardqError)
    short = _codec("py_short", encode=enc_short, decode=_sym8_decode, sizes=_sym8_sizes,
                   group=G)
    with pytest.raises(ValueError, match="encode returned 39 bytes of codes for n=40"):
        shardq.quantize(_x(40), short)
    # and the next call is clean
    q = shardq.quantize(_x(40), sym8())
    assert q.n == 40


def test_container_round_trip(tmp_path, shardq_cli):
    c = sign1()
    x = _x(300, 4)
    q = shardq.quantize(x, c, Key(3))
    q.save(tmp_path / "q.st")
    back = shardq.Quantized.load(tmp_path / "q.st")
    assert back.codec == c and back.tobytes() == q.tobytes()
    assert np.array_equal(shardq.dequantize(back), shardq.dequantize(q))


# ---------------------------------------------------------------------------
# In the World
# ---------------------------------------------------------------------------

def _world_run(sets, n=3001):
    rng = np.random.default_rng(5)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    scheme = shardq.Scheme("sdp4bit", set=["grad.hadamard=0"] + sets)
    with shardq.World("2x2", scheme, elements=n, seed=3) as w:
        shards = w.reduce_scatter(grads, step=1)
        traffic = w.traffic()
    return shards, traffic


def test_world_with_a_python_codec():
    sym8()
    got, tp = _world_run(["grad.kind=plugin:py_sym8"])
    want, tb = _world_run(["grad.kind=sym", "grad.bits=8", "grad.group=16", "grad.round=rtn"])
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
    assert tp == tb


def test_world_callback_exception():
    def enc(x, key):
        raise RuntimeError("encoder gave up")
    _codec("py_gives_up", encode=enc, decode=_sym8_decode, sizes=_sym8_sizes, group=G)
    with pytest.raises(RuntimeError, match="encoder gave up"):
        _world_run(["grad.inter.kind=plugin:py_gives_up"])


# ---------------------------------------------------------------------------
# Shared objects
# ---------------------------------------------------------------------------

def _module():
    path = os.environ.get("SHARDQ_TERNGRAD")
    if not path or not os.path.exists(path):
        pytest.fail("SHARDQ_TERNGRAD (the example module built by make) is not set or missing")
    return path


def test_load_plugin_terngrad():
    path = _module()
    n = shardq.load_plugin(path)
    assert n in (0, 1)  # 0: SHARDQ_PLUGINS or an earlier test loaded it
    assert shardq.load_plugin(path) == 0
    info = {p["name"]: p for p in shardq.plugins()}["terngrad"]
    assert info["source"] == os.path.realpath(path) and info["stochastic"]
    c = Codec("kind=plugin:terngrad")
    x = _x(1000, 6)
    q = shardq.quantize(x, c, Key(4, site="grad_inter"))
    assert q.codes.size == 250 and q.scales.size == 32
    y = shardq.dequantize(q)
    s = np.repeat(q.scales.view(np.float32), 128)[:1000]
    assert np.all((y == 0) | (np.abs(y) == s))
    assert np.all(y * x >= 0)


def test_load_plugin_errors(tmp_path):
    with pytest.raises(shardq.NotFoundError, match="nosuch.so"):
        shardq.load_plugin(tmp_path / "nosuch.so")
    (tmp_path / "text.so").write_text("not a shared object\n")
    with pytest.raises(shardq.IOFailure, match="text.so: cannot load it"):
        shardq.load_plugin(tmp_path / "text.so")

