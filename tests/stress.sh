#!/bin/sh
# Loop the stress tests until one fails or time is up: the races they look for show up once in
# many runs, so one pass of `make test` proves little. `make stress` builds what is needed and
# runs this on the build and its debug build (random yields on the lock and engine paths).
#
# Usage: tests/stress.sh DIR...     each DIR a build directory (build, build/debug, build/tsan)
# STRESS_SECONDS: start no test run after this many seconds (default 300); a run under way ends.
# STRESS_TESTS: the test names to loop, in each DIR's tests/ (default: the lock's tests, the
# engine's stress tests and 42-run-stress, as far as DIR has them).
# TEST_JOBS: Criterion's parallelism (default 2, this machine's cores).
#
# Prints one line per test run; on a failure, that run's output, and exits 1. Exits 0 when the
# time is up with every run passed.
set -u
[ $# -gt 0 ] || set -- build
limit=${STRESS_SECONDS:-300}
start=$(date +%s)
round=0
runs=0

tests_in() {
	if [ -n "${STRESS_TESTS:-}" ]; then
		for n in $STRESS_TESTS; do
			[ -x "$1/tests/$n" ] && echo "$1/tests/$n"
		done
	else
		for t in "$1"/tests/1?-lock-* "$1"/tests/2?-engine-stress* "$1"/tests/42-run-stress; do
			case $t in *.o | *.d | *.log | *-rules) continue ;; esac
			[ -x "$t" ] && echo "$t"
		done
	fi
	return 0
}

found=0
for d in "$@"; do
	[ -n "$(tests_in "$d")" ] && found=1
done
if [ "$found" -eq 0 ]; then
	echo "stress: no stress test built in: $*" >&2
	exit 2
fi

while :; do
	round=$((round + 1))
	for d in "$@"; do
		for t in $(tests_in "$d"); do
			t0=$(date +%s)
			if [ $((t0 - start)) -ge "$limit" ] && [ "$runs" -gt 0 ]; then
				echo "stress: time is up: $runs runs ($((round - 1)) full rounds)," \
					"no failure in $((t0 - start))s"
				exit 0
			fi
			# 42-run-stress finds semvisor-run and its programs through $O.
			if O=$d "$t" --jobs "${TEST_JOBS:-2}" --short-filename >"$t.stress.log" 2>&1 &&
				! grep -qE 'SUMMARY: (Address|Leak|UndefinedBehavior|Thread)Sanitizer|runtime error:' "$t.stress.log"; then
				runs=$((runs + 1))
				printf 'round %-4d %-44s ok   (%ss)\n' "$round" "$t" "$(($(date +%s) - t0))"
			else
				printf 'round %-4d %-44s FAIL (%ss)\n' "$round" "$t" "$(($(date +%s) - t0))"
				sed 's/^/    /' "$t.stress.log" | tail -n 200
				echo "stress: $t failed in round $round after $(($(date +%s) - start))s" \
					"($runs runs passed before); its whole output: $t.stress.log"
				exit 1
			fi
		done
	done
done
