# cli_report.sh -- `shardq report` and the gnuplot scripts of analysis/: a
# small store built by really running shardq (replays of several presets,
# seeds, bit widths, group sizes and Hadamard on and off; two short training
# runs; a bench run; model rows written with sqlite3) is drawn into valid PNG
# and SVG files, report.md and index.html name every figure and the runs it
# came from, a --runs filter changes them, a filter that selects nothing
# skips every figure, a report directory redraws on its own from its data/,
# and the errors name their cause: a missing database, a bad filter (exit
# 2), no gnuplot, a directory that cannot be written. A filter never runs a
# library (load_extension): the report evaluates it itself and binds the
# run ids it selected to the figures' queries. No name stored in the
# database and no path becomes gnuplot or shell text: the scripts read data
# files that shardq wrote and run no program. A full disk leaves no
# truncated image, and a killed report no temporary directory after the
# next one.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
for p in gnuplot sqlite3; do
  if ! command -v $p >/dev/null 2>&1; then
    echo "error: no $p command (apt-get install gnuplot-nox sqlite3, or ./bootstrap --deps)" >&2
    exit 99
  fi
done
T=$TEST_TMPDIR
DB=$T/r.db
FIGURES="error-bits error-group hadamard bias bytes loss bench speedup"
export SHARDQ_PROGRESS=0 OMP_NUM_THREADS=1
unset SHARDQ_DB

# ---------------------------------------------------------------------------
# The store, by running shardq
# ---------------------------------------------------------------------------

"$SHARDQ" trace synth --data outliers --workers 4 --topology 2x2 --steps 3 \
  --params a:64x64,b:32x128,c:256 "$T/tr" >/dev/null || exit 99
replay() { "$SHARDQ" replay --db "$DB" -q "$T/tr" "$@" || exit 99; }
for seed in 1 2; do
  for p in baseline qwd ulq tlq tlqhs sdp4bit; do replay --scheme "$p" --seed "$seed"; done
done
# a gradient sweep of bits and group sizes, with and without the Hadamard
for b in 2 8; do
  for g in 32 512; do
    replay --scheme tlq --set grad.inter.bits=$b --set grad.group=$g --paths grad
    replay --scheme tlqhs --set grad.inter.bits=$b --set grad.group=$g --paths grad
  done
done
replay --scheme qwd --set weight.group=512 --paths weight
# a corpus of English prose that does not change with the manual: the
# commands' --help texts
cat "$SHARDQ_SRCDIR"/src/cli/help/*.txt >"$T/corpus.txt"
for p in baseline sdp4bit; do
  "$SHARDQ" train --db "$DB" -q --corpus "$T/corpus.txt" --scheme $p --layers 1 --channels 32 \
    --heads 2 --context 32 --seq 32 --batch 2 --steps 10 --eval-every 5 --eval-seqs 4 \
    --workers 1x2 || exit 99
done
"$SHARDQ" bench --db "$DB" --sizes 1,2 --threads 1 --ops quantize,dequantize,rng \
  --min-time 0.01 >/dev/null || exit 99
sqlite3 "$DB" "INSERT INTO runs(kind, status, config, seed, version, host, pid, started)
  VALUES ('model', 'done', '{}', 0, 'test', 'h', 1, '2026-01-01T00:00:00.000Z');
  WITH s(scheme, f) AS (VALUES ('baseline', 1.0), ('qwd', 0.6), ('sdp4bit', 0.25)),
  g(gpus) AS (VALUES (8), (16), (64), (256))
  INSERT INTO model_results SELECT (SELECT max(id) FROM runs), scheme, gpus, 1, 0, 0, 0.1 * f,
    0.1 * f, 0, 0.01, 1 + 0.2 * f * (gpus / 8.0), 100, (1.2 + 0.2 * gpus / 8.0) / (1 + 0.2 * f * (gpus / 8.0)),
    1000000 * f FROM s, g" || exit 99
ok "the store has replay, train, bench and model runs" test \
  "$(sqlite3 "$DB" "SELECT group_concat(kind || ':' || n) FROM (SELECT kind, count(*) AS n FROM runs WHERE status = 'done' GROUP BY kind ORDER BY kind)")" \
  = "bench:1,model:1,replay:21,train:2"

# ids of the runs of a kind (for the checks below)
ids() { sqlite3 "$DB" "SELECT group_concat(id, ' ') FROM runs WHERE $1"; }

# check_report DIR: every figure of FIGURES drawn is a valid PNG and SVG,
# report.md and index.html name it, and every run id its caption gives is a
# done run of the store.
pyrun_report() {
  pyrun "$1" "
import os, re, xml.etree.ElementTree as ET
out, db = sys.argv[1], sys.argv[2]
want = dict(a.split('=') for a in sys.argv[3].split())   # figure=drawn|skipped
c = sqlite3.connect(db)
done = {r[0] for r in c.execute(\"SELECT id FROM runs WHERE status = 'done'\")}
md = open(out + '/report.md').read()
html = open(out + '/index.html').read()
def expand(s):
    ids = set()
    for part in s.split(', '):
        a, _, b = part.partition('-')
        ids.update(range(int(a), int(b or a) + 1))
    return ids
got = {}
for name, state in want.items():
    png, svg = out + '/' + name + '.png', out + '/' + name + '.svg'
    if state == 'drawn':
        assert open(png, 'rb').read(8) == b'\x89PNG\r\n\x1a\n', png
        root = ET.parse(svg).getroot()
        assert root.tag.endswith('svg'), (svg, root.tag)
        assert '](%s.png)' % name in md and '[SVG](%s.svg)' % name in md, name
        assert 'src=\"%s.png\"' % name in html and 'href=\"%s.svg\"' % name in html, name
        assert 'scripts/%s.gp' % name in html, name
    else:
        assert not os.path.exists(png) and not os.path.exists(svg), name
caps = re.findall(r'Drawn from (?:[a-z]+ )*runs? ([0-9, -]+)\.', md)
assert len(caps) == sum(v == 'drawn' for v in want.values()), (caps, want)
for cap in caps:
    assert expand(cap) <= done, (cap, done)
skips = md.count('Not drawn: ')
assert skips == sum(v == 'skipped' for v in want.values()), skips
assert html.count('<figure') == len(caps) and html.count('class=\"skipped\">Not drawn') == skips
assert '<script' not in html and 'http://' not in html and 'https://' not in html
assert html.rstrip().endswith('</html>'), html[-80:]
" "$2" "$DB" "$3"
}

# ---------------------------------------------------------------------------
# The whole store
# ---------------------------------------------------------------------------

ok "report --help" "$SHARDQ" report --help
cp "$sq_tmp/out" "$T/help.txt"
ok "the help names the options and the figures" sh -c 'for w in --db --out --runs --quiet $1; do
  grep -q -e "$w" "$0" || { echo "no $w"; exit 1; }; done' "$T/help.txt" "$FIGURES"
ok "help lists report" sh -c '"$0" --help | grep -q "^  report "' "$SHARDQ"

ok "report of the whole store" "$SHARDQ" report --db "$DB" --out "$T/all"
cp "$sq_tmp/out" "$T/all.txt"
ok "one progress line per figure" test "$(grep -c '^  [a-z-]*  *runs [0-9]' "$T/all.txt")" -eq 8
ok "and a last line" grep -q "^wrote $T/all/report.md and $T/all/index.html: 8 figures drawn, 0 not" "$T/all.txt"
pyrun_report "every figure drawn, valid, named with its runs" "$T/all" \
  "error-bits=drawn error-group=drawn hadamard=drawn bias=drawn bytes=drawn loss=drawn bench=drawn speedup=drawn"
ok "the loss figure names the training runs" \
  grep -q "Drawn from training runs $(ids "kind = 'train'" | tr ' ' -)\." "$T/all/report.md"
ok "the bench figure names the bench run" \
  grep -q "Drawn from bench run $(ids "kind = 'bench'")\." "$T/all/report.md"
# every error-group point stands on a run's 3 steps: each carries an error
# bar (the tlq sweep alone has 4 points): a vertical stroke of over a pixel
# with a short tic across both ends
pyrun "error-group draws a 95% interval at each point (several steps behind it)" "
import re
d = ' '.join(re.findall(r\"d='([^']*)'\", open(sys.argv[1]).read()))
segs = [tuple(map(float, m)) for m in re.findall(r'M([0-9.]+),([0-9.]+) L([0-9.]+),([0-9.]+)', d)]
tics = [(y, a, b) for a, y, b, y2 in segs if y == y2 and 0 < b - a <= 12]
bars = [s for s in segs if s[0] == s[2] and abs(s[1] - s[3]) > 1 and all(
    any(yy == y and a < s[0] < b for yy, a, b in tics) for y in (s[1], s[3]))]
assert len(bars) >= 4, (len(bars), 'the tlq sweep: 2 bit widths x 2 group sizes')
" "$T/all/error-group.svg"
cp "$DB" "$T/noisy.db"
sqlite3 "$T/noisy.db" "UPDATE bench_results SET gb_per_s_std = 0.1 * gb_per_s;
  UPDATE bench_results SET gb_per_s_std = gb_per_s WHERE op = 'quantize' AND threads = 1 AND
  elements = (SELECT min(elements) FROM bench_results)"
ok "a noisy bench figure: report" "$SHARDQ" report --db "$T/noisy.db" --out "$T/noisy" -q
ok "... the bench figure says it and rings it" sh -c 'grep -q "1 figure stayed noisy" "$0" &&
  grep -q ">noisy<" "$0"' "$T/noisy/bench.svg"
sqlite3 "$T/noisy.db" "UPDATE bench_results SET gb_per_s_std = 0.1 * gb_per_s"
ok "a steady bench figure: report" "$SHARDQ" report --db "$T/noisy.db" --out "$T/steady" -q
ok "... says nothing of noise" sh -c '! grep -q "stayed noisy" "$0"' "$T/steady/bench.svg"
ok "the speedup figure names the model run" \
  grep -q "Drawn from model run $(ids "kind = 'model'")\." "$T/all/report.md"
ok "the report keeps the scripts it ran, as built from analysis/" sh -c '
  for f in $2; do cmp "$0/analysis/$f.gp" "$1/scripts/$f.gp" || exit 1; done' \
  "$SHARDQ_SRCDIR" "$T/all" "$FIGURES"
pyrun "the tables: runs, errors, bits per link, losses, bench, model" "
md = open(sys.argv[1]).read()
for head in ('| kind | done runs | runs |', '| scheme | runs | seeds | grad rel. L2 |',
             '| scheme | kind | paths | runs | weight intra | weight inter | grad intra | grad inter |',
             '| scheme | runs | steps | final training loss | final validation loss |',
             '| op | run | threads | size MB | GB/s |', '| scheme | run | GPUs | iteration s |'):
    assert head in md, head
assert '| tlq inter.bits=2 group=32 |' in md, 'a label names the varying knobs'
assert '| qwd weight.group=512 |' in md, 'a weight knob keeps its path'
assert '| sdp4bit | replay |' in md and '| sdp4bit | train |' in md
assert '| copy |' in md and '| sdp4bit | ' in md.split('| scheme | run | GPUs |')[1]
" "$T/all/report.md"

# the shared block of the scripts is the same in every one
ok "every script carries the same common block" sh -c '
  for f in $1; do sed -n "/^# ---- common to every/,/^# ---- end of common/p" "$0/analysis/$f.gp" |
    cksum; done | sort -u | wc -l | grep -qx 1' "$SHARDQ_SRCDIR" "$FIGURES"

# ---------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------

ok "--runs selects some runs" "$SHARDQ" report --db "$DB" --out "$T/seed1" -q \
  --runs "seed = 1 AND kind = 'replay'"
pyrun_report "the replay figures only, from seed 1" "$T/seed1" \
  "error-bits=drawn error-group=drawn hadamard=drawn bias=drawn bytes=drawn loss=skipped bench=skipped speedup=skipped"
pyrun "their captions name only the runs of seed 1, fewer than before" "
import re
def ids(f):
    s = re.search(r'Quantization error against bits per parameter.*?Drawn from replay runs ([0-9, -]+)\.', open(f).read(), re.S).group(1)
    out = set()
    for part in s.split(', '):
        a, _, b = part.partition('-'); out.update(range(int(a), int(b or a) + 1))
    return out
c = sqlite3.connect(sys.argv[3])
seed1 = {r[0] for r in c.execute('SELECT id FROM runs WHERE seed = 1')}
a, s = ids(sys.argv[1]), ids(sys.argv[2])
assert s <= seed1 and s < a, (s, a)
" "$T/all/report.md" "$T/seed1/report.md" "$DB"
ok "a skipped figure says why" grep -q "Not drawn: no training runs in $DB matching seed = 1 AND kind = 'replay'\." "$T/seed1/report.md"

# a report written again over the old one, selecting nothing: every figure
# skipped, none left behind from before
cp -r "$T/all" "$T/none"
ok "a filter that selects nothing" "$SHARDQ" report --db "$DB" --out "$T/none" --runs "id = 0"
cp "$sq_tmp/out" "$T/none.txt"
ok "says so for every figure" test "$(grep -c '^  [a-z-]*  *skipped: ' "$T/none.txt")" -eq 8
pyrun_report "every figure skipped, no old image left" "$T/none" \
  "error-bits=skipped error-group=skipped hadamard=skipped bias=skipped bytes=skipped loss=skipped bench=skipped speedup=skipped"
ok "the reason names the database" grep -q "Not drawn: no bench runs in $DB matching id = 0\." "$T/none/report.md"

# ---------------------------------------------------------------------------
# A report directory redraws on its own: its scripts read only its data/
# ---------------------------------------------------------------------------

# gnuplot in a UTF-8 locale, as shardq report runs it (the scripts write UTF-8)
cp -r "$T/all" "$T/alone"
rm -f "$T/alone"/*.png "$T/alone"/*.svg
ok "gnuplot scripts/loss.gp in the report directory" sh -c 'cd "$1" && env LC_ALL=C.UTF-8 gnuplot scripts/loss.gp' sh "$T/alone"
cp "$sq_tmp/out" "$T/alone.txt"
ok "it prints one line, naming its runs and files" test "$(cat "$T/alone.txt")" = \
  "loss: runs $(ids "kind = 'train'" | tr ' ' -) -> ./loss.png, ./loss.svg"
ok "and writes both files, the same as the report's" sh -c 'cmp "$0/loss.svg" "$1/loss.svg" &&
  test -s "$0/loss.png"' "$T/alone" "$T/all"
ok "every script prints one line and no warning, and draws the report's figure again" sh -c '
  cd "$1" || exit 1
  for f in $0; do
    env LC_ALL=C.UTF-8 gnuplot scripts/$f.gp >"$f.txt" 2>&1 || { cat "$f.txt"; exit 1; }
    test "$(wc -l <"$f.txt")" -eq 1 && grep -q "^$f: runs " "$f.txt" || { cat "$f.txt"; exit 1; }
    cmp "$f.svg" "$2/$f.svg" || exit 1
  done' "$FIGURES" "$T/alone" "$T/all"
ok "no script reads a database or runs a program" sh -c '
  ! grep -nE "system\(|\"< |sqlite3 |popen|shell|^[[:space:]]*!" $(for f in $1; do echo "$0/analysis/$f.gp"; done)' \
  "$SHARDQ_SRCDIR" "$FIGURES"
mkdir "$T/nodata"
expect_fail_with nonzero "data/bias.vars" sh -c 'cd "$0" && env LC_ALL=C.UTF-8 gnuplot "$1"' \
  "$T/nodata" "$SHARDQ_SRCDIR/analysis/bias.gp"
ok "a filter with quotes and shell characters stays SQL" "$SHARDQ" report --db "$DB" \
  --out "$T/quoted" -q --runs "preset = 'it''s \$(false) \`false\`' OR kind = 'bench'"
ok "... and selects the bench run" grep -q "Drawn from bench run $(ids "kind = 'bench'")\." \
  "$T/quoted/report.md"

# ---------------------------------------------------------------------------
# A filter may read, never run code: a library whose constructor leaves a
# marker file, asked for through load_extension()
# ---------------------------------------------------------------------------

printf '#include <stdio.h>\n__attribute__((constructor)) static void mark(void)\n{ FILE *f = fopen(MARKER, "w"); if (f) fclose(f); }\n' >"$T/evil.c"
${CC:-cc} -shared -fPIC -DMARKER="\"$T/marker\"" -o "$T/evil.so" "$T/evil.c" || exit 99
EVIL="load_extension('$T/evil.so') IS NULL"
expect_fail_with 2 "--runs: '$EVIL': not authorized" \
  "$SHARDQ" report --db "$DB" --out "$T/evil" --runs "$EVIL"
expect_fail_with 2 "not authorized" "$SHARDQ" report --db "$DB" --out "$T/evil" \
  --runs "id IN (SELECT id FROM runs WHERE $EVIL)"
ok "the report's filter loaded no library" test ! -e "$T/marker"

# ---------------------------------------------------------------------------
# Nothing stored and no path becomes gnuplot or shell text: every name a run
# can carry holds quotes, backquotes, $( ), a line EOD and a system() call,
# and so do the database's and the output's paths
# ---------------------------------------------------------------------------

H=$T/hostile
mkdir -p "$H"
M=$H/marker
evil="q'a\"b\`touch $M-bq\`\$(touch $M-sub)@name
EOD
system(\"touch $M-sys\")
print 'x'; system('touch $M-sq') <script>alert(1)</script>
\\\""
# the paths' commands would leave their markers in $H, the report's directory
HDB="$H/it's a \"db\" \$(touch marker-db)"
cp "$DB" "$HDB"
python3 - "$HDB" "$evil" <<'PYH' || exit 99
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
e = sys.argv[2]
with c:
    c.execute("UPDATE runs SET sweep = ?, grid = ? WHERE kind = 'replay' AND id % 2 = 0", (e, e + " grid"))
    # a knob whose values vary between the runs of a preset: it is in their labels
    c.execute("INSERT INTO params(run_id, key, value) SELECT id, 'grad.' || ?, ? || id % 3 FROM runs "
              "WHERE kind IN ('replay', 'train')", (e, e))
    c.execute("UPDATE params SET value = ? || value WHERE key = 'grad.group'", (e,))
    c.execute("UPDATE runs SET preset = ? WHERE id = (SELECT max(id) FROM runs WHERE kind = 'replay')", (e,))
    c.execute("UPDATE model_results SET scheme = ? WHERE scheme = 'qwd'", (e,))
    c.execute("UPDATE bench_results SET op = ? WHERE op = 'dequantize'", (e,))
    # (topo stays: it is a shape, KxG, that the traffic figure computes with)
    c.execute("UPDATE runs SET scheme = ?, device = ?, trace = ?, host = ?, version = ?",
              (e, e, e, e, e))
    # the model run's name and platform, and the bench run's machine
    c.execute("UPDATE runs SET config = json_object('model', ?, 'platform', ?, 'description', ?) "
              "WHERE kind IN ('model', 'bench')", (e, e, e))
PYH
HOUT="$H/o'.system('touch marker-out').'\$(touch marker-out2)\"x"
in_h() { (cd "$H" && exec "$@"); }
ok "a report of names and paths that hold code" in_h "$SHARDQ" report --db "$HDB" --out "$HOUT"
cp "$sq_tmp/out" "$T/hostile.txt"
ok "draws every figure" grep -q "8 figures drawn, 0 not" "$T/hostile.txt"
ok "and runs none of it" sh -c 'test -z "$(ls "$0" | grep "^marker")" || { ls "$0"; exit 1; }' "$H"
pyrun "the names are shown as data: in the labels of the figures and in the tables" '
import glob
out = sys.argv[1]
svg = "".join(open(f, errors="replace").read() for f in glob.glob(out + "/*.svg"))
assert "touch" in svg and "EOD" in svg, "the hostile labels are drawn"
md = open(out + "/report.md").read()
assert "EOD" in md and "system(" in md, "the tables show the names"
html = open(out + "/index.html").read()
assert "<script" not in html and "<script" not in svg, "markup in a name stays text"
' "$HOUT"
ok "a report with the same names through --runs" in_h "$SHARDQ" report --db "$HDB" \
  --out "$HOUT" -q --runs "sweep LIKE '%EOD%' OR kind <> 'replay'"
ok "still runs none of it" sh -c 'test -z "$(ls "$0" | grep "^marker")" || { ls "$0"; exit 1; }' "$H"
ok "an output path with a line break in it" "$SHARDQ" report --db "$DB" -q --runs "kind = 'bench'" \
  --out "$H/line
break"
ok "... holds the figure" test -s "$H/line
break/bench.svg"

# ---------------------------------------------------------------------------
# A full disk (a file size limit: writes fail with EFBIG), and a kill
# ---------------------------------------------------------------------------

limited() { # BYTES CMD...: CMD with files limited to BYTES, SIGXFSZ ignored
  python3 -c 'import os, resource, signal, sys
n = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
os.execvp(sys.argv[2], sys.argv[2:])' "$@"
}
cp -r "$T/all" "$T/full"
expect_fail_with 1 "did not write all of" limited 36000 "$SHARDQ" report --db "$DB" --out "$T/full"
pyrun "no figure is left truncated, nor any temporary file" "
import os, xml.etree.ElementTree as ET
out = sys.argv[1]
names = sorted(os.listdir(out))
assert not [n for n in names if n.startswith('.')], names
for n in names:
    p = os.path.join(out, n)
    if n.endswith('.png'):
        assert open(p, 'rb').read()[-12:] == b'\\0\\0\\0\\0IEND\\xaeB\\x60\\x82', n
    elif n.endswith('.svg'):
        ET.parse(p)
assert len([n for n in names if n.endswith('.svg')]) < 8, names
" "$T/full"
ok "the report says which figures are missing" grep -q "Not drawn: its files could not be written whole" "$T/full/report.md"

"$SHARDQ" report --db "$DB" --out "$T/killed" -q &
rpid=$!
i=0
while test $i -lt 600 && ! ls -a "$T/killed" 2>/dev/null | grep -q '^\.shardq-report-'; do
  sleep 0.1
  i=$((i + 1))
done
kill -KILL $rpid 2>/dev/null
wait $rpid 2>/dev/null
ok "a report killed while drawing leaves its drawing directory" sh -c 'ls -a "$0" | grep -q "^\.shardq-report-"' "$T/killed"
ok "the next report into the directory" "$SHARDQ" report --db "$DB" --out "$T/killed" -q --runs "kind = 'bench'"
ok "removes it" sh -c 'test -z "$(ls -A "$0" | grep "^\.")" || { ls -A "$0"; exit 1; }' "$T/killed"
ok "and the signals it can catch leave nothing" sh -c '
  "$0" report --db "$1" --out "$2" -q & p=$!
  i=0; while test $i -lt 600 && ! ls -a "$2" 2>/dev/null | grep -q "^\.shardq-report-"; do sleep 0.1; i=$((i + 1)); done
  kill -TERM $p; wait $p; test $? -ne 0 && test -z "$(ls -a "$2" | grep "^\.shardq-report-")"' \
  "$SHARDQ" "$DB" "$T/termed"

# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

expect_fail_with 1 "$T/none.db: no such database" "$SHARDQ" report --db "$T/none.db" --out "$T/x"
expect_fail_with 1 "shardq.db: no such database" sh -c 'cd "$1" && "$0" report' "$SHARDQ" "$T/alone"
: >"$T/empty.db"
expect_fail_with 1 "$T/empty.db: not a shardq store" "$SHARDQ" report --db "$T/empty.db" --out "$T/x"
expect_fail_with 2 "no such column: nosuch" "$SHARDQ" report --db "$DB" --out "$T/x" --runs "nosuch = 1"
expect_fail_with 2 "it holds ';'" "$SHARDQ" report --db "$DB" --out "$T/x" --runs "1; DELETE FROM runs"
expect_fail_with 2 "a ')' closes more than it opened" "$SHARDQ" report --db "$DB" --out "$T/x" --runs "1) OR (1"
expect_fail_with 2 "it holds a comment" "$SHARDQ" report --db "$DB" --out "$T/x" --runs "1 -- all"
expect_fail_with 2 "the condition is empty" "$SHARDQ" report --db "$DB" --out "$T/x" --runs " "
# a filter that would run forever stops at the time limit (no time asserted)
FOREVER="id IN (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c)"
expect_fail_with 1 "--runs: '$FOREVER': stopped after 1 s (--query-timeout raises the limit)" \
  "$SHARDQ" report --db "$DB" --out "$T/x" --runs "$FOREVER" --query-timeout 1
expect_fail_with 2 "--query-timeout: 'soon' is not a number" \
  "$SHARDQ" report --db "$DB" --out "$T/x" --query-timeout soon
expect_fail_with 2 "unknown option '--rnus' (did you mean '--runs'?)" "$SHARDQ" report --rnus 1
expect_fail_with 2 "unexpected argument 'extra'" "$SHARDQ" report extra
ok "a usage error writes nothing" test ! -e "$T/x"
expect_fail_with 1 "gnuplot is not installed" env PATH="$T/no-such-dir" "$SHARDQ" report --db "$DB" --out "$T/x"
expect_fail_with 1 "apt-get install gnuplot-nox" env PATH="$T/no-such-dir" "$SHARDQ" report --db "$DB" --out "$T/x"
: >"$T/file"
expect_fail_with 1 "$T/file: not a directory" "$SHARDQ" report --db "$DB" --out "$T/file/sub"

# a directory that cannot be written (as an unprivileged user when the test
# runs as root): named, and nothing written
mkdir "$T/nob" "$T/nob/ro"
cp "$DB" "$T/nob/r.db"
chmod 0777 "$T/nob"
chmod 0644 "$T/nob/r.db"
chmod 0555 "$T/nob/ro"
chmod o+rx "$T" "$T/.." 2>/dev/null
expect_fail_with 1 "$T/nob/ro: cannot write into the directory" \
  ro_run "$SHARDQ" report --db "$T/nob/r.db" --out "$T/nob/ro"
ok "nothing was written there" test -z "$(ls "$T/nob/ro")"
chmod 0755 "$T/nob/ro"

# ---------------------------------------------------------------------------
# Two grids sharing presets, path-restricted; --where, --format, --style
# ---------------------------------------------------------------------------

G=$T/grids.db
cat >"$T/grids.ini" <<EOF
[sweep]
name = grids
trace = $T/tr
seeds = 1, 2
[grid intra8]
presets = sdp4bit, tlq
paths = grad
grad.intra.bits = 8
grad.inter.bits = 2, 4
grad.hadamard = 0, 32
[grid bb]
presets = sdp4bit, tlq
paths = grad
grad.bits = 2, 4
grad.hadamard = 0, 32
[grid weights]
presets = qw
paths = weight
weight.bits = 4
EOF
ok "a sweep of two grids that share presets" "$SHARDQ" sweep --db "$G" --jobs 2 -q "$T/grids.ini"
ok "every run stores its grid and the recipe" test \
  "$(sqlite3 "$G" "SELECT group_concat(grid || ':' || n, ' ') FROM (SELECT grid, count(*) AS n FROM runs WHERE recipe LIKE '%[grid bb]%' GROUP BY grid ORDER BY grid)")" \
  = "bb:16 intra8:16 weights:2"
ok "report of the two grids, as PNG, SVG and PDF" "$SHARDQ" report --db "$G" --out "$T/grids" -q \
  --format png,svg,pdf
pyrun "the grids draw as separate lines, labelled by grid and knobs; costs per path" '
out = sys.argv[1]
svg = open(out + "/error-bits.svg").read()
for lab in ("sdp4bit [intra8] hadamard=0", "sdp4bit [bb] hadamard=32", "tlq [intra8] hadamard=32",
            "tlq [bb] hadamard=0"):
    assert lab in svg, lab
assert "[weights]" not in svg, "a preset of one grid is not labelled by it"
for f in ("error-bits", "bytes", "hadamard", "bias"):
    assert open(out + "/" + f + ".pdf", "rb").read(5) == b"%PDF-", f
md = open(out + "/report.md").read()
assert "[PDF](bytes.pdf)" in md
b = open(out + "/bytes.svg").read()
assert "qw (weight only)" in b, "weight-only runs say so"
assert "(grad only)" in b
assert [l for l in md.splitlines() if l.startswith("| scheme | kind | paths |")], "the bits table names the paths"
row = [l for l in md.splitlines() if l.startswith("| qw | replay | weight |")]
assert row and row[0].count("| - |") >= 2, ("nothing is invented for the gradient path", row)
' "$T/grids"
ok "report --where: a knob and a column" "$SHARDQ" report --db "$G" --out "$T/where" -q \
  --where grad.bits=4 --where grid=bb
ok "report --where keeps the selected runs only" sh -c \
  'grep -q "the done runs matching grad.bits=4 and grid=bb" "$0/report.md" &&
   test "$(grep -c "| sdp4bit \|| tlq " "$0/report.md")" -ge 4 && ! grep -q "intra8" "$0/report.md"' "$T/where"
echo 'font = "serif,12"; pcolors[7] = "#000000"' >"$T/style.gp"
ok "report --style" "$SHARDQ" report --db "$G" --out "$T/styled" -q --style "$T/style.gp" --format svg
ok "the style file was applied" grep -q "serif" "$T/styled/error-bits.svg"
ok "an SVG alone is shown in the page" grep -q 'img src="error-bits.svg"' "$T/styled/index.html"
expect_fail_with 2 "--format: 'gif': expected png, svg or pdf" "$SHARDQ" report --db "$G" --out "$T/x" --format png,gif
expect_fail_with 2 "--where: 'nope=1': no run has the knob or param nope" "$SHARDQ" report --db "$G" --out "$T/x" --where nope=1
expect_fail_with 2 "--style: $T/none.gp: cannot read" "$SHARDQ" report --db "$G" --out "$T/x" --style "$T/none.gp"
# a style that never ends: refused before gnuplot could read it forever
expect_fail_with 2 "--style: /dev/zero: cannot read: not a regular file" \
  "$SHARDQ" report --db "$G" --out "$T/x" --style /dev/zero
mkfifo "$T/style.fifo"
expect_fail_with 2 "--style: $T/style.fifo: cannot read: not a regular file" \
  "$SHARDQ" report --db "$G" --out "$T/x" --style "$T/style.fifo"
ok "the style the figures were drawn with is kept beside their scripts" \
  cmp "$T/style.gp" "$T/styled/scripts/style.gp"

finish
