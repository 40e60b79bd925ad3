#!/bin/sh
# tests/python.sh -- the Python package's pytest suite (python/tests), run
# with Debian's python3 (python3-torch, -numpy, -cffi, -pytest) on the
# package built against this tree (python-build/, Makefile.am). Every pytest
# test is one `ok`/`not ok` line (python/tests/conftest.py writes them).
# Under the sanitizer build, tests/python_env.sh preloads the sanitizers.
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
. "$SHARDQ_SRCDIR/tests/python_env.sh"
test -f "$SHARDQ_BUILDDIR/python-build/shardq/.built" || {
  echo "error: the Python package is not built: make python-build/shardq/.built" >&2
  exit 99
}

PYTHONPATH="$SHARDQ_BUILDDIR/python-build${PYTHONPATH:+:$PYTHONPATH}"
SHARDQ_TAP="$T/tap"
export PYTHONPATH SHARDQ_TAP
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
