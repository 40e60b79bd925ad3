# cli_sweep.sh -- `shardq sweep`: a recipe expands into the right grid, runs
# into the database, is not run twice, resumes after SIGKILL with no
# duplicate or partial rows, shares a database with a second sweep running at
# the same time, and refuses bad recipes naming the file, section and key
# (and the line, for what inih would have let pass: a line too long, a key
# given twice, an empty section or value, a path that reads as an option, a
# grid too large to expand); error feedback as a grid's knob.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
cli_env

{
  echo '; a small grid: 3 bits x 2 groups x 2 seeds = 12, plus 2 weight runs'
  sweep_tiny && cat <<'EOF'
grad.group = 64, 256

[grid w]
presets = qw, qwd
paths = weight
seeds = 1
EOF
} >"$T/small.ini"

"$SHARDQ" sweep --list "$T/small.ini" >"$T/list.txt"
ok "the grid has 14 configurations" test "$(grep -vc '^#' "$T/list.txt")" -eq 14
ok "a run of the grid is listed with its knobs" \
  grep -q "g sdp4bit grad.bits=4 grad.group=256 seed=2" "$T/list.txt"

# --- a sweep, then the same sweep again --------------------------------------
ok "sweep runs" "$SHARDQ" sweep --db "$T/s.db" --jobs 2 "$T/small.ini"
cp "$sq_tmp/err" "$T/sweep1.err"
ok "progress lines name each configuration" grep -q "\[14/14\]" "$T/sweep1.err"
check_db() { # DB SWEEP COUNT [TENSORS]
  python3 - "$@" <<'EOF'
import sqlite3, sys
db, sweep, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
tensors = int(sys.argv[4]) if len(sys.argv) > 4 else 3
c = sqlite3.connect(db)
assert c.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
assert c.execute('PRAGMA foreign_key_check').fetchall() == []
runs = c.execute('SELECT id, status, key, config FROM runs WHERE sweep = ?', (sweep,)).fetchall()
done = [r for r in runs if r[1] == 'done']
assert len(done) == count, (len(done), count, [r[1] for r in runs])
assert len(runs) == count, ('rows not done', [r[1] for r in runs if r[1] != 'done'])
assert len(set(r[2] for r in runs)) == count, 'duplicate keys'
for (rid, _, key, config) in runs:
    paths = 'grad' if 'paths=grad;' in key else 'weight'
    want = 3 if paths == 'grad' else 2          # steps with a row
    n = c.execute('SELECT count(*) FROM step_metrics WHERE run_id = ?', (rid,)).fetchone()[0]
    assert n == want, (rid, key, n, want)
    n = c.execute('SELECT count(*) FROM tensor_stats WHERE run_id = ?', (rid,)).fetchone()[0]
    assert n == tensors * want, (rid, key, n)
    n = c.execute('SELECT count(*) FROM bytes WHERE run_id = ?', (rid,)).fetchone()[0]
    assert n == 4, (rid, n)
# nothing refers to a run that is gone
for t in ('params', 'step_metrics', 'tensor_stats', 'bytes', 'timings'):
    n = c.execute('SELECT count(*) FROM %s WHERE run_id NOT IN (SELECT id FROM runs)' % t).fetchone()[0]
    assert n == 0, (t, n)
EOF
}
ok "14 runs done, each with all its rows" check_db "$T/s.db" small 14
pyrun "the grid's knobs are stored as params" "
c = sqlite3.connect(sys.argv[1])
v = c.execute(\"SELECT count(*) FROM runs r JOIN params p ON p.run_id = r.id WHERE p.key = 'grad.intra.bits' AND p.value = '5' AND r.preset = 'sdp4bit'\").fetchone()[0]
assert v == 4, v
e = dict(c.execute(\"SELECT r.preset, s.rel_l2 FROM runs r JOIN step_metrics s ON s.run_id = r.id WHERE s.path = 'weight' AND s.step = 3\").fetchall())
assert e['qwd'] < e['qw'] / 3, e
" "$T/s.db"
ok "the same sweep again runs nothing" "$SHARDQ" sweep --db "$T/s.db" "$T/small.ini"
cp "$sq_tmp/err" "$T/sweep2.err"
ok "... and says so" grep -q "14 already done, 0 to run" "$T/sweep2.err"
ok "still 14 runs" check_db "$T/s.db" small 14

# --- duplicates: two grids that share configurations ---------------------------
# grid b repeats two of grid a's (grad.bits=4 in both), and a value given twice
# is one more repeat: 4 + 3 configurations, 5 distinct runs
cat >"$T/dupgrid.ini" <<'EOF'
[sweep]
name = dup
trace = traces/tiny
paths = grad
seeds = 1

[grid a]
presets = sdp4bit
grad.bits = 3, 4
grad.group = 64, 256

[grid b]
presets = sdp4bit
grad.bits = 4, 5, 5
grad.group = 256
EOF
"$SHARDQ" sweep --list "$T/dupgrid.ini" >"$T/dup-list.txt"
ok "duplicates are listed once, and counted" sh -c \
  'test "$(grep -vc "^#" "$0")" -eq 5 &&
   grep -q "^# 2 duplicates (the settings of an earlier configuration: one run), e.g.: b sdp4bit grad.bits=4 grad.group=256 seed=1 = a sdp4bit grad.bits=4 grad.group=256 seed=1" "$0"' \
  "$T/dup-list.txt"
ok "the sweep with duplicates runs" "$SHARDQ" sweep --db "$T/dup.db" --jobs 2 "$T/dupgrid.ini"
cp "$sq_tmp/err" "$T/dup.err"
ok "its counts are the runs stored, the duplicates said apart" sh -c \
  'grep -q "dup: 5 configurations, 0 already done, 5 to run, 2 at a time; 2 more repeat the settings of one of these: run once (see --list)" "$0" &&
   grep -q "5 of 5 configurations done (5 now, 0 before; 2 more repeat the settings of one of these: run once (see --list)), 0 failed" "$0"' \
  "$T/dup.err"
ok "5 runs stored" check_db "$T/dup.db" dup 5

# --- SIGKILL in the middle, then resume ----------------------------------------
# replays long enough (a few tenths of a second each) to be killed midway.
# Each sweep is killed at a point seen in the database, not after a time (a
# slow machine's sweep may have had fewer runs done by then, a fast one all):
# once one run more than before it began is done, while its two jobs are on
# the next ones.
"$SHARDQ" trace synth --steps 3 --workers 4 --topology 2x2 \
  --params "a:512x1024,b:1024x256" "$T/traces/mid" >/dev/null
cat >"$T/kill.ini" <<'EOF'
[sweep]
name = killme
trace = traces/mid
jobs = 2

[grid g]
presets = sdp4bit, tlq, ulq
paths = grad
grad.bits = 2..8
grad.group = 64, 128, 512
EOF
n_kill=$(( 3 * 7 * 3 ))
# count DB STATUS: the runs of that status (0 before the database exists)
count() {
  python3 -c "
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(c.execute('SELECT count(*) FROM runs WHERE status = ?', (sys.argv[2],)).fetchone()[0])
" "$1" "$2" 2>/dev/null || echo 0
}
# wait_more DB PID N: until DB holds more than N runs done, read-only (a minute
# at most); prints how many. Fails, saying why, if the sweep PID ends first.
wait_more() {
  python3 - "$@" <<'EOF'
import sqlite3, sys, time, urllib.parse
db, pid, before = sys.argv[1], sys.argv[2], int(sys.argv[3])
def alive():
    try:
        return open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()[0] not in 'ZX'
    except OSError:
        return False
n, end = 0, time.monotonic() + 60
while time.monotonic() < end:
    try:
        c = sqlite3.connect('file:%s?mode=ro' % urllib.parse.quote(db), uri=True, timeout=5)
        n = c.execute("SELECT count(*) FROM runs WHERE status = 'done'").fetchone()[0]
        c.close()
    except sqlite3.Error:
        pass  # not there yet
    if n > before:
        print(n)
        sys.exit(0)
    if not alive():
        sys.exit('the sweep (pid %s) ended with %d runs done, before a run more than %d was'
                 % (pid, n, before))
    time.sleep(0.01)
sys.exit('in a minute: %d runs done, not more than %d' % (n, before))
EOF
}
partial=0 seen= statuses=
: >"$T/kill.why"
for round in 1 2 3; do
  "$SHARDQ" sweep --db "$T/kill.db" "$T/kill.ini" >/dev/null 2>&1 &
  spid=$!
  n=$(wait_more "$T/kill.db" $spid "$partial" 2>>"$T/kill.why") || n=none
  kill -KILL $spid 2>/dev/null
  wait $spid 2>/dev/null
  statuses="$statuses $?"
  seen="$seen $n"
  partial=$(count "$T/kill.db" done)
done
stale=$(count "$T/kill.db" running)
echo "# after three SIGKILLs (each once the done runs were:$seen): $partial of $n_kill configurations done, $stale left 'running' by killed replays"
cp "$T/kill.why" "$sq_tmp/err"
echo "exit statuses:$statuses; done runs seen before each kill:$seen" >>"$sq_tmp/err"
: >"$sq_tmp/out"
test "$statuses" = " 137 137 137"
sq_report $? "each sweep was killed by the SIGKILL, with more runs done than before it began"
ok "the killed sweeps left work undone" test "$partial" -gt 0 -a "$partial" -lt "$n_kill"
ok "the same command completes it" "$SHARDQ" sweep --db "$T/kill.db" "$T/kill.ini"
cp "$sq_tmp/err" "$T/resume.err"
ok "... running only what was missing" grep -q "$partial already done" "$T/resume.err"
ok "every configuration done once, no partial rows" check_db "$T/kill.db" killme "$n_kill" 2

# --- two sweeps into one database at the same time ------------------------------
sed 's/name = small/name = twin/' "$T/small.ini" >"$T/twin.ini"
"$SHARDQ" sweep --db "$T/both.db" --jobs 2 "$T/small.ini" >"$T/a.log" 2>&1 &
p1=$!
"$SHARDQ" sweep --db "$T/both.db" --jobs 2 "$T/twin.ini" >"$T/b.log" 2>&1 &
p2=$!
wait $p1
r1=$?
wait $p2
r2=$?
ok "two sweeps at once both succeed" test $r1 -eq 0 -a $r2 -eq 0
ok "the first one's runs are all there" check_db "$T/both.db" small 14
ok "the second one's too" check_db "$T/both.db" twin 14
# the same sweep twice at once: each configuration still runs once
"$SHARDQ" sweep --db "$T/same.db" --jobs 2 "$T/small.ini" >/dev/null 2>&1 &
p1=$!
"$SHARDQ" sweep --db "$T/same.db" --jobs 2 "$T/small.ini" >/dev/null 2>&1 &
p2=$!
wait $p1
r1=$?
wait $p2
r2=$?
ok "the same sweep twice at once: both succeed" test $r1 -eq 0 -a $r2 -eq 0
ok "... and every configuration is there once" check_db "$T/same.db" small 14

# --- the experiments' recipe ---------------------------------------------------
R=$SHARDQ_SRCDIR/experiments/grad-weight-ablation.ini
"$SHARDQ" sweep --list --trace "$T/traces/tiny" "$R" >"$T/abl.txt"
ok "the ablation recipe: 7 bits x 8 groups x 2 Hadamard + qw, qwd" \
  test "$(grep -vc '^#' "$T/abl.txt")" -eq 114
ok "the ablation recipe runs" "$SHARDQ" sweep --db "$T/abl.db" --trace "$T/traces/tiny" "$R"
pyrun "its figures: error falls with bits; qwd below qw" "
c = sqlite3.connect(sys.argv[1])
q = '''SELECT CAST(p.value AS INTEGER), avg(s.rel_l2) FROM runs r
       JOIN params p ON p.run_id = r.id AND p.key = 'grad.inter.bits'
       JOIN params g ON g.run_id = r.id AND g.key = 'grad.inter.group' AND g.value = '128'
       JOIN params h ON h.run_id = r.id AND h.key = 'grad.inter.hadamard' AND h.value = '0'
       JOIN step_metrics s ON s.run_id = r.id AND s.path = 'grad'
       WHERE r.sweep = 'grad-weight-ablation' GROUP BY 1 ORDER BY 1'''
e = c.execute(q).fetchall()
assert [b for b, _ in e] == list(range(2, 9)), e
assert all(e[i][1] > e[i + 1][1] for i in range(6)), e
w = dict(c.execute(\"SELECT r.preset, avg(s.rel_l2) FROM runs r JOIN step_metrics s ON s.run_id = r.id WHERE s.path = 'weight' GROUP BY 1\").fetchall())
assert w['qwd'] < w['qw'] / 3, w
" "$T/abl.db"

# --- bad recipes ----------------------------------------------------------------
printf '[sweep]\nname = x\ntrace = traces/tiny\n[grid a]\ngrad.bitz = 4\n' >"$T/bad1.ini"
expect_fail_with 2 "bad1.ini: [a] unknown" "$SHARDQ" sweep --list "$T/bad1.ini"
printf '[sweep]\ntrace = traces/tiny\n' >"$T/bad2.ini"
expect_fail_with 2 "bad2.ini: [sweep] name: missing" "$SHARDQ" sweep --list "$T/bad2.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\n[grud a]\npresets = qw\n' >"$T/bad3.ini"
expect_fail_with 2 "bad3.ini: [grud a]: unknown section" "$SHARDQ" sweep --list "$T/bad3.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\nseeds = 1..\n' >"$T/bad4.ini"
expect_fail_with 2 "bad4.ini: [sweep] seeds" "$SHARDQ" sweep --list "$T/bad4.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\npresets = sdp4bit, nope\n' >"$T/bad5.ini"
expect_fail_with 2 "bad5.ini: [sweep] presets: unknown scheme 'nope'" "$SHARDQ" sweep --list "$T/bad5.ini"
printf '[sweep]\nname = x\nthis is not ini\n' >"$T/bad6.ini"
expect_fail_with 2 "bad6.ini: line 3" "$SHARDQ" sweep --list "$T/bad6.ini"
printf '[sweep]\nname = x\npresets = qw\n' >"$T/bad7.ini"
expect_fail_with 2 "bad7.ini: [sweep]: no trace" "$SHARDQ" sweep --list "$T/bad7.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\ngrad.group = 32\ngrad.hadamard = 64\n' >"$T/bad8.ini"
expect_fail_with 2 "no valid configuration" "$SHARDQ" sweep --list "$T/bad8.ini"
expect_fail_with 2 "cannot open" "$SHARDQ" sweep "$T/none.ini"
# a configuration that fails (a missing trace) fails the sweep, naming it
printf '[sweep]\nname = x\ntrace = traces/missing\n' >"$T/bad9.ini"
expect_fail_with 1 "traces/missing: cannot open" "$SHARDQ" sweep --db "$T/x.db" "$T/bad9.ini"
ok "sweep --help" "$SHARDQ" sweep --help

# --- what inih lets pass, refused by file and line ------------------------------
# a value that would be an option of the child: with the recipe in the current
# directory, 'trace = --help' was `shardq replay --help`, counted done
mkdir "$T/cwd"
cp -r "$T/traces" "$T/cwd/traces"
printf '[sweep]\nname = opt\ntrace = --help\n' >"$T/cwd/opt.ini"
expect_fail_with 2 "opt.ini: line 3: [sweep] trace: '--help' starts with '-'" \
  sh -c 'cd "$1" && exec "$0" sweep --db o.db opt.ini' "$SHARDQ" "$T/cwd"
ok "... and nothing is stored" test ! -e "$T/cwd/o.db"
printf '[sweep]\nname = opt\ntrace = traces/tiny\ncommand = train\ncorpus = -x\n' >"$T/opt2.ini"
expect_fail_with 2 "opt2.ini: line 5: [sweep] corpus: '-x' starts with '-'" "$SHARDQ" sweep --list "$T/opt2.ini"
# a line longer than inih's buffer: it would be cut, and its end read as a line
# of its own; here the cut falls on the blank of a path, whose end inih took
# for the continuation of the value: two traces, neither the one named
python3 -c "
line = 'trace = traces/' + 'd' * (199 - len('trace = traces/')) + ' tiny'
print('[sweep]\\nname = long\\n' + line)" >"$T/long0.ini"
expect_fail_with 2 "long0.ini: line 3: longer than 197 characters" "$SHARDQ" sweep --list "$T/long0.ini"
long=$(printf '%0220d' 0 | tr 0 /)
printf '[sweep]\nname = long\ntrace = %stiny\n' "$long" >"$T/long.ini"
expect_fail_with 2 "long.ini: line 3: longer than 197 characters" "$SHARDQ" sweep --list "$T/long.ini"
printf '[sweep]\nname = long\ntrace = traces/tiny\n; %s\n' "$long" >"$T/long2.ini"
expect_fail_with 2 "long2.ini: line 4: longer than 197 characters" "$SHARDQ" sweep --list "$T/long2.ini"
# a list may go on over indented lines instead
printf '[sweep]\nname = cont\ntrace = traces/tiny\nseeds = 1, 2,\n  3\n  4\n' >"$T/cont.ini"
ok "a list continued on indented lines" sh -c 'test "$("$0" sweep --list "$1" | wc -l)" -eq 4' "$SHARDQ" "$T/cont.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\nseeds = 1\npresets = qw\nseeds = 2\n' >"$T/dup.ini"
expect_fail_with 2 "dup.ini: line 6: [sweep] seeds: given twice (first at line 4)" "$SHARDQ" sweep --list "$T/dup.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\n[grid a]\nseed = 1\nseeds = 2\n' >"$T/dup2.ini"
expect_fail_with 2 "dup2.ini: line 6: [grid a] seeds: given twice (first as 'seed' at line 5)" "$SHARDQ" sweep --list "$T/dup2.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\n[grid a]\npresets = qw\n[grid a]\nseeds = 2\n' >"$T/dup3.ini"
expect_fail_with 2 "dup3.ini: line 6: [grid a] given twice (first at line 4)" "$SHARDQ" sweep --list "$T/dup3.ini"
printf '[sweep]\nname = x\nname = y\ntrace = traces/tiny\n' >"$T/dup4.ini"
expect_fail_with 2 "dup4.ini: line 3: [sweep] name: given twice (first at line 2)" "$SHARDQ" sweep --list "$T/dup4.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\n[grid a]\n[grid b]\npresets = qw\n' >"$T/empty.ini"
expect_fail_with 2 "empty.ini: line 4: [grid a]: no keys" "$SHARDQ" sweep --list "$T/empty.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\npresets =\n' >"$T/novalue.ini"
expect_fail_with 2 "novalue.ini: line 4: [sweep] presets: no value" "$SHARDQ" sweep --list "$T/novalue.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\n[grid a]\ngrad.group = 32\ngrad.hadamard = 64\n[grid b]\npresets = qw\n' >"$T/deadgrid.ini"
expect_fail_with 2 "deadgrid.ini: line 4: [grid a]: none of its 1 combination is a valid scheme" "$SHARDQ" sweep --list "$T/deadgrid.ini"
# a grid too large is counted before anything is expanded: 10^5 x 10^5
printf '[sweep]\nname = big\ntrace = traces/tiny\nseeds = 1..100000\ngrad.group = 1..100000\n' >"$T/big.ini"
expect_fail_with 2 "big.ini: line 1: [sweep]: 10000000000 configurations, more than the 100000 a sweep may run" \
  timeout 120 "$SHARDQ" sweep --list "$T/big.ini"
printf '[sweep]\nname = big\ntrace = traces/tiny\n[grid a]\nseeds = 1..1000\n[grid b]\nseeds = 1..1000\ngrad.group = 1..100\n' >"$T/big2.ini"
expect_fail_with 2 "big2.ini: line 6: [grid b]: 100000 configurations, which with the 1000 of the grids before it are more than the 100000" \
  timeout 120 "$SHARDQ" sweep --list "$T/big2.ini"
# 10^6 configurations would take gigabytes to expand: the cap is 10^5
printf '[sweep]\nname = big\ntrace = traces/tiny\nseeds = 1..1000\ngrad.group = 1..1000\n' >"$T/big3.ini"
expect_fail_with 2 "big3.ini: line 1: [sweep]: 1000000 configurations, more than the 100000 a sweep may run" \
  timeout 120 "$SHARDQ" sweep --list "$T/big3.ini"

# --- a training sweep (command = train) --------------------------------------
# the corpus: the commands' --help texts (English prose, fixed by the tree)
cat "$SHARDQ_SRCDIR"/src/cli/help/*.txt >"$T/text.md"
cat >"$T/train.ini" <<'INI'
[sweep]
name = tr
command = train
corpus = text.md
workers = 1x2
layers = 1
channels = 16
heads = 2
context = 16
seq = 16
steps = 3
eval-seqs = 4
presets = baseline, qwd
seeds = 1, 2
INI
ok "a training recipe lists its runs" "$SHARDQ" sweep --list "$T/train.ini"
cp "$sq_tmp/out" "$T/train-list.txt"
ok "4 runs, with the corpus and the options" sh -c 'test "$(wc -l <"$0")" -eq 4 &&
  grep -q "qwd seed=2.*text.md --layers=1 --channels=16 --heads=2 --context=16 --seq=16 --eval-seqs=4" "$0"' \
  "$T/train-list.txt"
ok "runs them" "$SHARDQ" sweep --db "$T/tr.db" -q "$T/train.ini"
ok "a second time: nothing to do" "$SHARDQ" sweep --db "$T/tr.db" "$T/train.ini"
cp "$sq_tmp/err" "$T/train-again.txt"
ok "says so" grep -q "4 already done, 0 to run" "$T/train-again.txt"
pyrun "stored as train runs of the sweep, with their loss rows" "
c = sqlite3.connect(sys.argv[1])
r = c.execute(\"SELECT kind, sweep, preset, seed, status FROM runs ORDER BY id\").fetchall()
assert sorted(r) == sorted([('train', 'tr', p, s, 'done') for p in ('baseline', 'qwd') for s in (1, 2)]), r
assert c.execute('SELECT count(*) FROM train_steps').fetchone()[0] == 12
cfg = json.loads(c.execute('SELECT config FROM runs LIMIT 1').fetchone()[0])
assert cfg['layers'] == 1 and cfg['corpus'].endswith('text.md') and cfg['eval_seqs'] == 4, cfg
" "$T/tr.db"
# error feedback as a grid's knob: EF on and off are two keys, and each run's
# rows say which it was
cat >"$T/ef.ini" <<'INI'
[sweep]
name = ef
trace = traces/tiny
presets = tlqhs, qsdp
paths = grad
grad.ef = 0, 1
INI
ok "a grid over grad.ef runs" "$SHARDQ" sweep --db "$T/ef.db" -q "$T/ef.ini"
pyrun "four runs: the residual's state stored where EF was on, NULL elsewhere" "
c = sqlite3.connect(sys.argv[1])
r = c.execute(\"SELECT r.preset, p.value, count(m.ef_residual), count(*) FROM runs r JOIN params p ON p.run_id = r.id AND p.key = 'grad.inter.ef' JOIN step_metrics m ON m.run_id = r.id GROUP BY r.id\").fetchall()
assert sorted(r) == [('qsdp', '0', 0, 3), ('qsdp', '1', 3, 3), ('tlqhs', '0', 0, 3), ('tlqhs', '1', 3, 3)], r
keys = [k for (k,) in c.execute('SELECT key FROM runs')]
assert sorted('grad.intra.ef=1,' in k for k in keys) == [False, False, True, True], keys
assert all(('.ef=' in k) == ('grad.intra.ef=1,grad.inter' in k) for k in keys), keys
" "$T/ef.db"

printf '[sweep]\nname = x\ncommand = train\ntrace = traces/tiny\n' >"$T/bad10.ini"
expect_fail_with 2 "bad10.ini: [sweep] trace: not a key of a train sweep" \
  "$SHARDQ" sweep --list "$T/bad10.ini"
printf '[sweep]\nname = x\ntrace = traces/tiny\nlayers = 2\n' >"$T/bad11.ini"
expect_fail_with 2 "bad11.ini: [sweep] layers: not a key of a replay sweep (command = train makes one)" \
  "$SHARDQ" sweep --list "$T/bad11.ini"
printf '[sweep]\nname = x\ncommand = fly\n' >"$T/bad12.ini"
expect_fail_with 2 "bad12.ini: [sweep] command: 'fly': expected replay or train" \
  "$SHARDQ" sweep --list "$T/bad12.ini"

finish
