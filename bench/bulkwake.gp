# Plot of bench/bulkwake --out: time from the waking call to the last waiter running, against N,
# and the same per waiter (flat = linear in N). One line per row.
#   gnuplot -e "datafile='bench/results/bulkwake.tsv'; outfile='bench/results/bulkwake.png'" bench/bulkwake.gp
# Data: row, N, last us (median, min, max), call us, median waiter us, ratio to native, reps.

if (!exists("datafile")) datafile = 'bench/results/bulkwake.tsv'
if (!exists("outfile")) outfile = 'bench/results/bulkwake.png'
rows = system("awk -F'\t' '!/^#/ && NF > 1 && !seen[$1]++ { printf \"%s \", $1 }' '" . datafile . "'")

set terminal pngcairo size 1400,560 font "sans,11"
set output outfile
set datafile separator "\t"
set multiplot layout 1,2 title "bulk wake-up: one SETALL releases N waiters (median; lower is better)"

set logscale x 2
set xlabel "waiters N"
set xtics (250, 500, 1000, 2000, 4000, 8000, 16000)
set grid
set offsets graph 0.04, graph 0.04, 0, 0
set key below

set logscale y 10
set format y "10^{%L}"
set ylabel "microseconds to the last waiter"
set title "time to the last waiter"
plot for [i=1:words(rows)] datafile using (strcol(1) eq word(rows, i) ? $2 : NaN):3 \
	with linespoints lw 2 pt i title word(rows, i) noenhanced

unset logscale y
set format y "%g"
set yrange [0:*]
set ylabel "microseconds per waiter (flat = linear)"
set title "per waiter: last / N"
plot for [i=1:words(rows)] datafile using (strcol(1) eq word(rows, i) ? $2 : NaN):($3 / $2) \
	with linespoints lw 2 pt i title word(rows, i) noenhanced

unset multiplot
