# cli_world.sh -- `shardq world` and `shardq schemes`: the presets and their
# knobs are listed, the dry traffic of a scheme equals its closed form byte
# for byte, the ring splits its bytes between the links as a ring does, a
# short --run moves data and reports errors reproducibly, the degenerate
# topologies fall back as SDP4Bit does, and bad options are refused with the
# reason. No check looks at a time.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
export SHARDQ_PROGRESS=0

# world FILE ARGS...: runs `shardq world ARGS` into FILE (stdout only).
world() {
  sq_out=$1
  shift
  "$SHARDQ" world "$@" >"$sq_out"
}

PRESETS="baseline qw qwd ulq tlq tlqhs sdp4bit zeropp zeropp8 qsdp qgz qwz powersgd powersgd4 qsgd efsignsgd topk"
KNOBS="weight.mode weight.bits weight.kind weight.group weight.round weight.hadamard
weight.levels weight.scale weight.keep weight.recon grad.mode grad.intra.bits grad.intra.kind
grad.intra.group grad.intra.round grad.intra.hadamard grad.intra.levels grad.intra.scale
grad.intra.keep grad.intra.ef grad.inter.bits grad.inter.kind grad.inter.group grad.inter.round
grad.inter.hadamard grad.inter.levels grad.inter.scale grad.inter.keep grad.inter.ef grad.pipe
grad.mean grad.dtype grad.fallback grad.powersgd.rank grad.powersgd.warm grad.powersgd.ef
grad.powersgd.start grad.powersgd.minrate grad.powersgd.eps grad.powersgd.cols layout layout.bucket"

# ---------------------------------------------------------------------------
# Help
# ---------------------------------------------------------------------------

ok "world --help" sh -c '"$0" world --help >"$1/wh.txt"' "$SHARDQ" "$T"
ok "world --help prints the usage" grep -q "^usage: shardq world" "$T/wh.txt"
ok "world --help lists --workers and --set" sh -c 'grep -q -- "--workers KxG" "$0" && grep -q -- "--set KEY=VALUE" "$0"' "$T/wh.txt"
ok "schemes --help" sh -c '"$0" schemes --help >"$1/sh.txt"' "$SHARDQ" "$T"
ok "schemes --help prints the usage" grep -q "^usage: shardq schemes" "$T/sh.txt"
ok "help world" sh -c '"$0" help world >"$1/hw.txt"' "$SHARDQ" "$T"
ok "help world prints the usage" grep -q "^usage: shardq world" "$T/hw.txt"
ok "help schemes prints the usage" sh -c '"$0" help schemes | grep -q "^usage: shardq schemes"' "$SHARDQ"

# ---------------------------------------------------------------------------
# shardq schemes
# ---------------------------------------------------------------------------

ok "schemes runs" sh -c '"$0" schemes >"$1/schemes.txt"' "$SHARDQ" "$T"
for p in $PRESETS; do
  ok "schemes lists preset $p" grep -q "^  $p  *[a-zA-Z0-9]" "$T/schemes.txt"
done
ok "the table heads one column per preset" \
  grep -q "^  *baseline  *qw  *qwd  *ulq  *tlq  *tlqhs  *sdp4bit  *zeropp  *zeropp8  *qsdp  *qgz  *qwz  *powersgd  *powersgd4  *qsgd  *efsignsgd  *topk *$" "$T/schemes.txt"
for k in $KNOBS; do
  ok "schemes has a row and a description for $k" \
    sh -c 'grep -q "^$0 " "$1" && grep -q "^  $0  *[^ ]" "$1"' "$k" "$T/schemes.txt"
done
ok "the sdp4bit column: 4-bit diff weights" grep -q "^weight.mode  *direct  *-  *diff  *-  *-  *-  *diff " "$T/schemes.txt"

ok "schemes --json runs" sh -c '"$0" schemes --json >"$1/schemes.json"' "$SHARDQ" "$T"
pyjson "schemes --json is valid JSON with the 14 presets in order" "$T/schemes.json" '
names = [p["name"] for p in d["presets"]]
assert names == "'"$PRESETS"'".split(), names'
pyjson "schemes --json: every preset has every knob, and the knob list" "$T/schemes.json" '
keys = "'"$(echo $KNOBS)"'".split()
assert [k["key"] for k in d["knobs"]] == keys, d["knobs"]
for p in d["presets"]:
    assert list(p["knobs"]) == keys, (p["name"], list(p["knobs"]))
    assert p["help"], p["name"]'
pyjson "schemes --json: the values of sdp4bit and baseline" "$T/schemes.json" '
P = {p["name"]: p["knobs"] for p in d["presets"]}
s, b = P["sdp4bit"], P["baseline"]
want = {"weight.mode": "diff", "weight.bits": "4", "weight.group": "2048", "weight.recon": "bf16",
        "grad.mode": "twolevel",
        "grad.intra.bits": "8", "grad.inter.bits": "4", "grad.inter.hadamard": "32", "grad.pipe": "1"}
for k, v in want.items():
    assert s[k] == v, (k, s[k], v)
assert (b["weight.bits"], b["grad.mode"], b["grad.intra.bits"], b["grad.mean"]) == ("16", "ring", "32", "1"), b'

# ---------------------------------------------------------------------------
# Dry traffic: SDP4Bit on 16x4 at 1.3 billion parameters, the closed forms
# ---------------------------------------------------------------------------

ok "dry sdp4bit 16x4 runs" world "$T/sdp.json" --workers 16x4 --scheme sdp4bit --elements 1300000000 --json
pyjson "dry sdp4bit: valid JSON, nothing moved, the topology and path" "$T/sdp.json" '
assert d["data_moved"] is False, d["data_moved"]
assert d["topology"] == {"nodes": 16, "per_node": 4, "workers": 64}, d["topology"]
assert d["grad_path"] == "twolevel", d["grad_path"]
assert d["elements"] == 1300000000 and d["padded"] >= d["elements"], (d["elements"], d["padded"])
assert d["padded"] == 64 * d["shard"], (d["padded"], d["shard"])
assert d["scheme"]["preset"] == "sdp4bit"
assert len(d["per_worker"]) == 64'
pyjson "dry sdp4bit: the weight all-gather equals N(N-1)(P/N)(1/2 + 4/2048)" "$T/sdp.json" '
N, G, K, P = 64, 4, 16, d["padded"]
assert P % N == 0 and (P // N) % 2048 == 0, P
w = d["traffic"]["weight_allgather"]
codes = w["intra"]["sent_codes"] + w["inter"]["sent_codes"]
meta = w["intra"]["sent_meta"] + w["inter"]["sent_meta"]
assert codes == N * (N - 1) * (P // N) // 2, (codes, N * (N - 1) * (P // N) // 2)
assert meta == N * (N - 1) * (P // N // 2048) * 4, (meta, N * (N - 1) * (P // N // 2048) * 4)
total = w["intra"]["sent_bytes"] + w["inter"]["sent_bytes"]
assert total * 2048 == N * (N - 1) * (P // N) * (1024 + 4), total'
pyjson "dry sdp4bit: the intra hop equals N(G-1)(P/G)(1 + 4/128)" "$T/sdp.json" '
N, G, K, P = 64, 4, 16, d["padded"]
assert P % G == 0 and (P // G) % 128 == 0, P
g = d["traffic"]["grad_reducescatter"]["intra"]
assert g["sent_codes"] == N * (G - 1) * (P // G), (g["sent_codes"], N * (G - 1) * (P // G))
assert g["sent_meta"] == N * (G - 1) * (P // G // 128) * 4, (g["sent_meta"], N * (G - 1) * (P // G // 128) * 4)
assert g["sent_bytes"] * 128 == N * (G - 1) * (P // G) * 132, g["sent_bytes"]'
pyjson "dry sdp4bit: the inter hop equals N(K-1)(P/N)(1/2 + 4/128)" "$T/sdp.json" '
N, G, K, P = 64, 4, 16, d["padded"]
assert (P // N) % 128 == 0, P
g = d["traffic"]["grad_reducescatter"]["inter"]
assert g["sent_codes"] == N * (K - 1) * (P // N) // 2, (g["sent_codes"], N * (K - 1) * (P // N) // 2)
assert g["sent_meta"] == N * (K - 1) * (P // N // 128) * 4, (g["sent_meta"], N * (K - 1) * (P // N // 128) * 4)
assert g["sent_bytes"] * 128 == N * (K - 1) * (P // N) * 68, g["sent_bytes"]'
pyjson "dry sdp4bit: bits per element 4.015625, 8.25, 4.25" "$T/sdp.json" '
t = d["traffic"]
for c, l, want in (("weight_allgather", "intra", 4.015625), ("weight_allgather", "inter", 4.015625),
                   ("grad_reducescatter", "intra", 8.25), ("grad_reducescatter", "inter", 4.25)):
    got = t[c][l]["bits_per_element"]
    assert abs(got - want) < 1e-6, (c, l, got, want)'
pyjson "dry sdp4bit: received equals sent, per-worker sums equal the totals" "$T/sdp.json" '
t = d["traffic"]
for c in ("weight_allgather", "grad_reducescatter"):
    for l in ("intra", "inter"):
        x = t[c][l]
        assert x["recv_bytes"] == x["sent_bytes"] == x["sent_codes"] + x["sent_meta"], (c, l, x)
        for f in ("sent_codes", "sent_meta"):
            s = sum(w[c][l][f] for w in d["per_worker"])
            assert s == x[f], (c, l, f, s, x[f])
        r = sum(w[c][l]["recv_codes"] + w[c][l]["recv_meta"] for w in d["per_worker"])
        assert r == x["recv_bytes"], (c, l, r)'

# ---------------------------------------------------------------------------
# The baseline ring on 2x4: fp32/bf16 bytes, and only the last worker of a
# node sends across nodes
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# Bits per real parameter beside bits per element: the padding is paid for
# ---------------------------------------------------------------------------

ok "dry sdp4bit 2x4 of 842496 elements runs" world "$T/pp.json" --workers 2x4 --scheme sdp4bit --elements 842496 --json
pyjson "the real elements: (N-1) n through the all-gather, K(G-1) n and (K-1) n through the hops" "$T/pp.json" '
n, P, N, K, G = d["elements"], d["padded"], 8, 2, 4
assert P > n and abs(d["padding_overhead"] - P / n) < 1e-6, (n, P, d["padding_overhead"])
t = d["traffic"]
w = t["weight_allgather"]
assert w["intra"]["real_elements"] + w["inter"]["real_elements"] == (N - 1) * n, w
assert w["intra"]["elements"] + w["inter"]["elements"] == (N - 1) * P, w
g = t["grad_reducescatter"]
assert g["intra"]["real_elements"] == K * (G - 1) * n and g["inter"]["real_elements"] == (K - 1) * n, g
for c in t:
    for l, x in t[c].items():
        assert x["bits_per_param"] > x["bits_per_element"], (c, l, x)
        assert abs(x["bits_per_param"] - 8 * x["sent_bytes"] / x["real_elements"]) < 1e-9, (c, l, x)
        assert abs(x["padding_overhead"] - x["elements"] / x["real_elements"]) < 1e-9, (c, l, x)'
ok "dry sdp4bit 2x4 of a whole number of padding units runs" world "$T/pp2.json" --workers 2x4 --scheme sdp4bit --elements 851968 --json
pyjson "no padding: bits per parameter equal bits per element" "$T/pp2.json" '
assert d["padded"] == d["elements"] and d["padding_overhead"] == 1, d["padded"]
for c, x in d["traffic"].items():
    for l, y in x.items():
        assert y["real_elements"] == y["elements"] and y["padding_overhead"] == 1, (c, l, y)
        assert abs(y["bits_per_param"] - y["bits_per_element"]) < 1e-12, (c, l, y)'
ok "a tiny model: bits/param beside bits/elem in the table" sh -c '"$0" world --workers 2x4 --elements 1000 |
  grep -q "^  grad_reducescatter  *inter .* 4.2500  *69.6320$"' "$SHARDQ"

ok "dry baseline 2x4 runs" world "$T/base.json" --workers 2x4 --scheme baseline --elements 1048576 --json
pyjson "baseline: bf16 weights N(N-1)(P/N)2, fp32 ring N(N-1)(P/N)4, no metadata" "$T/base.json" '
N, P = 8, d["padded"]
assert d["grad_path"] == "ring", d["grad_path"]
assert P % N == 0 and P >= 1048576, P
t = d["traffic"]
w = t["weight_allgather"]["intra"]["sent_bytes"] + t["weight_allgather"]["inter"]["sent_bytes"]
g = t["grad_reducescatter"]["intra"]["sent_bytes"] + t["grad_reducescatter"]["inter"]["sent_bytes"]
assert w == N * (N - 1) * (P // N) * 2, (w, N * (N - 1) * (P // N) * 2)
assert g == N * (N - 1) * (P // N) * 4, (g, N * (N - 1) * (P // N) * 4)
for c in t:
    for l in t[c]:
        assert t[c][l]["sent_meta"] == 0, (c, l, t[c][l])
assert abs(t["weight_allgather"]["inter"]["bits_per_element"] - 16) < 1e-6
assert abs(t["grad_reducescatter"]["intra"]["bits_per_element"] - 32) < 1e-6'
pyjson "baseline: workers 3 and 7 send only inter-node, the others only intra-node" "$T/base.json" '
N, P = 8, d["padded"]
S = P // N
for w in d["per_worker"]:
    r = w["worker"]
    assert w["node"] == r // 4, w
    for c, b in (("weight_allgather", 2), ("grad_reducescatter", 4)):
        intra = w[c]["intra"]["sent_codes"] + w[c]["intra"]["sent_meta"]
        inter = w[c]["inter"]["sent_codes"] + w[c]["inter"]["sent_meta"]
        want = (N - 1) * S * b
        if r in (3, 7):
            assert (intra, inter) == (0, want), (r, c, intra, inter, want)
        else:
            assert (intra, inter) == (want, 0), (r, c, intra, inter, want)
        rin = w[c]["inter"]["recv_codes"]
        assert rin == (want if r in (0, 4) else 0), (r, c, "recv inter", rin)'

# ---------------------------------------------------------------------------
# --run: data moves, replicas agree, errors are plausible and reproducible
# ---------------------------------------------------------------------------

RUN="--workers 2x2 --elements 5000 --run --steps 2 --json"
ok "run sdp4bit 2x2" world "$T/run1.json" $RUN --scheme sdp4bit
pyjson "run sdp4bit: two steps, replicas identical, 0 < rel_l2 < 1" "$T/run1.json" '
assert d["data_moved"] is True, d["data_moved"]
assert d["device"] == "cpu", d["device"]
st = d["steps"]
assert [s["step"] for s in st] == [1, 2], st
for s in st:
    assert s["replicas_identical"] is True, s
    assert 0 < s["grad"]["rel_l2"] < 1, s["grad"]
    assert 0 < s["weight"]["rel_l2"] < 1, s["weight"]
    assert s["grad"]["n"] == 5000 and s["weight"]["n"] == 5000, s
    assert 0 < s["grad"]["cosine"] <= 1, s["grad"]'
pyjson "run sdp4bit: the traffic of the last step is the dry traffic" "$T/run1.json" '
P, N, G, K = d["padded"], 4, 2, 2
g = d["traffic"]["grad_reducescatter"]
assert g["intra"]["sent_codes"] == N * (G - 1) * (P // G), g["intra"]
assert g["inter"]["sent_codes"] == N * (K - 1) * (P // N) // 2, g["inter"]'
ok "run sdp4bit again" world "$T/run2.json" $RUN --scheme sdp4bit
ok "the same seed gives the same bytes" cmp "$T/run1.json" "$T/run2.json"
ok "run sdp4bit, another seed" world "$T/run3.json" $RUN --scheme sdp4bit --seed 7
ok "another seed gives another output" sh -c '! cmp -s "$0" "$1"' "$T/run1.json" "$T/run3.json"
ok "another seed gives other errors, not just another seed field" python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert b["seed"] == 7 and a["seed"] == 1
assert [s["grad"]["rel_l2"] for s in a["steps"]] != [s["grad"]["rel_l2"] for s in b["steps"]], (a["steps"], b["steps"])' "$T/run1.json" "$T/run3.json"
ok "run fp32 everywhere" world "$T/run32.json" $RUN --scheme baseline --set weight.bits=32
pyjson "run fp32: the gradient almost exact, the weights exact" "$T/run32.json" '
st = d["steps"]
assert len(st) == 2, st
for s in st:
    assert s["replicas_identical"] is True, s
    assert s["grad"]["rel_l2"] < 1e-6, s["grad"]
    assert s["weight"]["rel_l2"] == 0, s["weight"]
    assert s["weight"]["max_abs"] == 0, s["weight"]
assert "weight.bits=32" in d["scheme"]["canonical"], d["scheme"]'
# weight.recon: an unquantized wire ignores it; a quantized one computes w-hat otherwise
ok "run baseline" world "$T/rb.json" $RUN --scheme baseline
ok "run baseline, weight.recon=fp32" world "$T/rb32.json" $RUN --scheme baseline --set weight.recon=fp32
ok "a bf16 weight wire ignores weight.recon" cmp "$T/rb.json" "$T/rb32.json"
ok "run qwd (weight.recon=bf16)" world "$T/rq.json" $RUN --scheme qwd
ok "run qwd, weight.recon=fp32" world "$T/rq32.json" $RUN --scheme qwd --set weight.recon=fp32
ok "qwd: the two reconstructions give other weights, the same gradients" python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert "weight.recon=bf16" in a["scheme"]["canonical"] and "weight.recon=fp32" in b["scheme"]["canonical"]
for x, y in zip(a["steps"], b["steps"]):
    assert x["replicas_identical"] and y["replicas_identical"], (x, y)
    assert x["weight"]["rel_l2"] != y["weight"]["rel_l2"], (x["weight"], y["weight"])
assert a["steps"][0]["grad"] == b["steps"][0]["grad"], (a["steps"][0]["grad"], b["steps"][0]["grad"])' "$T/rq.json" "$T/rq32.json"
expect_fail_with 2 "weight.recon=fp16: unknown value (bf16, fp32)" "$SHARDQ" world --set weight.recon=fp16
ok "run without --json prints a table" sh -c '"$0" world --workers 2x2 --elements 5000 --run --steps 1 >"$1/run.txt"' "$SHARDQ" "$T"
ok "the table has the step and identical replicas" grep -q "replicas identical" "$T/run.txt"

# ---------------------------------------------------------------------------
# Models smaller than a shard: every shard pads to whole groups, so a shard
# can be larger than the model (1000 elements, 8 shards of 2048); --run once
# wrote past its buffers there. Every preset, and sizes around the groups.
# ---------------------------------------------------------------------------

small_runs=
for p in $PRESETS; do
  ok "--run $p, 2x4, 1000 elements (a shard larger than the model)" \
    world "$T/small-$p.json" --workers 2x4 --scheme $p --elements 1000 --run --steps 2 --json
  small_runs="$small_runs $T/small-$p.json"
done
for shape in 2x4:2047 2x4:1 3x2:1 3x2:127 3x2:129 3x2:1000 1x2:1 1x2:2049 2x1:999; do
  ok "--run sdp4bit, ${shape%%:*}, ${shape#*:} elements" world "$T/small-$shape.json" \
    --workers ${shape%%:*} --scheme sdp4bit --elements ${shape#*:} --run --steps 2 --json
  small_runs="$small_runs $T/small-$shape.json"
done
pyrun "small models: two steps each, replicas identical, every element counted" '
for f in sys.argv[1:]:
    d = json.load(open(f))
    n, st = d["elements"], d["steps"]
    assert d["shard"] * d["topology"]["workers"] == d["padded"] >= n, (f, d["padded"], n)
    assert [s["step"] for s in st] == [1, 2], (f, st)
    for s in st:
        assert s["replicas_identical"] is True, (f, s)
        assert s["grad"]["n"] == n and s["weight"]["n"] == n, (f, s)
        assert all(math.isfinite(s[k]["rel_l2"]) for k in ("grad", "weight")), (f, s)' $small_runs

# ---------------------------------------------------------------------------
# PowerSGD: --shape is the matrix (768 x 3072), else the flat buffer's view
# (ceil(sqrt(n)) columns: 1536 x 1536); a 1-D shape is not compressed
# ---------------------------------------------------------------------------

ok "powersgd --shape 768,3072" world "$T/psgd-shape.json" --workers 2x4 --scheme powersgd --shape 768,3072 --json
ok "powersgd --elements 2359296" world "$T/psgd-flat.json" --workers 2x4 --scheme powersgd --elements 2359296 --json
ok "powersgd --shape 5000" world "$T/psgd-1d.json" --workers 2x4 --scheme powersgd --shape 5000 --json
pyrun "powersgd: two ring all-reduces of (rows + cols) fp32 values, 1-D on the ring" '
for f, rows, cols in ((sys.argv[1], 768, 3072), (sys.argv[2], 1536, 1536)):
    d = json.load(open(f))
    g = d["traffic"]["grad_reducescatter"]
    assert d["grad_path"] == "powersgd", d["grad_path"]
    sent = g["intra"]["sent_codes"] + g["inter"]["sent_codes"]
    assert sent == 2 * 7 * (rows + cols) * 4, (f, sent)
    assert g["intra"]["real_elements"] + g["inter"]["real_elements"] == 7 * rows * cols
    assert abs(g["inter"]["bits_per_param"] - 64.0 * (rows + cols) / (rows * cols)) < 1e-9
d = json.load(open(sys.argv[3]))
assert d["grad_path"] == "ring", d["grad_path"]' "$T/psgd-shape.json" "$T/psgd-flat.json" "$T/psgd-1d.json"

# ---------------------------------------------------------------------------
# Degenerate topologies
# ---------------------------------------------------------------------------

ok "1x4 runs" world "$T/k1.json" --workers 1x4 --scheme sdp4bit --elements 100000 --json
pyjson "1x4: a2a over the intra wire, no inter-node bytes" "$T/k1.json" '
assert d["grad_path"] == "a2a", d["grad_path"]
t = d["traffic"]
assert t["grad_reducescatter"]["inter"]["sent_bytes"] == 0, t["grad_reducescatter"]
assert t["weight_allgather"]["inter"]["sent_bytes"] == 0, t["weight_allgather"]
assert t["grad_reducescatter"]["intra"]["sent_bytes"] > 0, t["grad_reducescatter"]
assert abs(t["grad_reducescatter"]["intra"]["bits_per_element"] - 8.25) < 1e-6, t["grad_reducescatter"]'
ok "4x1 runs" world "$T/g1.json" --workers 4x1 --scheme sdp4bit --elements 100000 --json
pyjson "4x1: a2a over the inter wire, no intra-node bytes" "$T/g1.json" '
assert d["grad_path"] == "a2a", d["grad_path"]
t = d["traffic"]
assert t["grad_reducescatter"]["intra"]["sent_bytes"] == 0, t["grad_reducescatter"]
assert t["weight_allgather"]["intra"]["sent_bytes"] == 0, t["weight_allgather"]
assert t["grad_reducescatter"]["inter"]["sent_bytes"] > 0, t["grad_reducescatter"]
assert abs(t["grad_reducescatter"]["inter"]["bits_per_element"] - 4.25) < 1e-6, t["grad_reducescatter"]'
ok "1x1 runs" world "$T/n1.json" --workers 1x1 --scheme sdp4bit --elements 100000 --json
pyjson "1x1: no communication at all" "$T/n1.json" '
assert d["grad_path"] == "none", d["grad_path"]
for c, x in d["traffic"].items():
    for l, y in x.items():
        assert all(v == 0 for v in y.values()), (c, l, y)
assert len(d["per_worker"]) == 1'
ok "1x1 --run" world "$T/n1run.json" --workers 1x1 --scheme sdp4bit --elements 1000 --run --steps 1 --json
pyjson "1x1 --run: nothing quantized, nothing sent" "$T/n1run.json" '
s = d["steps"][0]
assert s["replicas_identical"] is True and s["grad"]["rel_l2"] == 0, s
assert all(v == 0 for x in d["traffic"].values() for y in x.values() for v in y.values()), d["traffic"]'

# ---------------------------------------------------------------------------
# Usage errors (2) and a device that is not there (1)
# ---------------------------------------------------------------------------

expect_fail_with 2 "--workers: '4'" "$SHARDQ" world --workers 4
expect_fail_with 2 "unknown scheme 'nope'" "$SHARDQ" world --scheme nope
expect_fail_with 2 "unknown knob 'grad.foo'" "$SHARDQ" world --set grad.foo=1
expect_fail_with 2 "weight.bits=9" "$SHARDQ" world --set weight.bits=9
expect_fail_with 2 "grad.round=up" "$SHARDQ" world --set grad.round=up
expect_fail_with 2 "grad.mode=ring" "$SHARDQ" world --scheme baseline --set grad.bits=4
expect_fail_with 2 "--elements" "$SHARDQ" world --elements 0
expect_fail_with 2 "'abc'" "$SHARDQ" world --elements abc
expect_fail_with 2 "--frobnicate" "$SHARDQ" world --frobnicate
expect_fail_with 2 "unexpected argument 'extra'" "$SHARDQ" world extra
expect_fail_with 2 "--frobnicate" "$SHARDQ" schemes --frobnicate
# counts that would wrap 64 bits (and once printed small, wrong numbers)
expect_fail_with 2 "overflow the 64-bit traffic counters" "$SHARDQ" world --workers 2x2048 \
  --elements 1125899906842624 --scheme zeropp --set grad.group=1
expect_fail_with 2 "overflow the 64-bit traffic counters" "$SHARDQ" world --workers 4096x1 \
  --elements 1125899906842624 --scheme baseline
# per-tensor schemes: the model is one tensor (--shape, default 1-D), its rules
# resolved for it (DeepSpeed: qgZ groups of numel / max(rows, cols, N), qwZ blocks)
ok "world zeropp8 --shape 768,3072 on 2x4" world "$T/zpp8.txt" --workers 2x4 --scheme zeropp8 \
  --shape 768,3072
ok "  qgZ groups of 768, fp16 sums, qwZ blocks of 6144" sh -c 'grep -q "grad.intra.group=768," "$0" &&
  grep -q "grad.dtype=fp16" "$0" && grep -q "weight.group=6144," "$0" && grep -q "path twolevel" "$0"' "$T/zpp8.txt"
ok "world zeropp8, 1-D: the gradients take the fp32 ring" world "$T/zpp8-1d.txt" --workers 2x4 \
  --scheme zeropp8 --elements 4096
ok "  path ring, fp32" sh -c 'grep -q "path ring" "$0" && grep -q "grad.intra.bits=32" "$0"' "$T/zpp8-1d.txt"
expect_fail_with 2 "no qgZ group" "$SHARDQ" world --workers 2x4 --scheme qgz --set grad.fallback=none \
  --elements 4096
expect_fail_with 2 "--shape" "$SHARDQ" world --workers 2x4 --scheme qgz --shape 4,0
# error feedback: the residual's memory (dry or not), its state at every step,
# the bytes on the wire unchanged
ok "world --run with error feedback" world "$T/ef.json" --workers 2x4 --scheme tlqhs --set grad.ef=1 \
  --elements 100000 --run --steps 3 --json
ok "the same dry" world "$T/ef-dry.json" --workers 2x4 --scheme tlqhs --set grad.ef=1 --elements 100000 --json
ok "and without it" world "$T/noef.json" --workers 2x4 --scheme tlqhs --elements 100000 --run --steps 3 --json
pyjson "error feedback: residual bytes per worker, ef_residual per step, the same traffic" "$T/ef.json" '
n = json.load(open("'"$T/noef.json"'")); dry = json.load(open("'"$T/ef-dry.json"'"))
P = d["padded"]
assert d["residual_bytes_per_worker"] == dry["residual_bytes_per_worker"] == 4 * (P + P // 4), d
assert "residual_bytes_per_worker" not in n and all("ef_residual" not in s for s in n["steps"])
e = [s["ef_residual"] for s in d["steps"]]
assert len(e) == 3 and all(0.1 < x < 0.5 for x in e), e
assert d["traffic"] == n["traffic"], "EF changes no byte count"
assert "grad.intra.ef=1" in d["scheme"]["canonical"] and ".ef=" not in n["scheme"]["canonical"]'
ok "the text says it" sh -c '"$0" world --workers 2x4 --scheme tlqhs --set grad.ef=1 --elements 100000 --run --steps 1 |
  grep -q "error feedback: residual/gradient 0\.[0-9]"' "$SHARDQ"
expect_fail_with 2 "grad.mode=ring" "$SHARDQ" world --workers 2x2 --scheme baseline --set grad.ef=1 --elements 1000

# buffers larger than the machine's memory: refused, not filled until killed
expect_fail_with 1 "GB of memory; use fewer elements or workers" "$SHARDQ" world --run \
  --workers 64x64 --elements 2147483648 --steps 1
if nvidia-smi -L >/dev/null 2>&1; then
  echo "# a GPU is present: the missing-device check is left out"
else
  expect_fail_with 1 "cuda" "$SHARDQ" world --workers 1x2 --elements 1000 --run --steps 1 --device cuda
fi

# Sparse and cast wires (docs/conventions.md): top-k with 8 of 256 kept
# sends keep (8 + 32) / 256 = 1.25 bits per element on each hop; an fp16
# cast 16. They run with data, the replicas identical.
ok "world with top-k gradient hops" "$SHARDQ" world --workers 2x4 --scheme ulq --set grad.kind=topk \
  --set grad.keep=8 --set grad.group=256 --elements 65536 --run --steps 2 --json
cp "$sq_tmp/out" "$T/topk.json"
pyjson "top-k: 1.25 bits per element on both hops, N(G-1)(P/G)/256*8 index bytes, 4x that of values" \
  "$T/topk.json" '
g = d["traffic"]["grad_reducescatter"]
for l in ("intra", "inter"):
    assert abs(g[l]["bits_per_element"] - 1.25) < 1e-9, (l, g[l])
assert g["intra"]["sent_codes"] == 8 * 3 * (65536 // 4) // 256 * 8, g["intra"]
assert g["intra"]["sent_meta"] == 4 * g["intra"]["sent_codes"], g["intra"]
assert "grad.intra.keep=8" in d["scheme"]["canonical"] and "weight.keep" not in d["scheme"]["canonical"]
assert len(d["steps"]) == 2 and all(s["replicas_identical"] for s in d["steps"]), d["steps"]'
ok "world with fp16 cast hops (a2a)" "$SHARDQ" world --workers 2x2 --scheme qsdp --set grad.kind=fp16 \
  --elements 10000 --run --steps 1 --json
cp "$sq_tmp/out" "$T/f16.json"
pyjson "fp16 cast: 16 bits per element, no metadata" "$T/f16.json" '
g = d["traffic"]["grad_reducescatter"]
for l in ("intra", "inter"):
    assert g[l]["bits_per_element"] == 16 and g[l]["sent_meta"] == 0, (l, g[l])'
expect_fail_with 2 "a topk, randk or fp16 wire needs grad.mode=a2a or twolevel" \
  "$SHARDQ" world --scheme baseline --set grad.kind=topk --set grad.keep=4
expect_fail_with 2 "the bf16 wire is grad.bits=16" "$SHARDQ" world --set grad.kind=bf16

# OpenMP's passive wait policy unless the user set one (libgomp shows its
# settings with OMP_DISPLAY_ENV=verbose; another OpenMP runtime skips this)
if OMP_DISPLAY_ENV=verbose "$SHARDQ" world --help 2>&1 | grep -q GOMP_SPINCOUNT; then
  ok "world runs with the passive wait policy" sh -c 'OMP_DISPLAY_ENV=verbose "$0" world --help 2>&1 |
    grep GOMP_SPINCOUNT | tail -1 | grep -q "'"'"'0'"'"'"' "$SHARDQ"
  ok "a policy the user set is kept" sh -c 'OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose "$0" world --help 2>&1 |
    grep -c "OMP_WAIT_POLICY = .ACTIVE." | grep -qx 1' "$SHARDQ"
fi
# Running itself again for that policy keeps the program's name (ps, pgrep
# and mpirun's reports show it): once the environment holds the policy, the
# process is called shardq, not "exe".
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$SHARDQ" world --run --elements 100003 --steps 100000 >/dev/null 2>&1 &
pid=$!
name=
for _ in $(seq 600); do   # a minute at most
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx OMP_WAIT_POLICY=passive; then
    name=$(cat "/proc/$pid/comm"); break
  fi
  sleep 0.1
done
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
ok "after running itself again with the passive policy the process is named shardq ($name)" test "$name" = shardq

finish
