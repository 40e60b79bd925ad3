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
#   shardq report --db shardq.db --out OUT    (then: cd OUT && gnuplot scripts/error-bits.gp)
#
# reads data/error-bits.vars and data/error-bits-{g,w}{every,front}.tsv,
# written by shardq report, and writes OUT/error-bits.png and
# OUT/error-bits.svg (the variables of the common block below). Without data
# it prints why and writes nothing.

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

# From shardq (src/report/fig_error_bits.c), per path P of grad and weight:
# P[1..P_n] its series (a scheme: a preset and the knobs other than bits and
# group that vary between its runs) in the order of the presets; and, in
# tsv("gevery") and tsv("wevery"), every configuration of every series, its
# label first: bits per real parameter (per element sent for a run stored
# before bits_per_param), mean error over its seeds, and the low and high ends
# of the 95% interval (Student's t) of the mean over every step of every seed
# behind the point (none where one value stands behind it; its low end kept
# above a hundredth of the point on the log scale); in tsv("gfront") and
# tsv("wfront"), those no other configuration of the series beats with as few
# bits or fewer. drawn: the runs drawn; old: those stored before
# bits_per_param. A series is its rows (x undefined on the others').
of(l) = strcol(1) eq l ? $2 : NaN

if (grad_n + weight_n == 0) {
    print sprintf("%s: skipped: no replay runs with errors and quantized bytes in %s", name, within)
    exit
}
panels = (grad_n > 0) + (weight_n > 0)

# the n-th series of a preset gets the n-th point type and dash; lab(pi, i):
# the i-th series of path pi (1 grad, 2 weight)
array pts[6] = [7, 5, 9, 11, 13, 15]
lab(pi, i) = pi == 1 ? grad[i] : weight[i]
nth(pi, i) = 1 + sum [_j = 1:i] (_j < i && word(lab(pi, _j), 1) eq word(lab(pi, i), 1) ? 1 : 0)

# Schemes at one cost would hide one another (qw under zeropp, qwd under
# sdp4bit): the i-th of n series of a panel is drawn (i - (n+1)/2) * 1.2% of
# the panel's x span to the side, at most 5% on either side.
spread(n) = n > 1 ? (0.1 / (n - 1) < 0.012 ? 0.1 / (n - 1) : 0.012) : 0
gdx = 0
wdx = 0
if (grad_n > 0) { stats tsv("gevery") using 2 nooutput; gdx = spread(grad_n) * (STATS_max > STATS_min ? STATS_max - STATS_min : 1) }
if (weight_n > 0) { stats tsv("wevery") using 2 nooutput; wdx = spread(weight_n) * (STATS_max > STATS_min ? STATS_max - STATS_min : 1) }
sx(i, n, dx) = (i - (n + 1) / 2.0) * dx
set offsets graph 0.06, graph 0.06, 0, graph (grad_n > weight_n ? grad_n : weight_n) * 0.055 + 0.05
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
    if (grad_n > 0) {
        set title "gradient reduce-scatter"
        set xlabel "bits per real parameter on the inter-node link (codes + scales)"
        plot for [i = 1:grad_n] tsv("gevery") using (of(grad[i]) + sx(i, grad_n, gdx)):3:4:5 with yerrorbars \
                lc rgb pcolor(word(grad[i], 1)) pt pts[(nth(1, i) - 1) % 6 + 1] - 1 ps 0.8 \
                notitle, \
            for [i = 1:grad_n] tsv("gfront") using (of(grad[i]) + sx(i, grad_n, gdx)):3 with linespoints \
                lc rgb pcolor(word(grad[i], 1)) lw 2 dt nth(1, i) \
                pt pts[(nth(1, i) - 1) % 6 + 1] ps 0.9 title grad[i] noenhanced
    }
    if (weight_n > 0) {
        set title "weight all-gather"
        set xlabel "bits per real parameter on the inter-node link (codes + scales)"
        plot for [i = 1:weight_n] tsv("wevery") using (of(weight[i]) + sx(i, weight_n, wdx)):3:4:5 with yerrorbars \
                lc rgb pcolor(word(weight[i], 1)) pt pts[(nth(2, i) - 1) % 6 + 1] - 1 ps 0.8 \
                notitle, \
            for [i = 1:weight_n] tsv("wfront") using (of(weight[i]) + sx(i, weight_n, wdx)):3 with linespoints \
                lc rgb pcolor(word(weight[i], 1)) lw 2 dt nth(2, i) \
                pt pts[(nth(2, i) - 1) % 6 + 1] ps 0.9 title weight[i] noenhanced
    }
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s%s", name, drawn, png, svg, old eq "" ? "" : \
    sprintf(" (runs %s stored before bits_per_param: at bits per element)", old))
