# speedup.gp -- what `shardq model` predicts: the speedup of one training
# iteration over the baseline preset against the number of GPUs, one line per
# scheme (model_results.speedup), with 1 (no gain) dashed. The latest model
# run within the filter is drawn.
#
#   shardq report --db shardq.db --out OUT    (then: cd OUT && gnuplot scripts/speedup.gp)
#
# reads data/speedup.vars and data/speedup-rows.tsv, written by shardq
# report, and writes OUT/speedup.png and OUT/speedup.svg (the variables of
# the common block below). Without data it prints why and writes nothing.

name = "speedup"
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

# From shardq (src/report/fig_speedup.c): run, the latest model run with
# speedups ('' for none) of nmodel; schemes[1..schemes_n], its schemes in the
# order of the presets; tsv("rows"), every scheme's rows, the scheme first,
# GPUs and speedup; mname and mplat, the model and the platform predicted.
if (run eq "") {
    print sprintf("%s: skipped: no model runs with speedups in %s", name, within)
    exit
}
of(s) = strcol(1) eq s ? $2 : NaN

array pts[6] = [7, 5, 9, 11, 13, 15]
set logscale x 2
set format x "%g"
set xtics 2
set grid xtics ytics lc rgb "#e0e0e0"
set xlabel "GPUs"
set ylabel "predicted speedup of an iteration over baseline (×)"
set xtics nomirror
set ytics nomirror
set key outside right top reverse Left spacing 1.1 samplen 3
set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05
# Schemes predicted alike (tlq under tlqhs) would hide one another: the i-th
# of n is drawn (i - (n+1)/2) * 0.06 of an octave to the side.
sx(i) = (i - (schemes_n + 1) / 2.0) * 0.06
# Measured points to compare with, drawn where the run's platform and model
# are theirs: platform, model, scheme, GPUs, speedup over the baseline,
# source (SDP4Bit, NeurIPS 2024, Table 2: 57.6 against 24.1 TFLOP/s per GPU;
# experiments/validation/sdp4bit-a100.ini has the row).
$measured << EOD
a100-slingshot10	GPT-1.3B	sdp4bit	64	2.39	SDP4Bit measured (its Table 2)
EOD
ismeasured(i) = strcol(1) eq mplat && strcol(2) eq mname
nmeasured = sum [k = 1:|$measured|] (strstrt($measured[k], mplat."\t".mname."\t") == 1 ? 1 : 0)
mlabel = "SDP4Bit measured"
set title sprintf("Predicted speedup of %s on %s against GPU count (model run %s)", \
    mname eq "" ? "a model" : mname, mplat eq "" ? "a platform" : mplat, run).\
    (nmodel > 1 ? sprintf(" (latest of %d model runs)", nmodel) : "") noenhanced

do for [t = 1:words(formats)] {
    eval term(t)
    plot 1 with lines lc rgb "#808080" dt 2 lw 1.5 title "1 (no gain)", \
        for [i = 1:schemes_n] tsv("rows") using (of(schemes[i]) * 2**sx(i)):3 with linespoints \
            lc rgb pcolor(schemes[i]) lw 2 pt pts[(i - 1) % 6 + 1] ps 0.9 \
            title schemes[i] noenhanced, \
        for [k = 1:(nmeasured > 0)] $measured using (ismeasured(0) ? $4 : NaN):5 with points \
            lc rgb pcolor("sdp4bit") pt 12 ps 2.5 lw 2 title mlabel noenhanced, \
        for [k = 1:(nmeasured > 0)] $measured using (ismeasured(0) ? $4 : NaN):5:\
            (sprintf("%.2fx measured", $5)) with labels offset 0, -1.4 font ",9" \
            tc rgb pcolor("sdp4bit") notitle
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, run, png, svg)
