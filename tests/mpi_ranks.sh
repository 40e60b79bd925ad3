# mpi_ranks.sh -- real ranks (Open MPI's mpirun on this machine, ranks
# oversubscribed) against the in-process world: every preset, and error
# feedback on three of them, on 1x2, 2x2, 2x4 and 3x2 ranks, byte for byte
# (tests/mpi_equiv.c), and `shardq world --transport mpi` against `shardq
# world` on the same configuration.

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
for scheme in sdp4bit zeropp8 "tlqhs --set grad.ef=1"; do
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

# replay: the same rows in the store, written by rank 0 alone
ok "a synthetic trace of 4 workers" "$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 "$T/trace"
ok "replay in process" "$SHARDQ" replay -q --db "$T/inproc.db" --workers 2x2 "$T/trace"
ok "replay on 4 ranks" timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 4 "$SHARDQ" replay -q --db "$T/mpi.db" --workers 2x2 --transport mpi "$T/trace"
ok "replay with error feedback in process" "$SHARDQ" replay -q --db "$T/inproc.db" --workers 2x2 --set grad.ef=1 "$T/trace"
ok "replay with error feedback on 4 ranks" timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 4 "$SHARDQ" replay -q --db "$T/mpi.db" --workers 2x2 --set grad.ef=1 --transport mpi "$T/trace"
rows() { # the rows that do not depend on the clock
  sqlite3 "$1" "SELECT run_id, step, path, elements, rel_l2, mse, max_abs, snr_db, cosine, mean_signed, frac_zeroed, frac_clipped, ef_residual FROM step_metrics ORDER BY run_id, step, path;
    SELECT run_id, step, path, tensor, elements, rel_l2, mse, max_abs, cosine, mean_signed, ef_residual FROM tensor_stats ORDER BY run_id, step, path, tensor;
    SELECT run_id, collective, link, sent_codes, sent_meta, recv_codes, recv_meta, sent_elems, messages, sent_params FROM bytes ORDER BY run_id, collective, link;
    SELECT status, preset, scheme, topo FROM runs ORDER BY id"
}
rows "$T/inproc.db" >"$T/inproc.rows"
rows "$T/mpi.db" >"$T/mpi.rows"
ok "replay: step, tensor and byte rows equal the in-process run's (error feedback's too)" cmp "$T/inproc.rows" "$T/mpi.rows"
ok "... and they are there ($(wc -l <"$T/mpi.rows") rows)" test "$(wc -l <"$T/mpi.rows")" -gt 40
ok "... the residual's state in every grad row of the EF run" test \
  "$(sqlite3 "$T/mpi.db" "SELECT count(*) = count(ef_residual) AND count(*) = 3 FROM step_metrics WHERE run_id = 2 AND path = 'grad'")" = 1
ok "two runs stored (rank 0 alone writes)" test "$(sqlite3 "$T/mpi.db" 'SELECT count(*) FROM runs')" = 2
ok "the measured collectives are stored" python3 -c 'import sqlite3,sys
t = dict(sqlite3.connect(sys.argv[1]).execute("SELECT op, seconds FROM timings"))
assert t["collective.grad_reducescatter"] > 0 and t["collective.weight_allgather"] > 0, t
assert t["collective.grad_reducescatter.intra"] > 0 and t["collective.grad_reducescatter.inter"] > 0, t' "$T/mpi.db"

# training: each rank computes its own micro-batch; the losses, norms and bytes equal
targs="train -q --steps 4 --layers 1 --channels 32 --heads 2 --context 32 --seq 32 --batch 2 --eval-every 2 --workers 2x2"
ok "train in process" "$SHARDQ" $targs --db "$T/tinproc.db"
ok "train on 4 ranks" timeout 180 mpirun $SQ_MPIRUN_FLAGS -np 4 "$SHARDQ" $targs --db "$T/tmpi.db" --transport mpi
trows() {
  sqlite3 "$1" "SELECT step, tokens, loss, val_loss, lr, grad_norm FROM train_steps ORDER BY step;
    SELECT collective, link, sent_codes, sent_meta, sent_elems, messages, sent_params FROM bytes ORDER BY collective, link"
}
trows "$T/tinproc.db" >"$T/tinproc.rows"
trows "$T/tmpi.db" >"$T/tmpi.rows"
ok "train: losses, norms and bytes equal the in-process run's" cmp "$T/tinproc.rows" "$T/tmpi.rows"
ok "... (4 steps)" test "$(sqlite3 "$T/tmpi.db" 'SELECT count(*) FROM train_steps')" = 4
expect_fail_with 2 "--capture: not on real ranks" \
  timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 4 "$SHARDQ" $targs --no-db --transport mpi --capture "$T/cap"

# a rank that fails ends the job, naming itself and its host; what the
# database held stays: rank 0 finds the store locked by another process
before=$(sqlite3 "$T/mpi.db" 'SELECT count(*) FROM runs')
# (held until it is killed below, five minutes at most: not for a time that a
# slow start of mpirun's ranks could outlast)
python3 -c 'import sqlite3,sys,time
c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close(); time.sleep(300)' "$T/mpi.db" "$T/locked" &
locker=$!
for _ in $(seq 600); do test -f "$T/locked" && break; sleep 0.1; done
ok "another process holds the database's write lock" test -f "$T/locked"
expect_fail_with nonzero "on host $(hostname)" \
  timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 4 "$SHARDQ" replay -q --db "$T/mpi.db" --busy-timeout 200 --workers 2x2 --transport mpi "$T/trace"
cp "$sq_tmp/err" "$T/fail.err"
ok "... the failed rank says which it is and that the job ends" grep -q "rank 0 of 4 on host .* failed .* ending every rank of the job" "$T/fail.err"
ok "... and why (the locked database)" grep -qi "lock\|busy" "$T/fail.err"
kill "$locker" 2>/dev/null
wait "$locker" 2>/dev/null
ok "the database keeps its run" test "$(sqlite3 "$T/mpi.db" 'SELECT count(*) FROM runs WHERE status = '"'done'"'')" = "$before"
ok "... intact" test "$(sqlite3 "$T/mpi.db" 'PRAGMA integrity_check')" = ok

# --transport auto: under a launcher of several ranks it is mpi
ok "auto under mpirun is mpi" timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 2 "$SHARDQ" world --run --json --workers 1x2 --elements 4096 --steps 1
cp "$sq_tmp/out" "$T/auto.json"
ok "... (transport kind mpi)" grep -q '"transport":{"kind":"mpi","ranks":2}' "$T/auto.json"

# refusals, with the reason
expect_fail_with 2 "topology 2x4 has 8 workers, the job 4 ranks" \
  timeout 120 mpirun $SQ_MPIRUN_FLAGS -np 4 "$SHARDQ" world --run --transport mpi --workers 2x4 --elements 4096
expect_fail_with 2 "expected inproc, mpi, nccl, nccl-inproc or auto" "$SHARDQ" world --transport tcp
finish
