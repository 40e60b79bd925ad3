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
#   shardq report --db shardq.db --out OUT    (then: cd OUT && gnuplot scripts/hadamard.gp)
#
# reads data/hadamard.vars and data/hadamard-{table,change}.tsv, written by
# shardq report, and writes OUT/hadamard.png and OUT/hadamard.svg (the
# variables of the common block below). Without data it prints why and
# writes nothing.

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

# From shardq (src/report/fig_hadamard.c): drawn, the runs of every gradient
# configuration replayed both without and with a Hadamard; sizes, the Hadamard sizes
# ("16/32"); ncfg, the number of configurations; tsv("table"), one row per
# configuration: name, error without, error with, and the ends of their
# intervals (without low, high, with low, high; the low ends kept above a
# hundredth of the bar on the log scale); bars: 95% intervals (Student's t)
# of the mean over every step of every run behind a bar, none where one
# value stands behind it. many: more than 16 configurations, drawn as the
# change in % per series (bits and rounding) against the group size:
# series[1..series_n], and tsv("change"), one row per point, the series
# first (the change r = B/A - 1 of the means without and with, its interval
# from theirs).
if (drawn eq "") {
    print sprintf("%s: skipped: no gradient configuration replayed both with and without a Hadamard in %s", \
        name, within)
    exit
}
table = tsv("table")

of(l) = strcol(1) eq l ? $2 : NaN
# colour by position in the series (viridis: dark = few bits)
array bcolors[8] = ["#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", \
    "#8fd744", "#c8c800"]
array pts[6] = [7, 5, 9, 11, 13, 15]
ns = many ? series_n : 0
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
        plot for [i = 1:ns] tsv("change") using (of(series[i])):3:4:5 with yerrorbars \
                lc rgb scolor(i) lw 1 pt 0 notitle, \
            for [i = 1:ns] tsv("change") using (of(series[i])):3 with linespoints \
                lc rgb scolor(i) lw 2 pt pts[(i - 1) % 6 + 1] ps 0.9 title series[i] noenhanced
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
