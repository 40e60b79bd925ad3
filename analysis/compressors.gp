# compressors.gp -- the figure of experiments/compressors.sh: for every
# gradient compressor, the relative L2 error of the reduced gradient (left)
# and the validation loss after training (right) against the bits per real
# parameter a worker sends, on a log scale. Filled points are the ~4-bit
# budget, open ones the ~1.25-bit budget, crosses the references (the fp32
# baseline, an fp16 cast, FP8); each point is labelled with its name.
#
#   gnuplot -e "dat='compressors/points.dat'; base='compressors/compressors'" analysis/compressors.gp
#
# dat: lines "name budget bits rel_l2 val_loss" (budget ref, 4 or 1), as the
# script writes them; writes BASE.png and BASE.svg.
if (!exists("dat") || !exists("base")) {
    print "compressors.gp: say dat='points.dat' and base='out/compressors'"
    exit status 2
}
set datafile commentschars "#"
set logscale x 2
set format y "%g"
set xlabel "bits per parameter sent (log scale)"
set key off
set grid
set offsets graph 0.05, graph 0.12, graph 0.08, graph 0.08
pt(b) = b eq "ref" ? 2 : (b eq "4" ? 7 : 6)
col(b) = b eq "ref" ? 0x555555 : (b eq "4" ? 0x332288 : 0xCC6677)
do for [fmt in "png svg"] {
    if (fmt eq "png") { set terminal pngcairo size 1100,460 font "Sans,10" }
    else { set terminal svg size 1100,460 font "Sans,10" }
    set output base . "." . fmt
    set multiplot layout 1,2 title "Gradient compressors on the default GPT (2 x 4 workers): " . \
        "filled: about 4 bits, open: about 1.25 bits, crosses: references"
    set ylabel "relative L2 error of the reduced gradient"
    set logscale y
    # the fp32 baseline's error is its rounding alone (about 1e-7): left out here
    err(n, e) = n eq "baseline" ? NaN : e
    plot dat using 3:(err(strcol(1), $4)):(pt(strcol(2))):(col(strcol(2))) with points pt variable pointsize 1.4 lc rgb variable, \
         dat using 3:(err(strcol(1), $4)):1 with labels offset char 0.8,0.6 left font ",8"
    unset logscale y
    set ylabel "validation loss after training (nats per byte)"
    plot dat using 3:5:(pt(strcol(2))):(col(strcol(2))) with points pt variable pointsize 1.4 lc rgb variable, \
         dat using 3:5:1 with labels offset char 0.8,0.6 left font ",8"
    unset multiplot
}
