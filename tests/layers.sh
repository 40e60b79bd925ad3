# layers.sh -- the house's layering, read from the sources by tests/layers.py:
# no cycle among the files of src/, include/shardq/ and kernels/ (includes and
# calls), no file of a lower module including or calling a higher one (the
# order is MODULES in tests/layers.py, written down there alone), SQLite
# called only from src/store, src/cli at most 15% of the src lines (printed)
# with no function over 150 lines, and no import cycle in python/shardq.
# Each check says what breaks it; a self-test first shows that each can fail.

: "${SHARDQ_SRCDIR:=${srcdir:-$(dirname "$0")/..}}"
. "$SHARDQ_SRCDIR/tests/lib.sh"
L="$SHARDQ_SRCDIR/tests/layers.py"
S=$SHARDQ_SRCDIR

ok "each check fails on a tree made to break it (layers.py --selftest)" python3 "$L" --selftest
ok "no cycle among the files of src/, include/shardq/ and kernels/" python3 "$L" --check cycles "$S"
ok "no file includes or calls a higher module (MODULES in tests/layers.py)" \
  python3 "$L" --check order "$S"
ok "grep -l sqlite3_ src --include=*.c lists only src/store files" python3 "$L" --check sqlite "$S"
python3 "$L" --check share "$S" | sed 's/^/# /'
ok "src/cli is at most 15% of the src C lines (wc -l)" python3 "$L" --check share "$S"
python3 "$L" --check cli-fn "$S" | tail -n 1 | sed 's/^/# /'
ok "no function in src/cli is longer than 150 lines" python3 "$L" --check cli-fn "$S"
ok "no import cycle among python/shardq/*.py" python3 "$L" --check python "$S"
# The manual's statements of the order are MODULES's, word for word.
order=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import layers; print(" < ".join(layers.MODULES))' \
  "$SHARDQ_SRCDIR/tests")
for doc in README.md docs/layout.md; do
  ok "$doc states the module order of MODULES ($order)" sh -c '
    tr "\n\`" "  " <"$1" | tr -s " " | grep -qF -e "$2"' sh "$S/$doc" "$order"
done
finish
