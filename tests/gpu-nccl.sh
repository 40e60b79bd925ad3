#!/usr/bin/env bash
# gpu-nccl.sh -- verify the NCCL transport on a machine with a GPU: find
# NCCL and MPI, configure a build of its own with both (--with-nccl=yes),
# build, and run the tests that need them:
#   tests/check_gpu_nccl  nccl-inproc against the CPU, every preset (with
#                         SHARDQ_NCCL_SELF's sends to a GPU's own rank, NCCL
#                         runs even on one GPU), a job of one MPI rank
#   tests/cli_nccl.sh     `shardq world` digests under mpirun --transport nccl
#                         (as many ranks as GPUs allow) and nccl-inproc
#   tests/check_gpu_world, tests/check_plan   the GPU world and the deferral rule
# then times one world in process against nccl-inproc. Prints every log.
#
#   bash tests/gpu-nccl.sh [BUILD_DIR]
# (default: the source tree itself when it is configured, else build-nccl in it)
#
# On a machine without autotools, build the tree elsewhere first, or give the
# script a configured build directory; CPPFLAGS, LDFLAGS and PKG_CONFIG_PATH
# from the environment are kept (for libraries installed outside /usr).
# NCCL comes from the CUDA root, /usr, or Python's nvidia-nccl wheel; MPI
# from mpicc or pkg-config. Without MPI nothing of
# NCCL is built (configure needs it): the script says so and exits 77.
# Exit status: that of the tests (0 when all passed or skipped).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if test $# -ge 1; then build=$1
elif test -f "$src/config.status"; then build=$src # an in-tree build, as configured
else build=$src/build-nccl; fi
say() { printf '=== %s\n' "$*"; }
logs=$(mktemp -d "${TMPDIR:-/tmp}/gpu-nccl.XXXXXX") || exit 1

say "machine"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || true
command -v nvcc >/dev/null && nvcc --version | tail -1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
echo "GPUs: ${ngpu:-0}; ranks of --transport nccl need one each (1x2 needs 2, 2x2 needs 4)"

# --- NCCL: header and library ------------------------------------------------
nccl_inc= nccl_lib=
cuda_root=$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")
for d in "$cuda_root" /usr/local/cuda /usr; do
  if test -f "$d/include/nccl.h"; then nccl_inc=$d/include; break; fi
done
if test -z "$nccl_inc"; then
  py=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null \
       || python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  if test -n "$py" && test -f "$py/include/nccl.h"; then
    nccl_inc=$py/include
    # a wheel ships libnccl.so.2 alone: -lnccl needs the plain name
    mkdir -p "$build/nccl-lib"
    ln -sf "$py/lib/libnccl.so.2" "$build/nccl-lib/libnccl.so"
    nccl_lib=$build/nccl-lib
    export LDFLAGS="-L$nccl_lib -Wl,-rpath,$py/lib ${LDFLAGS:-}"
    export LD_LIBRARY_PATH="$py/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
if test -z "$nccl_inc"; then
  echo "SKIP: no nccl.h (CUDA root, /usr, Python's nvidia-nccl): nothing to verify"
  exit 77
fi
echo "nccl.h: $nccl_inc ($(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *//p' "$nccl_inc/nccl.h" | paste -sd.))"
export CPPFLAGS="-I$nccl_inc ${CPPFLAGS:-}"

# --- MPI -------------------------------------------------------------------------
if ! command -v mpicc >/dev/null && ! pkg-config --exists ompi-c mpich 2>/dev/null; then
  echo "SKIP: no MPI (mpicc or pkg-config ompi-c/mpich): NCCL is built only with MPI"
  exit 77
fi
command -v mpirun >/dev/null && mpirun --version 2>&1 | head -1
# Open MPI refuses root without these; the tests add --oversubscribe themselves
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# --- build -----------------------------------------------------------------------
mkdir -p "$build" && cd "$build" || exit 1
if ! test -f Makefile; then
  test -x "$src/configure" || (cd "$src" && ./bootstrap) || exit 1
  say "configure --with-cuda --with-nccl=yes"
  "$src/configure" --with-cuda --with-nccl=yes ${CONFIGURE_FLAGS:-} >"$logs/configure.log" 2>&1 ||
    { tail -40 "$logs/configure.log"; exit 1; }
fi
grep -E '^ +(CUDA|MPI|NCCL) ' config.log 2>/dev/null | tail -3
say "make"
make -j"$(nproc)" >"$logs/make.log" 2>&1 || { tail -60 "$logs/make.log"; exit 1; }
grep -iE 'warning' "$logs/make.log" | head -20

# --- tests -----------------------------------------------------------------------
tests="tests/check_gpu_nccl tests/cli_nccl.sh tests/check_gpu_world tests/check_plan"
say "make check TESTS=\"$tests\""
CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-600} make -j1 check TESTS="$tests" >"$logs/check.log" 2>&1
rc=$?
grep -E '^(PASS|FAIL|SKIP|ERROR|XPASS|XFAIL):' "$logs/check.log"
for t in $tests; do
  log=${t%.sh}.log
  say "$log"
  grep -vE '^ok ' "$log" 2>/dev/null | head -80
  case $t in *.sh) echo "($(grep -c '^ok ' "$log" 2>/dev/null) ok lines)" ;; esac
  cp "$log" "$logs/" 2>/dev/null
done

# --- one timing: the world's copies against NCCL in one process ----------------
if test "${ngpu:-0}" -ge 1; then
say "timing: 2x4, 2^24 elements, 3 steps, workers on every GPU (seconds of the collectives)"
for tr in inproc nccl-inproc; do
  echo "--transport $tr:"
  ./src/shardq world --workers 2x4 --elements 16777216 --run --device cuda --transport "$tr" \
    >"$logs/time-$tr.txt" 2>&1 || tail -3 "$logs/time-$tr.txt"
  sed -n '/wall time/,$p' "$logs/time-$tr.txt"
done
fi
if test "${ngpu:-0}" -ge 2; then
  echo "--transport nccl, mpirun -np 2 (1x2):"
  mpirun --oversubscribe -np 2 ./src/shardq world --workers 1x2 --elements 16777216 --run \
    --transport nccl 2>&1 | sed -n '/wall time/,$p'
fi
echo "logs: $logs"
test -n "${OUT:-}" && cp -r "$logs" "$OUT/gpu-nccl-logs" 2>/dev/null
exit $rc
