# Plot of bench/semop_multi --out: ops/s against threads, one panel for S = 1 (one shared
# semaphore) and one for S = T (a semaphore per thread), one line per row.
#   gnuplot -e "datafile='bench/results/semop_multi.tsv'; outfile='bench/results/semop_multi.png'" bench/semop_multi.gp
# (bench/run.sh runs this.) Data: row, mode, T, S, median ops/s, min, max, ratio to native, reps;
# one block per row and mode.

if (!exists("datafile")) datafile = 'bench/results/semop_multi.tsv'
if (!exists("outfile")) outfile = 'bench/results/semop_multi.png'
# The rows, in file order (labels have no spaces: they come from --run-under=LABEL).
rows = system("awk -F'\t' '!/^#/ && NF > 1 && !seen[$1]++ { printf \"%s \", $1 }' '" . datafile . "'")

set terminal pngcairo size 1400,560 font "sans,11"
set output outfile
set datafile separator "\t"
set multiplot layout 1,2 title "semop-multi: ops/s (median; higher is better)"

set logscale x 2
set logscale y 10
set format y "10^{%L}"
set xlabel "threads T"
set ylabel "semop calls per second"
set xtics (1, 2, 4, 8, 16, 32, 64)
set grid
set offsets graph 0.04, graph 0.04, 0, 0
set key below

set title "S = 1: all threads on one semaphore"
plot for [i=1:words(rows)] datafile using (strcol(1) eq word(rows, i) && strcol(2) eq "S=1" ? $3 : NaN):5 \
	with linespoints lw 2 pt i title word(rows, i) noenhanced

set title "S = T: a semaphore per thread, one set"
plot for [i=1:words(rows)] datafile using (strcol(1) eq word(rows, i) && strcol(2) eq "S=T" ? $3 : NaN):5 \
	with linespoints lw 2 pt i title word(rows, i) noenhanced

unset multiplot
