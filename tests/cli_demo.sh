# cli_demo.sh -- `shardq demo`, the main job, at its smoke-test size
# (--tiny): every phase runs and stores what it should (the capture run and
# its trace, the replay sweep, the training comparison, a bench run, the cost
# model, the report), it prints the three lines and where the report is, a
# second run resumes without running anything again, and bad options fail.
# The full-size demo takes minutes; the README gives its output and time.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
export SHARDQ_PROGRESS=0
unset SHARDQ_DB

ok "demo --help" "$SHARDQ" demo --help
cp "$sq_tmp/out" "$T/help.txt"
ok "the help names the options" sh -c 'for o in --out --corpus --steps --tiny; do
  grep -q -e "  $o" "$0" || { echo "no $o"; exit 1; }; done' "$T/help.txt"
ok "help lists demo first" sh -c '"$0" --help | grep -A1 "^commands:" | grep -q "^  demo "' "$SHARDQ"
expect_fail_with 2 "--steps 2: at least 4" "$SHARDQ" demo --steps 2
expect_fail_with 2 "unexpected argument 'now'" "$SHARDQ" demo now
expect_fail_with 1 "--corpus $T/none.txt: No such file or directory" \
  "$SHARDQ" demo --corpus "$T/none.txt" --out "$T/x"
: >"$T/file"
expect_fail_with 1 "--out $T/file/d: cannot create: Not a directory" \
  "$SHARDQ" demo --out "$T/file/d" --tiny

# a small text, so that the test needs no corpus package
for i in $(seq 1 200); do
  echo "line $i: the quick brown fox jumps over the lazy dog; sharded data parallel training"
done >"$T/corpus.txt"

ok "demo --tiny" "$SHARDQ" demo --tiny --steps 8 --corpus "$T/corpus.txt" --out "$T/d"
cp "$sq_tmp/out" "$T/first.txt"
ok "the six phases ran in order" sh -c 'test "$(grep -o "^\[[1-6]/6" "$0" | tr -d "\n")" = "[1/6[2/6[3/6[4/6[5/6[6/6"' "$T/first.txt"
ok "the three lines and the report's place" sh -c 'grep -q "^  error: .*sdp4bit" "$0" &&
  grep -q "^  convergence: after 8 steps the validation loss is [0-9.]* under the baseline" "$0" &&
  grep -q "^  scale: .*sdp4bit is predicted [0-9.]*x faster" "$0" &&
  grep -q "^report: $1/d/report/index.html" "$0"' "$T/first.txt" "$T"
ok "no nan in the three lines" sh -c '! grep -A3 "three lines" "$0" | grep -qi nan' "$T/first.txt"
ok "the trace: 4 captured steps of 2 workers" sh -c 'test -f "$0/manifest.json" &&
  test "$(ls -d "$0"/step-* | wc -l)" -eq 4 && test -f "$0/step-000006/grads-w01.safetensors"' \
  "$T/d/trace"
pyrun "stored: 6 training runs, 42 replays, a bench run, a model run, all done" '
c = sqlite3.connect(sys.argv[1])
k = dict(c.execute("SELECT kind, count(*) FROM runs GROUP BY kind").fetchall())
assert k == {"train": 6, "replay": 42, "bench": 1, "model": 1}, k
assert c.execute("SELECT count(*) FROM runs WHERE status != \"done\"").fetchone()[0] == 0
presets = [r[0] for r in c.execute("SELECT preset FROM runs WHERE kind = \"train\" ORDER BY preset")]
assert presets == ["baseline", "qw", "qwd", "sdp4bit", "tlqhs", "zeropp"], presets
assert c.execute("SELECT count(*) FROM train_steps").fetchone()[0] == 6 * 8
assert c.execute("SELECT count(DISTINCT seed) FROM runs WHERE kind = \"replay\"").fetchone()[0] == 3
assert c.execute("SELECT count(*) FROM bench_results").fetchone()[0] > 0
assert c.execute("SELECT count(DISTINCT gpus) FROM model_results").fetchone()[0] >= 5
assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
' "$T/d/shardq.db"
ok "the recipes it ran are kept" test -f "$T/d/demo-replay.ini" -a -f "$T/d/demo-train.ini"
ok "the report: index.html, report.md, figures" sh -c 'test -s "$0/index.html" && test -s "$0/report.md" &&
  test "$(ls "$0"/*.png | wc -l)" -ge 6' "$T/d/report"

ok "demo again: resumes, runs nothing new" "$SHARDQ" demo --tiny --steps 8 --corpus "$T/corpus.txt" \
  --out "$T/d"
cat "$sq_tmp/out" "$sq_tmp/err" >"$T/second.txt"
ok "the second run found everything done" sh -c 'grep -q "already done" "$0" &&
  grep -q "42 of 42 configurations done (0 now, 42 before)" "$0" &&
  grep -q "5 of 5 configurations done (0 now, 5 before)" "$0"' "$T/second.txt"
pyrun "no run added" '
c = sqlite3.connect(sys.argv[1])
k = dict(c.execute("SELECT kind, count(*) FROM runs GROUP BY kind").fetchall())
assert k == {"train": 6, "replay": 42, "bench": 1, "model": 1}, k
' "$T/d/shardq.db"

finish
