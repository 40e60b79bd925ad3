# tests/lib.sh -- helpers for the shell tests. Source it, run checks, finish:
#
#   . "$SHARDQ_SRCDIR/tests/lib.sh"
#   ok "round trip" "$SHARDQ" codec ...
#   expect_fail_with 2 "unknown codec" "$SHARDQ" codec --spec nonsense
#   finish
#
# Each check prints one TAP-like line, `ok N - DESC` or `not ok N - DESC`,
# which .ci/run counts. A command's own output goes to a file and is shown,
# as `# ` lines, only when its check fails, so it can never fake a result.
# The environment comes from AM_TESTS_ENVIRONMENT (Makefile.am): SHARDQ is the
# binary, SHARDQ_SRCDIR the source tree, GOLDEN_DIR tests/golden.

sq_n=0
sq_failed=0
sq_tmp=$(mktemp -d "${TMPDIR:-/tmp}/shardq-test.XXXXXX") || exit 99
trap 'rm -rf "$sq_tmp"' EXIT

# A scratch directory that is removed when the test exits.
TEST_TMPDIR=$sq_tmp

sq_report() { # PASSED(0|1) DESC
  sq_n=$((sq_n + 1))
  if test "$1" -eq 0; then
    echo "ok $sq_n - $2"
  else
    sq_failed=$((sq_failed + 1))
    echo "not ok $sq_n - $2"
    for f in "$sq_tmp/out" "$sq_tmp/err"; do
      test -s "$f" && sed 's/^/# /' "$f"
    done
  fi
  return 0
}

# ok DESC CMD...: CMD must exit 0.
ok() {
  sq_desc=$1
  shift
  if "$@" >"$sq_tmp/out" 2>"$sq_tmp/err"; then
    sq_report 0 "$sq_desc"
  else
    echo "exit status $?" >>"$sq_tmp/err"
    sq_report 1 "$sq_desc"
  fi
}

# expect_fail_with STATUS PATTERN CMD...: CMD must exit with STATUS (a number,
# or `nonzero` for any failure) and its stderr must contain PATTERN (a fixed
# string, not a regex). A crash (status > 128) never passes.
expect_fail_with() {
  sq_want=$1
  sq_pat=$2
  shift 2
  sq_desc="fails ($sq_want) with '$sq_pat': $*"
  "$@" >"$sq_tmp/out" 2>"$sq_tmp/err"
  sq_got=$?
  if test "$sq_got" -eq 0 || test "$sq_got" -gt 128; then
    echo "exit status $sq_got" >>"$sq_tmp/err"
    sq_report 1 "$sq_desc"
  elif test "$sq_want" != nonzero && test "$sq_got" -ne "$sq_want"; then
    echo "exit status $sq_got, expected $sq_want" >>"$sq_tmp/err"
    sq_report 1 "$sq_desc"
  elif ! grep -F -e "$sq_pat" "$sq_tmp/err" >/dev/null; then
    echo "stderr lacks: $sq_pat" >>"$sq_tmp/err"
    sq_report 1 "$sq_desc"
  else
    sq_report 0 "$sq_desc"
  fi
}

# cli_env: what most command tests start from: T, the scratch directory; no
# progress lines on stderr; no database named by the caller's SHARDQ_DB.
cli_env() {
  T=$TEST_TMPDIR
  SHARDQ_PROGRESS=0
  export SHARDQ_PROGRESS
  unset SHARDQ_DB
}

# need_sqlite3: tests that write or read a store behind shardq's back use
# the sqlite3 tool (Debian package sqlite3, which ./bootstrap --deps
# installs); without it they cannot run (exit 99, automake's hard error).
need_sqlite3() {
  if ! command -v sqlite3 >/dev/null 2>&1; then
    echo "error: no sqlite3 command (apt-get install sqlite3, or ./bootstrap --deps)" >&2
    exit 99
  fi
}

# sweep_tiny: the sweep tests' trace, $T/traces/tiny (3 steps of 4 workers,
# 2x2, three small tensors), made once; then their recipe's head on stdout
# (a replay of it, seeds 1 and 2, grid g: sdp4bit's gradients at 3 to 5
# bits), for the test to go on from.
sweep_tiny() {
  if ! test -d "$T/traces/tiny"; then
    mkdir -p "$T/traces"
    "$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 \
      --params "a:128x64,b:4096,c:100" "$T/traces/tiny" >/dev/null || return 1
  fi
  printf '%s\n' '[sweep]' 'name = small' 'trace = traces/tiny' 'seeds = 1, 2' '' \
    '[grid g]' 'presets = sdp4bit' 'paths = grad' 'grad.bits = 3..5'
}

# skip_all REASON: the whole test does not apply here (automake's SKIP).
skip_all() {
  echo "SKIP: $*"
  exit 77
}

# pyjson DESC FILE CODE: CODE (python3) runs with d = the JSON object of
# FILE and must not raise (assert with the values, so a failure shows them).
pyjson() {
  ok "$1" python3 -c "import json, math, sys
d = json.load(open(sys.argv[1]))
$3" "$2"
}

# pyrun DESC CODE ARGS...: CODE (python3, with csv, io, json, math, sqlite3
# and sys imported) runs with sys.argv[1:] = ARGS and must not raise.
pyrun() {
  sq_d=$1
  sq_code=$2
  shift 2
  ok "$sq_d" python3 -c "import csv, io, json, math, sqlite3, sys
$sq_code" "$@"
}

# ro_run CMD...: CMD as the unprivileged user nobody when the test runs as
# root (root ignores file permissions, so a read-only file would be written),
# as it is otherwise. Where CMD is $SHARDQ, nobody runs a copy of the binary
# and its library in the scratch directory: the checkout itself may lie where
# nobody cannot enter (a clone in root's home, mode 700).
if test "$(id -u)" -eq 0; then
  ro_run() {
    if test "$1" = "${SHARDQ:-}"; then
      shift
      sq_ro_bin || return 99
      set -- env LD_LIBRARY_PATH="$sq_ro_dir" "$sq_ro_dir/shardq" "$@"
    fi
    if command -v setpriv >/dev/null 2>&1; then
      setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
    else
      su -s /bin/sh nobody -c "$(printf '%q ' "$@")"
    fi
  }
else
  ro_run() { "$@"; }
fi

# sq_ro_bin: copies the shardq program that $SHARDQ runs (the libtool wrapper's
# real binary beside libshardq, or $SHARDQ itself) into $sq_ro_dir, which
# every user can read and enter, once per test.
sq_ro_dir=$sq_tmp/ro-bin
sq_ro_bin() {
  test -x "$sq_ro_dir/shardq" && return 0
  mkdir -p "$sq_ro_dir" || return 1
  if test -x "$(dirname "$SHARDQ")/.libs/shardq"; then
    cp "$(dirname "$SHARDQ")/.libs/shardq" "$sq_ro_dir/" || return 1
    for sq_lib in "${SHARDQ_BUILDDIR:-$(dirname "$SHARDQ")/..}"/.libs/libshardq.so*; do
      test -e "$sq_lib" && { cp -P "$sq_lib" "$sq_ro_dir/" || return 1; }
    done
  else
    cp "$SHARDQ" "$sq_ro_dir/shardq" || return 1
  fi
  chmod -R a+rX "$sq_ro_dir" && chmod a+x "$sq_tmp" || return 1
  if ! setpriv --reuid=65534 --regid=65534 --clear-groups \
    env LD_LIBRARY_PATH="$sq_ro_dir" "$sq_ro_dir/shardq" --help >/dev/null 2>&1 &&
    ! su -s /bin/sh nobody -c "LD_LIBRARY_PATH='$sq_ro_dir' '$sq_ro_dir/shardq' --help" >/dev/null 2>&1; then
    echo "error: nobody cannot run the copy of shardq in $sq_ro_dir (is ${TMPDIR:-/tmp} closed to other users?)" >&2
    return 1
  fi
}

# finish: the plan line, then the exit status automake's harness reads.
finish() {
  echo "1..$sq_n"
  if test "$sq_n" -eq 0; then
    echo "# no checks ran"
    exit 1
  fi
  test "$sq_failed" -eq 0 || exit 1
  exit 0
}

# Every test runs the shardq binary and reads JSON with python3 (which
# ./bootstrap --deps installs): without them it cannot run at all (exit 99,
# automake's hard error), rather than pass or skip.
if test -n "${SHARDQ:-}" && ! test -x "$SHARDQ"; then
  echo "error: no shardq binary at $SHARDQ (set SHARDQ)" >&2
  exit 99
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "error: python3 is needed (apt-get install python3)" >&2
  exit 99
fi
