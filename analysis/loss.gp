# loss.gp -- training curves per scheme: the training loss of every step
# (train_steps.loss, as a moving mean over a tenth of the run, so that the
# schemes can be told apart through the noise of the batches) and the
# validation loss where the run evaluated one (train_steps.val_loss), of every
# training run. The colour is the preset, the dash the seed or the variant.
# In runs of 40 steps or more the first fifth is left out: every scheme starts
# from the same model and falls alike, and the axes are kept for the rest.
#
#   shardq report --db shardq.db --out OUT    (then: cd OUT && gnuplot scripts/loss.gp)
#
# reads data/loss.vars and data/loss-{train,val}.tsv, written by shardq
# report, and writes OUT/loss.png and OUT/loss.svg (the variables of the
# common block below). Without data it prints why and writes nothing.

name = "loss"
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

# From shardq (src/report/fig_loss.c): drawn, the training runs with steps;
# ids[1..ids_n], names[] and presetof[], those runs in the order of the
# presets, each its id, its name (its label, and its seed where its label
# has several) and its preset; maxstep, their last step; win, the steps of
# the moving mean (a tenth of maxstep from 40 steps on); from, the first
# step drawn (the first fifth of a run of 40 steps or more left out, a
# multiple of 10 steps from 100 on); tsv("train"), every run's moving mean
# of the training loss from step from on, and tsv("val"), its validation
# losses: the run's id, the step and the loss.
if (drawn eq "") {
    print sprintf("%s: skipped: no training runs in %s", name, within)
    exit
}
# the k-th run of a preset (in ids) gets dash k
array dash[ids_n]
do for [i = 1:ids_n] {
    dash[i] = 1 + sum [j = 1:i] (j < i && presetof[j] eq presetof[i] ? 1 : 0)
}
# the key's columns: as many as the longest name lets fit (about 8 pixels a
# character and 70 for the sample), at most 5; rows enough for every run
maxlen = 0
do for [i = 1:ids_n] { maxlen = strlen(names[i]) > maxlen ? strlen(names[i]) : maxlen }
kcols = int(width / (8.0 * maxlen + 70))
kcols = kcols < 1 ? 1 : kcols > 5 ? 5 : kcols
krows = int((ids_n + kcols - 1) / kcols)
# each run's line drawn from its rows of a table (x undefined on the others')
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
    plot for [i = 1:ids_n] tsv("train") using (of(ids[i])):3 with lines \
        lc rgb pcolor(presetof[i]) lw 1.5 dt dash[i] notitle
    set origin 0.5, kh
    set title "validation loss".(from > 0 ? sprintf(", from step %d", from) : "")
    plot for [i = 1:ids_n] tsv("val") using (of(ids[i])):3 with linespoints \
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
    plot for [i = 1:ids_n] NaN with linespoints lc rgb pcolor(presetof[i]) lw 1.5 \
        dt dash[i] pt 7 ps 0.7 title names[i] noenhanced
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
