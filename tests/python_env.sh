# python_env.sh -- what a test needs to run Python on this tree's libshardq
# (sourced by tests/python.sh and tests/api.sh): PY, the interpreter
# (configure's PYTHON, Debian's python3 by default), and under the
# sanitizer build the sanitizers' runtimes, which must be the first
# libraries the interpreter loads: they are preloaded, with leak detection
# off (the interpreter and PyTorch keep memory until exit by design) and
# with their own false alarms about PyTorch's C++ silenced.
PY=${SHARDQ_PYTHON:-python3}
"$PY" -c "import numpy, cffi, pytest, torch" >"$TEST_TMPDIR/imports" 2>&1 || {
  cat "$TEST_TMPDIR/imports" >&2
  echo "error: $PY lacks numpy, cffi, pytest or torch: install python3-numpy python3-cffi python3-pytest python3-torch (./bootstrap --deps)" >&2
  exit 99
}
py_preload=
for rt in asan ubsan; do
  so=$(ldd "$SHARDQ_BUILDDIR/.libs/libshardq.so" 2>/dev/null |
    sed -n "s/^[[:space:]]*lib$rt\.so[^ ]* => \([^ ]*\) .*/\1/p")
  test -n "$so" && py_preload="${py_preload:+$py_preload:}$so"
done
if test -n "$py_preload"; then
  LD_PRELOAD=$py_preload
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:alloc_dealloc_mismatch=0:detect_odr_violation=0"
  export LD_PRELOAD ASAN_OPTIONS
fi
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
