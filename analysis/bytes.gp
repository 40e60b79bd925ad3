# bytes.gp -- the traffic of each scheme on each link level: the bits each
# worker sent per parameter per iteration (8 x (codes + scales) bytes of the
# bytes table / (workers x parameters x iterations)) on the intra-node and
# the inter-node links, stacked by collective (weight all-gather, gradient
# reduce-scatter), mean over the runs of a scheme. Parameters and iterations
# are those of the trace a replay read (step_metrics, trace.steps; a replay's
# first all-gather, the broadcast that starts training, is in the total) or
# of the model a training run trained (model.params, train_steps): the
# model's own parameters, so the padding the worlds add is paid for in the
# bits, as in bytes.bits_per_param. A scheme
# is its preset with the knobs that change the bytes and vary between its
# runs; past 14 schemes, each preset is drawn at its most-run configuration
# (of replays, and of training runs), named by the preset alone.
#
#   gnuplot -e "db='shardq.db'" analysis/bytes.gp
#
# writes OUT/bytes.png and OUT/bytes.svg (variables as in error-bits.gp: db,
# out, runs). Without data it prints why and writes nothing.

name = "bytes"
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

# per run: bits per parameter per iteration per worker, by collective and link
bpp(c, l) = "avg(CASE WHEN v.collective = '".c."' AND v.link = '".l."' THEN v.bpp END)"
base = "WITH r AS (".selwhere("kind IN ('replay', 'train')")." AND id IN (SELECT run_id FROM bytes)), ".\
    labels("(p.key LIKE 'grad.%' OR p.key LIKE 'weight.%') AND p.key NOT LIKE '%.round'".\
    " AND p.key NOT LIKE '%.hadamard' AND p.key NOT LIKE '%.levels'").", ".\
    "sz AS (SELECT u.id, u.kind, CAST(substr(u.topo, 1, instr(u.topo, 'x') - 1) AS REAL) *".\
    " CAST(substr(u.topo, instr(u.topo, 'x') + 1) AS REAL) AS n, CASE u.kind WHEN 'train' THEN".\
    " (SELECT CAST(value AS REAL) FROM params WHERE run_id = u.id AND key = 'model.params') *".\
    " (SELECT count(*) FROM train_steps WHERE run_id = u.id) ELSE (SELECT max(elements) FROM".\
    " step_metrics WHERE run_id = u.id) * (SELECT CAST(value AS REAL) FROM params WHERE".\
    " run_id = u.id AND key = 'trace.steps') END AS pi FROM runs u WHERE u.id IN r), ".\
    "v AS (SELECT b.run_id AS id, b.collective, b.link, 8.0 * (b.sent_codes + b.sent_meta) /".\
    " (sz.n * sz.pi) AS bpp FROM bytes b JOIN sz ON sz.id = b.run_id WHERE sz.pi > 0), ".\
    "pt AS (SELECT run_id AS id, CASE value WHEN 'grad' THEN ' (grad only)' WHEN 'weight' THEN".\
    " ' (weight only)' ELSE '' END AS t FROM params WHERE run_id IN r AND key = 'paths'), ".\
    "a AS (SELECT lab.id, lab.preset, sz.kind, coalesce(pt.t, '') AS pth, lab.label ||".\
    " coalesce(pt.t, '') || CASE WHEN (SELECT count(DISTINCT kind) FROM".\
    " sz) > 1 AND sz.kind = 'train' THEN ' (train)' ELSE '' END AS label, lab.preset ||".\
    " coalesce(pt.t, '') || CASE WHEN".\
    " (SELECT count(DISTINCT kind) FROM sz) > 1 AND sz.kind = 'train' THEN ' (train)' ELSE '' END".\
    " AS short, ".\
    bpp("weight_allgather", "intra")." AS wi, ".bpp("grad_reducescatter", "intra")." AS gi, ".\
    bpp("weight_allgather", "inter")." AS wx, ".bpp("grad_reducescatter", "inter")." AS gx".\
    " FROM lab JOIN sz ON sz.id = lab.id JOIN v ON v.id = lab.id LEFT JOIN pt ON pt.id = lab.id".\
    " GROUP BY lab.id), ".\
    "c AS (SELECT preset, kind, pth, label, count(*) AS n, min(id) AS first FROM a GROUP BY label), ".\
    "m AS (SELECT label FROM c WHERE (SELECT count(*) FROM c) <= 14 OR NOT EXISTS (SELECT 1".\
    " FROM c AS o WHERE o.preset = c.preset AND o.kind = c.kind AND o.pth = c.pth AND (o.n > c.n OR".\
    " (o.n = c.n AND o.first < c.first)))), ".\
    "d AS (SELECT id, preset, kind, CASE WHEN (SELECT count(*) FROM c) > 14 THEN short ELSE".\
    " label END AS label, wi, gi, wx, gx FROM a WHERE label IN m) "
drawn = system(sql(ranges(base."SELECT id FROM d")))
if (drawn eq "") {
    print sprintf("%s: skipped: no replay or training runs with bytes in %s", name, within)
    exit
}
modal = int(system(sql(base."SELECT count(*) > 14 FROM c")))
ncat = int(system(sql(base."SELECT count(DISTINCT label) FROM d")))
load fetch("$table", base."SELECT label, avg(wi), avg(gi), avg(wx), avg(gx) FROM d GROUP BY label".\
    " ORDER BY min(kind), min(".porder."), min(id)")
table = "$table"

set style data histogram
set style histogram rowstacked gap 1
set style fill solid 0.85 border rgb "#404040"
set boxwidth 0.7
set grid ytics lc rgb "#e0e0e0"
set ylabel "bits per parameter per iteration, per worker"
set xtics nomirror rotate by 30 right font ",8"
set ytics nomirror
set yrange [0:*]
# one key, under the title, for both panels; the panels one above the
# other, each the figure's width, so that the labels of many bars fit
set key at screen 0.5, screen 0.97 center top horizontal reverse Left samplen 2 width -2
set tmargin 5
set bmargin (ncat > 6 ? 11 : 4)
set lmargin 16
set rmargin 2
height = int(height * 1.6)
set label 1 "a run that replayed one path only shows that path alone: (grad only), (weight only)" \
    at screen 0.5, screen 0.935 center font ",9"

do for [t = 1:words(formats)] {
    eval term(t)
    set multiplot layout 2, 1 title "Bits sent per link level: weight all-gather + gradient reduce-scatter".\
        (modal ? " (each preset and set of paths at its most-run configuration)" : "")
    # the totals over the bars, where there is room for them
    set title "intra-node links"
    plot table using 2:xtic(1) lc rgb "#4e79a7" title "weight all-gather", \
        '' using 3 lc rgb "#f28e2b" title "gradient reduce-scatter", \
        '' using 0:($2 + $3):(ncat <= 10 ? sprintf("%.3g", $2 + $3) : "") with labels \
            offset 0, 0.7 font ",9" notitle
    set title "inter-node links"
    plot table using 4:xtic(1) lc rgb "#4e79a7" notitle, '' using 5 lc rgb "#f28e2b" notitle, \
        '' using 0:($4 + $5):(ncat <= 10 ? sprintf("%.3g", $4 + $5) : "") with labels \
            offset 0, 0.7 font ",9" notitle
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
