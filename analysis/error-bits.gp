# error-bits.gp -- quantization error against the bits actually paid, one
# line per scheme: the relative L2 error of the replayed gradients (reduce-
# scatter) and weights (all-gather), mean over steps and seeds, against the
# bits per real parameter the collective sent on its inter-node link (codes
# and scales over the model's own elements, so that the padding each world
# adds is paid for: bytes.bits_per_param; the intra-node link on one node).
# Runs stored before that column (NULL) are drawn at their bits per element
# sent and counted in the line this script prints. Wires of
# 16 and 32 bits (bf16, fp32) are left out: they are not what the figure
# compares, and fp32 adds no error to draw on a log scale. A scheme is its
# preset, with the knobs that vary between its runs other than bits and group
# (which move it along x) named after it. Every configuration is a point
# (mean over seeds), open unless it is on the line, which joins those that no
# other configuration of the scheme beats with as few bits (filled). Series at
# one cost are set side by side (spread below).
#
#   gnuplot -e "db='shardq.db'" analysis/error-bits.gp
#   gnuplot -e "db='shardq.db'; out='figs'; runs=\"sweep = 'demo'\"" analysis/error-bits.gp
#
# writes OUT/error-bits.png and OUT/error-bits.svg (out: default '.'; runs: an
# SQL condition on the runs table, default every done run; ids: run ids such
# as 3-17,20 instead, as shardq report gives them). Without data it prints
# why and writes nothing.

name = "error-bits"
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
# per run of path p: its label, bits per real parameter (x; per element sent
# for a run stored before bits_per_param, old = 1) and mean error
base(p) = "WITH r AS (".sel("replay")."), ".\
    "lk AS (SELECT run_id AS id, coalesce(max(CASE WHEN link = 'inter' AND sent_elems > 0".\
    " THEN 'inter' END), 'intra') AS link FROM bytes WHERE run_id IN r AND collective = '".\
    coll(p)."' GROUP BY run_id), ".\
    "x AS (SELECT b.run_id AS id, coalesce(b.bits_per_param, b.bits_per_elem) AS x,".\
    " b.bits_per_param IS NULL AS old FROM bytes b JOIN lk ON lk.id = b.run_id".\
     " AND lk.link = b.link WHERE b.collective = '".coll(p)."' AND b.bits_per_elem < 16), ".\
    "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE run_id IN r AND path = '".\
    p."' AND rel_l2 > 0 GROUP BY run_id), ".\
    labels("p.key LIKE '".p.".%' AND p.key NOT LIKE '%.bits' AND p.key NOT LIKE '%.group'").", ".\
    "d AS (SELECT e.id, lab.preset, lab.label, x.x, x.old, e.err FROM e JOIN x ON x.id = e.id".\
    " JOIN lab ON lab.id = e.id) "
series(p) = system(sql(base(p)."SELECT group_concat('\"' || label || '\"', ' ') FROM".\
    " (SELECT label, min(".porder.") AS o, min(id) AS i FROM d GROUP BY label ORDER BY o, i)"))
# every configuration of a series (mean over its seeds), and the front of
# those no other beats with as few bits or fewer. Its spread: the 95%
# interval (Student's t) of the mean over every step of every seed behind
# the point, drawn where more than one value stands behind it (tq: the
# 0.975 quantile of t, exact to df 9, then 1.96 + 2.5/df, within 1%).
tq = "CASE WHEN df = 1 THEN 12.71 WHEN df = 2 THEN 4.303 WHEN df = 3 THEN 3.182 WHEN df = 4".\
    " THEN 2.776 WHEN df = 5 THEN 2.571 WHEN df = 6 THEN 2.447 WHEN df = 7 THEN 2.365 WHEN".\
    " df = 8 THEN 2.306 WHEN df = 9 THEN 2.262 ELSE 1.96 + 2.5 / df END"
# every series of path p in one query, its label first (read once into a
# datablock; a series is its rows, x undefined on the others')
points(p) = base(p).", a AS (SELECT label, round(x, 3) AS gx, avg(x) AS x, avg(err) AS err".\
    " FROM d GROUP BY label, round(x, 3)), s AS (SELECT d.label, round(d.x, 3) AS gx,".\
    " count(*) - 1 AS df, avg(m.rel_l2) AS mu, avg(m.rel_l2 * m.rel_l2) AS m2 FROM d JOIN".\
    " step_metrics m ON m.run_id = d.id AND m.path = '".p."' AND m.rel_l2 > 0 GROUP BY".\
    " d.label, round(d.x, 3)), h AS (SELECT label, gx, CASE WHEN df > 0 THEN (".tq.") *".\
    " sqrt(max(m2 - mu * mu, 0) / df) ELSE 0 END AS hw FROM s) "
every(p) = points(p)."SELECT a.label, a.x, a.err, max(a.err - coalesce(h.hw, 0), a.err / 100),".\
    " a.err + coalesce(h.hw, 0) FROM a LEFT JOIN h ON h.label = a.label AND h.gx = a.gx".\
    " ORDER BY a.label, a.x"
front(p) = points(p)."SELECT label, x, err FROM a WHERE NOT EXISTS (SELECT 1 FROM a AS b".\
    " WHERE b.label = a.label AND b.x <= a.x AND b.err < a.err) ORDER BY label, x"
of(l) = strcol(1) eq l ? $2 : NaN
ids(p) = base(p)."SELECT id FROM d"

gs = series("grad")
ws = series("weight")
if (words(gs) + words(ws) == 0) {
    print sprintf("%s: skipped: no replay runs with errors and quantized bytes in %s", name, within)
    exit
}
drawn = system(sql(ranges("SELECT id FROM (".ids("grad").") UNION SELECT id FROM (".ids("weight").")")))
olds(p) = base(p)."SELECT id FROM d WHERE old"
old = system(sql(ranges("SELECT id FROM (".olds("grad").") UNION SELECT id FROM (".olds("weight").")")))
panels = (words(gs) > 0) + (words(ws) > 0)
if (words(gs) > 0) { load fetch("$gevery", every("grad")); load fetch("$gfront", front("grad")) }
if (words(ws) > 0) { load fetch("$wevery", every("weight")); load fetch("$wfront", front("weight")) }

# the n-th series of a preset gets the n-th point type and dash
array pts[6] = [7, 5, 9, 11, 13, 15]
nth(list, i) = 1 + sum [_j = 1:i] (_j < i && word(word(list, _j), 1) eq word(word(list, i), 1) ? 1 : 0)

# Schemes at one cost would hide one another (qw under zeropp, qwd under
# sdp4bit): the i-th of n series of a panel is drawn (i - (n+1)/2) * 1.2% of
# the panel's x span to the side, at most 5% on either side.
spread(n) = n > 1 ? (0.1 / (n - 1) < 0.012 ? 0.1 / (n - 1) : 0.012) : 0
gdx = 0
wdx = 0
if (words(gs) > 0) { stats $gevery using 2 nooutput; gdx = spread(words(gs)) * (STATS_max > STATS_min ? STATS_max - STATS_min : 1) }
if (words(ws) > 0) { stats $wevery using 2 nooutput; wdx = spread(words(ws)) * (STATS_max > STATS_min ? STATS_max - STATS_min : 1) }
sx(i, n, dx) = (i - (n + 1) / 2.0) * dx
set offsets graph 0.06, graph 0.06, 0, graph (words(gs) > words(ws) ? words(gs) : words(ws)) * 0.055 + 0.05
set logscale y
set format y "10^{%L}"
set grid xtics ytics mytics lc rgb "#e0e0e0"
# the key in the bottom left corner of each panel, below every point (in
# the top right, its opaque box hid points of a busy panel): the
# y range is stretched down (offsets below) to leave it the room
set key bottom left reverse Left spacing 1.0 samplen 2.5 opaque box lc rgb "#c0c0c0"
height = int(height * 1.15)
set ylabel "relative L2 error  ‖x̂ − x‖ / ‖x‖"
set xtics nomirror
set ytics nomirror

do for [t = 1:words(formats)] {
    eval term(t)
    set multiplot layout 1, panels title "Quantization error against bits per parameter: open, a configuration another beats with as few bits;\nfilled and joined, the best at each cost; bars, 95% intervals over steps and seeds; schemes set side by side at one cost" font ",9"
    if (words(gs) > 0) {
        set title "gradient reduce-scatter"
        set xlabel "bits per real parameter on the inter-node link (codes + scales)"
        plot for [i = 1:words(gs)] $gevery using (of(word(gs, i)) + sx(i, words(gs), gdx)):3:4:5 with yerrorbars \
                lc rgb pcolor(word(word(gs, i), 1)) pt pts[(nth(gs, i) - 1) % 6 + 1] - 1 ps 0.8 \
                notitle, \
            for [i = 1:words(gs)] $gfront using (of(word(gs, i)) + sx(i, words(gs), gdx)):3 with linespoints \
                lc rgb pcolor(word(word(gs, i), 1)) lw 2 dt nth(gs, i) \
                pt pts[(nth(gs, i) - 1) % 6 + 1] ps 0.9 title word(gs, i) noenhanced
    }
    if (words(ws) > 0) {
        set title "weight all-gather"
        set xlabel "bits per real parameter on the inter-node link (codes + scales)"
        plot for [i = 1:words(ws)] $wevery using (of(word(ws, i)) + sx(i, words(ws), wdx)):3:4:5 with yerrorbars \
                lc rgb pcolor(word(word(ws, i), 1)) pt pts[(nth(ws, i) - 1) % 6 + 1] - 1 ps 0.8 \
                notitle, \
            for [i = 1:words(ws)] $wfront using (of(word(ws, i)) + sx(i, words(ws), wdx)):3 with linespoints \
                lc rgb pcolor(word(word(ws, i), 1)) lw 2 dt nth(ws, i) \
                pt pts[(nth(ws, i) - 1) % 6 + 1] ps 0.9 title word(ws, i) noenhanced
    }
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s%s", name, drawn, png, svg, old eq "" ? "" : \
    sprintf(" (runs %s stored before bits_per_param: at bits per element)", old))
