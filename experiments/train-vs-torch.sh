#!/bin/sh
# train-vs-torch.sh -- `shardq train` beside the same GPT written in PyTorch
# (experiments/train_torch.py), on the CPU with the same threads, the same
# model shape, global batch and sequence length, run one after the other and
# repeated: both tokens/s and their ratio. Run it with --help for the options.
set -eu

usage() {
  cat <<'USAGE'
usage: train-vs-torch.sh [options] [-- SHARDQ-TRAIN-OPTIONS]

Trains the default GPT of `shardq train` (or the shape given) with shardq and
with PyTorch, alternately, REPEATS times each, and prints each run's tokens/s,
the medians and shardq's speedup. shardq runs its sharded world (the scheme's
emulated collectives included: what `shardq train` does); PyTorch trains
the same global batch (workers x batch sequences) in one process, as a
PyTorch user would, with the same AdamW and clipping.

options:
  --steps N        optimizer steps per run (default 60)
  --threads T      threads of both (default: every core, nproc)
  --repeats R      runs of each (default 3)
  --layers L, --channels C, --heads H, --context N, --seq T, --batch B,
  --workers KxG    the shape (default shardq train's: 4, 128, 4, 128, 128,
                   2, 2x4)
  --python PY      a Python with torch (default /usr/bin/python3, else
                   python3)
  --shardq PATH    the shardq binary (default: $SHARDQ, else shardq on PATH)
  -h, --help       this text

Options after -- go to shardq train only (--scheme, --set ...). Both run
under one OMP_WAIT_POLICY: the one set, else passive (shardq train's own
default).
USAGE
}

die() { echo "train-vs-torch.sh: $*" >&2; exit 2; }

steps=60 threads=$(nproc) repeats=3 layers=4 channels=128 heads=4 context=128 seq=128
batch=2 workers=2x4 py= shardq=${SHARDQ:-shardq}
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --channels) channels=$2; shift 2 ;;
    --heads) heads=$2; shift 2 ;;
    --context) context=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    --shardq) shardq=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (--help lists them)" ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$py" ]; then
  py=python3
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import torch" 2>/dev/null && py=/usr/bin/python3
fi
"$py" -c "import torch" 2>/dev/null || die "$py has no torch (install python3-torch, or --python)"
k=${workers%x*} g=${workers#*x}
case "$k$g" in *[!0-9]*|'') die "--workers: KxG, got '$workers'" ;; esac
sequences=$((k * g * batch))
# one wait policy for both: shardq train takes passive unless one is set
# (docs/replay.md, sweeps), and PyTorch's OpenMP threads left spinning at their
# barriers on a busy machine run several times slower than passive ones
: "${OMP_WAIT_POLICY:=passive}"
export OMP_WAIT_POLICY
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# $layers layers x $channels wide, $heads heads, $sequences sequences of $seq bytes per step ($workers x $batch), $steps steps, $threads threads, OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
printf '%-8s %-8s %12s %12s\n' run peer tokens/s loss
i=1
while [ "$i" -le "$repeats" ]; do
  OMP_NUM_THREADS=$threads "$shardq" train --no-db --json --steps "$steps" --eval-every 0 \
    --layers "$layers" --channels "$channels" --heads "$heads" --context "$context" \
    --seq "$seq" --batch "$batch" --workers "$workers" "$@" >"$tmp/s$i.json"
  OMP_NUM_THREADS=$threads "$py" "$here/train_torch.py" --threads "$threads" --steps "$steps" \
    --sequences "$sequences" --seq "$seq" --layers "$layers" --channels "$channels" \
    --heads "$heads" --context "$context" >"$tmp/t$i.json"
  "$py" - "$tmp/s$i.json" "$tmp/t$i.json" "$i" <<'PY'
import json, sys
s, t = (json.load(open(f)) for f in sys.argv[1:3])
print("%-8s %-8s %12.0f %12.4f" % (sys.argv[3], "shardq", s["tokens_per_s"], s["final_loss"]))
print("%-8s %-8s %12.0f %12.4f" % (sys.argv[3], "torch", t["tokens_per_s"], t["final_loss"]))
PY
  i=$((i + 1))
done
"$py" - "$tmp" "$repeats" <<'PY'
import json, statistics, sys
d, r = sys.argv[1], int(sys.argv[2])
s = statistics.median(json.load(open("%s/s%d.json" % (d, i)))["tokens_per_s"] for i in range(1, r + 1))
t = statistics.median(json.load(open("%s/t%d.json" % (d, i)))["tokens_per_s"] for i in range(1, r + 1))
print("median   shardq %.0f tokens/s, torch %.0f tokens/s: shardq %.2fx torch" % (s, t, s / t))
PY
