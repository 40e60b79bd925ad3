# cli_demo.sh -- `shardq demo`, the main job, at its smoke-test size
# (--tiny): every phase runs and stores what it should (the capture run and
# its trace, the replay sweep, the training comparison, a bench run, the cost
# model, the report), it prints the three lines and where the report is, a
# second run resumes without running anything again, and bad options fail.
# Then paths the recipe reader would cut (" ;", 300 characters), a second
# demo into the same directory, and a bench run of other options already in
# the database. The full-size demo takes minutes; docs/demo.md describes its
# output. tests/cli_demo_resume.sh kills demos and changes their options.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
cli_env

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
ok "the three lines and the report's place" sh -c 'grep -q "^  error: .*sdp4bit .* at [0-9.]* bits/param on the intra-node hop" "$0" &&
  grep -q "^  convergence: after 8 steps the validation loss is [0-9.]* under the baseline" "$0" &&
  grep -q "^  scale: .*sdp4bit is predicted [0-9.]*x faster" "$0" &&
  grep -q "^report: $1/d/report/index.html" "$0"' "$T/first.txt" "$T"
ok "no nan in the three lines" sh -c '! grep -A3 "three lines" "$0" | grep -qi nan' "$T/first.txt"
ok "the trace: 4 captured steps of 2 workers" sh -c 'test -f "$0/manifest.json" &&
  test "$(ls -d "$0"/step-* | wc -l)" -eq 4 && test -f "$0/step-000006/grads-w01.safetensors"' \
  "$T/d/trace"
pyrun "stored: 10 training runs (baseline and sdp4bit under 3 seeds), 42 replays, a bench run, a model run, all done" '
c = sqlite3.connect(sys.argv[1])
k = dict(c.execute("SELECT kind, count(*) FROM runs GROUP BY kind").fetchall())
assert k == {"train": 10, "replay": 42, "bench": 1, "model": 1}, k
assert c.execute("SELECT count(*) FROM runs WHERE status != \"done\"").fetchone()[0] == 0
presets = [r[0] for r in c.execute("SELECT preset || \" \" || seed FROM runs WHERE kind = \"train\" ORDER BY preset, seed")]
assert presets == ["baseline 1", "baseline 2", "baseline 3", "qw 1", "qwd 1", "sdp4bit 1",
                   "sdp4bit 2", "sdp4bit 3", "tlqhs 1", "zeropp 1"], presets
assert c.execute("SELECT count(*) FROM train_steps").fetchone()[0] == 10 * 8
assert c.execute("SELECT count(DISTINCT seed) FROM runs WHERE kind = \"replay\"").fetchone()[0] == 3
assert c.execute("SELECT count(*) FROM bench_results").fetchone()[0] > 0
assert c.execute("SELECT count(DISTINCT gpus) FROM model_results").fetchone()[0] >= 5
assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
' "$T/d/shardq.db"
ok "the recipes it ran are kept" test -f "$T/d/demo-replay.ini" -a -f "$T/d/demo-train.ini" \
  -a -f "$T/d/demo-seeds.ini"
ok "the report: index.html, report.md, figures" sh -c 'test -s "$0/index.html" && test -s "$0/report.md" &&
  test "$(ls "$0"/*.png | wc -l)" -ge 6' "$T/d/report"
ok "the page opens with the three lines and the setup" sh -c 'for f in "$0/report.md" "$0/index.html"; do
  for w in "Summary" "error: " "convergence: after 8 steps" "means of 3 and 3 seeds" "scale: " \
    "Setup" "model: a byte-level GPT, 1 layer" "corpus: " "topology: 1 x 2 workers" "steps: 8" \
    "seeds: 1, 2, 3" "version: shardq" "machine: " "date: "; do
    grep -q "$w" "$f" || { echo "$f: no $w"; exit 1; }; done
  test "$(grep -n "Summary" "$f" | head -1 | cut -d: -f1)" -lt "$(grep -n "Quantization error" "$f" | head -1 | cut -d: -f1)" || exit 1
done' "$T/d/report"
ok "the convergence line is worded by the seeds' interval" \
  grep -Eq "^  convergence: .*(within|beyond) the 95% interval of seeds" "$T/first.txt"

ok "demo again: resumes, runs nothing new" "$SHARDQ" demo --tiny --steps 8 --corpus "$T/corpus.txt" \
  --out "$T/d"
cat "$sq_tmp/out" "$sq_tmp/err" >"$T/second.txt"
ok "the second run found everything done" sh -c 'grep -q "already done" "$0" &&
  grep -q "42 of 42 configurations done (0 now, 42 before)" "$0" &&
  grep -q "5 of 5 configurations done (0 now, 5 before)" "$0"' "$T/second.txt"
# a bench run that stayed noisy (a busy machine) is measured again: the one
# run a resumed demo may add, and only when it says why
pyrun "no run added (but a bench run measured again, when the first stayed noisy)" '
c = sqlite3.connect(sys.argv[1])
k = dict(c.execute("SELECT kind, count(*) FROM runs GROUP BY kind").fetchall())
again = "measuring again" in open(sys.argv[2]).read()
assert k == {"train": 10, "replay": 42, "bench": 1 + again, "model": 1}, (k, again)
' "$T/d/shardq.db" "$T/second.txt"

# --- paths the recipe reader would cut, two demos, a foreign bench run -------
# The corpus's path holds " ;", where the recipe reader (libinih) starts a
# comment, beside a directory named like the part before it that holds other
# text, and is over 300 characters, longer than the reader's lines; so is
# the output directory's. Every training run must read the same text.
long=$T/$(printf 'p%.0s' $(seq 1 140))/$(printf 'q%.0s' $(seq 1 140))
# the output directory's name holds what once broke out of the report's
# gnuplot text: a quote and a command
out="$long/out ;d'.system('touch $T/demo-marker').'"
mkdir -p "$long/c" "$out"
cp "$T/corpus.txt" "$long/c ;x.txt"
for i in $(seq 1 200); do echo "other text $i: pack my box with five dozen liquor jugs"; done \
  >"$long/c/decoy.txt"
ok "the paths are over 300 characters" test "$(printf %s "$long/c ;x.txt" | wc -c)" -gt 300
# a bench run of other sizes: not the demo's
ok "a bench run of other options" "$SHARDQ" bench --db "$out/shardq.db" --sizes 1 \
  --min-time 0.01 --ops quantize
"$SHARDQ" demo --tiny --steps 4 --corpus "$long/c ;x.txt" --out "$out" >"$T/paths.txt" 2>&1 &
demo=$!
for _ in $(seq 1 1200); do
  grep -q '^\[1/6' "$T/paths.txt" && break
  sleep 0.05
done
expect_fail_with 75 "--out $out: another demo (pid $demo) is writing into this directory" \
  "$SHARDQ" demo --tiny --steps 4 --corpus "$T/corpus.txt" --out "$out"
wait "$demo"
status=$?
cat "$T/paths.txt" >"$sq_tmp/out"
ok "the demo with those paths completes" test "$status" -eq 0
ok "and its report ran nothing the output path said" test ! -e "$T/demo-marker"
pyrun "every training run read the same copy of the corpus, in the output directory" '
import os
c = sqlite3.connect(sys.argv[1])
paths = {json.loads(r[0])["corpus"] for r in
         c.execute("SELECT config FROM runs WHERE kind = \"train\" AND status = \"done\"")}
assert len(paths) == 1, paths
p = paths.pop()
assert os.path.dirname(p) == sys.argv[2] and os.path.basename(p).startswith("corpus-"), p
assert open(p, "rb").read() == open(sys.argv[3], "rb").read()
assert c.execute("SELECT count(*) FROM runs WHERE kind = \"train\"").fetchone()[0] == 10
' "$out/shardq.db" "$out" "$long/c ;x.txt"
pyrun "the recipes hold no value the reader would cut" '
for f in sys.argv[1:]:
    for n, line in enumerate(open(f), 1):
        assert len(line) < 190, (f, n, len(line))
        assert line.startswith(";") or ";" not in line and "#" not in line, (f, n, line)
' "$out/demo-train.ini" "$out/demo-replay.ini"
ok "the demo did not take the other bench run for its own" sh -c '! grep -q "reusing bench run" "$0"' \
  "$T/paths.txt"
pyrun "... and ran its own" '
c = sqlite3.connect(sys.argv[1])
n = c.execute("SELECT count(*) FROM runs WHERE kind = \"bench\" AND status = \"done\"").fetchone()
assert n[0] == 2, n
' "$out/shardq.db"

# --- a bench run whose figures stayed noisy is measured again ---------------
# (the spread stored over a quarter of the median: what SQ_BENCH_NOISY flags)
sqlite3 "$T/d/shardq.db" "UPDATE bench_results SET gb_per_s_std = gb_per_s WHERE run_id =
  (SELECT max(id) FROM runs WHERE kind = 'bench') AND op = 'quantize'"
nbench=$(sqlite3 "$T/d/shardq.db" "SELECT count(*) FROM runs WHERE kind = 'bench'")
ok "demo with a noisy bench run" "$SHARDQ" demo --tiny --steps 8 --corpus "$T/corpus.txt" --out "$T/d"
cp "$sq_tmp/out" "$T/noisy.txt"
ok "... says so and measures again" \
  grep -q "has figures that stayed noisy (a busy machine): measuring again" "$T/noisy.txt"
pyrun "... into a second bench run, nothing else added" '
c = sqlite3.connect(sys.argv[1])
k = dict(c.execute("SELECT kind, count(*) FROM runs GROUP BY kind").fetchall())
b0 = int(sys.argv[2])
assert k == {"train": 10, "replay": 42, "bench": b0 + 1, "model": 1}, (k, b0)
' "$T/d/shardq.db" "$nbench"

finish
