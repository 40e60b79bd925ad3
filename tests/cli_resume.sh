# cli_resume.sh -- runs left behind, and what comes after them: a 'running'
# row whose pid now belongs to another process (this shell, with another
# start time) is taken for dead and its configuration run again, with a
# message; one from another host is waited for, saying so, until --takeover
# or --stale-after ends the wait; a bench killed by SIGKILL while measuring
# is marked failed (interrupted) by the next run and never counts as done;
# a sweep killed by SIGKILL leaves no file in TMPDIR.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
export SHARDQ_PROGRESS=0 OMP_NUM_THREADS=1
unset SHARDQ_DB

mkdir -p "$T/traces"
"$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 \
  --params "a:128x64,b:4096,c:100" "$T/traces/tiny" >/dev/null || exit 99
cat >"$T/r.ini" <<'EOF'
[sweep]
name = r
trace = traces/tiny
presets = qw, qwd
paths = weight
EOF

# sql DB STATEMENT [ARGS...]: one statement with ? parameters, committed
sql() {
  python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute(sys.argv[2], sys.argv[3:])
c.commit()' "$@"
}
# value DB QUERY: the first column of the first row
value() {
  python3 -c 'import sqlite3, sys
r = sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()
print("" if r is None else r[0])' "$1" "$2"
}
# wait_for FILE TEXT: until FILE holds TEXT (at most a minute)
wait_for() {
  i=0
  while test $i -lt 600 && ! grep -q -F -e "$2" "$1" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
  done
}
# both runs done once, each with its rows, and nothing else
all_done() {
  pyrun "$1" "
c = sqlite3.connect(sys.argv[1])
r = c.execute('SELECT preset, status, (SELECT count(*) FROM step_metrics WHERE run_id = runs.id) FROM runs ORDER BY preset').fetchall()
assert r == [('qw', 'done', 2), ('qwd', 'done', 2)], r
" "$T/r.db"
}

ok "a sweep" "$SHARDQ" sweep --db "$T/r.db" -q "$T/r.ini"
all_done "both runs done"
QW=$(value "$T/r.db" "SELECT id FROM runs WHERE preset = 'qw'")

# ---------------------------------------------------------------------------
# A pid given to another process since: this shell's pid, its start time not
# this shell's. Before, the sweep found that pid alive and waited for ever.
# ---------------------------------------------------------------------------

sql "$T/r.db" "UPDATE runs SET status = 'running', ended = NULL, pid = ? WHERE id = ?" "$$" "$QW"
sql "$T/r.db" "DELETE FROM step_metrics WHERE run_id = ?" "$QW"
# (the start time only exists in schema 4; an older shardq knows the pid alone)
sql "$T/r.db" "UPDATE runs SET pid_start = 1 WHERE id = ?" "$QW" 2>/dev/null
ok "a run left by a pid now reused: the sweep runs it again" \
  timeout 120 "$SHARDQ" sweep --db "$T/r.db" "$T/r.ini"
cp "$sq_tmp/err" "$T/reused.err"
ok "... saying so" grep -q "run $QW was left 'running' by pid $$ on .*, a process that is gone: it runs again" "$T/reused.err"
all_done "... and both are done once, with their rows"

# ---------------------------------------------------------------------------
# Another host: it cannot be checked, so the sweep waits, and says for what
# ---------------------------------------------------------------------------

QW=$(value "$T/r.db" "SELECT id FROM runs WHERE preset = 'qw'")
sql "$T/r.db" "UPDATE runs SET status = 'running', ended = NULL, host = 'far.invalid', pid = 4242 WHERE id = ?" "$QW"
"$SHARDQ" sweep --db "$T/r.db" "$T/r.ini" 2>"$T/wait.err" &
spid=$!
wait_for "$T/wait.err" "waiting for"
kill $spid 2>/dev/null
wait $spid
ok "a run of another host: the sweep waits until killed" test $? -ge 128
ok "... saying for what: the run, its key, host and pid" grep -q \
  "waiting for .*: run $QW (key sweep=r;preset=qw;.*) is under way on host far.invalid, pid 4242, since " \
  "$T/wait.err"
ok "... and leaves that run alone" test "$(value "$T/r.db" "SELECT status || ' ' || host FROM runs WHERE id = $QW")" = "running far.invalid"

# --stale-after: not while the run wrote recently; once it has not for that long
sql "$T/r.db" "UPDATE runs SET heartbeat = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?" "$QW" 2>/dev/null
"$SHARDQ" sweep --db "$T/r.db" --stale-after 3600 "$T/r.ini" 2>"$T/wait2.err" &
spid=$!
wait_for "$T/wait2.err" "waiting for"
kill $spid 2>/dev/null
wait $spid
ok "--stale-after 3600 waits for a run that wrote just now" grep -q "waiting for .*: run $QW " "$T/wait2.err"
sql "$T/r.db" "UPDATE runs SET heartbeat = '2020-01-01T00:00:00.000Z' WHERE id = ?" "$QW" 2>/dev/null
ok "and takes over one silent for longer" timeout 120 "$SHARDQ" sweep --db "$T/r.db" --stale-after 3600 "$T/r.ini"
cp "$sq_tmp/err" "$T/stale.err"
ok "... naming it" grep -q "taking over .*: run $QW (key sweep=r;preset=qw;.*) of pid 4242 on host far.invalid, under way since .*(--stale-after)" "$T/stale.err"
all_done "... which then runs here, once"

QW=$(value "$T/r.db" "SELECT id FROM runs WHERE preset = 'qw'")
sql "$T/r.db" "UPDATE runs SET status = 'running', ended = NULL, host = 'far.invalid', pid = 4242 WHERE id = ?" "$QW"
ok "--takeover takes it over at once" timeout 120 "$SHARDQ" sweep --db "$T/r.db" --takeover "$T/r.ini"
cp "$sq_tmp/err" "$T/takeover.err"
ok "... naming it" grep -q "taking over .*: run $QW (key sweep=r;preset=qw;.*) of pid 4242 on host far.invalid.*(--takeover)" "$T/takeover.err"
all_done "... and runs it here, once"
expect_fail_with 2 "--stale-after: 'soon' is not a number" "$SHARDQ" sweep --stale-after soon "$T/r.ini"

# ---------------------------------------------------------------------------
# A bench killed while it measures: its run has some rows and stays
# 'running'; the next run marks it failed, and it never counts as done
# ---------------------------------------------------------------------------

"$SHARDQ" bench --db "$T/b.db" --sizes 1,16,32,64,128 --threads 1 --ops quantize,dequantize \
  --min-time 0.5 >/dev/null 2>&1 &
bpid=$!
i=0
while test $i -lt 600 && test "$(value "$T/b.db" "SELECT count(*) FROM bench_results" 2>/dev/null || echo 0)" -lt 3; do
  sleep 0.1
  i=$((i + 1))
done
kill -KILL $bpid 2>/dev/null
wait $bpid 2>/dev/null
ok "a bench killed while measuring left a running run with some rows" \
  test "$(value "$T/b.db" "SELECT status || ' ' || ((SELECT count(*) FROM bench_results) BETWEEN 3 AND 12) FROM runs")" = "running 1"
ok "db list shows it as interrupted" sh -c '"$0" db --db "$1" list | grep -q "^ *1  *interrupted  *bench"' "$SHARDQ" "$T/b.db"
ok "the next bench" "$SHARDQ" bench --db "$T/b.db" --sizes 1 --threads 1 --ops rng --min-time 0
pyrun "marks it failed, interrupted; only the new one is done" "
c = sqlite3.connect(sys.argv[1])
r = c.execute('SELECT id, status, error FROM runs ORDER BY id').fetchall()
assert r[0][1] == 'failed' and r[0][2].startswith('interrupted'), r
assert [x[1] for x in r] == ['failed', 'done'], r
" "$T/b.db"
ok "db list --status done: the new run alone" sh -c \
  'test "$("$0" db --db "$1" list --status done | awk "NR > 1 { print \$1 }")" = 2' "$SHARDQ" "$T/b.db"

# ---------------------------------------------------------------------------
# A sweep killed by SIGKILL leaves no file in TMPDIR, nor does its rerun
# ---------------------------------------------------------------------------

"$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 \
  --params "a:512x1024,b:1024x256" "$T/traces/mid" >/dev/null || exit 99
cat >"$T/k.ini" <<'EOF'
[sweep]
name = k
trace = traces/mid
jobs = 2

[grid g]
presets = sdp4bit, tlq
paths = grad
grad.bits = 2..5
EOF
mkdir "$T/tmp"
TMPDIR=$T/tmp "$SHARDQ" sweep --db "$T/k.db" "$T/k.ini" >/dev/null 2>&1 &
spid=$!
i=0
while test $i -lt 600 && test "$(value "$T/k.db" "SELECT count(*) FROM runs WHERE status = 'running'" 2>/dev/null || echo 0)" -lt 1; do
  sleep 0.1
  i=$((i + 1))
done
kill -KILL $spid 2>/dev/null
wait $spid 2>/dev/null
ok "a sweep killed while its replays ran left work undone" \
  test "$(value "$T/k.db" "SELECT count(*) FROM runs WHERE status = 'done'")" -lt 8
ok "its rerun completes it" env TMPDIR="$T/tmp" "$SHARDQ" sweep --db "$T/k.db" -q "$T/k.ini"
ok "TMPDIR is as empty as before" sh -c 'test -z "$(ls -A "$0")" || { ls -lA "$0"; exit 1; }' "$T/tmp"

finish
