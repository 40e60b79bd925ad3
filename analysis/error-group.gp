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
#   shardq report --db shardq.db --out OUT    (then: cd OUT && gnuplot scripts/error-group.gp)
#
# reads data/error-group.vars and data/error-group-{grad,weight}.tsv, written
# by shardq report, and writes OUT/error-group.png and OUT/error-group.svg
# (the variables of the common block below). Without data it prints why and
# writes nothing.

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

# From shardq (src/report/fig_error_group.c), per path P of grad and weight:
# P[1..P_n] its lines (a scheme and a bit width: the label of a scheme, its
# preset and the knobs other than bits and group that vary between its runs,
# then "N-bit"), of schemes run at two group sizes or more, in the order of
# the presets, and P_bits[i] and P_scheme[i] the bit width and the scheme of
# the i-th; gb/wb[1..gb_n/wb_n] the bit widths and gk/wk[1..gk_n/wk_n] the
# schemes of the panel, for its key; tsv(P), every point of every line, its
# label first: the group size, the mean error, the bits per real parameter of
# the hop, whether it is the line's last point, and the low and high ends of
# the 95% interval (Student's t) of the mean over every step of every seed
# behind it (none where one value stands behind it; its low end kept above a
# hundredth of the point on the log scale); drawn, the runs drawn. A line is
# its rows (x undefined on the others').
of(l) = strcol(1) eq l ? $2 : NaN

if (grad_n + weight_n == 0) {
    print sprintf("%s: skipped: no replay runs of a scheme at two group sizes or more in %s", \
        name, within)
    exit
}
panels = (grad_n > 0) + (weight_n > 0)

# colour by bit width (viridis, dark = few bits), dash and point by scheme;
# the key names the bit widths and the schemes apart
array bcolors[8] = ["#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", \
    "#8fd744", "#c8c800"]
bcolor(b) = bcolors[b < 1 ? 1 : b > 8 ? 8 : b]
# the position of the i-th line's scheme in the panel's schemes (0: none)
gpos(i) = (sum [_j = 1:gk_n] (gk[_j] eq grad_scheme[i] ? _j : 0))
wpos(i) = (sum [_j = 1:wk_n] (wk[_j] eq weight_scheme[i] ? _j : 0))
array pts[6] = [7, 5, 9, 11, 13, 15]
# a point's label: its bits per real parameter (none when unknown); above
# the point for the first scheme, the third..., below for the second, so
# that schemes at one error (ulq and sdp4bit at the same bits) keep theirs
# apart; over 8 lines in a panel, only each line's last point is labelled
bplabel(x) = x == x ? sprintf("%.2f", x) : ""

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
    if (grad_n > 0) {
        set title "gradient reduce-scatter"
        # the bars first: the lines and their points drawn over them
        plot for [i = 1:grad_n] tsv("grad") using (of(grad[i])):3:6:7 with yerrorbars \
                lc rgb bcolor(int(grad_bits[i])) lw 1 pt 0 notitle, \
            for [i = 1:grad_n] tsv("grad") using (of(grad[i])):3 with linespoints \
                lc rgb bcolor(int(grad_bits[i])) lw 2 dt gpos(i) \
                pt pts[(gpos(i) - 1) % 6 + 1] ps 0.9 notitle, \
            for [i = 1:grad_n] tsv("grad") using (of(grad[i])):3:(grad_n > 8 && $5 == 0 ? "" : bplabel($4)) \
                with labels offset 0, (gpos(i) % 2 ? 0.8 : -0.8) font ",8" tc rgb bcolor(int(grad_bits[i])) notitle, \
            for [j = 1:gb_n] NaN with lines lc rgb bcolor(int(gb[j])) lw 6 title gb[j]."-bit", \
            for [k = 1:gk_n] NaN with linespoints lc rgb "#555555" lw 2 dt k \
                pt pts[(k - 1) % 6 + 1] ps 0.9 title gk[k] noenhanced
    }
    if (weight_n > 0) {
        set title "weight all-gather"
        plot for [i = 1:weight_n] tsv("weight") using (of(weight[i])):3:6:7 with yerrorbars \
                lc rgb bcolor(int(weight_bits[i])) lw 1 pt 0 notitle, \
            for [i = 1:weight_n] tsv("weight") using (of(weight[i])):3 with linespoints \
                lc rgb bcolor(int(weight_bits[i])) lw 2 dt wpos(i) \
                pt pts[(wpos(i) - 1) % 6 + 1] ps 0.9 notitle, \
            for [i = 1:weight_n] tsv("weight") using (of(weight[i])):3:(weight_n > 8 && $5 == 0 ? "" : bplabel($4)) \
                with labels offset 0, (wpos(i) % 2 ? 0.8 : -0.8) font ",8" tc rgb bcolor(int(weight_bits[i])) notitle, \
            for [j = 1:wb_n] NaN with lines lc rgb bcolor(int(wb[j])) lw 6 title wb[j]."-bit", \
            for [k = 1:wk_n] NaN with linespoints lc rgb "#555555" lw 2 dt k \
                pt pts[(k - 1) % 6 + 1] ps 0.9 title wk[k] noenhanced
    }
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
