# bias.gp -- whether a scheme's rounding is biased: the mean signed error of
# the replayed gradients and weights (step_metrics.mean_signed) relative to
# their RMS error (the square root of step_metrics.mse), each run's mean over
# its steps, then the mean over the runs of a scheme (its seeds) with a 95%
# confidence interval of that mean (Student's t). 0 is unbiased; +-1 would be
# an error that is all bias. A scheme is its preset with the knobs that vary
# between its runs; past 20 schemes in a panel, the runs of a preset that
# differ only in bits and group size are pooled, and the panel says so.
#
#   shardq report --db shardq.db --out OUT    (then: cd OUT && gnuplot scripts/bias.gp)
#
# reads data/bias.vars and data/bias-{grad,weight}.tsv, written by shardq
# report, and writes OUT/bias.png and OUT/bias.svg (the variables of the
# common block below). Without data it prints why and writes nothing.

name = "bias"
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

# From shardq (src/report/fig_bias.c), per path P of grad and weight: Ps[1..Ps_n]
# the schemes in the order of the presets (Ppool: pooled over bits and group
# size, past 20 of them), and tsv(P): every run of P, its label, its mean
# signed error and mean squared error over its steps; drawn, the runs drawn.
if (grad_n + weight_n == 0) {
    print sprintf("%s: skipped: no replay runs with error statistics in %s", name, within)
    exit
}
panels = (grad_n > 0) + (weight_n > 0)

# Student's t at 97.5% for 1..30 degrees of freedom, then the normal's 1.96
array tq[30] = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, \
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, \
    2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
t975(df) = df <= 30 ? tq[df] : 1.96

# one line per scheme into a datablock: position, mean, half-width, runs;
# each run's ratio is its mean signed error over its RMS error
do for [pi = 1:2] {
    p = pi == 1 ? "grad" : "weight"
    n_ = pi == 1 ? grad_n : weight_n
    if (pi == 1) { set print $grad } else { set print $weight }
    do for [i = 1:n_] {
        l = pi == 1 ? grad[i] : weight[i]
        stats tsv(p) using (strcol(1) eq l ? $2 / sqrt($3) : NaN) nooutput
        n = STATS_records
        # identical values (round-to-nearest is deterministic) can leave the
        # variance a hair below zero, and its square root undefined
        sd = STATS_stddev
        sd = sd == sd ? sd : 0
        half = n > 1 ? t975(n - 1) * sd * sqrt(n / (n - 1.0)) / sqrt(n) : 0
        print sprintf("%d\t%.6g\t%.6g\t%d", n_ - i, 100 * STATS_mean, 100 * half, n)
    }
    set print "-"
}

set grid xtics lc rgb "#e0e0e0"
set xlabel "mean signed error, % of the RMS error"
set ytics nomirror scale 0
set xtics nomirror
unset key
set arrow 1 from 0, graph 0 to 0, graph 1 nohead lc rgb "#808080" dt 2
set offsets graph 0.05, graph 0.05, 0.6, 0.6
set xrange [*:*]
# A narrow panel fits about five tick labels: a 1-2-5 step over the data's
# range (error bars and zero included) keeps them apart.
nice(x) = (e = 10**floor(log10(x)), f = x / e, (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * e)
xstep(lo, hi) = nice(((hi > 0 ? hi : 0) - (lo < 0 ? lo : 0)) / 4 > 1e-6 ? \
                     ((hi > 0 ? hi : 0) - (lo < 0 ? lo : 0)) / 4 : 1e-6)

do for [t = 1:words(formats)] {
    eval term(t)
    set multiplot layout 1, panels title "Bias of the quantized result: mean over runs (seeds) with its 95% confidence interval"
    if (grad_n > 0) {
        set title "gradient reduce-scatter".(grad_pool ? "\n(runs pooled over bits and group size)" : "")
        set yrange [*:*]  # one-column stats would keep only values inside it
        stats $grad using ($2 - $3) nooutput
        lo = STATS_min
        stats $grad using ($2 + $3) nooutput
        set xtics xstep(lo, STATS_max)
        set yrange [-1:grad_n]
        set ytics ()
        do for [i = 1:grad_n] { set ytics add (grad[i] grad_n - i) }
        plot for [i = 1:grad_n] $grad every ::i-1::i-1 using 2:1:3 with xerrorbars \
            lc rgb pcolor(word(grad[i], 1)) pt 7 ps 1 lw 1.5 notitle
    }
    if (weight_n > 0) {
        set title "weight all-gather".(weight_pool ? "\n(runs pooled over bits and group size)" : "")
        set yrange [*:*]  # one-column stats would keep only values inside it
        stats $weight using ($2 - $3) nooutput
        lo = STATS_min
        stats $weight using ($2 + $3) nooutput
        set xtics xstep(lo, STATS_max)
        set yrange [-1:weight_n]
        set ytics ()
        do for [i = 1:weight_n] { set ytics add (weight[i] weight_n - i) }
        plot for [i = 1:weight_n] $weight every ::i-1::i-1 using 2:1:3 with xerrorbars \
            lc rgb pcolor(word(weight[i], 1)) pt 7 ps 1 lw 1.5 notitle
    }
    unset multiplot
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, drawn, png, svg)
