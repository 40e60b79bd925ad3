#!/bin/sh
# tests/man.sh -- the man pages: one per command of `shardq --help`, each
# written from the command's --help (build-aux/man-page.sh) and holding
# every option of it, rendering without a warning under groff, mandoc's
# lint and man, and installed under share/man/man1 by `make install`.
. "$SHARDQ_SRCDIR/tests/lib.sh"
T=$TEST_TMPDIR
M=$SHARDQ_BUILDDIR/man
for tool in groff mandoc man; do
  command -v $tool >/dev/null || {
    echo "error: no $tool: install groff-base, mandoc and man-db (./bootstrap --deps)" >&2
    exit 99
  }
done

# The pages there must be: shardq, each command of its "commands:" list and
# each subcommand of a command's "subcommands:" list, named by their words.
list() { # HELP-FILE SECTION PREFIX: the entries of a list, as page names
  awk -v sec="$2" -v pre="$3" '$0 == sec ":" { on = 1; next } on && /^[^ ]/ { exit }
    on && /^  [a-z]/ { t = substr($0, 3); sub(/  .*/, "", t); sub(/ [^a-z].*/, "", t)
      if (t != "help") { gsub(/ /, "-", t); print pre "-" t } }' "$1"
}
"$SHARDQ" --help >"$T/help"
commands=$(list "$T/help" commands shardq)
ok "shardq --help lists commands ($(echo $commands | wc -w))" test -n "$commands"
pages=shardq
for c in $commands; do   # a command of two words has its parent's page too
  parent=$(echo "$c" | sed -n 's/^\(shardq-[a-z]*\)-[a-z]*$/\1/p')
  for q in $parent $c; do
    case " $pages " in *" $q "*) ;; *) pages="$pages $q" ;; esac
  done
done
for c in $pages; do
  # shellcheck disable=SC2046
  "$SHARDQ" $(echo "${c#shardq}" | tr '-' ' ') --help >"$T/sub" 2>&1
  for q in $(list "$T/sub" subcommands "$c"); do
    case " $pages " in *" $q "*) ;; *) pages="$pages $q" ;; esac
  done
done
ok "every page built is one of them, and no more ($(echo $pages | wc -w))" sh -c '
  test "$(ls "$1" | grep "\.1$" | sed "s/\.1$//" | sort | tr "\n" " ")" = \
    "$(printf "%s\n" $2 | sort | tr "\n" " ")"' sh "$M" "$pages"

for p in $pages; do
  f=$M/$p.1
  ok "$p(1) exists" test -s "$f"
  test -s "$f" || continue
  ok "$p(1): groff -man -ww -z says nothing" sh -c 'test -z "$(groff -man -ww -z "$1" 2>&1)"' sh "$f"
  ok "$p(1): mandoc -Tlint -Wwarning says nothing" \
    sh -c 'test -z "$(mandoc -Tlint -Wwarning "$1" 2>&1)"' sh "$f"
  ok "$p(1): man -l renders it without a warning" \
    sh -c 'MANWIDTH=200 man -l "$1" 2>"$2/err" >"$2/page" && test ! -s "$2/err" && test -s "$2/page"' \
    sh "$f" "$T"
  # every option of --help is in the page (its term, as the page renders it)
  words=$(echo "${p#shardq}" | tr '-' ' ')
  # shellcheck disable=SC2086
  "$SHARDQ" $words --help >"$T/h" 2>&1
  MANWIDTH=200 man -l "$f" 2>/dev/null | col -b >"$T/rendered"
  missing=
  for opt in $(sed -n 's/^  \(-[-a-zA-Z0-9]*\).*/\1/p; s/^  -[a-z], \(--[-a-z0-9]*\).*/\1/p' "$T/h" | sort -u); do
    grep -qF -e "$opt" "$T/rendered" || missing="$missing $opt"
  done
  ok "$p(1) holds every option of '$(echo shardq $words) --help'${missing:+ (missing:$missing)}" \
    test -z "$missing"
done

# The page's NAME line is the command's entry in its parent's list.
ok "shardq-replay(1)'s NAME is replay's entry in shardq --help" \
  grep -qx 'shardq\\-replay \\- run a scheme over a trace; results go to the database' "$M/shardq-replay.1"

# make install puts them under share/man/man1, and the manual under share/doc
ok "make install-man into a DESTDIR" make -C "$SHARDQ_BUILDDIR" install-man DESTDIR="$T/root"
n=$(find "$T/root" -path '*/share/man/man1/shardq*.1' | wc -l)
ok "... installs the $(echo $pages | wc -w) pages under share/man/man1 ($n)" test "$n" -eq "$(echo $pages | wc -w)"
ok "make install-data installs the manual" make -C "$SHARDQ_BUILDDIR" install-dist_docDATA \
  install-dist_manualDATA DESTDIR="$T/root"
ok "... README.md, NEWS and every chapter of docs/ under share/doc/shardq" sh -c '
  d=$(find "$1" -type d -path "*/share/doc/shardq" | head -1)
  test -n "$d" && test -s "$d/README.md" && test -s "$d/NEWS" || exit 1
  test "$(cd "$2/docs" && ls *.md | sort | tr "\n" " ")" = "$(cd "$d/docs" && ls *.md | sort | tr "\n" " ")"' \
  sh "$T/root" "$SHARDQ_SRCDIR"
finish
