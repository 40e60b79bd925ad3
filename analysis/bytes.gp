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
#   shardq report --db shardq.db --out OUT    (then: cd OUT && gnuplot scripts/bytes.gp)
#
# reads data/bytes.vars and data/bytes-table.tsv, written by shardq report,
# and writes OUT/bytes.png and OUT/bytes.svg (the variables of the common
# block below). Without data it prints why and writes nothing.

name = "bytes"
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

# From shardq (src/report/fig_bytes.c): drawn, the runs drawn; modal, 1
# when there are more than 14 schemes and each preset (and set of paths, and
# kind) is drawn at its most-run configuration, named by the preset alone;
# ncat, the number of bars; and tsv("table"): a row per scheme in the order
# of the presets (replays first), its label, then its mean bits per
# parameter per iteration per worker of the weight all-gather and of the
# gradient reduce-scatter on intra-node links, then on inter-node links.
if (drawn eq "") {
    print sprintf("%s: skipped: no replay or training runs with bytes in %s", name, within)
    exit
}
table = tsv("table")

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
