# cli_db.sh -- `shardq db`: init creates a store with the schema; runs put
# there with the sqlite3 command-line tool are listed, shown and exported
# (text, JSON, CSV) as they were written; export accepts only read-only
# statements and writes its file whole or not at all; a missing, foreign or
# newer file is refused with the reason; every level has its --help.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
need_sqlite3
T=$TEST_TMPDIR
DB=$T/s.db
unset SHARDQ_DB

# db OUT ARGS...: runs `shardq db --db $DB ARGS` with stdout into OUT.
db() {
  sq_out=$1
  shift
  "$SHARDQ" db --db "$DB" "$@" >"$sq_out"
}

# A digest of everything in the store, to show a command changed nothing.
digest() { sqlite3 "$1" .dump | cksum; }

# ---------------------------------------------------------------------------
# Help
# ---------------------------------------------------------------------------

ok "db --help" sh -c '"$0" db --help >"$1/h.txt"' "$SHARDQ" "$T"
ok "db --help prints the usage" grep -q "^usage: shardq db \[--db FILE\] SUBCOMMAND" "$T/h.txt"
ok "db --help names every subcommand" \
  sh -c 'for s in list show export init; do grep -q "^  $s " "$0" || exit 1; done' "$T/h.txt"
ok "help db prints the usage" sh -c '"$0" help db | grep -q "^usage: shardq db "' "$SHARDQ"
for s in list show export init; do
  ok "db $s --help" sh -c '"$0" db "$1" --help >"$2/h-$1.txt"' "$SHARDQ" "$s" "$T"
  ok "db $s --help prints its usage" grep -q "^usage: shardq db .*$s" "$T/h-$s.txt"
  ok "help db $s prints its usage" sh -c '"$0" help db "$1" | grep -q "^usage: shardq db .*$1"' "$SHARDQ" "$s"
done
ok "db list --help names its filters" \
  sh -c 'grep -q -- "--status S" "$0" && grep -q -- "--sweep NAME" "$0" && grep -q -- "--json" "$0"' "$T/h-list.txt"
ok "db export --help names the tables" grep -q "tensor_stats, bytes, timings" "$T/h-export.txt"

expect_fail_with 2 "usage: shardq db" "$SHARDQ" db
expect_fail_with 2 "unknown subcommand 'lst' (did you mean 'list'?)" "$SHARDQ" db lst
expect_fail_with 2 "unknown subcommand 'exprot' (did you mean 'export'?)" "$SHARDQ" db exprot
expect_fail_with 2 "unknown subcommand 'frobnicate' (list, show, export, init)" "$SHARDQ" db frobnicate
expect_fail_with 2 "unknown option '--jsn' (did you mean '--json'?)" "$SHARDQ" db list --jsn
expect_fail_with 2 "unknown option '--dbx' (did you mean '--db'?)" "$SHARDQ" db --dbx list
expect_fail_with 2 "option '--db' needs a value" "$SHARDQ" db --db
expect_fail_with 2 "--status: 'finished': expected running, done, failed or interrupted" "$SHARDQ" db list --status finished
expect_fail_with 2 "missing argument (expected RUN)" "$SHARDQ" db show
expect_fail_with 2 "RUN: 'one' is not an unsigned integer" "$SHARDQ" db show one
expect_fail_with 2 "unexpected argument '2'" "$SHARDQ" db show 1 2

# ---------------------------------------------------------------------------
# A missing, foreign, empty or newer file
# ---------------------------------------------------------------------------

expect_fail_with 1 "$T/none.db: no such database" "$SHARDQ" db --db "$T/none.db" list
expect_fail_with 1 "$T/none.db: no such database" "$SHARDQ" db show 1 --db "$T/none.db"
expect_fail_with 1 "$T/none.db: no such database" "$SHARDQ" db export --db="$T/none.db"
ok "a read-only command does not create the file" test ! -e "$T/none.db"
expect_fail_with 1 "shardq.db: no such database" sh -c 'cd "$1" && "$0" db list' "$SHARDQ" "$T"
expect_fail_with 1 "$T/env.db: no such database" env SHARDQ_DB="$T/env.db" "$SHARDQ" db list
expect_fail_with 1 "$T/flag.db: no such database" env SHARDQ_DB="$T/env.db" "$SHARDQ" db list --db "$T/flag.db"

head -c 8192 /dev/urandom >"$T/junk.db"
expect_fail_with 1 "$T/junk.db: file is not a database" "$SHARDQ" db --db "$T/junk.db" list
expect_fail_with 1 "$T/junk.db: file is not a database" "$SHARDQ" db --db "$T/junk.db" init
: >"$T/empty.db"
expect_fail_with 1 "$T/empty.db: not a shardq store" "$SHARDQ" db --db "$T/empty.db" list
sqlite3 "$T/new.db" "CREATE TABLE runs(x); PRAGMA user_version = 9"
for s in list init; do
  expect_fail_with 1 "$T/new.db: schema version 9 is newer than this shardq (8): upgrade shardq" \
    "$SHARDQ" db --db "$T/new.db" $s
done
ok "a newer file is left as it was" test "$(sqlite3 "$T/new.db" "PRAGMA user_version")" = 9

# ---------------------------------------------------------------------------
# db init
# ---------------------------------------------------------------------------

ok "db init creates the store" sh -c '"$0" db --db "$1" init >"$2/init1.txt"' "$SHARDQ" "$DB" "$T"
ok "db init says so" grep -qx "$DB: created, schema version 8" "$T/init1.txt"
ok "db init on the store again" sh -c '"$0" db init --db "$1" >"$2/init2.txt"' "$SHARDQ" "$DB" "$T"
ok "db init again changes nothing" grep -qx "$DB: ready, schema version 8" "$T/init2.txt"
ok "db init migrates an empty file" sh -c '"$0" db --db "$1" init | grep -q "ready, schema version 8"' "$SHARDQ" "$T/empty.db"
ok "the store has user_version 8" test "$(sqlite3 "$DB" "PRAGMA user_version")" = 8
ok "the store is in WAL mode" test "$(sqlite3 "$DB" "PRAGMA journal_mode")" = wal
ok "the ten tables, all STRICT" test "$(sqlite3 "$DB" "SELECT group_concat(name || ':' || strict, ' ') FROM (SELECT * FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite_%' ORDER BY name)")" = "bench_results:1 bytes:1 model_results:1 netbench_results:1 params:1 runs:1 step_metrics:1 tensor_stats:1 timings:1 train_steps:1"
expect_fail_with nonzero "cannot store TEXT value in INTEGER column runs.seed" \
  sqlite3 "$DB" "INSERT INTO runs(kind, status, config, seed, version, host, pid, started) VALUES ('k', 'done', '{}', 'x', 'v', 'h', 1, 't')"
ok "SHARDQ_DB names the store" sh -c 'SHARDQ_DB="$1" "$0" db list >/dev/null' "$SHARDQ" "$DB"

# Three runs: a done replay with everything, a failed one whose trace name
# needs CSV quoting and whose SNR is infinite, and a train still running.
sqlite3 "$DB" <<'EOF'
INSERT INTO runs(id, kind, key, sweep, status, config, preset, scheme, topo, device, trace,
                 seed, version, host, pid, started, ended, error) VALUES
 (1, 'replay', 'k1', 'sw', 'done', '{"a":1}', 'sdp4bit', 'weight.mode=diff', '2x4', 'cpu',
  '/data/traces/gpt2/', 42, '0.1.0', 'h', 123, '2026-11-23T08:01:02.345Z',
  '2026-11-23T08:01:14.645Z', NULL),
 (2, 'replay', 'k2', 'sw', 'failed', '{"a":2}', 'qsdp', 'x', '1x8', 'cuda:0', 'tr, "quoted"',
  7, '0.1.0', 'h', 124, '2026-11-23T08:02:00.000Z', '2026-11-23T09:12:30.000Z',
  'out of memory'),
 (3, 'train', NULL, NULL, 'running', '{}', NULL, NULL, NULL, NULL, NULL, 1, '0.1.0', 'h', 125,
  '2026-11-23T10:00:00.000Z', NULL, NULL);
INSERT INTO params VALUES (1, 'lr', '0.5'), (1, 'note', NULL);
INSERT INTO step_metrics VALUES
 (1, 1, 'grad', 1000, 0.1, 0.01, 0.3, 20.0, 0.99, -0.001, 0.0, 0.01, 0.5, NULL),
 (1, 2, 'grad', 1000, 0.2, 0.04, 0.3, 14.0, 0.98, 0.001, 0.0, NULL, 0.5, NULL),
 (1, 1, 'weight', 1000, 0.01, 0.0001, 0.03, 40.0, 0.9999, 0.0, 0.0, 0.0, 0.1, NULL),
 (2, 1, 'grad', 1000, 0.3, 0.09, 0.3, 9e999, 0.97, 0.0, 0.0, 0.0, 0.2, 0.25);
INSERT INTO tensor_stats VALUES
 (1, 1, 'grad', 'l0.w', 500, 0.1, 0.01, 0.3, 20.0, 0.99, -0.001, 0.0, 0.01, 0.5, NULL),
 (1, 1, 'grad', 'l1.w', 500, 0.1, 0.01, 0.3, 20.0, 0.99, -0.001, 0.0, 0.01, 0.5, NULL);
INSERT INTO bytes VALUES
 (1, 'grad_reducescatter', 'inter', 1000, 24, 1000, 24, 2000, 8, 4.096, 1600, 5.12),
 (1, 'weight_allgather', 'intra', 0, 0, 0, 0, 0, 0, NULL, 0, NULL);
INSERT INTO timings VALUES
 (1, 'grad_reducescatter', 4, 0.5, 1000000000, 2.0),
 (1, 'read', 1, 0.25, 0, NULL);
EOF
BEFORE=$(digest "$DB")

# ---------------------------------------------------------------------------
# db list
# ---------------------------------------------------------------------------

ok "db list" db "$T/list.txt" list
ok "db list: a header and three runs" test "$(wc -l <"$T/list.txt")" -eq 4
ok "db list: the header" grep -q "^id  *status  *kind  *preset  *topo  *seed  *trace  *started  *duration  *grad_rel_l2  *weight_rel_l2$" "$T/list.txt"
ok "db list: run 1, trace by its last component, 12.3 s, mean errors" \
  grep -q "^ *1  *done  *replay  *sdp4bit  *2x4  *42  *gpt2  *2026-11-23 08:01:02  *12.3s  *0.15  *0.01$" "$T/list.txt"
ok "db list: run 2, 1h10m, no weight path" \
  grep -q "^ *2  *failed  *replay  *qsdp  *1x8  *7  *tr, \"quoted\"  *2026-11-23 08:02:00  *1h10m  *0.3  *-$" "$T/list.txt"
ok "db list: run 3, running, nothing measured" \
  grep -q "^ *3  *running  *train  *-  *-  *1  *-  *2026-11-23 10:00:00  *-  *-  *-$" "$T/list.txt"
# rows left running on this host: by a process that is gone, by a pid that
# another process has now (this shell's, with another start time), and by
# this shell (start time unknown: the pid decides); run 3 is another host's
cp "$DB" "$T/int.db"
dead=$(sh -c 'echo $$')
pyrun "three rows left running on this host" '
import socket
c = sqlite3.connect(sys.argv[1])
for i, pid, start in ((4, int(sys.argv[2]), None), (5, int(sys.argv[3]), 1), (6, int(sys.argv[3]), None)):
    c.execute("INSERT INTO runs(id, kind, status, config, seed, version, host, pid, started, pid_start)"
              " VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?)", (i, "bench", "running", "{}", "v",
              socket.gethostname(), pid, "2026-11-23T11:00:00.000Z", start))
c.commit()' "$T/int.db" "$dead" "$$"
ok "db list --status interrupted: the gone process and the reused pid" sh -c \
  'test "$("$0" db --db "$1" list --status interrupted | awk "NR > 1 { printf \"%s \", \$1 }")" = "4 5 "' \
  "$SHARDQ" "$T/int.db"
ok "db list --status running: the live one and the other host's" sh -c \
  'test "$("$0" db --db "$1" list --status running --json | python3 -c "import json, sys; print([r[\"id\"] for r in json.load(sys.stdin)])")" = "[3, 6]"' \
  "$SHARDQ" "$T/int.db"
ok "db list: the columns line up" sh -c 'test "$(awk "{ print index(\$0, \"replay\") }" "$0" | sed -n "2,3p" | sort -u | wc -l)" -eq 1' "$T/list.txt"
ok "db list --status done" db "$T/done.txt" list --status done
ok "db list --status done: run 1 only" sh -c 'test "$(wc -l <"$0")" -eq 2 && grep -q "^ *1  *done" "$0"' "$T/done.txt"
ok "db list --kind train: run 3 only" sh -c '"$0" db --db "$1" list --kind train | tail -n +2 | grep -c . | grep -qx 1' "$SHARDQ" "$DB"
ok "db list --sweep sw: two runs" sh -c '"$0" db list --db="$1" --sweep sw | tail -n +2 | grep -c . | grep -qx 2' "$SHARDQ" "$DB"
ok "db list: no match" sh -c '"$0" db --db "$1" list --kind nope | grep -qx "no runs match in $1"' "$SHARDQ" "$DB"

ok "db list --json" db "$T/list.json" list --json
pyrun "db list --json: the runs as objects" '
d = json.load(open(sys.argv[1]))
assert [r["id"] for r in d] == [1, 2, 3], d
r = d[0]
assert r["status"] == "done" and r["kind"] == "replay" and r["key"] == "k1", r
assert r["trace"] == "/data/traces/gpt2/" and r["seed"] == 42, r
assert r["started"] == "2026-11-23T08:01:02.345Z" and r["ended"] == "2026-11-23T08:01:14.645Z", r
assert r["seconds"] == 12.3, r["seconds"]
assert abs(r["grad_rel_l2"] - 0.15) < 1e-15 and r["weight_rel_l2"] == 0.01, r
assert d[1]["weight_rel_l2"] is None and d[1]["error"] == "out of memory", d[1]
assert d[1]["trace"] == "tr, \"quoted\"", d[1]
assert d[2]["ended"] is None and d[2]["seconds"] is None and d[2]["key"] is None, d[2]
' "$T/list.json"
pyrun "db list --json --status failed" '
d = json.loads(sys.argv[1])
assert [r["id"] for r in d] == [2], d
' "$("$SHARDQ" db --db "$DB" list --json --status failed)"

# ---------------------------------------------------------------------------
# db show
# ---------------------------------------------------------------------------

ok "db show 1" db "$T/show.txt" show 1
ok "db show: the run" sh -c 'grep -q "^run 1 in " "$0" && grep -q "^  preset  *sdp4bit$" "$0" && grep -q "^  duration  *12.300 s$" "$0" && grep -q "^  config  *{\"a\":1}$" "$0"' "$T/show.txt"
ok "db show: the params" sh -c 'grep -q "^  lr  *0.5$" "$0" && grep -q "^  note  *-$" "$0"' "$T/show.txt"
ok "db show: per path: steps, mean and last rel_l2" \
  grep -q "^  grad  *2  *1000  *0.15  *0.2  *17 " "$T/show.txt"
ok "db show: the weight path" grep -q "^  weight  *1  *1000  *0.01  *0.01  *40 " "$T/show.txt"
ok "db show: the tensor rows" grep -q "^tensor stats: 2 rows over 2 tensors" "$T/show.txt"
ok "db show: bytes with bits per element and per real parameter" \
  grep -q "^  grad_reducescatter  *inter  *1000  *24  *1000  *24  *2000  *8  *4.096  *1600  *5.12$" "$T/show.txt"
sqlite3 "$DB" ".backup '$T/v4.db'"
# back to version 4 as an older shardq left it (a schema of another
# version is refused): without the columns and the table of versions 5 to 8
sqlite3 "$T/v4.db" "ALTER TABLE step_metrics DROP COLUMN ef_residual; ALTER TABLE tensor_stats DROP COLUMN ef_residual; ALTER TABLE train_steps DROP COLUMN ef_residual;
  ALTER TABLE runs DROP COLUMN grid; ALTER TABLE runs DROP COLUMN recipe; DROP TABLE netbench_results;
  ALTER TABLE bytes DROP COLUMN sent_params; ALTER TABLE bytes DROP COLUMN bits_per_param; PRAGMA user_version = 4"
ok "db show of a version-4 file: bytes without the real parameters" sh -c '"$0" db --db "$1" show 1 |
  grep -q "^  grad_reducescatter  *inter  *1000  *24  *1000  *24  *2000  *8  *4.096$"' "$SHARDQ" "$T/v4.db"
ok "db show: timings with GB/s" grep -q "^  grad_reducescatter  *4  *0.5  *1000000000  *2$" "$T/show.txt"
ok "db show 3: a run with nothing yet" sh -c '"$0" db --db "$1" show 3 | grep -c "(none)" | grep -qx 4' "$SHARDQ" "$DB"
ok "db show 1 --json" db "$T/show.json" show 1 --json
pyrun "db show --json: every section" '
d = json.load(open(sys.argv[1]))
assert d["run"]["id"] == 1 and d["run"]["seconds"] == 12.3, d["run"]
assert d["params"] == {"lr": "0.5", "note": None}, d["params"]
m = {x["path"]: x for x in d["metrics"]}
assert m["grad"]["steps"] == 2 and m["grad"]["last_rel_l2"] == 0.2, m
assert abs(m["grad"]["mean_rel_l2"] - 0.15) < 1e-15 and m["grad"]["frac_clipped"] == 0.01, m
assert m["weight"]["mean_snr_db"] == 40, m
assert d["tensor_stats"] == {"rows": 2, "tensors": 2}, d["tensor_stats"]
b = {(x["collective"], x["link"]): x for x in d["bytes"]}
assert b[("grad_reducescatter", "inter")]["bits_per_elem"] == 4.096, b
assert b[("weight_allgather", "intra")]["bits_per_elem"] is None, b
assert b[("grad_reducescatter", "inter")]["sent_params"] == 1600, b
assert b[("grad_reducescatter", "inter")]["bits_per_param"] == 5.12, b
assert b[("weight_allgather", "intra")]["bits_per_param"] is None, b
t = {x["op"]: x for x in d["timings"]}
assert t["grad_reducescatter"]["gb_per_s"] == 2 and t["read"]["gb_per_s"] is None, t
' "$T/show.json"
pyrun "db show --json: an infinite SNR is null" '
d = json.loads(sys.argv[1])
assert d["metrics"][0]["mean_snr_db"] is None, d["metrics"]
' "$("$SHARDQ" db --db "$DB" show 2 --json)"
expect_fail_with 1 "$DB: no run 99 (see 'shardq db list')" "$SHARDQ" db --db "$DB" show 99
ok "db show of an unknown run prints nothing" sh -c 'test -z "$("$0" db --db "$1" show 99 --json 2>/dev/null)"' "$SHARDQ" "$DB"

# ---------------------------------------------------------------------------
# db export
# ---------------------------------------------------------------------------

ok "db export (runs)" db "$T/runs.csv" export
ok "db export --csv runs: the same" sh -c '"$0" db --db "$1" export --csv runs | cmp -s - "$2"' "$SHARDQ" "$DB" "$T/runs.csv"
pyrun "db export: RFC 4180, header, quoting, NULL as empty" '
raw = open(sys.argv[1], "rb").read()
assert raw.endswith(b"\r\n") and raw.count(b"\r\n") == 4 and b"\n" not in raw.replace(b"\r\n", b""), raw
rows = list(csv.reader(io.StringIO(raw.decode(), newline="")))
assert rows[0] == ["id", "kind", "key", "sweep", "status", "config", "preset", "scheme", "topo",
                   "device", "trace", "seed", "version", "host", "pid", "started", "ended",
                   "error", "pid_start", "boot_id", "heartbeat", "grid", "recipe"], rows[0]
assert [r[0] for r in rows[1:]] == ["1", "2", "3"], rows
assert rows[1][5] == "{\"a\":1}" and rows[2][10] == "tr, \"quoted\"", rows
assert rows[3][2] == "" and rows[3][16] == "" and rows[2][17] == "out of memory", rows
assert b"\"tr, \"\"quoted\"\"\"" in raw, raw
' "$T/runs.csv"
ok "db export step_metrics" db "$T/sm.csv" export step_metrics
pyrun "db export: reals round-trip exactly, NULL empty, inf" '
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert len(rows) == 4, rows
assert [(r["run_id"], r["step"], r["path"]) for r in rows] == [("1", "1", "grad"), ("1", "1", "weight"), ("1", "2", "grad"), ("2", "1", "grad")], rows
assert float(rows[0]["rel_l2"]) == 0.1 and rows[0]["rel_l2"] == "0.10000000000000001", rows[0]
assert float(rows[1]["cosine"]) == 0.9999 and float(rows[1]["seconds"]) == 0.1, rows[1]
assert rows[2]["frac_clipped"] == "", rows[2]
assert math.isinf(float(rows[3]["snr_db"])), rows[3]
assert [r["ef_residual"] for r in rows] == ["", "", "", "0.25"], rows  # error feedback (version 8)
' "$T/sm.csv"
for t in params tensor_stats bytes timings; do
  ok "db export $t" sh -c '"$0" db --db "$1" export "$2" >"$3/$2.csv" && test "$(wc -l <"$3/$2.csv")" -eq 3' "$SHARDQ" "$DB" "$t" "$T"
done
ok "db export of a SELECT" db "$T/q.csv" export "SELECT r.preset, m.step, m.rel_l2 FROM runs r JOIN step_metrics m ON m.run_id = r.id WHERE m.path = 'grad' ORDER BY r.id, m.step"
pyrun "db export of a SELECT: its columns and rows" '
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert rows == [["preset", "step", "rel_l2"], ["sdp4bit", "1", "0.10000000000000001"], ["sdp4bit", "2", "0.20000000000000001"], ["qsdp", "1", "0.29999999999999999"]], rows
' "$T/q.csv"
ok "db export -o FILE" "$SHARDQ" db --db "$DB" export -o "$T/out.csv" step_metrics
ok "db export -o FILE writes what stdout gets" cmp -s "$T/out.csv" "$T/sm.csv"
ok "db export --output=- is stdout" sh -c '"$0" db --db "$1" export --output=- step_metrics | cmp -s - "$2"' "$SHARDQ" "$DB" "$T/sm.csv"

# Only statements that read.
for q in "DELETE FROM runs" "INSERT INTO params VALUES (3, 'x', 'y')" \
  "UPDATE runs SET status = 'done'" "DROP TABLE timings" "PRAGMA user_version = 9" \
  "WITH x AS (SELECT 1) DELETE FROM runs"; do
  expect_fail_with 2 "would write to the database; only read-only statements are accepted" \
    "$SHARDQ" db --db "$DB" export "$q"
done
expect_fail_with 2 "give one statement only" "$SHARDQ" db --db "$DB" export "SELECT 1; DELETE FROM runs"
# nor run a library: load_extension() is off on every connection of shardq
printf '#include <stdio.h>\n__attribute__((constructor)) static void mark(void)\n{ FILE *f = fopen(MARKER, "w"); if (f) fclose(f); }\n' >"$T/evil.c"
${CC:-cc} -shared -fPIC -DMARKER="\"$T/marker\"" -o "$T/evil.so" "$T/evil.c" || exit 99
expect_fail_with 1 "not authorized" "$SHARDQ" db --db "$DB" export "SELECT load_extension('$T/evil.so')"
expect_fail_with 1 "not authorized" "$SHARDQ" db --db "$DB" export \
  "SELECT id FROM runs WHERE load_extension('$T/evil.so') IS NULL"
ok "no library was loaded" test ! -e "$T/marker"
expect_fail_with 2 "it returns no rows" "$SHARDQ" db --db "$DB" export "BEGIN"
expect_fail_with 2 "QUERY 'nope' is neither a table (runs, params, step_metrics, tensor_stats, bytes, timings, train_steps, bench_results, model_results, netbench_results) nor a valid statement" \
  "$SHARDQ" db --db "$DB" export nope
expect_fail_with 2 "nor a valid statement: no such table: nope" "$SHARDQ" db --db "$DB" export "SELECT * FROM nope"
expect_fail_with 2 "unexpected argument 'bytes'" "$SHARDQ" db --db "$DB" export runs bytes

# A write that fails leaves nothing behind (and an existing file untouched).
expect_fail_with 1 "/dev/full: write failed: No space left on device" "$SHARDQ" db --db "$DB" export -o /dev/full
expect_fail_with 1 "standard output: write failed" sh -c '"$0" db --db "$1" export >/dev/full' "$SHARDQ" "$DB"
expect_fail_with 1 "$T/nodir/x.csv: cannot create" "$SHARDQ" db --db "$DB" export -o "$T/nodir/x.csv"
echo "keep me" >"$T/keep.csv"
BIG="WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 200000) SELECT i, i * 0.5 AS half FROM c"
expect_fail_with 1 "$T/keep.csv: write failed: File too large" \
  sh -c 'ulimit -f 64 && trap "" XFSZ && exec "$0" db --db "$1" export -o "$2" "$3"' "$SHARDQ" "$DB" "$T/keep.csv" "$BIG"
ok "the file a failed export was to replace is untouched" test "$(cat "$T/keep.csv")" = "keep me"
ok "no temporary file is left behind" sh -c 'test -z "$(ls "$0" | grep "keep.csv.tmp")"' "$T"
ok "without the limit that export succeeds" sh -c '"$0" db --db "$1" export -o "$2" "$3" && test "$(wc -l <"$2")" -eq 200001' "$SHARDQ" "$DB" "$T/keep.csv" "$BIG"

# ---------------------------------------------------------------------------
# Knob filters (--where) and the wide export, on a known store
# ---------------------------------------------------------------------------

K=$T/knobs.db
"$SHARDQ" db --db "$K" init >/dev/null
sqlite3 "$K" "
INSERT INTO runs(id, kind, sweep, grid, status, config, preset, scheme, seed, version, host, pid, started)
VALUES (1, 'replay', 's', 'a', 'done', '{}', 'sdp4bit', 'x', 1, 'v', 'h', 1, 't'),
       (2, 'replay', 's', 'a', 'done', '{}', 'sdp4bit', 'x', 2, 'v', 'h', 1, 't'),
       (3, 'replay', 's', 'b', 'done', '{}', 'tlq', 'x', 1, 'v', 'h', 1, 't'),
       (4, 'replay', 's', 'b', 'failed', '{}', 'tlq', 'x', 1, 'v', 'h', 1, 't');
INSERT INTO params(run_id, key, value) VALUES
  (1, 'grad.intra.bits', '4'), (1, 'grad.inter.bits', '4'), (1, 'grad.intra.round', 'sr'),
  (2, 'grad.intra.bits', '8'), (2, 'grad.inter.bits', '4'), (2, 'grad.intra.round', 'rtn'),
  (3, 'grad.intra.bits', '4'), (3, 'grad.inter.bits', '4.0'), (3, 'grad.intra.round', 'sr'),
  (4, 'grad.intra.bits', '2'), (4, 'grad.inter.bits', '2'), (4, 'grad.intra.round', 'sr');"
ids() { "$SHARDQ" db --db "$K" export "$@" | tail -n +2 | cut -d, -f1 | tr -d '\r' | tr '\n' ' '; }
ok "--where a knob: the runs that have it" test "$(ids --where grad.inter.bits=4)" = "1 2 3 "
ok "--where a shorthand: both hops must match (numbers as numbers)" test "$(ids --where grad.bits=4)" = "1 3 "
ok "--where twice: both hold" test "$(ids --where grad.bits=4 --where scheme=tlq)" = "3 "
ok "--where a run column" test "$(ids --where grid=a --where seed=2)" = "2 "
ok "--where text" test "$(ids --where grad.intra.round=rtn)" = "2 "
ok "--where status" test "$(ids --where status=failed)" = "4 "
ok "db export params --where: the rows of those runs" sh -c \
  '"$0" db --db "$1" export params --where grad.bits=2 | tail -n +2 | cut -d, -f1 | sort -u | tr -d "\r" | grep -qx 4' "$SHARDQ" "$K"
ok "db list --where" sh -c '"$0" db --db "$1" list --where preset=tlq --where status=done |
  tail -n +2 | awk "{print \$1}" | tr "\n" " " | grep -qx "3 "' "$SHARDQ" "$K"
expect_fail_with 2 "--where: 'nope.bits=1': no run has the knob or param nope.bits" \
  "$SHARDQ" db --db "$K" list --where nope.bits=1
expect_fail_with 2 "--where: 'bits': expected KEY=VALUE" "$SHARDQ" db --db "$K" export --where bits
expect_fail_with 2 "--where: selects the rows of a table" \
  "$SHARDQ" db --db "$K" export --where seed=1 "SELECT 1"
expect_fail_with 2 "--wide: exports the runs" "$SHARDQ" db --db "$K" export --wide params
ok "db export --wide" sh -c '"$0" db --db "$1" export --wide --where status=done >"$2/wide.csv"' "$SHARDQ" "$K" "$T"
pyrun "db export --wide: one typed column per knob, one row per run" '
import csv
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert [r["id"] for r in rows] == ["1", "2", "3"], rows
cols = list(rows[0])
assert cols[-3:] == ["grad.inter.bits", "grad.intra.bits", "grad.intra.round"], cols
assert "grid" in cols and "config" not in cols and "recipe" not in cols, cols
assert [r["grad.inter.bits"] for r in rows] == ["4", "4", "4"], rows  # REAL (4 and 4.0), as %.17g
assert [r["grad.intra.bits"] for r in rows] == ["4", "8", "4"], rows        # INTEGER
assert [r["grad.intra.round"] for r in rows] == ["sr", "rtn", "sr"], rows
' "$T/wide.csv"

# the migrations to versions 7 and 8 keep every row of an older file
V8="ALTER TABLE step_metrics DROP COLUMN ef_residual; ALTER TABLE tensor_stats DROP COLUMN ef_residual; ALTER TABLE train_steps DROP COLUMN ef_residual"
sqlite3 "$K" ".backup '$T/v6.db'"
sqlite3 "$T/v6.db" "$V8; ALTER TABLE runs DROP COLUMN grid; ALTER TABLE runs DROP COLUMN recipe; PRAGMA user_version = 6"
ok "a version-6 file migrates" sh -c '"$0" db --db "$1" init | grep -q "ready, schema version 8"' "$SHARDQ" "$T/v6.db"
ok "the migration keeps every run and param" test \
  "$(sqlite3 "$T/v6.db" "SELECT count(*), sum(grid IS NULL), (SELECT count(*) FROM params) FROM runs")" = "4|4|12"
sqlite3 "$K" ".backup '$T/v7.db'"
sqlite3 "$T/v7.db" "$V8; PRAGMA user_version = 7"
steps7=$(sqlite3 "$T/v7.db" "SELECT count(*) FROM step_metrics")
ok "a version-7 file migrates" sh -c '"$0" db --db "$1" init | grep -q "ready, schema version 8"' "$SHARDQ" "$T/v7.db"
ok "... its step rows stay, error feedback's column NULL in them" test \
  "$(sqlite3 "$T/v7.db" "SELECT count(*), count(ef_residual) FROM step_metrics")" = "$steps7|0"

ok "no db command changed the store" test "$(digest "$DB")" = "$BEFORE"

finish
