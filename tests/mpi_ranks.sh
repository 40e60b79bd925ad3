# mpi_ranks.sh -- real ranks (Open MPI's mpirun on this machine, ranks
# oversubscribed) against the in-process world: every preset on 1x2, 2x2,
# 2x4 and 3x2 ranks, byte for byte (tests/mpi_equiv.c), and `shardq world
# --transport mpi` against `shardq world` on the same configuration.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ_BUILDDIR:=$SHARDQ_SRCDIR}"
: "${SHARDQ:=$SHARDQ_BUILDDIR/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
. "$SHARDQ_SRCDIR/tests/mpi_env.sh"
T=$TEST_TMPDIR

equiv=$SHARDQ_BUILDDIR/tests/mpi_equiv
for topo in 1x2 2x2 2x4 3x2; do
  K=${topo%x*} G=${topo#*x}
  # its own TAP lines go to the log as they are; the run's status is one more
  if timeout 300 mpirun $SQ_MPIRUN_FLAGS -np $((K * G)) "$equiv" "$K" "$G" >"$T/eq.out" 2>"$T/eq.err"; then
    st=0
  else
    st=$?
  fi
  sed "s/^\(\(not \)\{0,1\}ok\) [0-9]* - /\1 - $topo /" "$T/eq.out"
  cp "$T/eq.err" "$sq_tmp/err"
  : >"$sq_tmp/out"
  echo "exit status $st" >>"$sq_tmp/err"
  sq_report "$st" "every preset on $topo ranks equals the in-process world (mpirun exit $st)"
done

# the command: the same JSON as in process, but for the measured times
strip() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("times",None); d.pop("transport",None); print(json.dumps(d,sort_keys=True))' "$1"; }
for scheme in sdp4bit zeropp8; do
  args="world --run --json --digest --workers 2x2 --scheme $scheme --elements 50021 --steps 2"
  ok "$scheme in process" "$SHARDQ" $args
  strip "$sq_tmp/out" >"$T/inproc.json"
  ok "$scheme under mpirun -np 4 --transport mpi" timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 4 "$SHARDQ" $args --transport mpi
  cp "$sq_tmp/out" "$T/mpi.raw"
  strip "$T/mpi.raw" >"$T/mpi.json"
  ok "$scheme: the JSON of the ranks equals the in-process one (digests included)" cmp "$T/inproc.json" "$T/mpi.json"
  ok "$scheme: the ranks report measured times" python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); t=d["times"]
assert d["transport"] == {"kind": "mpi", "ranks": 4}
assert t["grad_reducescatter"]["calls"] == 2 and t["grad_reducescatter"]["seconds"] > 0
assert t["weight_allgather"]["seconds"] > 0' "$T/mpi.raw"
done

# --transport auto: under a launcher of several ranks it is mpi
ok "auto under mpirun is mpi" timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 2 "$SHARDQ" world --run --json --workers 1x2 --elements 4096 --steps 1
cp "$sq_tmp/out" "$T/auto.json"
ok "... (transport kind mpi)" grep -q '"transport":{"kind":"mpi","ranks":2}' "$T/auto.json"

# refusals, with the reason
expect_fail_with 2 "topology 2x4 has 8 workers, the job 4 ranks" \
  timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 4 "$SHARDQ" world --run --transport mpi --workers 2x4 --elements 4096
expect_fail_with 2 "expected inproc, mpi or auto" "$SHARDQ" world --transport tcp
finish
