#!/bin/bash
# mpi-namespaces.sh -- the measured experiment of docs/real-ranks.md:
# 2 nodes x 4 ranks in network namespaces on this machine, the inter-node
# link shaped with tc, and on it
#   1. shardq netbench: the links' bus bandwidth and latency, written as a
#      platform file for the cost model;
#   2. the default GPT trained under baseline, qwd, tlqhs and sdp4bit, one
#      worker per rank over MPI: the measured step time of each scheme;
#   3. the default GPT's baseline trace (captured in process first, as the
#      demo captures it) replayed under the same schemes;
# then `shardq model` on the netbench platform predicts each scheme's step,
# and a table puts the measured step times and speedups beside the
# predictions. Needs root (namespaces), iproute2 and Open MPI.
#
# The measured step is what a rank of the job spends per optimizer step in
# its own forward and backward pass, the two collectives (their measured
# wall time, the slowest rank's) and its AdamW on its shard; the broadcasts
# that keep every rank's statistics in step (docs/real-ranks.md) are left out, as they
# are no part of a training step of the real systems. The model's compute
# rate and quantization throughput are the only figures netbench cannot
# measure: they are fitted to the baseline run (its per-rank GFLOP/s) and
# to `shardq bench` on this machine (divided among the ranks that share
# its cores), and the file says so.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
usage() {
  cat <<'USAGE'
usage: experiments/mpi-namespaces.sh [--out DIR] [--steps N] [--rate R] [--delay D]
                                     [--trace-steps N] [--schemes LIST]

  --out DIR        where everything goes (default mpi-namespaces)
  --steps N        optimizer steps of each training run (default 40)
  --trace-steps N  steps of the captured baseline trace (default 40, every
                   tenth step captured)
  --rate R         inter-node link rate, tc syntax (default 1gbit)
  --delay D        one-way delay per node (default: the cluster's, 0.1ms where the
                   kernel has netem, else none with a warning)
  --schemes LIST   comma-separated presets (default baseline,qwd,tlqhs,sdp4bit)
  --table-only     print the table of the results already in --out, measure nothing

SHARDQ names the shardq binary (default: src/shardq beside this script's
directory, else shardq on PATH).
USAGE
}
out=mpi-namespaces steps=40 tsteps=40 rate=1gbit delay= schemes=baseline,qwd,tlqhs,sdp4bit
table_only=
while test $# -gt 0; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --trace-steps) tsteps=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --schemes) schemes=$2; shift 2 ;;
    --table-only) table_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "mpi-namespaces.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
if test -z "${SHARDQ:-}"; then
  if test -x "$here/../src/shardq"; then SHARDQ=$here/../src/shardq; else SHARDQ=$(command -v shardq); fi
fi
SHARDQ=$(cd "$(dirname "$SHARDQ")" && pwd)/$(basename "$SHARDQ")
cluster=$here/netns-cluster.sh
test "$(id -u)" -eq 0 || { echo "mpi-namespaces.sh: needs root (network namespaces)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
db=$out/runs.db
IFS=, read -r -a list <<<"$schemes"
train_args=(--workers 2x4 --steps "$steps" --eval-every 0 --eval-seqs 8 --db "$db" --json)

if test -z "$table_only"; then
echo "== $(date +%T) the baseline trace, in process ($tsteps steps)"
if ! test -f "$out/trace/manifest.json"; then
  "$SHARDQ" train -q --scheme baseline --steps "$tsteps" --capture "$out/trace" \
    --capture-every $(((tsteps + 9) / 10)) --no-db
fi

echo "== $(date +%T) the quantizers' throughput on this machine (shardq bench)"
"$SHARDQ" bench --json --threads 1 --sizes 16 --ops quantize,dequantize >"$out/bench.json"

echo "== $(date +%T) the cluster: 2 nodes x 4 ranks, inter-node $rate${delay:+, $delay each way}"
dir=$("$cluster" --nodes 2 --slots 4 --rate "$rate" ${delay:+--delay "$delay"} up)
trap '"$cluster" --dir "$dir" down' EXIT
trap 'exit 130' INT TERM
run() { "$cluster" --dir "$dir" run --timeout 900 -- "$@"; }

for s in "${list[@]}"; do
  echo "== train $s on 8 ranks"
  run mpirun -np 8 "$SHARDQ" train --scheme "$s" "${train_args[@]}" >"$out/train-$s.json"
done

# the compute rate of a rank, fitted so that the model's compute time of a
# step (its FLOPs of the shape, over 8 ranks) is the baseline run's measured
# one; the quantizers' throughput: one core's, shared by 8 ranks on 2 cores
"$SHARDQ" model --model shardq-gpt --gpus 8 --micro-batch 2 --scheme baseline --json \
  >"$out/flops.json"
read -r tflops qgbs < <(python3 - "$out/train-${list[0]}.json" "$out/bench.json" "$out/flops.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
flops = json.load(open(sys.argv[3]))["points"][0]["model_flops"] / 8
compute_s = t["time"]["compute"] / t["steps"]
print("%.6g" % (flops / compute_s / 1e12), end=" ")
# one JSON object per line; the default codec's quantize and dequantize
rows = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
rates = [r["gbps"] for r in rows if r.get("op") in ("quantize", "dequantize")]
rate = sum(rates) / len(rates)
print("%.6g" % (rate * 2 / 8))
PY
)
echo "== $(date +%T) netbench on 8 ranks (compute rate fitted: $tflops TFLOP/s per rank; quantizers $qgbs GB/s per rank)"
run mpirun -np 8 "$SHARDQ" netbench --workers 2x4 --max-bytes 16M --db "$db" \
  --platform-out "$out/netbench.ini" --name netns-$rate --achieved-tflops "$tflops" \
  --quant-gbs "$qgbs" >"$out/netbench.txt"

for s in "${list[@]}"; do
  echo "== replay the trace under $s on 8 ranks"
  run mpirun -np 8 "$SHARDQ" replay --workers 2x4 --scheme "$s" --db "$db" --json "$out/trace" \
    >"$out/replay-$s.json"
done
"$cluster" --dir "$dir" down
trap - EXIT

echo "== $(date +%T) the cost model on the netbench platform"
"$SHARDQ" model --platform "$out/netbench.ini" --model shardq-gpt --gpus 8 --micro-batch 2 \
  --scheme "$schemes" --json >"$out/model.json"

# The same platform with its network calibrated from the baseline's measured
# step alone (one row: the inter-node rate is fitted, docs/cost-model.md),
# so the baseline is fitted to itself and every other scheme is predicted.
python3 - "$out/train-${list[0]}.json" >"$out/measured.ini" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
c, n = t["collectives"], t["steps"]
ms = 1e3 * (t["time"]["compute"] + t["time"]["optimizer"]
            + c["grad_reducescatter"]["seconds"] + c["weight_allgather"]["seconds"]) / n
print("[row %s]\nmodel = shardq-gpt\ntp = 1\npp = 1\ngpus = 8\nmicro_batch = 2\n"
      "global_batch = 16\niteration_ms = %.3f" % (t["preset"], ms))
PY
# The fit is refused when the baseline ran faster than the measured network
# allows (netbench's rate is then below what the training reached): the
# table says so instead of a calibrated column.
rm -f "$out/model-calibrated.json"
if "$SHARDQ" model --calibrate "$out/measured.ini" --platform "$out/netbench.ini" \
     --platform-out "$out/calibrated.ini" >"$out/calibrate.txt" 2>&1; then
  "$SHARDQ" model --platform "$out/calibrated.ini" --model shardq-gpt --gpus 8 --micro-batch 2 \
    --scheme "$schemes" --json >"$out/model-calibrated.json"
else
  echo "calibration refused: $(cat "$out/calibrate.txt")" >&2
fi

fi

python3 - "$out" "${list[@]}" <<'PY' | tee "$out/table.md"
# Per optimizer step, in ms. The compute of a step is the same work under
# every scheme, but 8 ranks share 2 cores here and a rank's compute time
# swings with what the others do, so the step speedup is also given at the
# schemes' common compute (their mean): the part a scheme changes is the
# collectives (and the quantization inside them).
import json, sys
out, schemes = sys.argv[1], sys.argv[2:]
def predictions(name):
    model = json.load(open(out + "/" + name))
    return {r["scheme"]: r for r in model["points"][0]["schemes"]}
pred = predictions("model.json")
try:
    fit = predictions("model-calibrated.json")
except FileNotFoundError:  # the calibration refused the baseline's row
    fit = None
runs = {}
for s in schemes:
    t = json.load(open("%s/train-%s.json" % (out, s)))
    c, n = t["collectives"], t["steps"]
    comm = 1e3 * (c["grad_reducescatter"]["seconds"] + c["weight_allgather"]["seconds"]) / n
    runs[s] = (1e3 * t["time"]["compute"] / n, 1e3 * t["time"]["optimizer"] / n, comm, t)
common = sum(r[0] for r in runs.values()) / len(runs)
def replay_ms(s):
    r = json.load(open("%s/replay-%s.json" % (out, s)))
    c = r["collectives"]
    n = max(c["grad_reducescatter"]["calls"], 1)
    return 1e3 * (c["grad_reducescatter"]["seconds"] + c["weight_allgather"]["seconds"]) / n
b = schemes[0]
bstep = runs[b][0] + runs[b][1] + runs[b][2]
bcommon = common + runs[b][1] + runs[b][2]
pb = pred[b]
pcomm = lambda p: 1e3 * (p["weight_s"] + p["grad_s"] + p["quant_s"])
print("| scheme | compute | collectives | step | speedup | at common compute "
      "| netbench platform: collectives, step, speedup, error "
      "| calibrated: collectives, step, speedup, error | replay collectives | final loss |")
print("|---|---|---|---|---|---|---|---|---|---|")
fb = fit[b] if fit else None
for s in schemes:
    comp, opt, comm, t = runs[s]
    step = comp + opt + comm
    measured = bcommon / (common + opt + comm)
    cols = []
    for p, p0 in ((pred[s], pb), (fit[s] if fit else None, fb)):
        if p is None:
            cols.append("refused (calibrate.txt)")
            continue
        sp = p0["iteration_s"] / p["iteration_s"]
        err = "fitted to itself" if (s == b and p is not pred[s]) else "%+.1f%%" % (100 * (sp / measured - 1))
        cols.append("%.0f, %.0f, %.2fx, %s" % (pcomm(p), 1e3 * p["iteration_s"], sp, err))
    print("| %s | %.0f | %.0f | %.0f | %.2fx | %.2fx | %s | %s | %.0f | %.4f |" % (
        s, comp, comm, step, bstep / step, measured, cols[0], cols[1], replay_ms(s),
        t["final_loss"]))
PY
echo "everything is in $out (the runs in $db)"
