# loss.gp -- training curves per scheme: the training loss of every step
# (train_steps.loss, as a moving mean over a tenth of the run, so that the
# schemes can be told apart through the noise of the batches) and the
# validation loss where the run evaluated one (train_steps.val_loss), of every
# training run. The colour is the preset, the dash the seed or the variant.
# In runs of 40 steps or more the first fifth is left out: every scheme starts
# from the same model and falls alike, and the axes are kept for the rest.
#
#   gnuplot -e "db='shardq.db'" analysis/loss.gp
#
# writes OUT/loss.png and OUT/loss.svg (variables as in error-bits.gp: db,
# out, runs). Without data it prints why and writes nothing.

name = "loss"
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

# the training runs with steps; a run is named by its label, and by its seed
# where its label has several
base = "WITH r AS (".sel("train")." AND id IN (SELECT run_id FROM train_steps)), ".\
    labels("p.key LIKE 'grad.%' OR p.key LIKE 'weight.%' OR p.key LIKE 'model.%' OR".\
    " p.key LIKE 'train.%'").", ".\
    "d AS (SELECT lab.id, lab.preset, lab.label || CASE WHEN count(*) OVER (PARTITION BY".\
    " lab.label) > 1 THEN ' seed ' || u.seed ELSE '' END AS name, u.seed FROM lab".\
    " JOIN runs u ON u.id = lab.id) "
drawn = system(sql(ranges(base."SELECT id FROM d")))
if (drawn eq "") {
    print sprintf("%s: skipped: no training runs in %s", name, within)
    exit
}
# "id name" pairs, in preset order
ids = system(sql(base."SELECT group_concat(id, ' ') FROM (SELECT id FROM d ORDER BY ".porder.", name)"))
rname(id) = system(sql(base."SELECT name FROM d WHERE id = ".id))
rpreset(id) = system(sql("SELECT preset FROM runs WHERE id = ".id))
# the k-th run of a preset (in ids) gets dash k
rank(i) = 1 + sum [_j = 1:i] (_j < i && rpreset(word(ids, _j)) eq rpreset(word(ids, i)) ? 1 : 0)
array names[words(ids)]
array presetof[words(ids)]
array dash[words(ids)]
do for [i = 1:words(ids)] {
    names[i] = rname(word(ids, i))
    presetof[i] = rpreset(word(ids, i))
}
do for [i = 1:words(ids)] {
    dash[i] = 1 + sum [j = 1:i] (j < i && presetof[j] eq presetof[i] ? 1 : 0)
}
# the key's columns: as many as the longest name lets fit (about 8 pixels a
# character and 70 for the sample), at most 5; rows enough for every run
maxlen = 0
do for [i = 1:words(ids)] { maxlen = strlen(names[i]) > maxlen ? strlen(names[i]) : maxlen }
kcols = int(width / (8.0 * maxlen + 70))
kcols = kcols < 1 ? 1 : kcols > 5 ? 5 : kcols
krows = int((words(ids) + kcols - 1) / kcols)
maxstep = int(system(sql("SELECT max(step) FROM train_steps WHERE run_id IN (".\
    base."SELECT id FROM d)")))
win = maxstep >= 40 ? int(maxstep / 10) : 1
# the first fifth of a long run left out (a multiple of 10 steps from 100 on)
from = maxstep >= 40 ? (maxstep >= 100 ? 10 * int(maxstep / 50) : int(maxstep / 5)) : 0
# every run's curves in one query each, the run's id first: read once, each
# line its rows (x undefined on the others')
runlist = base."SELECT id FROM d"
train = "SELECT run_id, step, m FROM (SELECT run_id, step, avg(loss) OVER (PARTITION BY".\
    " run_id ORDER BY step ROWS BETWEEN ".(win - 1)." PRECEDING AND CURRENT ROW) AS m FROM".\
    " train_steps WHERE run_id IN (".runlist.")) WHERE step >= ".from." ORDER BY run_id, step"
val = "SELECT run_id, step, val_loss FROM train_steps WHERE run_id IN (".runlist.")".\
    " AND val_loss IS NOT NULL AND step >= ".from." ORDER BY run_id, step"
load fetch("$train", train)
load fetch("$val", val)
of(id) = strcol(1) eq id ? $2 : NaN

set grid xtics ytics lc rgb "#e0e0e0"

do for [t = 1:words(formats)] {
    eval term(t)
    # two panels, and under both a third plot that holds only the key (which
    # leaves its settings to be restored for the next terminal)
    set border
    set tics
    set xtics nomirror
    set ytics nomirror
    set xlabel "optimizer step"
    set ylabel "loss (nats per byte)"
    set margins -1, -1, -1, -1
    if (from > 0) { set xrange [from:maxstep] } else { set xrange [0:maxstep] }
    set yrange [*:*]
    set multiplot title "Training runs: loss per step and validation loss"
    kh = (26.0 * krows + 16) / 560
    set size 0.5, 0.95 - kh
    set origin 0, kh
    unset key
    set title (win > 1 ? sprintf("training loss (moving mean over %d steps)", win) : "training loss").\
        (from > 0 ? sprintf(", from step %d", from) : "")
    plot for [i = 1:words(ids)] $train using (of(word(ids, i))):3 with lines \
        lc rgb pcolor(presetof[i]) lw 1.5 dt dash[i] notitle
    set origin 0.5, kh
    set title "validation loss".(from > 0 ? sprintf(", from step %d", from) : "")
    plot for [i = 1:words(ids)] $val using (of(word(ids, i))):3 with linespoints \
        lc rgb pcolor(presetof[i]) lw 1.5 dt dash[i] pt 7 ps 0.7 notitle
    set size 1, kh
    set origin 0, 0
    set margins 0, 0, 0, 0
    unset border
    unset tics
    unset xlabel
    unset ylabel
    unset title
    set key center center vertical Left reverse spacing 1.1 samplen 3 width 2 maxrows krows
    set xrange [0:1]
    set yrange [0:1]
    plot for [i = 1:words(ids)] NaN with linespoints lc rgb pcolor(presetof[i]) lw 1.5 \
        dt dash[i] pt 7 ps 0.7 title names[i] noenhanced
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
