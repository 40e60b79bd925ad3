#!/bin/bash
# compressors.sh -- the gradient compressors researchers compare against,
# side by side on the default GPT (docs/training.md; the figures in docs/results.md):
#   1. the default GPT's baseline trace, captured in process;
#   2. every configuration below replayed over it (gradient path only): the
#      relative L2 error of the reduced gradient against the exact mean,
#      and the bits per real parameter each worker sends;
#   3. every configuration trained from the same start for --steps steps:
#      the final training and validation loss;
# then a table (table.md) and a figure (compressors.png, .svg): error and
# validation loss against bits per parameter, at two budgets (about 4 and
# about 1.25 bits per parameter) with the baseline, an fp16 cast and 8-bit
# FP8 as references.
#
# Every configuration is the single-level all-to-all reduce-scatter of a
# 2 x 4 world (every worker encodes its own gradient once, the receiver
# decodes and sums in fp32) with the baseline's bf16 weights, so that only
# the gradient's compressor differs; PowerSGD runs its own all-reduces.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
usage() {
  cat <<'USAGE'
usage: experiments/compressors.sh [--out DIR] [--steps N] [--trace-steps N] [--seed S]
                                  [--only LIST] [--table-only]

  --out DIR        where everything goes (default compressors)
  --steps N        training steps of each configuration (default 200)
  --trace-steps N  steps of the captured baseline trace (default 40, every
                   tenth step captured)
  --seed S         the seed of every run (default 1)
  --only LIST      comma-separated configuration names (default all; the
                   names are the table's first column)
  --table-only     print the table and draw the figure from --out, run nothing

SHARDQ names the shardq binary (default: src/shardq beside this script's
directory, else shardq on PATH).
USAGE
}
out=compressors steps=200 tsteps=40 seed=1 only= table_only=
while test $# -gt 0; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --trace-steps) tsteps=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --only) only=,$2,; shift 2 ;;
    --table-only) table_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compressors.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
if test -z "${SHARDQ:-}"; then
  if test -x "$here/../src/shardq"; then SHARDQ=$here/../src/shardq; else SHARDQ=$(command -v shardq); fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# name | budget | scheme and knobs | what it follows
a2a="--scheme baseline --set grad.mode=a2a"
configs=(
  "baseline|ref|--scheme baseline|fp32 ring reduce-scatter"
  "fp16|ref|$a2a --set grad.inter.kind=fp16|fp16 cast (PyTorch's fp16_compress_hook)"
  "fp8e4m3|ref|$a2a --set grad.inter.kind=fp8e4m3 --set grad.inter.bits=8|FP8 E4M3, group 128, SR"
  "sym4|4|$a2a --set grad.inter.bits=4|4-bit absmax, group 128, SR (SDP4Bit's ULq, one level)"
  "qsgd4|4|$a2a --set grad.inter.kind=qsgd --set grad.inter.bits=4|QSGD, 7 levels, bucket 128 (GRACE)"
  "topk26|4|$a2a --set grad.inter.kind=topk --set grad.inter.group=256 --set grad.inter.keep=26|top-26 of 256"
  "topk26-ef|4|$a2a --set grad.inter.kind=topk --set grad.inter.group=256 --set grad.inter.keep=26 --set grad.ef=1|top-26 of 256, error feedback"
  "randk26-ef|4|$a2a --set grad.inter.kind=randk --set grad.inter.group=256 --set grad.inter.keep=26 --set grad.ef=1|random-26 of 256, error feedback"
  "powersgd4|4|--scheme powersgd4|PowerSGD rank 4 (error feedback, warm start)"
  "sign|1|$a2a --set grad.inter.kind=sign --set grad.inter.bits=1 --set grad.inter.round=rtn|scaled sign, group 128 (signSGD with a scale)"
  "sign-ef|1|$a2a --set grad.inter.kind=sign --set grad.inter.bits=1 --set grad.inter.round=rtn --set grad.ef=1|scaled sign + error feedback (EF-SignSGD)"
  "qsgd2|1|$a2a --set grad.inter.kind=qsgd --set grad.inter.bits=2|QSGD ternary (s = 1), bucket 128"
  "topk8-ef|1|$a2a --set grad.inter.kind=topk --set grad.inter.group=256 --set grad.inter.keep=8 --set grad.ef=1|top-8 of 256, error feedback"
  "randk8-ef|1|$a2a --set grad.inter.kind=randk --set grad.inter.group=256 --set grad.inter.keep=8 --set grad.ef=1|random-8 of 256, error feedback"
  "powersgd|1|--scheme powersgd|PowerSGD rank 1 (PyTorch's defaults)"
)
printf '%s\n' "${configs[@]}" >"$out/configs.txt"

if test -z "$table_only"; then
  if ! test -f "$out/trace/manifest.json"; then
    echo "== $(date +%T) the baseline trace ($tsteps steps)"
    "$SHARDQ" train -q --scheme baseline --steps "$tsteps" --seed "$seed" --capture "$out/trace" \
      --capture-every $(((tsteps + 9) / 10)) --no-db
  fi
  for c in "${configs[@]}"; do
    IFS='|' read -r name budget args what <<<"$c"
    case $only in ""|*",$name,"*) ;; *) continue ;; esac
    # shellcheck disable=SC2086  # args is a list of options
    if ! test -s "$out/replay-$name.json"; then
      echo "== $(date +%T) replay $name"
      "$SHARDQ" replay --no-db --json --paths grad --seed "$seed" $args "$out/trace" \
        >"$out/replay-$name.json.part" && mv "$out/replay-$name.json.part" "$out/replay-$name.json"
    fi
    # shellcheck disable=SC2086
    if ! test -s "$out/train-$name.json"; then
      echo "== $(date +%T) train $name ($steps steps)"
      "$SHARDQ" train -q --no-db --json --steps "$steps" --seed "$seed" $args \
        >"$out/train-$name.json.part" && mv "$out/train-$name.json.part" "$out/train-$name.json"
    fi
  done
fi

python3 - "$out" <<'PY' | tee "$out/table.md"
import json, os, sys
out = sys.argv[1]
rows = []
for line in open(out + "/configs.txt"):
    name, budget, args, what = line.rstrip("\n").split("|")
    try:
        r = json.load(open("%s/replay-%s.json" % (out, name)))
        t = json.load(open("%s/train-%s.json" % (out, name)))
    except FileNotFoundError:
        continue
    b = r["bytes"]["grad_reducescatter"]
    sent = sum(b[l]["sent_codes"] + b[l]["sent_meta"] for l in ("intra", "inter"))
    params = sum(b[l]["real_elements"] for l in ("intra", "inter"))
    bits = 8.0 * sent / params if params else 0.0
    rows.append((name, budget, what, bits, r["grad"]["rel_l2"], r["grad"]["cosine"],
                 t["final_loss"], t["final_val_loss"]))
base = [x for x in rows if x[0] == "baseline"]
bval = base[0][7] if base else None
print("| configuration | what | bits per parameter | gradient rel. L2 error | cosine | final loss | validation loss | vs baseline |")
print("|---|---|---|---|---|---|---|---|")
for name, budget, what, bits, err, cos, loss, val in rows:
    vs = "" if bval is None or name == "baseline" else "%+.2f%%" % (100 * (val / bval - 1))
    print("| %s | %s | %.3g | %.4f | %.4f | %.4f | %.4f | %s |" % (name, what, bits, err, cos, loss, val, vs))
with open(out + "/points.dat", "w") as f:
    f.write("# name budget bits rel_l2 val_loss\n")
    for name, budget, what, bits, err, cos, loss, val in rows:
        f.write("%s %s %.6g %.6g %.6g\n" % (name, budget, bits, err, val))
PY

# the figure's script: beside this one when installed, in analysis/ in the sources
gp=$here/compressors.gp
test -f "$gp" || gp=$here/../analysis/compressors.gp
gnuplot -e "dat='$out/points.dat'; base='$out/compressors'" "$gp"
echo "everything is in $out (table.md, compressors.png, compressors.svg)"
