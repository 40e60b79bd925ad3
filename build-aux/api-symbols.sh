#!/bin/sh
# api-symbols.sh ARCHIVE HEADERDIR -- the symbols libshardq exports: those
# defined in ARCHIVE (the library's objects) whose name the public headers
# in HEADERDIR use. libtool turns the list into a version script, so the
# shared library hides everything else without -fvisibility=hidden (which,
# with GCC's target_clones, would change how the hot loops are dispatched).
set -eu
archive=$1 hdrdir=$2
tmp=${TMPDIR:-/tmp}/api-symbols.$$
trap 'rm -f "$tmp".*' EXIT
cat "$hdrdir"/*.h | grep -ow '[A-Za-z_][A-Za-z0-9_]*' | sort -u >"$tmp.words"
${NM:-nm} -g --defined-only "$archive" | awk 'NF == 3 && $2 ~ /^[TDBRVWi]$/ {print $3}' |
  sort -u >"$tmp.defined"
comm -12 "$tmp.defined" "$tmp.words"
