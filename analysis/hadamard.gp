# hadamard.gp -- what the Hadamard transform does to the gradient error: for
# every gradient configuration (bits per hop, group size, rounding) replayed
# both with grad.*.hadamard = 0 and > 0, the relative L2 error of the reduced
# gradients without and with it, mean over steps and runs, and the change.
# Up to 16 configurations are bars side by side; more (a sweep's 40 or 80
# would be bars too narrow to read) are the change alone, one line per bit
# width and rounding against the group size, every configuration drawn (the
# errors themselves are in error-group.png and the report's tables). Bars:
# 95% intervals over every step and run behind a bar or point.
#
#   gnuplot -e "db='shardq.db'" analysis/hadamard.gp
#
# writes OUT/hadamard.png and OUT/hadamard.svg (variables as in
# error-bits.gp: db, out, runs). Without data it prints why and writes nothing.

name = "hadamard"
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

# per run: its gradient configuration, whether a Hadamard ran, its error
pk(k) = "(SELECT value FROM params WHERE run_id = lk.id AND key = ".k.")"
base = "WITH r AS (".sel("replay")."), ".\
    "lk AS (SELECT run_id AS id, coalesce(max(CASE WHEN link = 'inter' AND sent_elems > 0".\
    " THEN 'inter' END), 'intra') AS link, sum(sent_elems > 0) AS hops FROM bytes".\
    " WHERE run_id IN r AND collective = 'grad_reducescatter' GROUP BY run_id), ".\
    "kn AS (SELECT lk.id, lk.hops, CAST(".pk("'grad.intra.bits'")." AS INTEGER) AS ib,".\
    " CAST(".pk("'grad.' || lk.link || '.bits'")." AS INTEGER) AS xb,".\
    " ".pk("'grad.' || lk.link || '.group'")." AS grp, upper(".pk("'grad.' || lk.link || '.round'").\
    ") AS rnd, max(CAST(".pk("'grad.intra.hadamard'")." AS INTEGER), CAST(".\
    pk("'grad.inter.hadamard'")." AS INTEGER)) AS h FROM lk), ".\
    "e AS (SELECT run_id AS id, avg(rel_l2) AS err FROM step_metrics WHERE run_id IN r AND".\
    " path = 'grad' AND rel_l2 > 0 GROUP BY run_id), ".\
    "c AS (SELECT e.id, CASE WHEN kn.hops > 1 THEN kn.ib || '/' || kn.xb ELSE kn.xb END ||".\
    " '-bit, g' || kn.grp || ', ' || kn.rnd AS cfg, kn.xb, CAST(kn.grp AS INTEGER) AS g,".\
    " kn.ib, kn.rnd, kn.h, e.err FROM e JOIN kn ON kn.id = e.id WHERE kn.xb < 16), ".\
    "p AS (SELECT cfg FROM c GROUP BY cfg HAVING min(h) = 0 AND max(h) > 0), ".\
    "d AS (SELECT * FROM c WHERE cfg IN p) "
drawn = system(sql(ranges(base."SELECT id FROM d")))
if (drawn eq "") {
    print sprintf("%s: skipped: no gradient configuration replayed both with and without a Hadamard in %s", \
        name, within)
    exit
}
sizes = system(sql(base."SELECT group_concat(h, '/') FROM (SELECT DISTINCT h FROM d WHERE h > 0 ORDER BY h)"))
ncfg = int(system(sql(base."SELECT count(DISTINCT cfg) FROM d")))
# A bar's spread, as in error-bits.gp: the 95% interval (Student's t; tq,
# the 0.975 quantile of t, exact to df 9, then 1.96 + 2.5/df, within 1%) of
# the mean over every step of every run behind it, none where one value
# stands behind it. st: per configuration and Hadamard off (on = 0) or on,
# the mean of its runs' errors and that half-width.
tq = "CASE WHEN df = 1 THEN 12.71 WHEN df = 2 THEN 4.303 WHEN df = 3 THEN 3.182 WHEN df = 4".\
    " THEN 2.776 WHEN df = 5 THEN 2.571 WHEN df = 6 THEN 2.447 WHEN df = 7 THEN 2.365 WHEN".\
    " df = 8 THEN 2.306 WHEN df = 9 THEN 2.262 ELSE 1.96 + 2.5 / df END"
spread = base.", s AS (SELECT d.cfg, d.h > 0 AS on_, count(*) - 1 AS df, avg(m.rel_l2) AS mu,".\
    " avg(m.rel_l2 * m.rel_l2) AS m2 FROM d JOIN step_metrics m ON m.run_id = d.id AND m.path".\
    " = 'grad' AND m.rel_l2 > 0 GROUP BY d.cfg, d.h > 0), st AS (SELECT d.cfg, d.h > 0 AS on_,".\
    " avg(d.err) AS err, coalesce(max(CASE WHEN s.df > 0 THEN (".tq.") * sqrt(max(s.m2 - s.mu *".\
    " s.mu, 0) / s.df) END), 0) AS hw FROM d LEFT JOIN s ON s.cfg = d.cfg AND s.on_ = (d.h > 0)".\
    " GROUP BY d.cfg, d.h > 0) "
# one row per configuration: name, error without, error with, and the ends
# of their intervals (without low, high, with low, high; the low ends kept
# above a hundredth of the bar on the log scale)
lo(e) = "max(".e.".err - ".e.".hw, ".e.".err / 100)"
load fetch("$table", spread."SELECT f.cfg, f.err, n.err, ".lo("f").", f.err + f.hw, ".lo("n").\
    ", n.err + n.hw FROM st f JOIN st n ON n.cfg = f.cfg AND n.on_ AND NOT f.on_ JOIN (SELECT".\
    " cfg, min(xb) AS xb, min(g) AS g, min(ib) AS ib, min(rnd) AS rnd FROM d GROUP BY cfg) o".\
    " ON o.cfg = f.cfg ORDER BY o.xb, o.g, o.ib, o.rnd")
table = "$table"

# many configurations: the change in % per series (bits and rounding)
# against the group size, one row per point, the series first
many = ncfg > 16
if (many) {
    # the change r = B/A - 1 of the means A (without) and B (with); its
    # interval from theirs (first order: the relative half-widths add in
    # quadrature), none where one value stands behind each
    load fetch("$change", spread.", ch AS (SELECT s, g, max(CASE WHEN on_ THEN err END) AS b,".\
        " max(CASE WHEN NOT on_ THEN err END) AS a, max(CASE WHEN on_ THEN hw END) AS hb,".\
        " max(CASE WHEN NOT on_ THEN hw END) AS ha FROM st JOIN (SELECT DISTINCT cfg, g,".\
        " substr(cfg, 1, instr(cfg, ', g') - 1) || ', ' || rnd AS s FROM d) k ON k.cfg = st.cfg".\
        " GROUP BY s, g), v AS (SELECT s, g, 100 * (b / a - 1) AS r, 100 * b / a * sqrt((ha / a)".\
        " * (ha / a) + (hb / b) * (hb / b)) AS hr FROM ch) SELECT s, g, r, r - hr, r + hr FROM v".\
        " ORDER BY s, g")
    series = system(sql(base."SELECT group_concat('\"' || s || '\"', ' ') FROM (SELECT".\
        " substr(cfg, 1, instr(cfg, ', g') - 1) || ', ' || rnd AS s, min(xb) AS xb, min(ib) AS".\
        " ib FROM d GROUP BY s ORDER BY xb, ib, s)"))
}
of(l) = strcol(1) eq l ? $2 : NaN
# colour by position in the series (viridis: dark = few bits)
array bcolors[8] = ["#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", \
    "#8fd744", "#c8c800"]
array pts[6] = [7, 5, 9, 11, 13, 15]
ns = many ? words(series) : 0
scolor(i) = bcolors[ns <= 1 ? 1 : 1 + int(7.0 * (i - 1) / (ns - 1) + 0.5)]

if (many) {
    set logscale x 2
    set format x "%g"
    set grid xtics ytics lc rgb "#e0e0e0"
    set key outside right top reverse Left spacing 1.1 samplen 3
    set xlabel "group size (elements per scale)"
    set ylabel "change in relative L2 error with the Hadamard (%)"
    set xtics nomirror
    set ytics nomirror
    set offsets graph 0.04, graph 0.04, graph 0.08, graph 0.08
    set arrow 1 from graph 0, first 0 to graph 1, first 0 nohead lc rgb "#808080" dt 2
    set title sprintf("Hadamard transform (%s-point) on the gradient hops: the change in error ".\
        "it brings, %d configurations\nbars, 95%% intervals over steps and runs", sizes, ncfg)
    do for [t = 1:words(formats)] {
        eval term(t)
        # the bars first: the lines and their points drawn over them
        plot for [i = 1:ns] $change using (of(word(series, i))):3:4:5 with yerrorbars \
                lc rgb scolor(i) lw 1 pt 0 notitle, \
            for [i = 1:ns] $change using (of(word(series, i))):3 with linespoints \
                lc rgb scolor(i) lw 2 pt pts[(i - 1) % 6 + 1] ps 0.9 title word(series, i) noenhanced
        set output
    }
    print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
    exit
}

set style data histogram
set style histogram errorbars gap 1 lw 1
set errorbars small
set style fill solid 0.85 border rgb "#404040"
set boxwidth 0.9
set logscale y
set format y "10^{%L}"
set yrange [*:*]
set grid ytics mytics lc rgb "#e0e0e0"
set key top right reverse Left opaque box lc rgb "#c0c0c0"
set ylabel "relative L2 error of the reduced gradient  ‖x̂ − x‖ / ‖x‖"
set xlabel "gradient configuration: bits per element (intra/inter-node hop), group size, rounding"
set xtics nomirror rotate by 30 right
set ytics nomirror
set title "Hadamard transform on the gradient hops: error without and with it (label: change);\nbars, 95% intervals over steps and runs"

do for [t = 1:words(formats)] {
    eval term(t)
    plot table using 2:4:5:xtic(1) lc rgb "#bab0ac" title "without Hadamard", \
        '' using 3:6:7 lc rgb "#59a14f" title "with Hadamard (".sizes."-point)", \
        '' using 0:($5 > $7 ? $5 : $7):(sprintf("%+.0f%%", 100 * ($3 / $2 - 1))) with labels \
            offset 0, 0.7 font ",9" notitle
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
