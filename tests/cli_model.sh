# cli_model.sh -- `shardq model`: the built-in platforms and models, the
# tables and JSON it prints (phases that add up, speedups against the
# baseline, a GPU sweep), the validation against SDP4Bit's A100 rows (every
# speedup within 15%), a validation table with a wrong published figure
# failing, the quantization throughput from the command line and from a
# bench run in a database, stored predictions, and bad platform files.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
unset SHARDQ_DB

# --- options ----------------------------------------------------------------
ok "model --help" "$SHARDQ" model --help
cp "$sq_tmp/out" "$T/help.txt"
ok "the help names the options" sh -c 'for o in --platform --model --gpus --sweep-gpus --tp --pp \
  --micro-batch --accum --overlap --scheme --set --quant-gbs --quant-db --db --validate --list \
  --json --system --hpz --calibrate --platform-out; do grep -q -e "  $o" "$0" || { echo "no $o"; exit 1; }; done' "$T/help.txt"
ok "help lists model" sh -c '"$0" --help | grep -q "^  model "' "$SHARDQ"
ok "model --list" "$SHARDQ" model --list
cp "$sq_tmp/out" "$T/list.txt"
ok "--list names the platforms, models and tables" sh -c 'for w in a100-slingshot10 h800-ib400 \
  gpt-125m gpt-1.3b gpt-18b sdp4bit-a100; do grep -q "$w" "$0" || exit 1; done' "$T/list.txt"
expect_fail_with 2 "unknown option '--gpsu' (did you mean '--gpus'?)" "$SHARDQ" model --gpsu 8
expect_fail_with 2 "no built-in platform 'nope'" "$SHARDQ" model --platform nope
expect_fail_with 2 "no built-in model 'gpt-7b'" "$SHARDQ" model --model gpt-7b
expect_fail_with 2 "unknown scheme 'sdp3bit'" "$SHARDQ" model --scheme sdp3bit
expect_fail_with 2 "--tp: '0x' is not an unsigned integer" "$SHARDQ" model --tp 0x
expect_fail_with 2 "tensor parallelism 8 does not divide the 4 GPUs of a node" \
  "$SHARDQ" model --tp 8
expect_fail_with 2 "6 GPUs do not divide into tensor x pipeline groups of 4 x 1" \
  "$SHARDQ" model --gpus 6 --tp 4
expect_fail_with 2 "24 layers do not divide into 5 pipeline stages" \
  "$SHARDQ" model --gpus 80 --pp 5
expect_fail_with 2 "--gpus and --sweep-gpus: give one" "$SHARDQ" model --gpus 8 --sweep-gpus
expect_fail_with 2 "--quant-gbs and --quant-db: give one" \
  "$SHARDQ" model --quant-gbs 100 --quant-db "$T/x.db"
expect_fail_with 2 "unexpected argument 'x'" "$SHARDQ" model x

# --- one prediction ---------------------------------------------------------
ok "model --json (defaults)" "$SHARDQ" model --json
cp "$sq_tmp/out" "$T/default.json"
pyjson "phases add up; baseline speedup 1; sdp4bit at 64 A100 above 2x; bytes fall" "$T/default.json" '
c = d["config"]
assert c["platform"] == "a100-slingshot10" and c["model"] == "GPT-1.3B", c
assert c["tp"] == 1 and c["pp"] == 1 and c["overlap"] is False
(p,) = d["points"]
assert p["gpus"] == 64 and p["dp"] == 64 and p["params"] == 1315819520, p
byname = {s["scheme"]: s for s in p["schemes"]}
assert len(byname) == 17, list(byname)
for s in p["schemes"] + [p["baseline"]]:
    parts = sum(s[k] for k in ("compute_s", "tp_s", "bubble_s", "weight_s", "grad_s", "quant_s", "optimizer_s"))
    assert abs(parts - s["iteration_s"]) < 1e-12 * s["iteration_s"], s
    assert abs(s["tflops_per_gpu"] - p["model_flops"] / (s["iteration_s"] * 64) / 1e12) < 1e-9, s
    assert abs(s["speedup"] - p["baseline"]["iteration_s"] / s["iteration_s"]) < 1e-12, s
b, q = byname["baseline"], byname["sdp4bit"]
assert b["speedup"] == 1 and b["quant_s"] == 0 and b["grad_path"] == "ring"
assert q["grad_path"] == "twolevel" and q["quant_s"] > 0
assert 2 < q["speedup"] < 3, q["speedup"]
# the kernels of each path: sdp4bit encodes and decodes on both, the
# baseline on neither; its weight bytes a part of all its bytes
assert q["quant_weight_s"] > 0 and q["quant_grad_s"] > 0 and b["quant_weight_s"] == 0
assert 0 < b["weight_inter_bytes_per_node"] < b["inter_bytes_per_node"], b
# bf16 + fp32 ring: 6 bytes per parameter, (p-1)/p of it through each node
assert abs(b["inter_bytes_per_node"] - 6 * 63 / 64 * 1315819520) < 1e-3 * b["inter_bytes_per_node"], b
assert q["inter_bytes_per_node"] < b["inter_bytes_per_node"] / 5
assert byname["qw"]["weight_s"] == byname["qwd"]["weight_s"] < b["weight_s"] / 3
'
ok "model (table)" "$SHARDQ" model --scheme baseline,sdp4bit
cp "$sq_tmp/out" "$T/table.txt"
ok "the table names the model, platform and both schemes" sh -c 'grep -q "^GPT-1.3B on a100-slingshot10: 64 GPUs" "$0" &&
  grep -q "^  baseline .* 1.00x" "$0" && grep -q "^  sdp4bit " "$0"' "$T/table.txt"

# --quant-gbs scales the kernel time; --overlap hides communication
"$SHARDQ" model --scheme sdp4bit --quant-gbs 300 --json >"$T/q300.json"
"$SHARDQ" model --scheme sdp4bit --overlap --json >"$T/overlap.json"
pyrun "--quant-gbs 300 doubles the kernel time of the platform's 600; --overlap lowers the iteration" '
a = [s for s in json.load(open(sys.argv[1]))["points"][0]["schemes"] if s["scheme"] == "sdp4bit"][0]
b, o = (json.load(open(f))["points"][0]["schemes"][0] for f in sys.argv[2:])
assert abs(b["quant_s"] - 2 * a["quant_s"]) < 1e-9 * b["quant_s"], (a["quant_s"], b["quant_s"])
assert o["iteration_s"] < a["iteration_s"] and o["grad_s"] < a["grad_s"], (o, a)
' "$T/default.json" "$T/q300.json" "$T/overlap.json"

# --set changes the listed schemes, never the baseline reference
"$SHARDQ" model --scheme tlq --set grad.inter.bits=2 --json >"$T/tlq2.json"
"$SHARDQ" model --scheme tlq --json >"$T/tlq4.json"
pyrun "--set grad.inter.bits=2 sends fewer bytes than 4 bits; the baseline is the same" '
a, b = (json.load(open(f))["points"][0] for f in sys.argv[1:])
assert a["schemes"][0]["inter_bytes_per_node"] < b["schemes"][0]["inter_bytes_per_node"]
assert a["baseline"] == b["baseline"]
' "$T/tlq2.json" "$T/tlq4.json"

# a top-k wire costs its closed form: keep (8 index bits + 32 value bits) /
# group = 1.25 bits per element on the gradient hops, against ulq's 4.25
"$SHARDQ" model --scheme ulq --set grad.kind=topk --set grad.keep=8 --set grad.group=256 \
  --json >"$T/topk.json"
"$SHARDQ" model --scheme ulq --json >"$T/ulq.json"
pyrun "--set grad.kind=topk: the gradient bytes scale by 1.25 / 4.25" '
a, b = (json.load(open(f))["points"][0]["schemes"][0] for f in sys.argv[1:])
ga = a["inter_bytes_per_node"] - a["weight_inter_bytes_per_node"]
gb = b["inter_bytes_per_node"] - b["weight_inter_bytes_per_node"]
assert abs(ga / gb - 1.25 / 4.25) < 1e-3, (ga, gb)
ia = a["intra_bytes_per_gpu"] - a["weight_intra_bytes_per_gpu"]
ib = b["intra_bytes_per_gpu"] - b["weight_intra_bytes_per_gpu"]
assert abs(ia / ib - 1.25 / 4.25) < 1e-3, (ia, ib)
' "$T/topk.json" "$T/ulq.json"

# --- a GPU sweep ------------------------------------------------------------
ok "model --sweep-gpus --json" "$SHARDQ" model --sweep-gpus --max-gpus 256 --tp 4 --model gpt-6.7b \
  --scheme qwd,sdp4bit --json
cp "$sq_tmp/out" "$T/sweep.json"
pyjson "sweep: 4 .. 256 GPUs, DP groups of one GPU per node, 4 groups per node" "$T/sweep.json" '
g = [p["gpus"] for p in d["points"]]
assert g == [4, 8, 16, 32, 64, 128, 256], g
for p in d["points"]:
    assert p["dp"] == p["gpus"] // 4 and p["groups_per_node"] == 4 and p["dp_per_node"] == 1, p
    assert p["baseline"]["tp_s"] > 0
one = d["points"][0]
assert one["dp"] == 1 and one["schemes"][1]["speedup"] == 1, one
assert all(p["schemes"][1]["speedup"] > 2 for p in d["points"][2:])
'
ok "model --sweep-gpus (table)" "$SHARDQ" model --sweep-gpus --max-gpus 64
cp "$sq_tmp/out" "$T/sweep.txt"
ok "the sweep table has one line per count" sh -c 'test "$(grep -c "^ *[0-9][0-9]* *[0-9.]*  .*x$" "$0")" -eq 5' "$T/sweep.txt"

# --- validation ---------------------------------------------------------------
ok "model --validate sdp4bit-a100" "$SHARDQ" model --validate sdp4bit-a100
cp "$sq_tmp/out" "$T/validate.txt"
ok "model --validate sdp4bit-a100 --json" "$SHARDQ" model --validate sdp4bit-a100 --json
cp "$sq_tmp/out" "$T/validate.json"
pyjson "every A100 row of SDP4Bit Table 2 within 15% on the speedup" "$T/validate.json" '
assert [r["label"] for r in d["rows"]] == ["GPT-1.3B", "GPT-2.7B", "GPT-6.7B", "GPT-13B", "GPT-18B"]
for r in d["rows"]:
    assert abs(r["speedup"] / r["paper_speedup"] - 1) <= 0.15, r
    assert r["within"] is True
    # and the TFLOP/s themselves within 15% of the paper
    assert abs(r["baseline_tflops"] / r["paper_baseline_tflops"] - 1) <= 0.15, r
    assert abs(r["scheme_tflops"] / r["paper_scheme_tflops"] - 1) <= 0.15, r
assert d["out_of_tolerance"] == 0 and d["worst_error"] <= 0.15
# the built-in platform took its compute rate and its communicator cap
# from the paper of these rows: every row is reported as fitted to itself
assert d["predicted"]["rows"] == 0 and d["fitted_to_itself"]["rows"] == 5, d
for r in d["rows"]:
    assert r["fitted_to_itself"] is True, r
    assert r["fitted_figures"] == "achieved_tflops, inter.communicator_gb_s", r
'
ok "the text reports the self-fitted rows apart, with the figures" sh -c '
  grep -q "predicted rows: 0" "$0" && grep -q "rows that used a figure fitted to themselves: 5" "$0" &&
  grep -q "inter.communicator_gb_s fitted to sdp4bit-a100 (every row)" "$0" &&
  test "$(grep -c "(fitted to itself)" "$0")" -eq 5' "$T/validate.txt"
# calibrated from the GPT-1.3B row alone, on datasheet figures: that row is
# fitted to itself, the other four are predicted, all within 15%
ok "--validate on the one-row calibration" "$SHARDQ" model --validate sdp4bit-a100 \
  --platform a100-slingshot10-fit1 --json
cp "$sq_tmp/out" "$T/fit1.json"
pyjson "fit1: GPT-1.3B fitted to itself, four rows predicted within 15%" "$T/fit1.json" '
fitted = [r["label"] for r in d["rows"] if r["fitted_to_itself"]]
assert fitted == ["GPT-1.3B"], fitted
assert d["rows"][0]["fitted_figures"] == "inter.nic_gb_s", d["rows"][0]
assert d["predicted"]["rows"] == 4 and d["predicted"]["out_of_tolerance"] == 0, d["predicted"]
assert abs(d["rows"][0]["baseline_tflops"] - 24.1) < 1e-6, d["rows"][0]
'
ok "fit1 is what --calibrate makes from its measurement file" "$SHARDQ" model --calibrate \
  "$SHARDQ_SRCDIR/experiments/calibration/sdp4bit-a100-1row.ini" \
  --platform a100-slingshot10-datasheet --platform-out "$T/a100-slingshot10-fit1.ini"
ok "the same figures and sources as the built-in file (the date aside)" sh -c '
  grep -v "^#" "$0" | sed "s/ ([0-9-]*)\$//" >"$0.a" && grep -v "^#" "$1" | sed "s/ ([0-9-]*)\$//" >"$0.b" &&
  diff "$0.a" "$0.b"' "$T/a100-slingshot10-fit1.ini" "$SHARDQ_SRCDIR/experiments/platforms/a100-slingshot10-fit1.ini"
# the datasheet alone over-predicts the baseline, and the speedups miss
expect_fail_with 1 "--validate sdp4bit-a100: 3 of 5 rows out of tolerance" \
  "$SHARDQ" model --validate sdp4bit-a100 --platform a100-slingshot10-datasheet
# the same table with one published speedup changed must fail
"$SHARDQ" model --list >/dev/null
sed 's/^speedup = 2.39$/speedup = 4.00/' "$SHARDQ_SRCDIR/experiments/validation/sdp4bit-a100.ini" \
  >"$T/wrong.ini"
expect_fail_with 1 "--validate $T/wrong.ini: 1 of 5 rows out of tolerance" \
  "$SHARDQ" model --validate "$T/wrong.ini"
cp "$sq_tmp/out" "$T/wrong.txt"
ok "the wrong row is marked OUT" grep -q "GPT-1.3B .* OUT" "$T/wrong.txt"

# --- files ------------------------------------------------------------------
cp "$SHARDQ_SRCDIR/experiments/platforms/a100-slingshot10.ini" "$T/mine.ini"
ok "a platform file by path" "$SHARDQ" model --platform "$T/mine.ini" --scheme sdp4bit
sed -e 's/^nic_gb_s = 12.5$/nic_gb_s = 25/' -e 's/^communicator_gb_s = 13.4$/communicator_gb_s = 0/' \
  "$T/mine.ini" >"$T/fast.ini"
"$SHARDQ" model --platform "$T/fast.ini" --scheme sdp4bit --json >"$T/fast.json"
"$SHARDQ" model --platform "$T/mine.ini" --scheme sdp4bit --json >"$T/mine.json"
pyrun "faster cards: a faster baseline and a smaller speedup" '
f, m = (json.load(open(x))["points"][0] for x in sys.argv[1:])
assert f["baseline"]["iteration_s"] < m["baseline"]["iteration_s"]
assert f["schemes"][0]["speedup"] < m["schemes"][0]["speedup"]
' "$T/fast.json" "$T/mine.json"
sed 's/^nic_gb_s = 12.5$/nic_gb_s = fast/' "$T/mine.ini" >"$T/bad1.ini"
expect_fail_with 2 "$T/bad1.ini: [inter] nic_gb_s: 'fast' is not a number" \
  "$SHARDQ" model --platform "$T/bad1.ini"
sed '/^hbm_gb_s/d' "$T/mine.ini" >"$T/bad2.ini"
expect_fail_with 2 "$T/bad2.ini: [platform] hbm_gb_s: missing" "$SHARDQ" model --platform "$T/bad2.ini"
sed 's/^nics_per_node = 2$/nics_per_node = 2\nnic_speed = 3/' "$T/mine.ini" >"$T/bad3.ini"
expect_fail_with 2 "$T/bad3.ini: [inter] nic_speed: unknown key" "$SHARDQ" model --platform "$T/bad3.ini"
sed 's/^efficiency = 0.9$/efficiency = 1.5/' "$T/mine.ini" >"$T/bad4.ini"
expect_fail_with 2 "$T/bad4.ini: [inter] efficiency: 1.5 is more than 1" \
  "$SHARDQ" model --platform "$T/bad4.ini"
sed 's/^gpus_per_node = 4$/gpus_per_node = -4/' "$T/mine.ini" >"$T/bad5.ini"
expect_fail_with 2 "$T/bad5.ini: [platform] gpus_per_node: '-4' is not a positive integer" \
  "$SHARDQ" model --platform "$T/bad5.ini"
head -c 100 "$T/mine.ini" >"$T/bad6.ini"
expect_fail_with 2 "$T/bad6.ini: [platform] name: missing" "$SHARDQ" model --platform "$T/bad6.ini"
printf '[model]\nname = x\nlayers = 2\nhidden = 30\nheads = 4\nvocab = 10\nseq = 8\n' >"$T/m.ini"
expect_fail_with 2 "model x: hidden 30 is not a multiple of heads 4" "$SHARDQ" model --model "$T/m.ini"
expect_fail_with 2 "$T/none.ini: cannot open: No such file or directory" \
  "$SHARDQ" model --platform "$T/none.ini"
printf 'a\0b' >"$T/bin.ini"
expect_fail_with 2 "$T/bin.ini: not a text file" "$SHARDQ" model --model "$T/bin.ini"

# --- calibration: the model recovers what made the measurements -------------
# A platform whose network is one 7.5 GB/s card and whose GPUs reach 120
# TFLOP/s makes "measured" baseline rows; calibrating a platform that says
# otherwise (2 x 50 GB/s cards at 90% behind a 20 GB/s communicator cap,
# 300 TFLOP/s) from them must find 7.5 GB/s, and 120 TFLOP/s from two rows on.
sed -e 's/^name = .*/name = truth/' -e 's/^nics_per_node = .*/nics_per_node = 1/' \
  -e 's/^nic_gb_s = .*/nic_gb_s = 7.5/' -e 's/^efficiency = .*/efficiency = 1/' \
  -e 's/^communicator_gb_s = .*/communicator_gb_s = 0/' \
  -e 's/^achieved_tflops = .*/achieved_tflops = 120/' \
  -e '/^\[sources\]/,$d' "$SHARDQ_SRCDIR/experiments/platforms/a100-slingshot10.ini" >"$T/truth.ini"
sed -e 's/^name = .*/name = start/' -e 's/^nic_gb_s = .*/nic_gb_s = 50/' \
  -e 's/^communicator_gb_s = .*/communicator_gb_s = 20/' \
  -e 's/^achieved_tflops = .*/achieved_tflops = 300/' "$T/truth.ini" >"$T/start.ini"
sed -i 's/^nics_per_node = .*/nics_per_node = 2/; s/^efficiency = .*/efficiency = 0.9/' "$T/start.ini"
sed 's/^achieved_tflops = .*/achieved_tflops = 120/' "$T/start.ini" >"$T/start120.ini"
: >"$T/rows3.ini"
for r in "a gpt-1.3b 1 1 64 1 64" "b gpt-2.7b 1 1 32 2 256" "c gpt-6.7b 4 2 64 1 64"; do
  set -- $r
  accum=$(( $7 / ($6 * $5 / ($3 * $4)) ))
  "$SHARDQ" model --platform "$T/truth.ini" --model "$2" --tp "$3" --pp "$4" --gpus "$5" \
    --micro-batch "$6" --accum "$accum" --scheme baseline --json >"$T/truth-$1.json"
  ms=$(python3 -c 'import json,sys; print(repr(1e3*json.load(open(sys.argv[1]))["points"][0]["baseline"]["iteration_s"]))' "$T/truth-$1.json")
  printf '[row %s]\nmodel = %s\ntp = %s\npp = %s\ngpus = %s\nmicro_batch = %s\nglobal_batch = %s\niteration_ms = %s\n\n' \
    "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$ms" >>"$T/rows3.ini"
done
sed -n '/^\[row a\]/,/^$/p' "$T/rows3.ini" >"$T/rows1.ini"
ok "--calibrate, one row" "$SHARDQ" model --calibrate "$T/rows1.ini" --platform "$T/start120.ini" \
  --platform-out "$T/cal1.ini" --json
cp "$sq_tmp/out" "$T/cal1.json"
pyjson "one row: the bandwidth is 7.5 GB/s, the row fits exactly" "$T/cal1.json" '
f = d["fitted"]
assert abs(f["inter_gb_s"] - 7.5) < 1e-6 * 7.5, f
assert f["achieved_tflops"] is None, f
(r,) = d["rows"]
assert abs(r["error"]) < 1e-9, r
'
ok "the calibrated platform predicts the row" "$SHARDQ" model --platform "$T/cal1.ini" \
  --model gpt-1.3b --gpus 64 --scheme baseline --json
cp "$sq_tmp/out" "$T/cal1-pred.json"
pyrun "the prediction on the calibrated file equals the truth" '
a = json.load(open(sys.argv[1]))["points"][0]["baseline"]["iteration_s"]
b = json.load(open(sys.argv[2]))["points"][0]["baseline"]["iteration_s"]
assert abs(a - b) < 1e-8 * b, (a, b)
' "$T/cal1-pred.json" "$T/truth-a.json"
ok "the calibrated file says the bandwidth was fitted, to which rows" \
  grep -q "^inter.nic_gb_s = fitted $T/rows1.ini a:" "$T/cal1.ini"
ok "--calibrate, three rows (text)" "$SHARDQ" model --calibrate "$T/rows3.ini" \
  --platform "$T/start.ini" --platform-out "$T/cal3.ini"
cp "$sq_tmp/out" "$T/cal3.txt"
ok "it prints what it fitted" sh -c 'grep -q "inter-node bandwidth 7.5 GB/s per node" "$0" &&
  grep -q "achieved compute   120 TFLOP/s per GPU (the platform said 300)" "$0" &&
  grep -q "wrote $1" "$0"' "$T/cal3.txt" "$T/cal3.ini"
ok "--calibrate, three rows (JSON)" "$SHARDQ" model --calibrate "$T/rows3.ini" \
  --platform "$T/start.ini" --platform-out "$T/cal3.ini" --json
cp "$sq_tmp/out" "$T/cal3.json"
pyjson "three rows: 7.5 GB/s and 120 TFLOP/s, every row fits" "$T/cal3.json" '
f = d["fitted"]
assert abs(f["inter_gb_s"] - 7.5) < 1e-6 * 7.5 and abs(f["achieved_tflops"] - 120) < 1e-6 * 120, f
assert len(d["rows"]) == 3 and all(abs(r["error"]) < 1e-8 for r in d["rows"]), d["rows"]
'
ok "the file marks both figures fitted to the three rows" sh -c '
  grep -q "^achieved_tflops = fitted $1 a,b,c:" "$0" &&
  grep -q "^inter.nic_gb_s = fitted $1 a,b,c:" "$0"' "$T/cal3.ini" "$T/rows3.ini"
# refusals: a row faster than the hardware allows, and bad rows
sed 's/^iteration_ms = .*/iteration_ms = 50/' "$T/rows1.ini" >"$T/fast1.ini"
expect_fail_with 1 "$T/fast1.ini: [row a] iteration_ms: 50 is faster than the platform start allows" \
  "$SHARDQ" model --calibrate "$T/fast1.ini" --platform "$T/start120.ini" --platform-out "$T/x.ini"
ok "a refused calibration writes no file" test ! -e "$T/x.ini"
sed -e 's/^nic_gb_s = .*/nic_gb_s = 2/' -e 's/^nics_per_node = .*/nics_per_node = 1/' \
  "$T/start.ini" >"$T/slow.ini"
expect_fail_with 1 "is faster than the hardware allows: the fit needs 7.5 GB/s through a node's network, more than the 2 GB/s line rate" \
  "$SHARDQ" model --calibrate "$T/rows3.ini" --platform "$T/slow.ini" --platform-out "$T/x.ini"
sed '/^global_batch/d' "$T/rows1.ini" >"$T/miss.ini"
expect_fail_with 2 "$T/miss.ini: [row a] global_batch: missing" \
  "$SHARDQ" model --calibrate "$T/miss.ini" --platform-out "$T/x.ini"
printf 'tflops = 20\n' >>"$T/fast1.ini"
expect_fail_with 2 "$T/fast1.ini: [row a] iteration_ms, tflops: give exactly one" \
  "$SHARDQ" model --calibrate "$T/fast1.ini" --platform-out "$T/x.ini"
sed 's/^global_batch = .*/global_batch = 65/' "$T/rows1.ini" >"$T/gb.ini"
expect_fail_with 2 "$T/gb.ini: [row a] global_batch: 65 is not a multiple of micro_batch x data-parallel degree = 1 x 64" \
  "$SHARDQ" model --calibrate "$T/gb.ini" --platform-out "$T/x.ini"
sed 's/^iteration_ms = .*/iteration_ms = fast/' "$T/rows1.ini" >"$T/nan.ini"
expect_fail_with 2 "$T/nan.ini: [row a] iteration_ms: 'fast' is not a number" \
  "$SHARDQ" model --calibrate "$T/nan.ini" --platform-out "$T/x.ini"
expect_fail_with 2 "--calibrate: give --platform-out FILE" "$SHARDQ" model --calibrate "$T/rows1.ini"
expect_fail_with 2 "--platform-out: only with --calibrate FILE" "$SHARDQ" model --platform-out "$T/x.ini"
expect_fail_with 2 "--hpz: hpZ is a ZeRO-3 partition: give --system zero3" "$SHARDQ" model --hpz
expect_fail_with 2 "--system: 'zero2' is not megatron or zero3" "$SHARDQ" model --system zero2
# ZeRO-3 gathers the weights twice a micro-batch; hpZ keeps the second inside the node
for f in mega:--system=megatron z3:--system=zero3 hpz:--system=zero3\ --hpz; do
  "$SHARDQ" model --gpus 16 ${f#*:} --scheme zeropp8 --json >"$T/sys-${f%%:*}.json"
done
pyrun "zero3: twice Megatron's weight bytes; hpZ: the forward's alone across nodes, faster" '
m, z, h = (json.load(open(x))["points"][0] for x in sys.argv[1:])
assert json.load(open(sys.argv[2]))["config"]["system"] == "zero3"
mb, zb = m["schemes"][0], z["schemes"][0]
assert zb["weight_inter_bytes_per_node"] == 2 * mb["weight_inter_bytes_per_node"], (zb, mb)
hb = h["schemes"][0]
assert hb["weight_inter_bytes_per_node"] == mb["weight_inter_bytes_per_node"], hb
assert hb["iteration_s"] < zb["iteration_s"]
# the baseline of zero3 is plain ZeRO-3 with bf16 gradients, hpZ or not
assert z["baseline"]["iteration_s"] == h["baseline"]["iteration_s"]
assert z["baseline"]["inter_bytes_per_node"] < 2 * m["baseline"]["inter_bytes_per_node"]
' "$T/sys-mega.json" "$T/sys-z3.json" "$T/sys-hpz.json"

# --- the database -------------------------------------------------------------
ok "model --sweep-gpus --db" "$SHARDQ" model --sweep-gpus --max-gpus 32 --scheme qwd,sdp4bit \
  --db "$T/m.db"
cp "$sq_tmp/out" "$T/stored.txt"
ok "says where it stored" grep -q "stored in $T/m.db" "$T/stored.txt"
pyrun "stored: one model run, baseline + 2 schemes x 4 GPU counts, speedup 1 for baseline" '
c = sqlite3.connect(sys.argv[1])
(kind, status, cfg), = c.execute("SELECT kind, status, config FROM runs").fetchall()
assert kind == "model" and status == "done" and json.loads(cfg)["platform"] == "a100-slingshot10"
rows = c.execute("SELECT scheme, gpus, speedup, iteration_s FROM model_results ORDER BY gpus, scheme").fetchall()
assert len(rows) == 12, rows
assert sorted({r[1] for r in rows}) == [4, 8, 16, 32]
assert all(r[2] == 1 for r in rows if r[0] == "baseline")
p = dict(c.execute("SELECT key, value FROM params").fetchall())
assert p["platform"] == "a100-slingshot10" and p["tp"] == "1", p
' "$T/m.db"

# --quant-db: the newest bench run's quantize/dequantize rows at its largest size
sqlite3 "$T/m.db" "INSERT INTO runs(kind, status, config, seed, version, host, pid, started, device)
  VALUES ('bench', 'done', '{}', 0, 'x', 'h', 1, '2026-01-01T00:00:00.000Z', 'cuda:0');
  INSERT INTO bench_results SELECT max(id), 'quantize', 0, 1000, 4500, 100, NULL, 400 FROM runs;
  INSERT INTO bench_results SELECT max(id), 'quantize', 0, 4000000, 18000000, 500, NULL, 1000 FROM runs;
  INSERT INTO bench_results SELECT max(id), 'dequantize', 0, 4000000, 18000000, 700, NULL, 1000 FROM runs;"
ok "--quant-db" "$SHARDQ" model --scheme sdp4bit --quant-db "$T/m.db" --json
cp "$sq_tmp/out" "$T/qdb.json"
pyjson "--quant-db: 600 GB/s (mean of 500 and 700 at 4M elements), named" "$T/qdb.json" '
assert d["config"]["quant_gb_s"] == 600, d["config"]
assert "bench run" in d["quant_source"] and "cuda:0" in d["quant_source"], d["quant_source"]
'
expect_fail_with 1 "$T/empty.db: no such database" "$SHARDQ" model --quant-db "$T/empty.db"
"$SHARDQ" db init --db "$T/fresh.db" >/dev/null 2>&1 || sqlite3 "$T/fresh.db" "PRAGMA user_version=3"
"$SHARDQ" model --scheme sdp4bit --db "$T/fresh.db" >/dev/null
expect_fail_with 1 "no finished bench run with quantize or dequantize rows" \
  "$SHARDQ" model --quant-db "$T/fresh.db"
mkdir -p "$T/ro" && cp "$T/m.db" "$T/ro/ro.db" && chmod 0444 "$T/ro/ro.db" && chmod 0555 "$T/ro"
chmod o+rx "$T" "$T/.." 2>/dev/null
before=$(sqlite3 "$T/ro/ro.db" "SELECT count(*) FROM model_results")
expect_fail_with 1 "$T/ro/ro.db" ro_run "$SHARDQ" model --db "$T/ro/ro.db"
ok "the read-only database keeps its rows" \
  test "$(sqlite3 "$T/ro/ro.db" "SELECT count(*) FROM model_results")" = "$before"
chmod 0755 "$T/ro"

finish
