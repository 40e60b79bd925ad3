# experiments.sh -- experiments/codec-sweep.sh and analysis/codec-sweep.gp:
# the sweep's table has the rows and the trends it must have, gnuplot draws
# it, and bad input stops both with a message.
#
# Environment: SHARDQ (the binary) and SHARDQ_SRCDIR (or automake's srcdir).

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
export SHARDQ
T=$TEST_TMPDIR
SWEEP=$SHARDQ_SRCDIR/experiments/codec-sweep.sh
PLOT=$SHARDQ_SRCDIR/analysis/codec-sweep.gp

# 4096 float32 values, roughly normal (a sum of four uniforms from a fixed
# LCG), with a few outliers: written as a .npy file byte by byte.
make_input() {
  hdr="{'descr': '<f4', 'fortran_order': False, 'shape': (64, 64), }"
  LC_ALL=C awk -v hdr="$hdr" 'BEGIN {
    hl = int((10 + length(hdr) + 1 + 63) / 64) * 64 - 10
    printf "%cNUMPY%c%c%c%c%s", 147, 1, 0, hl % 256, int(hl / 256), hdr
    for (i = length(hdr); i < hl - 1; i++) printf " "
    printf "\n"
    s = 12345
    for (i = 0; i < 4096; i++) {
      x = 0
      for (k = 0; k < 4; k++) { s = (s * 1103515245 + 12345) % 2147483648; x += s / 2147483648 - 0.5 }
      if (i % 500 == 7) x *= 40   # outliers, where a Hadamard helps
      # float32 bits of x (the header is 128 bytes: element i starts at 128 + 4i): sign, exponent, 23-bit mantissa
      sign = x < 0 ? 1 : 0; a = x < 0 ? -x : x; e = 0
      while (a >= 2) { a /= 2; e++ }
      while (a < 1) { a *= 2; e-- }
      m = int((a - 1) * 8388608 + 0.5); if (m == 8388608) { m = 0; e++ }
      be = e + 127
      printf "%c%c%c%c", m % 256, int(m / 256) % 256, int(m / 65536) % 128 + (be % 2) * 128, sign * 128 + int(be / 2)
    }
  }' >"$1"
}
make_input "$T/x.npy"
ok "the input is a valid .npy of 4096 values" sh -c "\"$SHARDQ\" codec info --n 1 >/dev/null && \"$SHARDQ\" codec stats --json \"$T/x.npy\" | grep -q '\"n\":4096'"

ok "a 2 x 2 x 2 x 3 sweep runs" sh -c "\"$SWEEP\" --bits 2,4,8 --group 64,512 --hadamard 0,32 --round rtn,sr \"$T/x.npy\" >\"$T/sweep.txt\""
rows() { grep -c '^sym [0-9]' "$T/sweep.txt"; }
ok "... and prints 24 rows" test "$(rows)" -eq 24
ok "... in 8 labelled blocks" test "$(grep -c '^sym/g[0-9]*/h[0-9]*/[a-z]*$' "$T/sweep.txt")" -eq 8

# Within every block the error falls as the bits grow.
ok "relative L2 error falls with the bit width in every block" awk '
  /^sym [0-9]/ { key = $3 "/" $4 "/" $5
                 if ((key in last) && $7 >= last[key]) bad = 1
                 last[key] = $7 }
  END { exit bad }' "$T/sweep.txt"
# Bits per element: bits + 32 / group (fp32 scales), to the digit.
ok "bits per element = bits + 32/group" awk '
  /^sym [0-9]/ { want = $2 + 32 / $3; d = $6 - want; if (d < 0) d = -d; if (d > 0.01) bad = 1 }
  END { exit bad }' "$T/sweep.txt"
# With outliers in the data, the 32-point Hadamard lowers the 4-bit RTN error.
ok "the Hadamard helps on data with outliers (4-bit RTN, group 512)" awk '
  $1 == "sym" && $2 == 4 && $3 == 512 && $5 == "rtn" { e[$4] = $7 }
  END { exit !(e[32] < e[0]) }' "$T/sweep.txt"
ok "bits=1 with sym is left out with a comment" sh -c "\"$SWEEP\" --bits 1,2 --group 128 --hadamard 0 --round rtn \"$T/x.npy\" | grep -q '^# kind=sym,bits=1.*left out'"
ok "minmax sweeps too" sh -c "\"$SWEEP\" --kind minmax --bits 1,3 --group 128 --hadamard 0 --round sr \"$T/x.npy\" | grep -c '^minmax [0-9]' | grep -qx 2"
ok "the compressors sweep at their own widths" sh -c "\"$SWEEP\" --kind qsgd,sign,fp8e4m3 --bits 1,4,8 --group 128 --hadamard 0 --round rtn \"$T/x.npy\" >\"$T/cmp.txt\" && test \$(grep -c '^qsgd [48] \\|^sign 1 \\|^fp8e4m3 8 ' \"$T/cmp.txt\") = 4 && grep -q '^# kind=sign,bits=4.*left out (bits=4: kind=sign codes one bit' \"$T/cmp.txt\""

if command -v gnuplot >/dev/null 2>&1; then
  ok "gnuplot draws the sweep" gnuplot -e "in='$T/sweep.txt'; out='$T/sweep.svg'" "$PLOT"
  ok "... an SVG with one titled line per block" sh -c "grep -q '<svg' \"$T/sweep.svg\" && test \$(grep -o 'sym/g[0-9]*/h[0-9]*/[a-z]*' \"$T/sweep.svg\" | sort -u | wc -l) -eq 8"
  expect_fail_with nonzero "set in='TABLE'" gnuplot "$PLOT"
else
  sq_report 1 "gnuplot is not installed (./bootstrap --deps installs gnuplot-nox)"
fi

expect_fail_with 1 "$T/absent.npy: cannot read" "$SWEEP" "$T/absent.npy"
expect_fail_with 2 "bits=9: must be an integer from 1 to 8" "$SWEEP" --bits 9 "$T/x.npy"
expect_fail_with 2 "unknown option '--bitz'" "$SWEEP" --bitz 4 "$T/x.npy"
expect_fail_with 2 "usage: codec-sweep.sh" "$SWEEP"
ok "--help" sh -c "\"$SWEEP\" --help | grep -q 'usage: codec-sweep.sh'"
make_input "$T/bad.npy"
printf '\000\000\300\177' | dd of="$T/bad.npy" bs=1 seek=200 conv=notrunc 2>/dev/null
expect_fail_with 1 "element 18 is NaN" "$SWEEP" --bits 4 --group 128 --hadamard 0 --round rtn "$T/bad.npy"

# experiments/compressors.sh on a short run: three configurations, the
# closed-form bits of two, the table and the figure
CMP=$SHARDQ_SRCDIR/experiments/compressors.sh
ok "compressors.sh --help" sh -c "\"$CMP\" --help | grep -q 'usage: experiments/compressors.sh'"
expect_fail_with 2 "unknown option --stepz" "$CMP" --stepz 3
ok "compressors.sh: baseline, sym4 and topk26, 3 steps" sh -c '"$0" --out "$1/cmp" --steps 3 \
  --trace-steps 2 --only baseline,sym4,topk26 >"$1/cmp.txt" 2>&1' "$CMP" "$T"
ok "... the table: three rows, 4.25 bits for sym4, top-26 of 256 at 26 x 40 / 256" python3 -c '
import sys
rows = [l.split("|") for l in open(sys.argv[1]) if l.startswith("| ") and not l.startswith("| configuration")]
bits = {r[1].strip(): float(r[3]) for r in rows}
assert sorted(bits) == ["baseline", "sym4", "topk26"], bits
assert bits["baseline"] == 32 and abs(bits["sym4"] - 4.25) < 0.01, bits
assert abs(bits["topk26"] - 26 * 40 / 256) < 0.02, bits
err = {r[1].strip(): float(r[4]) for r in rows}
assert err["baseline"] < 1e-4 < err["sym4"] < err["topk26"] < 1, err
' "$T/cmp/table.md"
if command -v gnuplot >/dev/null 2>&1; then
  ok "... and the figure" test -s "$T/cmp/compressors.png" -a -s "$T/cmp/compressors.svg"
fi

finish
