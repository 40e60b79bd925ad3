# codec-sweep.gp -- the error/size trade-off of a codec sweep: relative L2
# error of the round trip against bits per element (codes and metadata), one
# line per (kind, group, hadamard, round) block of the table that
# experiments/codec-sweep.sh prints.
#
#   gnuplot -e "in='sweep.txt'; out='sweep.svg'" analysis/codec-sweep.gp
#
# SVG, because every gnuplot build has that terminal (gnuplot-nox included).

if (!exists("in")) { print "codec-sweep.gp: set in='TABLE' (see the header)"; exit status 2 }
if (!exists("out")) { out = "codec-sweep.svg" }

stats in using 6 nooutput
nblocks = STATS_blocks

set terminal svg size 900,600 dynamic enhanced font "sans,12"
set output out
set title "Round-trip error against size (".in.")" noenhanced
set xlabel "bits per element (codes + scales + offsets)"
set ylabel "relative L2 error  ||x' - x|| / ||x||"
set logscale y
set grid
set key outside right top noenhanced

plot for [i=0:nblocks-1] in index i using 6:7 with linespoints title columnheader(1)
