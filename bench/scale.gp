# Plot of bench/scale --out: per-call cost with the large condition as a multiple of the small
# case, per case, one bar per row; the dashed line is the goal (1.2x).
#   gnuplot -e "datafile='bench/results/scale.tsv'; outfile='bench/results/scale.png'" bench/scale.gp
# Data: row, case, units, small us, large us, after us, large/small, RSS before/after KiB, bytes/unit.

if (!exists("datafile")) datafile = 'bench/results/scale.tsv'
if (!exists("outfile")) outfile = 'bench/results/scale.png'
rows = system("awk -F'\t' '!/^#/ && NF > 1 && !seen[$1]++ { printf \"%s \", $1 }' '" . datafile . "'")
n = words(rows)
width = 0.8 / n
caseidx(c) = c eq "sets" ? 0 : c eq "bigset" ? 1 : c eq "waiters" ? 2 : NaN

set terminal pngcairo size 900,560 font "sans,11"
set output outfile
set datafile separator "\t"
set title "scale: per-call time with the condition / without (median; goal <= 1.2x)"
set logscale y 10
set ylabel "large / small"
set xtics ("32000 sets" 0, "set of 32000 semaphores" 1, "parked waiters" 2)
set xrange [-0.6:2.6]
set yrange [0.1:*]
set style fill solid 0.6 border -1
set boxwidth width
set grid y
set key below

plot for [i=1:n] datafile using (strcol(1) eq word(rows, i) ? caseidx(strcol(2)) - 0.4 + (i - 0.5) * width : NaN):7 \
	with boxes title word(rows, i) noenhanced, \
	1.2 with lines dt 2 lw 2 lc rgb "black" title "goal 1.2x"
