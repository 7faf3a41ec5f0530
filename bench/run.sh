#!/bin/bash
# bench/run.sh - the benchmark suite: every bench program, one markdown report, the plots.
#
#   bench/run.sh [O] [quick|full]        (make bench-quick / make bench)
#
# O is the build directory (default build). quick takes about a minute and writes
# bench/results/quick/; full takes several minutes and writes bench/results/ (latest.md, *.png,
# and the tab-separated data behind them, *.tsv / locks.dat).
#
# Environment:
#   SEMVISORD=PATH        the daemon to measure (default O/semvisord); it is started here with a
#                         private agent socket and no control socket, and stopped at the end.
#                         SEMVISORD=none leaves the daemon rows out (the report says so).
#   BENCH_WAIT_QUIET=SEC  first wait up to SEC seconds for the 1-minute load average to fall
#                         below BENCH_QUIET_LOAD (default 0.5); the report records what it saw.
#   BENCH_REQUIRE_QUIET=1 ...and measure nothing (exit 3) if it is still above after that wait.
#   BENCH_RESULTS=DIR     write there instead.
#
# Everything runs in a private IPC namespace (unshare --ipc, when root), and every target of the
# workload programs in one of its own, so no run can see or leave System V sets on the host.
# Besides the steps, only the daemon and a sampler of other processes' activity are started
# here; both are stopped on exit, whatever happens.
set -uo pipefail

O=${1:-build}
MODE=${2:-quick}
case "$MODE" in
quick | full) ;;
*)
	echo "usage: bench/run.sh [O] [quick|full]" >&2
	exit 2
	;;
esac
SELF=$(readlink -f "$0")
cd "$(dirname "$SELF")/.." || exit 2

die() {
	echo "bench/run.sh: $*" >&2
	exit 2
}

# A private IPC namespace for the whole run (root only; otherwise targets use IPC_PRIVATE sets
# and remove them themselves).
if [ "$(id -u)" = 0 ] && [ -z "${SEMVISOR_BENCH_IPCNS:-}" ]; then
	unshare --ipc true 2>/dev/null || die "unshare --ipc is refused here; run as root outside a restricted container"
	export SEMVISOR_BENCH_IPCNS=1
	exec unshare --ipc -- "$SELF" "$O" "$MODE"
fi

# ---- what the run needs ------------------------------------------------------------------------
RUN="$O/semvisor-run"
need=("$O/bench/floor" "$O/bench/engine" "$O/bench/fastword" "$O/bench/locks" "$O/bench/semop_multi"
	"$O/bench/lockunlock" "$O/bench/bulkwake" "$O/bench/scale" "$O/bench/tenants"
	"$O/bench/openview" "$O/bench/restart" "$O/semvisor-keeper" "$RUN")
for p in "${need[@]}"; do
	[ -x "$p" ] || die "missing $p: build it first (make $p, or make all)"
done
command -v gnuplot >/dev/null || die "gnuplot is missing (apt-get install gnuplot-nox, or make deps)"
for g in semop_multi lockunlock bulkwake scale locks; do
	[ -f "bench/$g.gp" ] || die "missing bench/$g.gp"
done

SEMVISORD=${SEMVISORD:-$O/semvisord}
if [ "$SEMVISORD" != none ] && [ ! -x "$SEMVISORD" ]; then
	die "missing the daemon $SEMVISORD: build it (make $O/semvisord), point SEMVISORD at one (e.g. SEMVISORD=/path/to/semvisord), or leave its rows out with SEMVISORD=none"
fi

# The whole-set-locking contrast: the same sources built with LOCKING=global.
GLOBAL="$O/global"
echo "bench/run.sh: building the whole-set-locking contrast in $GLOBAL" >&2
make --no-print-directory O="$GLOBAL" LOCKING=global "$GLOBAL/bench/engine" "$GLOBAL/semvisor-run" >&2 ||
	die "building $GLOBAL (make O=$GLOBAL LOCKING=global ...) failed"
# What counting costs: the engine built with COUNTERS=off (no statistics at all).
NOCOUNT="$O/nocount"
echo "bench/run.sh: building the engine without statistics in $NOCOUNT" >&2
make --no-print-directory O="$NOCOUNT" COUNTERS=off "$NOCOUNT/bench/engine" >&2 ||
	die "building $NOCOUNT (make O=$NOCOUNT COUNTERS=off ...) failed"

if [ -n "${BENCH_RESULTS:-}" ]; then
	RES=$BENCH_RESULTS
elif [ "$MODE" = full ]; then
	RES=bench/results
else
	RES=bench/results/quick
fi
mkdir -p "$RES" || die "cannot create $RES"
TMPD=$(mktemp -d /tmp/semvisor-bench.XXXXXX) || die "mktemp failed"
DPID=
KPID=
SPID=

# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	if [ -n "$SPID" ]; then
		kill -TERM "$SPID" 2>/dev/null
		wait "$SPID" 2>/dev/null
	fi
	for p in $DPID $KPID; do
		kill -0 "$p" 2>/dev/null || continue
		kill -TERM "$p" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMPD"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

load1() { cut -d' ' -f1 /proc/loadavg; }
# The "cpu" line of /proc/stat: all CPUs' time in ticks, by kind; the 8th kind is steal, time
# the hypervisor gave our virtual CPUs' turn to someone else, which no process list shows.
cpustat() { awk '$1 == "cpu" { print $2, $3, $4, $5, $6, $7, $8, $9; exit }' /proc/stat; }
# steal_pct "START" "END": steal as a share of all CPU time between two cpustat readings
steal_pct() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		n = split(a, x, " "); split(b, y, " ")
		for (i = 1; i <= n; i++) t += y[i] - x[i]
		printf "%.1f", (t > 0 ? 100 * (y[8] - x[8]) / t : 0) }'
}
quiet_load=${BENCH_QUIET_LOAD:-0.5}
is_quiet() { awk -v l="$(load1)" -v q="$quiet_load" 'BEGIN { exit !(l < q) }'; }

if [ "${BENCH_WAIT_QUIET:-0}" -gt 0 ]; then
	waited=0
	while ! is_quiet && [ "$waited" -lt "$BENCH_WAIT_QUIET" ]; do
		echo "bench/run.sh: load average $(load1) >= $quiet_load; waiting ($waited s of $BENCH_WAIT_QUIET)" >&2
		sleep 15
		waited=$((waited + 15))
	done
	if [ "${BENCH_REQUIRE_QUIET:-0}" = 1 ] && ! is_quiet; then
		echo "bench/run.sh: the 1-minute load average is still $(load1) (>= $quiet_load) after $BENCH_WAIT_QUIET s; nothing measured (BENCH_REQUIRE_QUIET=1)" >&2
		exit 3
	fi
fi

# ---- the daemon --------------------------------------------------------------------------------
SOCK="$TMPD/agent.sock"
DAEMON_ROWS=()
JOURNAL_ROW=()
if [ "$SEMVISORD" != none ]; then
	"$SEMVISORD" --control-socket= --agent-socket="$SOCK" >"$TMPD/semvisord.log" 2>&1 &
	DPID=$!
	for _ in $(seq 100); do
		[ -S "$SOCK" ] && break
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.05
	done
	if [ ! -S "$SOCK" ]; then
		cat "$TMPD/semvisord.log" >&2
		die "$SEMVISORD did not start (no agent socket at $SOCK)"
	fi
	# and the same daemon tracing its client instead (semvisor-run --daemon --backend=ptrace)
	DAEMON_ROWS=(--run-under=semvisord "$RUN" --daemon="$SOCK" --
		--run-under=semvisord-ptrace "$RUN" --daemon="$SOCK" --backend=ptrace --)
	# The same daemon under a keeper of its fd store: every change journaled, so that a
	# crash loses nothing (server/notify/recover.c). The row beside the one above is its cost.
	SOCKJ="$TMPD/agent-journal.sock"
	"$O/semvisor-keeper" --listen agent="$SOCKJ" --log "$TMPD/keeper.log" -- \
		"$SEMVISORD" --control-socket= --agent-socket="$TMPD/unused.sock" \
		>"$TMPD/semvisord-journal.log" 2>&1 &
	KPID=$!
	for _ in $(seq 100); do
		grep -q "serving:" "$TMPD/semvisord-journal.log" 2>/dev/null && break
		kill -0 "$KPID" 2>/dev/null || break
		sleep 0.05
	done
	grep -q "serving:" "$TMPD/semvisord-journal.log" 2>/dev/null ||
		die "$SEMVISORD under semvisor-keeper did not start: $(cat "$TMPD/semvisord-journal.log")"
	JOURNAL_ROW=(--run-under=semvisord+journal "$RUN" --daemon="$SOCKJ" --)
fi
RUN_ROW=(--run-under=semvisor-run "$RUN" --)
# The ptrace backend (server/notify/ptrace.h): beside floor's own bare ptrace row, and a row of
# every workload, beside the notify backend's.
PTRACE_ROW=(--run-under=semvisor-run-ptrace "$RUN" --backend=ptrace --)
GLOBAL_ROW=(--run-under=semvisor-run-global "$GLOBAL/semvisor-run" --)
# The fast path (semvisor-run --fast): operations that complete at once never leave the program.
FAST_ROW=(--run-under=semvisor-run-fast "$RUN" --fast --)
[ -f "$O/libsemvisor-fast.so" ] || die "missing $O/libsemvisor-fast.so: build it first (make all)"

# ---- who else is using the CPUs ----------------------------------------------------------------
# The load average counts the benchmark's own threads too (16 spinning in locks, 4000 waking in
# bulkwake), so it cannot tell whether other work shared the machine during a step. This sampler
# can: every second it records the runnable (state R) processes outside this run's session
# (kernel threads and any semvisor-run, such as a daemon's clients started elsewhere, excluded).
# Each section of the report says in how many samples something else was running, and what.
MYSID=$(ps -o sid= -p $$ | tr -d ' ')
mkfifo "$TMPD/tick" || die "mkfifo failed"
(
	trap 'exit 0' TERM
	while :; do
		ps -e -o sid=,stat=,ppid=,pid=,comm= 2>/dev/null | awk -v s="$MYSID" -v t="$(date +%s)" '
			$1 != s && $2 ~ /^R/ && $3 != 2 && $4 != 2 && $5 != "semvisor-run" { o = o " " $5 }
			END { print t o }'
		# A one-second pause without a sleep process that could outlive the sampler: read
		# with a timeout from a FIFO nobody writes (opened read-write, so open never blocks).
		read -r -t 1 _ <>"$TMPD/tick"
	done
) >"$TMPD/others.log" 2>/dev/null &
SPID=$!

# others_during T0 T1: "N of M samples: name (count), ..." for the samples in [T0, T1].
others_during() {
	awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b {
			m++
			if (NF > 1) n++
			for (i = 2; i <= NF; i++) c[$i]++
		}
		END {
			printf "%d of %d one-second samples", n, m
			sep = ": "
			for (k in c) { printf "%s%s (%d)", sep, k, c[k]; sep = ", " }
		}' "$TMPD/others.log"
}

# ---- the steps ---------------------------------------------------------------------------------
START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
START_S=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
STAT_START=$(cpustat)
FAILED=()
STEPS=()

# step NAME CMD...: runs CMD, its stdout into $TMPD/NAME.out (and the terminal), records the
# command line, the time it took and whether it failed.
step() {
	local name=$1 t0 rc
	shift
	printf '%q ' "$@" | sed 's/ $//' >"$TMPD/$name.cmd"
	echo "bench/run.sh: == $name: $(cat "$TMPD/$name.cmd")" >&2
	t0=$(date +%s.%N)
	cut -d' ' -f1 /proc/loadavg >"$TMPD/$name.load"
	cpustat >"$TMPD/$name.stat0"
	# stdout through tee in the pipeline (so it is complete when the step ends); stderr to its
	# file and to the terminal. (No bare "wait" here: it would wait for the daemon too.)
	"$@" 2> >(tee "$TMPD/$name.err" >&2) | tee "$TMPD/$name.out"
	rc=${PIPESTATUS[0]}
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }' >"$TMPD/$name.time"
	others_during "${t0%.*}" "$(date +%s)" >"$TMPD/$name.others"
	steal_pct "$(cat "$TMPD/$name.stat0")" "$(cpustat)" >"$TMPD/$name.steal"
	echo "$rc" >"$TMPD/$name.rc"
	if [ "$rc" -ne 0 ]; then
		FAILED+=("$name")
		echo "bench/run.sh: $name FAILED (exit status $rc)" >&2
	fi
	STEPS+=("$name")
}

Q=()
[ "$MODE" = quick ] && Q=(--quick)

step floor "$O/bench/floor" "${Q[@]}" --out "$RES/floor.tsv" "${RUN_ROW[@]}" "${DAEMON_ROWS[@]}" \
	"${JOURNAL_ROW[@]}" "${PTRACE_ROW[@]}" "${FAST_ROW[@]}"
# The same with everything on one CPU: on this VM the cost of a round trip depends on whether the
# answering thread runs on the caller's CPU (floor.md), and unpinned rows flip between the two.
step floor_same "$O/bench/floor" "${Q[@]}" --cpu-pin=same --out "$RES/floor_same.tsv" \
	"${RUN_ROW[@]}" "${DAEMON_ROWS[@]}" "${JOURNAL_ROW[@]}" "${PTRACE_ROW[@]}" "${FAST_ROW[@]}"
step engine "$O/bench/engine" "${Q[@]}" --out "$RES/engine.tsv"
step engine_global "$GLOBAL/bench/engine" "${Q[@]}" --out "$RES/engine_global.tsv"
step fastword "$O/bench/fastword" "${Q[@]}" --out "$RES/fastword.tsv"
if [ "$MODE" = full ]; then
	step counters bench/counters.sh "$O/bench/engine" "$NOCOUNT/bench/engine" "$RES/counters.tsv" 9 --reps 3 --seconds 0.5
else
	step counters bench/counters.sh "$O/bench/engine" "$NOCOUNT/bench/engine" "$RES/counters.tsv" 5 --quick
fi
if [ "$MODE" = full ]; then
	step semop_multi "$O/bench/semop_multi" --out "$RES/semop_multi.tsv" \
		--compare semvisor-run/semvisor-run-global "${RUN_ROW[@]}" "${GLOBAL_ROW[@]}" \
		"${DAEMON_ROWS[@]}" "${PTRACE_ROW[@]}" "${FAST_ROW[@]}"
	step lockunlock "$O/bench/lockunlock" --out "$RES/lockunlock.tsv" "${RUN_ROW[@]}" \
		"${DAEMON_ROWS[@]}" "${PTRACE_ROW[@]}" "${FAST_ROW[@]}"
else
	step semop_multi "$O/bench/semop_multi" --quick --out "$RES/semop_multi.tsv" \
		"${RUN_ROW[@]}" "${DAEMON_ROWS[@]}" "${PTRACE_ROW[@]}" "${FAST_ROW[@]}"
	step lockunlock "$O/bench/lockunlock" --quick --out "$RES/lockunlock.tsv" "${RUN_ROW[@]}" \
		"${PTRACE_ROW[@]}" "${FAST_ROW[@]}"
fi
step bulkwake "$O/bench/bulkwake" "${Q[@]}" --out "$RES/bulkwake.tsv" "${RUN_ROW[@]}" \
	"${PTRACE_ROW[@]}" "${FAST_ROW[@]}"
step listeners ./bench/listeners.sh "$O" "$RES/listeners.tsv"
# Its own daemon too: one whose agent socket the greedy tenants (other uids) can reach.
rm -f "$RES/tenants.tsv" # the goal must not be read from an earlier run's file
step tenants env SEMVISORD="$SEMVISORD" ./bench/tenants.sh "$O" "$RES/tenants.tsv" "${Q[@]}"
step scale "$O/bench/scale" "${Q[@]}" --out "$RES/scale.tsv" "${RUN_ROW[@]}" "${PTRACE_ROW[@]}" \
	"${FAST_ROW[@]}"
if [ "$MODE" = full ]; then
	step openview "$O/bench/openview" --rounds 7 --run "$RUN"
else
	step openview "$O/bench/openview" --rounds 3 --run "$RUN"
fi
if [ "$SEMVISORD" != none ]; then
	if [ "$MODE" = full ]; then
		step restart "$O/bench/restart" --bin "$O" --rounds 5
	else
		step restart "$O/bench/restart" --bin "$O" --sets 4000 --waiters 1000 --procs 20 --rounds 3
	fi
fi
# Last: its 16 spinning threads would otherwise weigh on the load figures of the steps after it.
step locks "$O/bench/locks" "${Q[@]}" --out "$RES" --no-plot

END_S=$(date +%s)
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
STEAL=$(steal_pct "$STAT_START" "$(cpustat)")
# What the run left in its IPC namespace: targets remove their sets (and run in namespaces of
# their own), so anything here is a bug.
SETS_LEFT=$(ipcs -s 2>/dev/null | awk '$1 ~ /^0x/ { n++ } END { print n + 0 }')

# ---- plots -------------------------------------------------------------------------------------
plot() {
	local gp=$1 data=$2 png=$3
	[ -s "$data" ] || return 0
	if ! gnuplot -e "datafile='$data'; outfile='$png'" "bench/$gp.gp" 2>"$TMPD/$gp.plot.err"; then
		echo "bench/run.sh: gnuplot bench/$gp.gp failed:" >&2
		cat "$TMPD/$gp.plot.err" >&2
		FAILED+=("plot-$gp")
	fi
}
plot semop_multi "$RES/semop_multi.tsv" "$RES/semop_multi.png"
plot lockunlock "$RES/lockunlock.tsv" "$RES/lockunlock.png"
plot bulkwake "$RES/bulkwake.tsv" "$RES/bulkwake.png"
plot scale "$RES/scale.tsv" "$RES/scale.png"
plot locks "$RES/locks.dat" "$RES/locks.png"

# ---- the report --------------------------------------------------------------------------------
# tsv_get FILE ROW COL: column COL of the first line whose first field is ROW.
tsv_get() { awk -F'\t' -v r="$2" -v c="$3" '$1 == r { print $c; exit }' "$1" 2>/dev/null; }
fmt2() { awk -v v="$1" 'BEGIN { if (v == "" || v == "NA") print "NA"; else printf "%.2f", v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0 || a == "NA" || b == "NA") print "NA"; else printf "%.2f", a / b }'; }
verdict() { # verdict VALUE OP LIMIT
	awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
		if (v == "NA" || v == "") { print "not measured"; exit }
		ok = (op == "<=") ? (v + 0 <= l + 0) : (v + 0 >= l + 0)
		print ok ? "met" : "MISSED" }'
}

code_block() { # the file, fenced
	echo '```'
	cat "$1"
	echo '```'
}

section() { # section NAME TITLE [fence]
	local name=$1 title=$2 fence=${3:-}
	echo
	echo "## $title"
	echo
	echo "Command ($(cat "$TMPD/$name.time") s, exit status $(cat "$TMPD/$name.rc"); 1-minute load average $(cat "$TMPD/$name.load") at its start; other processes running: $(cat "$TMPD/$name.others"); CPU time stolen by the hypervisor: $(cat "$TMPD/$name.steal")%):"
	echo
	echo '```'
	cat "$TMPD/$name.cmd"
	echo
	echo '```'
	echo
	if [ ! -s "$TMPD/$name.out" ]; then
		echo "(no output; stderr follows)"
		code_block "$TMPD/$name.err"
	elif [ -n "$fence" ]; then
		code_block "$TMPD/$name.out"
	else
		# the workload programs print markdown; drop their own top heading
		grep -v '^### ' "$TMPD/$name.out"
	fi
	if [ "$(cat "$TMPD/$name.rc")" != 0 ] && [ -s "$TMPD/$name.err" ]; then
		echo
		echo "stderr:"
		echo
		code_block "$TMPD/$name.err"
	fi
}

{
	cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
	echo "# semvisor benchmarks ($MODE run)"
	echo
	echo "- date: $START_DATE; took $((END_S - START_S)) s"
	echo "- machine: $(nproc) CPUs ($cpu), $mem, kernel $(uname -r)"
	echo "- load average (1, 5, 15 min): $LOAD_START at the start, $LOAD_END at the end (later figures include the benchmark's own threads)"
	echo "- CPU time stolen by the hypervisor during the run (other guests on the same host; /proc/stat): $STEAL%"
	echo "- other processes running during the measurements (sampled every second, outside this run): $(others_during "$START_S" "$END_S")"
	if ! awk -v l="${LOAD_START%% *}" -v q="$quiet_load" 'BEGIN { exit !(l < q) }'; then
		echo "- **NOTE: the machine was loaded when this run started (1-minute load average ${LOAD_START%% *} >= $quiet_load): other work shared the 2 CPUs, and every figure below is affected by it. Ratios within one table are more robust than absolute figures, but not immune.**"
	fi
	echo "- produced by: \`bench/run.sh $O $MODE\` (what \`make $([ "$MODE" = full ] && echo bench || echo bench-quick)$([ "$O" != build ] && echo " O=$O")\` runs after building); daemon: $([ "$SEMVISORD" = none ] && echo 'none (SEMVISORD=none)' || echo "$SEMVISORD")"
	echo "- System V sets left in the run's IPC namespace afterwards: $SETS_LEFT"
	echo "- sources: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git status --porcelain 2>/dev/null | grep -q . && echo ' with uncommitted changes')"
	lk1=$(grep -o 'lock [a-z_]*)' "$TMPD/engine.out" 2>/dev/null | tr -d ')')
	lk2=$(grep -o 'lock [a-z_]*)' "$TMPD/engine_global.out" 2>/dev/null | tr -d ')')
	if [ "$lk1" != "$lk2" ]; then
		echo "- **NOTE: the two engine builds use different lock types ($lk1 vs $lk2): $O was built with other make variables than $GLOBAL; rebuild both (make bench does) before comparing them.**"
	fi
	others_pct=$(others_during "$START_S" "$END_S" | awk '{ if ($3 > 0) printf "%d", 100 * $1 / $3; else print 0 }')
	if [ "$others_pct" -ge 10 ]; then
		echo "- **NOTE: other processes were running in $others_pct% of the one-second samples taken during the measurements: the machine was shared for part of this run, and the figures of the steps concerned (see each section) are affected by it.**"
	fi
	if [ "${#FAILED[@]}" -gt 0 ]; then
		echo "- **FAILED steps: ${FAILED[*]}** (their sections show stderr)"
	fi
	echo
	echo "How to read this: bench/README.md. Every figure is a median over repetitions, and every"
	echo "ratio compares figures measured in this same run."

	# The project's performance goals, gathered.
	echo
	echo "## Goals"
	echo
	echo "| goal | measured | verdict |"
	echo "|---|---|---|"
	for f in floor floor_same; do
		how="unpinned"
		[ "$f" = floor_same ] && how="all on one CPU"
		fr=$(fmt2 "$(tsv_get "$RES/$f.tsv" semvisor-run 5)")
		echo "| semvisor-run uncontended <= 1.15x the read-inclusive floor ($f, $how) | ${fr:-NA}x | $(verdict "${fr:-NA}" '<=' 1.15) |"
		# credentials read on every call (server/notify/ident.h) raise the floor itself
		fc=$(ratio "$(tsv_get "$RES/$f.tsv" semvisor-run 2)" \
			"$(tsv_get "$RES/$f.tsv" notify+sync+read+creds 2)")
		fcr=$(fmt2 "$(tsv_get "$RES/$f.tsv" notify+sync+read+creds 5)")
		echo "| (what per-call credentials cost: the read+creds floor is ${fcr:-NA}x the read-inclusive floor; semvisor-run against it, $f) | ${fc:-NA}x | information |"
		if [ "$SEMVISORD" != none ]; then
			fd=$(fmt2 "$(tsv_get "$RES/$f.tsv" semvisord 5)")
			dhow=$how
			[ "$f" = floor_same ] && dhow="target and client on one CPU, the daemon unpinned"
			echo "| semvisord uncontended <= 1.15x the floor ($f, $dhow) | ${fd:-NA}x | $(verdict "${fd:-NA}" '<=' 1.15) |"
			fj=$(fmt2 "$(tsv_get "$RES/$f.tsv" semvisord+journal 5)")
			jr=$(ratio "$(tsv_get "$RES/$f.tsv" semvisord+journal 2)" "$(tsv_get "$RES/$f.tsv" semvisord 2)")
			echo "| semvisord crash-safe (journal on) uncontended <= 1.15x the floor ($f, $dhow) | ${fj:-NA}x | $(verdict "${fj:-NA}" '<=' 1.15) |"
			echo "| (what the journal costs: crash-safe semvisord against semvisord without it, $f) | ${jr:-NA}x | information |"
		fi
		pr=$(ratio "$(tsv_get "$RES/$f.tsv" semvisor-run-ptrace 2)" "$(tsv_get "$RES/$f.tsv" ptrace 2)")
		echo "| semvisor-run --backend=ptrace uncontended <= 1.15x the bare ptrace floor ($f, $how) | ${pr:-NA}x | $(verdict "${pr:-NA}" '<=' 1.15) |"
		# the bare stop reads nothing; what a correct tracer must read first raises its floor
		prc=$(ratio "$(tsv_get "$RES/$f.tsv" ptrace+read+creds 2)" "$(tsv_get "$RES/$f.tsv" ptrace 2)")
		prr=$(ratio "$(tsv_get "$RES/$f.tsv" semvisor-run-ptrace 2)" \
			"$(tsv_get "$RES/$f.tsv" ptrace+read+creds 2)")
		echo "| (what a tracer must read per call, the arch, the sembuf and the credentials: ptrace+read+creds is ${prc:-NA}x the bare stop; semvisor-run --backend=ptrace against it, $f) | ${prr:-NA}x | information |"
		fn=$(ratio "$(tsv_get "$RES/$f.tsv" semvisor-run-fast 2)" "$(tsv_get "$RES/$f.tsv" native 2)")
		echo "| semvisor-run --fast uncontended faster than the kernel's semop: < 1.0x native ($f, $how) | ${fn:-NA}x | $(verdict "${fn:-NA}" '<=' 0.99) |"
		if [ "$SEMVISORD" != none ]; then
			dp=$(ratio "$(tsv_get "$RES/$f.tsv" semvisord-ptrace 2)" "$(tsv_get "$RES/$f.tsv" ptrace 2)")
			echo "| semvisord tracing its client uncontended <= 1.15x the bare ptrace floor ($f, $dhow) | ${dp:-NA}x | $(verdict "${dp:-NA}" '<=' 1.15) |"
		fi
	done
	e1=$(tsv_get "$RES/engine.tsv" ops_1t 2)
	echo "| engine single thread >= 10 M ops/s (engine) | ${e1:-NA} ops/s | $(verdict "${e1:-NA}" '>=' 10000000) |"
	es=$(fmt2 "$(tsv_get "$RES/engine.tsv" scale_2t 2)")
	echo "| engine 2 threads, own semaphores >= 1.7x one thread (engine) | ${es:-NA}x | $(verdict "${es:-NA}" '>=' 1.7) |"
	fr=$(fmt2 "$(tsv_get "$RES/fastword.tsv" ratio_fast_undo 2)")
	echo "| (the fast path's protocol alone, before any library: fw_try with SEM_UNDO against the kernel's semop with SEM_UNDO, uncontended; fastword) | ${fr:-NA}x | information |"
	e2=$(tsv_get "$RES/engine.tsv" ops_2t 2)
	g2=$(tsv_get "$RES/engine_global.tsv" ops_2t 2)
	pg=$(ratio "${e2:-}" "${g2:-}")
	echo "| per-semaphore >= 1.7x whole-set locking at S = T = 2 (engine, both builds) | ${pg}x | $(verdict "$pg" '>=' 1.7) |"
	if [ "$MODE" = full ]; then
		sr=$(awk -F'\t' '$1 == "semvisor-run" && $2 == "S=T" && $3 == 2 { print $5; exit }' "$RES/semop_multi.tsv" 2>/dev/null)
		sg=$(awk -F'\t' '$1 == "semvisor-run-global" && $2 == "S=T" && $3 == 2 { print $5; exit }' "$RES/semop_multi.tsv" 2>/dev/null)
		sq=$(ratio "${sr:-}" "${sg:-}")
		echo "| the same through semvisor-run (semop_multi, T = S = 2) | ${sq}x | $(verdict "$sq" '>=' 1.7) |"
	fi
	for k in 1 2; do
		cc=$(tsv_get "$RES/counters.tsv" "ops_${k}t" 4)
		echo "| statistics cost <= 3%: engine, $k thread(s), vs a COUNTERS=off build, in turns (counters) | ${cc:-NA}% | $(verdict "${cc:-NA}" '<=' 3) |"
	done
	bs=$(tsv_get "$RES/engine.tsv" bytes_per_sem_32000 2)
	echo "| engine <= 64 B per semaphore (engine, growing one set from 1 to 32000 semaphores) | ${bs:-NA} B | $(verdict "${bs:-NA}" '<=' 64) |"
	for k in sets:"32000 sets of 1 semaphore" sems:"a set of 32000 semaphores"; do
		bm=$(tsv_get "$RES/engine.tsv" "mib_32000_${k%%:*}" 2)
		echo "| engine ${k#*:} within 8 MiB, namespace included (engine) | ${bm:-NA} MiB | $(verdict "${bm:-NA}" '<=' 8) |"
	done
	# the fast path on the lock/unlock workload: below native alone, within 2x where it contends
	l1=$(awk -F'\t' '$1 == "semvisor-run-fast" && $2 == 1 { printf "%.2f", $8; exit }' "$RES/lockunlock.tsv" 2>/dev/null)
	echo "| semvisor-run --fast uncontended below native (lockunlock, P = 1) | ${l1:-NA}x | $(verdict "${l1:-NA}" '<=' 0.99) |"
	lc=$(awk -F'\t' '$1 == "semvisor-run-fast" && $2 > 1 && $8 > m { m = $8 } END { if (m) printf "%.2f", m; else print "NA" }' "$RES/lockunlock.tsv" 2>/dev/null)
	echo "| semvisor-run --fast contended within 2x native: the worst P > 1 (lockunlock) | ${lc:-NA}x | $(verdict "${lc:-NA}" '<=' 2.0) |"
	bf=$(awk -F'\t' '$1 == "semvisor-run-fast" && $8 > m { m = $8 } END { if (m) printf "%.2f", m; else print "NA" }' "$RES/bulkwake.tsv" 2>/dev/null)
	echo "| semvisor-run --fast wake-ups within 2x native: the worst N (bulkwake) | ${bf:-NA}x | $(verdict "${bf:-NA}" '<=' 2.0) |"
	bl=$(awk -F'\t' '$1 == "semvisor-run" && $2 == 1000 { a = $3 } $1 == "semvisor-run" && $2 == 4000 { b = $3 } END { if (a > 0 && b > 0) printf "%.2f", b / a; else print "NA" }' "$RES/bulkwake.tsv" 2>/dev/null)
	echo "| bulk wake-up linear under semvisor-run: last(4000) <= 4.5x last(1000) (bulkwake) | ${bl}x | $(verdict "$bl" '<=' 4.5) |"
	for c in sets bigset waiters; do
		x=$(awk -F'\t' -v c="$c" '$1 == "semvisor-run" && $2 == c { printf "%.2f", $7; exit }' "$RES/scale.tsv" 2>/dev/null)
		echo "| scale under semvisor-run, $c: per call <= 1.2x the small case (scale) | ${x:-NA}x | $(verdict "${x:-NA}" '<=' 1.2) |"
	done
	lr=$(tsv_get "$RES/listeners.tsv" ratio 2)
	echo "| semvisord with 100 clients attached: per call <= 1.2x one client (listeners) | ${lr:-NA}x | $(verdict "${lr:-NA}" '<=' 1.2) |"
	# p99 loaded over p99 alone, column 8 of the row's "loaded" line
	tp99() { awk -F'\t' -v r="$1" '$1 == r && $2 == "loaded" { print $8; exit }' "$RES/tenants.tsv" 2>/dev/null; }
	if [ "$SEMVISORD" != none ]; then
		td=$(fmt2 "$(tp99 semvisord)")
		echo "| semvisord: a victim's semop p99 beside 2 greedy tenants (SETALL+GETALL on 32000 semaphores, other uids) <= 3x its p99 alone (tenants) | ${td}x | $(verdict "$td" '<=' 3) |"
	fi
	if [ "$SEMVISORD" != none ]; then
		# --fast beside greedy tenants: the victim's loaded p99 against the kernel's loaded p99
		tf=$(awk -F'\t' '$2 == "loaded" && $1 == "native" { n = $4 } $2 == "loaded" && $1 == "semvisord-fast" { f = $4 } END { if (n > 0 && f > 0) printf "%.2f", f / n; else print "NA" }' "$RES/tenants.tsv" 2>/dev/null)
		echo "| semvisord --fast: a victim's semop p99 beside 2 greedy tenants within 2x the kernel's p99 beside them (tenants) | ${tf}x | $(verdict "$tf" '<=' 2.0) |"
	fi
	tn=$(fmt2 "$(tp99 native)")
	echo "| (the same natively, the kernel's own figure: p99 beside 2 greedy tenants over p99 alone, tenants) | ${tn}x | information |"
	lg=$(grep -m1 '^goals:' "$TMPD/locks.out" 2>/dev/null)
	echo "| bench/locks' own goals (locks) | ${lg#goals: } | see locks |"

	section floor "floor: the cost of one semop served from user space" fence
	section floor_same "floor again, everything on one CPU (--cpu-pin=same)" fence
	section semop_multi "semop-multi: T threads, S semaphores in one set"
	echo
	echo "Engine called directly (bench/engine, no seccomp): per-semaphore locks vs the same engine built"
	echo "with LOCKING=global (every semop takes the whole set)."
	echo
	echo "| engine | per-semaphore build | whole-set build | per-semaphore / whole-set |"
	echo "|---|--:|--:|--:|"
	for k in ops_1t ops_2t scale_2t bytes_ns bytes_per_set_1sem bytes_per_sem_32000 mib_32000_sets mib_32000_sems; do
		a=$(tsv_get "$RES/engine.tsv" "$k" 2)
		b=$(tsv_get "$RES/engine_global.tsv" "$k" 2)
		u=$(tsv_get "$RES/engine.tsv" "$k" 3)
		echo "| $k ($u) | ${a:-NA} | ${b:-NA} | $(ratio "${a:-}" "${b:-}")x |"
	done
	[ -f "$RES/semop_multi.png" ] && printf '\n![semop-multi](semop_multi.png)\n'
	section lockunlock "lock/unlock: P processes, one semaphore as a mutex"
	[ -f "$RES/lockunlock.png" ] && printf '\n![lock/unlock](lockunlock.png)\n'
	section bulkwake "bulk wake-up: one call releases N waiters"
	[ -f "$RES/bulkwake.png" ] && printf '\n![bulk wake-up](bulkwake.png)\n'
	section listeners "semvisord: one client attached, then 100"
	section tenants "tenants: a victim's latency alone and beside greedy tenants"
	section scale "scale: sets, semaphores, parked waiters"
	section openview "openview: what --proc-view costs (every open trapped; the view itself)"
	[ -f "$TMPD/restart.cmd" ] &&
		section restart "restart: semvisord restarted with sets and parked calls (fd store)"
	[ -f "$RES/scale.png" ] && printf '\n![scale](scale.png)\n'
	section engine "engine, per-semaphore locking (bench/engine)" fence
	section engine_global "engine, whole-set locking (LOCKING=global build)" fence
	section counters "counters: what the statistics cost (bench/counters.sh)" fence
	section locks "locks: the adaptive mutex against the alternatives (bench/locks)" fence
	[ -f "$RES/locks.png" ] && printf '\n![locks](locks.png)\n'
	if [ -s "$TMPD/semvisord.log" ]; then
		echo
		echo "## semvisord's log during the run"
		echo
		head -n 40 "$TMPD/semvisord.log" >"$TMPD/semvisord.head"
		code_block "$TMPD/semvisord.head"
	fi
} >"$TMPD/report.md"

mv "$TMPD/report.md" "$RES/latest.md" || die "cannot write $RES/latest.md"
echo "bench/run.sh: wrote $RES/latest.md ($((END_S - START_S)) s of measurement)" >&2
if [ "${#FAILED[@]}" -gt 0 ]; then
	echo "bench/run.sh: FAILED: ${FAILED[*]}" >&2
	exit 1
fi
exit 0
