#!/bin/sh
# tests/results_script.sh -- experiments/results.sh, the one command that
# rewrites docs/results.md: the committed file has every table under its
# header (version, machine, date, command); --only remeasures one table and
# leaves every other section as it was; a failed measurement, a bad option or
# an unknown table changes nothing and says why.
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
R=$SHARDQ_SRCDIR/experiments/results.sh
DOC=$SHARDQ_SRCDIR/docs/results.md

ok "results.sh --help" bash "$R" --help
ok "... names --only and the tables" sh -c 'bash "$1" --help | grep -q -- "--only TABLE.*demo kernels replay"' sh "$R"
expect_fail_with 2 "unknown option" bash "$R" --frob
expect_fail_with 2 "no table 'nonsense'" bash "$R" --shardq "$SHARDQ" --only nonsense --out "$T/x.md"

# The committed file: the ten tables in order, each with its header.
headings="Demo|Codec kernels|Replay throughput|Training against PyTorch|SDP4Bit's Table 1 at small scale|Compressors compared|MPI collectives|Two nodes on a shaped link|Cost model against published rows|CUDA"
ok "docs/results.md has the ten tables in order" sh -c '
  test "$(sed -n "s/^## //p" "$1" | tr "\n" "|" | sed "s/|$//")" = "$2"' sh "$DOC" "$headings"
for field in version machine date command; do
  ok "... each under a '- $field:' line" sh -c '
    test "$(grep -c "^- $2:" "$1")" -eq 10' sh "$DOC" "$field"
done
ok "... and no path of the machine that wrote it" sh -c '! grep -n "/tmp/\|/home/\|/root/\|shardq-results\." "$1"' sh "$DOC"

# --only: the cost model's table (deterministic, a second) is remeasured and
# every other section is byte for byte the same.
cp "$DOC" "$T/copy.md"
ok "results.sh --only cost" bash "$R" --shardq "$SHARDQ" --only cost --out "$T/copy.md"
split() { # FILE: the file without its cost section
  awk '/^## / { skip = ($0 == "## Cost model against published rows") } !skip' "$1"
}
split "$DOC" >"$T/rest.doc"
split "$T/copy.md" >"$T/rest.copy"
ok "... leaves every other section as it was" cmp "$T/rest.doc" "$T/rest.copy"
awk '/^## Cost model against published rows/ { on = 1; print; next } /^## / { on = 0 } on' "$T/copy.md" >"$T/cost.md"
ok "... writes its header" sh -c 'grep -q "^- version: shardq " "$1" && grep -q "^- date: 20" "$1" &&
  grep -q "^shardq model --validate sdp4bit-a100$" "$1"' sh "$T/cost.md"
ok "... and the validation table (GPT-1.3B, the paper's 2.39x)" grep -q "GPT-1.3B .* 2.39x" "$T/cost.md"

# A measurement that fails leaves the file as it was, with a non-zero exit.
cat >"$T/broken" <<'EOS'
#!/bin/sh
case $1 in --version) echo "shardq 0.0.0";; *) echo "broken: $*" >&2; exit 1;; esac
EOS
chmod +x "$T/broken"
cp "$T/copy.md" "$T/before.md"
expect_fail_with 1 "a measurement failed" bash "$R" --shardq "$T/broken" --only cost --out "$T/copy.md"
ok "... and the file is unchanged" cmp "$T/before.md" "$T/copy.md"
finish
