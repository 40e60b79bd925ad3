# cli_hostile_db.sh -- a store that would harm its reader is refused: no
# output path replaces the database being read (itself, its -wal, -shm or
# -journal, a link to it); a file whose schema shardq did not create (a
# trigger, a view, a table of its own, a table of another definition) is
# opened by no command, and keeps its rows; a user's query stops at its
# time limit.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
: "${SHARDQ:=${SHARDQ_BUILDDIR:-$SHARDQ_SRCDIR}/src/shardq}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
need_sqlite3
cli_env
DB=$T/s.db

# A store with one replay in it: its rows are what the checks count.
"$SHARDQ" trace synth --steps 2 --workers 4 --topology 1x4 --params "w:64x64,b:64" "$T/tr" >/dev/null ||
  exit 99
"$SHARDQ" replay --db "$DB" --scheme sdp4bit "$T/tr" >/dev/null || exit 99
rows() { sqlite3 "$1" "SELECT (SELECT count(*) FROM runs) || ' ' || (SELECT count(*) FROM step_metrics)"; }
ROWS=$(rows "$DB")
ok "the store has a run and its step rows" test "${ROWS#1 }" -gt 0
# each section below starts from a copy of it
cp "$DB" "$T/pristine.db"

# intact FILE: the database still opens, whole, with the rows it had
intact() {
  ok "$2: the database is intact" test "$(sqlite3 "$1" "PRAGMA integrity_check")" = ok
  ok "$2: its rows are there" test "$(rows "$1")" = "$ROWS"
}

# ---------------------------------------------------------------------------
# No output replaces the database
# ---------------------------------------------------------------------------

expect_fail_with 1 "shardq db export: -o $DB: is the database being read ($DB): refused, it would be replaced" \
  "$SHARDQ" db --db "$DB" export -o "$DB"
intact "$DB" "export -o the database"
expect_fail_with 1 "-o $DB-wal: is the database being read ($DB-wal): refused" \
  "$SHARDQ" db --db "$DB" export -o "$DB-wal"
ok "no -wal file was written" test ! -s "$DB-wal"
intact "$DB" "export -o its -wal"
expect_fail_with 1 "-o $DB-journal: is the database being read ($DB-journal): refused" \
  "$SHARDQ" db --db "$DB" export --output="$DB-journal"
ln -s "$DB" "$T/link.csv"
expect_fail_with 1 "-o $T/link.csv: is the database being read ($DB): refused" \
  "$SHARDQ" db --db "$DB" export -o "$T/link.csv" step_metrics
ok "the link is still a link to the database" test "$(readlink "$T/link.csv")" = "$DB"
intact "$DB" "export -o a link to it"
# a link that names the -wal SQLite has not made yet, and another name of
# the database (relative, through ..)
ln -s "$DB-wal" "$T/dangling.csv"
expect_fail_with 1 "-o $T/dangling.csv: is the database being read ($DB-wal): refused" \
  "$SHARDQ" db --db "$DB" export -o "$T/dangling.csv"
mkdir "$T/sub"
expect_fail_with 1 "-o ../s.db: is the database being read ($DB): refused" \
  sh -c 'cd "$1/sub" && exec "$0" db --db "$1/s.db" export -o ../s.db' "$SHARDQ" "$T"
intact "$DB" "export -o another name of it"
ok "another file is written as before" "$SHARDQ" db --db "$DB" export -o "$T/s.db.csv"
ok "... with the runs" test "$(wc -l <"$T/s.db.csv")" -eq 2
# the other writers go through the same check: the report's files
expect_fail_with 1 "$T/rep/report.md: is the database in use ($T/rep/report.md): refused" \
  sh -c 'mkdir -p "$1/rep" && cp "$2" "$1/rep/report.md" && exec "$0" report --db "$1/rep/report.md" --out "$1/rep"' \
  "$SHARDQ" "$T" "$DB"
intact "$T/rep/report.md" "report --out the directory of the database"

# ---------------------------------------------------------------------------
# A schema that shardq did not create
# ---------------------------------------------------------------------------

# hostile NAME SQL: a copy of the store with SQL applied, refused by a
# replay into it, by db list and by db init, each naming the entry, and
# left as it was (the same bytes, the same rows).
hostile() {
  h=$T/$1.db
  cp "$T/pristine.db" "$h"
  sqlite3 "$h" "$2" || exit 99
  cp "$h" "$h.orig"
  expect_fail_with 1 "$h: $3" "$SHARDQ" replay --db "$h" --scheme sdp4bit "$T/tr"
  expect_fail_with 1 "$h: $3" "$SHARDQ" db --db "$h" list
  expect_fail_with 1 "$h: $3" "$SHARDQ" db --db "$h" export step_metrics
  expect_fail_with 1 "$h: $3" "$SHARDQ" db --db "$h" init
  ok "$1: the file is as it was" cmp -s "$h" "$h.orig"
  ok "$1: its rows are there" test "$(rows "$h")" = "$ROWS"
}

hostile trigger "CREATE TRIGGER t AFTER INSERT ON step_metrics BEGIN DELETE FROM step_metrics; END" \
  "the schema holds a trigger 't' that shardq did not create: refused (a database edited by hand could change or delete rows; drop it with sqlite3 if you trust the file)"
hostile view "CREATE VIEW v AS SELECT * FROM runs" "the schema holds a view 'v' that shardq did not create: refused"
hostile table "CREATE TABLE notes(x)" "the schema holds a table 'notes' that shardq did not create: refused"
hostile index "CREATE INDEX by_host ON runs(host)" "the schema holds an index 'by_host' that shardq did not create: refused"
hostile altered "ALTER TABLE runs ADD COLUMN extra TEXT" \
  "the schema's table 'runs' is not the one shardq creates at version 8 (its definition differs): refused"
hostile missing "DROP INDEX runs_key" "the schema lacks an index 'runs_key' that shardq creates at version 8: refused"
# a file of another program: tables, no shardq version
sqlite3 "$T/other.db" "CREATE TABLE runs(x)"
expect_fail_with 1 "$T/other.db: not a shardq store: it holds a table 'runs' but no shardq schema (user_version 0): refused" \
  "$SHARDQ" db --db "$T/other.db" init
ok "the other program's file is left alone" test "$(sqlite3 "$T/other.db" "SELECT count(*) FROM sqlite_schema")" = 1
# dropped, the trigger no longer stops anything: the file is shardq's again
sqlite3 "$T/trigger.db" "DROP TRIGGER t"
ok "once the trigger is dropped, the file opens" "$SHARDQ" db --db "$T/trigger.db" list
ok "... and a replay into it keeps its rows" "$SHARDQ" replay --db "$T/trigger.db" --scheme sdp4bit "$T/tr"
ok "... two runs now" test "$(sqlite3 "$T/trigger.db" "SELECT count(*) FROM runs")" = 2

# ---------------------------------------------------------------------------
# The time limit of a user's query
# ---------------------------------------------------------------------------

DB=$T/q.db
cp "$T/pristine.db" "$DB"
FOREVER="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
expect_fail_with 1 "shardq db export: QUERY '$FOREVER': stopped after 1 s (--query-timeout raises the limit)" \
  "$SHARDQ" db --db "$DB" export --query-timeout 1 -o "$T/forever.csv" "$FOREVER"
ok "the stopped export wrote no file" test ! -e "$T/forever.csv"
COUNT="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
expect_fail_with 1 "QUERY '$COUNT': stopped after 0.5 s" \
  "$SHARDQ" db --db "$DB" export --query-timeout 0.5 "$COUNT"
ok "a query within the limit runs" sh -c '"$0" db --db "$1" export --query-timeout 60 "SELECT count(*) AS n FROM step_metrics" | tail -n 1 | tr -d "\r" | grep -qx "${2#1 }"' "$SHARDQ" "$DB" "$ROWS"
ok "db list under a limit" "$SHARDQ" db --db "$DB" list --query-timeout 30 --where preset=sdp4bit
expect_fail_with 2 "shardq db export: --query-timeout: 'soon' is not a number" \
  "$SHARDQ" db --db "$DB" export --query-timeout soon runs
expect_fail_with 2 "shardq db list: --query-timeout: '-1' is out of range [0, 86400]" \
  "$SHARDQ" db --db "$DB" list --query-timeout -1
for s in list export; do
  ok "db $s --help names --query-timeout" sh -c '"$0" db "$1" --help | grep -q -- "--query-timeout SECONDS"' "$SHARDQ" "$s"
done
intact "$DB" "after the queries"

finish
