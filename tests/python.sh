#!/bin/sh
# tests/python.sh -- the Python package's pytest suite (python/tests), run
# with Debian's python3 (python3-torch, -numpy, -cffi, -pytest) on the
# package built against this tree (python-build/, Makefile.am). Every pytest
# test is one `ok`/`not ok` line (python/tests/conftest.py writes them).
#
# Under the sanitizer build the library and the cffi module carry ASan and
# UBSan, which must be the first libraries the interpreter loads: they are
# preloaded, with leak detection off (the interpreter and PyTorch keep
# memory until exit by design) and their own false alarms silenced.
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
PY=${SHARDQ_PYTHON:-python3}

"$PY" -c "import numpy, cffi, pytest, torch" >"$T/imports" 2>&1 || {
  cat "$T/imports" >&2
  echo "error: $PY lacks numpy, cffi, pytest or torch: install python3-numpy python3-cffi python3-pytest python3-torch (./bootstrap --deps)" >&2
  exit 99
}
test -f "$SHARDQ_BUILDDIR/python-build/shardq/.built" || {
  echo "error: the Python package is not built: make python-build/shardq/.built" >&2
  exit 99
}

lib="$SHARDQ_BUILDDIR/.libs/libshardq.so"
preload=
for rt in asan ubsan; do
  so=$(ldd "$lib" 2>/dev/null | sed -n "s/^[[:space:]]*lib$rt\.so[^ ]* => \([^ ]*\) .*/\1/p")
  test -n "$so" && preload="${preload:+$preload:}$so"
done
if test -n "$preload"; then
  LD_PRELOAD=$preload
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:alloc_dealloc_mismatch=0:detect_odr_violation=0"
  export LD_PRELOAD ASAN_OPTIONS
fi

PYTHONPATH="$SHARDQ_BUILDDIR/python-build${PYTHONPATH:+:$PYTHONPATH}"
PYTHONDONTWRITEBYTECODE=1
SHARDQ_TAP="$T/tap"
export PYTHONPATH PYTHONDONTWRITEBYTECODE SHARDQ_TAP
: >"$SHARDQ_TAP"
"$PY" -m pytest -p no:cacheprovider -q -rfE "$SHARDQ_SRCDIR/python/tests" >"$T/pytest.out" 2>&1
rc=$?
cat "$T/pytest.out" | sed 's/^/# /'
cat "$SHARDQ_TAP"
n=$(grep -c '^ok \|^not ok ' "$SHARDQ_TAP")
if test "$n" -eq 0; then
  echo "not ok 1 - pytest ran no test (exit status $rc)"
  exit 1
fi
echo "1..$n"
test "$rc" -eq 0
