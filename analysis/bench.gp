# bench.gp -- what `shardq bench --db` measured: the throughput of each codec
# operation (GB/s of bytes read + written, metadata included) against the
# input size (MB of fp32), beside a plain copy of the same size measured in
# the same run (bench_results). The latest bench run within the filter is
# drawn, at the largest thread count it measured.
#
#   gnuplot -e "db='shardq.db'" analysis/bench.gp
#
# writes OUT/bench.png and OUT/bench.svg (variables as in error-bits.gp: db,
# out, runs). Without data it prints why and writes nothing.

name = "bench"
# ---- common to every analysis/*.gp, from here to "end of common" -------------
# (tests/cli_report.sh checks that the copies agree)
if (!exists("db")) {
    print sprintf("%s.gp: say which database: gnuplot -e \"db='shardq.db'\" %s.gp", name, name)
    exit status 2
}
if (!exists("out")) { out = "." }
if (!exists("runs")) { runs = "" }
# ids: the runs to draw as "3-17,20", which `shardq report` gives after it
# evaluated its --runs filter itself, on a connection that can neither write
# nor load a library; runs is then only the filter's text, for messages.
# Anything but digits, '-' and ',' is refused: ids goes into SQL as it is.
if (exists("ids") && (ids eq "" ? 0 : sum [_k = 1:strlen(ids)] \
        (strstrt("0123456789-,", ids[_k:_k]) ? 0 : 1)) > 0) {
    print sprintf("%s.gp: ids: '%s' is not a list of run ids such as 3-17,20", name, ids)
    exit status 2
}
png = out."/".name.".png"
svg = out."/".name.".svg"
# A string as one /bin/sh word whatever it holds (a filter may hold quotes,
# '$' or '`'): it's -> 'it'\''s'.
shq_(s) = strstrt(s, "'") ? s[1:strstrt(s, "'") - 1]."'\\''".shq_(s[strstrt(s, "'") + 1:]) : s
shq(s) = "'".shq_(s)."'"
# The rows of query q, tab-separated, NULL as an empty field, from the
# sqlite3 program on a read-only connection in safe mode (no extension, no
# file functions, no ATTACH): plot "< ".sql(q), or system(sql(q)).
sql(q) = "sqlite3 -readonly -safe -batch -bail -noheader -list -separator '\t' ".shq(db)." ".shq(q)
# load fetch("$v", q): the rows of q into the datablock $v, as the pipe gives
# them: read once, then drawn by every plot, series and format from memory
# (a plot of "< ".sql(q) runs sqlite3 again for each of them).
fetch(v, q) = "< echo '".v." << EOD'; ".sql(q)."; echo EOD"
set datafile separator "\t"
# The runs a figure may draw: done, of the kinds that cond says, and within
# ids (the ranges as JSON, [[3,17],[20]]), else within the runs filter.
idranges = !exists("ids") ? "" : "json_each('[[' || replace(replace('".ids."', ',', '],['),".\
    " '-', ',') || ']]') AS j"
within_ids = !exists("ids") ? "" : (ids eq "" ? "0" : "EXISTS (SELECT 1 FROM ".idranges.\
    " WHERE runs.id BETWEEN json_extract(j.value, '$[0]') AND coalesce(json_extract(j.value,".\
    " '$[1]'), json_extract(j.value, '$[0]')))")
runcond = exists("ids") ? within_ids : (runs eq "" ? "" : "(".runs.")")
selwhere(cond) = "SELECT id FROM runs WHERE status = 'done' AND ".cond.\
    (runcond eq "" ? "" : " AND ".runcond)
sel(kind) = selwhere("kind = '".kind."'")
within = db.(runs eq "" ? "" : " matching ".runs)
# The ids of query q as ranges, "3-17, 20": the runs named in the caption.
ranges(q) = "WITH i AS (".q."), g AS (SELECT id, id - row_number() OVER (ORDER BY id) AS g".\
    " FROM (SELECT DISTINCT id FROM i)), x AS (SELECT min(id) AS lo, max(id) AS hi FROM g".\
    " GROUP BY g ORDER BY lo) SELECT group_concat(CASE WHEN lo = hi THEN lo ELSE lo || '-' || hi".\
    " END, ', ') FROM x"
# The database and the filter, checked by one query.
nruns = system(sql("SELECT count(*) FROM runs WHERE ".(runcond eq "" ? "1" : runcond)))
if (GPVAL_SYSTEM_ERRNO == 127) {
    print sprintf("%s: the sqlite3 program is missing (apt-get install sqlite3)", name)
    exit status 1
}
if (GPVAL_SYSTEM_ERRNO != 0) {
    print sprintf("%s: cannot read the runs of %s (sqlite3 says why above)", name, within)
    exit status 1
}
# errors go to stderr, as above; what a figure drew or why not, to stdout
set print "-"
# The label of a run: its preset, then the grid it came from when the
# selected runs of its preset and kind come from several grids or sweeps
# ("sdp4bit [bb]", "sdp4bit [other-sweep/bb]"), then the knobs matching cond whose values
# vary between the selected runs of that preset and kind, in the order of
# their names; a gradient knob without "grad." (inter.bits=3), and named once
# when it varies alike on both hops (hadamard=0, not intra.hadamard=0
# inter.hadamard=0). Needs r, the ids of the selected runs; gives lab(id,
# preset, label). src/cli/report.c has the same SQL for the report's tables.
# vv is MATERIALIZED: built once rather than again for every run whose label
# reads it (which took seconds at a few hundred runs).
labels(cond) = "kv AS (SELECT p.run_id AS id, u.kind, u.preset, p.key, p.value, replace(".\
    "replace(replace(p.key, 'grad.intra.', ''), 'grad.inter.', ''), 'grad.', '') AS k FROM".\
    " params p JOIN runs u ON u.id = p.run_id WHERE p.run_id IN r AND (".cond.")), vk AS".\
    " (SELECT kind, preset, key FROM kv GROUP BY kind, preset, key HAVING count(DISTINCT".\
    " value) > 1), vv AS MATERIALIZED (SELECT kv.id, min(kv.key) AS o, CASE WHEN count(DISTINCT kv.value)".\
    " = 1 AND (count(*) > 1 OR min(kv.key) NOT LIKE 'grad.int%') THEN kv.k || '=' ||".\
    " min(kv.value) ELSE trim(coalesce('intra.' || kv.k || '=' || max(CASE WHEN kv.key LIKE".\
    " 'grad.intra.%' THEN kv.value END), '') || ' ' || coalesce('inter.' || kv.k || '=' ||".\
    " max(CASE WHEN kv.key LIKE 'grad.inter.%' THEN kv.value END), '')) END AS t FROM kv JOIN".\
    " vk ON vk.kind = kv.kind AND vk.preset = kv.preset AND vk.key = kv.key GROUP BY kv.id,".\
    " kv.k), ex AS (SELECT kind, preset, count(DISTINCT coalesce(sweep, '')) AS ns,".\
    " count(DISTINCT coalesce(sweep, '') || '/' || coalesce(grid, '')) AS ng FROM runs WHERE".\
    " id IN r GROUP BY kind, preset), lab AS (SELECT u.id, u.preset, u.preset || CASE WHEN".\
    " ex.ng > 1 THEN ' [' || CASE WHEN ex.ns > 1 THEN coalesce(u.sweep, 'no sweep') ||".\
    " coalesce('/' || nullif(u.grid, 'sweep'), '') ELSE coalesce(u.grid, 'no grid') END ||".\
    " ']' ELSE '' END || coalesce(' ' || (SELECT group_concat(t, ' ') FROM (SELECT t FROM vv".\
    " WHERE vv.id = u.id ORDER BY o)), '') AS label FROM runs u JOIN ex ON ex.kind = u.kind".\
    " AND ex.preset IS u.preset WHERE u.id IN r)"
# the presets in the order of 'shardq schemes'
presets = "baseline qw qwd ulq tlq tlqhs sdp4bit zeropp zeropp8 qsdp"
# ORDER BY porder: the presets in the order of presets, others after them
porder = "instr(' ".presets." ' || preset || ' ', ' ' || preset || ' ')"
set encoding utf8
# The style, a paper's: a sans font at 10 pt, lines 1.25 times gnuplot's,
# and Paul Tol's "muted" palette (told apart by readers with any common
# colour-vision deficiency, and in grey by the point types beside it), one
# colour per preset in every figure; others grey. A file given as style
# (shardq report --style FILE) is loaded after these lines and may set any
# of them: font, width and height (pixels of a PNG or SVG; a PDF is width /
# 100 inches wide), lwscale, pcolors[1..11] (the presets in the order of
# presets, then others), and any gnuplot setting.
font = "sans,10"
width = 900
height = 560
lwscale = 1.25
array pcolors[11] = ["#000000", "#CC6677", "#332288", "#DDCC77", "#117733", "#88CCEE", \
    "#882255", "#44AA99", "#999933", "#AA4499", "#888888"]
if (!exists("formats")) { formats = "png svg" }
if (exists("style") && style ne "") { load style }
pidx(p) = (_i = sum [_k = 1:words(presets)] (word(presets, _k) eq p ? _k : 0), _i ? _i : 11)
pcolor(p) = pcolors[pidx(p)]
# eval term(k): the terminal and output file of the k-th of formats
fmt_(k) = word(formats, k)
term(k) = fmt_(k) eq "png" ? sprintf("set terminal pngcairo size %d,%d enhanced font '%s' ".\
    "linewidth %g; set output '%s/%s.png'", width, height, font, lwscale, out, name) : \
    fmt_(k) eq "svg" ? sprintf("set terminal svg size %d,%d dynamic enhanced font '%s' ".\
    "linewidth %g background 'white'; set output '%s/%s.svg'", width, height, font, lwscale, \
    out, name) : fmt_(k) eq "pdf" ? sprintf("set terminal pdfcairo size %gin,%gin enhanced ".\
    "font '%s' linewidth %g; set output '%s/%s.pdf'", width / 100.0, height / 100.0, font, \
    lwscale, out, name) : sprintf("print 'formats: %s is none of png, svg, pdf'; exit status 2", \
    fmt_(k))
# ---- end of common -----------------------------------------------------------

run = system(sql("SELECT max(id) FROM (".sel("bench").") WHERE id IN (SELECT run_id FROM bench_results)"))
if (run eq "") {
    print sprintf("%s: skipped: no bench runs in %s", name, within)
    exit
}
nbench = int(system(sql("SELECT count(*) FROM (".sel("bench").") WHERE id IN (SELECT run_id FROM bench_results)")))
threads = int(system(sql("SELECT max(threads) FROM bench_results WHERE run_id = ".run)))
where = system(sql("SELECT coalesce(CASE WHEN json_valid(config) THEN json_extract(config,".\
    " '$.description') END, device, '') FROM runs WHERE id = ".run))
ops = system(sql("SELECT group_concat(op, ' ') FROM (SELECT op FROM bench_results WHERE run_id = ".\
    run." AND threads = ".threads." AND op <> 'copy' GROUP BY op ORDER BY max(gb_per_s) DESC)"))
# MB of fp32 input against GB/s (and its spread) of one op at that thread count
# every op's rows in one query, the op first: read once, each line its rows
# (and 5th: 1 when under half of the same op and size's 1-thread figure,
# SQ_BENCH_SLOW, on more than 1 thread)
slow = "(b.threads > 1 AND b.gb_per_s < 0.5 * (SELECT o.gb_per_s FROM bench_results o".\
    " WHERE o.run_id = b.run_id AND o.op = b.op AND o.elements = b.elements AND o.threads = 1))"
rows = "SELECT op, elements * 4.0 / 1048576, gb_per_s, coalesce(gb_per_s_std, 0), ".\
    "coalesce(".slow.", 0) FROM bench_results b WHERE run_id = ".run." AND threads = ".threads.\
    " ORDER BY op, elements"
load fetch("$rows", rows)
of(op) = strcol(1) eq op ? $2 : NaN
# figures that stayed noisy after the bench's three tries (spread over a
# quarter of the median, SQ_BENCH_NOISY, or under half of 1 thread's,
# SQ_BENCH_SLOW: a busy machine), copies included: ringed, and counted in
# the title
nnoisy = int(system(sql("SELECT count(*) FROM bench_results b WHERE run_id = ".run." AND".\
    " threads = ".threads." AND (gb_per_s_std > 0.25 * gb_per_s OR ".slow.")")))
noisy(x) = column(4) > 0.25 * column(3) || column(5) > 0 ? x : NaN
load fetch("$copy", "SELECT elements * 4.0 / 1048576, copy_gb_per_s FROM bench_results WHERE".\
    " run_id = ".run." AND threads = ".threads." AND op = (SELECT min(op) FROM bench_results".\
    " WHERE run_id = ".run.") ORDER BY elements")
copy = "$copy"

array ocolors[10] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", \
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]
array pts[6] = [7, 5, 9, 11, 13, 15]
set logscale x 2
set logscale y
set format x "%g"
set grid xtics ytics mxtics mytics lc rgb "#e0e0e0"
set xlabel "input size (MB of fp32)"
set ylabel "throughput (GB/s, bytes read + written)"
set xtics nomirror
set ytics nomirror
set key outside right top reverse Left spacing 1.1 samplen 3
set offsets graph 0.03, graph 0.03, 0, 0
set title sprintf("Codec throughput beside a plain copy: run %s, %s, %s", run, where, \
    threads > 0 ? sprintf("%d thread%s", threads, threads == 1 ? "" : "s") : "GPU").\
    (nbench > 1 ? sprintf(" (latest of %d bench runs)", nbench) : "").\
    (nnoisy > 0 ? sprintf("\n%d figure%s stayed noisy (ringed: spread over 25%% of the median ".\
    "or under half of 1 thread's after 3 tries; a busy machine)", nnoisy, nnoisy == 1 ? "" : "s") : "") noenhanced

do for [t = 1:words(formats)] {
    eval term(t)
    plot copy using 1:2 with linespoints lc rgb "black" lw 2.5 dt 2 pt 6 ps 1 title "copy", \
        for [i = 1:words(ops)] $rows using (of(word(ops, i))):3 with linespoints \
            lc rgb ocolors[(i - 1) % 10 + 1] lw 2 pt pts[(i - 1) % 6 + 1] ps 0.9 \
            dt 1 + (i - 1) / 10 title word(ops, i) noenhanced, \
        for [k = 1:(nnoisy > 0)] $rows using 2:(noisy($3)) with points pt 6 ps 3 lw 2 \
            lc rgb "#CC3311" title "noisy"
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, run, png, svg)
