# cli_codec.sh -- `shardq codec encode|decode|stats|info`, help and version,
# through the binary. Inputs are .npy files written by the shell itself
# (printf of a version 1.0 header and float32 bytes computed with shell
# arithmetic), outputs are read back with od and awk: no Python needed.
#
# Environment: SHARDQ (the binary) and SHARDQ_SRCDIR (or automake's srcdir);
# both have fallbacks for a run by hand from the top of a built tree.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR

# ---------------------------------------------------------------------------
# Writing .npy files from the shell
# ---------------------------------------------------------------------------

# o BYTE: appends the printf escape of BYTE (0..255) to $esc.
o() { esc="$esc\\$((($1 >> 6) & 7))$((($1 >> 3) & 7))$(($1 & 7))"; }

# word BITS: appends a 32-bit word, little-endian.
word() { o $(($1 & 255)); o $((($1 >> 8) & 255)); o $((($1 >> 16) & 255)); o $((($1 >> 24) & 255)); }

# f32 V K: appends the float32 V * 2^-K (V an integer, |V| < 2^24).
f32() {
  v=$1 s=0
  if test "$v" -lt 0; then s=1 v=$((-v)); fi
  if test "$v" -eq 0; then
    word $((s << 31))
  else
    e=0 t=$v
    while test $t -gt 1; do t=$((t >> 1)) e=$((e + 1)); done
    word $(((s << 31) | ((127 + e - $2) << 23) | ((v - (1 << e)) << (23 - e))))
  fi
}

# gen N SEED K: appends N pseudo-random values, integers in [-1000, 1000]
# times 2^-K, from a linear congruential generator.
gen() {
  x=$2 i=0
  while test $i -lt "$1"; do
    x=$(((x * 1103515245 + 12345) % 2147483648))
    f32 $(((x >> 8) % 2001 - 1000)) "$3"
    i=$((i + 1))
  done
}

# mknpy FILE SHAPE: writes the data escaped in $esc as a version 1.0 '<f4'
# .npy file of SHAPE (Python tuple syntax), header padded like NumPy's.
mknpy() {
  data=$esc
  dict="{'descr': '<f4', 'fortran_order': False, 'shape': $2, }"
  hl=$((((10 + ${#dict} + 1 + 63) / 64) * 64 - 10))
  esc=
  o $((hl & 255))
  o $((hl >> 8))
  {
    printf '\223NUMPY\001\000'
    printf "$esc"
    printf '%s' "$dict"
    printf "%$((hl - ${#dict} - 1))s\n" ""
    printf "$data"
  } >"$1"
  esc=
}

# ---------------------------------------------------------------------------
# Reading results
# ---------------------------------------------------------------------------

# values FILE.npy: the float32 values of a .npy file, one a line.
values() {
  set -- "$1" $(od -An -tu1 -j8 -N2 "$1")
  od -An -v -tf4 -j$((10 + $2 + 256 * $3)) "$1" | tr -s ' ' '\n' | grep -v '^$'
}

# relerr X.npy Y.npy: ||y - x|| / ||x||, in double precision.
relerr() {
  values "$1" >"$T/vx"
  values "$2" >"$T/vy"
  paste "$T/vx" "$T/vy" | awk '{ d = $2 - $1; e += d * d; s += $1 * $1 }
    END { if (NR == 0 || s == 0) print 0; else printf "%.12g\n", sqrt(e) / sqrt(s) }'
}

# json_field NAME FILE: a value from the one-line JSON object in FILE.
json_field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" "$2"; }

# close A B REL: |A - B| <= REL * |B|
close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d;
  m = b < 0 ? -b : b; exit !(d <= r * m) }'; }

# stdout_has PATTERN CMD...: CMD succeeds and prints the fixed string PATTERN.
stdout_has() {
  sq_p=$1
  shift
  "$@" >"$T/so" || return 1
  grep -F -e "$sq_p" "$T/so" >/dev/null && return 0
  echo "stdout lacks: $sq_p"
  cat "$T/so"
  return 1
}

# file_has FILE PATTERN
file_has() {
  grep -F -e "$2" "$1" >/dev/null && return 0
  echo "$1 lacks: $2"
  return 1
}

# ---------------------------------------------------------------------------
# Version and help
# ---------------------------------------------------------------------------

version_ok() {
  "$SHARDQ" --version >"$T/v" || return 1
  test "$(sed -n 1p "$T/v")" = "shardq 0.1.0" || { cat "$T/v"; return 1; }
  sed -n 2p "$T/v" | grep -e 'OpenMP' | grep -e 'CUDA' >/dev/null || { cat "$T/v"; return 1; }
}
ok "--version prints the version and the build facts" version_ok

ok "--help" stdout_has "usage: shardq COMMAND" "$SHARDQ" --help
ok "-h" stdout_has "usage: shardq COMMAND" "$SHARDQ" -h
ok "help" stdout_has "usage: shardq COMMAND" "$SHARDQ" help
ok "help codec" stdout_has "usage: shardq codec SUBCOMMAND" "$SHARDQ" help codec
ok "codec --help" stdout_has "usage: shardq codec SUBCOMMAND" "$SHARDQ" codec --help
for sub in encode decode stats info; do
  ok "codec $sub --help" stdout_has "usage: shardq codec $sub" "$SHARDQ" codec $sub --help
  ok "help codec $sub" stdout_has "usage: shardq codec $sub" "$SHARDQ" help codec $sub
done
ok "help bench" stdout_has "usage: shardq bench" "$SHARDQ" help bench
ok "bench --help" stdout_has "usage: shardq bench" "$SHARDQ" bench --help

# ---------------------------------------------------------------------------
# info
# ---------------------------------------------------------------------------

ok "info: default codec, canonical spec" stdout_has \
  "kind=sym,bits=4,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32" "$SHARDQ" codec info
ok "info: sizes for n=1000" stdout_has "total bytes       415" \
  "$SHARDQ" codec info --codec bits=3,group=100 --n 1000
ok "info --json: min-max bf16 sizes" stdout_has \
  '"groups":10,"code_bytes":375,"scale_bytes":20,"offset_bytes":20,"metadata_bytes":40,"bytes":415,"bits_per_element":3.32' \
  "$SHARDQ" codec info --codec kind=minmax,bits=3,group=100,scale=bf16 --n 1000 --json
ok "info: n = 0" stdout_has "bits per element  0" "$SHARDQ" codec info --n 0

# ---------------------------------------------------------------------------
# An exact round trip: integers in [-127, 127] with a 127 in every group of
# 128 quantize to themselves at 8 bits with RTN, so decode gives back the
# input file byte for byte (same header, same shape).
# ---------------------------------------------------------------------------

esc=
g=0
while test $g -lt 6; do
  j=0
  while test $j -lt 128; do
    if test $j -eq $((g * 7)); then v=127; else v=$(((j * 37 + g * 11) % 255 - 127)); fi
    f32 $v 0
    j=$((j + 1))
  done
  g=$((g + 1))
done
mknpy "$T/exact.npy" "(2, 3, 128)"
ok "encode an exact input" "$SHARDQ" codec encode --codec bits=8,round=rtn "$T/exact.npy" "$T/exact.st"
ok "decode it" "$SHARDQ" codec decode "$T/exact.st" "$T/exact.out.npy"
ok "decode(encode(x)) = x byte for byte, shape (2, 3, 128) kept" cmp "$T/exact.npy" "$T/exact.out.npy"
ok "stats of the exact input: zero error" stdout_has '"rel_l2":0,"mse":0,"max_abs_error":0,"snr_db":null' \
  "$SHARDQ" codec stats --json --codec bits=8,round=rtn "$T/exact.npy"

# ---------------------------------------------------------------------------
# Lossy round trips: the error of decode(encode(x)), computed here from the
# files, equals the relative error `codec stats` reports for the same codec
# and key; and it is small for the bits spent.
# ---------------------------------------------------------------------------

esc=
gen 3000 12345 6
mknpy "$T/x.npy" "(50, 60)"

# roundtrip SPEC MAXREL: encode/decode with a fixed key, compare with stats.
roundtrip() {
  key="--seed 99 --step 7 --worker 3 --site grad-inter"
  "$SHARDQ" codec encode --codec "$1" $key "$T/x.npy" "$T/x.st" || return 1
  "$SHARDQ" codec decode "$T/x.st" "$T/y.npy" || return 1
  "$SHARDQ" codec stats --json --codec "$1" $key "$T/x.npy" >"$T/stats.json" || return 1
  got=$(relerr "$T/x.npy" "$T/y.npy")
  want=$(json_field rel_l2 "$T/stats.json")
  echo "decode error $got, stats rel_l2 $want, bound $2"
  close "$got" "$want" 1e-6 && awk -v a="$got" -v b="$2" 'BEGIN { exit !(a > 0 && a < b) }'
}
ok "round trip default codec (sym 4-bit SR)" roundtrip "" 0.2
ok "round trip sym 8-bit RTN" roundtrip "bits=8,round=rtn" 0.01
ok "round trip min-max 3-bit bf16 scales" roundtrip "kind=minmax,bits=3,scale=bf16" 0.3
ok "round trip sym 2-bit Hadamard 64 fp16 scales" roundtrip "bits=2,hadamard=64,scale=fp16,group=256" 1.5
ok "round trip deepspeed levels 4-bit RTN group 7" roundtrip "levels=deepspeed,round=rtn,group=7" 0.2
ok "round trip min-max 1-bit" roundtrip "kind=minmax,bits=1" 1.5

ok "decoded file keeps the shape (50, 60)" file_has "$T/y.npy" "'shape': (50, 60), }"


# The metadata of the last encode (min-max 1-bit, the key above).
head -c 512 "$T/x.st" >"$T/hdr"
ok "metadata: format" file_has "$T/hdr" '"format":"shardq.codec/1"'
ok "metadata: canonical codec" file_has "$T/hdr" \
  '"codec":"kind=minmax,bits=1,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32"'
ok "metadata: n and shape" file_has "$T/hdr" '"n":"3000","shape":"[50, 60]"'
ok "metadata: key" file_has "$T/hdr" '"seed":"99","step":"7","worker":"3","site":"2"'
ok "metadata: version" file_has "$T/hdr" '"shardq_version":"0.1.0"'
ok "tensors: codes U8, scales and offsets F32" file_has "$T/hdr" \
  '"codes":{"dtype":"U8","shape":[375],"data_offsets":[0,375]},"scales":{"dtype":"F32","shape":[24],"data_offsets":[375,471]},"offsets":{"dtype":"F32","shape":[24],"data_offsets":[471,567]}'
"$SHARDQ" codec encode --codec scale=bf16 "$T/x.npy" "$T/b.st"
head -c 512 "$T/b.st" >"$T/hdr"
ok "tensors: bf16 scales are BF16" file_has "$T/hdr" '"scales":{"dtype":"BF16","shape":[24]'
ok "metadata: defaults of the key" file_has "$T/hdr" '"seed":"0","step":"0","worker":"0","site":"0"'

# The compressors (docs/conventions.md): the same round trip, the sizes of
# their files, and their own spec rules.
ok "round trip qsgd 4-bit SR (7 levels of the group's norm)" roundtrip "kind=qsgd" 1.2
ok "round trip qsgd 8-bit RTN Hadamard 32" roundtrip "kind=qsgd,bits=8,round=rtn,hadamard=32" 0.1
ok "round trip scaled sign (mean |x| per group)" roundtrip "kind=sign,group=64" 0.8
ok "round trip fp8e4m3 SR" roundtrip "kind=fp8e4m3" 0.1
ok "round trip fp8e5m2 RTN bf16 scales" roundtrip "kind=fp8e5m2,round=rtn,scale=bf16" 0.1
ok "scaled sign, groups of one: lossless" "$SHARDQ" codec encode --codec kind=sign,group=1 \
  "$T/x.npy" "$T/s1.st"
ok "  decode" "$SHARDQ" codec decode "$T/s1.st" "$T/s1.npy"
ok "  decode(encode(x)) = x byte for byte" cmp "$T/x.npy" "$T/s1.npy"
"$SHARDQ" codec encode --codec kind=sign "$T/x.npy" "$T/s.st"
head -c 512 "$T/s.st" >"$T/hdr"
ok "sign: canonical codec in the metadata (bits 1, rtn)" file_has "$T/hdr" \
  '"codec":"kind=sign,bits=1,group=128,round=rtn,hadamard=0,levels=sdp4bit,scale=fp32"'
ok "sign: one bit per code, one scale per group" file_has "$T/hdr" \
  '"codes":{"dtype":"U8","shape":[375],"data_offsets":[0,375]},"scales":{"dtype":"F32","shape":[24]'
"$SHARDQ" codec encode --codec kind=fp8e4m3,group=1000 "$T/x.npy" "$T/f.st"
head -c 512 "$T/f.st" >"$T/hdr"
ok "fp8: one byte per code" file_has "$T/hdr" \
  '"codes":{"dtype":"U8","shape":[3000],"data_offsets":[0,3000]},"scales":{"dtype":"F32","shape":[3]'
ok "info --json: qsgd 3-bit sizes" stdout_has \
  '"groups":10,"code_bytes":375,"scale_bytes":40,"offset_bytes":0,"metadata_bytes":40,"bytes":415' \
  "$SHARDQ" codec info --codec kind=qsgd,bits=3,group=100 --n 1000 --json
ok "info --json: sign sizes (1.25 bits per element)" stdout_has \
  '"groups":8,"code_bytes":125,"scale_bytes":32,"offset_bytes":0,"metadata_bytes":32,"bytes":157,"bits_per_element":1.256' \
  "$SHARDQ" codec info --codec kind=sign --n 1000 --json
ok "sign takes one bit" expect_fail_with 2 "bits=4: kind=sign codes one bit" \
  "$SHARDQ" codec info --codec kind=sign,bits=4
ok "sign has no stochastic rounding" expect_fail_with 2 "round=sr: kind=sign" \
  "$SHARDQ" codec encode --codec kind=sign,round=sr "$T/x.npy" "$T/bad.st"
ok "fp8 takes eight bits" expect_fail_with 2 "bits=4: kind=fp8e5m2" \
  "$SHARDQ" codec stats --codec kind=fp8e5m2,bits=4 "$T/x.npy"
ok "qsgd needs two bits" expect_fail_with 2 "bits=1: kind=qsgd" \
  "$SHARDQ" codec info --codec kind=qsgd,bits=1

# Determinism, and the key reaching the random bits.
"$SHARDQ" codec encode --seed 1 "$T/x.npy" "$T/s1.st"
"$SHARDQ" codec encode --seed 1 "$T/x.npy" "$T/s1b.st"
"$SHARDQ" codec encode --seed 2 "$T/x.npy" "$T/s2.st"
"$SHARDQ" codec encode --seed 1 --site 1 "$T/x.npy" "$T/s3.st"
"$SHARDQ" codec encode --seed 1 --site grad-intra "$T/x.npy" "$T/s3b.st"
ok "encode is deterministic" cmp "$T/s1.st" "$T/s1b.st"
ok "another seed gives other codes" sh -c '! cmp -s "$1" "$2"' - "$T/s1.st" "$T/s2.st"
ok "--site grad-intra is site 1" cmp "$T/s3.st" "$T/s3b.st"
ok "hex seed 0x1 is seed 1" "$SHARDQ" codec encode --seed 0x1 "$T/x.npy" "$T/s1c.st"
ok "... same file" cmp "$T/s1.st" "$T/s1c.st"
ok "options after the file names" "$SHARDQ" codec encode "$T/x.npy" "$T/s1d.st" --seed=1
ok "... same file" cmp "$T/s1.st" "$T/s1d.st"

# Raw float32 input: the same values, 1-d.
set -- $(od -An -tu1 -j8 -N2 "$T/x.npy")
dd if="$T/x.npy" of="$T/x.f32" bs=$((10 + $1 + 256 * $2)) skip=1 2>/dev/null
ok "--raw encode" "$SHARDQ" codec encode --raw --seed 1 "$T/x.f32" "$T/r.st"
ok "--raw: same codes and scales as the .npy" sh -c \
  'tail -c 1596 "$1" >"$1.d" && tail -c 1596 "$2" >"$2.d" && cmp "$1.d" "$2.d"' - "$T/r.st" "$T/s1.st"
ok "--raw decode is 1-d" sh -c '"$1" codec decode "$2" "$3" && grep -F "(3000,)" "$3" >/dev/null' \
  - "$SHARDQ" "$T/r.st" "$T/r.npy"

# Standard input and output.
ok "encode - - | decode - OUT" sh -c '"$1" codec encode --seed 1 - - <"$2" | "$1" codec decode - "$3"' \
  - "$SHARDQ" "$T/x.npy" "$T/pipe.npy"
ok "... same as through files" sh -c '"$1" codec decode "$2" "$3" && cmp "$3" "$4"' \
  - "$SHARDQ" "$T/s1.st" "$T/s1.npy" "$T/pipe.npy"
ok "encode IN - >FILE" sh -c '"$1" codec encode --seed 1 "$2" - >"$3" && cmp "$3" "$4"' \
  - "$SHARDQ" "$T/x.npy" "$T/stdout.st" "$T/s1.st"

# ---------------------------------------------------------------------------
# Sparse kinds and casts (docs/conventions.md): the sizes are closed forms
# (topk: keep indices and fp32 values per group; a cast: 2 bytes an element,
# no scales); top-k keeps the largest magnitudes exactly; an fp16 cast of
# values of 11 significant bits is exact.
# ---------------------------------------------------------------------------

ok "info --json: topk, 2-byte indices for group 300" stdout_has \
  '"codec":"kind=topk,bits=16,group=300,round=rtn,hadamard=0,levels=sdp4bit,scale=fp32,keep=3","n":1000,"groups":4,"code_bytes":24,"scale_bytes":48,"offset_bytes":0,"metadata_bytes":48,"bytes":72,"bits_per_element":0.576' \
  "$SHARDQ" codec info --codec kind=topk,keep=3,group=300 --n 1000 --json
ok "info --json: randk, bf16 values, short last group" stdout_has \
  '"groups":16,"code_bytes":80,"scale_bytes":160,"offset_bytes":0,"metadata_bytes":160,"bytes":240,"bits_per_element":1.92' \
  "$SHARDQ" codec info --codec kind=randk,keep=5,group=64,scale=bf16 --n 1000 --json
ok "info --json: fp16 cast" stdout_has \
  '"codec":"kind=fp16,bits=16,group=1,round=rtn,hadamard=0,levels=sdp4bit,scale=fp32","n":1000,"groups":1000,"code_bytes":2000,"scale_bytes":0' \
  "$SHARDQ" codec info --codec kind=fp16 --n 1000 --json
expect_fail_with 2 "--codec: kind=topk: needs keep=" "$SHARDQ" codec info --codec kind=topk
expect_fail_with 2 "keep=4: applies to kind=topk and kind=randk only" \
  "$SHARDQ" codec info --codec keep=4
expect_fail_with 2 "round=sr: kind=topk selects deterministically" \
  "$SHARDQ" codec info --codec kind=topk,keep=4,round=sr

# count_nonzero FILE.npy: nonzero values and the sum of their magnitudes
count_nonzero() { values "$1" | awk '$1 != 0 { n++; s += ($1 < 0 ? -$1 : $1) } END { print n + 0, s + 0 }'; }
ok "topk encode" "$SHARDQ" codec encode --codec kind=topk,keep=1,group=128 "$T/exact.npy" "$T/topk.st"
ok "topk decode" "$SHARDQ" codec decode "$T/topk.st" "$T/topk.npy"
ok "topk keeps one 127 in each of the 6 groups, zeros elsewhere" \
  sh -c 'test "$1" = "6 762"' - "$(count_nonzero "$T/topk.npy")"
head -c 512 "$T/topk.st" >"$T/hdr"
ok "topk tensors: one index byte and one fp32 value per group" file_has "$T/hdr" \
  '"codes":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},"scales":{"dtype":"F32","shape":[6]'
ok "fp16 encode" "$SHARDQ" codec encode --codec kind=fp16 "$T/x.npy" "$T/f16.st"
ok "fp16 decode" "$SHARDQ" codec decode "$T/f16.st" "$T/f16.npy"
ok "fp16 round trip of 11-bit values is exact" cmp "$T/x.npy" "$T/f16.npy"
head -c 512 "$T/f16.st" >"$T/hdr"
ok "fp16 tensors: 2 bytes an element, no scales" file_has "$T/hdr" \
  '"codes":{"dtype":"U8","shape":[6000],"data_offsets":[0,6000]},"scales":{"dtype":"F32","shape":[0]'
ok "randk round trip near the bound of 1 - keep/group" roundtrip "kind=randk,keep=64,group=128" 0.8
"$SHARDQ" codec encode --codec kind=randk,keep=9 --seed 5 "$T/x.npy" "$T/rk1.st"
"$SHARDQ" codec encode --codec kind=randk,keep=9 --seed 5 "$T/x.npy" "$T/rk2.st"
"$SHARDQ" codec encode --codec kind=randk,keep=9 --seed 6 "$T/x.npy" "$T/rk3.st"
ok "randk is deterministic in the key" cmp "$T/rk1.st" "$T/rk2.st"
ok "randk: another seed keeps other elements" sh -c '! cmp -s "$1" "$2"' - "$T/rk1.st" "$T/rk3.st"
esc=
f32 1 0
f32 70000 0
mknpy "$T/big.npy" "(2,)"
expect_fail_with 1 "cannot quantize" "$SHARDQ" codec encode --codec kind=fp16 "$T/big.npy" "$T/big.st"
ok "bf16 takes 70000" "$SHARDQ" codec encode --codec kind=bf16 "$T/big.npy" "$T/big.st"

# ---------------------------------------------------------------------------
# Degenerate inputs: a scalar, zero-size arrays, all zeros.
# ---------------------------------------------------------------------------

esc=
f32 -127 0
mknpy "$T/scalar.npy" "()"
ok "scalar: encode" "$SHARDQ" codec encode --codec bits=8,round=rtn "$T/scalar.npy" "$T/scalar.st"
ok "scalar: decode" "$SHARDQ" codec decode "$T/scalar.st" "$T/scalar.out.npy"
ok "scalar: exact, shape ()" cmp "$T/scalar.npy" "$T/scalar.out.npy"

esc=
mknpy "$T/empty.npy" "(0, 5)"
ok "zero-size: encode" "$SHARDQ" codec encode "$T/empty.npy" "$T/empty.st"
ok "zero-size: decode" "$SHARDQ" codec decode "$T/empty.st" "$T/empty.out.npy"
ok "zero-size: shape (0, 5) kept" cmp "$T/empty.npy" "$T/empty.out.npy"
ok "zero-size: stats" stdout_has '"n":0,"groups":0,"bytes":0,"bits_per_element":0,"rel_l2":0,"mse":0' \
  "$SHARDQ" codec stats --json "$T/empty.npy"

esc=
i=0
while test $i -lt 300; do f32 0 0; i=$((i + 1)); done
mknpy "$T/zeros.npy" "(300,)"
ok "all zeros: stats, relative error 0, SNR inf, cosine 1" stdout_has \
  '"rel_l2":0,"mse":0,"max_abs_error":0,"snr_db":null,"cosine":1,"mean_error":0' \
  "$SHARDQ" codec stats --json --codec kind=minmax "$T/zeros.npy"
ok "all zeros: table says inf" stdout_has "inf dB" "$SHARDQ" codec stats "$T/zeros.npy"
ok "all zeros: round trip" "$SHARDQ" codec encode "$T/zeros.npy" "$T/zeros.st"
ok "all zeros: decode" "$SHARDQ" codec decode "$T/zeros.st" "$T/zeros.out.npy"
ok "all zeros: exact" cmp "$T/zeros.npy" "$T/zeros.out.npy"

ok "stats table lists every figure" sh -c '"$1" codec stats "$2" >"$3" &&
  for k in "relative L2 error" MSE "max abs error" SNR "cosine similarity" \
    "mean signed error" "bits per element" bytes; do grep -F "$k" "$3" >/dev/null || exit 1; done' \
  - "$SHARDQ" "$T/x.npy" "$T/table"

finish
