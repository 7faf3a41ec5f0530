# Plot of bench/locks output: throughput against threads, one panel per workload.
#   gnuplot -e "datafile='bench/results/locks.dat'; outfile='bench/results/locks.png'" bench/locks.gp
# (build/bench/locks runs this itself after writing the data.) Data: one block per workload,
# columns threads, amutex, pthread_mutex, adaptive, TAS, MCS (0 = not measured, not drawn).

if (!exists("datafile")) datafile = 'bench/results/locks.dat'
if (!exists("outfile")) outfile = 'bench/results/locks.png'

set terminal pngcairo size 1400,560 font "sans,11"
set output outfile
set multiplot layout 1,2 title "Lock throughput on this machine (ops/s, median; higher is better)"

set logscale x 2
set logscale y 10
set format y "10^{%L}"
set xlabel "threads"
set ylabel "lock+unlock per second"
set xtics (1, 2, 4, 8, 16, 32, 64)
set xrange [0.8:20]
names = "amutex pthread_mutex PTHREAD_MUTEX_ADAPTIVE_NP TAS_spinlock plain_MCS_spinlock"
set grid
set key below
set datafile missing "0"

set title "short critical section"
plot for [c=2:6] datafile index 0 using 1:c with linespoints lw 2 pt c title word(names, c - 1) noenhanced

set title "long critical section"
plot for [c=2:6] datafile index 1 using 1:c with linespoints lw 2 pt c title word(names, c - 1) noenhanced

unset multiplot
