#!/bin/sh
# build-aux/man-page.sh -- one man page of the shardq command, written from
# the command's own --help, so that the two cannot disagree.
#
#   man-page.sh SHARDQ PAGE VERSION DATE DOCDIR PAGES... > PAGE.1
#
# SHARDQ is the built command, PAGE the page's name (shardq, shardq-replay,
# shardq-codec-encode: the words of the command joined by '-'), DATE the
# release date (NEWS), DOCDIR where the manual is installed, PAGES every
# page's name (for SEE ALSO). The help text's layout is the convention of
# src/cli/help/*.txt: a usage line (and its continuations), paragraphs, and
# lists under a lower-case header ending in ':' ("options:", "model:"), one
# entry per line indented by two spaces, its text from the second column on;
# what follows the lists is notes, or the exit status.
set -eu
test $# -ge 5 || { echo "usage: $0 SHARDQ PAGE VERSION DATE DOCDIR PAGES..." >&2; exit 2; }
shardq=$1 page=$2 version=$3 date=$4 docdir=$5
shift 5

words=$(echo "$page" | sed 's/^shardq-*//; s/-/ /g')
# shellcheck disable=SC2086 # the page's words are the command's arguments
help=$("$shardq" $words --help) || { echo "$0: $shardq $words --help failed" >&2; exit 1; }
# The one-line summary: the command's entry in its parent's list of
# commands, else the first sentence of its own text.
parent=${words% *}
test "$parent" = "$words" && parent=
# shellcheck disable=SC2086
parent_help=$("$shardq" $parent --help) || parent_help=

printf '%s\n' "$help" | awk -v page="$page" -v words="$words" -v version="$version" \
  -v date="$date" -v docdir="$docdir" -v pages="$*" -v parent="$parent" -v parent_help="$parent_help" '
function esc(s) {          # text as roff: backslashes, and no control line
  gsub(/\\/, "\\e", s)
  if (s ~ /^[.\047]/) s = "\\&" s
  return s
}
function put(s,   n, a, i, l) {   # a text line, wrapped (roff refills it anyway)
  n = split(s, a, " ")
  l = ""
  for (i = 1; i <= n; i++) {
    if (l != "" && length(l) + 1 + length(a[i]) > 78) { print esc(l); l = a[i] }
    else l = l (l == "" ? "" : " ") a[i]
  }
  if (l != "") print esc(l)
  fresh = 0
}
function pp() { if (!fresh) print ".PP"; fresh = 0 }
function term(s,   out, n, i, w, a) {  # an option term: flags bold, METAVARS italic
  n = split(s, a, " ")
  out = ""
  for (i = 1; i <= n; i++) {
    w = esc(a[i]); gsub(/-/, "\\-", w)
    if (a[i] ~ /^-/ || (i == 1 && a[i] ~ /^[a-z]/)) w = "\\fB" w "\\fR"
    else if (a[i] ~ /^[A-Z][A-Z0-9_.*=]*$/) w = "\\fI" w "\\fR"
    out = out (i > 1 ? " " : "") w
  }
  return out
}
function flush_para() {
  if (para != "") {
    pp()
    gsub(/\n/, " ", para)
    put(para)
    para = ""
  }
}
function flush_verb() {
  if (nverb) {
    pp(); print ".RS 2"; print ".nf"
    for (k = 1; k <= nverb; k++) print esc(verb[k])
    print ".fi"; print ".RE"
    nverb = 0
  }
}
function flush_entry() {
  if (eterm != "") {
    print ".TP"; print term(eterm); fresh = 0
    if (etext != "") put(etext)
    eterm = ""; etext = ""
  }
}
function section(name) {
  flush_para(); flush_verb(); flush_entry()
  if (name != cur) { print ".SH " name; fresh = 1 }
  cur = name
}
function summary(   n, i, a, line, rel, t, hit, text) {
  n = split(parent_help, a, "\n")
  rel = words; if (parent != "") rel = substr(words, length(parent) + 2)
  for (i = 1; i <= n; i++) {
    line = a[i]
    if (!hit && line ~ /^  [a-z]/) {
      # the command words of the entry: the lower-case words of its term
      t = substr(line, 3); sub(/  .*/, "", t)
      sub(/ [^a-z].*/, "", t)
      if (t != rel) continue
      hit = 1
      text = substr(line, 3)
      if (match(text, /  +/)) text = substr(text, RSTART + RLENGTH); else text = ""
      continue
    }
    if (hit) {
      if (line ~ /^      +[^ ]/) { sub(/^ +/, "", line); text = text (text == "" ? "" : " ") line }
      else break
    }
  }
  return text
}
function head(line,   s, n, k, u, pre, cmd, rest) {
  printf ".TH %s 1 \"%s\" \"shardq %s\" \"shardq manual\"\n", toupper(page), date, version
  print ".SH NAME"
  s = summary()
  if (s == "") {
    s = line; sub(/(\. |:).*/, "", s); sub(/\.$/, "", s)
    s = tolower(substr(s, 1, 1)) substr(s, 2)
  }
  n = page; gsub(/-/, "\\-", n)
  print n " \\- " esc(s)
  print ".SH SYNOPSIS"
  for (k = 1; k <= nusage; k++) {
    u = usage[k]
    if (k > 1) print ".br"
    if (match(u, "shardq( [a-z]+)*")) {
      pre = substr(u, 1, RSTART - 1); cmd = substr(u, RSTART, RLENGTH); rest = substr(u, RSTART + RLENGTH)
      # the command words are those up to the first option or argument
      print (pre != "" ? esc(pre) : "") "\\fB" cmd "\\fR" esc(rest)
    } else print esc(u)
  }
  section("DESCRIPTION")
}
BEGIN { cur = ""; nverb = 0; para = ""; eterm = ""; mode = "usage"; nusage = 0 }
{ lines[NR] = $0 }
END {
  for (i = 1; i <= NR; i++) {
    line = lines[i]; prev = (i > 1 ? lines[i - 1] : ""); next_ = (i < NR ? lines[i + 1] : "")
    if (mode == "usage") {
      if (line ~ /^usage: / || (line ~ /^       +[^ ]/ && nusage)) {
        u = line; sub(/^usage: +|^ +/, "", u); usage[++nusage] = u; continue
      }
      mode = "text"
    }
    if (line ~ /^[a-z][^.]*:$/ && next_ ~ /^  / && (prev == "" || prev ~ /^  /)) {
      if (cur == "") head(line)
      h = toupper(substr(line, 1, length(line) - 1))
      if (h == "OPTIONS" || h == "COMMANDS" || h == "SUBCOMMANDS") section(h)
      else if (h ~ /^GLOBAL OPTIONS/) section("GLOBAL OPTIONS")
      else { section("OPTIONS"); print ".SS " esc(substr(line, 1, length(line) - 1)); fresh = 1 }
      mode = "list"; continue
    }
    if (line == "") {
      if (mode == "list") flush_entry(); else { flush_para(); flush_verb() }
      continue
    }
    if (mode == "list" && line ~ /^  [^ ]/) {
      flush_entry()
      t = substr(line, 3)
      if (match(t, /  +/)) { eterm = substr(t, 1, RSTART - 1); etext = substr(t, RSTART + RLENGTH) }
      else { eterm = t; etext = "" }
      continue
    }
    if (mode == "list" && line ~ /^   +[^ ]/ && eterm != "") {
      t = line; sub(/^ +/, "", t); etext = etext (etext == "" ? "" : " ") t; continue
    }
    if (line ~ /^[^ ]/ && mode == "list") {
      flush_entry()
      mode = "notes"
      section(line ~ /^Exit status/ ? "EXIT STATUS" : "NOTES")
    } else if (mode == "text" && cur == "") {
      head(line)
    }
    if (line ~ /^ /) { flush_para(); verb[++nverb] = line; continue }
    flush_verb()
    para = para (para == "" ? "" : "\n") line
  }
  flush_para(); flush_verb(); flush_entry()
  print ".SH SEE ALSO"
  n = split(pages, p, " ")
  out = 0
  for (k = 1; k <= n; k++) {
    if (p[k] == page) continue
    if (page != "shardq" && p[k] != "shardq" && index(p[k], page "-") != 1 && index(page, p[k] "-") != 1) continue
    q = p[k]; gsub(/-/, "\\-", q)
    printf "%s.BR %s (1)", (out++ ? ",\n" : ""), q
  }
  if (out) print ""
  pp()
  print "The manual, a chapter per task (schemes, conventions, traces, replay, training,"
  print "real ranks, the cost model, reports, the C library, Python, plug-ins, CUDA):"
  print ".I " docdir "/docs/index.md"
  print "(docs/ in the source tree)."
}'
