#!/bin/sh
# Run one spin check of a Promela model and judge its outcome.
#
#   [MODEL=file.pml] run-pan.sh NAME EXPECT "SPIN_DEFS" "PAN_CFLAGS" "PAN_ARGS"
#
# MODEL: the model, in the current directory (default amutex.pml).
#
# EXPECT: pass         no error at all
#         assert:TEXT  the first error is an assertion whose text contains TEXT
#         invalid-end  the first error is an invalid end state (a deadlock)
# Works in ./pan-NAME/; prints one line, plus the trail's queue events when an error is expected.
# Exit status 0 when the outcome is the expected one.
set -eu
name=$1 expect=$2 spindefs=$3 cflags=$4 panargs=$5
MODEL=${MODEL:-amutex.pml}
SPIN=${SPIN:-spin}
PANCC=${PANCC:-gcc}
dir=pan-$name
rm -rf "$dir"
mkdir "$dir"
cp "$MODEL" "$dir/"
cd "$dir"
start=$(date +%s)
# shellcheck disable=SC2086
$SPIN -a $spindefs "$MODEL" >spin.log 2>&1 || { cat spin.log; echo "FAIL $name: spin -a"; exit 1; }
# pan.c is generated code: its warnings are not ours.
# shellcheck disable=SC2086
$PANCC -O2 -w $cflags -o pan pan.c >cc.log 2>&1 || { cat cc.log; echo "FAIL $name: cc pan.c"; exit 1; }
# shellcheck disable=SC2086
./pan $panargs >pan.log 2>&1 || true
secs=$(($(date +%s) - start))

errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.log | head -1)
states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.log | head -1)
first=$(grep -m1 '^pan:1:' pan.log || true)
# An exhaustive run cut short would otherwise report "errors: 0".
if grep -q 'max search depth too small' pan.log; then
	echo "FAIL $name: search depth too small (raise -m)"
	exit 1
fi
if grep -qiE 'reached -DMEMLIM|out of memory' pan.log; then
	echo "FAIL $name: ran out of memory (raise -DMEMLIM in the Makefile, or add memory)"
	exit 1
fi
if [ -z "$errors" ]; then
	cat pan.log
	echo "FAIL $name: no verdict from pan"
	exit 1
fi

ok=no
case $expect in
pass) [ "$errors" = 0 ] && ok=yes ;;
invalid-end) [ "$errors" != 0 ] && echo "$first" | grep -q 'invalid end state' && ok=yes ;;
assert:*)
	text=${expect#assert:}
	[ "$errors" != 0 ] && echo "$first" | grep -q 'assertion violated' &&
		echo "$first" | grep -qF "$text" && ok=yes ;;
*) echo "run-pan.sh: bad EXPECT $expect"; exit 2 ;;
esac

summary="$name: $states states, $errors errors, ${secs}s"
[ -n "$first" ] && summary="$summary -- ${first#pan:1: }"
if [ $ok = yes ]; then
	echo "ok   $summary"
else
	echo "FAIL $summary (expected $expect)"
	tail -n 25 pan.log
fi
if [ "$expect" != pass ] && [ -f "$MODEL.trail" ]; then
	# The queue events of the trail (P<thread>:<step>), in order.
	# shellcheck disable=SC2086
	events=$($SPIN -t $spindefs "$MODEL" 2>/dev/null | grep -o 'P[0-9]:[A-Za-z?(-]*' | tr '\n' ' ')
	[ -n "$events" ] && echo "     trail: $events"
fi
[ $ok = yes ]
