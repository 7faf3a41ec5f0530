#!/bin/sh
# SPDX-License-Identifier: MIT
#
# semvisor beside PRoot's --sysvipc, the ptrace-based emulation of System V IPC that users of
# sandboxes without seccomp notification would otherwise reach for.
#
#   bench/proot.sh [BUILD]          (BUILD: the build directory, default build)
#
# PRoot with --sysvipc is the Termux fork's (Debian's proot has no such option). Give it as
#   PROOT=/path/to/proot            a built binary, or
#   PROOT_SRC=/path/to/termux-proot a checkout of https://github.com/termux/proot, built here
#                                   into BUILD/proot/ (needs libtalloc-dev), outside the tree.
# Without either, the script says so and exits 77 (skipped).
#
# Three tables, every figure from this one run:
#  1. behaviours: each program of the differential suite (tests/40-run-diff.c) run natively and
#     under semvisor-run (notification), semvisor-run --backend=ptrace and proot --sysvipc;
#     a program counts as right when its output and exit status are the native ones;
#  2. speed: bench/floor's uncontended semop under the three, and the wall time of
#     tests/prog/mutex (8 threads contending) under each, the median of 3 runs;
#  3. workloads: semop_multi, lockunlock and bulkwake --quick under each, or how they failed.
# The tables go to standard output and to BUILD/bench/proot.md.
set -u

B=${1:-build}
RUN=$B/semvisor-run
PROG=$B/tests/prog
OUT=$B/bench/proot.md

if [ -z "${PROOT:-}" ] && [ -n "${PROOT_SRC:-}" ]; then
	mkdir -p "$B/proot" || exit 1
	rm -rf "$B/proot/src" && cp -r "$PROOT_SRC" "$B/proot/src" || exit 1
	if ! make -C "$B/proot/src/src" >"$B/proot/build.log" 2>&1; then
		echo "proot.sh: building PRoot failed; see $B/proot/build.log" >&2
		exit 1
	fi
	PROOT=$B/proot/src/src/proot
fi
if [ -z "${PROOT:-}" ] || ! "$PROOT" --help 2>&1 | grep -q -- --sysvipc; then
	echo "proot.sh: no PRoot with --sysvipc (set PROOT= or PROOT_SRC=; see the head of $0)" >&2
	exit 77
fi
for f in "$RUN" "$B/bench/floor" "$PROG/mutex"; do
	[ -x "$f" ] || { echo "proot.sh: $f is missing: make all tests bench first" >&2; exit 1; }
done
PROOT=$(realpath "$PROOT")

# PRoot's commit, when its checkout (PROOT_SRC, or the one PROOT was built in: src/proot) is
# a git work tree of its own, not a directory inside another one's.
proot_commit() {
	d=${PROOT_SRC:-$(dirname "$(dirname "$PROOT")")}
	d=$(realpath "$d")
	if [ "$(git -C "$d" rev-parse --show-toplevel 2>/dev/null)" = "$d" ]; then
		git -C "$d" log -1 --format='commit %h'
	else
		echo "(commit unknown: $d is no git checkout)"
	fi
}

# The differential suite's programs, with their arguments (tests/40-run-diff.c).
PROGS="semctl perms keyed undo exec-vm undo-timing undo-unshare wake complex timeout eintr
eintr-retry eintr-nosleep killed rmid pidns mutex:20000 syscalls static-syscalls sysctl"

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# run WAY PROG ARGS...: the program's output and exit status, into $tmp/WAY.
run() {
	way=$1
	shift
	case $way in
	native) set -- "$@" ;;
	notify) set -- "$RUN" --backend=notify -- "$@" ;;
	ptrace) set -- "$RUN" --backend=ptrace -- "$@" ;;
	proot) set -- "$PROOT" --sysvipc "$@" ;;
	esac
	# a fresh IPC namespace each, as the differential suite runs them: ids start at 0
	timeout 120 unshare --ipc "$@" >"$tmp/$way" 2>/dev/null </dev/null
	echo "exit $?" >>"$tmp/$way"
}

WAYS="notify ptrace proot"
right_notify=0 right_ptrace=0 right_proot=0 total=0
rows=""
for p in $PROGS; do
	name=${p%%:*}
	args=$(echo "$p" | sed -n 's/^[^:]*://p')
	total=$((total + 1))
	# shellcheck disable=SC2086 # the arguments are words
	run native "$PROG/$name" $args
	row="| $name |"
	for w in $WAYS; do
		# shellcheck disable=SC2086
		run "$w" "$PROG/$name" $args
		if cmp -s "$tmp/native" "$tmp/$w"; then
			row="$row same |"
			eval "right_$w=\$((right_$w + 1))"
		else
			row="$row differs |"
		fi
	done
	rows="$rows$row
"
done

# The median of three wall times (ms) of WAY running mutex; a run that fails is said instead.
mutex_time() {
	times=""
	for _ in 1 2 3; do
		s=$(date +%s%N)
		run "$1" "$PROG/mutex" 4000
		e=$(date +%s%N)
		st=$(tail -n 1 "$tmp/$1")
		if [ "$st" != "exit 0" ]; then
			echo "failed ($st)"
			return
		fi
		times="$times $(((e - s) / 1000000))"
	done
	# shellcheck disable=SC2086 # one word per time
	printf '%s\n' $times | sort -n | sed -n 2p
}

# workload W ROW: W --quick (bench/) natively and under ROW alone, in $tmp/W.ROW.tsv; its exit
# status, 124 when it did not finish within three minutes (a waiter never woken, say).
workload() {
	w=$1 r=$2
	case $r in
	notify) set -- --run-under=semvisor-run "$RUN" --backend=notify -- ;;
	ptrace) set -- --run-under=semvisor-run-ptrace "$RUN" --backend=ptrace -- ;;
	proot) set -- --run-under=proot "$PROOT" --sysvipc ;; # proot takes no --
	esac
	timeout -s KILL 180 "$B/bench/$w" --quick --out "$tmp/$w.$r.tsv" "$@" \
		>"$tmp/$w.$r.out" 2>&1 </dev/null
}
# A workload's headline figure for ROW from its tsv: semop_multi ops/s at T = S = 1 and 8,
# lockunlock seconds at P = 1 and 8, bulkwake microseconds to the last of 1000 waiters.
headline() {
	awk -F'\t' -v w="$1" -v r="$2" '$1 != r { next }
		w == "semop_multi" && $2 == "S=1" && $3 == 1 { a = $5 }
		w == "semop_multi" && $2 == "S=T" && $3 == 8 { b = $5 }
		w == "lockunlock" && $2 == 1 { a = $4 }
		w == "lockunlock" && $2 == 8 { b = $4 }
		w == "bulkwake" && $2 == 1000 { a = $3; b = "-" }
		END { printf "%s / %s", a == "" ? "?" : a, b == "" ? "?" : b }' "$3"
}
wl_rows=""
for w in semop_multi lockunlock bulkwake; do
	native=""
	row="| $w |"
	for r in notify ptrace proot; do
		workload "$w" "$r"
		rc=$?
		label=$r
		[ "$r" = notify ] && label=semvisor-run
		[ "$r" = ptrace ] && label=semvisor-run-ptrace
		if [ -z "$native" ] && [ -s "$tmp/$w.$r.tsv" ]; then
			native=$(headline "$w" native "$tmp/$w.$r.tsv")
			row="| $w | $native |"
		fi
		if [ "$rc" -eq 0 ]; then
			row="$row $(headline "$w" "$label" "$tmp/$w.$r.tsv") |"
		elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			row="$row did not finish in 180 s |"
		else
			# the target's own words on what was wrong, else any error
			why=$(grep -m1 -i 'expected\|error\|unknown' "$tmp/$w.$r.out" | cut -c1-100)
			row="$row failed (exit $rc${why:+: $why}) |"
		fi
	done
	[ -n "$native" ] || row="| $w | ? |${row#"| $w |"}"
	wl_rows="$wl_rows$row
"
done

floor=$("$B/bench/floor" --quick \
	--run-under=semvisor-run "$RUN" --backend=notify -- \
	--run-under=semvisor-run-ptrace "$RUN" --backend=ptrace -- \
	--run-under=proot "$PROOT" --sysvipc 2>&1)
us() { echo "$floor" | awk -v r="$1" '$1 == r { print $3 }'; }

{
	echo "# semvisor beside PRoot --sysvipc"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); $(nproc) CPUs; kernel $(uname -r)"
	echo "- produced by: \`bench/proot.sh $B\` with PRoot $(proot_commit)"
	echo
	echo "## Behaviours: the differential suite's programs, output and exit status against native"
	echo
	echo "| program | semvisor-run | semvisor-run --backend=ptrace | proot --sysvipc |"
	echo "|---|---|---|---|"
	printf '%s' "$rows"
	echo "| **right** | **$right_notify of $total** | **$right_ptrace of $total** | **$right_proot of $total** |"
	echo
	echo "## Speed"
	echo
	echo "| row | uncontended semop (µs, bench/floor --quick) | mutex 4000, 8 threads (ms, median of 3) |"
	echo "|---|---|---|"
	echo "| native | $(us native) | $(mutex_time native) |"
	echo "| semvisor-run | $(us semvisor-run) | $(mutex_time notify) |"
	echo "| semvisor-run --backend=ptrace | $(us semvisor-run-ptrace) | $(mutex_time ptrace) |"
	echo "| bare ptrace stop | $(us ptrace) | |"
	echo "| proot --sysvipc | $(us proot) | $(mutex_time proot) |"
	echo
	echo "## Workloads (bench/ programs, --quick; each row run with native beside it)"
	echo
	echo "semop_multi: ops/s at T = S = 1 / T = S = 8 (higher is better); lockunlock: seconds at"
	echo "P = 1 / P = 8; bulkwake: µs until the last of 1000 waiters runs. A program that finds a"
	echo "wrong result (a counter off, GETNCNT failing) exits non-zero: \"failed\"."
	echo
	echo "| workload | native | semvisor-run | semvisor-run --backend=ptrace | proot --sysvipc |"
	echo "|---|---|---|---|---|"
	printf '%s' "$wl_rows"
} | tee "$OUT"
