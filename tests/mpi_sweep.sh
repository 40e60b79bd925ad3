# mpi_sweep.sh -- `mpirun -np R shardq sweep RECIPE`: the configurations go
# out to the ranks, rank 0 alone writes the database, and the database ends
# up holding exactly what a local `shardq sweep` of the same recipe stores
# (the same runs, marks and statistics rows; times, pids and hosts aside),
# failed configurations included. A sweep killed midway -- a worker rank,
# then mpirun itself, each by SIGKILL -- leaves a consistent file with no
# partial run, and the same command completes it with no duplicate. One
# rank behaves as a local sweep. No temporary file outlives the sweeps.
#
# It needs MPI: a shardq built without it, or no mpirun, is an error (exit
# 99), not a skip. Runs as root too (CI does), on 2 oversubscribed cores.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
cli_env

need() { echo "error: $*" >&2; exit 99; }
command -v mpirun >/dev/null 2>&1 || need "mpirun is needed (apt-get install openmpi-bin libopenmpi-dev)"
# Open MPI refuses root without these, and more ranks than cores without the last
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe
# Open MPI's session directory and shared-memory files (in /tmp and /dev/shm
# by default) go into the test's directory: a job whose mpirun is killed
# cannot remove them itself (names of Open MPI 4, then 5)
mkdir -p "$T/ompi"
OMPI_MCA_orte_tmpdir_base=$T/ompi OMPI_MCA_btl_vader_backing_directory=$T/ompi
PRTE_MCA_prte_tmpdir_base=$T/ompi OMPI_MCA_btl_sm_backing_directory=$T/ompi
export OMPI_MCA_orte_tmpdir_base OMPI_MCA_btl_vader_backing_directory
export PRTE_MCA_prte_tmpdir_base OMPI_MCA_btl_sm_backing_directory
# what every MPI test sets: the sanitizer build's suppressions of Open MPI's
# own allocations among them
. "$SHARDQ_SRCDIR/tests/mpi_env.sh"
"$SHARDQ" --version | grep -q "MPI yes" ||
  need "this shardq was built without MPI: install openmpi-bin and libopenmpi-dev, ./configure, make"
# what mpirun starts: shardq with the ranks' temporary files in a directory
# of the test's, to be counted at the end (exec: the rank is mpirun's child)
mkdir -p "$T/tmp"
RUN=$T/shardq-rank
printf '#!/bin/sh\nTMPDIR="%s" exec "%s" "$@"\n' "$T/tmp" "$SHARDQ" >"$RUN"
chmod +x "$RUN"

{
  echo '; 6 gradient runs, 2 weight runs, 1 that fails midway'
  sweep_tiny && cat <<'EOF'

[grid w]
presets = qw, qwd
paths = weight
seeds = 1

[grid broken]
presets = sdp4bit
trace = traces/broken
seeds = 1
EOF
} >"$T/small.ini"
# a trace that opens but holds a NaN in its last step: its replay begins,
# then fails, and is stored 'failed' (hardware or not, everywhere alike)
cp -r "$T/traces/tiny" "$T/traces/broken"
python3 -c "
import sys
f = sys.argv[1]
b = bytearray(open(f, 'rb').read())
b[-400:] = b'\xff' * 400
open(f, 'wb').write(b)" "$T/traces/broken/step-000003/grads-w01.safetensors"
# replays long enough (most of a second each) to be killed midway: mpirun
# takes a second to end the other ranks after one died, and they go on
"$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 \
  --params "a:1024x1024,b:1024x1024" "$T/traces/mid" >/dev/null

cat >"$T/kill.ini" <<'EOF'
[sweep]
name = killme
trace = traces/mid

[grid g]
presets = sdp4bit, tlq, ulq
paths = grad
grad.bits = 3..6
EOF

# cmp.py MODE A B SWEEP: every table's rows of the sweep's runs, keyed by the
# run's key instead of its id, without what depends on when, where and how
# fast a run ran. equal: A and B hold the same; part: every run of A is done,
# with exactly B's rows for its key, and A has fewer runs than B.
cat >"$T/cmp.py" <<'EOF'
import sqlite3, sys
VOLATILE = {'id', 'run_id', 'host', 'pid', 'pid_start', 'boot_id', 'started', 'ended',
            'heartbeat', 'seconds', 'gb_per_s'}
def dump(path, sweep):
    c = sqlite3.connect(path)
    assert c.execute('PRAGMA integrity_check').fetchone()[0] == 'ok', path
    assert c.execute('PRAGMA foreign_key_check').fetchall() == [], path
    keys = dict(c.execute('SELECT id, key FROM runs WHERE sweep = ?', (sweep,)))
    assert len(set(keys.values())) == len(keys), 'duplicate keys in ' + path
    out = {}
    for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        cols = [r[1] for r in c.execute('PRAGMA table_info(%s)' % t)]
        idc = 'id' if t == 'runs' else 'run_id'
        keep = [x for x in cols if x not in VOLATILE]
        rows = []
        for r in c.execute('SELECT %s, %s FROM %s' % (idc, ', '.join(keep), t)):
            assert r[0] in keys, (path, t, 'a row of no run of the sweep', r[0])
            rows.append((keys[r[0]],) + tuple(r[1:]))
        assert len(rows) == len(set(rows)), (path, t, 'duplicate rows')
        out[t] = set(rows)
    return out, set(keys.values())
mode, a, b, sweep = sys.argv[1:5]
(da, ka), (db, kb) = dump(a, sweep), dump(b, sweep)
if mode == 'equal':
    assert ka == kb, ('runs differ', len(ka), len(kb))
    for t in db:
        assert da[t] == db[t], (t, len(da[t]), len(db[t]), sorted(da[t] ^ db[t])[:2])
else:
    # a runs row: the key, then kind, key, sweep, status, ...
    assert all(r[4] == 'done' for r in da['runs']), ('a run not done', [r[4] for r in da['runs']])
    assert len(ka) < len(kb), ('nothing left undone', len(ka))
    for t in db:
        want = set(r for r in db[t] if r[0] in ka)
        assert da[t] == want, (t, len(da[t]), len(want), sorted(da[t] ^ want)[:2])
print(len(ka), 'runs;', ' '.join('%s:%d' % (t, len(da[t])) for t in sorted(da)))
EOF
same() { python3 "$T/cmp.py" equal "$@"; }
ndone() {
  python3 -c "import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute(\"SELECT count(*) FROM runs WHERE status = 'done'\").fetchone()[0])" \
    "$1" 2>/dev/null || echo 0
}
# rank_pid LAUNCHER RANK: the pid of that rank among the launcher's children
rank_pid() {
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"
      return
    fi
  done
}
# rank_pids LAUNCHER: the pids of ranks 0, 1 and 2, once all three started
rank_pids() {
  for _ in $(seq 200); do
    r0=$(rank_pid "$1" 0) r1=$(rank_pid "$1" 1) r2=$(rank_pid "$1" 2)
    test -n "$r0" -a -n "$r1" -a -n "$r2" && break
    sleep 0.05
  done
  echo "$r0 $r1 $r2"
}
# running PID: the process exists and has not ended (a zombie, not yet
# reaped by whoever inherited it, has)
running() {
  test -r "/proc/$1/stat" || return 1
  case $(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) in
  '' | Z | X) return 1 ;;
  esac
  return 0
}
# wait_done DB N: up to 30 s for the database to hold N runs done
wait_done() {
  for _ in $(seq 300); do
    test "$(ndone "$1")" -ge "$2" && return 0
    sleep 0.1
  done
  return 1
}

# --- across 3 ranks: the local sweep's database -------------------------------
expect_fail_with 1 "1 failed" "$SHARDQ" sweep --db "$T/local.db" "$T/small.ini"
expect_fail_with 1 "8 of 9 configurations done (8 now, 0 before, 0 by another process), 1 failed" \
  mpirun -np 3 "$RUN" sweep --db "$T/mpi.db" "$T/small.ini"
cp "$sq_tmp/err" "$T/mpi1.err"
ok "rank 0 says it hands out to 2 ranks" grep -q "9 configurations, 0 already done, 9 to run, across 3 ranks" "$T/mpi1.err"
ok "a progress line per configuration, naming its rank" grep -q "^\[9/9\] .* on rank [12], " "$T/mpi1.err"
ok "the failure is said with its error" grep -q "element 0 is NaN" "$T/mpi1.err"
ok "... and counted" grep -q "^\[[0-9]/9\] FAILED broken sdp4bit" "$T/mpi1.err"
ok "the same runs and rows as the local sweep, the failed one too" same "$T/mpi.db" "$T/local.db" small
pyrun "the failed run is marked so, with its error" "
c = sqlite3.connect(sys.argv[1])
r = c.execute(\"SELECT status, error FROM runs WHERE preset = 'sdp4bit' AND trace LIKE '%broken'\").fetchall()
assert len(r) == 1 and r[0][0] == 'failed' and 'NaN' in r[0][1], r
" "$T/mpi.db"
listing() { # the runs as db list shows them, without ids and times
  "$SHARDQ" db list --db "$1" --sweep small --json | python3 -c "
import json, sys
rows = json.load(sys.stdin)
for r in rows:
    for k in ('id', 'started', 'ended', 'seconds'): r.pop(k)
print(json.dumps(sorted(rows, key=lambda r: r['key']), sort_keys=True))"
}
ok "db list shows both alike" test "$(listing "$T/mpi.db")" = "$(listing "$T/local.db")"
expect_fail_with 1 "8 already done, 1 to run" mpirun -np 3 "$RUN" sweep --db "$T/mpi.db" "$T/small.ini"
ok "run again: only the failed one ran again, and nothing doubled" same "$T/mpi.db" "$T/local.db" small

# --- one rank is a local sweep --------------------------------------------------
expect_fail_with 1 "2 at a time" mpirun -np 1 "$RUN" sweep --jobs 2 --db "$T/one.db" "$T/small.ini"
ok "mpirun -np 1: the local sweep's runs" same "$T/one.db" "$T/local.db" small
expect_fail_with 1 "on 1 rank: it runs them, one at a time" \
  mpirun -np 1 "$RUN" sweep --transport mpi --db "$T/one-mpi.db" "$T/small.ini"
ok "--transport mpi on one rank: the same runs" same "$T/one-mpi.db" "$T/local.db" small
expect_fail_with 2 "--jobs: not across ranks" mpirun -np 2 "$RUN" sweep --jobs 2 --db "$T/x.db" "$T/small.ini"
ok "... and nothing was written" test ! -e "$T/x.db"
ok "--list across ranks prints the grid once" mpirun -np 3 "$RUN" sweep --list "$T/small.ini"
ok "... 9 lines" test "$(grep -vc '^#' "$sq_tmp/out")" -eq 9

# --- killed midway, then completed ----------------------------------------------
ok "the local sweep of the kill recipe" "$SHARDQ" sweep --db "$T/kref.db" "$T/kill.ini"
n_kill=12
# a worker rank dies: mpirun ends the job
mpirun -np 3 "$RUN" sweep --db "$T/kill.db" "$T/kill.ini" >"$T/k1.log" 2>&1 &
mp=$!
w=$(rank_pids $mp | cut -d' ' -f2)
wait_done "$T/kill.db" 1
test -n "$w" && kill -KILL "$w"
wait $mp
k1=$?
ok "SIGKILL of rank 1 ends the job (mpirun: $k1)" test "$k1" -ne 0 -a -n "$w"
ok "a consistent file: every run done with all its rows, none partial" \
  python3 "$T/cmp.py" part "$T/kill.db" "$T/kref.db" killme
cp "$sq_tmp/out" "$T/part1.txt"
# mpirun itself dies: the ranks die with it at once (PR_SET_PDEATHSIG)
before=$(ndone "$T/kill.db")
mpirun -np 3 "$RUN" sweep --db "$T/kill.db" "$T/kill.ini" >"$T/k2.log" 2>&1 &
mp=$!
ranks=$(rank_pids $mp)
wait_done "$T/kill.db" $((before + 1))
kill -KILL $mp
wait $mp 2>/dev/null
alive=
for _ in $(seq 50); do
  alive=
  for p in $ranks; do running "$p" && alive="$alive $p"; done
  test -z "$alive" && break
  sleep 0.1
done
ok "SIGKILL of mpirun: its ranks ($ranks) end with it (alive:${alive:- none})" \
  test -z "$alive" -a "$(echo $ranks | wc -w)" -eq 3
ok "a consistent file again" python3 "$T/cmp.py" part "$T/kill.db" "$T/kref.db" killme
partial=$(ndone "$T/kill.db")
echo "# after the kills: $partial of $n_kill configurations stored (first kill: $(cut -d' ' -f1 "$T/part1.txt"))"
ok "the same command completes it" mpirun -np 3 "$RUN" sweep --db "$T/kill.db" "$T/kill.ini"
cp "$sq_tmp/err" "$T/resume.err"
ok "... running only what was missing" grep -q "$partial already done, $((n_kill - partial)) to run" "$T/resume.err"
ok "every configuration stored once, as the uninterrupted sweep stores it" \
  same "$T/kill.db" "$T/kref.db" killme

# --- no temporary file left -------------------------------------------------------
# a rank killed by SIGKILL leaves its directory; the next sweep on the host
# removes it, and every other one goes when its rank ends
left=$(ls "$T/tmp" | grep -c '^shardq-sweep-')
ok "no temporary directory of a rank is left ($left)" test "$left" -eq 0
finish
