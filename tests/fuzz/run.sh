#!/bin/sh
# tests/fuzz/run.sh -- build and run the libFuzzer harnesses of the readers.
#
#   tests/fuzz/run.sh [SECONDS] [safetensors|npy|all]
#
# SECONDS (default 600) is the time of each harness; with "all" (the
# default) the two run at the same time, one core each. Each harness is
# compiled by clang with -fsanitize=fuzzer,address,undefined straight from
# the reader's sources (no configure needed), given a small seed corpus and
# a dictionary of the format's keywords, and run with -max_total_time.
# Everything goes to $FUZZ_OUT (default ./fuzz-out): the binaries, NAME.log,
# the grown corpus in corpus-NAME/, and any crash-*, leak-* or timeout-*
# input. The last lines are one summary per harness (executions, exec/s,
# coverage); the exit status is non-zero when a harness found a crash, a
# sanitizer error, a leak or a timeout (or did not build).
#
# Needs clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev
# or the libclang-rt-dev of your clang version), libcjson-dev and
# Random123 (librandom123-dev), like the build itself.
set -eu

secs=${1:-600}
which=${2:-all}
case $secs in
'' | *[!0-9]*) echo "run.sh: SECONDS must be a whole number, not '$secs'" >&2; exit 2 ;;
esac
case $which in
safetensors | npy) names=$which ;;
all) names="safetensors npy" ;;
*) echo "run.sh: the second argument is safetensors, npy or all, not '$which'" >&2; exit 2 ;;
esac

top=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_OUT:-./fuzz-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
CLANG=${CLANG:-clang}

need_packages() {
    echo "run.sh: $1" >&2
    echo "run.sh: install clang and its libFuzzer runtime, e.g." >&2
    echo "    sudo apt-get install -y clang libclang-rt-14-dev" >&2
    exit 2
}

command -v "$CLANG" >/dev/null 2>&1 || need_packages "$CLANG not found"
# The runtime is a separate package: try it on an empty harness first.
probe=$out/probe.c
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' >"$probe"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$probe" -o "$out/probe" >"$out/probe.log" 2>&1; then
    cat "$out/probe.log" >&2
    need_packages "$CLANG cannot link a fuzzer (-fsanitize=fuzzer,address,undefined)"
fi
rm -f "$probe" "$out/probe" "$out/probe.log"

cjson=$(pkg-config --cflags --libs libcjson 2>/dev/null || echo -lcjson)
# Single-threaded, without OpenMP: the conversion loops' pragmas are then
# ignored, which is what one core per harness wants anyway.
CFLAGS_FUZZ="-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wno-source-uses-openmp
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
SOURCES="src/trace/safetensors.c src/trace/npy.c src/trace/input.c src/trace/wfile.c src/core/dtype.c
  src/core/error.c"

build() {
    # shellcheck disable=SC2086
    (cd "$top" && "$CLANG" $CFLAGS_FUZZ -I include -I src -I src/core $SOURCES "tests/fuzz/fuzz_$1.c" \
        $cjson -lm -o "$out/fuzz_$1")
}

# le64 N: N as 8 bytes little-endian.
le64() {
    n=$1
    i=0
    while [ $i -lt 8 ]; do
        printf "\\$(printf %03o $((n % 256)))"
        n=$((n / 256))
        i=$((i + 1))
    done
}

# st FILE JSON DATA: a safetensors file; DATA is printf-escaped bytes.
st() {
    { le64 ${#2}; printf '%s' "$2"; printf "$3"; } >"$1"
}

# npy FILE MAJOR DICT DATA: a .npy file, header padded to 64 bytes.
npy() {
    pre=$((8 + ($2 == 1 ? 2 : 4)))
    hl=$(( (pre + ${#3} + 1 + 63) / 64 * 64 - pre ))
    {
        printf '\223NUMPY'
        printf "\\$(printf %03o "$2")\\000"
        if [ "$2" = 1 ]; then
            printf "\\$(printf %03o $((hl % 256)))\\$(printf %03o $((hl / 256)))"
        else
            le64 "$hl" | head -c 4
        fi
        printf '%s' "$3"
        printf "%$((hl - ${#3} - 1))s\n" ''
        printf "$4"
    } >"$1"
}

seeds_safetensors() {
    d=$1
    st "$d/empty" '{}' ''
    st "$d/meta" '{"__metadata__":{"format":"x","n":"3"}}      ' ''
    st "$d/f32" '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' \
        '\000\000\200\077\000\000\040\300'
    st "$d/mixed" '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"h":{"dtype":"F16","shape":[2],"data_offsets":[1,5]},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[5,9]},"d":{"dtype":"F64","shape":[1],"data_offsets":[9,17]}}' \
        '\007\000\074\001\000\200\077\001\000\232\231\231\231\231\231\271\077'
    st "$d/zero" '{"z":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]},"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}' \
        '\000\000\000\000\000\000\360\077'
    st "$d/ints" '{"i":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}' \
        '\001\000\000\000\002\000\000\000'
    st "$d/bad" '{"d":{"dtype":"F64","shape":[3],"data_offsets":[0,24]}}' \
        '\000\000\000\000\000\000\360\077\234\165\000\210\074\344\067\176\000\000\000\000\000\000\370\177'
    st "$d/nonfinite" '{"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}' \
        '\000\174\000\176\200\177\300\377'
}

seeds_npy() {
    d=$1
    npy "$d/v1" 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" \
        '\000\000\200\077\000\000\300\177'
    npy "$d/v2" 2 "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }" \
        '\232\231\231\231\231\231\271\077'
    npy "$d/v3" 3 "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }" '\000\074\000\174'
    npy "$d/scalar" 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (), }" '\000\000\200\077'
    npy "$d/zero" 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }" ''
    npy "$d/odd" 2 "{\"shape\": (1L,), 'fortran_order':False,'descr':'<f4'}" '\000\000\200\377'
}

dict_safetensors() {
    for w in '"dtype"' '"shape"' '"data_offsets"' '"__metadata__"' '"F32"' '"F16"' '"BF16"' \
        '"F64"' '"I32"' '"U8"' '"BOOL"' '"F8_E4M3"' '"U64"' '[0,' ']' '{' '}' ':' ',' '1e300' \
        '-1' '1.5' '18446744073709551616' '9007199254740992' '\\u0000' '"\\"'; do
        printf '"%s"\n' "$(printf '%s' "$w" | sed 's/\\/\\\\/g; s/"/\\"/g')"
    done
}

dict_npy() {
    for w in "'descr'" "'fortran_order'" "'shape'" "'<f4'" "'<f8'" "'<f2'" "'>f4'" 'True' \
        'False' '(' ')' ',)' '{' '}' ':' 'L' '18446744073709551615' '4294967296'; do
        printf '"%s"\n' "$w"
    done
    printf '"\\x93NUMPY\\x01\\x00"\n"\\x93NUMPY\\x02\\x00"\n"\\x93NUMPY\\x03\\x00"\n'
}

# run NAME: build, seed, fuzz; leaves NAME.log and NAME.rc in $out.
run() {
    name=$1
    log=$out/$name.log
    if ! build "$name" >"$log" 2>&1; then
        echo "run.sh: fuzz_$name did not build (see $log)" >&2
        echo 2 >"$out/$name.rc"
        return
    fi
    corpus=$out/corpus-$name
    seeds=$out/seeds-$name
    mkdir -p "$corpus" "$seeds"
    "seeds_$name" "$seeds"
    "dict_$name" >"$out/$name.dict"
    rc=0
    "$out/fuzz_$name" "$corpus" "$seeds" -dict="$out/$name.dict" -max_total_time="$secs" \
        -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$out/$name-" >>"$log" 2>&1 || rc=$?
    echo $rc >"$out/$name.rc"
}

rm -f "$out"/*.rc
for name in $names; do
    run "$name" &
done
wait

status=0
for name in $names; do
    log=$out/$name.log
    rc=$(cat "$out/$name.rc" 2>/dev/null || echo 2)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    final=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
    cov=$(printf '%s\n' "$final" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s\n' "$final" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
    found=$(ls "$out/$name-"* 2>/dev/null | head -n 1 || true)
    if [ "$rc" = 0 ] && [ -z "$found" ]; then
        result=ok
    else
        result="FAILED (exit $rc${found:+, $found}; see $log)"
        status=1
    fi
    printf '%s: %s s, %s executions, %s exec/s, cov %s, ft %s: %s\n' "$name" "$secs" \
        "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
exit $status
