# Plot of bench/lockunlock --out: lock+unlock pairs per second against processes, one line per row.
#   gnuplot -e "datafile='bench/results/lockunlock.tsv'; outfile='bench/results/lockunlock.png'" bench/lockunlock.gp
# Data: row, P, pairs, median s, min s, max s, pairs/s, time ratio to native, reps; one block per row.

if (!exists("datafile")) datafile = 'bench/results/lockunlock.tsv'
if (!exists("outfile")) outfile = 'bench/results/lockunlock.png'
rows = system("awk -F'\t' '!/^#/ && NF > 1 && !seen[$1]++ { printf \"%s \", $1 }' '" . datafile . "'")

set terminal pngcairo size 900,560 font "sans,11"
set output outfile
set datafile separator "\t"
set title "lock/unlock: P processes, one semaphore as a mutex (pairs/s from the median time; higher is better)"
set logscale x 2
set logscale y 10
set format y "10^{%L}"
set xlabel "processes P"
set ylabel "lock+unlock pairs per second"
set xtics (1, 2, 4, 8, 16, 32, 64)
set grid
set offsets graph 0.04, graph 0.04, 0, 0
set key below

plot for [i=1:words(rows)] datafile using (strcol(1) eq word(rows, i) ? $2 : NaN):7 \
	with linespoints lw 2 pt i title word(rows, i) noenhanced
