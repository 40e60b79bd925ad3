#!/bin/bash
# mpi-namespaces.sh -- the measured experiment of README "Real ranks: MPI":
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
# that keep every rank's statistics in step (README) are left out, as they
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

SHARDQ names the shardq binary (default: src/shardq beside this script's
directory, else shardq on PATH).
USAGE
}
out=mpi-namespaces steps=40 tsteps=40 rate=1gbit delay= schemes=baseline,qwd,tlqhs,sdp4bit
while test $# -gt 0; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --trace-steps) tsteps=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --schemes) schemes=$2; shift 2 ;;
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

python3 - "$out" "${list[@]}" <<'PY' | tee "$out/table.md"
import json, sys
out, schemes = sys.argv[1], sys.argv[2:]
model = json.load(open(out + "/model.json"))
pred = {r["scheme"]: 1e3 * r["iteration_s"] for r in model["points"][0]["schemes"]}
def step_ms(s):
    t = json.load(open("%s/train-%s.json" % (out, s)))
    c = t["collectives"]
    secs = (t["time"]["compute"] + t["time"]["optimizer"] + c["grad_reducescatter"]["seconds"]
            + c["weight_allgather"]["seconds"])
    return 1e3 * secs / t["steps"], t
def replay_ms(s):
    r = json.load(open("%s/replay-%s.json" % (out, s)))
    c = r["collectives"]
    n = max(c["grad_reducescatter"]["calls"], 1)
    return 1e3 * (c["grad_reducescatter"]["seconds"] + c["weight_allgather"]["seconds"]) / n
base, _ = step_ms(schemes[0])
pbase = pred.get(schemes[0])
print("| scheme | measured step (ms) | measured speedup | predicted step (ms) | predicted speedup | replay: collectives per step (ms) | final loss |")
print("|---|---|---|---|---|---|---|")
for s in schemes:
    m, t = step_ms(s)
    p = pred.get(s)
    print("| %s | %.1f | %.2fx | %s | %s | %.1f | %.4f |" % (
        s, m, base / m, "%.1f" % p if p else "-",
        "%.2fx" % (pbase / p) if p and pbase else "-", replay_ms(s), t["final_loss"]))
PY
echo "everything is in $out (the runs in $db)"
