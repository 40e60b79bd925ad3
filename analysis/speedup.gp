# speedup.gp -- what `shardq model` predicts: the speedup of one training
# iteration over the baseline preset against the number of GPUs, one line per
# scheme (model_results.speedup), with 1 (no gain) dashed. The latest model
# run within the filter is drawn.
#
#   gnuplot -e "db='shardq.db'" analysis/speedup.gp
#
# writes OUT/speedup.png and OUT/speedup.svg (variables as in error-bits.gp:
# db, out, runs). Without data it prints why and writes nothing.

name = "speedup"
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

run = system(sql("SELECT max(id) FROM (".sel("model").") WHERE id IN (SELECT run_id FROM".\
    " model_results WHERE speedup IS NOT NULL)"))
if (run eq "") {
    print sprintf("%s: skipped: no model runs with speedups in %s", name, within)
    exit
}
nmodel = int(system(sql("SELECT count(*) FROM (".sel("model").") WHERE id IN (SELECT run_id FROM".\
    " model_results WHERE speedup IS NOT NULL)")))
schemes = system(sql("SELECT group_concat(preset, ' ') FROM (SELECT preset FROM (SELECT DISTINCT".\
    " scheme AS preset FROM model_results WHERE run_id = ".run." AND speedup IS NOT NULL) ORDER BY ".\
    porder.", preset)"))
# every scheme's rows in one query, the scheme first: read once, each line its rows
load fetch("$rows", "SELECT scheme, gpus, speedup FROM model_results WHERE run_id = ".run.\
    " AND speedup IS NOT NULL ORDER BY scheme, gpus")
of(s) = strcol(1) eq s ? $2 : NaN

array pts[6] = [7, 5, 9, 11, 13, 15]
set logscale x 2
set format x "%g"
set xtics 2
set grid xtics ytics lc rgb "#e0e0e0"
set xlabel "GPUs"
set ylabel "predicted speedup of an iteration over baseline (×)"
set xtics nomirror
set ytics nomirror
set key outside right top reverse Left spacing 1.1 samplen 3
set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05
# Schemes predicted alike (tlq under tlqhs) would hide one another: the i-th
# of n is drawn (i - (n+1)/2) * 0.06 of an octave to the side.
sx(i) = (i - (words(schemes) + 1) / 2.0) * 0.06
# what was predicted: the model and the platform of the run
mname = system(sql("SELECT coalesce(json_extract(config, '$.model'), '') FROM runs WHERE id = ".run))
mplat = system(sql("SELECT coalesce(json_extract(config, '$.platform'), '') FROM runs WHERE id = ".run))
# Measured points to compare with, drawn where the run's platform and model
# are theirs: platform, model, scheme, GPUs, speedup over the baseline,
# source (SDP4Bit, NeurIPS 2024, Table 2: 57.6 against 24.1 TFLOP/s per GPU;
# experiments/validation/sdp4bit-a100.ini has the row).
$measured << EOD
a100-slingshot10	GPT-1.3B	sdp4bit	64	2.39	SDP4Bit measured (its Table 2)
EOD
ismeasured(i) = strcol(1) eq mplat && strcol(2) eq mname
nmeasured = sum [k = 1:|$measured|] (strstrt($measured[k], mplat."\t".mname."\t") == 1 ? 1 : 0)
mlabel = "SDP4Bit measured"
set title sprintf("Predicted speedup of %s on %s against GPU count (model run %s)", \
    mname eq "" ? "a model" : mname, mplat eq "" ? "a platform" : mplat, run).\
    (nmodel > 1 ? sprintf(" (latest of %d model runs)", nmodel) : "") noenhanced

do for [t = 1:words(formats)] {
    eval term(t)
    plot 1 with lines lc rgb "#808080" dt 2 lw 1.5 title "1 (no gain)", \
        for [i = 1:words(schemes)] $rows using (of(word(schemes, i)) * 2**sx(i)):3 with linespoints \
            lc rgb pcolor(word(schemes, i)) lw 2 pt pts[(i - 1) % 6 + 1] ps 0.9 \
            title word(schemes, i) noenhanced, \
        for [k = 1:(nmeasured > 0)] $measured using (ismeasured(0) ? $4 : NaN):5 with points \
            lc rgb pcolor("sdp4bit") pt 12 ps 2.5 lw 2 title mlabel noenhanced, \
        for [k = 1:(nmeasured > 0)] $measured using (ismeasured(0) ? $4 : NaN):5:\
            (sprintf("%.2fx measured", $5)) with labels offset 0, -1.4 font ",9" \
            tc rgb pcolor("sdp4bit") notitle
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, run, png, svg)
