#!/bin/sh
# cli_nccl.sh -- `shardq world` over NCCL gives the bytes of the in-process
# CPU run: under mpirun, one rank per GPU (--transport nccl), and in one
# process over every GPU (--transport nccl-inproc), every preset's
# per-worker digests (the bytes sent, the reduced partition, the weights),
# traffic and error statistics equal those of --transport inproc on the
# CPU, on 1x2 and 2x2 (a topology with more ranks than GPUs is left out and
# said so: NCCL takes one rank per GPU), and in one process with every
# message through NCCL (SHARDQ_NCCL_SELF=1, sends to a GPU's own rank: what
# a machine of one GPU can run of NCCL). Skips (77) without NCCL in the
# build or without a GPU, after checking that the refusal says why.
#
# CLI_NCCL_TRY_MPI=1 runs the same comparisons with mpi and inproc in place
# of nccl and nccl-inproc, on the CPU: a check of this script where there
# is no GPU.
. "$SHARDQ_SRCDIR/tests/lib.sh"

T=$TEST_TMPDIR
NCCL=nccl
NCCL_INPROC=nccl-inproc
DEVICE=
if test "${CLI_NCCL_TRY_MPI:-0}" = 1; then
  NCCL=mpi
  NCCL_INPROC=inproc
  gpus=4
else
  # --- the refusals, then skip where NCCL cannot run ----------------------
  "$SHARDQ" world --workers 1x1 --elements 64 --run --transport nccl-inproc >"$T/probe.out" 2>"$T/probe.err"
  rc=$?
  if grep -F "built without NCCL" "$T/probe.err" >/dev/null; then
    skip_all "$(sed 's/^shardq world: //' "$T/probe.err")"
  fi
  if test $rc -ne 0; then
    if grep -F "no CUDA device" "$T/probe.err" >/dev/null && test $rc -eq 1; then
      # the other refusals must hold too before the test may skip
      "$SHARDQ" world --workers 1x1 --elements 64 --run --transport nccl --device cpu \
        >"$T/cpu.out" 2>"$T/cpu.err"
      if test $? -ne 2 || ! grep -F "moves GPU memory" "$T/cpu.err" >/dev/null; then
        echo "not ok 1 - --transport nccl --device cpu is refused as a usage error"
        sed 's/^/# /' "$T/cpu.err"
        exit 1
      fi
      skip_all "$(sed 's/^shardq world: //' "$T/probe.err")"
    fi
    echo "not ok 1 - a one-worker world over nccl-inproc runs (exit status $rc)"
    sed 's/^/# /' "$T/probe.err"
    exit 1
  fi
  gpus=$("$SHARDQ" version | sed -n 's/.*CUDA yes (\([0-9]*\) device.*/\1/p')
  test -n "$gpus" || gpus=1
fi

MPIRUN=${MPIRUN:-mpirun}
command -v "$MPIRUN" >/dev/null 2>&1 || skip_all "no $MPIRUN to start the ranks"
MPIFLAGS=
BLOCKING_FLAGS=
if "$MPIRUN" --version 2>&1 | grep -F "Open MPI" >/dev/null; then
  # a GPU box may have fewer cores than ranks here; root runs in containers
  MPIFLAGS="--oversubscribe"
  test "$(id -u)" -eq 0 && MPIFLAGS="$MPIFLAGS --allow-run-as-root"
  BLOCKING_FLAGS="-x SHARDQ_NCCL_BLOCKING"
fi

presets=$("$SHARDQ" schemes --json | python3 -c 'import json, sys
print(" ".join(p["name"] for p in json.load(sys.stdin)["presets"]))')
test -n "$presets" || { echo "not ok 1 - shardq schemes lists the presets"; exit 1; }

# One world run as JSON: 2 steps (qWD's w-hat carries over) of a 2-D tensor
# (per-tensor rules quantize it), digests on.
world() { # world OUT KxG PRESET TRANSPORT [LAUNCHER...]
  out=$1 topo=$2 preset=$3 tr=$4
  shift 4
  "$@" "$SHARDQ" world --workers "$topo" --scheme "$preset" --shape 48,1024 --run --steps 2 \
    --seed 7 --json --digest --transport "$tr" >"$out"
}

# Equal but for what depends on the run: measured times, the transport, the
# device. Prints the first difference.
same() { # same A B
  python3 -c 'import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for d in (a, b):
    for k in ("times", "transport", "device"):
        d.pop(k, None)
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            sys.exit("differs in %s:\n  %s\n  %s" % (k, json.dumps(a.get(k))[:400], json.dumps(b.get(k))[:400]))
' "$1" "$2"
}

for topo in 1x2 2x2; do
  n=$((${topo%x*} * ${topo#*x}))
  if test "$n" -gt "$gpus"; then
    echo "# $topo left out: its $n ranks need $n GPUs, $gpus visible (NCCL takes one rank per GPU)"
    continue
  fi
  for p in $presets; do
    ok "$p $topo: the in-process CPU run" world "$T/cpu.json" "$topo" "$p" inproc
    ok "$p $topo: $n ranks over $NCCL (mpirun -np $n)" \
      world "$T/ranks.json" "$topo" "$p" "$NCCL" "$MPIRUN" $MPIFLAGS -np "$n"
    ok "$p $topo: $NCCL gives the CPU run's digests, traffic and statistics" \
      same "$T/cpu.json" "$T/ranks.json"
    ok "$p $topo: one process over the GPUs ($NCCL_INPROC)" \
      world "$T/one.json" "$topo" "$p" "$NCCL_INPROC"
    ok "$p $topo: $NCCL_INPROC gives the CPU run's digests, traffic and statistics" \
      same "$T/cpu.json" "$T/one.json"
  done
done

# One process, every message through NCCL, a GPU's own included (sends to
# its own rank): NCCL's sends and receives on a machine of one GPU.
for p in $presets; do
  ok "$p 2x2: the in-process CPU run" world "$T/cpu.json" 2x2 "$p" inproc
  ok "$p 2x2: $NCCL_INPROC with SHARDQ_NCCL_SELF=1" \
    world "$T/self.json" 2x2 "$p" "$NCCL_INPROC" env SHARDQ_NCCL_SELF=1
  ok "$p 2x2: every message through NCCL gives the same bytes" same "$T/cpu.json" "$T/self.json"
done

# Each message completing on its own (one group per message, the plan's
# round order against deadlocks) gives the same bytes as a group per phase.
if test 2 -le "$gpus"; then
  for p in sdp4bit qwd; do
    ok "$p 1x2: the CPU run" world "$T/cpu.json" 1x2 "$p" inproc
    ok "$p 1x2: $NCCL with SHARDQ_NCCL_BLOCKING=1" \
      env SHARDQ_NCCL_BLOCKING=1 sh -c '"$@" >"$0"' "$T/blk.json" \
      "$MPIRUN" $MPIFLAGS $BLOCKING_FLAGS -np 2 "$SHARDQ" world --workers 1x2 --scheme "$p" --shape 48,1024 \
      --run --steps 2 --seed 7 --json --digest --transport "$NCCL"
    ok "$p 1x2: blocking messages give the same bytes" same "$T/cpu.json" "$T/blk.json"
  done
fi

# A job of one rank: MPI's bootstrap of NCCL, the GPU choice and the
# teardown, on any machine with a GPU.
for p in sdp4bit qwd; do
  ok "$p 1x1: the CPU run" world "$T/cpu.json" 1x1 "$p" inproc
  ok "$p 1x1: one rank over $NCCL (mpirun -np 1)" world "$T/one.json" 1x1 "$p" "$NCCL" \
    "$MPIRUN" $MPIFLAGS -np 1
  ok "$p 1x1: the same bytes" same "$T/cpu.json" "$T/one.json"
done

# A placement the transport does not join is refused, not silently wrong.
if test "$NCCL" = nccl; then
  n=$((gpus + 1))
  expect_fail_with nonzero "NCCL takes no two ranks on one GPU" \
    "$MPIRUN" $MPIFLAGS -np "$n" "$SHARDQ" world --workers "1x$n" --elements 4096 --run \
    --transport nccl
  expect_fail_with 2 "moves GPU memory" "$SHARDQ" world --workers 1x1 --elements 64 --run \
    --transport nccl --device cpu
  expect_fail_with 2 "moves GPU memory" "$SHARDQ" world --workers 1x2 --elements 64 --run \
    --transport nccl-inproc --device cpu
fi

finish
