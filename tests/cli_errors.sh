# cli_errors.sh -- every way `shardq` can be misused or fed a bad file must
# end in a clear message and the right exit status: 2 for usage errors
# (unknown command or option, malformed value or codec spec), 1 for runtime
# errors (unreadable, malformed or non-finite input, a lying safetensors
# file, a failed write), never a crash, and never a damaged output file.
#
# Environment: SHARDQ (the binary) and SHARDQ_SRCDIR (or automake's srcdir).

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
S=$SHARDQ

# o BYTE: appends the printf escape of BYTE to $esc; word BITS: 32 bits LE.
o() { esc="$esc\\$((($1 >> 6) & 7))$((($1 >> 3) & 7))$(($1 & 7))"; }
word() { o $(($1 & 255)); o $((($1 >> 8) & 255)); o $((($1 >> 16) & 255)); o $((($1 >> 24) & 255)); }

# mknpy FILE DICT [MAJOR]: a .npy file with header DICT (padded like NumPy's)
# and the data escaped in $esc.
mknpy() {
  data=$esc
  major=${3:-1}
  if test "$major" = 1; then pre=10; else pre=12; fi
  hl=$((((pre + ${#2} + 1 + 63) / 64) * 64 - pre))
  esc=
  o $((hl & 255))
  o $((hl >> 8))
  test "$major" = 1 || { o 0; o 0; }
  {
    printf '\223NUMPY'
    esc2=$esc
    esc=
    o "$major"
    o 0
    printf "$esc$esc2"
    printf '%s' "$2"
    printf "%$((hl - ${#2} - 1))s\n" ""
    printf "$data"
  } >"$1"
  esc=
}

# mkst FILE JSON NBYTES: a safetensors file with header JSON and NBYTES of
# zero data.
mkst() {
  esc=
  k=0
  while test $k -lt 8; do o $(((${#2} >> (8 * k)) & 255)); k=$((k + 1)); done
  {
    printf "$esc"
    printf '%s' "$2"
    dd if=/dev/zero bs=1 count="$3" 2>/dev/null
  } >"$1"
  esc=
}

F4="{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
esc=
word 1065353216; word 1073741824; word 3225419776; word 1082130432 # 1, 2, -3, 4
good_data=$esc
mknpy "$T/good.npy" "$F4"

# ---------------------------------------------------------------------------
# Usage errors: exit 2
# ---------------------------------------------------------------------------

expect_fail_with 2 "usage: shardq COMMAND" "$S"
expect_fail_with 2 "unknown command 'frobnicate'" "$S" frobnicate
expect_fail_with 2 "did you mean 'codec'?" "$S" codek
expect_fail_with 2 "unknown option '--frob'" "$S" --frob
expect_fail_with 2 "unknown command 'nosuch'" "$S" help nosuch
expect_fail_with 2 "usage: shardq codec SUBCOMMAND" "$S" codec
expect_fail_with 2 "unknown subcommand 'encdoe' (did you mean 'encode'?)" "$S" codec encdoe
expect_fail_with 2 "unknown option '--sed' (did you mean '--seed'?)" "$S" codec encode --sed 1 "$T/good.npy" "$T/o.st"
expect_fail_with 2 "ambiguous option '--s' (could be --seed, --step, --site)" "$S" codec stats --s 1 "$T/good.npy"
expect_fail_with 2 "unknown option '--json'" "$S" codec encode --json "$T/good.npy" "$T/o.st"
expect_fail_with 2 "unknown option '-x'" "$S" codec stats -x "$T/good.npy"
expect_fail_with 2 "option '--seed' needs a value" "$S" codec stats "$T/good.npy" --seed
expect_fail_with 2 "missing argument (expected IN.npy OUT.safetensors)" "$S" codec encode "$T/good.npy"
expect_fail_with 2 "unexpected argument 'extra'" "$S" codec stats "$T/good.npy" extra
expect_fail_with 2 "unexpected argument 'x'" "$S" codec info x
expect_fail_with 2 "missing argument" "$S" codec decode

# Codec specs: the core's message, naming the key, after "--codec: ".
spec_fails() { # PATTERN SPEC: encode, stats and info all refuse SPEC
  expect_fail_with 2 "$1" "$S" codec encode --codec "$2" "$T/good.npy" "$T/o.st"
  expect_fail_with 2 "$1" "$S" codec stats --codec "$2" "$T/good.npy"
  expect_fail_with 2 "$1" "$S" codec info --codec "$2"
}
spec_fails "--codec: unknown key 'colour'" colour=red
spec_fails "--codec: bits=9" bits=9
spec_fails "--codec: group=0" group=0
spec_fails "--codec: hadamard=3" hadamard=3
spec_fails "--codec: '%%%': expected key=value" %%%
expect_fail_with 2 "--codec: kind=" "$S" codec info --codec kind=huge
expect_fail_with 2 "--codec: round=" "$S" codec info --codec round=up
expect_fail_with 2 "--codec: bits: given twice" "$S" codec info --codec bits=4,bits=4,

# Numbers: digits only, fully consumed, in range.
expect_fail_with 2 "--seed: 'abc' is not an unsigned integer" "$S" codec stats --seed abc "$T/good.npy"
expect_fail_with 2 "--seed: '-1' is not an unsigned integer" "$S" codec stats --seed -1 "$T/good.npy"
expect_fail_with 2 "--seed: ' 1' is not an unsigned integer" "$S" codec stats --seed " 1" "$T/good.npy"
expect_fail_with 2 "--seed: '12x' is not an unsigned integer" "$S" codec stats --seed 12x "$T/good.npy"
expect_fail_with 2 "--seed: '18446744073709551616' is larger than" "$S" codec stats --seed 18446744073709551616 "$T/good.npy"
expect_fail_with 2 "--step: '4294967296' is larger than 4294967295" "$S" codec encode --step 4294967296 "$T/good.npy" "$T/o.st"
expect_fail_with 2 "--worker: '16777216' is larger than 16777215" "$S" codec encode --worker 16777216 "$T/good.npy" "$T/o.st"
expect_fail_with 2 "--site: '256' is larger than 255" "$S" codec encode --site 256 "$T/good.npy" "$T/o.st"
expect_fail_with 2 "--site: unknown site 'grad'" "$S" codec encode --site grad "$T/good.npy" "$T/o.st"
expect_fail_with 2 "--n: '1e6' is not an unsigned integer" "$S" codec info --n 1e6
expect_fail_with 2 "--n: '' is not an unsigned integer" "$S" codec info --n ""
ok "no output file after usage errors" test ! -e "$T/o.st"

# ---------------------------------------------------------------------------
# Malformed .npy input: exit 1, the file and the field named
# ---------------------------------------------------------------------------

bad() { # NAME DICT [MAJOR]: writes $T/NAME with the good data
  esc=$good_data
  mknpy "$T/$1" "$2" "$3"
}
printf 'NUMPY1234567890' >"$T/magic.npy"
expect_fail_with 1 "$T/magic.npy: not a .npy file: bad magic" "$S" codec stats "$T/magic.npy"
: >"$T/empty.npy"
expect_fail_with 1 "$T/empty.npy: not a .npy file: the file is empty" "$S" codec stats "$T/empty.npy"
printf '\223NUMPY\001\000\166' >"$T/trunc.npy"
expect_fail_with 1 "$T/trunc.npy: truncated header" "$S" codec stats "$T/trunc.npy"
printf '\223NUMPY\001\000\166\000{}' >"$T/hlen.npy"
expect_fail_with 1 "$T/hlen.npy: header field 'header_len'" "$S" codec stats "$T/hlen.npy"
bad fortran.npy "{'descr': '<f4', 'fortran_order': True, 'shape': (4,), }"
expect_fail_with 1 "$T/fortran.npy: header field 'fortran_order'" "$S" codec encode "$T/fortran.npy" "$T/o.st"
bad i4.npy "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }"
expect_fail_with 1 "$T/i4.npy: header field 'descr': unsupported dtype '<i4'" "$S" codec stats "$T/i4.npy"
bad key.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'order': 'C'}"
expect_fail_with 1 "$T/key.npy: header: unknown key 'order'" "$S" codec stats "$T/key.npy"
bad nokey.npy "{'descr': '<f4', 'shape': (4,), }"
expect_fail_with 1 "$T/nokey.npy: header field 'fortran_order': missing" "$S" codec stats "$T/nokey.npy"
bad syntax.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (4,) "
expect_fail_with 1 "$T/syntax.npy: header field 'shape': expected ',' or '}'" "$S" codec stats "$T/syntax.npy"
bad short.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"
expect_fail_with 1 "$T/short.npy: data truncated: header promises 20 bytes of <f4, file has 16" "$S" codec stats "$T/short.npy"
bad long.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }" 2
expect_fail_with 1 "$T/long.npy: 4 bytes of trailing data" "$S" codec stats "$T/long.npy"
bad ovf.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536, 65536, 65536), }" 3
expect_fail_with 1 "$T/ovf.npy: header field 'shape': product overflows" "$S" codec stats "$T/ovf.npy"
expect_fail_with 1 "$T/absent.npy: cannot open" "$S" codec encode "$T/absent.npy" "$T/o.st"
expect_fail_with 1 "$T: is a directory" "$S" codec stats "$T"
printf 'abcdefg' >"$T/odd.f32"
expect_fail_with 1 "$T/odd.f32: raw float32 input: file size 7 is not a multiple of 4" "$S" codec stats --raw "$T/odd.f32"

# ---------------------------------------------------------------------------
# Non-finite input: exit 1, the element named, nothing written
# ---------------------------------------------------------------------------

esc=
word 1065353216; word 1065353216; word 1065353216; word 2143289344 # 1, 1, 1, NaN
mknpy "$T/nan.npy" "$F4"
esc=
word 1065353216; word 4286578688; word 1065353216; word 1065353216 # 1, -Inf, 1, 1
mknpy "$T/inf.npy" "$F4"
expect_fail_with 1 "$T/nan.npy: element 3 is NaN (non-finite input is not quantized)" "$S" codec encode "$T/nan.npy" "$T/o.st"
expect_fail_with 1 "$T/inf.npy: element 1 is -Inf" "$S" codec stats "$T/inf.npy"
ok "no output file after a non-finite input" test ! -e "$T/o.st"
printf 'precious' >"$T/keep.st"
expect_fail_with 1 "element 3 is NaN" "$S" codec encode "$T/nan.npy" "$T/keep.st"
ok "a failed encode leaves an existing output alone" sh -c 'test "$(cat "$1")" = precious' - "$T/keep.st"

# ---------------------------------------------------------------------------
# Output errors
# ---------------------------------------------------------------------------

expect_fail_with 1 "$T/no/such/dir/o.st: cannot create" "$S" codec encode "$T/good.npy" "$T/no/such/dir/o.st"
expect_fail_with 1 "$T: is a directory" "$S" codec encode "$T/good.npy" "$T"
if test -w /dev/full; then
  expect_fail_with 1 "/dev/full: write failed" "$S" codec encode "$T/good.npy" /dev/full
fi
ok "no temporary file left behind" sh -c '! ls "$1" | grep -F .tmp.' - "$T"

# ---------------------------------------------------------------------------
# decode: broken and lying safetensors files
# ---------------------------------------------------------------------------

"$S" codec encode "$T/good.npy" "$T/good.st"
dd if="$T/good.st" of="$T/trunc.st" bs=100 count=1 2>/dev/null
expect_fail_with 1 "$T/trunc.st: header length" "$S" codec decode "$T/trunc.st" "$T/o.npy"
size=$(wc -c <"$T/good.st")
dd if="$T/good.st" of="$T/cut.st" bs=$((size - 1)) count=1 2>/dev/null
expect_fail_with 1 "$T/cut.st: tensor 'scales': field 'data_offsets': end 6 beyond the data section (5 bytes)" "$S" codec decode "$T/cut.st" "$T/o.npy"
expect_fail_with 1 "$T/good.npy: this is a NumPy .npy file, not safetensors" "$S" codec decode "$T/good.npy" "$T/o.npy"
expect_fail_with 1 "$T/absent.st: cannot open" "$S" codec decode "$T/absent.st" "$T/o.npy"

SPEC=kind=sym,bits=4,group=128,round=sr,hadamard=0,levels=sdp4bit,scale=fp32
META="\"format\":\"shardq.codec/1\",\"codec\":\"$SPEC\",\"n\":\"4096\",\"shape\":\"[64, 64]\""
CODES='"codes":{"dtype":"U8","shape":[2048],"data_offsets":[0,2048]}'
SCALES='"scales":{"dtype":"F32","shape":[32],"data_offsets":[2048,2176]}'

mkst "$T/ok.st" "{\"__metadata__\":{$META},$CODES,$SCALES}" 2176
ok "a hand-made file decodes" "$S" codec decode "$T/ok.st" "$T/ok.npy"
ok "... to shape (64, 64)" grep -F "'shape': (64, 64), }" "$T/ok.npy"

mkst "$T/lie.st" "{\"__metadata__\":{$META},$CODES,\"scales\":{\"dtype\":\"F32\",\"shape\":[31],\"data_offsets\":[2048,2172]}}" 2172
expect_fail_with 1 "$T/lie.st: tensor 'scales': 31 values, codec $SPEC for n=4096 needs 32" "$S" codec decode "$T/lie.st" "$T/o.npy"
mkst "$T/lie2.st" "{\"__metadata__\":{$META},\"codes\":{\"dtype\":\"U8\",\"shape\":[2047],\"data_offsets\":[0,2047]},\"scales\":{\"dtype\":\"F32\",\"shape\":[32],\"data_offsets\":[2047,2175]}}" 2175
expect_fail_with 1 "$T/lie2.st: tensor 'codes': 2047 values, codec $SPEC for n=4096 needs 2048" "$S" codec decode "$T/lie2.st" "$T/o.npy"
mkst "$T/dt.st" "{\"__metadata__\":{$META},$CODES,\"scales\":{\"dtype\":\"BF16\",\"shape\":[32],\"data_offsets\":[2048,2112]}}" 2112
expect_fail_with 1 "$T/dt.st: tensor 'scales': dtype BF16, codec $SPEC needs F32" "$S" codec decode "$T/dt.st" "$T/o.npy"
mkst "$T/miss.st" "{\"__metadata__\":{$META},$CODES}" 2048
expect_fail_with 1 "$T/miss.st: tensor 'scales': missing" "$S" codec decode "$T/miss.st" "$T/o.npy"
mkst "$T/extra.st" "{\"__metadata__\":{$META},$CODES,$SCALES,\"offsets\":{\"dtype\":\"F32\",\"shape\":[32],\"data_offsets\":[2176,2304]}}" 2304
expect_fail_with 1 "$T/extra.st: tensor 'offsets': unexpected" "$S" codec decode "$T/extra.st" "$T/o.npy"
mkst "$T/mm.st" "{\"__metadata__\":{$(echo "$META" | sed 's/kind=sym/kind=minmax/')},$CODES,$SCALES}" 2176
expect_fail_with 1 "$T/mm.st: tensor 'offsets': missing" "$S" codec decode "$T/mm.st" "$T/o.npy"
mkst "$T/fmt.st" "{\"__metadata__\":{$(echo "$META" | sed 's/codec\/1/codec\/9/')},$CODES,$SCALES}" 2176
expect_fail_with 1 "$T/fmt.st: __metadata__ 'format': 'shardq.codec/9'" "$S" codec decode "$T/fmt.st" "$T/o.npy"
mkst "$T/spec.st" "{\"__metadata__\":{$(echo "$META" | sed 's/bits=4/bits=9/')},$CODES,$SCALES}" 2176
expect_fail_with 1 "$T/spec.st: __metadata__ 'codec': bits=9" "$S" codec decode "$T/spec.st" "$T/o.npy"
mkst "$T/n.st" "{\"__metadata__\":{$(echo "$META" | sed 's/"4096"/"4096x"/')},$CODES,$SCALES}" 2176
expect_fail_with 1 "$T/n.st: __metadata__ 'n': '4096x' is not an unsigned integer" "$S" codec decode "$T/n.st" "$T/o.npy"
mkst "$T/shape.st" "{\"__metadata__\":{$(echo "$META" | sed 's/64, 64/64, 65/')},$CODES,$SCALES}" 2176
expect_fail_with 1 "$T/shape.st: __metadata__ 'shape': [64, 65] holds 4160 elements, 'n' says 4096" "$S" codec decode "$T/shape.st" "$T/o.npy"
mkst "$T/nometa.st" "{$CODES,$SCALES}" 2176
expect_fail_with 1 "$T/nometa.st: __metadata__ 'format': missing" "$S" codec decode "$T/nometa.st" "$T/o.npy"
mkst "$T/json.st" "{\"__metadata__\":{$META},$CODES,$SCALES" 2176
expect_fail_with 1 "$T/json.st: header: invalid JSON" "$S" codec decode "$T/json.st" "$T/o.npy"
mkst "$T/ovl.st" "{\"__metadata__\":{$META},$CODES,\"scales\":{\"dtype\":\"F32\",\"shape\":[32],\"data_offsets\":[2000,2128]}}" 2128
expect_fail_with 1 "$T/ovl.st: tensor 'scales': field 'data_offsets': [2000, 2128] overlaps tensor 'codes'" "$S" codec decode "$T/ovl.st" "$T/o.npy"
# Metadata that is not finite, or that decodes past fp32: refused, by name.
hdr=$((8 + $(head -c 8 "$T/ok.st" | od -An -tu8 | tr -d ' ')))
cp "$T/ok.st" "$T/nan.st"
printf '\000\000\300\177' | dd of="$T/nan.st" bs=1 seek=$((hdr + 2048 + 4 * 5)) conv=notrunc 2>/dev/null
expect_fail_with 1 "$T/nan.st: tensor 'scales': group 5 is NaN" "$S" codec decode "$T/nan.st" "$T/o.npy"
cp "$T/ok.st" "$T/big.st"
printf '\167' | dd of="$T/big.st" bs=1 seek=$((hdr + 3)) conv=notrunc 2>/dev/null
printf '\377\377\177\177' | dd of="$T/big.st" bs=1 seek=$((hdr + 2048)) conv=notrunc 2>/dev/null
expect_fail_with 1 "$T/big.st: cannot dequantize: " "$S" codec decode "$T/big.st" "$T/o.npy"
ok "no output file after failed decodes" test ! -e "$T/o.npy"

# ---------------------------------------------------------------------------
# Step counts: 0 is refused by name, not read as "all" (issue 36)
# ---------------------------------------------------------------------------

# (bench's --threads and --sizes: tests/cli_bench.sh; a recipe's product:
# tests/cli_sweep.sh)
# --steps 0 is the internal "all" (or nothing at all): refused where it is given
expect_fail_with 2 "--steps: 0: replay at least one step (omit --steps for all)" "$S" replay --no-db --steps 0 "$T/good.npy"
expect_fail_with 2 "--steps: 0: run at least one step" "$S" world --run --steps 0 --elements 64
printf '[sweep]\nname = z\ntrace = good.npy\nsteps = 0\n' >"$T/steps0.ini"
expect_fail_with 2 "steps0.ini: [sweep] steps: 0: replay at least one step (leave steps out for every step of the trace)" \
  "$S" sweep --list "$T/steps0.ini"

# ---------------------------------------------------------------------------
# Readers of recipes, platform files and plug-ins: a regular file only, and
# a line refused at its limit, not read on to its newline (issue 36)
# ---------------------------------------------------------------------------

mkfifo "$T/in.fifo"
expect_fail_with 2 "/dev/zero: not a regular file (a character device)" timeout 60 "$S" sweep --list /dev/zero
expect_fail_with 2 "$T/in.fifo: not a regular file (a FIFO)" timeout 60 "$S" sweep --list "$T/in.fifo"
expect_fail_with 2 "$T: is a directory" "$S" sweep --list "$T"
# one line of 64 GiB (a sparse file of NULs): the old reader read it all
if truncate -s 64G "$T/endless.ini" 2>/dev/null; then
  expect_fail_with 2 "endless.ini: line 1: longer than 197 characters" timeout 60 "$S" sweep --list "$T/endless.ini"
  rm -f "$T/endless.ini"
fi
expect_fail_with 1 "plug-in $T/in.fifo: not a regular file (a FIFO)" timeout 60 "$S" --plugin "$T/in.fifo" schemes
expect_fail_with 1 "plug-in /dev/zero: not a regular file (a character device)" "$S" --plugin /dev/zero schemes
expect_fail_with 1 "plug-in $T: is a directory" "$S" --plugin "$T" schemes
# a platform line longer than inih's buffer was cut, and the rest read as
# a line of its own: the error named the next line
{
  sed -n '1,/^\[intra\]/p' "$SHARDQ_SRCDIR/experiments/platforms/a100-slingshot10.ini" | sed '$d'
  printf '; %0500d\n' 0
  sed -n '/^\[intra\]/,$p' "$SHARDQ_SRCDIR/experiments/platforms/a100-slingshot10.ini"
} >"$T/longline.ini"
line=$(grep -n '^; 000' "$T/longline.ini" | cut -d: -f1)
expect_fail_with 2 "$T/longline.ini: line $line: longer than 198 characters" "$S" model --platform "$T/longline.ini"
expect_fail_with 2 "$T/in.fifo: not a regular file (a FIFO)" timeout 60 "$S" model --platform "$T/in.fifo"

# ---------------------------------------------------------------------------
# Names that are not UTF-8: refused with the file, the name (escaped) and
# the offset of the bad byte in it, never printed as JSON (issue 36)
# ---------------------------------------------------------------------------

# mkst_bytes FILE HEADER NBYTES: as mkst, HEADER a printf format (escapes
# for the bytes that are not UTF-8), its length counted in bytes
mkst_bytes() {
  printf "$2" >"$T/hdr.bin"
  n=$(wc -c <"$T/hdr.bin")
  esc=
  k=0
  while test $k -lt 8; do o $(((n >> (8 * k)) & 255)); k=$((k + 1)); done
  {
    printf "$esc"
    cat "$T/hdr.bin"
    dd if=/dev/zero bs=1 count="$3" 2>/dev/null
  } >"$1"
  esc=
}
T1='{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
mkst_bytes "$T/u1.st" "{\"w\\377\":$T1}" 4
expect_fail_with 1 "$T/u1.st: tensor 'w\\xff': not UTF-8 (byte 1 of the name)" "$S" trace info --json "$T/u1.st"
mkst_bytes "$T/u2.st" "{\"ab\\355\\240\\200\":$T1}" 4
expect_fail_with 1 "$T/u2.st: tensor 'ab\\xed\\xa0\\x80': not UTF-8 (byte 2 of the name)" "$S" trace info --json "$T/u2.st"
mkst_bytes "$T/u3.st" "{\"__metadata__\":{\"k\\300\\200\":\"v\"},\"w\":$T1}" 4
expect_fail_with 1 "$T/u3.st: __metadata__ key 'k\\xc0\\x80': not UTF-8 (byte 1 of the key)" "$S" trace info --json "$T/u3.st"
mkst_bytes "$T/u4.st" "{\"__metadata__\":{\"k\":\"x\\364\\220\\200\\200\"},\"w\":$T1}" 4
expect_fail_with 1 "$T/u4.st: __metadata__ 'k': the value is not UTF-8 (byte 1 of the value" "$S" trace info --json "$T/u4.st"
mkst_bytes "$T/u5.st" "{\"\\303\\251t\\360\\237\\230\\200\":$T1}" 4
ok "a UTF-8 name of 2 and 4 bytes a character is read" "$S" trace info --json "$T/u5.st"
esc=$good_data
mknpy "$T/bad$(printf '\377').npy" "$F4"
expect_fail_with 1 "tensor 'bad\\xff' (the file's name): not UTF-8 (byte 3 of the name)" "$S" trace info --json "$T/bad$(printf '\377').npy"
# a trace directory: its manifest's names, and the rest of it
"$S" trace synth --steps 1 --workers 1 --params a:4 "$T/tr" >/dev/null
sed 's/"name":	"a"/"name":	"\xc3\x28"/' "$T/tr/manifest.json" >"$T/m.json" && mv "$T/m.json" "$T/tr/manifest.json"
expect_fail_with 1 "$T/tr/manifest.json: field 'params': entry 0: name '\\xc3(': not UTF-8 (byte 0 of the name)" \
  "$S" trace info --json "$T/tr"
expect_fail_with 2 "--params: tensor 'a\\xff': not UTF-8 (byte 1 of the name)" "$S" trace synth --params "$(printf 'a\377'):4" "$T/tr2"

# ---------------------------------------------------------------------------
# Refusals name their file and option (issue 36)
# ---------------------------------------------------------------------------

# +-3.4e38: a Hadamard sum leaves fp32; the world alone named no input
esc=
word 2139081118; word 2139081118; word 4286564766; word 2139081118 # 3.4e38 x 3, -3.4e38
mknpy "$T/huge.npy" "$F4"
expect_fail_with 1 "$T/huge.npy: step 0, param 'huge': worker 0 (cpu): " \
  "$S" replay --no-db "$T/huge.npy"
expect_fail_with 1 "$T/huge.npy: cannot quantize: a result does not fit fp32" "$S" codec stats --codec hadamard=4 "$T/huge.npy"
# the model's settings under their options' names
expect_fail_with 2 "--channels 8 is not a multiple of --heads 3" "$S" train --no-db --channels 8 --heads 3
# a layout the cost model cannot use: the options that asked for it
expect_fail_with 2 "--gpus 7, --tp 1, --pp 1: 7 GPUs are not whole nodes of 4 GPUs" "$S" model --gpus 7
expect_fail_with 2 "--gpus 64 (the nodes of --platform), --tp 3, --pp 1: 64 GPUs do not divide" "$S" model --tp 3
# a device that is not there is --device's fault, before any tensor is placed
devices=$("$S" --version | sed -n 's/.*CUDA yes (\([0-9]*\) device.*/\1/p')
if test "${devices:-0}" -eq 0; then
  dev=cuda:7 why="no CUDA device"
else
  dev=cuda:$devices why="no device cuda:$devices"
fi
expect_fail_with 1 "shardq replay: --device $dev: $why" "$S" replay --no-db --device "$dev" "$T/good.npy"
expect_fail_with 1 "shardq train: --device $dev: $why" "$S" train --no-db --steps 1 --device "$dev"
expect_fail_with 1 "shardq world: --device $dev: $why" "$S" world --run --elements 64 --device "$dev"

finish
