# bias.gp -- whether a scheme's rounding is biased: the mean signed error of
# the replayed gradients and weights (step_metrics.mean_signed) relative to
# their RMS error (the square root of step_metrics.mse), each run's mean over
# its steps, then the mean over the runs of a scheme (its seeds) with a 95%
# confidence interval of that mean (Student's t). 0 is unbiased; +-1 would be
# an error that is all bias. A scheme is its preset with the knobs that vary
# between its runs; past 20 schemes in a panel, the runs of a preset that
# differ only in bits and group size are pooled, and the panel says so.
#
#   gnuplot -e "db='shardq.db'" analysis/bias.gp
#
# writes OUT/bias.png and OUT/bias.svg (variables as in error-bits.gp: db,
# out, runs). Without data it prints why and writes nothing.

name = "bias"
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

# per run of path p: its label (pool: without bits and group), mean signed
# error and mean squared error over its steps
cond(p, pool) = "p.key LIKE '".p.".%'".(pool ? " AND p.key NOT LIKE '%.bits' AND p.key NOT LIKE '%.group'" : "")
base(p, pool) = "WITH r AS (".sel("replay")."), ".labels(cond(p, pool)).", ".\
    "e AS (SELECT run_id AS id, avg(mean_signed) AS ms, avg(mse) AS mse FROM step_metrics".\
    " WHERE run_id IN r AND path = '".p."' AND mse > 0 GROUP BY run_id), ".\
    "d AS (SELECT e.id, lab.preset, lab.label, e.ms, e.mse FROM e JOIN lab ON lab.id = e.id) "
series(p, pool) = system(sql(base(p, pool)."SELECT group_concat('\"' || label || '\"', ' ') FROM".\
    " (SELECT label, min(".porder.") AS o, min(id) AS i FROM d GROUP BY label ORDER BY o, i)"))
# every run of path p, its label first: read once, each series its rows
runs_of(p, pool) = base(p, pool)."SELECT label, ms, mse FROM d ORDER BY label, id"

gs = series("grad", 0)
gpool = words(gs) > 20
if (gpool) { gs = series("grad", 1) }
ws = series("weight", 0)
wpool = words(ws) > 20
if (wpool) { ws = series("weight", 1) }
if (words(gs) + words(ws) == 0) {
    print sprintf("%s: skipped: no replay runs with error statistics in %s", name, within)
    exit
}
drawn = system(sql(ranges("SELECT id FROM (".base("grad", 0)."SELECT id FROM d) UNION SELECT id FROM (".\
    base("weight", 0)."SELECT id FROM d)")))
panels = (words(gs) > 0) + (words(ws) > 0)

# Student's t at 97.5% for 1..30 degrees of freedom, then the normal's 1.96
array tq[30] = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, \
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, \
    2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
t975(df) = df <= 30 ? tq[df] : 1.96

# one line per scheme into a datablock: position, mean, half-width, runs;
# each run's ratio is its mean signed error over its RMS error
do for [pi = 1:2] {
    p = pi == 1 ? "grad" : "weight"
    list = pi == 1 ? gs : ws
    pool = pi == 1 ? gpool : wpool
    if (words(list) > 0) { load fetch("$runs", runs_of(p, pool)) }
    if (pi == 1) { set print $grad } else { set print $weight }
    do for [i = 1:words(list)] {
        l = word(list, i)
        stats $runs using (strcol(1) eq l ? $2 / sqrt($3) : NaN) nooutput
        n = STATS_records
        # identical values (round-to-nearest is deterministic) can leave the
        # variance a hair below zero, and its square root undefined
        sd = STATS_stddev
        sd = sd == sd ? sd : 0
        half = n > 1 ? t975(n - 1) * sd * sqrt(n / (n - 1.0)) / sqrt(n) : 0
        print sprintf("%d\t%.6g\t%.6g\t%d", words(list) - i, 100 * STATS_mean, 100 * half, n)
    }
    set print "-"
}

set grid xtics lc rgb "#e0e0e0"
set xlabel "mean signed error, % of the RMS error"
set ytics nomirror scale 0
set xtics nomirror
unset key
set arrow 1 from 0, graph 0 to 0, graph 1 nohead lc rgb "#808080" dt 2
set offsets graph 0.05, graph 0.05, 0.6, 0.6
set xrange [*:*]
# A narrow panel fits about five tick labels: a 1-2-5 step over the data's
# range (error bars and zero included) keeps them apart.
nice(x) = (e = 10**floor(log10(x)), f = x / e, (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * e)
xstep(lo, hi) = nice(((hi > 0 ? hi : 0) - (lo < 0 ? lo : 0)) / 4 > 1e-6 ? \
                     ((hi > 0 ? hi : 0) - (lo < 0 ? lo : 0)) / 4 : 1e-6)

do for [t = 1:words(formats)] {
    eval term(t)
    set multiplot layout 1, panels title "Bias of the quantized result: mean over runs (seeds) with its 95% confidence interval"
    if (words(gs) > 0) {
        set title "gradient reduce-scatter".(gpool ? "\n(runs pooled over bits and group size)" : "")
        set yrange [*:*]  # one-column stats would keep only values inside it
        stats $grad using ($2 - $3) nooutput
        lo = STATS_min
        stats $grad using ($2 + $3) nooutput
        set xtics xstep(lo, STATS_max)
        set yrange [-1:words(gs)]
        set ytics ()
        do for [i = 1:words(gs)] { set ytics add (word(gs, i) words(gs) - i) }
        plot for [i = 1:words(gs)] $grad every ::i-1::i-1 using 2:1:3 with xerrorbars \
            lc rgb pcolor(word(word(gs, i), 1)) pt 7 ps 1 lw 1.5 notitle
    }
    if (words(ws) > 0) {
        set title "weight all-gather".(wpool ? "\n(runs pooled over bits and group size)" : "")
        set yrange [*:*]  # one-column stats would keep only values inside it
        stats $weight using ($2 - $3) nooutput
        lo = STATS_min
        stats $weight using ($2 + $3) nooutput
        set xtics xstep(lo, STATS_max)
        set yrange [-1:words(ws)]
        set ytics ()
        do for [i = 1:words(ws)] { set ytics add (word(ws, i) words(ws) - i) }
        plot for [i = 1:words(ws)] $weight every ::i-1::i-1 using 2:1:3 with xerrorbars \
            lc rgb pcolor(word(word(ws, i), 1)) pt 7 ps 1 lw 1.5 notitle
    }
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
