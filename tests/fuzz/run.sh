#!/bin/sh
# Build every libFuzzer target in tests/fuzz (*_fuzz.c) and run each for SECONDS (default 30).
# Exits non-zero if a target fails to build, crashes, leaks, trips a sanitizer or an invariant
# check, or hangs on one input; the input that did it is left in $O/fuzz/artifacts/<target>/.
#
# Usage: tests/fuzz/run.sh [SECONDS]        (from anywhere; O=build, CLANG=clang by default)
#
# Each target <name>_fuzz.c is linked with the whole server library, built once with the
# fuzzer's instrumentation and sanitizers (make SAN=fuzz, into $O/fuzz/lib): the linker takes
# what the target calls, so a target never lists sources that a change to the server can
# outgrow. Each runs on a scratch corpus seeded from tests/fuzz/corpus/<name>/ (the seeds in
# git are only read), with tests/fuzz/<name>.dict, or the dictionary of its prefix up to the
# first "_", when there is one.
set -u
cd "$(dirname "$0")/../.."
secs=${1:-30}
O=${O:-build}
CLANG=${CLANG:-clang}
out="$O/fuzz"
mkdir -p "$out"

case "$secs" in
'' | *[!0-9]*)
	echo "usage: $0 [SECONDS]" >&2
	exit 2
	;;
esac

lib="$out/lib"
if ! ${MAKE:-make} -s SAN=fuzz CC="$CLANG" O="$lib" "$lib/libsemvisor.a"; then
	echo "fuzz: the instrumented library did not build" >&2
	exit 1
fi
# The libraries the server library needs, as the Makefile links every other program with them.
libs=$(${MAKE:-make} -s --no-print-directory print-libs)

fail=0
for src in tests/fuzz/*_fuzz.c; do
	[ -e "$src" ] || continue
	name=$(basename "$src" _fuzz.c)
	bin="$out/${name}_fuzz"
	# -fno-sanitize-recover: undefined behaviour is a crash, not a line in the log.
	# $libs is a list of options: split on purpose.
	# shellcheck disable=SC2086
	if ! "$CLANG" -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -fno-sanitize=pointer-overflow -Wall -Wextra \
		-Wshadow -Wmissing-prototypes -Wformat=2 -I. -Iserver -I"$lib/proto" -D_GNU_SOURCE \
		-o "$bin" "$src" "$lib/libsemvisor.a" $libs; then
		echo "fuzz: $name: build failed" >&2
		fail=1
		continue
	fi

	corpus=$(mktemp -d "$out/corpus-$name.XXXXXX")
	art="$out/artifacts/$name"
	mkdir -p "$art"
	set -- "$corpus"
	[ -d "tests/fuzz/corpus/$name" ] && set -- "$@" "tests/fuzz/corpus/$name"
	dict=""
	if [ -f "tests/fuzz/$name.dict" ]; then
		dict="tests/fuzz/$name.dict"
	elif [ -f "tests/fuzz/${name%%_*}.dict" ]; then
		dict="tests/fuzz/${name%%_*}.dict"
	fi
	[ -n "$dict" ] && set -- "-dict=$dict" "$@"

	log="$out/$name.log"
	start=$(date +%s)
	if "$bin" -max_total_time="$secs" -timeout=25 -print_final_stats=1 \
		-artifact_prefix="$art/" "$@" >"$log" 2>&1; then
		printf 'fuzz: %-20s ok   %ss  %s\n' "$name" "$(($(date +%s) - start))" \
			"$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" |
				grep -Eo '[0-9]+$') executions"
	else
		printf 'fuzz: %-20s FAIL (see %s, inputs in %s)\n' "$name" "$log" "$art" >&2
		grep -E -A30 '==ERROR|runtime error|handoff.*fuzz:|deadly signal|Test unit written' \
			"$log" | head -n 60 >&2
		fail=1
	fi
	rm -rf "$corpus"
done
exit "$fail"
