# error-group.gp -- quantization error against the group size (the elements
# that share one scale), one line per scheme and bit width: the relative L2
# error of the replayed gradients and weights, mean over steps and seeds,
# against grad.inter.group (grad.intra.group on one node) or weight.group.
# Each point is labelled with the bits per real parameter that hop cost
# (bytes.bits_per_param: the padding of whole groups per shard paid for, so
# a large group is not read as cheap when it pads small tensors a lot; a run
# stored before that column counts at its bits per element sent).
# Only lines with two group sizes or more are drawn: the figure is for sweeps.
# Bars: the 95% interval of each point's mean over every step and seed behind
# it, where more than one value stands behind it (as in error-bits.gp).
#
#   gnuplot -e "db='shardq.db'" analysis/error-group.gp
#
# writes OUT/error-group.png and OUT/error-group.svg (variables as in
# error-bits.gp: db, out, runs). Without data it prints why and writes nothing.

name = "error-group"
# ---- common to every analysis/*.gp, from here to "end of common" -------------
# (tests/cli_report.sh checks that the copies agree)
# A script draws what `shardq report` wrote for it into the directory data
# (OUT/data/ of a report): NAME.vars, its scalars and labels as assignments
# of escaped strings, and NAME-PART.tsv, the rows of its queries. It reads
# no database and runs no program, so a report directory redraws on its own:
# cd OUT && gnuplot scripts/NAME.gp. shardq report runs gnuplot -c NAME.gp
# DATA OUT FORMATS STYLE: arguments reach the script as strings, never as
# gnuplot text. data: the directory of the data (default "data"); out:
# where the figures go (default "."); formats (default "png svg"); style: a
# gnuplot file of the user's, loaded after the style below ("" none).
if (!exists("data")) { data = "data" }
if (!exists("out")) { out = "." }
if (ARGC >= 1) { data = ARG1 }
if (ARGC >= 2) { out = ARG2 }
if (ARGC >= 3) { formats = ARG3 }
if (ARGC >= 4) { style = ARG4 }
# A table: tab-separated, NULL as an empty field, no comment character (a
# label may begin with '#'); text holds no '"', tab or line break.
tsv(part) = data."/".name."-".part.".tsv"
set datafile separator "\t"
set datafile commentschars ""
# numbers, and stats commands that read each text from NAME-text.tsv
load data."/".name.".vars"
png = out."/".name.".png"
svg = out."/".name.".svg"
# what a figure drew or why not goes to stdout
set print "-"
# the presets in the order of 'shardq schemes'
presets = "baseline qw qwd ulq tlq tlqhs sdp4bit zeropp zeropp8 qsdp"
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
# eval term(k): the terminal and output file of the k-th of formats. The
# command names the variables rather than holding their values, so that no
# path or font can end up as gnuplot text.
fmt_(k) = word(formats, k)
outfile(k) = out."/".name.".".fmt_(k)
term(k) = fmt_(k) eq "png" ? sprintf("set terminal pngcairo size width,height enhanced ".\
    "font font linewidth lwscale; set output outfile(%d)", k) : \
    fmt_(k) eq "svg" ? sprintf("set terminal svg size width,height dynamic enhanced font font ".\
    "linewidth lwscale background 'white'; set output outfile(%d)", k) : \
    fmt_(k) eq "pdf" ? sprintf("set terminal pdfcairo size width / 100.0, height / 100.0 ".\
    "enhanced font font linewidth lwscale; set output outfile(%d)", k) : \
    "print 'formats: '.fmt_(".k.").' is none of png, svg, pdf'; exit status 2"
# ---- end of common -----------------------------------------------------------

coll(p) = p eq "grad" ? "grad_reducescatter" : "weight_allgather"
knob(p) = p eq "grad" ? "'grad.' || lk.link || '.'" : "'weight.'"
# per run of path p: its label with the bit width, group size, mean error and
# bits per real parameter of the hop;
# lines with a single group size left out
base(p) = "WITH r AS (".sel("replay")."), ".\
    "lk AS (SELECT run_id AS id, coalesce(max(CASE WHEN link = 'inter' AND sent_elems > 0".\
    " THEN 'inter' END), 'intra') AS link FROM bytes WHERE run_id IN r AND collective = '".\
    coll(p)."' GROUP BY run_id), ".\
    "kb AS (SELECT lk.id, CAST(b.value AS INTEGER) AS bits, CAST(g.value AS INTEGER) AS grp".\
    " FROM lk JOIN params b ON b.run_id = lk.id AND b.key = ".knob(p)." || 'bits'".\
    " JOIN params g ON g.run_id = lk.id AND g.key = ".knob(p)." || 'group'), ".\
    "bp AS (SELECT lk.id, coalesce(b.bits_per_param, b.bits_per_elem) AS bp FROM lk JOIN bytes b".\
    " ON b.run_id = lk.id AND b.link = lk.link AND b.collective = '".coll(p)."'), ".\
    "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE run_id IN r AND path = '".\
    p."' AND rel_l2 > 0 GROUP BY run_id), ".\
    labels("p.key LIKE '".p.".%' AND p.key NOT LIKE '%.bits' AND p.key NOT LIKE '%.group'").", ".\
    "a AS (SELECT e.id, lab.preset, lab.label || ' ' || kb.bits || '-bit' AS label, kb.bits,".\
    " kb.grp, e.err, bp.bp FROM e JOIN kb ON kb.id = e.id JOIN lab ON lab.id = e.id".\
    " LEFT JOIN bp ON bp.id = e.id WHERE kb.bits < 16), ".\
    "d AS (SELECT * FROM a WHERE label IN (SELECT label FROM a GROUP BY label".\
    " HAVING count(DISTINCT grp) > 1)) "
series(p) = system(sql(base(p)."SELECT group_concat('\"' || label || '\"', ' ') FROM".\
    " (SELECT DISTINCT label, ".porder." AS o, bits FROM d ORDER BY o, label, bits)"))
# every series of path p, its label first, read once into a datablock; a
# series is its rows (x undefined on the others'). A point's spread, as in
# error-bits.gp: the 95% interval (Student's t; tq, the 0.975 quantile of t,
# exact to df 9, then 1.96 + 2.5/df, within 1%) of the mean over every step
# of every seed behind it, none where one value stands behind it; its low
# end kept above a hundredth of the point on the log scale.
tq = "CASE WHEN df = 1 THEN 12.71 WHEN df = 2 THEN 4.303 WHEN df = 3 THEN 3.182 WHEN df = 4".\
    " THEN 2.776 WHEN df = 5 THEN 2.571 WHEN df = 6 THEN 2.447 WHEN df = 7 THEN 2.365 WHEN".\
    " df = 8 THEN 2.306 WHEN df = 9 THEN 2.262 ELSE 1.96 + 2.5 / df END"
points(p) = base(p).", s AS (SELECT d.label, d.grp, count(*) - 1 AS df, avg(m.rel_l2) AS mu,".\
    " avg(m.rel_l2 * m.rel_l2) AS m2 FROM d JOIN step_metrics m ON m.run_id = d.id AND m.path".\
    " = '".p."' AND m.rel_l2 > 0 GROUP BY d.label, d.grp), h AS (SELECT label, grp, CASE WHEN".\
    " df > 0 THEN (".tq.") * sqrt(max(m2 - mu * mu, 0) / df) ELSE 0 END AS hw FROM s),".\
    " pt AS (SELECT label, grp, avg(err) AS err, avg(bp) AS bp, grp = max(grp) OVER (PARTITION".\
    " BY label) AS last FROM d GROUP BY label, grp) SELECT pt.label, pt.grp, pt.err, pt.bp, pt.last,".\
    " max(pt.err - coalesce(h.hw, 0), pt.err / 100), pt.err + coalesce(h.hw, 0) FROM pt LEFT JOIN h".\
    " ON h.label = pt.label AND h.grp = pt.grp ORDER BY pt.label, pt.grp"
of(l) = strcol(1) eq l ? $2 : NaN
ids(p) = base(p)."SELECT id FROM d"

gs = series("grad")
ws = series("weight")
if (words(gs) + words(ws) == 0) {
    print sprintf("%s: skipped: no replay runs of a scheme at two group sizes or more in %s", \
        name, within)
    exit
}
drawn = system(sql(ranges("SELECT id FROM (".ids("grad").") UNION SELECT id FROM (".\
    ids("weight").")")))
panels = (words(gs) > 0) + (words(ws) > 0)

# colour by bit width (viridis, dark = few bits), dash and point by scheme;
# the key names the bit widths and the schemes apart
array bcolors[8] = ["#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", \
    "#8fd744", "#c8c800"]
bcolor(b) = bcolors[b < 1 ? 1 : b > 8 ? 8 : b]
lastword(l) = word(l, words(l))
bits(l) = int(lastword(l)[1:strstrt(lastword(l), "-") - 1])
scheme(l) = l[1:strstrt(l, lastword(l)) - 2]
bitlist(p) = system(sql(base(p)."SELECT group_concat(bits, ' ') FROM (SELECT DISTINCT bits FROM d".\
    " ORDER BY bits)"))
schemelist(p) = system(sql(base(p)."SELECT group_concat('\"' || s || '\"', ' ') FROM (SELECT".\
    " substr(label, 1, length(label) - length(bits || '-bit') - 1) AS s, min(".porder.") AS o".\
    " FROM d GROUP BY s ORDER BY o, s)"))
# the position of word w in list (0: none)
pos(list, w) = (sum [_j = 1:words(list)] (word(list, _j) eq w ? _j : 0))
array pts[6] = [7, 5, 9, 11, 13, 15]
# a point's label: its bits per real parameter (none when unknown); above
# the point for the first scheme, the third..., below for the second, so
# that schemes at one error (ulq and sdp4bit at the same bits) keep theirs
# apart; over 8 lines in a panel, only each line's last point is labelled
bplabel(x) = x == x ? sprintf("%.2f", x) : ""
if (words(gs) > 0) { load fetch("$grad", points("grad")) }
if (words(ws) > 0) { load fetch("$weight", points("weight")) }
gb = bitlist("grad")
gk = schemelist("grad")
wb = bitlist("weight")
wk = schemelist("weight")

set logscale x 2
set logscale y
set format y "10^{%L}"
set grid xtics ytics mytics lc rgb "#e0e0e0"
set key below center horizontal Left reverse spacing 1.1 samplen 3 maxrows 2 width 1 height 1
set ylabel "relative L2 error  ‖x̂ − x‖ / ‖x‖"
set xlabel "group size (elements per scale)"
set xtics nomirror
set ytics nomirror
set offsets graph 0.04, graph 0.04, 0, 0

do for [t = 1:words(formats)] {
    eval term(t)
    set multiplot layout 1, panels title "Quantization error against group size: colour = bits per element, dash = scheme, label = bits per real parameter;\nbars, 95% intervals over steps and seeds" font ",9"
    if (words(gs) > 0) {
        set title "gradient reduce-scatter"
        # the bars first: the lines and their points drawn over them
        plot for [i = 1:words(gs)] $grad using (of(word(gs, i))):3:6:7 with yerrorbars \
                lc rgb bcolor(bits(word(gs, i))) lw 1 pt 0 notitle, \
            for [i = 1:words(gs)] $grad using (of(word(gs, i))):3 with linespoints \
                lc rgb bcolor(bits(word(gs, i))) lw 2 dt pos(gk, scheme(word(gs, i))) \
                pt pts[(pos(gk, scheme(word(gs, i))) - 1) % 6 + 1] ps 0.9 notitle, \
            for [i = 1:words(gs)] $grad using (of(word(gs, i))):3:(words(gs) > 8 && $5 == 0 ? "" : bplabel($4)) \
                with labels offset 0, (pos(gk, scheme(word(gs, i))) % 2 ? 0.8 : -0.8) font ",8" tc rgb bcolor(bits(word(gs, i))) notitle, \
            for [b in gb] NaN with lines lc rgb bcolor(int(b)) lw 6 title b."-bit", \
            for [k = 1:words(gk)] NaN with linespoints lc rgb "#555555" lw 2 dt k \
                pt pts[(k - 1) % 6 + 1] ps 0.9 title word(gk, k) noenhanced
    }
    if (words(ws) > 0) {
        set title "weight all-gather"
        plot for [i = 1:words(ws)] $weight using (of(word(ws, i))):3:6:7 with yerrorbars \
                lc rgb bcolor(bits(word(ws, i))) lw 1 pt 0 notitle, \
            for [i = 1:words(ws)] $weight using (of(word(ws, i))):3 with linespoints \
                lc rgb bcolor(bits(word(ws, i))) lw 2 dt pos(wk, scheme(word(ws, i))) \
                pt pts[(pos(wk, scheme(word(ws, i))) - 1) % 6 + 1] ps 0.9 notitle, \
            for [i = 1:words(ws)] $weight using (of(word(ws, i))):3:(words(ws) > 8 && $5 == 0 ? "" : bplabel($4)) \
                with labels offset 0, (pos(wk, scheme(word(ws, i))) % 2 ? 0.8 : -0.8) font ",8" tc rgb bcolor(bits(word(ws, i))) notitle, \
            for [b in wb] NaN with lines lc rgb bcolor(int(b)) lw 6 title b."-bit", \
            for [k = 1:words(wk)] NaN with linespoints lc rgb "#555555" lw 2 dt k \
                pt pts[(k - 1) % 6 + 1] ps 0.9 title word(wk, k) noenhanced
    }
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
