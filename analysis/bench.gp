# bench.gp -- what `shardq bench --db` measured: the throughput of each codec
# operation (GB/s of bytes read + written, metadata included) against the
# input size (MB of fp32), beside a plain copy of the same size measured in
# the same run (bench_results). The latest bench run within the filter is
# drawn, at the largest thread count it measured.
#
#   shardq report --db shardq.db --out OUT    (then: cd OUT && gnuplot scripts/bench.gp)
#
# reads data/bench.vars and data/bench-{rows,copy}.tsv, written by shardq
# report, and writes OUT/bench.png and OUT/bench.svg (the variables of the
# common block below). Without data it prints why and writes nothing.

name = "bench"
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

# From shardq (src/report/fig_bench.c): run, the latest bench run with
# results ('' for none) of nbench, at threads, its largest thread count;
# where, its machine; ops[1..ops_n], its operations but the copy, fastest
# first; tsv("rows"), every op's rows, the op first, MB of fp32 input, GB/s
# and its spread, and 1 when under half of the same op and size's 1-thread
# figure (SQ_BENCH_SLOW) on more than 1 thread; nnoisy, the figures that
# stayed noisy; tsv("copy"), the plain copy's MB and GB/s.
if (run eq "") {
    print sprintf("%s: skipped: no bench runs in %s", name, within)
    exit
}
# MB of fp32 input against GB/s (and its spread) of one op at that thread count
of(op) = strcol(1) eq op ? $2 : NaN
# figures that stayed noisy after the bench's three tries (spread over a
# quarter of the median, SQ_BENCH_NOISY, or under half of 1 thread's,
# SQ_BENCH_SLOW: a busy machine), copies included: ringed, and counted in
# the title
noisy(x) = column(4) > 0.25 * column(3) || column(5) > 0 ? x : NaN
copy = tsv("copy")

array ocolors[10] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", \
    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]
array pts[6] = [7, 5, 9, 11, 13, 15]
set logscale x 2
set logscale y
set format x "%g"
set grid xtics ytics mxtics mytics lc rgb "#e0e0e0"
set xlabel "input size (MB of fp32)"
set ylabel "throughput (GB/s, bytes read + written)"
set xtics nomirror
set ytics nomirror
set key outside right top reverse Left spacing 1.1 samplen 3
set offsets graph 0.03, graph 0.03, 0, 0
set title sprintf("Codec throughput beside a plain copy: run %s, %s, %s", run, where, \
    threads > 0 ? sprintf("%d thread%s", threads, threads == 1 ? "" : "s") : "GPU").\
    (nbench > 1 ? sprintf(" (latest of %d bench runs)", nbench) : "").\
    (nnoisy > 0 ? sprintf("\n%d figure%s stayed noisy (ringed: spread over 25%% of the median ".\
    "or under half of 1 thread's after 3 tries; a busy machine)", nnoisy, nnoisy == 1 ? "" : "s") : "") noenhanced

do for [t = 1:words(formats)] {
    eval term(t)
    plot copy using 1:2 with linespoints lc rgb "black" lw 2.5 dt 2 pt 6 ps 1 title "copy", \
        for [i = 1:ops_n] tsv("rows") using (of(ops[i])):3 with linespoints \
            lc rgb ocolors[(i - 1) % 10 + 1] lw 2 pt pts[(i - 1) % 6 + 1] ps 0.9 \
            dt 1 + (i - 1) / 10 title ops[i] noenhanced, \
        for [k = 1:(nnoisy > 0)] tsv("rows") using 2:(noisy($3)) with points pt 6 ps 3 lw 2 \
            lc rgb "#CC3311" title "noisy"
    set output
}
print sprintf("%s: runs %s -> %s, %s", name, run, png, svg)
