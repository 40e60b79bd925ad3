#!/bin/sh
# codec-sweep.sh -- the quantization error of a grid of codecs on one tensor:
# every combination of kinds, bit widths, group sizes, Hadamard sizes and
# rounding modes, each one `shardq codec stats` run, as a table that
# analysis/codec-sweep.gp plots. Run it with --help for the options.
#
# The table has one block per (kind, group, hadamard, round), rows by bits;
# blocks are separated by two blank lines and start with a one-word label
# (gnuplot's `index` and `columnheader` read them), lines starting with '#'
# are comments.
set -eu

usage() {
  cat <<'USAGE'
usage: codec-sweep.sh [options] IN.npy

Prints the round-trip error of every codec in a grid on IN (float32 .npy, or
raw float32 with --raw), one `shardq codec stats` per codec.

options:
  --kind LIST      sym, minmax, qsgd, sign, fp8e4m3, fp8e5m2 (default sym;
                   sign needs bits 1, fp8 bits 8)
  --bits LIST      bit widths (default 2,3,4,6,8)
  --group LIST     group sizes (default 32,128,512)
  --hadamard LIST  Hadamard sizes, 0 for none (default 0,32)
  --round LIST     rtn, sr (default rtn,sr)
  --scale DTYPE    fp32, bf16, fp16 (default fp32)
  --seed S         seed of stochastic rounding (default 0)
  --raw            IN is raw little-endian float32
  --shardq PATH    the shardq binary (default: $SHARDQ, else shardq on PATH)
  -h, --help       this text

LISTs are comma-separated. A codec the grid makes invalid (kind=sym,bits=1,
kind=sign,bits=4, ...) is left out with a comment line giving the reason; any
other failure of shardq stops the sweep with its message.
USAGE
}

die() { echo "codec-sweep.sh: $*" >&2; exit 2; }

kinds=sym bits=2,3,4,6,8 groups=32,128,512 hads=0,32 rounds=rtn,sr scale=fp32 seed=0 raw=
shardq=${SHARDQ:-shardq}
in=
while test $# -gt 0; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --raw) raw=--raw; shift; continue ;;
    --kind|--bits|--group|--hadamard|--round|--scale|--seed|--shardq)
      test $# -ge 2 || die "$1 needs a value"
      case $1 in
        --kind) kinds=$2 ;; --bits) bits=$2 ;; --group) groups=$2 ;;
        --hadamard) hads=$2 ;; --round) rounds=$2 ;; --scale) scale=$2 ;;
        --seed) seed=$2 ;; --shardq) shardq=$2 ;;
      esac
      shift 2; continue ;;
    -*) die "unknown option '$1' (try --help)" ;;
    *) test -z "$in" || die "one input file only ('$in' and '$1')"; in=$1; shift ;;
  esac
done
test -n "$in" || { usage >&2; exit 2; }
test -r "$in" || { echo "codec-sweep.sh: $in: cannot read" >&2; exit 1; }

# field JSON KEY: the value of a number field of one flat JSON object.
field() { printf '%s\n' "$1" | sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p"; }

echo "# shardq codec sweep of $in, scale=$scale, seed=$seed"
echo "# kind bits group hadamard round bits_per_element rel_l2 snr_db max_abs_error cosine"
first=1
for k in $(echo "$kinds" | tr , ' '); do
  for g in $(echo "$groups" | tr , ' '); do
    for h in $(echo "$hads" | tr , ' '); do
      for r in $(echo "$rounds" | tr , ' '); do
        test $first = 1 || printf '\n\n'
        first=0
        echo "$k/g$g/h$h/$r"
        for b in $(echo "$bits" | tr , ' '); do
          spec="kind=$k,bits=$b,group=$g,hadamard=$h,round=$r,scale=$scale"
          # A codec the grid makes invalid (sym at 1 bit, sign at 4, fp8 below 8,
          # sign with sr) is left out with the parser's reason: a spec error of a
          # combination whose kind, and whose other values under kind=minmax
          # (which takes them all), are valid on their own. A bad value itself
          # (bits=9) fails below.
          why=$("$shardq" codec info --codec "$spec" 2>&1 >/dev/null) && rc=0 || rc=$?
          if test $rc = 2 && "$shardq" codec info --codec "kind=$k" >/dev/null 2>&1 &&
            "$shardq" codec info --codec "kind=minmax,${spec#kind=$k,}" >/dev/null 2>&1; then
            echo "# $spec: left out (${why#*--codec: })"
            continue
          fi
          # A failure stops the sweep (set -e): shardq has said why on stderr.
          j=$("$shardq" codec stats --json --codec "$spec" --seed "$seed" $raw "$in")
          echo "$k $b $g $h $r $(field "$j" bits_per_element) $(field "$j" rel_l2)" \
            "$(field "$j" snr_db) $(field "$j" max_abs_error) $(field "$j" cosine)"
        done
      done
    done
  done
done
